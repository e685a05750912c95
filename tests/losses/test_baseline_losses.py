"""The pure math of Table 2's baselines (ultra_multr.losses): hand cases and seeded Monte-Carlo checks."""
from __future__ import annotations

import math

import pytest
import torch

from ultra_multr import losses


def test_rem_posteriors_hand_case_and_they_sum_to_one():
    logits = torch.tensor([[0.0, 0.0, 1.5, 3.0]])
    theta = torch.tensor([0.5, 0.5, 0.8, 0.3])
    clicks = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True, False]])
    p_rel, p_exam = losses.rem_posteriors(logits, theta, clicks, mask)
    # clicked: examined and relevant for sure
    assert p_rel[0, 0] == 1.0 and p_exam[0, 0] == 1.0
    # theta = gamma = 1/2, no click: the three (E, R) != (1, 1) cases are equally likely
    assert p_rel[0, 1].item() == pytest.approx(1 / 3) and p_exam[0, 1].item() == pytest.approx(1 / 3)
    # the third case, P(E=0, R=0 | C=0), completes the distribution
    gamma, t = torch.sigmoid(torch.tensor(1.5)), 0.8
    neither = (1 - t) * (1 - gamma) / (1 - t * gamma)
    assert (p_rel[0, 2] + p_exam[0, 2] + neither).item() == pytest.approx(1.0)
    assert p_rel[0, 3] == 0 and p_exam[0, 3] == 0  # padding


def test_online_em_update_ignores_padding_and_keeps_unseen_positions():
    current = torch.tensor([0.9, 0.9, 0.9])
    posteriors = torch.tensor([[1.0, 0.0, 0.7], [0.0, 0.0, 0.3]])
    mask = torch.tensor([[True, True, False], [True, True, False]])
    updated = losses.online_em_update(current, posteriors, mask, step_size=0.5)
    assert torch.allclose(updated, torch.tensor([0.5 * 0.9 + 0.5 * 0.5, 0.45, 0.9]))


def test_rem_em_recovers_position_propensities():
    """With the true relevance known, REM's EM converges to the true examination (the MLE)."""
    generator = torch.Generator().manual_seed(0)
    n_sessions = 20000
    true_exam = torch.tensor([0.9, 0.5, 0.2])
    gamma = torch.rand(n_sessions, 3, generator=generator) * 0.6 + 0.2
    clicks = (torch.rand(n_sessions, 3, generator=generator) < true_exam * gamma).float()
    mask = torch.ones(n_sessions, 3, dtype=torch.bool)
    logits = torch.log(gamma / (1 - gamma))
    theta = torch.full((3,), 0.9)
    for _ in range(50):
        _, p_exam = losses.rem_posteriors(logits, theta, clicks, mask)
        theta = losses.online_em_update(theta, p_exam, mask, step_size=1.0)
    # The Fisher information of theta_t per session, E[gamma / (theta_t (1 - theta_t gamma))], is >= 1 here,
    # so the MLE's standard deviation is below sqrt(1 / 20000) = 0.0071; allow 5 of them.
    assert torch.allclose(theta, true_exam, atol=0.035)


def test_pairwise_debias_pairs_only_valid_clicked_over_unclicked_slots():
    scores = torch.tensor([[0.0, 1.0, 2.0, 5.0]])
    clicks = torch.tensor([[1.0, 0.0, 1.0, 1.0]])  # the padded slot's "click" must be ignored
    mask = torch.tensor([[True, True, True, False]])
    pairs = losses.pairwise_debias_pair_losses(scores, clicks, mask)
    expected = torch.zeros(1, 4, 4)
    expected[0, 0, 1] = math.log1p(math.exp(1.0))  # clicked 0 above unclicked 1: s_1 - s_0 = 1
    expected[0, 2, 1] = math.log1p(math.exp(-1.0))  # clicked 2 over unclicked 1: s_1 - s_2 = -1
    assert torch.allclose(pairs, expected)

    t_plus = torch.tensor([1.0, 0.5, 0.25, 0.1])
    t_minus = torch.tensor([1.0, 0.8, 0.6, 0.4])
    loss = losses.pairwise_debias_loss(pairs, t_plus, t_minus)
    hand = expected[0, 0, 1] / (1.0 * 0.8) + expected[0, 2, 1] / (0.25 * 0.8)
    assert loss.item() == pytest.approx(hand.item())


def test_pairwise_debias_update_recovers_product_biases():
    """If L_ij = a_i b_j / (the current t's), the update moves t+ towards (a_i / a_1) ** (1 / (p + 1))."""
    a = torch.tensor([4.0, 2.0, 1.0, 0.0])  # position 4 never holds a clicked document
    b = torch.tensor([0.0, 1.0, 3.0, 2.0])  # position 1 is never the unclicked one
    pairs = (a[:, None] * b[None, :]).unsqueeze(0)
    ones = torch.ones(4)
    t_plus, t_minus = losses.pairwise_debias_update(pairs, ones, ones * 0.5, step_size=1.0, regulation_p=1.0)
    assert torch.allclose(t_plus, torch.tensor([1.0, math.sqrt(0.5), math.sqrt(0.25), 1.0]))
    assert torch.equal(t_minus, ones * 0.5)  # no loss at position 1 to normalise by: unchanged

    blended, _ = losses.pairwise_debias_update(pairs, ones, ones, step_size=0.25, regulation_p=0.0)
    assert torch.allclose(blended, torch.tensor([1.0, 0.75 + 0.25 * 0.5, 0.75 + 0.25 * 0.25, 1.0]))


def test_pal_click_probability_factorises_and_loss_is_its_cross_entropy():
    relevance = torch.tensor([[-1.0, 0.5, 2.0], [0.0, 3.0, -2.0]])
    position = torch.tensor([1.0, 0.0, -1.5])
    clicks = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    prob = torch.exp(losses.pal_click_log_probability(relevance, position))
    assert torch.allclose(prob, torch.sigmoid(relevance) * torch.sigmoid(position))
    nll = -(clicks * prob.log() + (1 - clicks) * (1 - prob).log())
    expected = nll[mask].mean()
    assert losses.pal_click_loss(relevance, position, clicks, mask).item() == pytest.approx(expected.item(), rel=1e-6)


def test_pal_loss_is_finite_when_both_towers_saturate():
    relevance = torch.tensor([[120.0, -120.0]], requires_grad=True)
    position = torch.tensor([120.0, 3.0], requires_grad=True)
    loss = losses.pal_click_loss(relevance, position, torch.tensor([[0.0, 1.0]]), torch.ones(1, 2, dtype=torch.bool))
    loss.backward()
    assert math.isfinite(loss.item()) and loss.item() > 10
    assert torch.isfinite(relevance.grad).all() and torch.isfinite(position.grad).all()


def test_pal_towers_recover_examination_ratios_from_randomised_lists():
    """PBM clicks on randomly ordered lists: PAL's position tower learns P(seen) up to scale."""
    generator = torch.Generator().manual_seed(1)
    n_docs, n_sessions = 30, 10000
    true_exam = torch.tensor([1.0, 0.6, 0.35, 0.2])
    relevance = torch.rand(n_docs, generator=generator) * 0.8 + 0.1
    # each session shows 4 random documents in random order
    shown = torch.rand(n_sessions, n_docs, generator=generator).argsort(dim=1)[:, :4]
    clicks = (torch.rand(n_sessions, 4, generator=generator) < true_exam * relevance[shown]).float()
    mask = torch.ones(n_sessions, 4, dtype=torch.bool)
    doc_logits = torch.zeros(n_docs, requires_grad=True)
    position_logits = torch.zeros(4, requires_grad=True)
    optimizer = torch.optim.Adam([doc_logits, position_logits], lr=0.1)
    for _ in range(200):
        optimizer.zero_grad()
        losses.pal_click_loss(doc_logits[shown], position_logits, clicks, mask).backward()
        optimizer.step()
    seen = torch.sigmoid(position_logits.detach())
    # >= 1000 clicks per position: each ratio's standard error is about 0.01; allow 4 of them
    assert torch.allclose(seen / seen[0], true_exam, atol=0.04)
