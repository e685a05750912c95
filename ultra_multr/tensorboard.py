"""Training curves for TensorBoard: one writer per process, a no-op without one.

Under ULTRA's ``main.py`` our algorithms open the writer when training
starts (MULTR: before its simulator phase), in ``<model_dir>/train_log`` (the directory main.py's own,
empty, train writer uses; TensorBoard reads every event file there).  They
log the loss and its named parts (``train/loss``, ``train/rank_loss``, ...),
and DLA and MULTR the learned propensity per position
(``propensity/position_01`` ...).  Outside main.py nothing is written unless
:func:`open_writer` is called.

Any code may log through :func:`scalar`; e.g. the simulator trainer::

    from ultra_multr import tensorboard
    tensorboard.scalar("simulator/loss", loss, step)
    tensorboard.scalar("simulator/heldout_log_likelihood", heldout_ll, step)

Our algorithms keep returning an empty train summary to main.py
(``compat.runtime.EMPTY_SUMMARY``), which would open one writer per key per step.
"""
from __future__ import annotations

import atexit
import contextlib
import os
from typing import Dict, Iterator, Optional

_writer = None  # torch.utils.tensorboard.SummaryWriter, imported only when opened
_paused = False


def open_writer(log_dir: str):
    """Open the process's writer in ``log_dir`` (again: the same writer); closed at exit.

    Raises:
        ValueError: if a writer is already open in another directory.
    """
    global _writer
    log_dir = os.path.abspath(log_dir)
    if _writer is not None:
        if _writer.log_dir != log_dir:
            raise ValueError("a TensorBoard writer is already open in %s, not %s" % (_writer.log_dir, log_dir))
        return _writer
    from torch.utils.tensorboard import SummaryWriter

    _writer = SummaryWriter(log_dir=log_dir, flush_secs=30)
    atexit.register(close)
    return _writer


def close() -> None:
    """Flush and close the writer, if one is open."""
    global _writer
    if _writer is not None:
        _writer.close()
        _writer = None


def log_dir() -> Optional[str]:
    """Where the open writer writes; None when none is open."""
    return None if _writer is None else _writer.log_dir


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Log nothing inside the block (e.g. MULTR's pilot runs, whose steps are not the run's)."""
    global _paused
    previous, _paused = _paused, True
    try:
        yield
    finally:
        _paused = previous


def scalar(tag: str, value: float, step: int) -> None:
    """Log one value of curve ``tag`` at ``step``; does nothing when no writer is open or while paused."""
    if _writer is not None and not _paused:
        _writer.add_scalar(tag, float(value), int(step))


def scalars(prefix: str, values: Dict[str, float], step: int) -> None:
    """Log ``prefix/name`` for each item of ``values`` (no writer: nothing)."""
    for name, value in values.items():
        scalar("%s/%s" % (prefix, name), value, step)
