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
    return {"design": design, "decile_stat": decile, "simulator_s": seconds}


def test_the_rule_takes_the_smallest_median_decile_within_the_time_limit():
    rows = [_row("default", "-0.50", "100.0"), _row("fast_bad", "-1.50", "20.0"), _row("slow_good", "-0.05", "151.0"),
            _row("ok", "+0.30", "150.0"), _row(study.CONTROL, "0.0000", "0.0")]
    chosen, why = study.choose(rows)
    assert chosen == "ok"  # |+0.30| < |-0.50|; slow_good is over 1.5 x 100 s; the control never counts
    assert "slow_good" in why and study.CONTROL not in why.split("over the time limit")[-1]
    assert study.choose(rows[:2])[0] == "default"
