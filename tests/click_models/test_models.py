"""ultra_multr.click_models.models: closed forms, exact likelihoods, descriptions, the shipped settings' click
models (ULTRA's adapters: test_ultra.py)."""
import glob
import itertools
import json
import math
import os

import pytest
from conftest import REPO_ROOT as REPO
import torch

from click_model_tables import CLICK_PROB, UBM_TABLE, Z
from ultra_multr import click_models as cm


def paper_relevance(y, y_max, eps=0.1):
    return eps + (1 - eps) * (2 ** y - 1) / (2 ** y_max - 1)


def all_models():
    return {
        "pbm": cm.PositionBasedModel(CLICK_PROB, cm.reciprocal_rank_exam_prob(1.0, 6)),
        "cascade": cm.CascadeModel(CLICK_PROB),
        "cascade_exam": cm.CascadeModel(CLICK_PROB, [1.0, 0.9, 0.7, 0.5]),
        "dcm": cm.DependentClickModel(CLICK_PROB, [0.8, 0.6, 0.4, 0.3], [1.0, 0.95, 0.9]),
        "ubm": cm.UserBrowsingModel(CLICK_PROB, UBM_TABLE),
    }


def random_lists(batch, n, seed, max_label=4):
    """Labels and a mask with padding at the tail *and* in the middle."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, max_label + 1, (batch, n), generator=generator).float()
    mask = torch.ones(batch, n, dtype=torch.bool)
    mask[0, n - 3 :] = False
    if batch > 1:
        mask[1, 2] = False
    labels = torch.where(mask, labels, torch.zeros_like(labels))
    return labels, mask


@pytest.mark.parametrize("name", sorted(all_models()))
def test_empirical_click_rates_match_closed_form(name):
    model = all_models()[name]
    labels, mask = random_lists(3, 12, seed=1)
    samples = 20000
    clicks = model.sample(labels.repeat(samples, 1), mask.repeat(samples, 1), torch.Generator().manual_seed(2))
    rates = clicks.view(samples, 3, 12).double().mean(dim=0)
    expected = model.click_probabilities(labels, mask)
    tolerance = Z * torch.sqrt(expected * (1 - expected) / samples) + 1e-12
    assert torch.all((rates - expected).abs() <= tolerance), (rates - expected)
    assert torch.all(rates[~mask] == 0) and torch.all(expected[~mask] == 0)


@pytest.mark.parametrize("y_max", [2, 4])
def test_cascade_is_the_paper_protocol(y_max):
    model = cm.CascadeModel(cm.graded_click_prob(0.1, y_max))
    labels = torch.tensor([[float(y_max), 0.0, 1.0, float(y_max - 1), 0.0]])
    mask = torch.ones_like(labels, dtype=torch.bool)
    r = [paper_relevance(int(y), y_max) for y in labels[0]]
    expected = [r[t] * math.prod(1 - r[s] for s in range(t)) for t in range(5)]
    assert model.click_probabilities(labels, mask)[0].tolist() == pytest.approx(expected, abs=1e-12)
    # The first click ends the session.
    clicks = model.sample(labels.repeat(5000, 1), mask.repeat(5000, 1), torch.Generator().manual_seed(0))
    assert clicks.sum(dim=1).max() == 1


@pytest.mark.parametrize("name", sorted(all_models()))
def test_log_likelihood_is_an_exact_distribution(name):
    model = all_models()[name]
    n = 5
    labels, mask = random_lists(3, n, seed=3)
    sessions = torch.tensor(list(itertools.product([0.0, 1.0], repeat=n)))
    for b in range(3):
        repeated_labels = labels[b : b + 1].expand(len(sessions), n)
        repeated_mask = mask[b : b + 1].expand(len(sessions), n)
        probs = model.log_likelihood(repeated_labels, sessions, repeated_mask).exp()
        assert float(probs.sum()) == pytest.approx(1.0, abs=1e-12)
        # The likelihood implies the closed-form marginals.
        marginals = (probs[:, None] * sessions.double()).sum(dim=0)
        assert marginals.tolist() == pytest.approx(model.click_probabilities(labels, mask)[b].tolist(), abs=1e-12)
        # Clicks on padded slots are impossible.
        assert torch.all(probs[(sessions.bool() & ~repeated_mask).any(dim=1)] == 0)


def test_dcm_spans_cascade_and_independent_clicks():
    labels, mask = random_lists(4, 6, seed=4)
    sessions = torch.bernoulli(torch.full((4, 6), 0.3), generator=torch.Generator().manual_seed(5)) * mask
    never_go_on = cm.DependentClickModel(CLICK_PROB, [0.0])
    always_go_on = cm.DependentClickModel(CLICK_PROB, [1.0])
    cascade = cm.CascadeModel(CLICK_PROB)
    independent = cm.PositionBasedModel(CLICK_PROB, [1.0])
    assert torch.equal(
        never_go_on.log_likelihood(labels, sessions, mask), cascade.log_likelihood(labels, sessions, mask)
    )
    assert always_go_on.log_likelihood(labels, sessions, mask).tolist() == pytest.approx(
        independent.log_likelihood(labels, sessions, mask).tolist(), abs=1e-12
    )


def test_labels_outside_the_range_are_refused():
    model = cm.CascadeModel(cm.graded_click_prob(0.1, 2))
    mask = torch.tensor([[True, True, False]])
    with pytest.raises(cm.LabelRangeError, match="label 3 .* 0..2"):
        model.relevance(torch.tensor([[1.0, 3.0, 0.0]]), mask)
    with pytest.raises(cm.LabelRangeError, match="label 1.5"):
        model.relevance(torch.tensor([[1.5, 0.0, 0.0]]), mask)
    # A padded slot's label is never read.
    assert model.relevance(torch.tensor([[2.0, 0.0, 99.0]]), mask)[0, 2] == 0
    with pytest.raises(cm.LabelRangeError, match="my data: labels reach 4 .* 0..2"):
        model.check_max_label(4.0, "my data")
    model.check_max_label(2.0, "my data")


def test_with_eta_rescales_position_bias():
    eta1 = cm.PositionBasedModel(CLICK_PROB, cm.reciprocal_rank_exam_prob(1.0, 10), eta=1.0)
    assert eta1.with_eta(2.0).exam_prob.tolist() == pytest.approx(cm.reciprocal_rank_exam_prob(2.0, 10))
    ubm = cm.UserBrowsingModel(CLICK_PROB, UBM_TABLE)
    assert ubm.with_eta(0.5).exam_table[3].tolist() == pytest.approx([x ** 0.5 for x in UBM_TABLE[3]])


@pytest.mark.parametrize("name", sorted(all_models()))
def test_description_round_trip(name):
    model = all_models()[name]
    desc = json.loads(json.dumps(model.describe()))
    assert cm.click_model_from_description(desc).describe() == model.describe()


def test_description_with_a_typo_is_refused():
    with pytest.raises(ValueError, match="unknown \\['continue_prob'\\].*continuation_prob"):
        cm.click_model_from_description(
            {"model_name": "dependent_click_model", "click_prob": [0.1, 1.0], "continue_prob": [0.5]}
        )
    with pytest.raises(ValueError, match="unknown click model_name 'pbm'; available: cascade_model"):
        cm.click_model_from_description({"model_name": "pbm"})


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(REPO, "settings", "click_models", "*.json"))))
def test_shipped_settings_follow_the_protocol(path):
    with open(path) as handle:
        desc = json.load(handle)
    model = cm.click_model_from_description(desc)
    y_max = model.max_label
    assert "ymax%d" % y_max in os.path.basename(path)
    assert model.click_prob.tolist() == pytest.approx([paper_relevance(y, y_max) for y in range(y_max + 1)])
    if desc["model_name"] == "cascade_model":
        assert model.exam_prob.tolist() == [1.0] * 10
    else:
        eta = desc["eta"]
        assert "eta%d" % eta in os.path.basename(path)
        assert model.exam_prob.tolist() == pytest.approx([(1.0 / r) ** eta for r in range(1, 11)])
