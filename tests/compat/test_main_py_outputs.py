"""What ULTRA's main.py leaves behind with our algorithms: curves, ranklists, data errors."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, require_ultra, run_ultra_main

require_ultra()


def dla_settings(tmp_path):
    with open(os.path.join(REPO_ROOT, "settings", "dla_cascade.json")) as handle:
        settings = json.load(handle)
    settings["ranking_model_hparams"] = "hidden_layer_sizes=[16]"
    settings["train_input_hparams"] = "click_model_json=%s,seed=0" % os.path.join(
        REPO_ROOT, "settings", "click_models", "cascade_eps0.1_ymax4.json"
    )
    path = tmp_path / "dla.json"
    path.write_text(json.dumps(settings))
    return str(path)


def main_args(settings, model_dir, data_dir, *extra):
    return ["--setting_file", settings, "--data_dir", data_dir, "--model_dir", model_dir,
            "--output_dir", model_dir + "/out/", "--batch_size", "16"] + list(extra)


@pytest.mark.slow
def test_training_curves_and_a_trec_ranklist(ultra_main, synthetic_data_dir, tmp_path, monkeypatch, early_checks):
    """Also the early data checks (ultra_multr.compat.startup): these two runs are the suite's proof that
    they run in a second process whose results main.py's checks then reuse, and that they can be switched off."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setenv("ULTRA_MULTR_CACHE", str(tmp_path / "cache"))  # empty: only the second process fills it
    settings, model_dir = dla_settings(tmp_path), str(tmp_path / "model")
    train = run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--max_train_iteration", "3",
                                                 "--steps_per_checkpoint", "2"), cwd=str(tmp_path))
    assert re.search(r"data checks ran in a second process started at start-up \(pid \d+, exit status 0\); "
                     r"waited \d+\.\d s for it", train.stderr), train.stderr
    assert all("data checks of %s: the files are the ones that passed on" % split in train.stderr
               for split in ("train", "valid")), train.stderr
    events = EventAccumulator(os.path.join(model_dir, "train_log"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/rank_loss", "train/exam_loss"} <= tags
    assert {"propensity/position_%02d" % k for k in range(1, 11)} <= tags
    loss = events.Scalars("train/loss")
    assert [e.step for e in loss] == [1, 2, 3, 4] and all(e.value > 0 for e in loss)
    assert all(e.value == pytest.approx(1.0) for e in events.Scalars("propensity/position_01"))
    assert events.Scalars("propensity/position_10")[-1].value != pytest.approx(1.0)  # it learns

    monkeypatch.setenv("ULTRA_MULTR_EARLY_CHECKS", "0")
    test = run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--test_only", "True"),
                          cwd=str(tmp_path))
    assert "second process" not in test.stderr and "data checks of test passed" in test.stderr
    assert "data checks of test: the files are the ones" not in test.stderr  # checked here, in full
    with open(os.path.join(model_dir, "out", "test.ranklist")) as handle:
        lines = handle.read().splitlines()
    assert len(lines) == sum(1 for _ in open(os.path.join(synthetic_data_dir, "test", "test.feature")))
    trec = re.compile(r"^\S+ Q0 \S+ \d+ -?\d+(\.\d+)?(e[-+]\d+)? Model$")
    assert all(trec.match(line) for line in lines), lines[:3]
    first = [line.split() for line in lines if line.startswith(lines[0].split()[0] + " ")]
    assert [int(f[3]) for f in first] == list(range(1, len(first) + 1))
    scores = [float(f[4]) for f in first]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.slow
def test_main_py_names_a_bad_line_in_the_split_it_reads(ultra_main, tmp_path, early_checks):
    from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset

    data_dir = write_synthetic_ultra_dataset(str(tmp_path / "data"), {"train": 8, "valid": 3, "test": 3})
    path = os.path.join(data_dir, "test", "test.feature")
    with open(path) as handle:
        lines = handle.read().splitlines()
    lines[2] = lines[2].split(" ")[0] + " 3:nan"  # ULTRA would read it and print plausible metrics
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    settings = dla_settings(tmp_path)
    run = run_ultra_main(ultra_main, main_args(settings, str(tmp_path / "m"), data_dir, "--test_only", "True"),
                         cwd=str(tmp_path), check=False)
    assert run.returncode != 0
    # The early checks (a second process) failed too; main.py's own check names the line.
    assert re.search(r"(?s)started at start-up \(pid \d+, exit status 1\).*DataCheckError: \S+test\.feature:3: "
                     r"value of feature 3 is 'nan'; expected a finite number", run.stderr), run.stderr


def test_main_py_checks_the_splits_it_reads():
    from argparse import Namespace

    from ultra_multr.data.checks import splits_main_py_reads

    args = dict(train_data_prefix="train", valid_data_prefix="valid", test_data_prefix="test",
                click_model_dir=None, data_format="ULTRA", test_only=False, test_while_train=False)
    assert splits_main_py_reads(Namespace(**args)) == ["train", "valid"]
    assert splits_main_py_reads(Namespace(**dict(args, test_while_train=True))) == ["train", "valid", "test"]
    assert splits_main_py_reads(Namespace(**dict(args, test_only=True))) == ["test"]
    assert splits_main_py_reads(Namespace(**dict(args, click_model_dir="cm/"))) == ["train", "valid"]  # ULTRE: ultre_checks


@pytest.mark.slow
def test_main_py_failures_before_our_code_name_the_culprit(ultra_main, tmp_path, early_checks):
    """ULTRA reads the data and the settings before creating our algorithm: the start-up hook explains
    (while its early checks run in a second process)."""
    from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset

    data_dir = write_synthetic_ultra_dataset(str(tmp_path / "data"), {"train": 8, "valid": 3, "test": 3})
    with open(os.path.join(data_dir, "test", "test.labels")) as handle:
        lines = handle.read().splitlines()
    with open(os.path.join(data_dir, "test", "test.labels"), "w") as handle:  # every label 0
        handle.write("".join(l.split(" ")[0] + " 0" * (len(l.split(" ")) - 1) + "\n" for l in lines))
    settings = dla_settings(tmp_path)
    with pytest.raises(AssertionError, match=r"(?s)No valid query has been found.*ultra_multr: data check: split 'test'"):
        run_ultra_main(ultra_main, main_args(settings, str(tmp_path / "m"), data_dir, "--test_only", "True"), cwd=str(tmp_path))

    # the same through the runner's entry point: runpy restores __main__ before the exception reaches the hook
    seeded = subprocess.run(
        [sys.executable, "-m", "ultra_multr.experiments.runner.seeded_main", "--seed", "0", ultra_main]
        + main_args(settings, str(tmp_path / "m"), data_dir, "--test_only", "True"),
        cwd=str(tmp_path), capture_output=True, text=True, timeout=240,
    )
    assert seeded.returncode != 0 and "No valid query has been found" in seeded.stderr
    assert "ultra_multr: data check: split 'test'" in seeded.stderr

    broken = tmp_path / "broken.json"
    broken.write_text(open(settings).read().replace('"ultra.ranking_model.DNN",', '"ultra.ranking_model.DNN"'))
    with pytest.raises(AssertionError, match=r"ultra_multr: the settings file %s is not valid JSON: Expecting ',' delimiter: line \d+" % re.escape(str(broken))):
        run_ultra_main(ultra_main, main_args(str(broken), str(tmp_path / "m"), data_dir, "--test_only", "True"), cwd=str(tmp_path))
