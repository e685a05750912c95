"""Where the pending runs of a study execute: the local process pool, or a submitit executor.

* ``local`` (default): a pool of ``--workers`` threads, each driving one run's
  subprocesses on this machine.
* ``slurm``: one SLURM job array for the study (submitit's ``SlurmExecutor``,
  ``map_array``); each array task executes one run on a node, with the
  resources of the config's ``"slurm"`` section (:mod:`.slurm_config`).
* ``submitit-local``: the same pickled jobs as ``slurm``, run as processes on
  this machine by submitit's ``LocalExecutor`` (all pending runs at once):
  to try the cluster path without a cluster.
* ``debug``: submitit's ``DebugExecutor``, the runs one after the other in the
  runner's own process.

Each executor yields one :data:`Outcome` per run as it completes.  A run that
raised, or whose job died (timeout, out of memory, cancelled), comes back as a
failure with the traceback or the job's log; :func:`execute_run` itself
reports a step that exited non-zero or was killed.  ``submitit-local`` starts
each job's process through :mod:`.job_exit`, which records how it ended (its
signal), since submitit's local controller does not.  In the job's process
(``submitit-local``, ``slurm``) SIGTERM is passed on to the running step
(:func:`execute_in_job`; submitit's own handler would only log "Bypassing
signal SIGTERM" and let the step run on), so the run fails naming the signal,
and the runner's console says when the job was signalled.  submitit is imported only by the
submitit executors (the ``cluster`` extra).
"""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

from ultra_multr.files import atomic_write_text
from ultra_multr.experiments.runner.execute import execute_run
from ultra_multr.experiments.runner.job_exit import read_exit, read_signal, record_signal, wrapped_python
from ultra_multr.experiments.runner.processes import CHILDREN, RERUN_NOTE, how_it_ended, sigkill_note
from ultra_multr.experiments.runner.runs import CommandFactory, RunSpec
from ultra_multr.experiments.runner.slurm_config import SlurmConfig, submitit_parameters

EXECUTORS = ("local", "submitit-local", "debug", "slurm")
#: submitit's job folders (pickled runs, logs, results), one per job, under the output folder
JOBS_DIR = "jobs"
#: (run, failure reason or None when it finished, details for failed.json: traceback, job id, job log)
Outcome = Tuple[RunSpec, Optional[str], Dict[str, Any]]
#: seconds between two looks at the submitted jobs
POLL_S = 0.5
#: seconds between two looks for the signals the jobs' processes recorded (:func:`.job_exit.read_signal`)
SIGNAL_POLL_S = 2.0
#: the job id of the last SLURM array submitted for the output folder (under JOBS_DIR)
ARRAY_FILE = "slurm_array.json"
#: seconds a finished submitit-local job's missing result file is waited for: the job wrote it on this machine's
#: disk before its process ended, so submitit's 15 s (meant for a shared file system's delay) only delays the
#: report of a job that was killed
LOCAL_RESULT_WAIT_S = 1


def run_outcomes(
    pending: Sequence[RunSpec], executor: str, commands: CommandFactory, threads: int, workers: int,
    output_dir: str, slurm: SlurmConfig, log: logging.Logger,
) -> Iterator[Outcome]:
    """Execute ``pending`` on ``executor`` (one of :data:`EXECUTORS`); yields each run's outcome as it completes."""
    if executor == "local":
        return _pool_outcomes(pending, commands, threads, workers)
    return _submitit_outcomes(pending, executor, commands, threads, os.path.join(output_dir, JOBS_DIR), slurm, log)


def _error_details(error: BaseException) -> Tuple[str, Dict[str, Any]]:
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return "%s: %s" % (type(error).__name__, error), {"traceback": text}


def _pool_outcomes(pending: Sequence[RunSpec], commands: CommandFactory, threads: int, workers: int) -> Iterator[Outcome]:
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = {pool.submit(execute_run, run, commands, threads): run for run in pending}
        for future in as_completed(futures):
            error = future.exception()  # a bug or I/O error in one run must not stop the others
            if error is None:
                yield futures[future], future.result(), {}
            else:
                reason, details = _error_details(error)
                yield futures[future], reason, details
    except BaseException:  # a signal, or the consumer stopped
        CHILDREN.kill_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def make_executor(executor: str, folder: str, slurm: SlurmConfig) -> Any:
    """The submitit executor named ``executor``, its parameters set from ``slurm``."""
    try:
        import submitit
    except ImportError as error:
        raise RuntimeError(
            "--executor %s needs submitit (%s): pip install 'ultra_multr[cluster]'" % (executor, error)
        ) from None
    if executor == "debug":
        return submitit.DebugExecutor(folder)
    if executor == "submitit-local":  # each job's process through job_exit, which records how it ended
        made = submitit.LocalExecutor(folder, python=wrapped_python(folder))
        # without gpus_per_node, LocalExecutor hides the GPUs (CUDA_VISIBLE_DEVICES="")
        made.update_parameters(timeout_min=slurm.time_min, gpus_per_node=slurm.gpus_per_node)
        return made
    made = submitit.SlurmExecutor(folder)
    made.update_parameters(**submitit_parameters(slurm))
    return made


def _without_a_result(job: Any, executor: str) -> str:
    """Why ``job`` left no result: how its process ended (``submitit-local``, :mod:`.job_exit`), else its state."""
    logs = "; its logs: %s and %s%s" % (job.paths.stderr, job.paths.stdout, RERUN_NOTE)
    if executor != "submitit-local":
        return "the job %s ended without a result (state %s)%s" % (job.job_id, job.state, logs)
    ended = read_exit(job.paths)
    if ended is None:  # its wrapper was killed too (or the controller): nothing recorded how it ended
        return ("the job %s ended without a result and without an exit status: killed (e.g. SIGKILL or the "
                "out-of-memory killer) or lost%s" % (job.job_id, logs))
    code = ended["returncode"]
    return "the process of job %s (pid %d) %s before it returned a result%s%s" % (
        job.job_id, ended["pid"], how_it_ended(code), sigkill_note(code), logs)


def _job_failure(job: Any, error: BaseException, executor: str) -> Tuple[str, Dict[str, Any]]:
    """The reason and failed.json details of a job that raised or died."""
    from submitit.core.utils import FailedJobError, UncompletedJobError

    details: Dict[str, Any] = {"job_id": job.job_id}
    details.update({"job_" + name: str(path) for name, path in (("stdout", job.paths.stdout),
                                                                 ("stderr", job.paths.stderr)) if path.exists()})
    if isinstance(error, FailedJobError):  # the job raised: its message holds the job's traceback
        trace = str(error)
        lines = [line for line in trace.split("-" * 22)[1].splitlines() if line.strip()] if "-" * 22 in trace else []
        return "the job raised %s" % (lines[-1] if lines else trace.splitlines()[0]), {**details, "traceback": trace}
    if isinstance(error, UncompletedJobError):  # killed, timed out, out of memory: no result
        return _without_a_result(job, executor), {**details, "job_log": str(error)}
    reason, more = _error_details(error)  # the debug executor hands back the exception itself
    return reason, {**details, **more}


def refuse_a_running_array(folder: str) -> None:
    """Refuse to submit while jobs of the last array submitted from ``folder`` are still queued or running.

    A runner killed without a chance to cancel its array (SIGKILL, a lost
    login session) leaves the jobs running; a new array would wipe and
    rewrite their run folders under them.
    """
    try:
        with open(os.path.join(folder, ARRAY_FILE)) as handle:
            array_id = json.load(handle)["array_id"]
    except FileNotFoundError:
        return
    # squeue fails on a job SLURM no longer knows: nothing is listed then
    try:
        queued = subprocess.run(["squeue", "--noheader", "--format=%i", "--jobs", array_id],
                                capture_output=True, text=True).stdout.split()
    except OSError as error:
        raise RuntimeError("cannot ask squeue whether array %s still runs: %s" % (array_id, error)) from None
    if queued:
        raise RuntimeError(
            "%d job(s) of the array submitted earlier for this output folder are still queued or running (%s); "
            "wait for them or cancel them (scancel %s) before running the study again"
            % (len(queued), " ".join(queued[:5]), array_id)
        )


def execute_in_job(run: RunSpec, commands: CommandFactory, threads: int) -> Optional[str]:
    """:func:`execute_run` in a submitit job's process, where SIGTERM is passed on to the running step (whose end
    then names it) and recorded for the runner's console (:func:`~.job_exit.record_signal`); no step starts after
    it.  submitit calls the job's function in the main thread, after installing its own handlers."""
    from submitit import JobEnvironment

    paths = JobEnvironment().paths

    def forward(signum: int, frame: Any) -> None:
        record_signal(paths, signum)
        CHILDREN.signal_all(signum)

    signal.signal(signal.SIGTERM, forward)
    return execute_run(run, commands, threads)


def _log_signal(job: Any, run: RunSpec, log: logging.Logger) -> bool:
    """Say on the runner's console that ``job``'s process got a signal, if it recorded one; whether it did."""
    got = read_signal(job.paths)
    if got is not None:
        log.warning("job %s (%s): its process (pid %s) got %s at %s and passed it on to the running step",
                    job.job_id, run.run_dir, got["pid"], got["signal"], got["time"])
    return got is not None


def _submitit_outcomes(
    pending: Sequence[RunSpec], executor: str, commands: CommandFactory, threads: int, folder: str,
    slurm: SlurmConfig, log: logging.Logger,
) -> Iterator[Outcome]:
    if not pending:  # nothing to submit: no executor needed (nor a cluster)
        return
    made = make_executor(executor, os.path.join(folder, "%j"), slurm)
    n = len(pending)
    if executor == "slurm":
        refuse_a_running_array(folder)
    job_function = execute_run if executor == "debug" else execute_in_job  # debug: the runner's own process
    jobs = made.map_array(job_function, pending, [commands] * n, [threads] * n)
    if executor == "submitit-local":
        for job in jobs:
            job._results_timeout_s = LOCAL_RESULT_WAIT_S  # submitit's per-class setting, overridden per job
    log.info("submitted %d run(s) to %s: job(s) %s .. %s (logs in %s)", n, executor, jobs[0].job_id,
             jobs[-1].job_id, folder)
    if executor == "slurm":
        atomic_write_text(os.path.join(folder, ARRAY_FILE), json.dumps({"array_id": jobs[0].job_id.split("_")[0]}))
    waiting = dict(zip(jobs, pending))
    signalled, looked = set(), 0.0
    try:
        while waiting:
            if time.time() - looked >= SIGNAL_POLL_S:  # one small file per job: not at every poll
                looked = time.time()
                signalled.update(job for job in waiting.keys() - signalled if _log_signal(job, waiting[job], log))
            # A debug job runs when first asked; its done() would open pdb on an error, exception() does not.
            finished = list(waiting)[:1] if executor == "debug" else [job for job in waiting if job.done()]
            for job in finished:
                run = waiting.pop(job)
                if job not in signalled:  # signalled since the last look
                    _log_signal(job, run, log)
                error = job.exception()  # not result(): the debug executor would open pdb on an error
                if error is None:
                    yield run, job.result(), {}
                else:
                    reason, details = _job_failure(job, error, executor)
                    yield run, reason, details
            if not finished:
                time.sleep(POLL_S)
    except BaseException:  # a signal, or the consumer stopped: no job outlives the runner
        CHILDREN.kill_all()
        for job in waiting:
            job.cancel(check=False)
        raise
