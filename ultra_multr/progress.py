"""Progress of long work with its rate and the time left (issue 27, item 7).

:class:`Progress` counts units of work (simulator steps, files of a click log,
runs of a study) and reports them in one of two ways:

* with ``tqdm`` installed (optional extra ``experiments``), a tqdm bar on
  stderr, which shows the rate and the time left itself;
* without it, a log line every ``every_s`` seconds (and at the end):
  ``<desc>: 120/1000 steps (12%), 4.1 steps/s, 0:03:34 left, 0:00:29 elapsed``.

main.py gains no dependency: tqdm is imported when present, never required.
The environment variable ``ULTRA_MULTR_PROGRESS`` chooses: ``auto`` (default:
tqdm when installed, else lines), ``lines``, ``tqdm`` or ``off``.
:meth:`Progress.text` gives the rate and time left for a caller's own log
lines (MULTR's simulator training appends it to its periodic lines).
"""
from __future__ import annotations

import logging
import os
import time
from typing import Callable, Iterable, Iterator, Optional, TypeVar

LOGGER = logging.getLogger("ultra_multr")
ENV = "ULTRA_MULTR_PROGRESS"
MODES = ("auto", "lines", "tqdm", "off")
T = TypeVar("T")


def _tqdm_class():
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def format_seconds(seconds: float) -> str:
    """``H:MM:SS`` (``?`` when unknown)."""
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return "?"
    seconds = int(round(max(seconds, 0.0)))
    return "%d:%02d:%02d" % (seconds // 3600, seconds // 60 % 60, seconds % 60)


class Progress:
    """Counts ``done`` of ``total`` units since construction and reports them (see the module docstring).

    Args:
        total: units to do (None: unknown, no time left is given).
        desc: what is counted, at the start of each line.
        unit: the unit's name in the plural ("steps", "files").
        initial: units already done (a resumed run); the rate counts only those done here.
        every_s: seconds between log lines (lines mode).
        mode: one of :data:`MODES`; None: the environment variable, else ``auto``.
        log_lines: in lines mode, write the periodic lines (False: the caller logs :meth:`text` itself).
        clock: the time source (tests).
        log: where lines go (default: the ``ultra_multr`` logger at INFO).
    """

    def __init__(self, total: Optional[int], desc: str, unit: str = "steps", initial: int = 0, every_s: float = 30.0,
                 mode: Optional[str] = None, log_lines: bool = True, clock: Callable[[], float] = time.monotonic,
                 log: Optional[Callable[[str], None]] = None) -> None:
        mode = mode or os.environ.get(ENV, "auto") or "auto"
        if mode not in MODES:
            raise ValueError("%s=%r: expected one of %s" % (ENV, mode, ", ".join(MODES)))
        self.total, self.desc, self.unit = total, desc, unit
        self.done = self.initial = int(initial)
        self.logged: Optional[int] = None  # the count the last line said
        self.every_s, self.clock = float(every_s), clock
        self.log = log or (lambda line: LOGGER.info("%s", line))
        self.start = self.last_line = clock()
        tqdm = _tqdm_class() if mode in ("auto", "tqdm") else None
        if mode == "tqdm" and tqdm is None:
            LOGGER.warning("%s=tqdm, but tqdm is not installed; progress goes to log lines", ENV)
        self.bar = tqdm(total=total, initial=initial, desc=desc, unit=unit.rstrip("s") or unit) if tqdm else None
        self.lines = self.bar is None and mode != "off" and log_lines

    def rate(self) -> float:
        """Units per second done here (0 before the first)."""
        elapsed = self.clock() - self.start
        return (self.done - self.initial) / elapsed if elapsed > 0 else 0.0

    def seconds_left(self) -> float:
        rate = self.rate()
        if self.total is None or rate <= 0:
            return float("nan")
        return max(self.total - self.done, 0) / rate

    def text(self) -> str:
        """``4.1 steps/s, 0:03:34 left, 0:00:29 elapsed`` (no time left when the total is unknown)."""
        parts = ["%.3g %s/s" % (self.rate(), self.unit)]
        if self.total is not None:
            parts.append("%s left" % format_seconds(self.seconds_left()))
        parts.append("%s elapsed" % format_seconds(self.clock() - self.start))
        return ", ".join(parts)

    def line(self) -> str:
        """The whole log line: ``desc: done/total unit (pct), rate, left, elapsed``."""
        if self.total:
            count = "%d/%d %s (%.0f%%)" % (self.done, self.total, self.unit, 100.0 * self.done / self.total)
        else:
            count = "%d %s" % (self.done, self.unit)
        return "%s: %s, %s" % (self.desc, count, self.text())

    def update(self, n: int = 1) -> None:
        """``n`` more units done."""
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.lines and self.clock() - self.last_line >= self.every_s:
            self._log_line()

    def set(self, done: int) -> None:
        """Set the count (a loop that counts its own steps)."""
        self.update(int(done) - self.done)

    def close(self) -> None:
        """End the bar, or write the last line (lines mode) unless the last line said the same count."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.lines:
            if self.logged != self.done:  # the last count not yet said
                self._log_line()
            self.lines = False

    def _log_line(self) -> None:
        self.log(self.line())
        self.last_line, self.logged = self.clock(), self.done


def progress(iterable: Iterable[T], total: Optional[int] = None, desc: str = "", unit: str = "items",
             **kwargs) -> Iterator[T]:
    """Yield from ``iterable``, reporting each item done with :class:`Progress` (``total``: default ``len``)."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    meter = Progress(total, desc, unit, **kwargs)
    try:
        for item in iterable:
            yield item
            meter.update()
    finally:
        meter.close()
