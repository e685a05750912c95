"""Execute one run in its folder: each step (main.py, evaluation) as a subprocess with its thread count."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from typing import Any, Dict, Mapping, Optional

from ..data.ultra_format import atomic_write_text
from ..session_budget import read_summary as read_session_budget
from .evaluate import PER_QUERY_CSV
from .processes import CHILDREN, STEP_FILE, kill_group, kill_leftover_step
from .runs import DONE_FILE, FAILED_FILE, RUN_FILE, SETTINGS_FILE, CommandFactory, RunSpec


def resolve_threads(workers: int, threads: Optional[int] = None, environ: Mapping[str, str] = os.environ) -> int:
    """Threads per subprocess: ``threads`` if given, else ``$OMP_NUM_THREADS``, else cores // workers."""
    if threads is not None:
        if threads < 1:
            raise ValueError("--threads must be >= 1, got %d" % threads)
        return threads
    configured = environ.get("OMP_NUM_THREADS", "").strip()
    if configured:
        try:
            value = int(configured)
        except ValueError:
            raise ValueError("OMP_NUM_THREADS=%r is not an integer" % configured) from None
        if value < 1:
            raise ValueError("OMP_NUM_THREADS=%r must be >= 1" % configured)
        return value
    return max(1, (os.cpu_count() or 1) // workers)


def thread_env(threads: int, seed: int) -> Dict[str, str]:
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = str(threads)
    env["PYTHONHASHSEED"] = str(seed)
    return env


def _tail(path: str, lines: int = 20) -> str:
    with open(path, errors="replace") as handle:
        return "".join(handle.readlines()[-lines:])


def write_failure(run_dir: str, reason: str, **details: Any) -> None:
    """``<run_dir>/failed.json``: the reason and what explains it (a step's argv and stderr tail, or a traceback)."""
    os.makedirs(run_dir, exist_ok=True)
    atomic_write_text(os.path.join(run_dir, FAILED_FILE), json.dumps({"reason": reason, **details}, indent=1) + "\n")


def execute_run(run: RunSpec, commands: CommandFactory, threads: int) -> Optional[str]:
    """Run one pending run; returns None on success, else a one-line reason."""
    if os.path.isdir(run.run_dir):  # left over from an interrupted or failed attempt
        kill_leftover_step(run.run_dir)
        shutil.rmtree(run.run_dir)
    os.makedirs(run.run_dir)
    atomic_write_text(os.path.join(run.run_dir, SETTINGS_FILE), json.dumps(run.settings, indent=1) + "\n")
    atomic_write_text(
        os.path.join(run.run_dir, RUN_FILE),
        json.dumps({**run.info, "fingerprint": run.fingerprint, "main_args": run.main_args}, indent=1) + "\n",
    )
    started = time.time()
    timings = {}
    for step, argv in commands(run):
        step_start = time.time()
        out_path = os.path.join(run.run_dir, step + ".stdout")
        err_path = os.path.join(run.run_dir, step + ".stderr")
        with open(out_path, "w") as out, open(err_path, "w") as err:
            process = CHILDREN.start(
                argv, cwd=run.run_dir, env=thread_env(threads, run.seed), stdout=out, stderr=err, stdin=subprocess.DEVNULL
            )
            try:
                atomic_write_text(
                    os.path.join(run.run_dir, STEP_FILE),
                    json.dumps({"step": step, "pgid": process.pid, "host": socket.gethostname()}) + "\n",
                )
                code = process.wait()
            finally:
                if process.poll() is None:
                    kill_group(process.pid)
                CHILDREN.finished(process)
        os.remove(os.path.join(run.run_dir, STEP_FILE))
        timings[step] = round(time.time() - step_start, 2)
        if code != 0:
            reason = "step %r exited with code %d (see %s)" % (step, code, err_path)
            write_failure(run.run_dir, reason, argv=argv, stderr_tail=_tail(err_path))
            return reason
    if not os.path.isfile(os.path.join(run.run_dir, PER_QUERY_CSV)):
        reason = "the steps finished but wrote no %s" % PER_QUERY_CSV
        write_failure(run.run_dir, reason)
        return reason
    done = {"fingerprint": run.fingerprint, "data": run.data_id, "seconds": round(time.time() - started, 2), "step_seconds": timings,
            "sessions": read_session_budget(run.run_dir)}
    atomic_write_text(os.path.join(run.run_dir, DONE_FILE), json.dumps(done, indent=1) + "\n")
    return None
