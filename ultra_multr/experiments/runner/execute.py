"""Execute one run in its folder: each step (main.py, evaluation) as a subprocess with its thread count.

A step's stdout goes to ``<step>.stdout``; its stderr is read through a pipe
(:mod:`.stderr_copy`), copied on to ``<step>.stderr`` and its tail kept in
memory, so that a failed step's last words reach ``failed.json`` and the
runner's report even when the run folder's disk is full.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from typing import Any, Dict, Mapping, Optional

from ultra_multr.files import atomic_write_text
from ultra_multr.session_budget import read_summary as read_session_budget
from ultra_multr.experiments.evaluate import PER_QUERY_CSV
from ultra_multr.experiments.runner.processes import (
    CHILDREN, RERUN_NOTE, STEP_FILE, how_it_ended, kill_group, kill_leftover_step, peak_resident_kib, sigkill_note,
)
from ultra_multr.experiments.runner.runs import (
    DONE_FILE, FAILED_FILE, RUN_FILE, SETTINGS_FILE, CommandFactory, RunSpec, data_change, data_content,
)
from ultra_multr.experiments.runner.stderr_copy import StderrCopy

#: Lines of a failed step's stderr in the runner's report (failed.json holds up to stderr_copy.TAIL_BYTES).
REPORT_LINES = 20


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


def write_failure(run_dir: str, reason: str, **details: Any) -> str:
    """``<run_dir>/failed.json``: the reason and what explains it (a step's argv and stderr tail, or a traceback).

    Best effort (the disk may be full): returns ``reason``, followed by why
    failed.json could not be written if it could not.
    """
    try:
        os.makedirs(run_dir, exist_ok=True)
        atomic_write_text(os.path.join(run_dir, FAILED_FILE), json.dumps({"reason": reason, **details}, indent=1) + "\n")
    except OSError as error:
        return "%s; %s could not be written: %s" % (reason, FAILED_FILE, error)
    return reason


def _last_lines(text: str) -> str:
    """The last REPORT_LINES lines of a step's stderr, indented, for the runner's report."""
    if not text.strip():
        return "; its stderr was empty"
    lines = text.rstrip("\n").split("\n")[-REPORT_LINES:]
    return "; its stderr ended with:\n" + "\n".join("    " + line for line in lines)


#: Seconds between two reads of a running step's peak memory.
PEAK_MEMORY_POLL_S = 0.5


def wait_with_peak_memory(process: subprocess.Popen) -> tuple:
    """(exit code, the step's peak resident memory in MiB, or None without ``/proc``).

    The peak is the process's ``VmHWM`` (:func:`~.processes.peak_resident_kib`), read every
    :data:`PEAK_MEMORY_POLL_S` seconds while it runs: growth in its last half second is missed, and so are its
    own children.
    """
    peak_kib = None
    while True:
        found = peak_resident_kib(process.pid)
        if found is not None:
            peak_kib = max(peak_kib or 0, found)
        try:
            return process.wait(timeout=PEAK_MEMORY_POLL_S), None if peak_kib is None else round(peak_kib / 1024)
        except subprocess.TimeoutExpired:
            continue


def execute_run(run: RunSpec, commands: CommandFactory, threads: int) -> Optional[str]:
    """Run one pending run; returns None on success, else the reason (a failed step's: with its stderr's last lines)."""
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
    data_files = data_content(run)  # what the results are keyed by: the data as the steps read it
    timings, peak_mib = {}, {}
    for step, argv in commands(run):
        step_start = time.time()
        with open(os.path.join(run.run_dir, step + ".stdout"), "w") as out:  # stdout goes straight to its file
            process = CHILDREN.start(argv, cwd=run.run_dir, env=thread_env(threads, run.seed), stdout=out,
                                     stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            stderr = StderrCopy(process.stderr, os.path.join(run.run_dir, step + ".stderr"))
            atomic_write_text(
                os.path.join(run.run_dir, STEP_FILE),
                json.dumps({"step": step, "pgid": process.pid, "host": socket.gethostname()}) + "\n",
            )
            code, peak_mib[step] = wait_with_peak_memory(process)
        finally:
            if process.poll() is None:
                kill_group(process.pid)
            CHILDREN.finished(process)
        tail = stderr.finish()
        os.remove(os.path.join(run.run_dir, STEP_FILE))
        timings[step] = round(time.time() - step_start, 2)
        if code != 0:
            lacking = stderr.file_note()
            # a killed step's memory: what the out-of-memory killer went by
            memory = "; its resident memory peaked at %d MiB" % peak_mib[step] if code < 0 and peak_mib[step] else ""
            killed = sigkill_note(code) + RERUN_NOTE if code < 0 else ""
            reason = "step %r %s (its stderr: %s%s)%s" % (step, how_it_ended(code), lacking or stderr.path, memory,
                                                         killed)
            return write_failure(run.run_dir, reason, argv=argv, stderr_tail=tail) + _last_lines(tail)
    if not os.path.isfile(os.path.join(run.run_dir, PER_QUERY_CSV)):
        return write_failure(run.run_dir, "the steps finished but wrote no %s" % PER_QUERY_CSV)
    changed = data_change(data_files, data_content(run))
    if changed:  # the steps read a mix of old and new data
        return write_failure(run.run_dir, "the data changed while the run ran: %s%s" % (changed, RERUN_NOTE))
    done = {"fingerprint": run.fingerprint, "data": run.data_id, "data_files": data_files,
            "seconds": round(time.time() - started, 2), "step_seconds": timings,
            "step_peak_rss_mib": peak_mib, "sessions": read_session_budget(run.run_dir)}
    atomic_write_text(os.path.join(run.run_dir, DONE_FILE), json.dumps(done, indent=1) + "\n")
    return None
