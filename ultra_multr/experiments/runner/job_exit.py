"""How a ``submitit-local`` job's process ended, which submitit's local controller does not keep.

submitit's ``LocalExecutor`` starts a controller per job, which starts the job's process (``python -m
submitit.core._submit``, where :func:`.execute.execute_run` runs) and drops that process's exit status: a job
process killed by SIGKILL (``kill -9``, the kernel's out-of-memory killer) left only "no result (state
FINISHED)".  The runner therefore starts the job's process through this module (as the executor's ``python``,
:func:`wrapped_python`): it starts the command as its child, forwards SIGINT, SIGTERM and submitit's time-limit
signal to it, and when the child ends writes its pid and return code atomically to ``<job id>_<task>_exit.json``
beside the job's logs (:func:`exit_file`), then exits with the child's code (128 + the signal for a signal).
The runner reads that file for a job without a result (:func:`read_exit`).

A signal the job's own process gets (:func:`record_signal`: SIGTERM, which
submitit's handler would bypass) is recorded beside the logs too
(``<job id>_<task>_signal.json``), so that the runner's console says when a job
was signalled (:func:`read_signal`).

It dies with the controller (``PR_SET_PDEATHSIG``), and the job's process with it; a killed wrapper or
controller leaves no file: the runner then says that the job ended without an exit status, and names no signal.

Usage (by submitit's controller)::

    python -m ultra_multr.experiments.runner.job_exit JOB_FOLDER COMMAND...
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from ultra_multr.files import atomic_write_text
from ultra_multr.experiments.runner.processes import die_with_parent


def wrapped_python(folder: str, python: str = sys.executable) -> str:
    """The ``python`` of a ``LocalExecutor`` with job folder ``folder``: ``python`` started through this module."""
    return shlex.join([python, "-m", __name__, folder, python])


def exit_file(paths: Any) -> Path:
    """Where the wrapper records how the process of the job with submitit ``JobPaths`` ``paths`` ended."""
    return paths.folder / ("%s_%d_exit.json" % (paths.job_id, paths.task_id))


def read_exit(paths: Any) -> Optional[Dict[str, int]]:
    """``{"pid", "returncode"}`` of the job's process (a negative code: the signal that ended it), None without
    a record."""
    try:
        with open(exit_file(paths)) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def signal_file(paths: Any) -> Path:
    """Where the process of the job with submitit ``JobPaths`` ``paths`` records a signal it got."""
    return paths.folder / ("%s_%d_signal.json" % (paths.job_id, paths.task_id))


def record_signal(paths: Any, signum: int) -> None:
    """Record that the job's process got ``signum`` now (best effort: a full disk only loses the record)."""
    try:
        atomic_write_text(str(signal_file(paths)), json.dumps(
            {"signal": signal.Signals(signum).name, "time": time.strftime("%H:%M:%S"), "pid": os.getpid()}) + "\n")
    except OSError:
        pass


def read_signal(paths: Any) -> Optional[Dict[str, Any]]:
    """``{"signal", "time", "pid"}`` of the signal the job's process recorded, None without a record."""
    try:
        with open(signal_file(paths)) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _forward_signals(child: subprocess.Popen) -> None:
    from submitit.local.local import LocalJobEnvironment

    def forward(signum: int, frame: Any) -> None:
        child.send_signal(signum)

    for signum in {signal.SIGINT, signal.SIGTERM, LocalJobEnvironment._usr_sig()}:
        signal.signal(signum, forward)


def main(argv: List[str]) -> int:
    """Run ``argv[1:]`` for the job of folder ``argv[0]``, record how it ended; its exit code."""
    from submitit.core.utils import JobPaths

    die_with_parent()
    paths = JobPaths(argv[0], os.environ["SUBMITIT_LOCAL_JOB_ID"], int(os.environ["SUBMITIT_LOCAL_GLOBALID"]))
    child = subprocess.Popen(argv[1:], preexec_fn=die_with_parent)
    _forward_signals(child)
    code = child.wait()
    try:
        atomic_write_text(str(exit_file(paths)), json.dumps({"pid": child.pid, "returncode": code}) + "\n")
    except OSError as error:  # the job's stderr log says why the runner finds no record
        print("ultra_multr: could not record the exit status %d of pid %d: %s" % (code, child.pid, error),
              file=sys.stderr)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
