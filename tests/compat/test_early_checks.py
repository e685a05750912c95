"""The early data checks: the start-up hook checks the splits main.py will read in a second process.

What main.py does with them (it waits, then its own checks reuse the cache the second process filled;
a bad file is still named by file and line; the off switch) is shown by the main.py runs of
tests/compat/test_main_py_outputs.py.  Here: which command lines start them, and a real interpreter start
of a stand-in main.py (the hook's part only, without torch or ULTRA: fast).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import require_ultra
from ultra_multr.compat import early_checks as hook
from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset

STAND_IN = """\
import ultra_multr.compat.early_checks as early_checks
print(early_checks.EARLY_CHECKS.args[3:] if early_checks.EARLY_CHECKS else None)
print(early_checks.wait_for_early_checks(60))
"""


@pytest.fixture()
def main_py(tmp_path):
    """A stand-in for ULTRA's main.py (beside an ``ultra`` package), small data and a settings file of ours."""
    (tmp_path / "ULTRA" / "ultra").mkdir(parents=True)
    (tmp_path / "ULTRA" / "main.py").write_text(STAND_IN)
    write_synthetic_ultra_dataset(str(tmp_path / "data"), {"train": 6, "valid": 3, "test": 3}, n_features=5)
    (tmp_path / "ours.json").write_text(json.dumps({"learning_algorithm": "ultra_multr.DLA"}))
    (tmp_path / "ultras.json").write_text(json.dumps({"learning_algorithm": "ultra.learning_algorithm.DLA"}))
    return str(tmp_path / "ULTRA" / "main.py")


def test_main_py_arguments_are_read_as_main_py_reads_them():
    def splits(*argv):
        args = hook.parse_main_py_argv(argv)
        return None if args is None else hook.splits_main_py_reads(args)

    assert splits("--data_dir", "d", "--batch_size", "16") == ["train", "valid"]
    assert splits("--data_dir=d", "--test_while_train", "1", "--valid_data_prefix=dev") == ["train", "dev", "test"]
    assert splits("--test_data_prefix", "t2", "--data_dir", "d", "--test_only=True") == ["t2"]
    assert splits("--data_dir", "d", "--test_only", "") == ["train", "valid"]  # type=bool: only "" is False
    assert splits("--batch_size", "16") is None  # no --data_dir
    assert splits("--data_dir", "d", "-h") is None
    args = hook.parse_main_py_argv(["--data_dir", "d", "--click_model_dir", "cm", "--setting_file=s.json"])
    assert (args.data_dir, args.click_model_dir, args.setting_file) == ("d", "cm", "s.json")


def test_which_starts_check_early(main_py, tmp_path, monkeypatch, early_checks):
    monkeypatch.chdir(tmp_path)

    def command(*args, script=main_py):
        found = hook.early_checks_command([script, "--setting_file", "ours.json"] + list(args))
        return None if found is None else found[1:]

    assert command("--data_dir", "data") == ["-m", "ultra_multr.data.checks", "data", "--splits", "train", "valid"]
    assert command("--data_dir", "data", "--test_only", "True")[-4:] == ["--splits", "test", "--ranklist_split", "test"]
    assert command("--data_dir", "data", script=str(tmp_path / "main.py")) is None  # no ultra package beside it
    assert command("--data_dir", "nowhere") is None
    assert command("--data_dir", "data", "--click_model_dir", "cm")[-2:] == ["--click_model_dir", "cm"]  # ULTRE
    assert command("--data_dir", "data", "--max_list_cutoff", "5")[-2:] == ["--max_list_cutoff", "5"]  # libsvm
    assert command("--data_dir", "data", "--max_list_cutoff", "x") is None  # main.py's argparse refuses it
    assert command("--data_dir", "data", "--setting_file", "ultras.json") is None  # ULTRA's own algorithm
    assert command("--data_dir", "data", "--setting_file", "missing.json") is None
    monkeypatch.setenv(hook.EARLY_CHECKS_ENV, "0")
    assert command("--data_dir", "data") is None


@pytest.mark.slow
def test_the_hook_starts_them_at_interpreter_start_and_the_switch_turns_them_off(main_py, tmp_path, early_checks):
    env = dict(os.environ, ULTRA_MULTR_CACHE=str(tmp_path / "cache"))

    def run(env):
        return subprocess.run([sys.executable, main_py, "--data_dir", "data", "--setting_file", "ours.json"],
                              cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120, check=True)

    off = run(dict(env, **{hook.EARLY_CHECKS_ENV: "0"}))
    assert off.stdout.splitlines() == ["None", "None"] and not (tmp_path / "cache").exists()
    lines = run(env).stdout.splitlines()
    assert lines[0] == "['data', '--splits', 'train', 'valid']"
    assert "second process started at start-up" in lines[1] and "exit status 0" in lines[1]
    assert len(os.listdir(tmp_path / "cache" / "checks")) == 2  # one passed split each


@pytest.mark.slow
def test_the_runners_seeded_main_starts_them_too(main_py, tmp_path, monkeypatch, capsys, early_checks):
    """The study runner starts main.py through seeded_main, whose own start the hook does not take for main.py's."""
    require_ultra()
    from ultra_multr.experiments.runner.seeded_main import main as seeded_main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ULTRA_MULTR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    seeded_main(["--seed", "0", main_py, "--data_dir", "data", "--setting_file", "ours.json", "--test_only", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "['data', '--splits', 'test', '--ranklist_split', 'test']" and "exit status 0" in lines[1]


@pytest.mark.slow
def test_a_second_process_that_does_not_finish_is_stopped(monkeypatch):
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(hook, "EARLY_CHECKS", process)
    assert "still running after 0.1 s; stopped it, checking here" in hook.wait_for_early_checks(0.1)
    assert process.returncode is not None and hook.EARLY_CHECKS is None
    assert hook.wait_for_early_checks() is None  # waited for once
