"""The runner on submitit's executors: the same results as the local pool, failures with their traceback, and
the SLURM job array's resources as the config sets them (no cluster needed)."""
import json
import os
import re
import stat
import subprocess
import sys
import time

import pytest
from conftest import REPO_ROOT, require, require_ultra, write_toy_study

from ultra_multr.experiments.runner.executors import ARRAY_FILE, make_executor, refuse_a_running_array
from ultra_multr.experiments.runner.cli import ConfigError, expand_runs, find_main_py, load_config, main, run_all
from ultra_multr.experiments.runner.slurm_config import sbatch_script

require("submitit")
# The jobs of submitit-local unpickle _fake_commands in another process, which cannot import this test module.
require("cloudpickle").register_pickle_by_value(sys.modules[__name__])

# A step as main.py + evaluate would leave it: per-query metrics that depend on the run and on its thread count.
_STEP = (
    "import json, os; info = json.load(open('run.json')); "
    "open('per_query_metrics.csv', 'w').write('qid,ndcg_1\\nq0,%s_%s_%s\\n' "
    "% (info['method'], info['seed'], os.environ['OMP_NUM_THREADS']))"
)


def _study(tmp_path, output_dir, **extra):
    config = {"output_dir": output_dir, "datasets": {"toy": "data"}, "methods": ["dla"], "seeds": [0, 1],
              "main_args": {"max_train_iteration": 3}, **extra}
    path = tmp_path / ("%s.json" % output_dir)
    path.write_text(json.dumps(config))
    return str(path)


def _fake_commands(run):
    if run.seed == 2:
        raise RuntimeError("no step for seed 2 in %s" % run.run_dir)
    return [("fake", [sys.executable, "-c", _STEP])]


@pytest.mark.parametrize("executor", ["debug", "submitit-local"])
@pytest.mark.slow
def test_a_study_on_submitit_gives_the_pool_results_and_a_raising_run_its_traceback(tmp_path, executor):
    outputs = {}
    for name in ("local", executor):
        runs = expand_runs(load_config(_study(tmp_path, name, seeds=[0, 1, 2])))
        report = run_all(runs, str(tmp_path / name), commands=_fake_commands, progress=False, threads=2,
                         executor=name)
        assert report.finished == 2 and list(report.failed) == [runs[2].run_dir]
        outputs[name] = [open(os.path.join(r.run_dir, "per_query_metrics.csv")).read() for r in runs[:2]]
        failed = json.loads(open(os.path.join(runs[2].run_dir, "failed.json")).read())
        assert "RuntimeError: no step for seed 2" in failed["reason"]
        assert "in _fake_commands" in failed["traceback"] and "execute_run" in failed["traceback"]
        assert "runs/toy/all/dla/seed2" in failed["traceback"]
        again = run_all(runs, str(tmp_path / name), commands=_fake_commands, progress=False, threads=2,
                        executor=name)  # resume: only the failed run is tried again
        assert again.skipped == 2 and again.finished == 0 and len(again.failed) == 1
    assert outputs[executor] == outputs["local"] == ["qid,ndcg_1\nq0,dla_0_2\n", "qid,ndcg_1\nq0,dla_1_2\n"]
    if executor == "submitit-local":  # the job's own log is named for a job that ran elsewhere
        assert os.path.isfile(failed["job_stderr"])


@pytest.mark.slow
def test_a_finished_study_needs_no_cluster_to_be_skipped(tmp_path):
    runs = expand_runs(load_config(_study(tmp_path, "out")))
    assert run_all(runs, str(tmp_path / "out"), commands=_fake_commands, progress=False).finished == 2
    report = run_all(runs, str(tmp_path / "out"), commands=_fake_commands, progress=False, executor="slurm")
    assert report.skipped == 2 and report.finished == 0 and not report.failed  # no srun here: nothing submitted


@pytest.mark.slow
def test_a_main_py_run_through_a_submitit_job_equals_the_pool_bitwise(tmp_path):
    """A DLA run through ULTRA's main.py in a pickled submitit job (as on SLURM) writes the pool's metrics."""
    require_ultra()

    try:
        find_main_py()
    except FileNotFoundError as error:
        pytest.skip(str(error))
    study = dict(seeds=[3], **write_toy_study(tmp_path))
    metrics = {}
    for name in ("local", "submitit-local"):
        (run,) = expand_runs(load_config(_study(tmp_path, name, **study)))
        report = run_all([run], str(tmp_path / name), progress=False, threads=1, executor=name)
        assert report.finished == 1 and not report.failed, report.failed
        metrics[name] = open(os.path.join(run.run_dir, "per_query_metrics.csv"), "rb").read()
        assert len(metrics[name].splitlines()) == 1 + 8  # a header and the 8 test queries
    assert metrics["submitit-local"] == metrics["local"]


SLURM = {"partition": "gpu", "time_min": 90, "cpus_per_task": 4, "gpus_per_node": 1, "mem_gb": 16,
         "array_parallelism": 2, "account": "proj42", "qos": "normal", "setup": ["module load python/3.11"],
         "additional_parameters": {"mail_type": "FAIL"}}


def test_slurm_job_array_resources_come_from_the_config(tmp_path, capsys, monkeypatch):
    config = _study(tmp_path, "out", seeds=[0, 1, 2], slurm=SLURM)
    assert main([config, "--executor", "slurm", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    script = printed[printed.index("#!/bin/bash"):]
    sbatch = {line for line in script.splitlines() if line.startswith("#SBATCH")}
    assert {"#SBATCH --partition=gpu", "#SBATCH --time=90", "#SBATCH --cpus-per-task=4", "#SBATCH --gpus-per-node=1",
            "#SBATCH --mem=16GB", "#SBATCH --array=0-2%2", "#SBATCH --account=proj42", "#SBATCH --qos=normal",
            "#SBATCH --mail-type=FAIL", "#SBATCH --job-name=ultra-multr"} <= sbatch
    assert "module load python/3.11" in script and "submitit.core._submit" in script
    assert os.path.join(str(tmp_path), "out", "jobs", "%j") in script

    # The executor the runner submits with writes the same script (sbatch needs srun on PATH to start).
    _fake_slurm_command(tmp_path, monkeypatch, "srun", "")
    folder = str(tmp_path / "out" / "jobs" / "%j")
    slurm = load_config(config).slurm
    executor = make_executor("slurm", folder, slurm)
    executor.parameters["map_count"] = 3  # as SlurmExecutor sets it for a three-run array
    assert executor._make_submission_file_text(executor._submitit_command_str, "x") == sbatch_script(slurm, folder, 3)


def _fake_slurm_command(tmp_path, monkeypatch, name, output):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir(exist_ok=True)
    (fake_bin / name).write_text("#!/bin/sh\nprintf '%s'\n" % output)
    (fake_bin / name).chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", "%s:%s" % (fake_bin, os.environ["PATH"]))


@pytest.mark.slow
def test_a_new_array_is_refused_while_the_last_one_of_the_folder_still_runs(tmp_path, monkeypatch):
    folder = str(tmp_path / "jobs")
    refuse_a_running_array(folder)  # nothing submitted yet
    os.makedirs(folder)
    (tmp_path / "jobs" / ARRAY_FILE).write_text(json.dumps({"array_id": "4242"}))
    _fake_slurm_command(tmp_path, monkeypatch, "squeue", "4242_3\\n4242_[4-9%%2]\\n")
    with pytest.raises(RuntimeError, match=r"2 job\(s\) .* still queued or running \(4242_3 .*scancel 4242"):
        refuse_a_running_array(folder)
    _fake_slurm_command(tmp_path, monkeypatch, "squeue", "")  # the array ended
    refuse_a_running_array(folder)


def test_slurm_config_mistakes_are_named(tmp_path):
    with pytest.raises(ConfigError, match=r"slurm: unknown key 'partiton' \(did you mean 'partition'\?\)"):
        load_config(_study(tmp_path, "out", slurm={"partiton": "gpu"}))
    with pytest.raises(ConfigError, match="slurm: cpus_per_task: expected int, got '4'"):
        load_config(_study(tmp_path, "out", slurm={"cpus_per_task": "4"}))
    with pytest.raises(ConfigError, match="time_min must be >= 1, got 0"):
        load_config(_study(tmp_path, "out", slurm={"time_min": 0}))


_SLEEPING_RUNNER = r"""
import sys
from ultra_multr.experiments.runner.cli import expand_runs, load_config, run_all
sleeper = lambda run: [("sleep", [sys.executable, "-c", "import time; time.sleep(60)"])]
run_all(expand_runs(load_config(sys.argv[1])), sys.argv[2], commands=sleeper, progress=False, executor="submitit-local")
"""


def _ended(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie has ended
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.slow
def test_sigterm_to_the_runner_cancels_its_submitit_jobs(tmp_path):
    config = _study(tmp_path, "out", seeds=[0])
    script = tmp_path / "sleeping_runner.py"
    script.write_text(_SLEEPING_RUNNER)
    runner = subprocess.Popen([sys.executable, str(script), config, str(tmp_path / "out")], stderr=subprocess.PIPE)
    try:
        step = tmp_path / "out" / "runs" / "toy" / "all" / "dla" / "seed0" / "step.json"
        deadline = time.time() + 60
        while not step.exists() and time.time() < deadline:
            time.sleep(0.1)
        child = json.loads(step.read_text())["pgid"]  # the step, in the job's process
        assert not _ended(child)
        runner.terminate()
        runner.communicate(timeout=30)
        deadline = time.time() + 15
        while not _ended(child) and time.time() < deadline:
            time.sleep(0.1)
        assert _ended(child), "the job's step outlived the stopped runner"
        assert not (tmp_path / "out" / "runner.lock").exists()
    finally:
        runner.kill()
        runner.wait()


# The configured "python" of a study: seed 0's step holds 200 MiB, then kills itself; seed 1's kills its job's process
# (its parent) and itself; seed 2's, once its job recorded it in step.json, kills the job's wrapper (job_exit, its
# grandparent) and waits to die with the job; seed 3's, once recorded, sends SIGTERM to its job's process and waits.
_KILLING_PYTHON = """#!/bin/sh
case "$4" in
0) exec %s -c "import os, signal, time; b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(1.2)
os.kill(os.getpid(), signal.SIGKILL)" ;;
1) kill -9 $PPID $$ ;;
2) while [ ! -e step.json ]; do sleep 0.05; done
   read -r _ _ _ wrapper _ < /proc/$PPID/stat; kill -9 $wrapper; exec sleep 60 ;;
3) while [ ! -e step.json ]; do sleep 0.05; done
   kill -TERM $PPID; exec sleep 60 ;;
esac
""" % sys.executable
_RERUN = "; run the study again to rerun this run (its finished runs are kept)"
_SIGKILL = "; SIGKILL comes from a kill -9 or from the kernel's out-of-memory killer (dmesg names the processes it killed)"


def _killed_study(tmp_path, data_dir, name, seeds):
    python = tmp_path / "killing_python"
    python.write_text(_KILLING_PYTHON)
    python.chmod(stat.S_IRWXU)
    (tmp_path / "main.py").write_text("")  # never started: the python above runs instead
    click_model = os.path.join(REPO_ROOT, "settings", "click_models", "cascade_eps0.1_ymax4.json")
    config = _study(tmp_path, name, datasets={"toy": data_dir}, seeds=seeds, python=str(python),
                    main_py=str(tmp_path / "main.py"), settings={"train_input_hparams": {"click_model_json": click_model}})
    return [run.run_dir for run in expand_runs(load_config(config))], config


def _run_the_study(config, executor):
    """The runner as a user starts it; its report (run folder -> reason) and its console (stderr)."""
    done = subprocess.run([sys.executable, "-m", "ultra_multr.experiments.runner", config, "--executor", executor],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 1, done.stderr[-3000:]
    return dict(line[len("  FAILED "):].split(": ", 1) for line in done.stdout.splitlines()
                if line.startswith("  FAILED ")), done.stderr


def _step_killed(reason, run_dir):
    """Whether ``reason`` names the SIGKILL of seed 0's step in ``run_dir`` and its peak memory (200 MiB and a
    Python)."""
    memory = re.search(r"; its resident memory peaked at (\d+) MiB\)", reason)
    expected = ("step 'train' was killed by signal SIGKILL (9) (its stderr: %s/train.stderr; its resident memory "
                "peaked at M MiB)%s%s; its stderr was empty" % (run_dir, _SIGKILL, _RERUN))
    return memory and 200 < int(memory.group(1)) < 300 and reason.replace(memory.group(1), "M", 1) == expected


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.slow
def test_a_run_killed_by_sigkill_names_the_signal_or_says_that_none_was_recorded(tmp_path, synthetic_data_dir):
    """A step killed by SIGKILL (as the out-of-memory killer does), on the pool and in a submitit-local job, and a
    submitit-local job's own process killed by SIGKILL: the report names the signal (it said "exited with code -9"
    and "the job ended without a result (state FINISHED)"); a job whose wrapper was killed too is said to have
    left no exit status.  SIGTERM to a job's process reaches its step, and the console says so (submitit bypassed
    it: the runner waited for the step, saying nothing).  No run is left with a done.json."""
    (pool_run,), config = _killed_study(tmp_path, synthetic_data_dir, "pool", [0])
    report, _ = _run_the_study(config, "local")
    assert list(report) == [pool_run] and _step_killed(report[pool_run], pool_run), report

    run_dirs, config = _killed_study(tmp_path, synthetic_data_dir, "submitit", [0, 1, 2, 3])
    submitit_report, console = _run_the_study(config, "submitit-local")
    report.update(submitit_report)
    assert set(report) == {pool_run, *run_dirs}
    assert _step_killed(report[run_dirs[0]], run_dirs[0]), report[run_dirs[0]]
    killed_job, lost_job = (re.search(r"job (\d+)", report[run_dir]).group(1) for run_dir in run_dirs[1:3])
    logs = lambda job: "; its logs: {0}/{1}/{1}_0_log.err and {0}/{1}/{1}_0_log.out{2}".format(  # noqa: E731
        tmp_path / "submitit" / "jobs", job, _RERUN)
    assert re.sub(r"\(pid \d+\)", "(pid P)", report[run_dirs[1]]) == (
        "the process of job %s (pid P) was killed by signal SIGKILL (9) before it returned a result" % killed_job
        + _SIGKILL + logs(killed_job))
    assert report[run_dirs[2]] == ("the job %s ended without a result and without an exit status: killed (e.g. "
                                   "SIGKILL or the out-of-memory killer) or lost" % lost_job + logs(lost_job))
    assert re.fullmatch(r"step 'train' was killed by signal SIGTERM \(15\) \(its stderr: %s/train\.stderr; its resident "
                        r"memory peaked at \d+ MiB\)%s; its stderr was empty" % (re.escape(run_dirs[3]), re.escape(_RERUN)),
                        report[run_dirs[3]]), report[run_dirs[3]]
    assert re.search(r"job \d+ \(%s\): its process \(pid \d+\) got SIGTERM at \d\d:\d\d:\d\d and passed it on to "
                     r"the running step" % re.escape(run_dirs[3]), console), console[-3000:]
    for run_dir in report:  # the report adds a failed step's last stderr lines to failed.json's reason
        assert report[run_dir].startswith(json.loads(open(os.path.join(run_dir, "failed.json")).read())["reason"])
        assert not os.path.exists(os.path.join(run_dir, "done.json"))
    # the step of the job whose wrapper was killed died with the job
    assert _ended(json.loads(open(os.path.join(run_dirs[2], "step.json")).read())["pgid"])
