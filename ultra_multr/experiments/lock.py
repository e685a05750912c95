"""``<folder>/runner.lock``: one runner per output folder, naming its holder (pid and host)."""
from __future__ import annotations

import json
import logging
import os
import socket
import time
from typing import Any, Dict

logger = logging.getLogger(__name__)

LOCK_FILE = "runner.lock"


class RunnerLockError(RuntimeError):
    """Another runner holds the output folder; the message names its pid and host."""


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class RunnerLock:
    """``<folder>/runner.lock``: one runner per output folder (a context manager).

    The file (created exclusively) holds ``{"pid", "host", "started"}``.  A
    lock held by a live pid, or by a pid on another host (which this host
    cannot check), is refused; a lock of a dead pid on this host is stale and
    is taken over with a warning.
    """

    def __init__(self, folder: str) -> None:
        self.path = os.path.join(folder, LOCK_FILE)
        self.me = {"pid": os.getpid(), "host": socket.gethostname()}

    def __enter__(self) -> "RunnerLock":
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder.get("host") == self.me["host"] and isinstance(holder.get("pid"), int) \
                        and not pid_alive(holder["pid"]):
                    logger.warning(
                        "%s: taking over the stale lock of pid %d on %s (no longer running)",
                        self.path, holder["pid"], holder["host"],
                    )
                    os.remove(self.path)
                    continue
                raise RunnerLockError(
                    "%s is in use by another runner: pid %s on host %s since %s (remove %s only if that runner is gone)"
                    % (os.path.dirname(self.path), holder.get("pid"), holder.get("host"), holder.get("started"), self.path)
                ) from None
            with os.fdopen(fd, "w") as handle:
                json.dump({**self.me, "started": time.strftime("%Y-%m-%d %H:%M:%S")}, handle)
            return self
        raise RunnerLockError("%s: could not take the lock (another runner raced for it)" % self.path)

    def _holder(self) -> Dict[str, Any]:
        try:
            with open(self.path) as handle:
                holder = json.load(handle)
            return holder if isinstance(holder, dict) else {}
        except (OSError, json.JSONDecodeError):  # being written, or garbage
            return {}

    def __exit__(self, *exc: Any) -> None:
        holder = self._holder()
        if holder.get("pid") == self.me["pid"] and holder.get("host") == self.me["host"]:
            os.remove(self.path)
