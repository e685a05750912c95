"""The estimator's contract, through MULTR's own code path.

MULTR is built as main.py builds it (one query of 10 documents, ULTRA's
Raw_data, our ClickSimulationFeed with position-based clicks, examination
1/rank), a known click model is plugged into its simulator interface
(:class:`ultra_multr.experiments.estimator_targets.KnownClickSimulator`), DLA's
propensities are set, batches come from MULTR's own training feed (lists
without a click dropped) and the weights are read where MULTR's loss reads
them (``DoublyRobust.document_weights``).  The randomisation
target is T_d = mean_k(e_k) r_d (studies/estimator_targets/README.md).
"""
from __future__ import annotations

import dataclasses

import functools
import json
import os

import numpy as np
import pytest
import torch
from conftest import REPO_ROOT, require_ultra

require_ultra()

from ultra_multr.experiments import estimator_targets as et  # noqa: E402
from ultra_multr.config import parse_hparams  # noqa: E402
from ultra_multr.algorithms.multr import MULTRConfig  # noqa: E402
from ultra_multr.losses import Reduction, RerankWeight  # noqa: E402
from ultra_multr.feeds.arrays import query_arrays  # noqa: E402

CLICK_PROB = np.array([0.1, 0.16, 0.28, 0.52, 1.0])
LABELS = [3, 2, 0, 1, 3, 0, 2, 0, 1, 0]
EXAM = 1.0 / np.arange(1, 11)
RELEVANCE = CLICK_PROB[LABELS]
BATCHES, BATCH_SIZE = 6, 4096
CASES = {
    "exact simulator, wrong propensities": et.Case("i", EXAM, RELEVANCE, EXAM, RELEVANCE, EXAM ** 0.5),
    "wrong relevance, exact propensities": et.Case(
        "ii", EXAM, RELEVANCE, EXAM, RELEVANCE * np.tile([0.5, 1.5], 5), EXAM
    ),
}


@pytest.fixture(scope="module")
def one_query(tmp_path_factory):
    work = tmp_path_factory.mktemp("one_query")
    data_dir = et.write_one_query_data(str(work / "data"), LABELS)
    return data_dir, et.pbm_json(str(work / "pbm.json"), CLICK_PROB, EXAM)


@functools.lru_cache(maxsize=None)
def measured(one_query, hparams: str, case: str):
    """(mean [N], standard error [N]) of the weights MULTR's training_loss uses, and the target [N]."""
    data_dir, click_model = one_query
    model, feed, data = et.build_multr(data_dir, click_model, hparams, BATCH_SIZE)
    et.install(model, CASES[case], data)
    mean, se = et.monte_carlo_weights(model, feed, data, BATCHES)
    return mean, se, et.stream_terms(CASES[case])["target"]


def proportionality_gaps(mean, se, target):
    """[N] |(W/T) / c - 1| and its allowed size max(2 %, 3 se), c the ratio's mean."""
    ratio = mean / target
    scale = ratio.mean()
    return np.abs(ratio / scale - 1.0), np.maximum(0.02, 3.0 * se / target / scale)


BASE = "sample_num=8,simulator_steps=0,seed=0,device=cpu,imputation_samples=65536"
#: The randomized form with expected imputation and the rebalance guard (settings/multr_randomized.json's estimator).
RANDOMIZED = BASE + ",rerank_weight=randomized,imputation=expected,dr_weight_guard=rebalance"
PAPER = BASE + ",rerank_weight=paper,dr_weight_guard=none"


@pytest.mark.parametrize("case", sorted(CASES))
def test_randomized_estimator_weight_is_proportional_to_the_randomisation_target(one_query, case):
    """rerank_weight=randomized, imputation=expected, dr_weight_guard=rebalance (no longer the default):
    in case (i) the guard acts (without it some weights would be negative) and keeps the target."""
    config = parse_hparams(MULTRConfig, RANDOMIZED)
    assert (str(config.dr.rerank_weight), config.dr.imputation, config.dr.dr_weight_guard) == (
        "randomized", "expected", "rebalance")
    gap, allowed = proportionality_gaps(*measured(one_query, RANDOMIZED, case))
    assert (gap <= allowed).all(), (gap, allowed)


def test_the_guard_acts_in_case_i_where_a_clip_would_move_the_target():
    case = CASES["exact simulator, wrong propensities"]
    target = et.stream_terms(case)["target"]

    def closed(guard):
        return np.abs(et.deviation(et.expected_weights(
            et.Setting(guard, "randomized", 1.0, "dr", guard, "expected"), case, 8), target)).max()

    assert closed("none") < 1e-9 and closed("rebalance") < 1e-9
    assert closed("clip") > 0.1  # the unguarded weights go negative here: the guard has work to do


def test_the_papers_form_misses_the_target_with_wrong_relevance_and_exact_propensities(one_query):
    gap, allowed = proportionality_gaps(*measured(one_query, PAPER, "wrong relevance, exact propensities"))
    assert (gap > allowed).any() and gap.max() > 0.2, (gap, allowed)


def test_monte_carlo_through_multr_agrees_with_the_closed_form(one_query):
    """The closed forms of studies/estimator_targets/README.md describe what MULTR computes (paper's form, case ii)."""
    mean, se, _ = measured(one_query, PAPER, "wrong relevance, exact propensities")
    setting = et.Setting("paper", "mixture", 8 / 9, "dr", "none", "expected")
    closed = et.expected_weights(setting, CASES["wrong relevance, exact propensities"], 8)
    assert (np.abs(mean - closed) < 4.0 * se + 1e-3 * closed).all(), (mean, closed, se)


def test_the_papers_settings_file_keeps_eq_dr_loss():
    with open(os.path.join(REPO_ROOT, "settings", "multr_paper.json")) as handle:
        hparams = json.load(handle)["learning_algorithm_hparams"]
    config = parse_hparams(MULTRConfig, hparams)
    dr = config.dr
    assert (str(dr.rerank_weight), dr.dr_weight_guard, dr.imputation, dr.variant, dr.dr_normalization,
            config.propensity_ranker) == ("paper", "none", "sampled", "dr", "none", "multr")
    # the paper has no guard (MULTR's defaults: order_fit, position) and no position embedding in its decoder
    assert (config.guards.logger_guard, config.guards.simulator_guard) == ("none", "none")
    assert config.simulator.simulator_position_size == 0


def test_the_authors_code_settings_file_differs_from_the_papers_in_the_loss_alone():
    settings = {}
    for name in ("multr_paper.json", "multr_authors_code.json"):
        with open(os.path.join(REPO_ROOT, "settings", name)) as handle:
            settings[name] = json.load(handle)
    paper, authors = (parse_hparams(MULTRConfig, s["learning_algorithm_hparams"]) for s in settings.values())
    assert str(authors.dr.rerank_weight) == "authors_code"
    as_papers = dataclasses.replace(authors.dr, rerank_weight=RerankWeight.parse("paper"), dr_normalization=Reduction.NONE)
    assert dataclasses.replace(authors, dr=as_papers) == paper
    assert authors.propensity_ranker == "multr"  # the authors' code couples DLA's examination to MULTR's ranker
    assert {k: v for k, v in settings["multr_paper.json"].items() if k != "learning_algorithm_hparams"} == {
        k: v for k, v in settings["multr_authors_code.json"].items() if k != "learning_algorithm_hparams"
    }


def test_the_default_is_the_papers_mixture_with_the_rebalance_guard_and_the_randomized_form_a_settings_file():
    """MULTR's defaults: Eq. dr_loss's mixture at a = S / (S + 1), expected imputation, the rebalance guard
    (studies/estimator_targets/README.md); the randomized form is settings/multr_randomized.json."""
    config = parse_hparams(MULTRConfig, "")
    dr = config.dr
    assert (str(dr.rerank_weight), dr.imputation, dr.dr_weight_guard, dr.variant, dr.dr_normalization,
            config.propensity_ranker, config.guards.logger_guard) == ("paper", "expected", "rebalance", "dr",
                                                                      "batch_weight", "dla", "order_fit")
    assert dr.loss().rerank_weight == pytest.approx(dr.sample_num / (dr.sample_num + 1.0))
    with open(os.path.join(REPO_ROOT, "settings", "multr_randomized.json")) as handle:
        settings = json.load(handle)
    assert settings["learning_algorithm"] == "ultra_multr.MULTR"
    config = parse_hparams(MULTRConfig, settings["learning_algorithm_hparams"])
    dr = config.dr
    assert (str(dr.rerank_weight), dr.imputation, dr.dr_weight_guard, dr.variant, config.guards.logger_guard) == (
        "randomized", "expected", "rebalance", "dr", "order_fit"
    )


def test_true_click_model_control_gives_the_click_models_stream_probabilities(one_query):
    """simulator_control=true_click_model: MULTR's pseudo clicks are the feed's click model, exact for the
    stream (divided by P(a click on the logged list)), on the logged order and under random orders."""
    data_dir, click_model = one_query
    model, _, data = et.build_multr(data_dir, click_model, RANDOMIZED + ",simulator_control=true_click_model", 8)
    model.prepare()
    arrays = query_arrays(data, 10)
    features = torch.from_numpy(arrays.list_features(np.array([0])))
    mask = torch.from_numpy(arrays.mask[:1])
    observed, randomized = (t[0].numpy() for t in model.doubly_robust.pseudo_click_cache.lookup(features, mask))
    p_any = et.any_click(EXAM, RELEVANCE)
    np.testing.assert_allclose(observed, RELEVANCE * EXAM / p_any, rtol=1e-5)
    np.testing.assert_allclose(randomized, RELEVANCE * EXAM.mean() / p_any, rtol=0.02)
    orders = torch.arange(10).expand(1, 20000, 10)
    sampled = model.doubly_robust.simulator.sample_clicks(features, mask, orders, torch.Generator().manual_seed(0))
    np.testing.assert_allclose(sampled[0].mean(0).numpy(), observed, atol=0.02)


def test_shuffled_positions_control_trains_on_sessions_in_random_order(one_query):
    """simulator_control=shuffled_positions: the simulator's sessions keep each document's click but not its
    position, so the click rate is flat over positions (it falls with 1/rank on the logged order)."""
    data_dir, click_model = one_query
    rates = {}
    for control in ("none", "shuffled_positions"):
        model, feed, data = et.build_multr(data_dir, click_model, RANDOMIZED + ",simulator_control=" + control, 4096)
        batch = model.simulator_phase.draws(feed, data, "simulator_train").next_batch()
        first = batch.features[..., 0]
        assert torch.equal(torch.sort(first, dim=1).values, torch.sort(first[:1].expand_as(first), dim=1).values)
        rates[control] = batch.labels.mean(0).numpy()
        documents = torch.sort(first[0]).values
        by_document = (batch.labels.unsqueeze(-1) * (first.unsqueeze(-1) == documents)).sum((0, 1)).numpy()
        rates[control + " by document"] = by_document / batch.batch_size
    assert rates["none"][0] > 4 * rates["none"][-1]
    assert np.abs(rates["shuffled_positions"] - rates["shuffled_positions"].mean()).max() < 0.03
    # the documents' click rates are drawn from the same sessions' distribution either way
    np.testing.assert_allclose(rates["shuffled_positions by document"], rates["none by document"], atol=0.03)


def test_the_estimator_page_lists_every_knob_in_which_the_paper_the_authors_code_and_the_defaults_differ():
    from ultra_multr.config import flat_values

    configs = [parse_hparams(MULTRConfig, "")]
    for name in ("multr_paper.json", "multr_authors_code.json"):
        with open(os.path.join(REPO_ROOT, "settings", name)) as handle:
            configs.append(parse_hparams(MULTRConfig, json.load(handle)["learning_algorithm_hparams"]))
    values = [flat_values(config) for config in configs]

    def shown(value):
        return "[%s]" % ",".join(str(v) for v in value) if isinstance(value, tuple) else str(value)

    differing = {name: [shown(v[name]) for v in values] for name in values[0]
                 if len({shown(v[name]) for v in values}) > 1 and name != "seed"}
    with open(os.path.join(REPO_ROOT, "docs", "estimator.md")) as handle:
        page = handle.read()
    section = page.split("## The paper's form, the authors' code's, and the defaults")[1].split("\n## ")[0]
    rows = {cells[1].strip("` "): [c.strip() for c in cells[2:5]]
            for cells in (line.split("|") for line in section.splitlines() if line.startswith("| `"))}
    assert rows == differing
