"""Tests of the experiment tooling: metrics, significance, TREC files, evaluation, runner, tables."""
import json
import math
import os
import re
import socket
import subprocess
import signal
import sys
import threading
import time

import numpy as np
import pytest
from conftest import require_ultra, write_toy_study

from ultra_multr.experiments import methods as registry
from ultra_multr.experiments.aggregate import (
    RunRecord, aggregate, build_table, format_csv, format_markdown, sweep_figure,
)
from ultra_multr.metrics import metric_names, per_query_metrics, query_metrics
from ultra_multr.experiments.runner.cli import (
    ConfigError, RunnerLockError, expand_runs, load_config, resolve_threads, run_all,
)
from ultra_multr.experiments.significance import randomization_test
from ultra_multr.experiments.trec import format_qrels, format_run, write_run

METRICS = metric_names()


# ----------------------------------------------------------------------------- metrics


def test_metrics_match_hand_computed_values():
    # Ranking by score: labels 0, 2, 1 (max_label 2).
    values = query_metrics(np.array([1.0, 2.0, 0.0]), np.array([0.1, 0.2, 0.3]), max_label=2)
    dcg3 = 0.0 + 3.0 / math.log2(3) + 1.0 / 2.0
    ideal3 = 3.0 + 1.0 / math.log2(3)
    assert values["ndcg_1"] == 0.0
    assert values["ndcg_3"] == pytest.approx(dcg3 / ideal3)
    assert values["ndcg_10"] == pytest.approx(dcg3 / ideal3)  # cutoff beyond the list
    # R = (2^y - 1) / 2^2: 0, 3/4, 1/4.  ERR@3 = 3/4 / 2 + (1/4)(1 - 3/4) / 3.
    assert values["err_1"] == 0.0
    assert values["err_3"] == pytest.approx(0.375 + 1.0 / 48.0)
    assert values["err_10"] == values["err_3"]


def test_metrics_ties_keep_input_order_and_no_relevant_scores_zero():
    tied = query_metrics(np.array([2.0, 0.0]), np.array([1.0, 1.0]), max_label=2)
    assert tied["ndcg_1"] == 1.0 and tied["err_1"] == pytest.approx(0.75)
    reversed_input = query_metrics(np.array([0.0, 2.0]), np.array([1.0, 1.0]), max_label=2)
    assert reversed_input["ndcg_1"] == 0.0
    none_relevant = query_metrics(np.zeros(4), np.arange(4.0), max_label=4)
    assert all(v == 0.0 for v in none_relevant.values())


def test_metrics_reject_bad_input():
    with pytest.raises(ValueError, match="exceeds max_label"):
        query_metrics(np.array([5.0, 0.0]), np.array([1.0, 0.0]), max_label=4)
    with pytest.raises(ValueError, match="query 1"):
        per_query_metrics([np.zeros(2), np.array([1.0, -1.0])], [np.zeros(2), np.zeros(2)], max_label=1)


def test_metrics_equal_ultra_functions(device):
    require_ultra()
    import torch
    import ultra

    from ultra_multr.compat.runtime import ranking_metrics, ultra_metric_device

    rng = np.random.default_rng(7)
    max_label = 4
    labels, scores = [], []
    for _ in range(25):
        n = int(rng.integers(2, 14))  # some lists shorter than the cutoffs
        labels.append(rng.integers(0, max_label + 1, size=n).astype(np.float64))
        scores.append(rng.normal(size=n))  # continuous: no ties
    ours = per_query_metrics(labels, scores, max_label)
    previous = ultra.utils.metrics.RankingMetricKey.MAX_LABEL
    ultra.utils.metrics.RankingMetricKey.MAX_LABEL = max_label
    try:
        cutoffs = [1, 3, 5, 10]
        for q in range(len(labels)):
            y = torch.tensor(labels[q][None, :], dtype=torch.float32, device=ultra_metric_device())
            s = torch.tensor(scores[q][None, :], dtype=torch.float32, device=ultra_metric_device())
            for family in ("ndcg", "err"):
                theirs = ultra.utils.make_ranking_metric_fn(family, cutoffs)(y, s, None).reshape(-1)
                mine = [ours["%s_%d" % (family, k)][q] for k in cutoffs]
                np.testing.assert_allclose(mine, theirs.cpu().numpy(), rtol=1e-5, atol=1e-6)
        # A padded batch on our model's device, as ULTRA validates: the batch mean equals our query mean.

        width = max(len(y) for y in labels)
        pad = lambda arrays: torch.tensor(
            np.array([np.pad(a, (0, width - len(a))) for a in arrays]), dtype=torch.float32, device=device
        )
        mask = torch.tensor([[i < len(a) for i in range(width)] for a in labels], device=device)
        batch = ranking_metrics(pad(labels), pad(scores), mask, ["ndcg", "err"], cutoffs)
        for name in METRICS:
            assert batch[name] == pytest.approx(ours[name].mean(), rel=1e-5)
    finally:
        ultra.utils.metrics.RankingMetricKey.MAX_LABEL = previous


# ----------------------------------------------------------------------------- significance


def test_randomization_test_exact_hand_computed():
    # d = (0.1, 0.2, 0.3), sum 0.6: of the 8 sign patterns only all-plus and
    # all-minus reach |sum| >= 0.6, so p = 2/8.
    assert randomization_test([0.5, 0.7, 0.9], [0.4, 0.5, 0.6]) == pytest.approx(0.25)
    # A zero difference doubles every count: p unchanged.
    assert randomization_test([0.5, 0.7, 0.9, 0.3], [0.4, 0.5, 0.6, 0.3]) == pytest.approx(0.25)
    # d = (1, 1, 1, 1, -1), |sum| = 3: |sum| >= 3 needs at most one sign
    # against the majority: 2 * (1 + 5) = 12 of 32 patterns.
    assert randomization_test([1, 1, 1, 1, 0], [0, 0, 0, 0, 1]) == pytest.approx(12 / 32)
    assert randomization_test([0.2, 0.4], [0.2, 0.4]) == 1.0


def test_randomization_test_monte_carlo_agrees_with_exact():
    rng = np.random.default_rng(3)
    a = rng.random(14)
    b = a + rng.normal(0.05, 0.2, size=14)
    exact = randomization_test(a, b)
    n = 20000
    sampled = randomization_test(a, b, n_permutations=n, seed=1, exact_max_queries=0)
    tolerance = 4 * math.sqrt(exact * (1 - exact) / n) + 1.0 / (n + 1)
    assert abs(sampled - exact) <= tolerance
    assert sampled == randomization_test(a, b, n_permutations=n, seed=1, exact_max_queries=0)


def test_randomization_test_rejects_bad_input():
    with pytest.raises(ValueError, match="equal length"):
        randomization_test([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        randomization_test([1.0, float("nan")], [1.0, 2.0])


# ----------------------------------------------------------------------------- TREC


def test_trec_run_and_qrels_format(tmp_path):
    text = format_run([("q1", ["d1", "d2", "d3"], np.array([0.5, 2.0, 0.5]))], tag="dla_seed0")
    assert text.splitlines() == [
        "q1 Q0 d2 1 2 dla_seed0",
        "q1 Q0 d1 2 0.5 dla_seed0",  # tie: input order kept
        "q1 Q0 d3 3 0.5 dla_seed0",
    ]
    assert "tensor" not in text
    assert format_qrels([("q1", ["d1", "d2"], np.array([2.0, 0.0]))]) == "q1 0 d1 2\nq1 0 d2 0\n"
    with pytest.raises(ValueError, match="whitespace"):
        format_run([("q1", ["d 1"], np.array([1.0]))], tag="t")
    with pytest.raises(ValueError, match="integers"):
        format_qrels([("q1", ["d1"], np.array([0.5]))])
    path = tmp_path / "run.trec"
    write_run(str(path), [("q2", ["a"], np.array([1.0]))], tag="t")
    assert path.read_text() == "q2 Q0 a 1 1 t\n"
    assert os.listdir(tmp_path) == ["run.trec"]  # no temporary file left


# ----------------------------------------------------------------------------- methods


def test_method_registry_settings_and_unknown_method():
    params = registry.RunParameters("d", "f", 0, registry.DEFAULT_SECTIONS)
    oracle = registry.get_method("oracle").make_settings(params)
    assert oracle["train_input_hparams"] == "oracle_mode=True"
    assert oracle["ranking_model_hparams"] == "hidden_layer_sizes=[512,256,128]"
    rand = registry.get_method("rand_multr").make_settings(params)
    assert rand["learning_algorithm"] == "ultra_multr.MULTR"
    assert "simulator_steps=0" in rand["learning_algorithm_hparams"].split(",")
    assert registry.known_methods()[:9] == [
        "oracle", "multr", "dla", "rem", "paird", "pal", "naive", "rand_multr", "eib_multr",
    ]
    with pytest.raises(registry.UnknownMethodError, match="known methods: oracle, multr, dla"):
        registry.get_method("mulrt")
    with pytest.raises(ValueError, match="cannot hold"):
        registry.format_hparams({"path": "a,b"})


# ----------------------------------------------------------------------------- runner

_FAKE_STEP = r"""
import json, os, sys
info = json.load(open("run.json"))
with open(sys.argv[1], "a") as log:
    log.write("%s %s %s\n" % (info["method"], info["seed"], os.environ["OMP_NUM_THREADS"]))
if os.path.exists(sys.argv[2]) and info["method"] == "multr":
    sys.exit(3)
names = sys.argv[3].split(",")
shift = 0.1 if info["method"] == "multr" else 0.0
rows = ["qid," + ",".join(names)]
for q in range(6):
    rows.append("q%d," % q + ",".join("%.3f" % (0.2 + 0.1 * q + shift) for _ in names))
open("per_query_metrics.csv", "w").write("\n".join(rows) + "\n")
"""


def _write_config(tmp_path, **extra):
    config = {
        "output_dir": "out",
        "datasets": {"toy": {"Fold1": "data1", "Fold2": "data2"}},
        "methods": ["dla", "multr"],
        "seeds": [0, 1],
        "settings": {"train_input_hparams": {"click_model_json": "cascade.json"}},
        "main_args": {"max_train_iteration": 10},
    }
    config.update(extra)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


def _fake_commands(tmp_path):
    script = tmp_path / "fake_step.py"
    script.write_text(_FAKE_STEP)
    log, crash = str(tmp_path / "calls.log"), str(tmp_path / "crash")
    commands = lambda run: [("fake", [sys.executable, str(script), log, crash, ",".join(METRICS)])]
    calls = lambda: (tmp_path / "calls.log").read_text().splitlines() if os.path.exists(log) else []
    return commands, calls, crash


def test_runner_config_expansion_and_paths(tmp_path):
    config = load_config(_write_config(
        tmp_path,
        sweeps=[{"name": "samples", "methods": ["multr"], "section": "learning_algorithm_hparams",
                 "parameter": "sample_num", "values": [2, 8]}],
    ))
    runs = expand_runs(config)
    assert len(runs) == 2 * 2 * 2 + 2 * 2 * 2  # (methods + sweep values) x folds x seeds
    dirs = {os.path.relpath(run.run_dir, str(tmp_path)) for run in runs}
    assert os.path.join("out", "runs", "toy", "Fold2", "dla", "seed1") in dirs
    assert os.path.join("out", "runs", "toy", "Fold1", "multr", "sample_num=8", "seed0") in dirs
    sweep_run = next(r for r in runs if r.info["variant"] == "sample_num=8")
    assert "sample_num=8" in sweep_run.settings["learning_algorithm_hparams"].split(",")
    assert sweep_run.info["sweep"] == {"name": "samples", "parameter": "sample_num", "value": 8}
    # Paths in the config are relative to it; ULTRA opens click models from the CWD.
    assert sweep_run.data_dir == str(tmp_path / "data1")
    assert "click_model_json=%s" % (tmp_path / "cascade.json") in sweep_run.settings["train_input_hparams"]
    assert sweep_run.main_args["max_train_iteration"] == 10
    # The run's seed reaches the algorithm and the feed, unless the config pins one.
    seed1 = next(r for r in runs if r.seed == 1)
    assert "seed=1" in seed1.settings["learning_algorithm_hparams"].split(",")
    assert "seed=1" in seed1.settings["train_input_hparams"].split(",")
    pinned = load_config(_write_config(tmp_path, settings={"train_input_hparams": {"seed": 7}}))
    assert all("seed=7" in r.settings["train_input_hparams"].split(",") for r in expand_runs(pinned))


def test_runner_unknown_method_lists_known_ones(tmp_path):
    with pytest.raises(registry.UnknownMethodError, match="'dlaa'.*known methods: .*dla.*multr"):
        load_config(_write_config(tmp_path, methods=["dlaa"]))
    with pytest.raises(ConfigError, match="unknown keys"):
        load_config(_write_config(tmp_path, method="dla"))
    with pytest.raises(ConfigError, match="test_only"):
        load_config(_write_config(tmp_path, main_args={"test_only": 1}))


def test_runner_refuses_names_that_share_a_folder_naming_both(tmp_path, capsys):
    from ultra_multr.experiments.runner.cli import main

    four_folds = {"Fold 1": "a", "Fold_1": "b", "Fold2": "c", "Fold3": "d"}  # the first two: one folder Fold_1
    config = _write_config(tmp_path, datasets={"toy": four_folds})
    assert main([config, "--dry-run"]) == 2  # before: 3 runs listed for 4 folds, one dropped silently
    assert "the fold names 'Fold 1' and 'Fold_1' both become the folder 'Fold_1'" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="dataset names 'my set' and 'my_set'"):
        load_config(_write_config(tmp_path, datasets={"my set": "a", "my_set": "b"}))
    sweep = {"name": "s", "methods": ["dla"], "section": "learning_algorithm_hparams", "parameter": "p",
             "values": ["x y", "x_y"]}
    with pytest.raises(ConfigError, match="share the folder .*p=x_y.*value 'x y' and .* value 'x_y'"):
        expand_runs(load_config(_write_config(tmp_path, sweeps=[sweep])))


@pytest.mark.slow
def test_runner_resumes_and_skips_finished_runs(tmp_path):
    commands, calls, crash = _fake_commands(tmp_path)
    runs = expand_runs(load_config(_write_config(tmp_path)))
    open(crash, "w").close()  # every multr run crashes this time
    out = str(tmp_path / "out")
    report = run_all(runs, out, workers=2, commands=commands, progress=False, threads=3)
    assert report.finished == 4 and len(report.failed) == 4 and report.skipped == 0
    failed_dir = next(iter(report.failed))
    assert os.path.exists(os.path.join(failed_dir, "failed.json"))
    assert not os.path.exists(os.path.join(failed_dir, "done.json"))
    assert all(line.split()[2] == "3" for line in calls())
    log = (tmp_path / "out" / "runner.log").read_text()  # progress is logged without a terminal
    assert "8 of 8 run(s) to do" in log and "[8/8]" in log and log.count("FAILED") == 4
    assert not os.path.exists(os.path.join(out, "runner.lock"))  # released

    os.remove(crash)
    leftover = os.path.join(failed_dir, "model", "partial.ckpt")  # as a killed run leaves it
    os.makedirs(os.path.dirname(leftover))
    open(leftover, "w").close()
    report = run_all(runs, out, workers=2, commands=commands, progress=False)
    assert not os.path.exists(leftover)  # restarted from a clean folder, not resumed mid-training
    assert os.path.exists(os.path.join(failed_dir, "done.json"))
    assert report.finished == 4 and report.skipped == 4 and not report.failed
    assert sorted(line.split()[0] for line in calls()[8:]) == ["multr"] * 4  # only the crashed ones re-ran

    report = run_all(runs, out, workers=1, commands=commands, progress=False)
    assert report.finished == 0 and report.skipped == 8 and len(calls()) == 12

    # The same folders under a changed configuration are refused, not reused.
    changed = expand_runs(load_config(_write_config(tmp_path, main_args={"max_train_iteration": 20})))
    with pytest.raises(ConfigError, match="different configuration"):
        run_all(changed, out, commands=commands, progress=False)

    # So are they when one of our algorithm's defaults changes (the settings name no rerank_weight).
    import dataclasses
    from ultra_multr.algorithms.multr import MULTR, MULTRConfig

    @dataclasses.dataclass(frozen=True)
    class OtherDefault(MULTRConfig):
        rerank_weight: str = "0"  # not MULTR's default ("paper")

    assert OtherDefault.rerank_weight != MULTRConfig.rerank_weight

    original = MULTR.config_class
    MULTR.config_class = OtherDefault
    try:
        with pytest.raises(ConfigError, match="different configuration"):
            run_all(expand_runs(load_config(_write_config(tmp_path))), out, commands=commands, progress=False)
    finally:
        MULTR.config_class = original

    # Re-prepared data (another prepare_report.json) makes the finished runs stale too.
    os.makedirs(str(tmp_path / "data1"))
    (tmp_path / "data1" / "prepare_report.json").write_text('{"rank_svm": {"min_queries": 20}}')
    with pytest.raises(ConfigError, match="on other data"):
        run_all(expand_runs(load_config(_write_config(tmp_path))), out, commands=commands, progress=False)
    os.remove(str(tmp_path / "data1" / "prepare_report.json"))

    written = aggregate(str(tmp_path / "out" / "runs"), str(tmp_path / "results"))
    table = (tmp_path / "results" / "toy.md").read_text()
    assert str(tmp_path / "results" / "toy.csv") in written
    assert "| MULTR | 0.550 ± 0.000" in table and "| DLA | 0.450 ± 0.000" in table


def test_runner_threads_follow_flag_then_environment_then_cores():
    assert resolve_threads(1, 3, environ={"OMP_NUM_THREADS": "2"}) == 3
    assert resolve_threads(1, None, environ={"OMP_NUM_THREADS": "2"}) == 2  # not cores // 1
    assert resolve_threads(4, None, environ={}) == max(1, (os.cpu_count() or 1) // 4)
    with pytest.raises(ValueError, match="OMP_NUM_THREADS='x'"):
        resolve_threads(1, None, environ={"OMP_NUM_THREADS": "x"})


_SLEEPING_RUNNER = r"""
import sys, time
from ultra_multr.experiments.runner.cli import expand_runs, load_config, run_all
runs = expand_runs(load_config(sys.argv[1]))[:1]
sleeper = lambda run: [("sleep", [sys.executable, "-c", "import time; time.sleep(60)"])]
run_all(runs, sys.argv[2], commands=sleeper, progress=False)
"""


def _wait_for(condition, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open("/proc/%d/stat" % pid) as handle:  # a zombie has ended
        return handle.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")
@pytest.mark.slow
def test_runner_lock_refuses_a_second_runner_and_children_die_with_a_killed_runner(tmp_path):
    config = _write_config(tmp_path)
    out = str(tmp_path / "out")
    script = tmp_path / "sleeping_runner.py"
    script.write_text(_SLEEPING_RUNNER)
    runner = subprocess.Popen([sys.executable, str(script), config, out])
    try:
        step = os.path.join(out, "runs", "toy", "Fold1", "dla", "seed0", "step.json")
        assert _wait_for(lambda: os.path.exists(step)), "the runner never started its step"
        child = json.loads(open(step).read())["pgid"]
        assert _alive(child)
        runs = expand_runs(load_config(config))
        with pytest.raises(RunnerLockError, match="pid %d on host %s" % (runner.pid, socket.gethostname())):
            run_all(runs, out, progress=False)
        assert _alive(child)  # the refused runner touched nothing

        runner.kill()  # SIGKILL: no handler runs in the runner
        runner.wait()
        assert _wait_for(lambda: not _alive(child), timeout=5.0), "the step outlived its SIGKILLed runner"
        # The dead runner's lock is stale: a restarted runner takes it over and says so; SIGTERM ends its step.
        os.remove(step)  # (the restart wipes the run folder; wait for its own step)
        runner = subprocess.Popen([sys.executable, str(script), config, out], stderr=subprocess.PIPE, text=True)
        assert _wait_for(lambda: os.path.exists(step)), "the restarted runner never started its step"
        child = json.loads(open(step).read())["pgid"]
        runner.terminate()
        _, stderr = runner.communicate(timeout=20)
        assert runner.returncode != 0 and not _alive(child)
        assert "taking over the stale lock of pid" in stderr
        assert not os.path.exists(os.path.join(out, "runner.lock"))  # released on the way out
    finally:
        runner.kill()
        runner.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the leftover check reads /proc/<pid>/cwd")
@pytest.mark.slow
def test_restart_kills_a_step_left_running_in_the_run_folder_before_wiping_it(tmp_path):
    commands, calls, _ = _fake_commands(tmp_path)
    runs = expand_runs(load_config(_write_config(tmp_path)))[:1]
    run_dir = runs[0].run_dir
    os.makedirs(run_dir)
    # As a runner that died without PR_SET_PDEATHSIG would leave it: a step still working in the folder.
    leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=run_dir,
                                start_new_session=True)
    reaper = threading.Thread(target=leftover.wait)  # as init reaps an orphan
    reaper.start()
    try:
        with open(os.path.join(run_dir, "step.json"), "w") as handle:
            json.dump({"step": "train", "pgid": leftover.pid, "host": socket.gethostname()}, handle)
        report = run_all(runs, str(tmp_path / "out"), commands=commands, progress=False)
        assert report.finished == 1
        reaper.join(timeout=10)
        assert leftover.returncode == -signal.SIGTERM  # killed, not left to write into the new attempt
        assert not os.path.exists(os.path.join(run_dir, "step.json"))
    finally:
        leftover.kill()
        leftover.wait()


_NOISY_FAILING_STEP = r"""
import sys
for i in range(6000):  # interleaved: the runner must drain stderr while stdout goes to its file
    sys.stdout.write("stdout line %06d\n" % i)
    sys.stderr.write("stderr line %06d of a long step\n" % i)
sys.stderr.write("ValueError: the cause\n")
sys.exit(3)
"""


@pytest.mark.slow
def test_a_failed_step_keeps_its_whole_stderr_and_reports_its_tail(tmp_path):
    from ultra_multr.experiments.runner.stderr_copy import TAIL_BYTES

    (run,) = expand_runs(load_config(_write_config(tmp_path)))[:1]
    argv = [sys.executable, "-c", _NOISY_FAILING_STEP]
    report = run_all([run], str(tmp_path / "out"), commands=lambda run: [("train", argv)], progress=False)
    stderr = "".join("stderr line %06d of a long step\n" % i for i in range(6000)) + "ValueError: the cause\n"
    assert open(os.path.join(run.run_dir, "train.stderr")).read() == stderr  # complete, ~190 kB
    assert open(os.path.join(run.run_dir, "train.stdout")).read() == "".join("stdout line %06d\n" % i for i in range(6000))

    failed = json.loads(open(os.path.join(run.run_dir, "failed.json")).read())
    reason = "step 'train' exited with code 3 (its stderr: %s)" % os.path.join(run.run_dir, "train.stderr")
    assert failed["reason"] == reason and failed["argv"] == argv
    tail = failed["stderr_tail"]  # the last 64 KiB, cut at a line start
    assert stderr.endswith(tail) and stderr[-len(tail) - 1] == "\n" and TAIL_BYTES - 50 < len(tail) <= TAIL_BYTES

    last_lines = "".join("\n    stderr line %06d of a long step" % i for i in range(5981, 6000)) + "\n    ValueError: the cause"
    assert report.failed == {run.run_dir: reason + "; its stderr ended with:" + last_lines}
    assert ("FAILED %s: %s" % (run.run_dir, report.failed[run.run_dir])) in (tmp_path / "out" / "runner.log").read_text()


# ----------------------------------------------------------------------------- tables


def _records(method, role, values_by_fold, seeds=(0, 1), variant=None, sweep=None):
    """Runs of one method: per fold, the [n] per-query values (same for every metric)."""
    records = []
    for fold, values in values_by_fold.items():
        for seed in seeds:
            info = {"dataset": "toy", "fold": fold, "method": method, "label": method.upper(), "role": role,
                    "order": registry.table_order(method), "variant": variant, "sweep": sweep, "seed": seed}
            per_query = {"q%d" % i: {m: float(v) for m in METRICS} for i, v in enumerate(values)}
            records.append(RunRecord(info=info, per_query=per_query))
    return records


def test_table_marks_only_significant_multr_rows():
    rng = np.random.default_rng(0)
    base = {fold: rng.uniform(0.3, 0.6, size=30) for fold in ("F1", "F2")}
    records = (
        _records("oracle", "oracle", {f: v + 0.2 for f, v in base.items()})
        + _records("dla", "baseline", base)
        + _records("naive", "baseline", {f: v - 0.05 for f, v in base.items()})
        + _records("multr", "multr", {f: v + 0.05 for f, v in base.items()})
        + _records("rand_multr", "multr", {f: v + rng.normal(0, 0.05, size=30) for f, v in base.items()})
    )
    table = build_table(records, "toy", None, n_permutations=2000)
    rows = {row.method: row for row in table.rows}
    assert [row.method for row in table.rows] == ["oracle", "multr", "dla", "naive", "rand_multr"]
    assert table.best_baseline == {m: "dla" for m in METRICS}
    assert all(rows["multr"].significant.values()) and rows["multr"].p_value["ndcg_10"] < 0.01
    assert not any(rows["rand_multr"].significant.values())
    assert not rows["dla"].p_value and not rows["oracle"].significant
    assert table.n_pooled_queries["multr"] == 60  # 30 queries x 2 folds, seeds averaged
    assert rows["multr"].gap_closed["err_3"] == pytest.approx(0.25)  # +0.05 of a 0.2 gap

    markdown = format_markdown(table)
    multr_line = next(line for line in markdown.splitlines() if line.startswith("| MULTR |"))
    assert multr_line.count("*") == len(METRICS)
    rand_line = next(line for line in markdown.splitlines() if line.startswith("| RAND_MULTR |"))
    assert "*" not in rand_line
    assert "| nDCG@1 | nDCG@3 | nDCG@5 | nDCG@10 | ERR@1 | ERR@3 | ERR@5 | ERR@10 |" in markdown
    assert "| MULTR | 25% |" in markdown
    p_line = next(line for line in markdown.splitlines() if line.startswith("| MULTR | 0.0"))
    assert p_line.count("(better)") == len(METRICS)  # each p value says which way the difference goes
    assert not table.incomplete and "INCOMPLETE" not in markdown

    lines = format_csv(table).splitlines()
    header = lines[0].split(",")
    multr = dict(zip(header, next(l for l in lines if l.startswith("multr,")).split(",")))
    assert multr["ndcg_10_significant"] == "1" and multr["ndcg_10_best_baseline"] == "dla"
    assert float(multr["ndcg_10"]) == pytest.approx(np.mean(np.concatenate(list(base.values()))) + 0.05)
    dla = dict(zip(header, next(l for l in lines if l.startswith("dla,")).split(",")))
    assert dla["ndcg_10_p"] == "" and dla["n_runs"] == "4"
    assert multr["ndcg_10_direction"] == "better"


def test_gap_is_na_when_oracle_is_not_above_dla_and_p_values_say_worse():
    base = {"F1": np.linspace(0.3, 0.6, 20)}
    records = (
        _records("oracle", "oracle", {f: v - 0.01 for f, v in base.items()})
        + _records("dla", "baseline", base)
        + _records("multr", "multr", {f: v - 0.05 for f, v in base.items()})
    )
    table = build_table(records, "toy", None, n_permutations=200)
    multr = next(row for row in table.rows if row.method == "multr")
    assert all(multr.gap_closed[m] is None for m in METRICS)
    assert all(multr.direction[m] == "worse" and not multr.significant[m] for m in METRICS)
    markdown = format_markdown(table)
    assert "| MULTR | %s |" % " | ".join(["n/a (Oracle <= DLA)"] * len(METRICS)) in markdown
    assert "(worse)" in markdown and "(better)" not in markdown
    multr_csv = next(l for l in format_csv(table).splitlines() if l.startswith("multr,"))
    assert multr_csv.count(",n/a,") == len(METRICS)


def _write_runs(runs_dir, records):
    """Finished run folders (run.json, per_query_metrics.csv, done.json) for ``records``."""
    for i, record in enumerate(records):
        run_dir = runs_dir / ("%s_%s_%d" % (record.info["method"], record.info["fold"], i))
        run_dir.mkdir(parents=True)
        (run_dir / "run.json").write_text(json.dumps(record.info))
        rows = ["qid," + ",".join(METRICS)] + [
            q + "," + ",".join(str(v[m]) for m in METRICS) for q, v in record.per_query.items()
        ]
        (run_dir / "per_query_metrics.csv").write_text("\n".join(rows) + "\n")
        (run_dir / "done.json").write_text("{}")


def test_incomplete_groups_are_marked(tmp_path):
    base = {"F1": np.linspace(0.3, 0.6, 10), "F2": np.linspace(0.2, 0.5, 10)}
    records = _records("dla", "baseline", base) + _records("multr", "multr", base)
    records = [r for r in records if not (r.info["method"] == "multr" and r.info["fold"] == "F2" and r.info["seed"])]
    table = build_table(records, "toy", None, n_permutations=100)
    assert table.incomplete == ["multr/F2 has 1 of 2 seeds"]
    assert "### toy -- INCOMPLETE" in format_markdown(table) and "multr/F2 has 1 of 2 seeds" in format_markdown(table)
    # Through aggregate: a run folder without done.json (still running) marks its group too.
    runs_dir = tmp_path / "runs"
    _write_runs(runs_dir, _records("dla", "baseline", {"F1": base["F1"]}))
    still_going = sorted(runs_dir.iterdir())[1]
    (still_going / "done.json").unlink()
    (still_going / "per_query_metrics.csv").unlink()
    aggregate(str(runs_dir), str(tmp_path / "results"), n_permutations=100)
    markdown = (tmp_path / "results" / "toy.md").read_text()
    assert "INCOMPLETE" in markdown and "1 run(s) not finished" in markdown


def test_compare_pairs_one_method_across_two_run_folders(tmp_path):
    from ultra_multr.experiments import compare

    rng = np.random.default_rng(1)
    base = {fold: rng.uniform(0.3, 0.6, size=40) for fold in ("F1", "F2")}
    _write_runs(tmp_path / "before", _records("multr", "multr", {f: v - 0.1 for f, v in base.items()}))
    _write_runs(tmp_path / "after", _records("multr", "multr", base) + _records("dla", "baseline", base))
    out = tmp_path / "table.md"
    assert compare.main([str(tmp_path / "before"), str(tmp_path / "after"), "--against", "dla",
                         "--permutations", "500", "--out", str(out)]) == 0
    rows = {line.split(" | ")[0].strip("| "): line for line in out.read_text().splitlines()[2:]}
    assert set(rows) == {"dla (4 runs)", "before (4 runs)", "after (4 runs)",
                         "before vs dla: p", "after vs dla: p", "after vs before: p"}
    assert rows["after vs before: p"].count("(better)") == len(METRICS)  # 0.1 higher on every query
    assert rows["before vs dla: p"].count("(worse)") == len(METRICS)
    assert rows["after vs dla: p"].count("1 (equal)") == len(METRICS)  # identical per-query values
    assert compare.main([str(tmp_path / "before"), str(tmp_path / "after"), "--method", "eib_multr"]) == 2


def test_compare_pairs_a_sweep_variant_with_the_default_in_one_folder(tmp_path):
    from ultra_multr.experiments import compare

    rng = np.random.default_rng(2)
    base = {fold: rng.uniform(0.3, 0.6, size=30) for fold in ("F1", "F2")}
    runs = tmp_path / "runs"
    _write_runs(runs / "default", _records("multr", "multr", base) + _records("dla", "baseline", base))
    _write_runs(runs / "fixed", _records(
        "multr", "multr", {f: v - 0.05 for f, v in base.items()}, variant="rerank_weight=0",
        sweep={"name": "rerank_weight", "parameter": "rerank_weight", "value": "0"}))
    out = tmp_path / "table.md"
    assert compare.main([str(runs), str(runs), "--variant-before", "rerank_weight=0", "--label-before", "a = 0",
                         "--label-after", "auto", "--permutations", "500", "--out", str(out)]) == 0
    rows = {line.split(" | ")[0].strip("| "): line for line in out.read_text().splitlines()[2:]}
    assert rows["auto vs a = 0: p"].count("(better)") == len(METRICS)  # the default runs, not the sweep's
    assert rows["a = 0 vs dla: p"].count("(worse)") == len(METRICS)
    assert compare.main([str(runs), str(runs), "--variant-before", "rerank_weight=paper"]) == 2  # no such runs


def test_compare_keeps_only_the_given_seeds_and_takes_the_baseline_from_the_after_variant(tmp_path, capsys):
    from ultra_multr.experiments import compare

    rng = np.random.default_rng(3)
    base = {fold: rng.uniform(0.3, 0.6, size=30) for fold in ("F1", "F2")}
    k4 = dict(variant="sessions_per_query=4", sweep={"name": "K", "parameter": "sessions_per_query", "value": 4})
    # The after folder: seed 0 equal to the before runs, seed 1 far above; DLA in the same sweep variant.
    _write_runs(tmp_path / "before", _records("multr", "multr", base, seeds=(0,), **k4))
    _write_runs(tmp_path / "after", _records("multr", "multr", base, seeds=(0,), **k4)
                + _records("multr", "multr", {f: v + 0.3 for f, v in base.items()}, seeds=(1,), **k4)
                + _records("dla", "baseline", {f: v - 0.1 for f, v in base.items()}, **k4))
    out = tmp_path / "table.md"
    argv = [str(tmp_path / "before"), str(tmp_path / "after"), "--variant-before", k4["variant"],
            "--variant-after", k4["variant"], "--permutations", "500", "--out", str(out)]
    assert compare.main(argv + ["--seeds", "0"]) == 0
    rows = {line.split(" | ")[0].strip("| "): line for line in out.read_text().splitlines()[2:]}
    assert {"dla (2 runs)", "before (2 runs)", "after (2 runs)"} <= set(rows)  # seed 1 of each left out
    assert rows["after vs before: p"].count("1 (equal)") == len(METRICS)
    assert rows["after vs dla: p"].count("(better)") == len(METRICS)
    assert compare.main(argv) == 0  # every seed: the after folder's seed 1 makes it better
    rows = {line.split(" | ")[0].strip("| "): line for line in out.read_text().splitlines()[2:]}
    assert "after (4 runs)" in rows and rows["after vs before: p"].count("(better)") == len(METRICS)
    assert compare.main(argv + ["--seeds", "7"]) == 2
    assert "no finished 'multr' run of variant 'sessions_per_query=4' of seeds 7" in capsys.readouterr().err


def test_sweep_figure_is_written(tmp_path):
    runs_dir = tmp_path / "runs"
    for value in (0, 2, 8):
        _write_runs(runs_dir / ("v%d" % value), _records(
            "multr", "multr", {"F1": np.full(5, 0.4 + value / 100)}, variant="sample_num=%d" % value,
            sweep={"name": "samples", "parameter": "sample_num", "value": value}))
    written = aggregate(str(runs_dir), str(tmp_path / "results"), n_permutations=100)
    figure = tmp_path / "results" / "toy__samples__multr.png"
    assert str(figure) in written
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "results" / "toy__sample_num=8.md").exists()


def test_sweep_figure_names_its_axes_and_one_value_gives_no_figure(tmp_path):
    import matplotlib.pyplot as plt

    sweep = lambda k: {"name": "K", "parameter": "sessions_per_query", "value": k}
    records = [r for k in (1, 4, 16) for r in _records("dla", "baseline", {"F1": np.full(4, 0.3 + k / 100)},
                                                        variant="sessions_per_query=%d" % k, sweep=sweep(k))]
    figure = sweep_figure(records, "toy")
    ndcg, err = figure.axes
    assert ndcg.get_xlabel() == err.get_xlabel() == "sessions per query (click budget)"
    assert [t.get_text() for t in ndcg.get_legend().get_texts()] == ["nDCG@1", "nDCG@3", "nDCG@5", "nDCG@10"]
    assert [t.get_text() for t in err.get_legend().get_texts()] == ["ERR@1", "ERR@3", "ERR@5", "ERR@10"]
    plt.close(figure)

    runs_dir = tmp_path / "runs"
    for i, record in enumerate(r for r in records if r.info["sweep"]["value"] == 4):
        run_dir = runs_dir / ("r%d" % i)
        run_dir.mkdir(parents=True)
        (run_dir / "run.json").write_text(json.dumps(record.info))
        rows = ["qid," + ",".join(METRICS)] + [q + "," + ",".join(str(v[m]) for m in METRICS) for q, v in record.per_query.items()]
        (run_dir / "per_query_metrics.csv").write_text("\n".join(rows) + "\n")
        (run_dir / "done.json").write_text("{}")
    written = aggregate(str(runs_dir), str(tmp_path / "results"), n_permutations=100)
    assert not [path for path in written if path.endswith(".png")]


# ----------------------------------------------------------------------------- evaluation


def test_evaluate_checkpoint_writes_consistent_outputs(tmp_path):
    require_ultra()
    import torch

    from ultra_multr.compat.runtime import create_ranking_model, score_documents
    from ultra_multr.generate.ultra_dataset import iter_synthetic_queries
    from ultra_multr.data.ultra_format import write_settings, write_split
    from ultra_multr.experiments.evaluate import evaluate_run, read_per_query_csv

    queries = list(iter_synthetic_queries(8, n_features=6, seed=5))
    queries[3].labels[:] = 0.0  # ULTRA's reader drops it
    write_split(str(tmp_path / "data"), "test", queries)
    write_settings(str(tmp_path / "data"), 6, 4)
    settings = {"ranking_model": "ultra.ranking_model.DNN", "ranking_model_hparams": "hidden_layer_sizes=[8]",
                "learning_algorithm": "ultra_multr.DLA"}
    torch.manual_seed(0)
    model = create_ranking_model(settings, 6, torch.device("cpu"))
    (tmp_path / "model").mkdir()
    torch.save(model.state_dict(), str(tmp_path / "model" / "ultra_multr.DLA.ckpt"))

    summary = evaluate_run(str(tmp_path / "data"), "test", settings, str(tmp_path / "model"), str(tmp_path / "out"),
                           tag="dla_seed0")
    assert summary["n_queries"] == 7 and summary["n_dropped_queries"] == 1
    per_query = read_per_query_csv(str(tmp_path / "out" / "per_query_metrics.csv"))
    assert list(per_query) == [q.qid for q in queries if q.labels.max() > 0]
    model.eval()
    with torch.no_grad():
        for query in queries[:3]:
            scores = score_documents(model, torch.tensor(query.features, dtype=torch.float32)).numpy()
            expected = query_metrics(query.labels, scores, max_label=4)
            for name in METRICS:
                assert per_query[query.qid][name] == pytest.approx(expected[name], abs=1e-8)
    assert summary["ndcg_10"] == pytest.approx(np.mean([v["ndcg_10"] for v in per_query.values()]))
    run_lines = (tmp_path / "out" / "run.trec").read_text().splitlines()
    assert len(run_lines) == sum(len(q.doc_ids) for q in queries if q.labels.max() > 0)
    first = [line.split() for line in run_lines if line.startswith(queries[0].qid + " ")]
    assert [int(f[3]) for f in first] == list(range(1, len(first) + 1))
    assert [float(f[4]) for f in first] == sorted((float(f[4]) for f in first), reverse=True)
    assert all(f[5] == "dla_seed0" for f in first)


def test_seeded_main_runs_script_as_main_with_seed(tmp_path):
    require_ultra()
    from ultra_multr.experiments.runner.seeded_main import main as seeded_main

    script = tmp_path / "main.py"
    out = tmp_path / "out.json"
    script.write_text(
        "import json, random, sys\n"
        "if __name__ == '__main__':\n"
        "    json.dump([sys.argv[1:], random.random()], open(%r, 'w'))\n" % str(out)
    )
    saved = list(sys.argv), list(sys.path)
    try:
        seeded_main(["--seed", "4", str(script), "--flag", "x"])
        first = json.loads(out.read_text())
        seeded_main(["--seed", "4", str(script), "--flag", "x"])
        assert json.loads(out.read_text()) == first
    finally:
        sys.argv[:], sys.path[:] = saved
    assert first[0] == ["--flag", "x"]


def test_settings_files_that_are_not_json_fail_naming_the_file(tmp_path):
    from ultra_multr.experiments.evaluate import main as evaluate_main
    from ultra_multr.experiments.runner.seeded_main import main as seeded_main

    bad = tmp_path / "settings.json"
    bad.write_text('{"learning_algorithm": "ultra_multr.DLA",\n "x": }\n')
    with pytest.raises(ConfigError, match=r"experiment config %s is not valid JSON: line 2 column" % re.escape(str(bad))):
        load_config(str(bad))
    script = tmp_path / "main.py"
    script.write_text("raise AssertionError('main.py must not start')\n")
    with pytest.raises(SystemExit, match=r"settings file %s is not valid JSON: line 2" % re.escape(str(bad))):
        seeded_main(["--seed", "0", str(script), "--setting_file", str(bad)])
    with pytest.raises(SystemExit, match=r"settings file %s is not valid JSON" % re.escape(str(bad))):
        evaluate_main(["--data_dir", str(tmp_path), "--setting_file", str(bad), "--model_dir", "m", "--out", "o"])


@pytest.mark.slow
def test_runner_trains_through_ultra_main_and_matches_ultra_evaluation(tmp_path):
    """One DLA run through ULTRA's unmodified main.py; our test metrics equal main.py --test_only's."""
    require_ultra()

    from ultra_multr.experiments.runner.cli import find_main_py

    try:
        main_py = find_main_py()
    except FileNotFoundError as error:
        pytest.skip(str(error))
    config = _write_config(tmp_path, datasets={"toy": "data"}, methods=["dla"], seeds=[0], **write_toy_study(tmp_path))
    (run,) = expand_runs(load_config(config))
    report = run_all([run], str(tmp_path / "out"), progress=False)
    assert not report.failed, report.failed
    summary = json.loads(open(os.path.join(run.run_dir, "metrics.json")).read())
    assert summary["n_queries"] == 8

    ultra_test = subprocess.run(
        [sys.executable, main_py, "--data_dir", os.path.join(run.data_dir, ""),
         "--setting_file", os.path.join(run.run_dir, "settings.json"),
         "--model_dir", os.path.join(run.run_dir, "model", ""), "--output_dir", str(tmp_path / "ultra_out") + "/",
         "--test_only", "True"],
        cwd=run.run_dir, capture_output=True, text=True,
    )
    assert ultra_test.returncode == 0, ultra_test.stderr[-2000:]
    line = next(l for l in ultra_test.stdout.splitlines() if l.strip().startswith("eval:"))
    theirs = {k: float(v) for k, v in re.findall(r"(\w+):([0-9.]+)", line)}
    for name in METRICS:
        assert summary[name] == pytest.approx(theirs[name], abs=6e-4)  # main.py prints 3 decimals


@pytest.mark.slow
def test_done_json_records_each_steps_peak_memory(tmp_path):
    """A step that holds 300 MiB shows it in done.json; the next step of the same run does not carry it over."""
    fake, _, _ = _fake_commands(tmp_path)
    # touched (resident, not just reserved), and held past two reads of the runner's poll
    hold = "import time; b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(1.2)"
    commands = lambda run: [("hold", [sys.executable, "-c", hold])] + fake(run)  # noqa: E731
    runs = expand_runs(load_config(_write_config(tmp_path)))[:1]
    report = run_all(runs, str(tmp_path / "out"), workers=1, commands=commands, progress=False)
    assert report.finished == 1 and not report.failed
    with open(os.path.join(runs[0].run_dir, "done.json")) as handle:
        peak = json.load(handle)["step_peak_rss_mib"]
    assert set(peak) == {"hold", "fake"}
    if os.path.exists("/proc/self/status"):
        assert 300 <= peak["hold"] < 400 and peak["fake"] < 150


def test_the_runner_checks_data_directories_python_and_main_py_before_it_starts(tmp_path, capsys, synthetic_data_dir):
    """A missing data directory, a directory without settings.json, an interpreter or a main.py that do not exist:
    all named at once, nothing started (it used to start the runs and fail each later)."""
    from ultra_multr.experiments.runner import cli as runner

    (tmp_path / "not_ultra").mkdir()
    path = _write_config(
        tmp_path, datasets={"toy": {"Fold1": str(tmp_path / "missing"), "Fold2": str(tmp_path / "not_ultra"),
                                    "Fold3": synthetic_data_dir}},
        python=str(tmp_path / "no_python"), main_py=str(tmp_path / "no_main.py"),
    )
    assert runner.main([path]) == 2
    err = capsys.readouterr().err
    assert "nothing started: 4 problem(s) would stop the runs at once" in err
    assert "data directory %s does not exist" % (tmp_path / "missing") in err
    assert "data directory %s holds no settings.json" % (tmp_path / "not_ultra") in err
    assert "python %s is not an executable file" % (tmp_path / "no_python") in err
    assert "ULTRA's main.py %s does not exist" % (tmp_path / "no_main.py") in err
    assert not os.path.exists(tmp_path / "out" / "runs")  # no run folder was made
