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


def dr_loss(scores, mask, clicks, observed, randomized, weights, variant="dr", rerank_weight=None, guard="clip",
            normalization="batch_weight", form="mixture"):
    """The loss of :class:`losses.DoublyRobustLoss` with these settings."""
    loss = losses.DoublyRobustLoss(form=form, variant=variant, guard=guard, reduction=normalization,
                                   rerank_weight=rerank_weight)
    return loss(scores, mask, clicks, observed, randomized, weights)[0]


def vectorised(scores, mask, clicks, pseudo, permutations, propensity, variant, rerank_weight=None, guard="none"):
    """The loss on random_case's tensors; unguarded and averaged over queries, like the literal equation."""
    weights = losses.ipw_weights(propensity, mask)
    randomized = to_document_order(pseudo[:, 1:], permutations)
    return dr_loss(scores, mask, clicks, pseudo[:, 0], randomized, weights, variant, rerank_weight, guard, "none")


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
    got = losses.dr_document_weights(clicks, observed, randomized, weights, mask, "dr", 0.25)
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
    unguarded = losses.dr_document_weights(clicks, pseudo[:, 0], randomized, weights, mask, "dr")
    assert (unguarded[mask] < 0).any()  # the case has weights the guard must act on
    clipped_weights = losses.DoublyRobustLoss(guard="clip").weights(clicks, pseudo[:, 0], randomized, weights, mask)
    clipped = clipped_weights.guarded
    assert torch.equal(clipped_weights.unguarded, unguarded)
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
        loss = dr_loss(scores, mask, clicks, observed, randomized, weights, "dr", guard=guard, normalization="none")
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
        losses.dr_document_weights(*negative_weight_list()), torch.ones(1, 3, dtype=torch.bool)
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


def test_unknown_settings_are_refused_naming_the_choices():
    with pytest.raises(ValueError, match="expected one of dr, eib, got 'ipw'"):
        losses.dr_document_weights(
            torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 0, 2), torch.ones(1, 2), torch.ones(1, 2, dtype=torch.bool), "ipw"
        )
    with pytest.raises(ValueError, match="expected one of none, clip, rebalance, got 'clamp' \\(did you mean 'clip'\\?\\)"):
        losses.DoublyRobustLoss(guard="clamp")
    with pytest.raises(ValueError, match="the randomized form .* has variant dr only, got variant=eib"):
        losses.DoublyRobustLoss(form="randomized", variant="eib")
    with pytest.raises(ValueError, match="the authors_code form .* takes dr_weight_guard none only, got clip"):
        losses.DoublyRobustLoss(form="authors_code", guard="clip")
    with pytest.raises(ValueError, match="rerank_weight must be in \\[0, 1\\]"):
        losses.DoublyRobustLoss(rerank_weight=1.5)
    with pytest.raises(ValueError, match="the authors_code form is a loss of its own"):
        losses.DoublyRobustLoss(form="authors_code", guard="none").weights(*negative_weight_list())
    with pytest.raises(ValueError, match="the randomized form needs re-ranked pseudo clicks, got S = 0"):
        losses.DoublyRobustLoss(form="randomized", guard="none").weights(*negative_weight_list())


def test_every_form_is_a_value_of_rerank_weight_and_the_mixtures_share_prints_as_written():
    for form in losses.DRForm:
        if form != losses.DRForm.MIXTURE:
            assert losses.RerankWeight.parse(form.value).form == form
    half = losses.RerankWeight.parse("0.50")
    assert (half.form, half.share.value, str(half), half.auto) == (losses.DRForm.MIXTURE, 0.5, "0.50", False)
    assert losses.RerankWeight.parse("auto").auto and losses.RerankWeight.parse("paper").share.resolve(8) == 8 / 9
    with pytest.raises(ValueError, match='expected "randomized", "authors_code", "auto", "paper" or a number'):
        losses.RerankWeight.parse("half")
    with pytest.raises(ValueError, match='expected "paper" or a number in \\[0, 1\\], got \'1.5\''):
        losses.RerankShare.parse("1.5")


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


# -- the batch's reduction (dr_normalization) ----------------------------------

#: A hand-made batch: query 1 shows 3 documents, query 2 shows 2 (one padded slot); every score is 0, so
#: Delta = log 3 in query 1 and log 2 in query 2.  With a = 0 and no re-ranked term, W = c^o + (c - c^o) w:
#: query 1: c = [1, 0, 0], c^o = [0.5, 0.2, 0], w = [1, 2, 4] -> W = [1.0, -0.2, 0]
#: query 2: c = [0, 1, -], c^o = [0.1, 0.3, -], w = [1, 3, -] -> W = [0.0, 2.4, 0]
HAND_BATCH = dict(
    scores=torch.zeros(2, 3, dtype=torch.float64),
    mask=torch.tensor([[True, True, True], [True, True, False]]),
    clicks=torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64),
    observed=torch.tensor([[0.5, 0.2, 0.0], [0.1, 0.3, 0.0]], dtype=torch.float64),
    randomized=torch.zeros(2, 0, 3, dtype=torch.float64),
    weights=torch.tensor([[1.0, 2.0, 4.0], [1.0, 3.0, 0.0]], dtype=torch.float64),
)


@pytest.mark.parametrize(
    "guard, normalization, expected",
    [
        # sum W Delta = 1.0 log 3 - 0.2 log 3 + 2.4 log 2; sum |W| = 3.6; 2 queries
        ("none", "batch_weight", (0.8 * math.log(3) + 2.4 * math.log(2)) / 3.6),
        ("none", "none", (0.8 * math.log(3) + 2.4 * math.log(2)) / 2),
        # clip: W = [1, 0, 0], [0, 2.4]: sum W = 3.4
        ("clip", "batch_weight", (math.log(3) + 2.4 * math.log(2)) / 3.4),
        ("clip", "none", (math.log(3) + 2.4 * math.log(2)) / 2),
    ],
)
def test_the_batch_reduction_on_a_hand_computed_batch(guard, normalization, expected):
    loss = dr_loss(**HAND_BATCH, rerank_weight=0.0, guard=guard, normalization=normalization)
    assert loss.item() == pytest.approx(expected, rel=1e-12)


def test_batch_weight_is_the_default_and_a_batch_without_weight_gives_zero():
    batch = [HAND_BATCH[k] for k in ("scores", "mask", "clicks", "observed", "randomized", "weights")]
    unguarded = losses.DoublyRobustLoss(guard="none", rerank_weight=0.0)
    assert unguarded.reduction == losses.Reduction.BATCH_WEIGHT
    assert unguarded(*batch)[0].item() == pytest.approx((0.8 * math.log(3) + 2.4 * math.log(2)) / 3.6, rel=1e-12)
    empty = dict(HAND_BATCH, clicks=torch.zeros(2, 3, dtype=torch.float64),
                 observed=torch.zeros(2, 3, dtype=torch.float64))
    assert dr_loss(**empty, rerank_weight=0.0, guard="none").item() == 0.0
    with pytest.raises(ValueError, match="normalization must be one of"):
        losses.weighted_listwise_loss(HAND_BATCH["scores"], HAND_BATCH["mask"], HAND_BATCH["weights"], "mean")


@pytest.mark.parametrize("seed", range(3))
def test_batch_weight_makes_the_loss_independent_of_the_batchs_click_mass(seed):
    """Scaling every weight (more clicks, larger inverse propensities) scales the printed loss, not DLA's reduction."""
    scores, mask, clicks, pseudo, orders, permutations, propensity = random_case(seed)
    weights = losses.ipw_weights(propensity, mask)
    randomized = to_document_order(pseudo[:, 1:], permutations)
    args = (scores, mask, clicks, pseudo[:, 0], randomized)
    one = dr_loss(*args, weights, guard="clip")
    ten = dr_loss(*(a * 10 if a.dtype.is_floating_point and a is not scores else a for a in args), weights, guard="clip")
    assert ten.item() == pytest.approx(one.item(), rel=1e-10)
    printed = lambda *a: dr_loss(*a, weights, guard="clip", normalization="none")  # noqa: E731
    assert printed(*(a * 10 if a.dtype.is_floating_point and a is not scores else a for a in args)).item() == \
        pytest.approx(10 * printed(*args).item(), rel=1e-10)


# -- the authors' released code's combination ----------------------------------

def ultra_softmax_loss(output, labels, propensity_weights=None):
    """ULTRA's ``BaseAlgorithm.softmax_loss``, written out as the authors' code calls it."""
    if propensity_weights is None:
        propensity_weights = torch.ones_like(labels)
    weighted_labels = (labels + 0.0000001) * propensity_weights
    label_dis = torch.nan_to_num(weighted_labels / torch.sum(weighted_labels, 1, keepdim=True))
    loss = -(label_dis * torch.log_softmax(output, dim=-1)).sum(-1) * torch.sum(weighted_labels, 1)
    return torch.sum(loss) / torch.sum(weighted_labels)


def literal_authors_code_loss(scores, clicks, observed_pseudo, permutations, permuted_pseudo, weights):
    """``MULTR.train`` of the released code, term by term: the re-ranked lists are one permutation per sample
    for the whole batch, scored and labelled in permuted order and concatenated into a [B * S, N] batch."""
    sample_num = len(permutations)
    error_deviation = ultra_softmax_loss(scores, clicks, weights) - ultra_softmax_loss(scores, observed_pseudo, weights)
    observed_naive = ultra_softmax_loss(scores, observed_pseudo)
    unobserved_output = torch.cat([scores[:, order] for order in permutations], 0)
    unobserved_labels = torch.cat(permuted_pseudo, 0)
    unobserved_naive = ultra_softmax_loss(unobserved_output, unobserved_labels)
    return (error_deviation + observed_naive + unobserved_naive * sample_num) / (1.0 + 1.0 + sample_num)


@pytest.mark.parametrize("seed", range(4))
def test_the_authors_code_form_equals_a_literal_transcription(seed):
    generator = torch.Generator().manual_seed(seed)
    batch, slots, samples = 4, 5, 3
    scores = torch.randn(batch, slots, generator=generator, dtype=torch.float64)
    clicks = (torch.rand(batch, slots, generator=generator) < 0.4).double()
    observed = (torch.rand(batch, slots, generator=generator) < 0.4).double()
    propensity = torch.rand(batch, slots, generator=generator, dtype=torch.float64) * 0.9 + 0.1
    weights = losses.ipw_weights(propensity, torch.ones(batch, slots, dtype=torch.bool))
    permutations = [torch.randperm(slots, generator=generator) for _ in range(samples)]
    # the simulator's clicks at each position of each permuted list
    permuted_pseudo = [(torch.rand(batch, slots, generator=generator) < 0.4).double() for _ in range(samples)]
    # ours takes them back in observed-list slots: document permutation[t] was shown at position t
    in_slots = torch.zeros(batch, samples, slots, dtype=torch.float64)
    for s, order in enumerate(permutations):
        in_slots[:, s, order] = permuted_pseudo[s]
    mask = torch.ones(batch, slots, dtype=torch.bool)
    ours = dr_loss(scores, mask, clicks, observed, in_slots, weights, guard="none", form="authors_code")
    literal = literal_authors_code_loss(scores, clicks, observed, permutations, permuted_pseudo, weights)
    assert ours.item() == pytest.approx(literal.item(), rel=1e-10)
    printed = dr_loss(scores, mask, clicks, observed, in_slots, weights, guard="none", normalization="none")
    assert ours.item() != pytest.approx(printed.item(), rel=1e-3)  # not the printed equation


def test_the_authors_code_form_on_a_hand_computed_batch():
    """Equal scores make Delta = log N for every document: each of the four terms is a weighted mean of log N,
    so the loss is (log N - log N + log N + S log N) / (S + 2) whatever the clicks and weights."""
    n, samples = 4, 2
    mask = torch.ones(2, n, dtype=torch.bool)
    clicks = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    observed = torch.tensor([[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    randomized = torch.tensor([[[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]], [[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]])
    weights = torch.tensor([[1.0, 2.0, 3.0, 5.0], [1.0, 1.5, 2.0, 9.0]])
    loss = losses.authors_code_dr_loss(torch.zeros(2, n), mask, clicks, observed, randomized, weights)
    assert loss.item() == pytest.approx((samples + 1) / (samples + 2) * math.log(n), rel=1e-6)
    # with S = 0 the re-ranked term drops out: (log N - log N + log N) / 2
    none = losses.authors_code_dr_loss(torch.zeros(2, n), mask, clicks, observed, randomized[:, :0], weights)
    assert none.item() == pytest.approx(math.log(n) / 2, rel=1e-6)


@pytest.mark.parametrize("form", ["mixture", "randomized"])
def test_the_loss_objects_rebalance_guard_is_rebalance_weights_of_its_own_form(form):
    """weights() under the rebalance guard: the form's weights without and with a click, moved by the pseudo clicks'
    probabilities (expected imputation), padding weightless."""
    scores, mask, clicks, pseudo, orders, permutations, propensity = random_case(29, batch=30)
    observed = torch.rand(mask.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * mask
    randomized = to_document_order(pseudo[:, 1:], permutations)
    weights = losses.ipw_weights(propensity, mask)
    unguarded = losses.FORM_RULES[losses.DRForm(form)].document_weights
    args = (observed, randomized, weights, mask, "dr", 0.5 if form == "mixture" else None)
    expected = losses.rebalance_weights(unguarded(torch.zeros_like(clicks), *args), unguarded(torch.ones_like(clicks), *args),
                                        clicks, observed) * mask
    got = losses.DoublyRobustLoss(form=form, rerank_weight=0.5 if form == "mixture" else None).weights(
        clicks, observed, randomized, weights, mask)
    assert torch.allclose(got.guarded, expected) and torch.equal(got.unguarded, unguarded(clicks, *args))
    assert (got.unguarded[mask] < 0).any() and (got.guarded >= -1e-12).all()
