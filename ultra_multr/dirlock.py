"""A lock file that gives one process a folder: the runner's output folder, main.py's model dir.

The file (created exclusively) holds ``{"pid", "host", "started"}``.  A lock
held by a live pid, or by a pid on another host (which this host cannot
check), is refused with a message naming the holder; a lock of a dead pid on
this host is stale (its process was killed before it could remove it) and is
taken over with a warning that says so.  The process holding a lock may take
it again.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import time
from typing import Any, Dict

logger = logging.getLogger(__name__)


class DirLockError(RuntimeError):
    """Another process holds the folder; the message names its pid, host and start time."""


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class DirLock:
    """``path``: one ``holder`` (e.g. "runner") at a time (a context manager, or :meth:`acquire` / :meth:`release`).

    Args:
        path: the lock file; its folder is created if missing.
        holder: what holds such a lock, for the messages ("runner", "main.py training").
    """

    def __init__(self, path: str, holder: str) -> None:
        self.path = path
        self.holder = holder
        self.me = {"pid": os.getpid(), "host": socket.gethostname()}

    def acquire(self) -> "DirLock":
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder.get("pid") == self.me["pid"] and holder.get("host") == self.me["host"]:
                    return self  # this process holds it already
                if holder.get("host") == self.me["host"] and isinstance(holder.get("pid"), int) \
                        and not pid_alive(holder["pid"]):
                    logger.warning(
                        "%s: taking over the stale lock of pid %d on %s since %s (no longer running)",
                        self.path, holder["pid"], holder["host"], holder.get("started"),
                    )
                    os.remove(self.path)
                    continue
                raise DirLockError(
                    "%s is in use by another %s: pid %s on host %s since %s (remove %s only if that %s is gone)"
                    % (os.path.dirname(self.path), self.holder, holder.get("pid"), holder.get("host"),
                       holder.get("started"), self.path, self.holder)
                ) from None
            with os.fdopen(fd, "w") as handle:
                json.dump({**self.me, "started": time.strftime("%Y-%m-%d %H:%M:%S")}, handle)
            return self
        raise DirLockError("%s: could not take the lock (another %s raced for it)" % (self.path, self.holder))

    def _holder(self) -> Dict[str, Any]:
        try:
            with open(self.path) as handle:
                holder = json.load(handle)
            return holder if isinstance(holder, dict) else {}
        except (OSError, json.JSONDecodeError):  # being written, or garbage
            return {}

    def release(self) -> None:
        """Remove the lock file if this process holds it."""
        holder = self._holder()
        if holder.get("pid") == self.me["pid"] and holder.get("host") == self.me["host"]:
            os.remove(self.path)

    def __enter__(self) -> "DirLock":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()
