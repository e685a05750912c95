"""The doubly-robust estimator's contract, by seeded Monte Carlo on cascade clicks.

The ranker, as in DLA, only learns from sessions with at least one click.
Property (i), stated precisely: let the simulator's pseudo click on the
observed list be exact *for that stream*, c_hat_t = E[c_t | sum_u c_u >= 1],
and let the propensity weights w, the re-ranked pseudo clicks c^s, the
scores and so Delta be fixed (independent of the session's real clicks).
Then E[(c_t - c_hat_t) w_t | sum_u c_u >= 1] = 0 at every position t, and
since Eq. dr_loss (unguarded) is linear in c with coefficients
(1 - a) w_t Delta_t, its expectation over the stream equals the imputed loss:
Eq. dr_loss with the correction (c - c_hat) w dropped.  (The "clip" guard
makes the loss non-linear in c where it acts, trading this for a bounded loss.)
Property (ii): a simulator exact for the unfiltered stream, c_hat_t = E[c_t],
leaves a positive correction at every position, E[c_t | click] > E[c_t].
Property (iii): with c_hat = 0 and S = 0 the DR loss is the IPW loss exactly.
"""
from __future__ import annotations

import functools

import pytest
import torch

from ultra_multr import losses
from ultra_multr.click_models import CascadeModel, graded_click_prob

N = 10
SESSIONS = 200_000
LABELS = torch.tensor([[1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0]])
SIGMAS = 4.0  # Monte-Carlo tolerance, in standard errors


@functools.lru_cache(maxsize=1)
def filtered_sessions():
    """[M, N] cascade sessions of one list, only those with >= 1 click (the ranker's stream),
    and the model's exact [N] click probabilities per session of the unfiltered stream."""
    model = CascadeModel(graded_click_prob(0.1, 4))
    mask = torch.ones(SESSIONS, N, dtype=torch.bool)
    clicks = model.sample(LABELS.expand(SESSIONS, N), mask, torch.Generator().manual_seed(0)).double()
    unfiltered = model.click_probabilities(LABELS, mask[:1])[0].double()
    return clicks[clicks.sum(1) > 0], unfiltered


def fixed_terms(rows):
    """Scores, propensity weights and re-ranked pseudo-click probabilities, the same in every session."""
    generator = torch.Generator().manual_seed(1)
    scores = torch.randn(1, N, generator=generator, dtype=torch.float64).expand(rows, N)
    weights = losses.ipw_weights(1.0 / torch.arange(1, N + 1, dtype=torch.float64).unsqueeze(0), torch.ones(1, N, dtype=torch.bool))
    randomized = torch.rand(1, 4, N, generator=generator, dtype=torch.float64).expand(rows, 4, N) * 0.3
    return scores, weights.expand(rows, N), randomized, torch.ones(rows, N, dtype=torch.bool)


def per_session_dr_losses(clicks, observed_pseudo):
    """[M] unguarded Eq. dr_loss (paper weight, S = 4) of each session."""
    scores, weights, randomized, mask = fixed_terms(clicks.shape[0])
    document_weights = losses.dr_document_weights(
        clicks, observed_pseudo.expand_as(clicks), randomized, weights, mask, "dr", guard="none"
    )
    return (document_weights * losses.listwise_document_losses(scores, mask)).sum(-1)


def correction_z_scores(clicks, observed_pseudo):
    """[N] mean of (c_t - c_hat_t) w_t over the sessions, in standard errors."""
    _, weights, _, _ = fixed_terms(clicks.shape[0])
    correction = (clicks - observed_pseudo) * weights
    return correction.mean(0) / (correction.std(0) / correction.shape[0] ** 0.5)


def test_stream_exact_simulator_leaves_no_correction_and_dr_equals_the_imputed_loss():
    clicks, unfiltered = filtered_sessions()
    exact = unfiltered / (1.0 - torch.prod(1.0 - examined_click_probabilities()))  # E[c_t | >= 1 click]
    assert exact.sum().item() == pytest.approx(1.0, rel=1e-9)  # cascade: exactly one click given any
    assert correction_z_scores(clicks, exact).abs().max() < SIGMAS

    dr = per_session_dr_losses(clicks, exact)
    imputed = per_session_dr_losses(exact.expand_as(clicks), exact)  # c = c_hat: correction dropped
    assert torch.allclose(imputed, imputed[0])  # no randomness left in the imputed loss
    assert abs(dr.mean() - imputed[0]) < SIGMAS * dr.std() / dr.shape[0] ** 0.5


def test_unfiltered_simulator_leaves_a_positive_correction_at_every_position():
    clicks, unfiltered = filtered_sessions()
    z = correction_z_scores(clicks, unfiltered)
    assert (z > SIGMAS).all(), z
    dr = per_session_dr_losses(clicks, unfiltered)
    imputed = per_session_dr_losses(unfiltered.expand_as(clicks), unfiltered)
    assert dr.mean() - imputed[0] > SIGMAS * dr.std() / dr.shape[0] ** 0.5


def examined_click_probabilities():
    """[N] per-position click probability if examined (the cascade's r_t) of LABELS."""
    probs = torch.tensor(graded_click_prob(0.1, 4), dtype=torch.float64)
    return probs[LABELS[0].long()]


@pytest.mark.parametrize("guard", losses.WEIGHT_GUARDS)
def test_no_pseudo_clicks_and_no_re_rankings_is_the_ipw_loss(guard):
    clicks, _ = filtered_sessions()
    clicks = clicks[:64]
    scores, weights, _, mask = fixed_terms(64)
    zeros = torch.zeros_like(clicks)
    dr = losses.dr_loss(scores, mask, clicks, zeros, torch.zeros(64, 0, N, dtype=torch.float64), weights, "dr", guard=guard)
    assert dr.item() == losses.ipw_loss(scores, mask, clicks, weights).item()
