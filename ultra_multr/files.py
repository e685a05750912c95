"""Files written safely and folders held by one process: the ground floor every writer of ours uses.

* Atomic writes: every file goes to a temporary name in its folder and is
  renamed into place, so an interrupted run never leaves a half-written file;
  a full disk, or the process's file-size limit, is reported naming the file (:class:`DiskFullError`).
* :class:`DirLock`: a lock file that gives one process a folder (the runner's
  output folder, main.py's model dir).  The file (created exclusively) holds
  ``{"pid", "host", "started"}``.  A lock held by a live pid, or by a pid on
  another host (which this host cannot check), is refused with a message
  naming the holder; a lock of a dead pid on this host is stale (its process
  was killed before it could remove it) and is taken over with a warning that
  says so.  The process holding a lock may take it again.
* :func:`read_json`: a JSON settings or config file, failing with the file's
  name, line and column.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import resource
import socket
import tempfile
import time
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Dict, Iterator, Sequence, TextIO

logger = logging.getLogger(__name__)


class DiskFullError(OSError):
    """A file could not be written for lack of room (ENOSPC / EDQUOT: the disk; EFBIG: the process's file-size
    limit); the message names the file and the cause."""


#: The errnos of a write that found no room: the disk or a quota is full, or the file-size limit is reached.
NO_ROOM_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _free_bytes(directory: str) -> int:
    stat = os.statvfs(directory)
    return stat.f_bavail * stat.f_frsize


def no_room_cause(error_number: int, directory: str) -> str:
    """Why a write into ``directory`` failed with ``error_number`` (one of :data:`NO_ROOM_ERRNOS`), in words.

    ENOSPC / EDQUOT: the free space of the file system (read now, before a partial file goes); EFBIG: the
    process's file-size limit (``RLIMIT_FSIZE``, ``ulimit -f``), which a write past it meets on any disk.
    """
    if error_number == errno.EFBIG:
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        return "a file may not grow past this process's file-size limit (RLIMIT_FSIZE, ulimit -f): %s" % (
            "unlimited now" if limit == resource.RLIM_INFINITY else "%d bytes" % limit)
    try:
        return "the disk is full: %d bytes free on its file system when the write failed" % _free_bytes(directory)
    except OSError:
        return "the disk is full"


def atomic_write_file(path: str, write: Callable[[str], None]) -> None:
    """Have ``write(temporary_path)`` produce the file, then rename it to ``path``.

    The temporary file sits in the same directory (so the rename is atomic)
    and gets the permissions a plain ``open`` would give; on any error it is
    removed and ``path`` is left as it was.

    Raises:
        DiskFullError: ``write`` failed with ENOSPC, EDQUOT or EFBIG (a bare
            "[Errno 28] No space left on device" or "[Errno 27] File too large"
            names no file); the message names ``path`` and the cause
            (:func:`no_room_cause`).  Writers that do not
            report errno (torch.save's C++ writer says "basic_ios::clear:
            iostream error" or "unexpected pos") should write bytes made in
            memory instead (:func:`atomic_write_bytes`).
    """
    with _temporary_path(path) as tmp_path:
        write(tmp_path)


@contextmanager
def _temporary_path(path: str) -> Iterator[str]:
    """A temporary name beside ``path``, renamed to ``path`` when the block succeeds (removed if it fails)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    # Keep the extension: torch.save names its archive after the file name.
    fd, tmp_path = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.splitext(path)[1], dir=directory)
    os.close(fd)
    try:
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp creates files 0600
        yield tmp_path
        os.replace(tmp_path, path)
    except BaseException as error:
        full = isinstance(error, OSError) and error.errno in NO_ROOM_ERRNOS
        cause = no_room_cause(error.errno, directory) if full else None  # before the partial file goes
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        if full:
            raise DiskFullError(error.errno, "%s (%s)" % (os.strerror(error.errno), cause), path) from error
        raise


def atomic_write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (see :func:`atomic_write_file`)."""

    def write(tmp_path: str) -> None:
        with open(tmp_path, "wb") as handle:
            handle.write(data)

    atomic_write_file(path, write)


@contextmanager
def atomic_text_writers(paths: Sequence[str]) -> Iterator[Dict[str, TextIO]]:
    """Text handles (path -> handle) to write several files in streaming chunks.

    Each file is written under a temporary name; all are renamed into place
    when the block succeeds, and none is left behind when it fails.
    """
    with ExitStack() as stack:
        handles = {}
        for path in paths:
            tmp_path = stack.enter_context(_temporary_path(path))
            handles[path] = stack.enter_context(open(tmp_path, "w"))
        yield handles  # on leaving, each handle is closed before its file is renamed


def atomic_write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""

    def write(tmp_path: str) -> None:
        with open(tmp_path, "w") as handle:
            handle.write(text)

    atomic_write_file(path, write)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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


class JsonFileError(ValueError):
    """A settings or config file is missing or not valid JSON; the message names the file."""


def read_json(path: str, what: str = "settings file") -> Any:
    """The parsed content of ``path``.

    Raises:
        JsonFileError: ``path`` cannot be read or is not valid JSON (names the
            file, line and column).
    """
    try:
        with open(path) as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise JsonFileError(
            "%s %s is not valid JSON: line %d column %d: %s" % (what, path, error.lineno, error.colno, error.msg)
        ) from None
    except OSError as error:
        raise JsonFileError("%s %s cannot be read: %s" % (what, path, error.strerror or error)) from None
