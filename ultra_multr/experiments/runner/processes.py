"""The process groups of the running steps: started so that they die with the runner, killed on a signal.

Every step runs in its own process group; SIGINT / SIGTERM to the runner kill
those groups, on Linux a child also gets SIGKILL when the runner dies
(``PR_SET_PDEATHSIG``), and a restarted runner kills a step still running in
a run folder (recorded in ``step.json``) before it wipes that folder.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable, List, Optional

from ultra_multr.experiments.runner.lock import pid_alive

logger = logging.getLogger(__name__)

#: The running step of a run folder: its process group, host and cwd.
STEP_FILE = "step.json"
#: Seconds between SIGTERM and SIGKILL when stopping a step's process group.
KILL_GRACE_S = 5.0


def _load_prctl() -> Optional[Callable[..., int]]:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl


#: Resolved in the parent, so that the forked child only makes one C call.
_PRCTL = _load_prctl()
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """On Linux, SIGKILL the calling process when the thread that started it dies: the preexec_fn of a step (its
    runner thread), and what :mod:`.job_exit`'s wrapper does first (submitit's local controller)."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, int(signal.SIGKILL))


def peak_resident_kib(pid: "int | str" = "self") -> Optional[int]:
    """A process's peak resident memory in KiB, its ``VmHWM`` (Linux; None without ``/proc`` or once it ended).

    An exec starts the mark afresh, unlike ``ru_maxrss``, which carries the forking parent's size over.
    """
    try:
        with open("/proc/%s/status" % pid) as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def how_it_ended(code: int) -> str:
    """A process's end from its return code: "exited with code N", or for a negative code (the signal that ended
    it, as ``Popen`` gives it) "was killed by signal SIGKILL (9)"."""
    if code >= 0:
        return "exited with code %d" % code
    try:
        return "was killed by signal %s (%d)" % (signal.Signals(-code).name, -code)
    except ValueError:  # a number Python has no name for
        return "was killed by signal %d" % -code


#: The recovery from a run whose step or job was killed.
RERUN_NOTE = "; run the study again to rerun this run (its finished runs are kept)"


def sigkill_note(code: int) -> str:
    """For a process killed by SIGKILL (return code -9): who sends it; else empty."""
    if code != -signal.SIGKILL:
        return ""
    return "; SIGKILL comes from a kill -9 or from the kernel's out-of-memory killer (dmesg names the processes it killed)"


def kill_group(pgid: int, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM the process group, then SIGKILL it if it is still there after ``grace_s``."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + wait
        while time.time() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


class _Children:
    """The process groups of the running steps, so that a signal can end them all."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # re-entrant: a signal handler (signal_all) may run while start() holds it
        self._groups: set = set()
        self.stopping = False

    def start(self, argv: List[str], **kwargs: Any) -> subprocess.Popen:
        with self._lock:
            if self.stopping:
                raise KeyboardInterrupt("the runner is stopping")
            process = subprocess.Popen(argv, start_new_session=True, preexec_fn=die_with_parent, **kwargs)
            self._groups.add(process.pid)
        return process

    def finished(self, process: subprocess.Popen) -> None:
        with self._lock:
            self._groups.discard(process.pid)

    def signal_all(self, signum: int) -> None:
        """Pass ``signum`` on to every running step's process group and start no step after it (a submitit job
        told to stop); does not wait (it runs in a signal handler)."""
        with self._lock:
            self.stopping = True
            groups = list(self._groups)
        for pgid in groups:
            try:
                os.killpg(pgid, signum)
            except ProcessLookupError:
                pass

    def kill_all(self) -> None:
        with self._lock:
            self.stopping = True
            groups = list(self._groups)
        for pgid in groups:
            kill_group(pgid)


CHILDREN = _Children()


def kill_leftover_step(run_dir: str) -> None:
    """Kill a step an earlier runner left running in ``run_dir`` (same host, cwd still ``run_dir``)."""
    try:
        with open(os.path.join(run_dir, STEP_FILE)) as handle:
            step = json.load(handle)
    except (OSError, json.JSONDecodeError):
        return
    pgid = step.get("pgid")
    if step.get("host") != socket.gethostname() or not isinstance(pgid, int) or not pid_alive(pgid):
        return
    try:  # the pid may have been reused: only kill a process working in this run folder
        if os.path.realpath(os.readlink("/proc/%d/cwd" % pgid)) != os.path.realpath(run_dir):
            return
    except OSError:
        return
    logger.warning("%s: killing process group %d left running by an earlier runner", run_dir, pgid)
    kill_group(pgid)

