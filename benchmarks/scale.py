"""Whole main.py runs at scale: start-up phases, ranker steps, peak memory.

Usage::

    nice -n 10 python benchmarks/scale.py --data DIR [--generate 2000 [--features 700]]
        [--configs ultra_dla dla multr_sampled multr_expected multr_default multr_examination_64] [--steps 300]
        [--simulator-steps 300] [--repeats 2] [--device cpu] [--time-limit S] [--workdir W]
        [--out benchmarks/results/scale/NAME]
    python benchmarks/scale.py --data DIR --generate 2000 --workdir W --prepare-only
    python benchmarks/scale.py --tiny        # a few queries, 2 steps: checks the script

Each run is ULTRA's unmodified ``main.py`` in its own process (whole runs
cannot share one); repeats alternate the configurations (A B C D A B C D ...)
so that a change of machine load hits all of them.  Configurations:

- ``ultra_dla``: ULTRA's own ``ultra.learning_algorithm.DLA`` and
  ``ultra.input_layer.ClickSimulationFeed`` (the reference);
- ``dla``: ``ultra_multr.DLA`` with our feed (settings/dla_cascade.json);
- ``multr_sampled`` / ``multr_expected``: ``ultra_multr.MULTR``
  (settings/multr_dla.json) with ``imputation=sampled`` / ``expected`` and
  ``simulator_steps`` cut to ``--simulator-steps``;
- ``multr_default``: ``ultra_multr.MULTR`` with its defaults
  (settings/multr_dla.json as it is: the simulator stopped by its held-out
  curve, capped at 10,000 steps; ``imputation=expected``;
  ``rerank_weight=paper``, no pilot); ``--simulator-steps`` applies only
  under ``--tiny``;
- ``multr_examination_64``: ``multr_default`` with
  ``examination_ranker_layers=[64]`` (a one-hidden-layer examination ranker).

Every ``multr_*`` configuration switches the simulator and logger guards
off, so that MULTR's whole path runs (on generated, label-ordered logs the
logger guard would fire and MULTR would train as DLA); the ledger still
records the simulator's decision.  ``--device`` goes to our algorithms'
``device`` hyper-parameter (ULTRA's DLA chooses its own).

All use the same cascade click model and ranker (DNN [512, 256, 128]),
``--batch_size 256``, ``--steps_per_checkpoint`` = ``--steps`` (one
validation, at the end) and ``OMP_NUM_THREADS`` = ``--threads``.

Phases come from the lines the run prints, timestamped here as they arrive
(ULTRA's own prints and our INFO lines, several of which carry their own
duration): ULTRA's import, ULTRA's read of train + valid, our data checks,
model dir + ranker + feeds, MULTR's simulator, expected pass and
rerank-weight pilot, the first ranker update (our "ranker: first update
starts" line; for ULTRA's DLA the start of main.py's training loop), the
ranker steps (first update to main.py's "global step" line, per step), and
the tail (final validation, checkpoint).  The data checks keep their results
in ``<workdir>/cache``: the first run that checks parses the files, later
runs only hash them (column ``checks_cached``: "no" for a run that found no
result there).  ``--prepare-only`` writes the data (``--generate``) and fills
that cache and the compact reader's feature cache, in two processes at once,
without running main.py: runs in that ``--workdir`` afterwards all start as
later starts do.  The first parse happens in the second process the start-up
hook starts (unless ``ULTRA_MULTR_EARLY_CHECKS=0``), and ``checks_s``
includes the wait for it.  Peak RSS is the child's ``ru_maxrss``; RSS is
also sampled from /proc at the phase lines.  The user simulator's steps,
best step and early stopping, and its held-out decision, come from the
run's ledger (``<model_dir>/session_budget.json``), not from its log.

``--time-limit S``: the runs of this invocation end within S seconds: a
run still going then is interrupted (SIGINT, so that main.py's exit writes
the ledger; killed 20 s later), its row says so (status) and keeps the
phases it finished and its step time over the steps it logged (our
algorithms log every ``log_every`` = 50 steps; column ``steps_done``); the
runs not started are listed.

Writes ``NAME.csv`` (one row per run) and ``NAME.md`` (medians and ranges
per configuration, the extrapolation to ``--extrapolate-steps`` ranker
steps, labelled as such).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import platform
import re
import statistics
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset  # noqa: E402
from ultra_multr.files import atomic_write_text  # noqa: E402
from ultra_multr.experiments.runner.runs import find_main_py  # noqa: E402

CONFIGS = ("ultra_dla", "dla", "multr_sampled", "multr_expected", "multr_default", "multr_examination_64")
#: MULTR at its defaults (settings/multr_dla.json, the simulator's cap kept) plus these hyper-parameters.
AT_DEFAULTS = {"multr_default": "", "multr_examination_64": ",examination_ranker_layers=[64]"}
CLICK_MODEL = os.path.join(ROOT, "settings", "click_models", "cascade_eps0.1_ymax4.json")

#: line pattern -> event name (first match of each wins); groups capture a duration the line reports.
EVENTS = (
    ("ultra_imported", re.compile(r"^Reading data in")),
    ("ultra_read", re.compile(r"^Train Rank list size")),
    ("creating_model", re.compile(r"^Creating model")),
    ("checks", re.compile(r"data checks of .* passed in ([0-9.]+) s")),
    ("checks_cached", re.compile(r"data checks of \S+: the files are the ones that passed on")),
    ("loop_starts", re.compile(r"^max_train_iter")),
    ("simulator", re.compile(r"user simulator: saved .* \(([0-9.]+) s\)")),
    ("expected_pass", re.compile(r"imputation=expected: expected pseudo clicks .* in ([0-9.]+) s")),
    ("pilot", re.compile(r"rerank_weight=auto: pilot .* \(([0-9.]+) s\)$")),
    ("first_update", re.compile(r"ranker: first update starts ([0-9.]+) s after")),
    # ULTRA's own DLA: its first update turns the batch into tensors with this warning (then fails: see ULTRA_STOPS).
    ("ultra_first_update", re.compile(r"UserWarning: Creating a tensor from a list of numpy.ndarrays")),
    ("ultra_stops", re.compile(r"TypeError: 'numpy.float32' object cannot be interpreted as an integer")),
    ("global_step", re.compile(r"^global step \d+ learning rate \S+ step-time ([0-9.]+)")),
)
#: our algorithms' progress line every ``log_every`` steps (the last one seen counts)
LOGGED_STEP = re.compile(r"^step (\d+) loss ")
#: seconds between a run's SIGINT at the time limit and its SIGKILL
GRACE_S = 20.0
STOPPED = "stopped at the time limit"
#: the configurations whose simulator and pilot are cut to --simulator-steps and --pilot-steps
CUT_SIMULATOR = ("multr_sampled", "multr_expected")

#: ULTRA's own DLA at commit 1757587 stops in its first update under torch 2.13 / numpy 2 (``torch.as_tensor``
#: of a list of float32 arrays with dtype int64 in ``BaseAlgorithm.create_input_feed``): its start-up is measured
#: to that update, and its steps are not.
ULTRA_STOPS = "start-up only: ULTRA's DLA raises TypeError in its first update (torch.as_tensor, torch 2.13)"

COLUMNS = (
    "config", "repeat", "train_queries", "steps", "simulator_steps", "exit", "status", "total_s", "peak_rss_mb",
    "ultra_import_s", "ultra_read_s", "checks_cached", "checks_s", "model_feeds_s", "simulator_s", "expected_pass_s", "pilot_s",
    "first_update_s", "startup_s", "ranker_steps_s", "steps_done", "step_s", "tail_s",
    "rss_after_ultra_read_mb", "rss_loop_starts_mb", "rss_first_update_mb",
    "sim_steps_run", "sim_best_step", "sim_early_stopping", "sim_decision",
)
#: ledger decision -> (its field, column) of the facts read from ``session_budget.json``
LEDGER_FACTS = (
    ("simulator_training", "steps_run", "sim_steps_run"), ("simulator_training", "best_step", "sim_best_step"),
    ("simulator_training", "early_stopping", "sim_early_stopping"), ("user_simulator", "decision", "sim_decision"),
)
#: columns that hold words, not numbers
TEXT_COLUMNS = ("config", "status", "checks_cached", "sim_early_stopping", "sim_decision")


def settings_for(config: str, simulator_steps: int, pilot_steps: int, device: str = "cpu",
                 default_simulator_cap: bool = True) -> dict:
    """main.py's setting file of a configuration (click model by absolute path); our algorithms on ``device``.
    :data:`AT_DEFAULTS` keep their simulator's cap unless ``default_simulator_cap`` is False (``--tiny``)."""
    if config == "ultra_dla":
        with open(os.path.join(ROOT, "settings", "dla_cascade.json")) as handle:
            settings = json.load(handle)
        settings.update(
            train_input_feed="ultra.input_layer.ClickSimulationFeed",
            train_input_hparams="click_model_json=%s" % CLICK_MODEL,
            learning_algorithm="ultra.learning_algorithm.DLA",
            learning_algorithm_hparams="learning_rate=0.05",
        )
        return settings
    name = "dla_cascade.json" if config == "dla" else "multr_dla.json"
    with open(os.path.join(ROOT, "settings", name)) as handle:
        settings = json.load(handle)
    settings["train_input_hparams"] = "click_model_json=%s,seed=0" % CLICK_MODEL
    if config in AT_DEFAULTS:
        hparams = settings["learning_algorithm_hparams"] + ",simulator_guard=none,logger_guard=none" + AT_DEFAULTS[config]
        settings["learning_algorithm_hparams"] = hparams if default_simulator_cap else re.sub(
            r"simulator_steps=\d+", "simulator_steps=%d" % simulator_steps, hparams)
    elif config.startswith("multr_"):
        settings["learning_algorithm_hparams"] = (
            "learning_rate=0.05,sample_num=8,seed=0,simulator_steps=%d,rerank_pilot_steps=%d,imputation=%s"
            # the cost of MULTR's whole path, whatever the simulator's fit: a short simulator that its guard
            # rejects (or a logger guard that fires on the generated, label-ordered log) would leave DLA's losses
            # and skip the expected pass
            ",simulator_guard=none,logger_guard=none"
            % (simulator_steps, pilot_steps, config.split("_", 1)[1])
            # the default guard (rebalance) needs expected pseudo clicks; sampled ones take the clip guard
            + (",dr_weight_guard=clip" if config == "multr_sampled" else "")
        )
    settings["learning_algorithm_hparams"] += ",device=%s" % device
    return settings


def rss_mb(pid: int) -> Optional[float]:
    """The process's resident set (VmRSS) in MB, None when it is gone."""
    try:
        with open("/proc/%d/status" % pid) as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def run_env(workdir: str, threads: int) -> Dict[str, str]:
    """The environment of a run's processes: ``threads`` threads, the caches in ``workdir/cache``, this checkout first."""
    return dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
                ULTRA_MULTR_CACHE=os.path.join(workdir, "cache"),
                PYTHONPATH=os.pathsep.join([ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))


#: Reads train and valid as main.py does (through the compact reader, which keeps what it parsed).
READ_SPLITS = "import sys; import ultra_multr.compat.startup; import ultra; [ultra.utils.read_data(sys.argv[1], s, None, 0) " \
              "for s in ('train', 'valid')]"


def prepare_caches(data_dir: str, workdir: str) -> float:
    """Fill ``workdir``'s check cache (``python -m ultra_multr.data.checks``) and feature cache (a read of train and
    valid) for ``data_dir``, in two processes at once; returns the seconds taken.

    Raises:
        SystemExit: either process failed (its output is shown).
    """
    started = time.perf_counter()
    env = run_env(workdir, 1)
    commands = ([sys.executable, "-m", "ultra_multr.data.checks", data_dir, "--splits", "train", "valid"],
                [sys.executable, "-c", READ_SPLITS, data_dir])
    processes = [subprocess.Popen(c, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for c in commands]
    for command, process in zip(commands, processes):
        output = process.communicate()[0]
        if process.returncode != 0:
            raise SystemExit("%s failed (exit %d):\n%s" % (" ".join(command[:3]), process.returncode, output[-3000:]))
    return time.perf_counter() - started


def ledger_facts(model_dir: str) -> Dict:
    """The simulator's facts (:data:`LEDGER_FACTS`) from the run's ledger; None where it has none."""
    try:
        with open(os.path.join(model_dir, "session_budget.json")) as handle:
            decisions = json.load(handle).get("decisions", {})
    except (OSError, ValueError):
        decisions = {}
    facts = {}
    for decision, field, column in LEDGER_FACTS:
        value = decisions.get(decision, {}).get(field)
        facts[column] = (str(value).lower() if isinstance(value, bool) else value if isinstance(value, str)
                         else None if value is None else float(value))
    return facts


def run_once(main_py: str, config: str, data_dir: str, args: argparse.Namespace, workdir: str,
             deadline: Optional[float] = None) -> Dict:
    """One main.py run; returns its row (see COLUMNS) and prints its output to ``workdir/<config>.log``.
    ``deadline`` (``time.perf_counter()`` value): interrupt the run then (SIGINT; SIGKILL :data:`GRACE_S` later)."""
    setting_file = os.path.join(workdir, config + ".json")
    settings = settings_for(config, args.simulator_steps, args.pilot_steps, args.device, not args.tiny)
    atomic_write_text(setting_file, json.dumps(settings, indent=1))
    model_dir = tempfile.mkdtemp(prefix="model-", dir=workdir)
    command = [
        sys.executable, "-u", main_py, "--data_dir", data_dir, "--model_dir", model_dir,
        "--output_dir", os.path.join(model_dir, ""), "--setting_file", setting_file,
        # main.py stops once its step count exceeds --max_train_iteration, at a checkpoint step: steps - 1
        # with a checkpoint every ``steps`` gives ``steps`` updates and one validation.
        "--max_train_iteration", str(args.steps - 1), "--steps_per_checkpoint", str(args.steps),
        "--batch_size", str(args.batch_size),
    ]
    cache = os.path.join(workdir, "cache")  # the first checking run checks in full
    # With early checks the log says "not parsed again" at the first start too (the second process parsed).
    checked_before = os.path.isdir(os.path.join(cache, "checks")) and bool(os.listdir(os.path.join(cache, "checks")))
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=workdir, env=run_env(workdir, args.threads), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, bufsize=1)
    stopped = threading.Event()

    def stop() -> None:
        stopped.set()
        process.send_signal(signal.SIGINT)
        killer = threading.Timer(GRACE_S, process.kill)
        killer.daemon = True
        killer.start()

    timer = threading.Timer(max(0.0, deadline - started), stop) if deadline is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    times: Dict[str, float] = {}
    values: Dict[str, float] = {}
    rss: Dict[str, Optional[float]] = {}
    with open(os.path.join(workdir, "%s.log" % config), "a") as log:
        for line in process.stdout:
            now = time.perf_counter() - started
            log.write("%8.2f %s" % (now, line))
            text = line.strip().replace("[ultra_multr] ", "")
            logged = LOGGED_STEP.search(text)
            if logged:
                times["logged_step"], values["logged_step"] = now, float(logged.group(1))
            for name, pattern in EVENTS:
                match = pattern.search(text)
                if match and name not in times:
                    times[name] = now
                    rss[name] = rss_mb(process.pid)
                    if match.groups():
                        values[name] = float(match.group(1))
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    total = time.perf_counter() - started
    if timer is not None:
        timer.cancel()
    row = row_of(config, times, values, rss, total, usage.ru_maxrss / 1024.0, process.returncode, args, checked_before,
                 stopped.is_set())
    row.update(ledger_facts(model_dir))
    return row


def row_of(config, times, values, rss, total, peak_mb, exit_code, args, checked_before: bool,
           stopped: bool = False) -> Dict:
    """Phase durations of one run from its event times and reported durations (None: not seen).

    ``checked_before``: the check cache held results when the run started (else its checks parsed the files).
    ``stopped``: the run was interrupted at the time limit (its step time then comes from the steps it logged).
    """

    def between(a: str, b: str) -> Optional[float]:
        return times[b] - times[a] if a in times and b in times else None

    one_off = sum(values.get(name, 0.0) for name in ("simulator", "expected_pass", "pilot"))
    if "first_update" in values:  # ours: the line says when, from the process start
        first_update = values["first_update"]
        steps_s = between("first_update", "global_step")
    else:  # ULTRA's algorithms: the first update's tensor conversion; its own step-time print
        first_update = times.get("ultra_first_update")
        steps_s = values["global_step"] * args.steps if "global_step" in values else None
    steps_done = float(args.steps) if "global_step" in times else values.get("logged_step")
    step_s = None if steps_s is None else steps_s / args.steps
    if step_s is None and "logged_step" in values and "first_update" in times:  # an interrupted run of ours
        step_s = between("first_update", "logged_step") / values["logged_step"]
    model_feeds = between("creating_model", "loop_starts")
    if model_feeds is not None and "checks" in values:
        model_feeds -= values["checks"]
    return {
        "config": config,
        "train_queries": args.train_queries,
        "steps": args.steps,
        "simulator_steps": args.simulator_steps if config in CUT_SIMULATOR or (config in AT_DEFAULTS and args.tiny)
        else "",
        "exit": exit_code,
        "status": STOPPED if stopped else "ok" if exit_code == 0 else ULTRA_STOPS if "ultra_stops" in times else "failed",
        "total_s": total,
        "peak_rss_mb": peak_mb,
        "ultra_import_s": times.get("ultra_imported"),
        "ultra_read_s": between("ultra_imported", "ultra_read"),
        "checks_cached": "" if "checks" not in values else "yes" if checked_before and "checks_cached" in times else "no",
        "checks_s": values.get("checks"),
        "model_feeds_s": model_feeds,
        "simulator_s": values.get("simulator"),
        "expected_pass_s": values.get("expected_pass"),
        "pilot_s": values.get("pilot"),
        "first_update_s": first_update,
        "startup_s": None if first_update is None else first_update - one_off,
        "ranker_steps_s": steps_s,
        "steps_done": steps_done,
        "step_s": step_s,
        "tail_s": None if "global_step" not in times else total - times["global_step"],
        "rss_after_ultra_read_mb": rss.get("ultra_read"),
        "rss_loop_starts_mb": rss.get("loop_starts"),
        "rss_first_update_mb": rss.get("first_update") or rss.get("loop_starts"),
    }


#: columns written with more than 2 decimals: a step's seconds (a summary read back from the CSV multiplies it by
#: the steps)
PRECISE_COLUMNS = ("step_s",)


def fmt(value, column: str) -> str:
    if value is None or value == "":
        return ""
    if not isinstance(value, float):
        return str(value)
    return ("%.6f" if column in PRECISE_COLUMNS else "%.2f") % value


def group_of(row: Dict) -> str:
    """A configuration, set apart where its data checks parsed the files (the first start on this data)."""
    return row["config"] + (" (first check)" if row["checks_cached"] == "no" else "")


def summary_markdown(rows: List[Dict], args: argparse.Namespace, machine: str) -> str:
    """Medians [min-max] per configuration, then the extrapolation to ``--extrapolate-steps``."""
    out = io.StringIO()
    out.write("# main.py at scale: %d training queries, %d ranker steps\n\n" % (args.train_queries, args.steps))
    out.write("Written by `benchmarks/scale.py %s`.\n\n" % " ".join(args.argv))
    out.write("Machine: %s\n\n" % machine)
    out.write("Median [min - max] over alternating repeats (n = runs); seconds, MB. \"(first check)\": the run whose "
              "data checks parsed the files; the others found them passed before and only hashed them.\n\n")
    for r in rows:  # what runs before the first update besides ULTRA's import and read (ours: checks, feeds, ...)
        parts = [r.get(c) for c in ("startup_s", "ultra_import_s", "ultra_read_s")]
        r["added_s"] = parts[0] - parts[1] - parts[2] if all(isinstance(v, float) for v in parts) else None
    shown = [c for c in COLUMNS if c not in ("repeat", "train_queries", "steps", "simulator_steps", "exit") + TEXT_COLUMNS]
    shown.insert(shown.index("startup_s") + 1, "added_s")
    out.write("| config | n | " + " | ".join(shown) + " |\n|---|---|" + "---|" * len(shown) + "\n")
    medians: Dict[str, Dict[str, float]] = {}
    for group in dict.fromkeys(group_of(r) for r in rows if r["status"] != "failed"):
        runs = [r for r in rows if group_of(r) == group and r["status"] != "failed"]
        medians[group] = {}
        cells = []
        for column in shown:
            seen = [r[column] for r in runs if isinstance(r[column], float)]
            if not seen:
                cells.append("")
                continue
            medians[group][column] = statistics.median(seen)
            cells.append("%.2f [%.2f - %.2f]" % (statistics.median(seen), min(seen), max(seen)) if len(seen) > 1
                         else "%.2f" % seen[0])
        out.write("| %s | %d | %s |\n" % (group, len(runs), " | ".join(cells)))
    failed = [r for r in rows if r["status"] == "failed"]
    for note in sorted({r["status"] for r in rows if r["status"] not in ("ok", "failed", STOPPED)}):
        out.write("\n%s: %s\n" % (", ".join(sorted({r["config"] for r in rows if r["status"] == note})), note))
    if failed:
        out.write("\nFailed runs: %s\n" % ", ".join("%s #%s (exit %s)" % (r["config"], r["repeat"], r["exit"]) for r in failed))
    out.write(whole_runs_markdown(rows, args))
    n = args.extrapolate_steps
    out.write(
        "\n## Extrapolated to %d ranker steps (not measured)\n\n"
        "start-up: process start to the first ranker update, MULTR's simulator, expected pass and pilot "
        "excluded; \"vs ultra_dla, same run\": a run's start-up over its own ULTRA import and read plus ULTRA's "
        "median added_s (the load of other jobs moves ULTRA's read by tens of seconds between runs). "
        "Whole run = start-up + one-off phases + %d x median step + tail. \"as measured\": the one-off "
        "phases of this run (simulator_steps=%d, rerank_pilot_steps=%d); \"defaults\": the simulator at its cap "
        "of 10,000 steps (an upper bound: early stopping may end it sooner) and the pilot at 3 x 200 steps, "
        "both scaled linearly from this run.\n\n"
        "| config | start-up s | vs ultra_dla | vs ultra_dla, same run | one-off s (as measured) | step s | whole run s (as measured) | vs dla "
        "| whole run s (defaults) | vs dla |\n|---|---|---|---|---|---|---|---|---|---|\n"
        % (n, n, args.simulator_steps, args.pilot_steps)
    )
    whole: Dict[str, tuple] = {}
    for group, m in medians.items():
        if "step_s" not in m or "first_update_s" not in m:
            continue
        sim, pilot = m.get("simulator_s", 0.0), m.get("pilot_s", 0.0)
        tail = m["first_update_s"] + n * m["step_s"] + m.get("tail_s", 0.0)
        defaults = (tail - sim - pilot + sim * 10000.0 / max(args.simulator_steps, 1)
                    + pilot * 200.0 / max(args.pilot_steps, 1)) if group.startswith(CUT_SIMULATOR) else tail
        whole[group] = (tail, defaults)
    reference = medians.get("ultra_dla", {}).get("startup_s")
    for group, m in medians.items():
        if group not in whole and group != "ultra_dla":
            continue
        startup = m.get("startup_s")
        ultra_added = medians.get("ultra_dla", {}).get("added_s")
        same_run = [r["startup_s"] / (r["startup_s"] - r["added_s"] + ultra_added) for r in rows
                    if group_of(r) == group and r["status"] != "failed" and r["added_s"] is not None
                    and ultra_added is not None]
        cells = ["%.1f" % startup if startup is not None else "",
                 "%.2fx" % (startup / reference) if reference and startup is not None else "",
                 "%.2fx [%.2f - %.2f]" % (statistics.median(same_run), min(same_run), max(same_run)) if same_run else ""]
        if group in whole:
            dla = whole.get("dla") or whole.get("dla (first check)")
            cells += ["%.1f" % (m["first_update_s"] - m.get("startup_s", m["first_update_s"])), "%.4f" % m["step_s"],
                      "%.0f" % whole[group][0], "%.2fx" % (whole[group][0] / dla[0]) if dla else "",
                      "%.0f" % whole[group][1], "%.2fx" % (whole[group][1] / dla[1]) if dla else ""]
        else:
            cells += [""] * 6
        out.write("| %s | %s |\n" % (group, " | ".join(cells)))
    return out.getvalue()


def whole_runs_markdown(rows: List[Dict], args: argparse.Namespace) -> str:
    """The runs as measured: whole run and phases, medians over the finished runs, ratios to dla's; then the runs
    stopped at the time limit and those not started."""
    out = io.StringIO()
    out.write(
        "\n## Whole runs as measured\n\n"
        "Seconds, medians over the runs that finished; \"x dla\": over dla's median in the same group of starts "
        "(first check or not). Whole run: process start to exit. Start-up: to the first ranker update, less the "
        "simulator, expected pass and pilot. Ranker steps: the first update to main.py's \"global step\" line. Tail: "
        "the final validation, checkpoint and exit. The simulator's steps run and best step (early stopping on its "
        "held-out curve) are the run's ledger's (session_budget.json).\n\n"
        "| config | n | whole run s | x dla | start-up s | x dla | simulator s | simulator steps run / best "
        "| expected pass s | pilot s | ranker steps s | ms / step | x dla | tail s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    finished = [r for r in rows if r["status"] == "ok"]

    def median(group: str, column: str) -> Optional[float]:
        seen = [r[column] for r in finished if group_of(r) == group and isinstance(r[column], float)]
        return statistics.median(seen) if seen else None

    def cell(value: Optional[float], digits: int = 1) -> str:
        return "" if value is None else "%.*f" % (digits, value)

    def ratio(group: str, column: str) -> str:
        reference = "dla" + group[len(group.split(" ")[0]):]  # dla in the same group of starts
        mine, theirs = median(group, column), median(reference, column)
        return "%.2fx" % (mine / theirs) if mine is not None and theirs else ""

    for group in dict.fromkeys(group_of(r) for r in finished):
        runs = [r for r in finished if group_of(r) == group]
        simulator = [("%d / %d" % (r["sim_steps_run"], r["sim_best_step"])) for r in runs
                     if isinstance(r.get("sim_steps_run"), float) and isinstance(r.get("sim_best_step"), float)]
        step = median(group, "step_s")
        out.write("| %s |\n" % " | ".join([
            group, str(len(runs)), cell(median(group, "total_s")), ratio(group, "total_s"),
            cell(median(group, "startup_s")), ratio(group, "startup_s"), cell(median(group, "simulator_s")),
            ", ".join(simulator), cell(median(group, "expected_pass_s")), cell(median(group, "pilot_s")),
            cell(median(group, "ranker_steps_s")), cell(None if step is None else 1000 * step, 2),
            ratio(group, "step_s"), cell(median(group, "tail_s"))]))
    tails = [r["tail_s"] for r in finished if isinstance(r.get("tail_s"), float)]
    tail = statistics.median(tails) if tails else 0.0
    projected: Dict[str, float] = {}
    for r in rows:
        if r["status"] != STOPPED:
            continue
        done = r.get("steps_done")
        step, first = r.get("step_s"), r.get("first_update_s")
        if isinstance(step, float) and isinstance(first, float):
            projected[r["config"]] = first + args.steps * step + tail
        out.write(
            "\n%s #%s: %s after %.1f s, %s of %d ranker steps logged%s%s%s.%s\n" % (
                r["config"], r["repeat"], STOPPED, r["total_s"], "%d" % done if done else "none", args.steps,
                ", %.2f ms / step over them" % (1000 * step) if isinstance(step, float) else "",
                "; simulator %s s (steps run / best: %s / %s)" % (cell(r["simulator_s"]), cell(r.get("sim_steps_run"), 0),
                                                                  cell(r.get("sim_best_step"), 0))
                if isinstance(r.get("simulator_s"), float) else "",
                "; expected pass %.1f s" % r["expected_pass_s"] if isinstance(r.get("expected_pass_s"), float) else "",
                " Whole run projected from them (not measured): %.0f s (first update at %.1f s + %d steps + the "
                "finished runs' median tail, %.1f s)." % (projected[r["config"]], first, args.steps, tail)
                if r["config"] in projected else ""))
    whole = {r["config"]: r["total_s"] for r in finished if r["checks_cached"] != "no"}
    if projected and "dla" in set(whole) | set(projected):
        for config in sorted((set(whole) | set(projected)) - {"dla"}):
            if config in projected or "dla" in projected:
                mine, theirs = projected.get(config, whole.get(config)), projected.get("dla", whole.get("dla"))
                out.write("\n%s / dla, whole run, with the projection above (not measured): %.2fx\n"
                          % (config, mine / theirs))
    if getattr(args, "not_started", None):
        out.write("\nNot started (time limit): %s\n" % ", ".join(args.not_started))
    return out.getvalue()


def read_rows(path: str) -> List[Dict]:
    """The rows of a CSV this script wrote (numbers as floats, empty cells as None)."""
    with open(path) as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        for column, value in row.items():
            if column in TEXT_COLUMNS:
                continue
            row[column] = None if value == "" else int(value) if column in ("repeat", "exit") else float(value)
    return rows


def machine_line() -> str:
    load = os.getloadavg()
    with open("/proc/meminfo") as handle:
        total_kb = int(next(line for line in handle if line.startswith("MemTotal")).split()[1])
    return "%s, %d cores, %.1f GB RAM, Python %s; load average at the end %.2f %.2f %.2f (other jobs share the cores)" % (
        platform.machine(), os.cpu_count(), total_kb / 1024.0 ** 2, platform.python_version(), *load)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="ULTRA data directory (written first with --generate)")
    parser.add_argument("--generate", type=int, default=0, metavar="TRAIN_QUERIES",
                        help="write a synthetic set of this many training queries (valid and test: a tenth) to --data")
    parser.add_argument("--features", type=int, default=700)
    parser.add_argument("--docs", type=int, nargs=2, default=(12, 36), help="documents per query, inclusive range")
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS[:4]), choices=CONFIGS)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--simulator-steps", type=int, default=300)
    parser.add_argument("--pilot-steps", type=int, default=200, help="MULTR's rerank_pilot_steps (its default: 200)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="our algorithms' device hyper-parameter (cpu, cuda, cuda:K)")
    parser.add_argument("--time-limit", type=float, default=0.0, metavar="S",
                        help="end the runs within S seconds of their start (0: no limit); see the module's doc")
    parser.add_argument("--prepare-only", action="store_true",
                        help="write the data (--generate) and fill --workdir's check and feature caches; run nothing")
    parser.add_argument("--extrapolate-steps", type=int, default=10000)
    parser.add_argument("--out", help="output prefix: writes OUT.csv and OUT.md")
    parser.add_argument("--workdir", help="keep the runs' logs, settings and model dirs here (default: a temporary dir)")
    parser.add_argument("--main-py", default=os.environ.get("ULTRA_MAIN"), help="ULTRA's main.py ($ULTRA_MAIN)")
    parser.add_argument("--summarize", metavar="CSV", help="only write the summary of the runs of an earlier --out CSV")
    parser.add_argument("--tiny", action="store_true",
                        help="check the script: a few queries, 20 features, 2 steps, one repeat, in a temporary dir")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.steps < 2:
        parser.error("--steps must be >= 2 (main.py's loop stops after a checkpoint step beyond --max_train_iteration)")
    args.main_py = find_main_py(args.main_py)
    if args.summarize:
        rows = read_rows(args.summarize)
        args.train_queries, args.steps = int(rows[0]["train_queries"]), int(rows[0]["steps"])
        args.simulator_steps = int(next((r["simulator_steps"] for r in rows if r["simulator_steps"]), args.simulator_steps))
        markdown = summary_markdown(rows, args, machine_line() + ", when this summary was rewritten from %s "
                                    "(not during the runs)" % args.summarize)
        print(markdown)
        if args.out:
            atomic_write_text(args.out + ".md", markdown)
        return 0
    with tempfile.TemporaryDirectory(prefix="benchmark_scale-") as temporary:
        workdir = os.path.abspath(args.workdir or temporary)  # the runs start main.py from other folders
        os.makedirs(workdir, exist_ok=True)
        if args.tiny:
            args.data = args.data or os.path.join(workdir, "data")
            args.generate = args.generate or (0 if os.path.exists(os.path.join(args.data, "settings.json")) else 40)
            args.features, args.docs, args.steps, args.simulator_steps, args.pilot_steps, args.repeats = (
                20, (6, 15), 2, 2, 2, 1)
        if not args.data:
            parser.error("--data is required (or --tiny)")
        if args.generate:
            if os.path.exists(os.path.join(args.data, "settings.json")):
                parser.error("--generate: %s already holds a data set; pass another --data or leave out --generate" % args.data)
            started = time.perf_counter()
            write_synthetic_ultra_dataset(
                args.data, {"train": args.generate, "valid": max(2, args.generate // 10), "test": max(2, args.generate // 10)},
                docs_per_query=tuple(args.docs), n_features=args.features, seed=0,
            )
            print("generated %s in %.1f s" % (args.data, time.perf_counter() - started), flush=True)
        if args.prepare_only:
            if not args.workdir:
                parser.error("--prepare-only fills --workdir's caches for later runs: give --workdir")
            seconds = prepare_caches(os.path.join(os.path.abspath(args.data), ""), workdir)
            print("check and feature caches of %s filled in %.1f s" % (workdir, seconds), flush=True)
            return 0
        with open(os.path.join(args.data, "train", "train.init_list")) as handle:
            args.train_queries = sum(1 for _ in handle)
        data_dir = os.path.join(os.path.abspath(args.data), "")
        rows: List[Dict] = []
        print(",".join(COLUMNS), flush=True)
        deadline = time.perf_counter() + args.time_limit if args.time_limit > 0 else None
        args.not_started = []
        for repeat in range(args.repeats):
            for config in args.configs:
                if deadline is not None and time.perf_counter() >= deadline:
                    args.not_started.append("%s #%d" % (config, repeat))
                    continue
                row = run_once(args.main_py, config, data_dir, args, workdir, deadline)
                row["repeat"] = repeat
                rows.append(row)
                print(",".join(fmt(row[c], c) for c in COLUMNS), flush=True)
                if row["status"] == "failed":
                    with open(os.path.join(workdir, "%s.log" % config)) as handle:
                        sys.stderr.write(handle.read()[-3000:])
        markdown = summary_markdown(rows, args, machine_line())
        print(markdown)
        if args.out:
            table = io.StringIO()
            writer = csv.DictWriter(table, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows({c: fmt(r[c], c) for c in COLUMNS} for r in rows)
            atomic_write_text(args.out + ".csv", table.getvalue())
            atomic_write_text(args.out + ".md", markdown)
    return 0 if all(r["status"] != "failed" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
