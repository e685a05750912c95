"""Run methods x datasets x folds x seeds (and sweeps) from one JSON config.

The config is read by :mod:`.study_config`; each run's folder, commands and
status are in :mod:`.runs` (finished runs are skipped, unfinished ones wiped and
started again, runs finished under another configuration refused as stale);
:mod:`.execute` runs one of them.

Runs execute in parallel up to ``--workers``; every subprocess gets
``OMP/MKL/OPENBLAS_NUM_THREADS`` = ``--threads N`` if given, else the
runner's own ``OMP_NUM_THREADS`` if set, else ``max(1, cores // workers)``.
Afterwards the results are aggregated into ``<output_dir>/results`` (see
:mod:`.aggregate`).

One runner per output folder: ``<output_dir>/runner.lock`` names the
holder's pid and host; a second runner refuses, and a lock whose pid is dead
on this host is taken over (with a warning).  Every step runs in its own
process group; SIGINT / SIGTERM to the runner kill those groups, on Linux a
child also gets SIGKILL when the runner dies (``PR_SET_PDEATHSIG``), and a
restarted runner kills a step still running in a run folder (recorded in
``step.json``) before it wipes that folder.  Progress goes to tqdm and to
``<output_dir>/runner.log``.

Modules: :mod:`.study_config` (the config), :mod:`.runs` (run folders,
commands, done / pending / stale), :mod:`.lock` (runner.lock),
:mod:`.processes` (process groups, signals), :mod:`.execute` (one run).
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

from . import methods as registry
from .execute import execute_run, resolve_threads
from .lock import RunnerLock, RunnerLockError
from .processes import CHILDREN
from .runs import CommandFactory, RunSpec, default_commands, expand_runs, find_main_py, run_status
from .study_config import ConfigError, ExperimentConfig, load_config

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


def run_all(
    runs: Sequence[RunSpec],
    output_dir: str,
    workers: int = 1,
    commands: CommandFactory = default_commands,
    progress: bool = True,
    threads: Optional[int] = None,
) -> RunReport:
    """Execute the pending runs, ``workers`` at a time, skipping finished ones.

    Holds ``<output_dir>/runner.lock`` throughout and logs progress to
    ``<output_dir>/runner.log``.  SIGINT / SIGTERM (when called from the main
    thread) kill the running steps' process groups and raise KeyboardInterrupt.

    Args:
        threads: OMP/MKL/OpenBLAS threads per step (see :func:`resolve_threads`).

    Raises:
        ConfigError: some run folders were finished under a different
            configuration (nothing is started then).
        RunnerLockError: another runner works in ``output_dir``.
    """
    if workers < 1:
        raise ValueError("workers must be >= 1, got %d" % workers)
    threads = resolve_threads(workers, threads)
    with RunnerLock(output_dir):
        statuses = [run_status(run) for run in runs]
        stale = [run.run_dir for run, status in zip(runs, statuses) if status == "stale"]
        if stale:
            raise ConfigError(
                "%d run folder(s) were finished with a different configuration or on other data (re-prepared); "
                "delete them or change output_dir: %s"
                % (len(stale), ", ".join(stale))
            )
        pending = [run for run, status in zip(runs, statuses) if status == "pending"]
        in_main = threading.current_thread() is threading.main_thread()
        previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)} if in_main else {}
        CHILDREN.stopping = False
        log, handler = _progress_logger(output_dir)
        try:
            failed = _run_pending(pending, workers, commands, threads, progress, log, len(runs))
        finally:
            for sig, handler_before in previous.items():
                signal.signal(sig, handler_before)
            log.removeHandler(handler)
            handler.close()
    return RunReport(skipped=len(runs) - len(pending), finished=len(pending) - len(failed), failed=failed)


def _run_pending(
    pending: Sequence[RunSpec], workers: int, commands: CommandFactory, threads: int, progress: bool,
    log: logging.Logger, total: int,
) -> Dict[str, str]:
    from tqdm import tqdm

    log.info("%d of %d run(s) to do, %d worker(s), %d thread(s) each", len(pending), total, workers, threads)
    failed: Dict[str, str] = {}
    started = time.time()
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        with tqdm(total=len(pending), desc="runs", unit="run", disable=None if progress else True) as bar:
            futures = {pool.submit(execute_run, run, commands, threads): run for run in pending}
            for count, future in enumerate(as_completed(futures), 1):
                run = futures[future]
                try:
                    reason = future.result()
                except Exception as error:  # a bug or I/O error in one run must not stop the others
                    reason = "%s: %s" % (type(error).__name__, error)
                if reason is not None:
                    failed[run.run_dir] = reason
                    log.error("[%d/%d] FAILED %s: %s", count, len(pending), run.run_dir, reason)
                else:
                    log.info("[%d/%d] done %s (%.0f s elapsed)", count, len(pending), run.run_dir, time.time() - started)
                bar.update(1)
    except BaseException:
        CHILDREN.kill_all()
        pool.shutdown(wait=True, cancel_futures=True)
        log.error("stopped; the unfinished runs start again on the next invocation")
        raise
    pool.shutdown(wait=True)
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
    parser.add_argument("--dry-run", action="store_true", help="list the runs and their status; run nothing")
    parser.add_argument("--aggregate", metavar="RUNS_DIR", help="only aggregate the finished runs under RUNS_DIR")
    parser.add_argument("--out", help="output directory of --aggregate")
    parser.add_argument("--alpha", type=float, default=None, help="significance level (default 0.05)")
    parser.add_argument("--permutations", type=int, default=None, help="Monte-Carlo permutations (default 10000)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from .aggregate import aggregate

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
        return 0
    try:
        report = run_all(runs, config.output_dir, workers=args.workers, threads=args.threads)
    except (ConfigError, RunnerLockError, ValueError) as error:
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
