"""studies/simulator_designs/run.py: every design is a valid setting of the one trainer, every knob is pinned, and
the screening's rule chooses as it is written."""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest
from conftest import REPO_ROOT, require

require("ultra")
from ultra_multr.algorithms.multr import MULTRConfig  # noqa: E402
from ultra_multr.config import flat_values, knobs, parse_hparams  # noqa: E402

_SPEC = importlib.util.spec_from_file_location(
    "simulator_designs_run", os.path.join(REPO_ROOT, "studies", "simulator_designs", "run.py"))
study = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = study
_SPEC.loader.exec_module(study)


@pytest.mark.parametrize("name", list(study.DESIGNS))
def test_each_design_parses_and_differs_from_the_default_only_where_it_says(name):
    config, default = flat_values(study.design_config(name)), flat_values(study.design_config("default"))
    overrides = {k: tuple(v) if isinstance(v, list) else v for k, v in study.DESIGNS[name].items()}
    assert {k for k in config if config[k] != default[k]} == {k for k, v in overrides.items() if v != default[k]}
    assert name == "default" or any(v != default[k] for k, v in overrides.items())


def test_screening_methods_pin_every_knob_but_the_runs_own():
    for label, method in study.methods("screen", None).items():
        hparams = method["learning_algorithm_hparams"]
        assert {k: hparams[k] for k in study.STUDY_BASE} == dict(study.STUDY_BASE, **{
            k: v for k, v in study.DESIGNS[label[len("design_"):]].items() if k in study.STUDY_BASE}), label
        assert set(hparams) == set(knobs(MULTRConfig)) - set(study.UNPINNED), label
        text = ",".join("%s=%s" % (k, str(v).replace(" ", "").replace("'", "")) for k, v in hparams.items())
        assert flat_values(parse_hparams(MULTRConfig, text))["learning_rate"] == study.LEARNING_RATE


def _row(design, decile, seconds):
    return {"key": design, "design": study.OLD_DEFAULT if design == "default" else design, "decile_stat": decile,
            "simulator_s": seconds}


def test_the_rule_takes_the_smallest_median_decile_within_the_time_limit():
    rows = [_row("default", "-0.50", "100.0"), _row("fast_bad", "-1.50", "20.0"), _row("slow_good", "-0.05", "151.0"),
            _row("ok", "+0.30", "150.0"), _row(study.CONTROL, "0.0000", "0.0")]
    chosen, why = study.choose(rows)
    assert chosen == "ok"  # |+0.30| < |-0.50|; slow_good is over 1.5 x 100 s; the control never counts
    assert "slow_good" in why and study.CONTROL not in why.split("over the time limit")[-1]
    assert "the old_default design's 100.0 s" in why
    assert study.choose(rows[:2])[0] == "default"  # the key the grid's --design takes, not the table's name


def test_the_grid_names_the_arm_equal_to_multrs_defaults_default():
    """The table's ``default`` row is the design MULTR trains with today, by its config, not by a name kept by hand."""
    equal = [name for name in study.DESIGNS
             if flat_values(study.design_config(name)) == flat_values(MULTRConfig())]
    assert equal == ["authors_training"]
    assert study.arm_name("multr_authors_training") == "default"
    assert study.arm_name("multr_true") == study.CONTROL
    assert study.arm_name("multr_teacher_forcing_batch") == "teacher_forcing_batch"
    assert study.arm_name("multr_default") == study.OLD_DEFAULT  # the simulator's defaults when the study began
    assert study.arm_name("dla") == "dla" and study.arm_name("rand_paper") == "rand_paper"


class _Record:
    def __init__(self, run_dir):
        self.info = {"run_dir": run_dir, "fold": "set", "method": "multr_x"}


def test_a_stored_decile_statistic_is_read_only_while_its_inputs_hold(tmp_path):
    """The tables keep each run's statistic in its folder; a changed checkpoint or training split computes it again
    (here: tries to, and fails on the fake checkpoint), never reuses the stale value."""
    import json

    out, run_dir = tmp_path / "out", tmp_path / "run"
    (out / "data" / "set" / "train").mkdir(parents=True)
    (out / "data" / "set" / "train" / "train.feature").write_text("1 1:0.5\n")
    checkpoint = run_dir / study.SIMULATOR_CKPT
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"weights")
    data_dir = str(out / "data" / "set") + os.sep
    key = study.decile_key(str(checkpoint), data_dir, "cascade")
    (run_dir / study.DECILE_FILE).write_text(json.dumps({"key": key, "decile_statistic": -0.25}))
    assert study.decile_statistics(str(out), [_Record(str(run_dir))], "cascade") == {str(run_dir): -0.25}
    for change in (lambda: checkpoint.write_bytes(b"other weights"),
                   lambda: (out / "data" / "set" / "train" / "train.feature").write_text("1 1:0.6\n")):
        change()
        assert study.decile_key(str(checkpoint), data_dir, "cascade") != key
        with pytest.raises(Exception):
            study.decile_statistics(str(out), [_Record(str(run_dir))], "cascade")


def test_the_screening_runs_cascade_or_position_based_clicks_only(tmp_path, capsys):
    assert study.CLICK_MODELS["screen_pbm"] == study.PBM
    assert study.CLICK_MODELS["screen"] == study.CLICK_MODELS["cascade"]
    assert study.methods("screen_pbm", None) == study.methods("screen", None)  # the same designs, other clicks
    with pytest.raises(SystemExit):
        study.main(["screen", "--out", str(tmp_path), "--regime", "sparse"])
    assert "--regime sparse: the screening runs cascade or pbm clicks" in capsys.readouterr().err
    assert not os.listdir(tmp_path)  # refused before anything is written


def _examination_study():
    spec = importlib.util.spec_from_file_location(
        "examination_ranker_run", os.path.join(REPO_ROOT, "studies", "examination_ranker", "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _examination_config(exam, tmp_path, seeds):
    """The study's study.json in ``tmp_path``/exam on a made-up set; returns its path."""
    import json

    data = tmp_path / "data"
    data.mkdir()
    (data / "prepare_report.json").write_text("{}")
    out = tmp_path / "exam"
    out.mkdir()
    config = exam.screen.study_config(str(out), {"set": str(data)}, seeds, 2000, list(exam.arms([64])),
                                      exam.screen.CASCADE, definitions=exam.arms([64]))
    path = out / "study.json"
    path.write_text(json.dumps(config))
    return path


def test_the_examination_ranker_study_differs_from_the_default_arm_only_in_the_examination_ranker():
    arms = _examination_study().arms([64])
    (default_name, default), (small_name, small) = arms.items()
    assert default_name == "multr_authors_training"  # the grid's name for the design equal to the defaults
    a, b = default["learning_algorithm_hparams"], small["learning_algorithm_hparams"]
    assert {k for k in a if a[k] != b[k]} == {"examination_ranker_layers"} and b["examination_ranker_layers"] == [64]
    text = ",".join("%s=%s" % (k, str(v).replace(" ", "").replace("'", "")) for k, v in a.items())
    assert flat_values(parse_hparams(MULTRConfig, text)) == flat_values(MULTRConfig(learning_rate=study.LEARNING_RATE))


def test_the_examination_ranker_study_copies_only_grid_runs_whose_results_hold(tmp_path):
    """A grid run finished under the same fingerprint on the same data is copied; one of another configuration is
    not (the runner trains it here)."""
    import json

    from ultra_multr.experiments.runner.runs import expand_runs
    from ultra_multr.experiments.study_config import load_config

    exam = _examination_study()
    path = _examination_config(exam, tmp_path, [0, 1])
    grid = tmp_path / "grid"
    runs = [r for r in expand_runs(load_config(str(path))) if r.method == "multr_authors_training"]
    for run, fingerprint in zip(runs, [None, "another"]):
        source = grid / "runs" / run.info["dataset"] / run.info["fold"] / run.method / ("seed%d" % run.seed)
        source.mkdir(parents=True)
        (source / "done.json").write_text(json.dumps({"fingerprint": fingerprint or run.fingerprint,
                                                      "data": run.data_id}))
        (source / "metrics.json").write_text("{}")
    copied = exam.reuse_grid_runs(str(path), str(grid))
    assert copied == [runs[0].run_dir]
    assert sorted(os.listdir(runs[0].run_dir)) == ["done.json", "metrics.json"] and not os.path.exists(runs[1].run_dir)
    assert exam.reuse_grid_runs(str(path), str(grid)) == []  # done here: nothing copied again


def test_the_examination_ranker_table_pairs_each_run_with_the_defaults_run_of_its_seed(tmp_path):
    """The table of runs that hold for the study's config; a run folder that does not hold is named, none tabled."""
    import json
    from pathlib import Path

    import numpy as np
    from run_records import method_runs, write_runs

    from ultra_multr.experiments.runner.runs import expand_runs
    from ultra_multr.experiments.study_config import load_config

    exam = _examination_study()
    path = _examination_config(exam, tmp_path, [0, 1, 2])
    values = np.linspace(0.5, 0.9, 20)
    default, small = list(exam.arms([64]))
    runs = method_runs(default, "multr", {"set": values}, seeds=(0, 1, 2), dataset="recipe")
    for seed, shift in enumerate([-0.001, -0.002, -0.003]):
        runs += method_runs(small, "multr", {"set": values + shift}, seeds=(seed,), dataset="recipe")
    # each made-up run in the folder the runner gives it, finished under its fingerprint
    specs = {(r.method, r.seed): r for r in expand_runs(load_config(str(path)))}
    write_runs(tmp_path / "written", runs)
    for folder in sorted((tmp_path / "written").iterdir()):
        info = json.loads((folder / "run.json").read_text())
        spec = specs[(info["method"], info["seed"])]
        os.makedirs(os.path.dirname(spec.run_dir), exist_ok=True)
        os.rename(folder, spec.run_dir)
        done = {"fingerprint": spec.fingerprint, "data": spec.data_id}
        (Path(spec.run_dir) / "done.json").write_text(json.dumps(done))
    table = open(exam.table(str(path.parent), str(tmp_path / "results"))).read()
    rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in table.splitlines() if line.startswith("| MULTR")}
    assert list(rows) == ["MULTR (defaults)", "MULTR, examination_ranker_layers=[64]"]
    assert rows["MULTR (defaults)"][1:3] == ["3", "%.4f" % values.mean()]
    assert rows["MULTR, examination_ranker_layers=[64]"][3] == "-0.0020"  # the mean of the three seeds' shifts
    assert "at least -0.002" in table
    (Path(spec.run_dir) / "done.json").write_text(json.dumps({"fingerprint": "another", "data": spec.data_id}))
    with pytest.raises(SystemExit, match="do not hold"):
        exam.table(str(path.parent), str(tmp_path / "results"))
