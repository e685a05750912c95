"""ultra_multr.experiments.runner: configs and their runs, resuming, the lock, the steps as subprocesses (their
threads, stderr and peak memory), the checks before a study starts, and a run through ULTRA's main.py."""
import json
import os
import re
import socket
import subprocess
import signal
import sys
import threading
import time

import pytest
from conftest import require_ultra, write_toy_study

from ultra_multr.experiments import methods as registry
from ultra_multr.experiments.aggregate import aggregate
from ultra_multr.metrics import metric_names
from ultra_multr.experiments.runner.cli import (
    ConfigError, RunnerLockError, expand_runs, load_config, resolve_threads, run_all,
)
from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset

METRICS = metric_names()


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
    write_synthetic_ultra_dataset(str(tmp_path / "data1"), {"train": 4, "valid": 2, "test": 2}, n_features=4)
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
    from ultra_multr.components.doubly_robust import DoublyRobustSettings
    from ultra_multr.config import group
    from ultra_multr.losses import RerankWeight

    @dataclasses.dataclass(frozen=True)
    class OtherDR(DoublyRobustSettings):
        rerank_weight: RerankWeight = RerankWeight.parse("0")  # not MULTR's default ("paper")

    @dataclasses.dataclass(frozen=True)
    class OtherDefault(MULTRConfig):
        dr: OtherDR = group(OtherDR)

    assert OtherDefault().dr.rerank_weight != MULTRConfig().dr.rerank_weight

    original = MULTR.config_class
    MULTR.config_class = OtherDefault
    try:
        with pytest.raises(ConfigError, match="different configuration"):
            run_all(expand_runs(load_config(_write_config(tmp_path))), out, commands=commands, progress=False)
    finally:
        MULTR.config_class = original

    # Re-prepared data (another prepare_report.json) makes the finished runs stale too.
    (tmp_path / "data1" / "prepare_report.json").write_text('{"rank_svm": {"min_queries": 20}}')
    with pytest.raises(ConfigError, match="on other data"):
        run_all(expand_runs(load_config(_write_config(tmp_path))), out, commands=commands, progress=False)
    os.remove(str(tmp_path / "data1" / "prepare_report.json"))

    # So does data edited by other means: the results are keyed by the content of every file a run read (before:
    # "0 run(s) finished, 8 skipped", the old labels' results reported).
    labels = tmp_path / "data1" / "test" / "test.labels"
    original = labels.read_text()
    labels.write_text(original.replace(" 0", " 1", 1))
    with pytest.raises(ConfigError) as stale:
        run_all(expand_runs(load_config(_write_config(tmp_path))), out, commands=commands, progress=False)
    fold1 = [run.run_dir for run in runs if "Fold1" in run.run_dir]
    assert str(stale.value) == (
        "4 run folder(s) were finished with a different configuration or on other data; their results do not hold: "
        "delete them or change output_dir:\n  " + "\n  ".join(
            "%s: finished on other data: since it was trained, %s changed" % (run_dir, labels) for run_dir in fold1))
    labels.write_text(original)  # the same bytes again: the same runs
    assert run_all(runs, out, commands=commands, progress=False).skipped == 8

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
        python=str(tmp_path / "no_python"), main_py=str(tmp_path / "no_main.py"), eval_split="tset",
        settings={"train_input_hparams": {"click_model_json": "cascade.json"}, "metrics": ["ndcg", "er"]},
    )
    assert runner.main([path]) == 2
    err = capsys.readouterr().err
    assert "nothing started: 7 problem(s) would stop the runs at once" in err
    # a misspelt eval_split and metric: before, each run trained in full, then failed (ULTRA's AssertionError)
    assert ("split 'tset': neither %s/tset/tset.feature (ULTRA's format) nor %s/tset/tset.txt (libsvm) exists; ULTRA "
            "reads one of them (\"eval_split\" of the config)" % (synthetic_data_dir.rstrip("/"),
                                                                   synthetic_data_dir.rstrip("/"))) in err
    for method in ("dla", "multr"):
        assert ("metrics of the settings of method %s: unknown metric 'er' (did you mean 'err'?); known: arp, dcg, err, "
                "map, mrr, ndcg, ordered_pair_accuracy, precision; ULTRA's metrics would refuse it at main.py's first "
                "validation (settings, method_overrides or extra_methods of the config)" % method) in err
    assert "data directory %s does not exist" % (tmp_path / "missing") in err
    assert "data directory %s holds no settings.json" % (tmp_path / "not_ultra") in err
    assert "python %s is not an executable file" % (tmp_path / "no_python") in err
    assert "ULTRA's main.py %s does not exist" % (tmp_path / "no_main.py") in err
    assert not os.path.exists(tmp_path / "out" / "runs")  # no run folder was made
