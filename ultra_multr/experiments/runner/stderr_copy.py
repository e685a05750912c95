"""A step's stderr, read through a pipe: copied on to its file as it arrives, its last part kept in memory.

The step's file is in its run folder, which may be on a full disk: a write
that fails (ENOSPC) is counted and the copying goes on, so output that comes
once there is room again still lands in the file, and the tail in memory
still holds the step's last words (a ``DiskFullError`` naming the file) for
``failed.json`` and the runner's report.
"""
from __future__ import annotations

import os
import threading
from typing import BinaryIO, Optional

#: Bytes of a step's stderr kept in memory.
TAIL_BYTES = 64 * 1024
#: Bytes read from the pipe at once.
CHUNK_BYTES = 64 * 1024
#: Seconds to wait, once the step has exited, for the end of its stderr (a process the step left may hold it open).
DRAIN_S = 5.0


class StderrCopy:
    """Copies ``pipe`` to the file ``path`` in a thread until end of file, keeping the last ``tail_bytes``.

    The thread owns both: it opens the file (truncating it), and closes the
    file and the pipe when the pipe ends.
    """

    def __init__(self, pipe: BinaryIO, path: str, tail_bytes: int = TAIL_BYTES) -> None:
        self.path = path
        self.lost_bytes = 0  # bytes of the stream the file lacks
        self.error: Optional[OSError] = None  # the first failed open or write of the file
        self._pipe = pipe
        self._tail_bytes = tail_bytes
        self._tail = bytearray()
        self._cut = False  # the tail lacks the stream's beginning
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._copy, name="stderr copy to %s" % path, daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        try:
            fd: Optional[int] = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        except OSError as error:
            fd, self.error = None, error
        with self._pipe:
            for chunk in iter(lambda: self._pipe.read1(CHUNK_BYTES), b""):
                with self._lock:
                    self._tail += chunk
                    if len(self._tail) > self._tail_bytes:
                        del self._tail[: len(self._tail) - self._tail_bytes]
                        self._cut = True
                self._write(fd, chunk)
        if fd is not None:
            os.close(fd)

    def _write(self, fd: Optional[int], chunk: bytes) -> None:
        view = memoryview(chunk)
        while view and fd is not None:
            try:
                view = view[os.write(fd, view):]
            except OSError as error:
                self.error = self.error or error
                break
        self.lost_bytes += len(view)

    def finish(self, timeout: float = DRAIN_S) -> str:
        """The tail (whole lines when cut), after waiting up to ``timeout`` s for the end of the stream."""
        self._thread.join(timeout)
        with self._lock:
            data, cut = bytes(self._tail), self._cut
        if cut:
            data = data[data.find(b"\n") + 1:]
        return data.decode("utf-8", errors="replace")

    def file_note(self) -> str:
        """Empty when the file holds the whole stream, else what it lacks and why."""
        if not self.lost_bytes and self.error is None:
            return ""
        return "%s lacks %d byte(s) of it: %s" % (self.path, self.lost_bytes, self.error)
