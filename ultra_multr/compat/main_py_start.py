"""ULTRA's main.py at its start: its arguments and settings file checked, its checkpoints written atomically.

main.py parses its arguments, loads its settings file and calls
``ultra.utils.read_data`` first, for the training (or test) split; only
after reading every split does it build the learning algorithm, where our
checks ran.  A mistake main.py fails on, or silently misreads, only later
(``--batch_size 0``, ``--test_while_train``, a settings file without
``ranking_model``, a misspelt ``test_input_feed`` class or ``objective_metric``)
cost the whole read, and some of them the whole training.  The compact reader,
which is main.py's ``read_data`` (:mod:`ultra_multr.data.compact_reader`),
calls :func:`check_main_py_start` at main.py's own first call, before it
reads anything.
"""
from __future__ import annotations

import io
import os
import sys
from typing import Any, Callable

import torch

from ultra_multr.compat.early_checks import is_ultra_main_py, splits_main_py_reads
from ultra_multr.compat.runtime import check_main_flags, main_args
from ultra_multr.compat.settings_check import check_settings_file
from ultra_multr.data.checks import split_files
from ultra_multr.files import atomic_write_bytes, read_json

#: Whether :func:`check_main_py_start` has run in this process.
_STARTED = False


def check_main_py_start() -> None:
    """Under main.py, once per process, before main.py's first read of the data; elsewhere nothing.

    Refuses the arguments main.py would fail on or misread
    (:func:`~ultra_multr.compat.runtime.check_main_flags`), a settings file
    with a missing key, or a class path, metric, objective or hyper-parameter
    name main.py or the algorithm would fail on or ignore later
    (:func:`~ultra_multr.compat.settings_check.check_settings_file`), and a
    split main.py would read whose files are not there (a misspelt
    ``--valid_data_prefix``: ULTRA's reader reads nothing and fails after the
    training split's read; :func:`~ultra_multr.data.checks.split_files`), each
    named, before anything is read; then makes main.py's ranker checkpoints
    atomic (:func:`save_checkpoints_atomically`).
    """
    global _STARTED
    args = main_args()
    if args is None or _STARTED:
        return
    _STARTED = True
    check_main_flags(args=args)
    check_settings_file(read_json(args.setting_file), args.setting_file)
    for split in splits_main_py_reads(args):
        split_files(args.data_dir, split, args.click_model_dir)
    save_checkpoints_atomically()


def save_checkpoints_atomically() -> None:
    """Make the ``torch.save`` calls of ULTRA's main.py itself write atomically (other callers: as before).

    main.py saves its ranker with ``torch.save(state_dict, checkpoint_path)``:
    torch's own writer leaves a partial checkpoint on a full disk and names
    neither file nor cause.  main.py looks ``torch.save`` up when it calls
    it, so the function it finds is :func:`_atomic_main_py_save`'s: the state
    serialised in memory, then written under a temporary name and renamed
    (:func:`ultra_multr.files.atomic_write_bytes`: its ``DiskFullError``
    names the checkpoint and the cause, ENOSPC or the file-size limit, and no
    partial file is left).
    """
    if not getattr(torch.save, "ultra_multr_atomic", False):
        torch.save = _atomic_main_py_save(torch.save)


def _atomic_main_py_save(save: Callable[..., None]) -> Callable[..., None]:
    def atomic_save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        if not isinstance(f, (str, os.PathLike)) or not is_ultra_main_py(sys._getframe(1).f_code.co_filename):
            save(obj, f, *args, **kwargs)
            return
        buffer = io.BytesIO()
        save(obj, buffer, *args, **kwargs)
        atomic_write_bytes(os.fspath(f), buffer.getvalue())

    atomic_save.ultra_multr_atomic = True  # type: ignore[attr-defined]
    return atomic_save
