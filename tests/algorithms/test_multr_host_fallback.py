"""A simulator MULTR does not use leaves DLA exactly, and MULTR takes the baselines' learning-rate pilot."""
from __future__ import annotations

import dataclasses
import logging

import pytest
import torch

from conftest import require_ultra
from algorithm_setup import build, read_valid

ultra = require_ultra()

from ultra_multr.session_budget import LEDGER  # noqa: E402
from ultra_multr.simulator import trainer  # noqa: E402

#: MULTR and DLA share these (same seed: the same ranker and propensity model at the start).
COMMON = "seed=4,device=cpu,log_every=0,learning_rate=0.5"
#: MULTR's test-sized simulator (2 steps of 8 sessions, 2 held-out batches of 8: 16 held-out sessions).
SIMULATOR = "sample_num=3,simulator_steps=2,simulator_batch_size=8,simulator_heldout_batches=2,cuda_graphs=off"
#: Every form of MULTR's ranking loss with each weight guard it accepts.
FORMS = [
    "rerank_weight=paper,dr_weight_guard=rebalance",
    "rerank_weight=paper,dr_weight_guard=clip,imputation=sampled",
    "rerank_weight=paper,dr_weight_guard=none,dr_normalization=none,imputation=sampled",
    "rerank_weight=randomized,dr_weight_guard=rebalance",
    "rerank_weight=randomized,dr_weight_guard=none",
    "rerank_weight=0,dr_weight_guard=clip",
    "rerank_weight=authors_code,dr_weight_guard=none",
]


#: every test starts and ends with an empty session ledger (conftest's fixture)
pytestmark = pytest.mark.usefixtures("fresh_ledger")


def trajectories(multr, dla, feed, data, steps):
    """Per update of both algorithms on the same batches: (MULTR's (loss, rank, exam), DLA's)."""
    pairs = []
    for _ in range(steps):
        input_feed, _ = feed.get_batch(data, check_validation=True)
        losses = []
        for model in (multr, dla):
            loss, _, _ = model.train(input_feed)
            batch = model.batch(input_feed, model.rank_list_size)
            with torch.no_grad():
                _, parts = model.training_loss(batch)
            losses.append((loss, parts["rank_loss"], parts["exam_loss"]))
        pairs.append(tuple(losses))
    return pairs


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("why", ["rejected", "not_validated"])
def test_a_simulator_not_used_leaves_dlas_losses_and_updates(synthetic_data_dir, monkeypatch, caplog, form, why):
    hparams = ",".join([COMMON, SIMULATOR, form, "simulator_guard=position"])
    if why == "not_validated":  # 16 held-out sessions would judge the simulator: too few, so it is not trained
        hparams += ",simulator_min_heldout_sessions=17"
    multr, feed, data = build(synthetic_data_dir, hparams)
    if why == "rejected":
        monkeypatch.setattr(trainer, "heldout_log_likelihood", lambda simulator, batches: (-1e3, [0.0]))
    dla, _, _ = build(synthetic_data_dir, COMMON, algorithm="ultra_multr.DLA")
    with caplog.at_level(logging.WARNING, logger="ultra_multr"):
        multr.prepare()
    assert not multr.doubly_robust.used
    expected = {"rejected": "USER SIMULATOR REJECTED: its held-out click log-likelihood -1000.0000 per session on 16 "
                            "distinct held-out sessions",
                "not_validated": "USER SIMULATOR NOT VALIDATED: only 16 distinct held-out sessions would measure it "
                                 "(< simulator_min_heldout_sessions=17)"}[why]
    assert expected in caplog.text
    decisions = LEDGER.summary()["decisions"]
    decision = decisions["user_simulator"]
    assert decision["decision"] == why and decision["heldout_sessions"] == 16 and decision["host_losses"] is True
    # not validated: known before training, so no simulator step ran (none drew a session)
    assert decisions["simulator_training"]["steps_run"] == (0 if why == "not_validated" else 2)
    assert ("simulator_train" in LEDGER.summary()["phases"]) == (why == "rejected")
    # a high learning rate over several updates: the randomized form's old fallback stopped on exam_loss=nan
    for multr_losses, dla_losses in trajectories(multr, dla, feed, data, steps=6):
        assert all(torch.isfinite(torch.tensor(multr_losses)))
        assert multr_losses == pytest.approx(dla_losses, abs=1e-6)
    for ours, theirs in zip(list(multr.model.parameters()) + list(multr.propensity_model.parameters()),
                            list(dla.model.parameters()) + list(dla.propensity_model.parameters())):
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)


def test_a_validated_simulator_is_used_and_its_decision_recorded(synthetic_data_dir, monkeypatch):
    multr, feed, data = build(synthetic_data_dir, ",".join([COMMON, SIMULATOR, "simulator_guard=position"]))
    # above any click model
    monkeypatch.setattr(trainer, "heldout_log_likelihood", lambda simulator, batches: (0.0, [0.0]))
    multr.prepare()
    assert multr.doubly_robust.used
    summary = LEDGER.summary()
    assert summary["decisions"]["user_simulator"]["decision"] == "accepted"
    assert summary["torch_threads"] == torch.get_num_threads()
    batch = multr.batch(feed.get_batch(data, check_validation=True)[0], multr.rank_list_size)
    _, parts = multr.training_loss(batch)
    assert parts["pseudo_clicks_per_list"] > 0  # the DR loss, not DLA's


TUNE = "tune=learning_rate,tune_grid=[0.01,0.5,0.05],tune_pilot_steps=3,pilot_min_queries=1"


def test_multr_takes_the_baselines_learning_rate_pilot_with_one_simulator(synthetic_data_dir, monkeypatch, caplog):
    from ultra_multr.algorithms import tuning
    from ultra_multr.components import pilot, simulator_phase

    multr, feed, data = build(synthetic_data_dir, ",".join([COMMON, SIMULATOR, TUNE]))
    trained = []
    real_train_simulator = simulator_phase.train_simulator
    monkeypatch.setattr(simulator_phase, "train_simulator",
                        lambda *a, **k: trained.append(1) or real_train_simulator(*a, **k))
    # main.py's validation split and batch size, as the pilot reads them inside main.py
    monkeypatch.setattr(tuning, "read_validation_set", lambda settings: read_valid(synthetic_data_dir, multr.max_candidate_num))
    monkeypatch.setattr(tuning, "DEFAULT_BATCH_SIZE", 16)
    scored = []

    def peaked_at_half(algorithm, _):
        scored.append(algorithm.doubly_robust.simulator)
        return 1 - abs(algorithm.hparams.learning_rate - 0.5)

    monkeypatch.setattr(pilot, "validation_metric", peaked_at_half)
    with caplog.at_level(logging.INFO, logger="ultra_multr"):
        multr.train(feed.get_batch(data, check_validation=True)[0])
    assert multr.hparams.learning_rate == 0.5 and multr.propensity_learning_rate == 0.5
    assert "tune=learning_rate: pilot of 3 steps, ndcg_10 by value: 0.01: 0.5100, 0.5: 1.0000, 0.05: 0.5500" in caplog.text
    # one simulator, trained once before the pilot and shared by the three candidates
    assert trained == [1] and len(scored) == 3 and all(simulator is multr.doubly_robust.simulator for simulator in scored)
    phases = {phase: count["lists"] for phase, count in LEDGER.summary()["phases"].items()}
    assert phases == {"simulator_train": 2 * 8, "simulator_heldout": 2 * 8, "tuning_pilot": 3 * 3 * 16, "ranker": 16}
    assert multr.global_step == 1


def test_multrs_propensities_are_dlas_on_the_same_batches_and_the_papers_coupling_is_a_setting(
    synthetic_data_dir, monkeypatch
):
    """propensity_ranker=dla (default): the examination model divides clicks by a ranker trained by DLA's own loss,
    so the simulator's bias never reaches the propensities (studies/propensity_drift); =multr: DLA's dual coupling
    with MULTR's ranker, the paper's."""
    params = {}
    for coupling in ("dla", "multr"):
        multr, feed, data = build(synthetic_data_dir, ",".join([COMMON, SIMULATOR, "propensity_ranker=" + coupling]))
        # accepted: DR loss
        monkeypatch.setattr(trainer, "heldout_log_likelihood", lambda simulator, batches: (0.0, [0.0]))
        dla, _, _ = build(synthetic_data_dir, COMMON, algorithm="ultra_multr.DLA")
        multr.prepare()
        assert multr.doubly_robust.used
        trajectories(multr, dla, feed, data, steps=5)
        params[coupling] = (multr, dla)
    multr, dla = params["dla"]
    for ours, theirs in zip(list(multr.propensity_model.parameters()) + list(multr.examination_ranker.parameters()),
                            list(dla.propensity_model.parameters()) + list(dla.model.parameters())):
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)
    assert not all(torch.allclose(a, b) for a, b in zip(multr.model.parameters(), dla.model.parameters()))  # DR loss
    coupled, dla = params["multr"]
    assert coupled.examination_ranker is None
    assert not all(torch.allclose(a, b, atol=1e-6)
                   for a, b in zip(coupled.propensity_model.parameters(), dla.propensity_model.parameters()))


def test_propensity_update_every_trains_the_examination_side_on_every_kth_update_only(synthetic_data_dir, monkeypatch):
    """propensity_update_every=4: the examination ranker and the propensity model take DLA's updates on batches 0, 4
    and 8 only (those of a DLA trained on those batches alone), MULTR's ranker on every batch; the click loss of
    model selection stays the whole loss between them."""
    monkeypatch.setattr(trainer, "heldout_log_likelihood", lambda simulator, batches: (0.0, [0.0]))
    multr, feed, data = build(synthetic_data_dir, ",".join([COMMON, SIMULATOR, "propensity_update_every=4"]))
    dla, _, _ = build(synthetic_data_dir, COMMON, algorithm="ultra_multr.DLA")
    multr.prepare()
    assert multr.doubly_robust.used

    def examination_side(model, ranker):
        return [p.detach().clone() for p in list(model.propensity_model.parameters()) + list(ranker.parameters())]

    examination_moved, ranker_moved = [], []
    for step in range(10):
        input_feed, _ = feed.get_batch(data, check_validation=True)
        before, ranker_before = examination_side(multr, multr.examination_ranker), examination_side(multr, multr.model)
        multr.train(input_feed)
        examination_moved.append(any(not torch.equal(a, b)
                                     for a, b in zip(before, examination_side(multr, multr.examination_ranker))))
        ranker_moved.append(any(not torch.equal(a, b) for a, b in zip(ranker_before, examination_side(multr, multr.model))))
        if step % 4 == 0:
            dla.train(input_feed)
    assert [step for step, moved in enumerate(examination_moved) if moved] == [0, 4, 8]
    assert all(ranker_moved)
    for ours, theirs in zip(examination_side(multr, multr.examination_ranker), examination_side(dla, dla.model)):
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)

    assert multr.global_step % 4 != 0  # an update that would leave the examination side alone
    valid = read_valid(synthetic_data_dir, data.rank_list_size)
    valid_feed, _ = ultra.input_layer.DirectLabelFeed(multr, 16, "").get_next_batch(0, valid)
    thinned = multr.click_loss_summary(valid_feed)
    multr.hparams = dataclasses.replace(multr.hparams, propensity_update_every=1)
    assert thinned == multr.click_loss_summary(valid_feed)


def test_examination_ranker_layers_gives_the_examination_side_a_small_dnn_of_its_own(synthetic_data_dir, monkeypatch):
    """examination_ranker_layers=[8]: DLA's loss trains an ULTRA DNN with one hidden layer of 8 (not a copy of the
    ranker) and the propensity model on every update; MULTR's ranker is another module; propensity_ranker=multr
    has no such ranker and refuses the knob."""
    from ultra_multr.algorithms.multr import MULTRConfig
    from ultra_multr.config import parse_hparams

    monkeypatch.setattr(trainer, "heldout_log_likelihood", lambda simulator, batches: (0.0, [0.0]))
    multr, feed, data = build(synthetic_data_dir, ",".join([COMMON, SIMULATOR, "examination_ranker_layers=[8]"]))
    multr.prepare()
    assert multr.doubly_robust.used
    shapes = [tuple(p.shape) for p in multr.examination_ranker.parameters() if p.dim() == 2]
    assert shapes == [(8, multr.feature_size), (1, 8)] and len(shapes) < len(
        [p for p in multr.model.parameters() if p.dim() == 2])
    for _ in range(3):
        before = [p.detach().clone() for p in list(multr.propensity_model.parameters())
                  + list(multr.examination_ranker.parameters())]
        multr.train(feed.get_batch(data, check_validation=True)[0])
        after = list(multr.propensity_model.parameters()) + list(multr.examination_ranker.parameters())
        assert any(not torch.equal(a, b) for a, b in zip(before, after))
    with pytest.raises(ValueError, match="examination_ranker_layers=\\[8\\] shapes propensity_ranker=dla's"):
        parse_hparams(MULTRConfig, "examination_ranker_layers=[8],propensity_ranker=multr")
