"""logger_guard=order_fit through MULTR as main.py builds it: it fires on a log whose logger ordered by the
labels (the stress group's generator) and leaves DLA's losses; it stays quiet in ULTRA's recipe."""
from __future__ import annotations

import logging

import pytest

from conftest import require_ultra
from algorithm_setup import build

ultra = require_ultra()

from test_multr_host_fallback import COMMON, SIMULATOR, trajectories  # noqa: E402
from ultra_multr.generate.ultra_recipe import Recipe, write_recipe_dataset  # noqa: E402
from ultra_multr.session_budget import LEDGER  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_ledger")

GUARD = "logger_guard=order_fit,logger_guard_min_queries=40"


def test_it_fires_on_a_label_ordered_log_and_multr_trains_as_dla(synthetic_data_dir, caplog):
    multr, feed, data = build(synthetic_data_dir, ",".join([COMMON, SIMULATOR, GUARD]))
    dla, _, _ = build(synthetic_data_dir, COMMON, algorithm="ultra_multr.DLA")
    with caplog.at_level(logging.WARNING, logger="ultra_multr"):
        multr.prepare_simulator()
    assert multr.simulator_fallback and "LOGGER GUARD FIRED" in caplog.text
    decisions = LEDGER.summary()["decisions"]
    guard = decisions["logger_guard"]
    assert guard["decision"] == "fired" and guard["host_losses"] is True and guard["agreement"] < 0.95
    assert "simulator_training" not in decisions  # no simulator was trained
    for multr_losses, dla_losses in trajectories(multr, dla, feed, data, steps=3):
        assert multr_losses == pytest.approx(dla_losses, abs=1e-6)


def test_it_stays_quiet_in_ultras_recipe(tmp_path, caplog):
    data_dir = str(tmp_path / "recipe") + "/"
    write_recipe_dataset(data_dir, Recipe(train_queries=200, valid_queries=12, test_queries=12, features=10))
    multr, _, data = build(data_dir, ",".join([COMMON, SIMULATOR, GUARD]))
    with caplog.at_level(logging.INFO, logger="ultra_multr"):
        multr.prepare_simulator()
    guard = LEDGER.summary()["decisions"]["logger_guard"]
    assert guard["decision"] == "passed" and guard["agreement"] >= 0.95 and guard["training_queries"] == len(data.qids)
    assert not multr.simulator_fallback and "logger guard: passed" in caplog.text
    assert "simulator_training" in LEDGER.summary()["decisions"]


def test_too_few_queries_to_tell_fires_and_off_means_off(synthetic_data_dir, caplog):
    multr, _, data = build(synthetic_data_dir, ",".join([COMMON, SIMULATOR, "logger_guard=order_fit",
                                                         "logger_guard_min_queries=100"]))
    with caplog.at_level(logging.WARNING, logger="ultra_multr"):
        multr.prepare_simulator()
    guard = LEDGER.summary()["decisions"]["logger_guard"]
    assert guard["decision"] == "too_few_queries" and guard["training_queries"] == len(data.qids) < 100
    assert multr.simulator_fallback and "LOGGER GUARD: only %d training queries" % len(data.qids) in caplog.text
    LEDGER.reset()
    unguarded, _, _ = build(synthetic_data_dir, ",".join([COMMON, SIMULATOR]))
    unguarded.prepare_simulator()
    decisions = LEDGER.summary()["decisions"]
    assert "logger_guard" not in decisions and "simulator_training" in decisions and not unguarded.simulator_fallback
