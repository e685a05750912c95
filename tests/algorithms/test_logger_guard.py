"""logger_guard=order_fit, MULTR's default, through MULTR as main.py builds it: it fires on a log whose logger ordered
by the labels (the stress group's generator, which makes the suite's data) and leaves DLA's losses; it stays quiet in
ULTRA's recipe.  The other tests of MULTR switch it off (tests/algorithm_setup.py's SMALL_DATA_HPARAMS)."""
from __future__ import annotations

import logging

import pytest

from conftest import require_ultra
from algorithm_setup import build

ultra = require_ultra()

from test_multr_host_fallback import COMMON, SIMULATOR, trajectories  # noqa: E402
from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset  # noqa: E402
from ultra_multr.generate.ultra_recipe import Recipe, write_recipe_dataset  # noqa: E402
from ultra_multr.session_budget import LEDGER  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_ledger")

#: The guard at MULTR's defaults: algorithm_setup.build leaves logger_guard unset (its other test-sized hparams stay).
DEFAULT_GUARD = ("logger_guard",)


def test_multrs_default_guard_is_order_fit_with_its_documented_threshold_and_minimum():
    from ultra_multr.algorithms.multr import MULTRConfig

    guards = MULTRConfig().guards
    defaults = (guards.logger_guard, guards.logger_guard_threshold, guards.logger_guard_min_queries)
    assert defaults == ("order_fit", 0.95, 50)


def test_by_default_it_fires_on_a_label_ordered_log_and_multr_trains_as_dla(synthetic_data_dir, caplog):
    multr, feed, data = build(synthetic_data_dir, ",".join([COMMON, SIMULATOR]), keep_defaults=DEFAULT_GUARD)
    assert multr.hparams.guards.logger_guard == "order_fit"
    assert len(data.qids) >= multr.hparams.guards.logger_guard_min_queries
    dla, _, _ = build(synthetic_data_dir, COMMON, algorithm="ultra_multr.DLA")
    with caplog.at_level(logging.INFO, logger="ultra_multr"):
        multr.prepare()
    assert not multr.doubly_robust.used and "LOGGER GUARD FIRED" in caplog.text
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("ranker trained with: ")] == [
        "ranker trained with: DLA's own losses (MULTR trained as DLA: logger guard)"]
    decisions = LEDGER.summary()["decisions"]
    assert decisions["ranker_losses"] == {"algorithm": "MULTR", "trained_as": "DLA", "why": "logger guard"}
    guard = decisions["logger_guard"]
    assert guard["decision"] == "fired" and guard["host_losses"] is True and guard["agreement"] < 0.95
    assert "simulator_training" not in decisions  # no simulator was trained
    for multr_losses, dla_losses in trajectories(multr, dla, feed, data, steps=3):
        assert multr_losses == pytest.approx(dla_losses, abs=1e-6)


def test_by_default_it_stays_quiet_in_ultras_recipe(tmp_path, caplog):
    data_dir = str(tmp_path / "recipe") + "/"
    write_recipe_dataset(data_dir, Recipe(train_queries=200, valid_queries=12, test_queries=12, features=10))
    multr, _, data = build(data_dir, ",".join([COMMON, SIMULATOR]), keep_defaults=DEFAULT_GUARD)
    with caplog.at_level(logging.INFO, logger="ultra_multr"):
        multr.prepare()
    guard = LEDGER.summary()["decisions"]["logger_guard"]
    assert guard["decision"] == "passed" and guard["agreement"] >= 0.95 and guard["training_queries"] == len(data.qids)
    assert multr.doubly_robust.used and "logger guard: passed" in caplog.text
    assert "simulator_training" in LEDGER.summary()["decisions"]


def test_by_default_too_few_queries_to_tell_fires_and_off_means_off(tmp_path, caplog):
    """A small set (30 training queries, < logger_guard_min_queries=50), as toy data: by default MULTR trains as
    DLA; logger_guard=none trains the simulator anyway."""
    data_dir = write_synthetic_ultra_dataset(str(tmp_path / "small"), {"train": 30, "valid": 6, "test": 6})
    multr, _, data = build(data_dir, ",".join([COMMON, SIMULATOR]), keep_defaults=DEFAULT_GUARD)
    with caplog.at_level(logging.WARNING, logger="ultra_multr"):
        multr.prepare()
    guard = LEDGER.summary()["decisions"]["logger_guard"]
    assert guard["decision"] == "too_few_queries" and guard["training_queries"] == len(data.qids) == 30
    assert guard["min_queries"] == 50 and guard["host_losses"] is True
    assert not multr.doubly_robust.used and "LOGGER GUARD: only 30 training queries" in caplog.text
    assert "simulator_training" not in LEDGER.summary()["decisions"]
    LEDGER.reset()
    unguarded, _, _ = build(data_dir, ",".join([COMMON, SIMULATOR, "logger_guard=none"]))
    unguarded.prepare()
    decisions = LEDGER.summary()["decisions"]
    assert "logger_guard" not in decisions and "simulator_training" in decisions and unguarded.doubly_robust.used


def test_a_larger_minimum_of_queries_fires_on_the_suites_set(synthetic_data_dir, caplog):
    multr, _, data = build(synthetic_data_dir, ",".join([COMMON, SIMULATOR, "logger_guard=order_fit",
                                                         "logger_guard_min_queries=100"]))
    with caplog.at_level(logging.WARNING, logger="ultra_multr"):
        multr.prepare()
    guard = LEDGER.summary()["decisions"]["logger_guard"]
    assert guard["decision"] == "too_few_queries" and guard["training_queries"] == len(data.qids) < 100
    assert not multr.doubly_robust.used and "LOGGER GUARD: only %d training queries" % len(data.qids) in caplog.text
