"""What a user runs first: the README's demo command, every shipped settings file and each data layout.

All through ULTRA's unmodified main.py in subprocesses, on small data: the
demo on ULTRA's own toy data (its checkout ships it), the settings on
generated data, with short simulator phases.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from typing import Dict, List

import pytest
from conftest import REPO_ROOT, require_ultra, run_ultra_main
from ultra_multr.config import split_assignments

ultra = require_ultra()

from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset  # noqa: E402

pytestmark = pytest.mark.slow  # every test here starts a process

SETTINGS_DIR = os.path.join(REPO_ROOT, "settings")
SETTINGS_FILES = sorted(name for name in os.listdir(SETTINGS_DIR) if name.endswith(".json"))
#: Test-sized values of hparams a settings file may set (only those it sets are shortened).
SHORT_HPARAMS = {"simulator_steps": "4"}
#: Added to every MULTR setting so its phases stay short.  logger_guard=none: the test data's logger orders by the
#: label plus noise on 60 training queries, so the logger guard (on by default) would fire and each MULTR file would
#: train as DLA, its own simulator and loss untested (tests/algorithms/test_logger_guard.py tests the guard).
#: simulator_min_heldout_sessions=1: the test data hold out a few dozen sessions, and MULTR does not train a simulator
#: too few of them would judge (simulator_guard=position would not use it); these runs go through its training.
SHORT_MULTR_HPARAMS = {"simulator_batch_size": "16", "rerank_pilot_steps": "2", "simulator_log_every": "2",
                       "logger_guard": "none", "simulator_min_heldout_sessions": "1"}


def readme_demo_command() -> List[str]:
    """The README's main command line for the demo: `python example/demo.py ...` as written there."""
    with open(os.path.join(REPO_ROOT, "README.md")) as handle:
        readme = handle.read()
    found = re.search(r"python (example/demo\.py[^&`\n]*)", readme)
    assert found, "README.md has no `python example/demo.py ...` command"
    return shlex.split(found.group(1))


def test_the_readme_demo_command_prints_its_table(tmp_path):
    command = readme_demo_command()
    assert command[:3] == ["example/demo.py", "--ultra", "ULTRA_pytorch"], command
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(ultra.__file__)))
    if not os.path.isdir(os.path.join(REPO_ROOT, command[2])):  # ULTRA installed from elsewhere
        command[2] = checkout
    # Only --steps changes (and --out, to keep the checkout clean).
    command += ["--steps", "8", "--out", str(tmp_path / "demo")]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    completed = subprocess.run(
        [sys.executable] + command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=240
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]
    rows = [line for line in completed.stdout.splitlines() if line.startswith("|")]
    header = rows[0].strip("|").split("|")
    assert [h.strip() for h in header[:2]] == ["method", "ndcg_1"] and len(header) == 9, rows
    table: Dict[str, List[float]] = {
        row.strip("|").split("|")[0].strip(): [float(v) for v in row.strip("|").split("|")[1:]] for row in rows[2:]
    }
    assert sorted(table) == ["DLA", "MULTR"]
    # ULTRA's toy data are too few queries for MULTR's logger guard: the demo switches it off and says so
    assert "note: MULTR runs with logger_guard=none" in completed.stdout
    assert all(0.0 < value <= 1.0 for values in table.values() for value in values), table


def short_settings(name: str, directory: str, **extra: str) -> str:
    """settings/<name> with its phases shortened and ``extra`` hparams set, written to directory (click-model
    paths made absolute)."""
    with open(os.path.join(SETTINGS_DIR, name)) as handle:
        settings = json.load(handle)
    hparams = dict(item.split("=", 1) for item in split_assignments(settings["learning_algorithm_hparams"]))
    for key, value in SHORT_HPARAMS.items():
        if key in hparams and hparams[key] != "0":
            hparams[key] = value
    if "MULTR" in settings["learning_algorithm"]:
        hparams.update(SHORT_MULTR_HPARAMS)
    hparams.update(extra)
    settings["learning_algorithm_hparams"] = ",".join("%s=%s" % kv for kv in hparams.items())
    feed = dict(item.split("=", 1) for item in settings["train_input_hparams"].split(",") if item)
    if "click_model_json" in feed:
        feed["click_model_json"] = os.path.join(SETTINGS_DIR, feed["click_model_json"])
        assert os.path.isfile(feed["click_model_json"]), (name, feed["click_model_json"])
    settings["train_input_hparams"] = ",".join("%s=%s" % kv for kv in feed.items())
    path = os.path.join(directory, name)
    with open(path, "w") as handle:
        json.dump(settings, handle)
    return path


def train_args(settings: str, data_dir: str, model_dir: str) -> List[str]:
    return [
        "--setting_file", settings, "--data_dir", data_dir, "--model_dir", model_dir,
        "--output_dir", os.path.join(model_dir, "out", ""), "--batch_size", "16",
        "--max_train_iteration", "2", "--steps_per_checkpoint", "2",
    ]


#: A line of the training's output (log_every=1) that proves the settings file's own class ran.
PROOFS = {
    "naive_cascade.json": "step 2 loss",
    "rem_cascade.json": "examination_last",
    "paird_cascade.json": "t_plus_last",
    "pal_cascade.json": "seen_last",
    "ipw_pbm_eta1.json": "IPW propensities by position: 1, 0.5, 0.3333",
    "multr_ipw_pbm_eta1.json": "user simulator: step 4/4",
}


@pytest.mark.parametrize("name", SETTINGS_FILES)
def test_every_settings_file_trains_through_main_py(ultra_main, synthetic_data_dir, tmp_path, name):
    """Each settings file once through main.py (this is the only test that runs them all there)."""
    assert len(SETTINGS_FILES) >= 10, SETTINGS_FILES
    assert set(PROOFS) <= set(SETTINGS_FILES), sorted(set(PROOFS) - set(SETTINGS_FILES))
    model_dir = str(tmp_path / name.replace(".json", ""))
    settings = short_settings(name, str(tmp_path), log_every="1")
    completed = run_ultra_main(ultra_main, train_args(settings, synthetic_data_dir, model_dir), cwd=str(tmp_path))
    output = completed.stdout + completed.stderr
    algorithm = json.load(open(os.path.join(SETTINGS_DIR, name)))["learning_algorithm"]
    assert os.path.isfile(os.path.join(model_dir, "%s.ckpt" % algorithm)), output[-1000:]
    assert re.search(r"^ndcg_10 [0-9.]+$", completed.stdout, re.M), output[-1000:]  # main.py's validation printout
    assert PROOFS.get(name, "") in output, output[-3000:]


def test_the_libsvm_layout_trains_and_evaluates_through_main_py(ultra_main, tmp_path):
    data_dir = write_synthetic_ultra_dataset(str(tmp_path / "libsvm"), {"train": 40, "valid": 8, "test": 8}, layout="libsvm")
    assert not os.path.exists(os.path.join(data_dir, "train", "train.feature"))
    settings = short_settings("multr_dla.json", str(tmp_path))
    model_dir = str(tmp_path / "model")
    run_ultra_main(ultra_main, train_args(settings, data_dir, model_dir), cwd=str(tmp_path))
    test = run_ultra_main(ultra_main, train_args(settings, data_dir, model_dir) + ["--test_only", "True"], cwd=str(tmp_path))
    assert re.search(r"ndcg_10:[0-9.]+", test.stdout), test.stdout[-1000:]
