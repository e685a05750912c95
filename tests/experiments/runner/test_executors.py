"""The runner on submitit's executors: the same results as the local pool, failures with their traceback, and
the SLURM job array's resources as the config sets them (no cluster needed)."""
import json
import os
import stat
import subprocess
import sys
import time

import pytest
from conftest import require, require_ultra, write_toy_study

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
