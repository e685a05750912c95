"""Fitted baselines and held-out scores of ultra_multr.click_models.evaluation (pure torch)."""
import math

import pytest
import torch

from ultra_multr import click_models as cm
from ultra_multr.click_models.evaluation import (
    KnownClickModel,
    QueryLists,
    SessionModel,
    Sessions,
    fit_cascade,
    fit_pbm,
    score_model,
    slot_log_likelihood,
)

Z = 4.5  # Monte-Carlo tolerance in standard deviations (every test is seeded)
CLICK_PROB = cm.graded_click_prob(0.1, 2)
UBM_TABLE = [[1.0], [0.9, 1.0], [0.8, 0.6, 0.9], [0.9, 0.7, 0.5, 0.8], [1.0, 0.8, 0.6, 0.4, 0.7]]


def make_lists(n_queries, n, seed):
    """Labels 0..2, the last query with two padded slots, another with padding inside."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n_queries, n), generator=generator).double()
    mask = torch.ones(n_queries, n, dtype=torch.bool)
    mask[-1, n - 2 :] = False
    mask[0, 1] = False
    labels = torch.where(mask, labels, 0.0)
    return QueryLists(features=torch.zeros(n_queries, n, 1), labels=labels, mask=mask)


def sample(model, lists, n_sessions, seed):
    generator = torch.Generator().manual_seed(seed)
    query = torch.randint(lists.n_queries, (n_sessions,), generator=generator)
    clicks = model.sample(lists.labels[query], lists.mask[query], generator)
    return Sessions(query=query, clicks=clicks.float())


MODELS = {
    "pbm": cm.PositionBasedModel(CLICK_PROB, [1.0, 0.7, 0.5, 0.4, 0.3]),
    "cascade": cm.CascadeModel(CLICK_PROB),
    "dcm": cm.DependentClickModel(CLICK_PROB, [0.6, 0.4]),
    "ubm": cm.UserBrowsingModel(CLICK_PROB, UBM_TABLE),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_known_conditionals_chain_to_the_session_likelihood(name):
    model = MODELS[name]
    lists = make_lists(6, 5, seed=1)
    sessions = sample(model, lists, 300, seed=2)
    probs = KnownClickModel(model).conditional_click_probs(lists, sessions)
    chained = slot_log_likelihood(probs, sessions, lists).sum(1)
    exact = model.log_likelihood(lists.labels[sessions.query], sessions.clicks, sessions.mask(lists))
    # Equal up to the probability floor of the scores.
    assert torch.allclose(chained, exact, atol=1e-4)


def test_known_cascade_conditionals_are_the_closed_form():
    lists = make_lists(4, 5, seed=3)
    sessions = sample(MODELS["cascade"], lists, 200, seed=4)
    probs = KnownClickModel(MODELS["cascade"]).conditional_click_probs(lists, sessions)
    relevance = torch.tensor(CLICK_PROB, dtype=torch.float64)[lists.labels[sessions.query].long()]
    clicked_above = (torch.cumsum(sessions.clicks, 1) - sessions.clicks) > 0
    expected = torch.where(clicked_above, 0.0, relevance)
    mask = sessions.mask(lists)
    assert torch.allclose(probs[mask], expected[mask], atol=1e-12)


def test_fitted_cascade_recovers_attractiveness():
    lists = make_lists(5, 5, seed=5)
    sessions = sample(MODELS["cascade"], lists, 20000, seed=6)
    fitted = fit_cascade(lists, sessions, prior_strength=1.0)
    clicks_so_far = torch.cumsum(sessions.clicks, 1) - sessions.clicks
    examined = torch.zeros(lists.mask.shape, dtype=torch.float64)
    examined.index_add_(0, sessions.query, (sessions.mask(lists) & (clicks_so_far == 0)).double())
    truth = torch.tensor(CLICK_PROB, dtype=torch.float64)[lists.labels.long()]
    checked = lists.mask & (examined > 200)
    assert int(checked.sum()) >= 10
    tolerance = Z * torch.sqrt(truth * (1 - truth) / examined.clamp(min=1)) + 2.0 / examined.clamp(min=1)
    assert torch.all(((fitted.attractiveness - truth).abs() <= tolerance)[checked])
    # Exact marginals equal the true model's when given the true attractiveness.
    fitted.attractiveness = truth
    assert torch.allclose(fitted.click_rates(lists), MODELS["cascade"].click_probabilities(lists.labels, lists.mask))


def test_fitted_pbm_recovers_click_rates_and_backs_off_for_unseen_queries():
    lists = make_lists(6, 5, seed=7)
    train = sample(MODELS["pbm"], lists, 30000, seed=8)
    train = Sessions(query=train.query[train.query != 2], clicks=train.clicks[train.query != 2])  # query 2 unseen
    fitted = fit_pbm(lists, train, iterations=300, prior_strength=1.0)
    truth = MODELS["pbm"].click_probabilities(lists.labels, lists.mask)
    counts = torch.bincount(train.query, minlength=lists.n_queries).double()[:, None]
    seen = lists.mask & (counts > 0)
    tolerance = Z * torch.sqrt(truth * (1 - truth) / counts.clamp(min=1)) + 2.0 / counts.clamp(min=1)
    assert torch.all(((fitted.click_rates(lists) - truth).abs() <= tolerance)[seen])
    # The unseen query's documents get the mean attractiveness of the seen ones.
    prior = float(fitted.attractiveness[seen].mean())
    assert fitted.attractiveness[2].tolist() == pytest.approx([prior] * 5, rel=1e-6)


class CoinFlip(SessionModel):
    name = "coin"

    def conditional_click_probs(self, lists, sessions):
        return torch.full(sessions.clicks.shape, 0.5, dtype=torch.float64)

    def click_rates(self, lists):
        return torch.where(lists.mask, 0.5, 0.0).double()


def test_scores_follow_their_definitions():
    lists = make_lists(3, 4, seed=9)
    sessions = sample(MODELS["pbm"], lists, 50, seed=10)
    scores = score_model(CoinFlip(), lists, sessions)
    shown = sessions.mask(lists).double().sum(1)
    assert scores.log_likelihood == pytest.approx(float(-math.log(2) * shown.mean()))
    assert scores.perplexity_per_position == pytest.approx([2.0] * 4)
    assert scores.perplexity == pytest.approx(2.0)
    assert scores.ctr_per_position == pytest.approx([0.5] * 4)
    assert [b["count"] for b in scores.reliability] == [int(shown.sum())]
