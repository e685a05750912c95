"""The vectorised DR loss against a literal reading of Eq. dr_loss."""
from __future__ import annotations

import math

import pytest
from conftest import require_ultra
import torch

from ultra_multr import losses
from ultra_multr.randomization import random_permutations, to_document_order


def literal_dr_loss(scores, mask, clicks, pseudo_by_position, orders, propensity, variant):
    """Eq. dr_loss term by term, one query and one list at a time.

    pseudo_by_position[b, p, t] is the pseudo click at position t of list p,
    whose documents are orders[b, p] (list 0 is the observed list);
    propensity[b, t] is P(e = 1) of observed position t relative to position 1.
    """
    total = 0.0
    for b in range(scores.shape[0]):
        per_query = 0.0
        n_lists = orders.shape[1]
        for p in range(n_lists):
            order = orders[b, p]
            shown = [int(d) for d in order if mask[b, int(d)]]
            list_scores = torch.stack([scores[b, d] for d in shown])
            log_probs = torch.log_softmax(list_scores, dim=0)
            delta = {d: -log_probs[i] for i, d in enumerate(shown)}
            for t, d in enumerate(shown):  # imputed error of list p
                if pseudo_by_position[b, p, t] == 1:
                    per_query = per_query + delta[d]
            if p == 0:  # o_pi = 1 only for the observed list
                for t, d in enumerate(shown):
                    if variant == "dr":
                        weight = 1.0 / propensity[b, t]
                        per_query = per_query + clicks[b, d] * delta[d] * weight
                        per_query = per_query - pseudo_by_position[b, 0, t] * delta[d] * weight
                    else:  # EIB: the observed list's real error replaces its imputed one
                        per_query = per_query + (clicks[b, d] - pseudo_by_position[b, 0, t]) * delta[d]
        total = total + per_query / n_lists
    return total / scores.shape[0]


def random_case(seed, batch=5, slots=6, samples=3, padded=True):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(batch, slots, generator=generator, dtype=torch.float64)
    mask = torch.ones(batch, slots, dtype=torch.bool)
    if padded:
        for b in range(batch):
            mask[b, int(torch.randint(2, slots + 1, (1,), generator=generator)) :] = False
    clicks = (torch.rand(batch, slots, generator=generator) < 0.3).double() * mask
    propensity = torch.rand(batch, slots, generator=generator, dtype=torch.float64) * 0.9 + 0.1
    propensity[:, 0] = 1.0
    permutations = random_permutations(mask, samples, generator)
    identity = torch.arange(slots).expand(batch, 1, slots)
    orders = torch.cat([identity, permutations], dim=1)
    shown = torch.gather(mask.unsqueeze(1).expand_as(orders), 2, orders)
    pseudo = (torch.rand(orders.shape, generator=generator) < 0.3).double() * shown
    return scores, mask, clicks, pseudo, orders, permutations, propensity


def vectorised(scores, mask, clicks, pseudo, permutations, propensity, variant, rerank_weight=None, guard="none"):
    """losses.dr_loss on random_case's tensors; unguarded by default, like the literal equation."""
    weights = losses.ipw_weights(propensity, mask)
    randomized = to_document_order(pseudo[:, 1:], permutations)
    return losses.dr_loss(scores, mask, clicks, pseudo[:, 0], randomized, weights, variant, rerank_weight, guard)


@pytest.mark.parametrize("rerank_weight", [None, "paper"])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("variant", ["dr", "eib"])
@pytest.mark.parametrize("seed", range(4))
def test_vectorised_dr_loss_equals_literal_equation(seed, variant, padded, rerank_weight):
    scores, mask, clicks, pseudo, orders, permutations, propensity = random_case(seed, padded=padded)
    a = losses.paper_rerank_weight(permutations.shape[1]) if rerank_weight == "paper" else None
    expected = literal_dr_loss(scores, mask, clicks, pseudo, orders, propensity, variant)
    actual = vectorised(scores, mask, clicks, pseudo, permutations, propensity, variant, a)
    assert actual.item() == pytest.approx(float(expected), rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("variant", ["dr", "eib"])
def test_rerank_weight_zero_is_the_observed_list_alone(variant):
    scores, mask, clicks, pseudo, orders, permutations, propensity = random_case(23, samples=3)
    expected = literal_dr_loss(scores, mask, clicks, pseudo[:, :1], orders[:, :1], propensity, variant)
    actual = vectorised(scores, mask, clicks, pseudo, permutations, propensity, variant, 0.0)
    assert actual.item() == pytest.approx(float(expected), rel=1e-10)
    with_re_rankings = vectorised(scores, mask, clicks, pseudo, permutations, propensity, variant, 0.5)
    assert with_re_rankings.item() != pytest.approx(float(expected), rel=1e-6)


def test_rerank_weight_mixes_observed_and_mean_re_ranked_terms():
    """W_d = (1 - a) [c^o + (c - c^o) w] + a mean_s c^s, checked on one document."""
    clicks, observed = torch.tensor([[0.0, 1.0]]), torch.tensor([[1.0, 0.0]])
    randomized = torch.tensor([[[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [1.0, 0.0]]])  # mean [0.75, 0.25]
    weights, mask = torch.tensor([[1.0, 4.0]]), torch.ones(1, 2, dtype=torch.bool)
    got = losses.dr_document_weights(clicks, observed, randomized, weights, mask, "dr", 0.25, guard="none")
    assert got[0].tolist() == pytest.approx([0.75 * 0.0 + 0.25 * 0.75, 0.75 * 4.0 + 0.25 * 0.25])
    with pytest.raises(ValueError, match="needs re-ranked pseudo clicks"):
        losses.dr_document_weights(clicks, observed, randomized[:, :0], weights, mask, "dr", 0.5)
    with pytest.raises(ValueError, match="rerank_weight must be in"):
        losses.dr_document_weights(clicks, observed, randomized, weights, mask, "dr", 1.5)


@pytest.mark.parametrize("seed", range(3))
def test_clip_guard_keeps_every_document_weight_non_negative(seed):
    scores, mask, clicks, pseudo, orders, permutations, propensity = random_case(seed, batch=40)
    weights = losses.ipw_weights(propensity, mask)
    randomized = to_document_order(pseudo[:, 1:], permutations)
    args = (clicks, pseudo[:, 0], randomized, weights, mask, "dr")
    unguarded = losses.dr_document_weights(*args, guard="none")
    assert (unguarded[mask] < 0).any()  # the case has weights the guard must act on
    clipped = losses.dr_document_weights(*args)  # "clip" is the default
    assert (clipped >= 0).all() and (clipped[~mask] == 0).all()
    assert torch.equal(clipped, unguarded.clamp(min=0))
    share = losses.negative_weight_share(unguarded, mask)
    assert share == pytest.approx(float((unguarded[mask] < 0).double().mean()))


def negative_weight_list():
    """One list whose paper weight is negative: document 1 has c = 0, c^o = 1, w = 5 (W = 1 - 5 = -4)."""
    clicks = torch.tensor([[1.0, 0.0, 0.0]])
    observed = torch.tensor([[0.0, 1.0, 0.0]])
    weights = torch.tensor([[1.0, 5.0, 1.0]])
    return clicks, observed, torch.zeros(1, 0, 3), weights, torch.ones(1, 3, dtype=torch.bool)


def minimise(guard, steps=400, lr=1.0):
    clicks, observed, randomized, weights, mask = negative_weight_list()
    scores = torch.zeros(1, 3, requires_grad=True)
    optimizer = torch.optim.SGD([scores], lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = losses.dr_loss(scores, mask, clicks, observed, randomized, weights, "dr", guard=guard)
        loss.backward()
        optimizer.step()
    return float(loss.detach()), scores.detach()


def test_clip_guard_bounds_the_loss_below_and_the_paper_form_is_unbounded():
    loss, scores = minimise("clip")
    assert loss >= 0.0 and loss < 0.01  # a non-negative weighted sum of cross-entropies
    assert torch.isfinite(scores).all() and scores.abs().max() < 10
    loss, scores = minimise("none")
    assert loss < -1000  # W_1 = -4 rewards pushing document 1 down without end
    assert scores[0, 1] < -1000
    assert losses.negative_weight_share(
        losses.dr_document_weights(*negative_weight_list(), guard="none"), torch.ones(1, 3, dtype=torch.bool)
    ) == pytest.approx(1 / 3)


def test_sample_num_zero_uses_the_observed_list_only():
    scores, mask, clicks, pseudo, orders, permutations, propensity = random_case(7, samples=0)
    assert permutations.shape[1] == 0
    expected = literal_dr_loss(scores, mask, clicks, pseudo, orders, propensity, "dr")
    assert vectorised(scores, mask, clicks, pseudo, permutations, propensity, "dr").item() == pytest.approx(
        float(expected), rel=1e-10
    )


def test_correction_vanishes_when_pseudo_clicks_equal_real_clicks():
    scores, mask, clicks, pseudo, orders, permutations, propensity = random_case(11)
    pseudo[:, 0] = clicks  # the simulator reproduces the observed session exactly
    dr = vectorised(scores, mask, clicks, pseudo, permutations, propensity, "dr")
    eib = vectorised(scores, mask, clicks, pseudo, permutations, propensity, "eib")
    assert dr.item() == pytest.approx(eib.item(), rel=1e-12)
    # ... and it is not trivially so: other pseudo clicks change the DR loss.
    pseudo[:, 0] = 1.0 - clicks
    pseudo[:, 0] *= mask
    assert vectorised(scores, mask, clicks, pseudo, permutations, propensity, "dr").item() != pytest.approx(eib.item())


def test_no_imputed_clicks_gives_ipw_loss_over_list_count():
    scores, mask, clicks, pseudo, orders, permutations, propensity = random_case(13, samples=4)
    pseudo.zero_()
    weights = losses.ipw_weights(propensity, mask)
    dr = vectorised(scores, mask, clicks, pseudo, permutations, propensity, "dr")
    assert dr.item() == pytest.approx(losses.ipw_loss(scores, mask, clicks, weights).item() / 5, rel=1e-12)


def test_gradients_reach_scores_and_never_the_pseudo_clicks():
    scores, mask, clicks, pseudo, orders, permutations, propensity = random_case(17)
    scores.requires_grad_(True)
    pseudo.requires_grad_(True)
    vectorised(scores, mask, clicks, pseudo, permutations, propensity, "dr").backward()
    assert scores.grad is not None and scores.grad[mask].abs().sum() > 0
    assert torch.all(scores.grad[~mask] == 0)  # padded slots get no gradient
    assert pseudo.grad is None


def test_padding_carries_no_loss_even_with_extreme_scores():
    scores, mask, clicks, pseudo, orders, permutations, propensity = random_case(19)
    base = vectorised(scores, mask, clicks, pseudo, permutations, propensity, "dr")
    scores = scores.masked_fill(~mask, 1e30)  # a padded slot with a huge score
    shifted = vectorised(scores, mask, clicks, pseudo, permutations, propensity, "dr")
    assert math.isfinite(shifted.item())
    assert shifted.item() == pytest.approx(base.item(), rel=1e-12)


def test_listwise_losses_are_stable_for_large_scores():
    scores = torch.tensor([[1e4, -1e4, 0.0]])
    mask = torch.tensor([[True, True, True]])
    deltas = losses.listwise_document_losses(scores, mask)
    assert torch.isfinite(deltas).all()
    assert deltas[0, 0].item() == pytest.approx(0.0, abs=1e-6)
    assert deltas[0, 1].item() == pytest.approx(2e4, rel=1e-6)


def test_ipw_weights_really_clamp():
    propensity = torch.tensor([[1.0, 0.5, 0.01, 0.2]])
    mask = torch.tensor([[True, True, True, False]])
    weights = losses.ipw_weights(propensity, mask, max_weight=10.0)
    assert weights.tolist() == [[1.0, 2.0, 10.0, 0.0]]
    assert losses.ipw_weights(propensity, mask)[0, 2].item() == pytest.approx(100.0)


def test_dla_softmax_loss_matches_ulta_softmax_loss_without_padding():
    ultra = require_ultra()
    generator = torch.Generator().manual_seed(3)
    scores = torch.randn(4, 5, generator=generator)
    labels = (torch.rand(4, 5, generator=generator) < 0.4).float()
    weights = torch.rand(4, 5, generator=generator) + 0.5
    mask = torch.ones(4, 5, dtype=torch.bool)
    reference = ultra.learning_algorithm.BaseAlgorithm.softmax_loss(None, scores, labels, weights)
    assert losses.dla_softmax_loss(scores, labels, weights, mask).item() == pytest.approx(reference.item(), rel=1e-5)


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="variant"):
        losses.dr_document_weights(
            torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 0, 2), torch.ones(1, 2), torch.ones(1, 2, dtype=torch.bool), "ipw"
        )


def test_randomized_weights_use_mean_propensity_over_propensity_whatever_the_scale():
    """W_d = mean_s c^s + (c - c^o) e_bar / e_k, padded slots excluded from e_bar and weightless."""
    generator = torch.Generator().manual_seed(3)
    mask = torch.tensor([[True, True, True, False]])
    propensity = torch.tensor([[1.0, 0.5, 0.25, 1.0]])
    clicks = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    observed = torch.rand(1, 4, generator=generator)
    randomized = torch.rand(1, 3, 4, generator=generator)
    expected = randomized.mean(1) + (clicks - observed) * (propensity[:, :3].mean() / propensity)
    expected[0, 3] = 0.0
    for scale in (1.0, 7.0):  # DLA's weights are relative to position 1; any scale of e gives the same W
        weights = losses.ipw_weights(propensity * scale, mask)
        got = losses.randomized_document_weights(clicks, observed, randomized, weights, mask)
        assert torch.allclose(got, expected)


def test_rebalance_keeps_the_expectation_under_the_click_probability_and_bounds_the_weight():
    generator = torch.Generator().manual_seed(4)
    no_click = torch.randn(64, 5, generator=generator)
    p = torch.rand(64, 5, generator=generator).clamp(min=0.05)
    with_click = no_click + torch.rand(64, 5, generator=generator) * 5 - no_click.clamp(max=0) / p  # A + B p >= 0
    guarded = {c: losses.rebalance_weights(no_click, with_click, torch.full_like(p, c), p) for c in (0.0, 1.0)}
    before = no_click + (with_click - no_click) * p
    after = guarded[0.0] * (1 - p) + guarded[1.0] * p
    assert torch.allclose(after, before, atol=1e-5)
    assert (guarded[0.0] >= 0).all() and (guarded[1.0] >= 0).all()
    untouched = no_click >= 0
    assert torch.equal(guarded[0.0][untouched], no_click[untouched])
    assert torch.equal(guarded[1.0][untouched], with_click[untouched])
