"""Which step main.py's ranker checkpoint holds, and whether its training finished.

ULTRA's ``main.py`` saves ``<model_dir>/<learning_algorithm>.ckpt`` at some
checkpoint steps (those whose validation improved) and says nothing when a
training dies: ``--test_only`` then scores the checkpoint of an interrupted
training and exits 0.  Our algorithms record beside the checkpoint, in
``<learning_algorithm>.ckpt.progress.json`` (written atomically):

* ``checkpoint_step``: the step whose ranker the checkpoint holds, and
  ``checkpoint_sha256``, the file's hash then.  main.py saves the
  checkpoint after validating at step k and before the next call of the
  algorithm's ``train``; so at each call the algorithm looks at the
  checkpoint file (one ``os.stat``), and a changed file was saved at the
  step count it has done so far.  The process's exit looks once more (the
  last save comes right before main.py's loop ends).  A process killed
  between a save and the next call leaves a checkpoint whose hash is not
  the recorded one: ``--test_only`` then says it was saved after the
  recorded step, not which;
* ``finished``: main.py's training loop only ends by breaking out of it,
  after the step past ``--max_train_iteration`` (or on an infinite loss,
  which our algorithms refuse earlier as ``FloatingPointError``); then
  ``main()`` returns and the interpreter exits normally.  So the training
  finished when the process exits without an uncaught exception: an
  ``atexit`` handler records ``finished: true`` unless ``sys.last_value``
  (set by Python for the uncaught exception, Ctrl-C included) is there.  A
  killed process (SIGKILL, SIGTERM, out of memory) runs no handler and
  leaves ``finished: false`` from the start of the training.

``--test_only`` (:func:`report_progress`) warns when the checkpoint is that
of an unfinished training, naming the step it holds, and otherwise logs the
step.  A checkpoint without the record (trained by another program) gets a
warning that nothing can be said.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import sys
from typing import Dict, Optional, Tuple

from ultra_multr.files import atomic_write_text

LOGGER = logging.getLogger("ultra_multr")
PROGRESS_SUFFIX = ".progress.json"


def _signature(path: str) -> Optional[Tuple[int, int, int]]:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _sha256(path: str) -> Optional[str]:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


class TrainingProgress:
    """Keeps ``<checkpoint>.progress.json`` of one main.py training.

    Args:
        checkpoint: main.py's ranker checkpoint path (not written yet).
        max_train_iteration: main.py's ``--max_train_iteration`` (0: no limit).
    """

    def __init__(self, checkpoint: str, max_train_iteration: int) -> None:
        self.checkpoint = checkpoint
        self.path = checkpoint + PROGRESS_SUFFIX
        self.record: Dict = {
            "finished": False,
            "checkpoint_step": None,
            "checkpoint_sha256": None,
            "steps_done": None,
            "max_train_iteration": max_train_iteration,
        }
        self.steps_done: Optional[int] = None  # as of the last call of step()
        self._seen = _signature(checkpoint)
        self._write()
        atexit.register(self.finish)

    def _write(self) -> None:
        atomic_write_text(self.path, json.dumps(self.record, indent=1, sort_keys=True) + "\n")

    def step(self, steps_done: int) -> None:
        """Call before each update, with the number of updates done: records a checkpoint saved since."""
        self.steps_done = steps_done
        self._check_checkpoint(steps_done)

    def _check_checkpoint(self, steps_done: int) -> None:
        signature = _signature(self.checkpoint)
        if signature != self._seen:
            self._seen = signature
            self.record.update(checkpoint_step=steps_done, checkpoint_sha256=_sha256(self.checkpoint))
            self._write()

    def finish(self) -> None:
        """At the process's exit: the last checkpoint, and ``finished`` unless an exception ended main.py."""
        failed = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        steps_done = self.steps_done + 1 if self.steps_done is not None else 0  # the update after the last call
        try:
            self._check_checkpoint(steps_done)
            self.record.update(finished=failed is None, steps_done=steps_done)
            self._write()
        except OSError as error:  # e.g. the disk is full: the error that ended main.py has been printed already
            LOGGER.warning("could not record the training's progress in %s: %s", self.path, error)


def training_state(checkpoint: str) -> Tuple[Optional[bool], str]:
    """(True: a finished training's last checkpoint / False: not / None: not known, a phrase saying which)."""
    path = checkpoint + PROGRESS_SUFFIX
    try:
        with open(path) as handle:
            record = json.load(handle)
        step, finished = record.get("checkpoint_step"), record.get("finished")
    except FileNotFoundError:
        return None, "a training whose end and step are not known (no %s beside it)" % os.path.basename(path)
    except (OSError, ValueError, AttributeError) as error:
        return None, "a training whose end and step are not known (%s is unreadable: %s: %s)" % (
            path, type(error).__name__, error)
    if step is None:
        holds = "the ranker of a step that was not recorded"
    elif record.get("checkpoint_sha256") != _sha256(checkpoint):
        holds = "a file other than the one recorded at step %s (a ranker saved later, or a file replaced since)" % step
    else:
        holds = "the ranker of step %s" % step
    if finished and step is not None and holds.startswith("the ranker of step"):
        return True, "a finished training of %s steps; it holds %s" % (record.get("steps_done"), holds)
    if finished:
        return False, "a finished training of %s steps, but it holds %s" % (record.get("steps_done"), holds)
    return False, (
        "an UNFINISHED training (still running, or killed or failed before the end of its --max_train_iteration "
        "%s); it holds %s" % (record.get("max_train_iteration"), holds)
    )


def report_progress(checkpoint: str) -> None:
    """Under ``--test_only``: warn unless ``checkpoint`` is a finished training's last; say which step it holds."""
    finished, state = training_state(checkpoint)
    if finished:
        LOGGER.info("%s is the checkpoint of %s", checkpoint, state)
    else:
        LOGGER.warning("%s is the checkpoint of %s, and --test_only scores that ranker", checkpoint, state)
