"""Model selection by each algorithm's own loss on the validation lists' clicks (``objective_metric`` =
``click_loss_neg``, issue 27 item 3): the value is minus the loss the train step computes on the same batch, asking
for it changes nothing of the training state, and the default objective computes nothing more."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from conftest import require_ultra
from algorithm_setup import build, read_valid

ultra = require_ultra()

from ultra_multr import losses  # noqa: E402
from ultra_multr.algorithms.base import PluginAlgorithm  # noqa: E402
from ultra_multr.components.doubly_robust import CLICK_LOSS_STREAM  # noqa: E402
from ultra_multr.compat.settings_check import CLICK_LOSS_OBJECTIVE, check_objective_metric  # noqa: E402

KEY = CLICK_LOSS_OBJECTIVE
QUIET = "seed=0,device=cpu,log_every=0"


def validation_feed(model, data_dir):
    """main.py's first validation batch (16 lists of the valid split, padded to max_candidate_num), its grades
    turned into clicks (grade >= 2), as the validation sessions of ``--protocol reproducibility`` hold."""
    valid = read_valid(data_dir, model.max_candidate_num)
    input_feed, _ = ultra.input_layer.DirectLabelFeed(model, 16, "").get_next_batch(0, valid, check_validation=False)
    for name in model.labels_name:
        input_feed[name] = (np.asarray(input_feed[name]) >= 2).astype(np.float32)
    return input_feed


def trained(data_dir, algorithm, hparams=QUIET, steps=2, objective_metric=KEY):
    """An algorithm after ``steps`` updates (its propensities, biases or estimates no longer at their start)."""
    model, feed, data = build(data_dir, hparams, algorithm=algorithm, objective_metric=objective_metric)
    for _ in range(steps):
        model.train(feed.get_batch(data, check_validation=True)[0])
    return model


def training_state(model):
    """Everything a validation must leave as it was: parameters and buffers of every network, the estimates,
    the generators (global and the algorithm's own), the step."""
    tensors = {}
    for name, value in vars(model).items():
        if isinstance(value, torch.nn.Module):
            tensors.update({"%s.%s" % (name, key): t.clone() for key, t in value.state_dict().items()})
        elif isinstance(value, torch.Tensor) and name != "output":  # output: validation's own scores
            tensors[name] = value.clone()
        elif isinstance(value, torch.Generator):
            tensors[name] = value.get_state()
    return tensors, torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate(), model.global_step


def assert_same_state(before, after):
    (tensors, torch_rng, np_rng, py_rng, step), (tensors2, torch_rng2, np_rng2, py_rng2, step2) = before, after
    assert tensors.keys() == tensors2.keys()
    for name in tensors:
        assert torch.equal(tensors[name], tensors2[name]), name
    assert torch.equal(torch_rng, torch_rng2) and np.array_equal(np_rng, np_rng2) and py_rng == py_rng2
    assert step == step2


def test_dla_reports_minus_the_loss_its_train_step_computes_on_the_same_batch(synthetic_data_dir):
    dla = trained(synthetic_data_dir, "ultra_multr.DLA")
    input_feed = validation_feed(dla, synthetic_data_dir)
    before = training_state(dla)
    _, _, summary = dla.validation(input_feed)
    assert_same_state(before, training_state(dla))
    assert "ndcg_10" in summary
    # the shared function (training_loss) on the batch the train step reads, and a literal recomputation
    batch = dla.batch(input_feed, dla.rank_list_size)
    with torch.no_grad():
        shared, parts = dla.training_loss(batch)
        scores = dla.scores(batch)
        logits = dla.propensity_model(batch.labels.t())
        probs = torch.softmax(logits.masked_fill(~batch.mask, -float("inf")), dim=-1)
        weights = losses.ipw_weights(probs, batch.mask, -1.0)
        relevance_weights = losses.relative_ipw_weights(scores, batch.mask, "softmax", -1.0)
        literal = losses.dla_softmax_loss(logits, batch.labels, relevance_weights, batch.mask) + \
            losses.dla_softmax_loss(scores, batch.labels, weights, batch.mask)
    assert summary[KEY] == pytest.approx(-float(shared), rel=1e-6)
    assert summary[KEY] == pytest.approx(-float(literal), rel=1e-5)
    assert parts["rank_loss"] > 0 and parts["exam_loss"] > 0
    # the train step's own loss on that batch, before its update
    step_loss, _, _ = dla.train(input_feed)
    assert summary[KEY] == pytest.approx(-step_loss, rel=1e-6)


def test_the_default_objective_computes_no_click_loss_and_the_same_metrics(synthetic_data_dir, monkeypatch):
    asked = trained(synthetic_data_dir, "ultra_multr.DLA")
    default = trained(synthetic_data_dir, "ultra_multr.DLA", objective_metric="ndcg_10")
    input_feed = validation_feed(default, synthetic_data_dir)
    _, asked_scores, with_key = asked.validation(input_feed)

    def refuse(*_):
        raise AssertionError("computed without being asked")

    monkeypatch.setattr(PluginAlgorithm, "click_loss_summary", refuse)
    _, scores, summary = default.validation(input_feed)
    assert KEY not in summary and KEY in with_key
    assert summary == {name: value for name, value in with_key.items() if name != KEY}
    np.testing.assert_array_equal(scores, asked_scores)


@pytest.mark.parametrize("algorithm, hparams", [
    ("ultra_multr.Naive", QUIET),
    ("ultra_multr.PAL", QUIET),
    ("ultra_multr.IPW", QUIET + ",propensities=[1,0.5,0.33,0.25,0.2,0.17,0.14,0.12,0.11,0.1]"),
    ("ultra_multr.PairD", QUIET),
])
def test_each_baseline_reports_minus_its_training_loss_and_changes_nothing(synthetic_data_dir, algorithm, hparams):
    model = trained(synthetic_data_dir, algorithm, hparams)
    input_feed = validation_feed(model, synthetic_data_dir)
    before = training_state(model)
    value = model.validation(input_feed)[2][KEY]
    assert_same_state(before, training_state(model))
    step_loss, _, _ = model.train(input_feed)  # PairD: the loss of a step uses the biases from before it
    assert value == pytest.approx(-step_loss, rel=1e-6)


def test_rem_reports_the_expectation_of_its_training_loss_over_its_sampled_targets(synthetic_data_dir):
    rem = trained(synthetic_data_dir, "ultra_multr.REM")
    input_feed = validation_feed(rem, synthetic_data_dir)
    before = training_state(rem)
    value = rem.validation(input_feed)[2][KEY]
    assert_same_state(before, training_state(rem))
    batch = rem.batch(input_feed, rem.rank_list_size)
    with torch.no_grad():
        scores = rem.scores(batch)
        p_relevant, _ = losses.rem_posteriors(scores, rem.examination, batch.labels, batch.mask)
        draws = [float(losses.sigmoid_cross_entropy(scores, torch.bernoulli(p_relevant), batch.mask))
                 for _ in range(400)]
    assert value == pytest.approx(-float(losses.sigmoid_cross_entropy(scores, p_relevant, batch.mask)), rel=1e-6)
    assert value == pytest.approx(-np.mean(draws), abs=4 * np.std(draws) / np.sqrt(len(draws)))


@pytest.mark.parametrize("imputation", ["sampled", "expected"])
def test_multr_reports_its_doubly_robust_training_loss_with_pseudo_clicks_of_its_own(synthetic_data_dir, imputation):
    hparams = QUIET + ",sample_num=2,simulator_steps=2,simulator_batch_size=8,imputation_samples=4,imputation=%s,%s" % (
        imputation, "dr_weight_guard=rebalance" if imputation == "expected" else "dr_weight_guard=clip")
    multr = trained(synthetic_data_dir, "ultra_multr.MULTR", hparams)
    input_feed = validation_feed(multr, synthetic_data_dir)
    cached = len(multr.doubly_robust.pseudo_click_cache) if imputation == "expected" else None
    before = training_state(multr)
    first = multr.validation(input_feed)[2][KEY]
    assert_same_state(before, training_state(multr))
    assert multr.validation(input_feed)[2][KEY] == first  # the same pseudo clicks at every validation
    if imputation == "expected":
        assert len(multr.doubly_robust.pseudo_click_cache) == cached  # the validation lists are not cached
        return
    # with the training generator in the click loss's state, training_loss (the train step's) gives the same
    multr.generator.manual_seed(int(np.random.SeedSequence([0, CLICK_LOSS_STREAM]).generate_state(1)[0]))
    multr.set_training_mode(False)
    with torch.no_grad():
        loss, parts = multr.training_loss(multr.batch(input_feed, multr.rank_list_size))
    assert first == pytest.approx(-float(loss), rel=1e-6) and "pseudo_clicks_per_list" in parts


def test_losses_that_depend_on_the_chosen_value_and_ultra_algorithms_are_refused(synthetic_data_dir):
    with pytest.raises(ValueError, match="rerank_weight=auto"):
        build(synthetic_data_dir, QUIET + ",rerank_weight=auto", objective_metric=KEY)
    with pytest.raises(ValueError, match="tune=max_propensity_weight"):
        build(synthetic_data_dir, QUIET + ",tune=max_propensity_weight,tune_grid=[5,10]", algorithm="ultra_multr.DLA",
              objective_metric=KEY)
    with pytest.raises(ValueError, match="does not report its click loss"):
        check_objective_metric({"objective_metric": KEY, "learning_algorithm": "ultra.learning_algorithm.DLA"}, "s")
    check_objective_metric({"objective_metric": KEY, "learning_algorithm": "ultra_multr.MULTR_IPW"}, "s")
    check_objective_metric({"objective_metric": "ndcg_10", "learning_algorithm": "ultra.learning_algorithm.DLA"}, "s")
