"""The fair protocol (issue 17, item 3): one click budget over every phase, minimum evidence, the trivial-model guard."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from conftest import require_ultra
from algorithm_setup import CASCADE, PILOT, TUNE, build, main_args, read_valid, settings_for, train_losses

ultra = require_ultra()

from conftest import run_ultra_main  # noqa: E402
from ultra_multr.session_budget import BUDGET_FILE, LEDGER, LEDGER_VERSION, SessionBudgetExceeded  # noqa: E402
from ultra_multr.simulator import trainer  # noqa: E402
from ultra_multr.simulator.trivial import PositionClickRates  # noqa: E402



#: every test starts and ends with an empty session ledger (conftest's fixture)
pytestmark = pytest.mark.usefixtures("fresh_ledger")


def test_every_phase_and_the_pilot_count_in_the_budget(synthetic_data_dir):
    model, feed, data = build(synthetic_data_dir, PILOT)
    model.prepare(read_valid(synthetic_data_dir, model.max_candidate_num), batch_size=16)
    train_losses(model, feed, data, steps=2)
    phases = LEDGER.summary()["phases"]
    assert phases["ranker"]["clicks"] >= phases["ranker"]["lists"]  # every list fed has a click
    assert {phase: count["lists"] for phase, count in phases.items()} == {
        "simulator_heldout": 2 * 8, "simulator_train": 2 * 8, "rerank_pilot": 3 * 3 * 16, "ranker": 2 * 16,
    }
    # lists without a click are dropped, yet they were sessions drawn
    assert all(count["sessions"] >= count["lists"] for count in phases.values())
    assert LEDGER.total == sum(count["sessions"] for count in phases.values())


def test_a_session_budget_stops_the_phase_that_exceeds_it(synthetic_data_dir):
    feed_hparams = "click_model_json=%s,seed=0,session_budget=100" % CASCADE
    model, _, _ = build(synthetic_data_dir, PILOT, feed_hparams=feed_hparams)
    with pytest.raises(SessionBudgetExceeded, match="session_budget=100 .* in phase 'rerank_pilot'"):
        model.prepare(read_valid(synthetic_data_dir, model.max_candidate_num), batch_size=16)
    assert LEDGER.total <= 100


def test_a_click_log_is_every_phases_budget(synthetic_data_dir):
    feed = "ultra_multr.feeds.ClickLogFeed"
    model, _, data = build(
        synthetic_data_dir, PILOT + ",simulator_heldout_fraction=0.3", feed=feed,
        feed_hparams="click_model_json=%s,seed=0,sessions_per_query=2" % CASCADE,
    )
    model.prepare(read_valid(synthetic_data_dir, model.max_candidate_num), batch_size=16)
    assert LEDGER.log_sessions == 2 * len(data.initial_list)
    assert set(LEDGER.counts) == {"simulator_heldout", "simulator_train", "rerank_pilot"}
    with pytest.raises(ValueError, match="is its own budget"):
        build(synthetic_data_dir, PILOT, feed=feed,
              feed_hparams="click_model_json=%s,sessions_per_query=2,session_budget=5" % CASCADE)


@pytest.mark.slow
def test_main_py_writes_the_sessions_of_every_phase(ultra_main, synthetic_data_dir, tmp_path):
    settings = settings_for(tmp_path, "sample_num=2,simulator_steps=3,simulator_batch_size=8,seed=0,rerank_pilot_steps=2,rerank_weight=auto")
    model_dir = tmp_path / "model"
    completed = run_ultra_main(
        ultra_main,
        main_args(settings, str(model_dir), synthetic_data_dir, "--max_train_iteration", "2", "--steps_per_checkpoint", "2"),
        cwd=str(tmp_path),
    )
    summary = json.loads((model_dir / BUDGET_FILE).read_text())
    lists = {phase: count["lists"] for phase, count in summary["phases"].items()}
    # main.py checks max_train_iteration at checkpoints only and stops once past it: 4 ranker steps here
    assert lists["ranker"] == 4 * 16 and lists["simulator_train"] == 3 * 8 and lists["rerank_pilot"] == 3 * 2 * 16
    assert summary["total_sessions"] >= sum(lists.values())
    # the run's decisions and thread count travel with its sessions (the runner copies them into done.json)
    simulator = summary["decisions"]["user_simulator"]
    assert simulator["heldout_sessions"] == 4 * 8 and simulator["used"] is True  # 4 held-out batches of 8
    assert simulator["decision"] in ("accepted", "rejected") and simulator["simulator_guard"] == "none"
    assert isinstance(summary["torch_threads"], int) and summary["torch_threads"] >= 1
    # so does the pilot's choice, which the sessions table reads from there, not from the log
    from ultra_multr.experiments import budget

    choice = summary["decisions"]["rerank_weight"]
    assert summary["ledger_version"] == LEDGER_VERSION and choice["by"] == "pilot" and len(choice["scores"]) == 3
    assert "chosen a = %.4f" % choice["chosen"] in completed.stderr
    assert budget.decided_facts(summary["decisions"]) == {"pilot choice": "%.4f" % choice["chosen"], "refused": ""}


def test_too_few_validation_queries_keep_the_stated_fallback(synthetic_data_dir, caplog):
    model, _, _ = build(synthetic_data_dir, PILOT + ",pilot_min_queries=30")
    with caplog.at_level(logging.WARNING, logger="ultra_multr"):
        model.prepare(read_valid(synthetic_data_dir, model.max_candidate_num), batch_size=16)
        chosen = model.doubly_robust.loss.rerank_weight
    assert chosen == pytest.approx(2 / 3)  # rerank_weight_fallback=paper, S / (S + 1)
    assert "only 12 validation queries (< pilot_min_queries=30): too little evidence to choose" in caplog.text
    assert "rerank_pilot" not in LEDGER.counts  # no pilot ran


def test_too_few_heldout_sessions_switch_early_stopping_off(synthetic_data_dir, caplog, monkeypatch):
    model, _, _ = build(
        synthetic_data_dir,
        PILOT.replace("simulator_steps=2", "simulator_steps=6") + ",simulator_eval_every=1,simulator_patience=1,"
        "simulator_min_heldout_sessions=300,cuda_graphs=off",
    )
    values = iter([-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0])  # worse at every evaluation: patience 1 would stop at 2
    monkeypatch.setattr(trainer, "heldout_log_likelihood", lambda simulator, batches: (next(values), [0.0]))
    with caplog.at_level(logging.WARNING, logger="ultra_multr"):
        model.simulator_phase.run()
    assert "only 16 distinct held-out sessions (< simulator_min_heldout_sessions=300)" in caplog.text
    fit = LEDGER.decisions["simulator_training"]
    assert fit["steps_run"] == 6 and fit["best_step"] == 6 and fit["heldout_sessions"] == 16
    assert fit["early_stopping"] == "too_few_heldout_sessions"


def test_a_simulator_below_the_position_only_model_is_rejected_loudly(synthetic_data_dir, caplog, monkeypatch):
    model, _, _ = build(synthetic_data_dir, PILOT + ",simulator_guard=position")
    monkeypatch.setattr(trainer, "heldout_log_likelihood", lambda simulator, batches: (-1e3, [0.0]))
    with caplog.at_level(logging.WARNING, logger="ultra_multr"):
        model.prepare(read_valid(synthetic_data_dir, model.max_candidate_num), batch_size=16)
        chosen = model.doubly_robust.loss.rerank_weight
    assert "USER SIMULATOR REJECTED: its held-out click log-likelihood -1000.0000 per session on 16 distinct " \
        "held-out sessions, below" in caplog.text
    assert "MULTR trains with DLA's own ranking and propensity losses" in caplog.text
    assert "the user simulator is not used (DLA's losses); a = 0 without a pilot" in caplog.text
    assert chosen == 0.0 and not model.doubly_robust.used
    assert LEDGER.decisions["user_simulator"]["decision"] == "rejected"

    kept, _, _ = build(synthetic_data_dir, PILOT + ",simulator_guard=position")
    # above any click model
    monkeypatch.setattr(trainer, "heldout_log_likelihood", lambda simulator, batches: (0.0, [0.0]))
    kept.prepare()
    assert kept.doubly_robust.used and kept.doubly_robust.sampler is kept.doubly_robust.simulator
    assert LEDGER.decisions["user_simulator"]["decision"] == "accepted"

    ignored, _, _ = build(synthetic_data_dir, PILOT + ",simulator_guard=none")
    monkeypatch.setattr(trainer, "heldout_log_likelihood", lambda simulator, batches: (-1e3, [0.0]))
    ignored.prepare()
    assert ignored.doubly_robust.used
    assert LEDGER.decisions["user_simulator"] == dict(
        LEDGER.decisions["user_simulator"], decision="rejected", used=True, host_losses=False
    )


def test_the_position_only_model_is_the_click_rate_per_position():
    clicks = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True, True, True], [True, True, True]])
    model = PositionClickRates(3)
    model.add(clicks, mask)
    rates = model.rates().numpy()
    np.testing.assert_allclose(rates, [2 / 3, 1 / 3, 1e-4])
    expected = (2 * np.log(2 / 3) + np.log(1 / 3)) + (np.log(1 / 3) + 2 * np.log(2 / 3)) + 2 * np.log(1 - 1e-4)
    assert model.log_likelihood([(clicks, mask)]) == pytest.approx(expected / 3)




def test_a_baselines_pilot_takes_the_best_candidate_counts_its_sessions_and_leaves_no_trace(
    synthetic_data_dir, monkeypatch, caplog
):
    from ultra_multr.algorithms import tuning
    from ultra_multr.components import pilot

    model, _, _ = build(synthetic_data_dir, TUNE, algorithm="ultra_multr.DLA")
    before = [p.detach().clone() for p in model.model.parameters()]
    # a validation score peaked at learning rate 0.5: the argmax must find it (not the first, not the last)
    monkeypatch.setattr(pilot, "validation_metric", lambda algorithm, _: 1 - abs(algorithm.hparams.learning_rate - 0.5))
    with caplog.at_level(logging.INFO, logger="ultra_multr"):
        chosen = tuning.tune(model, read_valid(synthetic_data_dir, model.max_candidate_num), batch_size=16)
    assert chosen == 0.5 and model.hparams.learning_rate == 0.5 and model.propensity_learning_rate == 0.5
    assert "tune=learning_rate: pilot of 3 steps, ndcg_10 by value: 0.01: 0.5100, 0.5: 1.0000, 0.05: 0.5500" in caplog.text
    assert LEDGER.counts["tuning_pilot"]["lists"] == 3 * 3 * 16
    assert all(torch.equal(a, b) for a, b in zip(before, model.model.parameters()))
    assert model.global_step == 0 and model._optimizers is None


def test_a_pilot_drops_a_candidate_whose_loss_is_not_finite_and_goes_on(synthetic_data_dir, caplog):
    from ultra_multr.algorithms import tuning

    diverging = TUNE.replace("tune_grid=[0.01,0.5,0.05]", "tune_grid=[1e30,0.05]")
    model, _, _ = build(synthetic_data_dir, diverging, algorithm="ultra_multr.DLA")
    before = [p.detach().clone() for p in model.model.parameters()]
    with caplog.at_level(logging.INFO, logger="ultra_multr"):
        chosen = tuning.tune(model, read_valid(synthetic_data_dir, model.max_candidate_num), batch_size=16)
    assert chosen == 0.05 and model.hparams.learning_rate == 0.05
    assert "tuning_pilot: candidate 1e+30 dropped, its pilot stopped: non-finite training loss nan at step" in caplog.text
    assert "ndcg_10 by value: 0.05: " in caplog.text
    assert all(torch.equal(a, b) for a, b in zip(before, model.model.parameters())) and model.global_step == 0

    every, _, _ = build(synthetic_data_dir, TUNE.replace("tune_grid=[0.01,0.5,0.05]", "tune_grid=[1e30,1e31]"),
                        algorithm="ultra_multr.DLA")
    with pytest.raises(FloatingPointError, match="every candidate's training loss became non-finite .*1e\\+30: .*1e\\+31: "):
        tuning.tune(every, read_valid(synthetic_data_dir, every.max_candidate_num), batch_size=16)


def test_a_baselines_pilot_refuses_too_few_validation_queries(synthetic_data_dir, caplog):
    from ultra_multr.algorithms import tuning

    model, _, _ = build(synthetic_data_dir, TUNE.replace("pilot_min_queries=1", "pilot_min_queries=30"), algorithm="ultra_multr.Naive")
    with caplog.at_level(logging.WARNING, logger="ultra_multr"):
        chosen = tuning.tune(model, read_valid(synthetic_data_dir, model.max_candidate_num), batch_size=16)
    assert chosen == 0.05 and "only 12 validation queries (< pilot_min_queries=30)" in caplog.text
    assert "tuning_pilot" not in LEDGER.counts


@pytest.mark.parametrize(
    "algorithm, hparams, message",
    [
        ("ultra_multr.Naive", "tune=max_propensity_weight,tune_grid=[1,10]", "tune must be one of .* that"),
        ("ultra_multr.DLA", "tune=learning_rate,tune_grid=[0.1]", "needs a tune_grid of at least 2"),
        ("ultra_multr.MULTR", "tune=learning_rate,tune_grid=[0.1,0.2],rerank_weight=auto",
         "tune=learning_rate and rerank_weight=auto are two validation pilots"),
    ],
)
def test_bad_tune_hparams_are_named(synthetic_data_dir, algorithm, hparams, message):
    from ultra_multr.config import HParamError

    with pytest.raises(HParamError, match=message):
        build(synthetic_data_dir, hparams, algorithm=algorithm)


def test_the_sessions_table_lists_each_runs_phases_and_pilot_choices(tmp_path):
    from ultra_multr.experiments import budget

    def finished(name, info, summary, stderr):
        run_dir = tmp_path / "runs" / name
        (run_dir / "model").mkdir(parents=True)
        (run_dir / "run.json").write_text(json.dumps(info))
        (run_dir / "done.json").write_text("{}")
        (run_dir / "train.stderr").write_text(stderr)
        if summary:
            (run_dir / "model" / BUDGET_FILE).write_text(json.dumps(summary))

    finished(
        "multr", {"dataset": "g", "fold": "Fold1", "label": "MULTR", "seed": 0},
        {"phases": {"ranker": {"sessions": 900, "lists": 800, "clicks": 1000},
                    "rerank_pilot": {"sessions": 90, "lists": 80, "clicks": 100}},
         "total_sessions": 990},
        "[ultra_multr] user simulator: only 16 distinct held-out sessions (< simulator_min_heldout_sessions=300)\n"
        "[ultra_multr] rerank_weight=auto: pilot of 2 steps, ndcg_10 by a: 0.0000: 0.5, 0.5000: 0.6; chosen a = 0.5000\n",
    )
    finished(
        "dla", {"dataset": "g", "fold": "Fold1", "label": "DLA (tuned)", "seed": 1},
        {"phases": {"tuning_pilot": {"sessions": 7, "lists": 6}}, "total_sessions": 7},
        "[ultra_multr] tune=learning_rate: pilot of 3 steps, ndcg_10 by value: 0.01: 0.5; chosen learning_rate = 0.2\n",
    )
    finished("oracle", {"dataset": "g", "fold": "Fold1", "label": "Oracle", "seed": 0}, None, "")
    rows = budget.format_markdown(str(tmp_path / "runs")).splitlines()
    assert "| g / Fold1 / DLA (tuned) / seed 1 |  |  |  |  | 7 | 7 |  | learning_rate = 0.2 |  |  |" in rows
    assert "| g / Fold1 / MULTR / seed 0 | 900 |  |  | 90 |  | 990 | 1.250 | 0.5000 | only 16 distinct held-out sessions " \
        "|  |" in rows
    assert "| g / Fold1 / Oracle / seed 0 |  |  |  |  |  | n/a |  |  |  |  |" in rows
