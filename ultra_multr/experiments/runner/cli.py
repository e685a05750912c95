"""Run methods x datasets x folds x seeds (and sweeps) from one JSON config.

The config is read by :mod:`.study_config`; each run's folder, commands and
status are in :mod:`.runs` (finished runs are skipped, unfinished ones wiped and
started again, runs finished under another configuration refused as stale);
:mod:`.execute` runs one of them.

Runs execute in parallel up to ``--workers`` in a local pool, or with
``--executor slurm`` as one SLURM job array (``submitit-local`` and ``debug``
run the same submitit jobs on this machine; see :mod:`.executors` and
docs/cluster.md).  Every subprocess gets ``OMP/MKL/OPENBLAS_NUM_THREADS`` =
``--threads N`` if given, else (on SLURM) the config's ``cpus_per_task``,
else the runner's own ``OMP_NUM_THREADS`` if set, else ``max(1, cores // workers)``.
Afterwards the results are aggregated into ``<output_dir>/results`` (see
:mod:`.aggregate`).

One runner per output folder: ``<output_dir>/runner.lock`` names the
holder's pid and host; a second runner refuses, and a lock whose pid is dead
on this host is taken over (with a warning).  Every step runs in its own
process group; SIGINT / SIGTERM to the runner kill those groups, on Linux a
child also gets SIGKILL when the runner dies (``PR_SET_PDEATHSIG``), and a
restarted runner kills a step still running in a run folder (recorded in
``step.json``) before it wipes that folder.  Progress goes to tqdm and to
``<output_dir>/runner.log``; the line of a run whose step failed ends with
the last lines of that step's stderr, read through a pipe (:mod:`.stderr_copy`),
so they reach the log and ``failed.json`` even when the run folder's disk is full.

Modules: :mod:`.study_config` (the config), :mod:`.runs` (run folders,
commands, done / pending / stale), :mod:`.lock` (runner.lock),
:mod:`.processes` (process groups, signals), :mod:`.execute` (one run), :mod:`.stderr_copy` (a step's stderr),
:mod:`.executors` (pool or submitit; :mod:`.job_exit`: how a submitit-local job's process ended),
:mod:`.slurm_config` (the job array's resources).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ultra_multr.data.checks import DataCheckError, split_layout
from ultra_multr.experiments import methods as registry
from ultra_multr.experiments.runner.execute import resolve_threads, write_failure
from ultra_multr.experiments.runner.executors import EXECUTORS, JOBS_DIR, Outcome, run_outcomes
from ultra_multr.experiments.runner.lock import RunnerLockError, runner_lock
from ultra_multr.experiments.runner.processes import CHILDREN
from ultra_multr.experiments.runner.runs import (
    MAIN_PY_SPLITS, CommandFactory, RunSpec, default_commands, expand_runs, find_main_py, records_data, run_status,
    why_stale,
)
from ultra_multr.experiments.runner.slurm_config import SlurmConfig, sbatch_script
from ultra_multr.experiments.study_config import ConfigError, ExperimentConfig, load_config

__all__ = [
    "ConfigError", "ExperimentConfig", "RunReport", "RunSpec", "RunnerLockError", "default_commands", "expand_runs",
    "find_main_py", "load_config", "main", "resolve_threads", "run_all", "run_status",
]

logger = logging.getLogger(__name__)

LOG_FILE = "runner.log"


@dataclass
class RunReport:
    skipped: int
    finished: int
    failed: Dict[str, str]  # run_dir -> reason


def _progress_logger(output_dir: str) -> Tuple[logging.Logger, logging.Handler]:
    """A logger that appends to ``<output_dir>/runner.log`` (and propagates to the root logger)."""
    handler = logging.FileHandler(os.path.join(output_dir, LOG_FILE))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    progress = logging.getLogger(__name__ + ".progress")
    progress.setLevel(logging.INFO)
    progress.addHandler(handler)
    return progress, handler


def _on_signal(signum: int, frame: Any) -> None:
    logger.warning("signal %d: stopping the running steps", signum)
    CHILDREN.kill_all()
    raise KeyboardInterrupt("signal %d" % signum)


def preflight_problems(runs: Sequence[RunSpec]) -> List[str]:
    """What would make the pending ``runs`` fail: a data directory that is missing, holds no ``settings.json`` or
    lacks a split a run reads (main.py's train and valid, the config's ``eval_split``), a settings dict main.py
    would refuse (:func:`~ultra_multr.compat.settings_check.check_settings_hparams`: a class path, metric,
    objective or hyper-parameter), an interpreter that does not exist, ULTRA's main.py not found; one line each,
    the config's entry named."""
    problems: List[str] = []
    for data_dir, eval_split in sorted({(run.data_dir, run.eval_split) for run in runs}):
        if not os.path.isdir(data_dir):
            problems.append("data directory %s does not exist (datasets of the config)" % data_dir)
        elif not os.path.isfile(os.path.join(data_dir, "settings.json")):
            problems.append("data directory %s holds no settings.json: not a ULTRA data directory (datasets of the "
                            "config)" % data_dir)
        else:
            for split in MAIN_PY_SPLITS:
                problems += _split_problem(data_dir, split, "main.py trains and validates on it")
            problems += _split_problem(data_dir, eval_split, "\"eval_split\" of the config")
    problems += _settings_problems(runs)
    for python in sorted({run.python for run in runs}):
        found = python if os.sep in python else shutil.which(python)
        if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
            problems.append("python %s is not an executable file (\"python\" of the config)" % python)
    for main_py in sorted({run.main_py or "" for run in runs}):
        try:
            find_main_py(main_py or None)
        except (FileNotFoundError, ImportError) as error:
            problems.append("%s (\"main_py\" of the config, or $ULTRA_MAIN)" % error)
    return problems


def _split_problem(data_dir: str, split: str, what: str) -> List[str]:
    """The problem of a split a run reads that is not in ``data_dir`` (empty: it is there)."""
    try:
        split_layout(data_dir, split)
    except DataCheckError as error:
        return ["%s (%s)" % (error, what)]
    return []


def _settings_problems(runs: Sequence[RunSpec]) -> List[str]:
    """What main.py would refuse in the runs' settings (each distinct settings dict checked once, each problem said
    once), naming the method; the check needs ULTRA, which main.py's interpreter imports (none when this one
    cannot)."""
    from ultra_multr.compat.settings_check import SettingsError, check_settings_hparams
    from ultra_multr.config import HParamError

    checked = set()
    problems = []
    for run in runs:
        key = json.dumps(run.settings, sort_keys=True)
        if key in checked:
            continue
        try:
            check_settings_hparams(run.settings, "the settings of method %s" % run.method)
        except (SettingsError, HParamError) as error:  # the runs of a method differ in their seed, not in this
            problem = "%s (settings, method_overrides or extra_methods of the config)" % error
            problems += [] if problem in problems else [problem]
        except ImportError:  # no ULTRA here: main.py checks them at its start
            return problems
        checked.add(key)
    return problems


def run_all(
    runs: Sequence[RunSpec],
    output_dir: str,
    workers: int = 1,
    commands: CommandFactory = default_commands,
    progress: bool = True,
    threads: Optional[int] = None,
    executor: str = "local",
    slurm: Optional[SlurmConfig] = None,
) -> RunReport:
    """Execute the pending runs on ``executor``, skipping finished ones.

    Holds ``<output_dir>/runner.lock`` throughout and logs progress to
    ``<output_dir>/runner.log``.  SIGINT / SIGTERM (when called from the main
    thread) kill the running steps' process groups (and cancel submitted jobs)
    and raise KeyboardInterrupt.

    Args:
        workers: runs at once in the local pool (other executors ignore it).
        threads: OMP/MKL/OpenBLAS threads per step (see :func:`resolve_threads`;
            on SLURM the default is the config's ``cpus_per_task``).
        executor: one of :data:`.executors.EXECUTORS` (see :mod:`.executors`).
        slurm: the resources of the submitit executors (default: :class:`SlurmConfig`'s).

    Raises:
        ConfigError: some run folders were finished under a different
            configuration (nothing is started then).
        RunnerLockError: another runner works in ``output_dir``.
    """
    if workers < 1:
        raise ValueError("workers must be >= 1, got %d" % workers)
    if executor not in EXECUTORS:
        raise ValueError("unknown executor %r; choose from %s" % (executor, ", ".join(EXECUTORS)))
    slurm = slurm or SlurmConfig()
    if executor == "slurm":  # the nodes' cores, not this machine's
        threads = slurm.cpus_per_task if threads is None else resolve_threads(1, threads)
    else:
        threads = resolve_threads(workers, threads)
    with runner_lock(output_dir):
        statuses = [run_status(run) for run in runs]
        stale = ["%s: %s" % (run.run_dir, why_stale(run)) for run, status in zip(runs, statuses) if status == "stale"]
        if stale:
            raise ConfigError(
                "%d run folder(s) were finished with a different configuration or on other data; their results do "
                "not hold: delete them or change output_dir:\n  %s" % (len(stale), "\n  ".join(stale))
            )
        unrecorded = sum(status == "done" and not records_data(run) for run, status in zip(runs, statuses))
        if unrecorded:
            logger.warning("%d finished run(s) were finished before the runner recorded the content of the data they "
                           "read: their data cannot be checked (delete them to rerun them)", unrecorded)
        pending = [run for run, status in zip(runs, statuses) if status == "pending"]
        problems = preflight_problems(pending) if commands is default_commands else []  # what main.py runs need
        if problems:
            raise ConfigError("nothing started: %d problem(s) would stop the runs at once:\n  %s"
                              % (len(problems), "\n  ".join(problems)))
        in_main = threading.current_thread() is threading.main_thread()
        previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)} if in_main else {}
        CHILDREN.stopping = False
        log, handler = _progress_logger(output_dir)
        try:
            log.info("%d of %d run(s) to do, executor %s, %d worker(s), %d thread(s) each",
                     len(pending), len(runs), executor, workers, threads)
            outcomes = run_outcomes(pending, executor, commands, threads, workers, output_dir, slurm, log)
            failed = _collect(outcomes, len(pending), progress, log)
        finally:
            for sig, handler_before in previous.items():
                signal.signal(sig, handler_before)
            log.removeHandler(handler)
            handler.close()
    return RunReport(skipped=len(runs) - len(pending), finished=len(pending) - len(failed), failed=failed)


def _collect(outcomes: Iterator[Outcome], n_pending: int, progress: bool, log: logging.Logger) -> Dict[str, str]:
    """Log each outcome with the rate and time left (a tqdm bar too, with ``progress`` and tqdm installed), write
    failed.json for a run that raised or whose job died; run_dir -> reason of the failed."""
    from ultra_multr.progress import Progress

    failed: Dict[str, str] = {}
    started = time.time()
    meter = Progress(n_pending, "runs", "runs", mode=None if progress else "lines", log_lines=False)
    try:
        for count, (run, reason, details) in enumerate(outcomes, 1):
            meter.update(1)
            if reason is not None:
                if details:  # execute_run did not get to write failed.json
                    reason = write_failure(run.run_dir, reason, **details)
                failed[run.run_dir] = reason
                log.error("[%d/%d] FAILED %s: %s (%s)", count, n_pending, run.run_dir, reason, meter.text())
            else:
                log.info("[%d/%d] done %s (%s)", count, n_pending, run.run_dir, meter.text())
    except BaseException:
        meter.close()
        outcomes.close()  # stops the executor's runs
        log.error("stopped; the unfinished runs start again on the next invocation")
        raise
    meter.close()
    log.info("finished: %d failed, %.0f s", len(failed), time.time() - started)
    return failed


# ----------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ultra-multr-run", description="Run an experiment config, or aggregate finished runs."
    )
    parser.add_argument("config", nargs="?", help="experiment config JSON")
    parser.add_argument("--workers", type=int, default=1, help="runs in parallel (default 1)")
    parser.add_argument(
        "--threads", type=int, default=None,
        help="OMP/MKL/OpenBLAS threads per run (default: $OMP_NUM_THREADS if set, else cores // workers)",
    )
    parser.add_argument(
        "--executor", choices=EXECUTORS, default="local",
        help="local: a process pool on this machine (default); slurm: one SLURM job array with the config's "
        "\"slurm\" resources; submitit-local: the same jobs as processes here; debug: in this process, one by one",
    )
    parser.add_argument("--dry-run", action="store_true",
                        help="list the runs and their status (with --executor slurm: the batch script); run nothing")
    parser.add_argument("--aggregate", metavar="RUNS_DIR", help="only aggregate the finished runs under RUNS_DIR")
    parser.add_argument("--out", help="output directory of --aggregate")
    parser.add_argument("--alpha", type=float, default=None, help="significance level (default 0.05)")
    parser.add_argument("--permutations", type=int, default=None, help="Monte-Carlo permutations (default 10000)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from ultra_multr.experiments.aggregate import aggregate

    options = {k: v for k, v in (("alpha", args.alpha), ("n_permutations", args.permutations)) if v is not None}
    if args.aggregate:
        if not args.out:
            parser.error("--aggregate needs --out")
        try:
            paths = aggregate(args.aggregate, args.out, **options)
        except ValueError as error:  # no finished run, a malformed per-query file: named in the message
            print("error: %s" % error, file=sys.stderr)
            return 2
        for path in paths:
            print(path)
        return 0
    if not args.config:
        parser.error("give a CONFIG (or --aggregate RUNS_DIR --out DIR)")
    try:
        config = load_config(args.config)
        runs = expand_runs(config)
    except (ConfigError, registry.UnknownMethodError) as error:
        print("error: %s" % error, file=sys.stderr)
        return 2
    if args.dry_run:
        for run in runs:
            print("%-8s %s" % (run_status(run), run.run_dir))
            for step, command in default_commands(run):
                print("    %s: %s" % (step, " ".join(command)))
        if args.executor == "slurm":
            pending = sum(run_status(run) == "pending" for run in runs)
            print("sbatch script of the %d pending run(s):" % pending)
            print(sbatch_script(config.slurm, os.path.join(config.output_dir, JOBS_DIR, "%j"), pending))
        return 0
    try:
        report = run_all(runs, config.output_dir, workers=args.workers, threads=args.threads,
                         executor=args.executor, slurm=config.slurm)
    except (ConfigError, RunnerLockError, ValueError, RuntimeError) as error:
        print("error: %s" % error, file=sys.stderr)
        return 2
    print("%d run(s) finished, %d skipped (already done), %d failed" % (report.finished, report.skipped, len(report.failed)))
    for run_dir, reason in sorted(report.failed.items()):
        print("  FAILED %s: %s" % (run_dir, reason))
    if report.finished + report.skipped > 0:
        for path in aggregate(config.runs_dir, config.results_dir, **{**config.significance, **options}):
            print(path)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
