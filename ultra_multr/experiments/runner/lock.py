"""``<folder>/runner.lock``: one runner per output folder (:mod:`ultra_multr.files`, shared with main.py's model-dir lock)."""
from __future__ import annotations

import os

from ultra_multr.files import DirLock, DirLockError, pid_alive

__all__ = ["LOCK_FILE", "RunnerLockError", "runner_lock", "pid_alive"]

LOCK_FILE = "runner.lock"
#: Another runner holds the output folder; the message names its pid, host and start time.
RunnerLockError = DirLockError


def runner_lock(folder: str) -> DirLock:
    """The lock of a runner's output folder (a context manager)."""
    return DirLock(os.path.join(folder, LOCK_FILE), "runner")
