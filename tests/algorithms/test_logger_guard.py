"""logger_guard=order_fit, MULTR's default: its rule (fired more than the margin below the null agreement; below
the minimum of queries, the simulator kept only at the threshold), and through MULTR as main.py builds it: it fires on
a log whose logger ordered by the labels (the stress group's generator, which makes the suite's data) and leaves DLA's
losses; it stays quiet in ULTRA's recipe; and through main.py on web-LETOR-like features, where it passes a features-only
Rank SVM logger and fires on a label-aware one.  The other tests of MULTR switch it off (tests/algorithm_setup.py's SMALL_DATA_HPARAMS)."""
from __future__ import annotations

import json
import logging
import os
from types import SimpleNamespace

import pytest

from conftest import require_ultra
from algorithm_setup import build, main_args, settings_for

ultra = require_ultra()

from test_multr_host_fallback import COMMON, SIMULATOR, trajectories  # noqa: E402
from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset  # noqa: E402
from ultra_multr.generate.ultra_recipe import Recipe, write_recipe_dataset  # noqa: E402
from ultra_multr.components import guards  # noqa: E402
from ultra_multr.config import identity, parse_hparams  # noqa: E402
from ultra_multr.logged_order import OrderFit  # noqa: E402
from conftest import run_ultra_main  # noqa: E402
from ultra_multr.generate.web_letor import WebLetor, write_web_letor_dataset  # noqa: E402
from ultra_multr.session_budget import BUDGET_FILE, LEDGER, SessionLedger  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_ledger")

#: The guard at MULTR's defaults: algorithm_setup.build leaves logger_guard unset (its other test-sized hparams stay).
DEFAULT_GUARD = ("logger_guard",)


def test_multrs_default_guard_is_order_fit_with_its_documented_margin_minimum_and_threshold():
    from ultra_multr.algorithms.multr import MULTRConfig

    settings = MULTRConfig().guards
    defaults = (settings.logger_guard, settings.logger_guard_margin, settings.logger_guard_min_queries,
                settings.logger_guard_threshold)
    assert defaults == ("order_fit", 0.1, 50, 0.95)
    # the margin came with issue 38: runs without the guard keep their fingerprints
    assert "logger_guard_margin" not in identity(parse_hparams(MULTRConfig, "logger_guard=none"), "run")
    assert identity(MULTRConfig(), "run")["logger_guard_margin"] == 0.1


def decide(monkeypatch, caplog, n_queries, fit):
    """logger_guard_fires at MULTR's default knobs on ``n_queries`` training queries whose fit is ``fit`` (an
    OrderFit, or an exception the fit raises): (whether it fired, the ledger's record, the warnings)."""
    def fitted(arrays, seed):
        if isinstance(fit, Exception):
            raise fit
        return fit

    monkeypatch.setattr(guards, "fit_to_logged_order", fitted)
    ledger = SessionLedger()
    with caplog.at_level(logging.WARNING, logger="ultra_multr"):
        host = guards.logger_guard_fires(SimpleNamespace(n_queries=n_queries), guards.GuardSettings(), 0, ledger,
                                         "The host trains alone.")
    return host, ledger.decisions["logger_guard"], caplog.text


@pytest.mark.parametrize("agreement, decision", [(0.79, "fired"), (0.81, "passed")])
def test_it_fires_only_more_than_the_margin_below_the_null_agreement(monkeypatch, caplog, agreement, decision):
    nulls = (0.85, 0.95, 0.9, 0.88, 0.92)  # mean 0.9: it fires below 0.8
    host, record, warnings = decide(monkeypatch, caplog, 50, OrderFit(agreement, nulls, 10, 400))
    assert (host, record["decision"], record["host_losses"]) == (decision == "fired", decision, decision == "fired")
    assert record["null_agreement"] == pytest.approx(0.9) and record["null_agreements"] == list(nulls)
    assert record["margin"] == 0.1 and record["agreement"] == agreement and record["training_queries"] == 50
    assert ("LOGGER GUARD FIRED" in warnings) == (decision == "fired")
    if decision == "fired":
        assert "orders 0.790 of the 400 document pairs of 10 held-out queries" in warnings
        assert "0.900 of them as orders made from these features" in warnings and "The host trains alone." in warnings


@pytest.mark.parametrize("agreement, decision", [(0.96, "too_few_queries_kept"), (0.9, "too_few_queries")])
def test_below_the_minimum_of_queries_the_threshold_decides_loudly(monkeypatch, caplog, agreement, decision):
    """With 49 training queries (< logger_guard_min_queries=50) the null is not compared (it would allow a far
    larger gap): the simulator is kept only at logger_guard_threshold=0.95; a WARNING either way."""
    host, record, warnings = decide(monkeypatch, caplog, 49, OrderFit(agreement, (0.99,) * 5, 10, 400))
    assert (host, record["decision"], record["host_losses"]) == (decision == "too_few_queries", decision, host)
    assert "LOGGER GUARD: only 49 training queries (< logger_guard_min_queries=50)" in warnings
    assert "keeps the simulator only when the fit reproduces at least logger_guard_threshold=0.95" in warnings
    kept = "The user simulator is trained (the simulator guard still judges it)."
    assert (kept in warnings) == (not host) and ("The host trains alone." in warnings) == host


def test_a_fit_that_cannot_be_made_counts_below_the_minimum_and_is_an_error_above(monkeypatch, caplog):
    host, record, warnings = decide(monkeypatch, caplog, 1, ValueError("the logged order's fit needs 2 queries"))
    assert host and record["decision"] == "too_few_queries" and "agreement" not in record
    assert "nothing to measure" in warnings
    with pytest.raises(ValueError, match="no pair"):
        decide(monkeypatch, caplog, 50, ValueError("no pair"))


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
    assert guard["decision"] == "fired" and guard["host_losses"] is True
    assert guard["agreement"] < guard["null_agreement"] - guard["margin"]
    assert "simulator_training" not in decisions  # no simulator was trained
    for multr_losses, dla_losses in trajectories(multr, dla, feed, data, steps=3):
        assert multr_losses == pytest.approx(dla_losses, abs=1e-6)


def test_by_default_it_stays_quiet_in_ultras_recipe(tmp_path, caplog):
    data_dir = str(tmp_path / "recipe") + "/"
    write_recipe_dataset(data_dir, Recipe(train_queries=100, valid_queries=12, test_queries=12, features=10))
    multr, _, data = build(data_dir, ",".join([COMMON, SIMULATOR]), keep_defaults=DEFAULT_GUARD)
    with caplog.at_level(logging.INFO, logger="ultra_multr"):
        multr.prepare()
    guard = LEDGER.summary()["decisions"]["logger_guard"]
    assert guard["decision"] == "passed" and guard["training_queries"] == len(data.qids)
    assert guard["agreement"] >= guard["null_agreement"] - guard["margin"]
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
    assert guard["agreement"] < 0.95 and "logger_guard_threshold=0.95" in caplog.text
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


@pytest.mark.slow
def test_through_main_py_it_passes_a_rank_svm_logger_of_web_features_and_fires_on_a_label_aware_one(ultra_main,
                                                                                                     tmp_path):
    """Web-LETOR-like features (300 a document, about half zero, heavy-tailed, correlated in groups, shifted per
    query; 100 training queries) ordered by ULTRA's recipe's Rank SVM, then by the labels plus noise: one short
    main.py run of MULTR at its guard's defaults on each."""
    guard, stderr = {}, {}
    for logger in ("rank_svm", "labels"):
        data_dir = str(tmp_path / logger)
        write_web_letor_dataset(data_dir, WebLetor(train_queries=100, valid_queries=5, test_queries=5, features=300,
                                                   logger=logger))
        settings = settings_for(tmp_path, ",".join([COMMON, SIMULATOR, "logger_guard=order_fit"]), name=logger + ".json")
        model_dir = str(tmp_path / (logger + "_model"))
        completed = run_ultra_main(ultra_main, main_args(settings, model_dir, data_dir + "/", "--max_train_iteration",
                                                         "1", "--steps_per_checkpoint", "1"), cwd=str(tmp_path))
        with open(os.path.join(model_dir, BUDGET_FILE)) as handle:
            decisions = json.load(handle)["decisions"]
        guard[logger], stderr[logger] = decisions["logger_guard"], completed.stderr
        assert guard[logger]["training_queries"] >= 50 and ("simulator_training" in decisions) == (logger == "rank_svm")
    assert guard["rank_svm"]["decision"] == "passed" and guard["rank_svm"]["host_losses"] is False
    assert guard["labels"]["decision"] == "fired" and guard["labels"]["host_losses"] is True
    assert "logger guard: passed" in stderr["rank_svm"] and "LOGGER GUARD FIRED" in stderr["labels"]
