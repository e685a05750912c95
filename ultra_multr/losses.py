"""Ranking losses as pure functions of tensors.

Shapes: B queries, N slots of the observed (displayed) list, S randomised
re-rankings per query.  ``mask`` [B, N] is True for real documents; padded
slots never carry clicks, pseudo clicks, weight or loss.
"""
from __future__ import annotations

from typing import Tuple

import torch

#: DLA's label smoothing constant (ULTRA's ``softmax_loss``), kept for parity.
_DLA_LABEL_EPSILON = 1e-7


def masked_log_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Log-softmax over each list's valid slots.

    Args:
        scores: [B, N]; mask: [B, N] bool.

    Returns:
        [B, N], 0 at padded slots (so that ``0 * value`` stays finite).
    """
    masked = scores.masked_fill(~mask, float("-inf"))
    log_probs = torch.log_softmax(masked, dim=-1)
    return torch.where(mask, log_probs, torch.zeros_like(log_probs))


def listwise_document_losses(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-document loss Delta(d | pi): the softmax cross-entropy term of d.

    ``-log softmax(scores)_d`` over the list's valid documents.  A re-ranking
    shows the same documents in another order, so Delta does not depend on the
    order: one evaluation serves the observed list and every re-ranking.

    Returns:
        [B, N], 0 at padded slots.
    """
    return -masked_log_softmax(scores, mask)


PROBABILITY_FUNCTIONS = ("softmax", "sigmoid")


def logits_to_probability(logits: torch.Tensor, mask: torch.Tensor, kind: str = "softmax") -> torch.Tensor:
    """DLA's map from logits to (relative) probabilities, over valid slots.

    "softmax": softmax over the list; "sigmoid": ``sigmoid(logit - mean)``
    (ULTRA's ``sigmoid_prob``), the mean taken over valid slots.

    Args:
        logits: [B, N]; mask: [B, N] bool.

    Returns:
        [B, N]; padded slots hold 1 (a harmless divisor), never used.
    """
    if kind == "softmax":
        probs = torch.exp(masked_log_softmax(logits, mask))
    elif kind == "sigmoid":
        valid = mask.to(logits.dtype)
        mean = (logits * valid).sum(-1, keepdim=True) / valid.sum(-1, keepdim=True).clamp(min=1.0)
        probs = torch.sigmoid(logits - mean)
    else:
        raise ValueError("logits_to_prob must be one of %s, got %r" % (PROBABILITY_FUNCTIONS, kind))
    return torch.where(mask, probs, torch.ones_like(probs))


def ipw_weights(propensity: torch.Tensor, mask: torch.Tensor, max_weight: float = -1.0) -> torch.Tensor:
    """DLA's inverse propensity weights, normalised to position 1.

    Args:
        propensity: [B, N] positive examination propensities (DLA passes
            softmax or sigmoid of its propensity logits).
        mask: [B, N] bool.
        max_weight: clamp the weights to at most this value when > 0.
            (ULTRA's DLA calls ``clip_grad_value`` on the weight tensor, which
            clamps ``.grad`` and leaves the weights unchanged.)

    Returns:
        [B, N]: ``propensity[:, 0] / propensity[:, i]``, 0 at padded slots.
    """
    weights = propensity[:, :1] / propensity
    if max_weight > 0:
        weights = weights.clamp(max=max_weight)
    return torch.where(mask, weights, torch.zeros_like(weights))


def dla_softmax_loss(
    scores: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """ULTRA's ``softmax_loss`` (DLA's ranking and examination loss), masked.

    ``sum_q CE(scores_q, w*y / sum(w*y)) * sum(w*y) / sum_q sum(w*y)`` with
    ``w*y = (y + 1e-7) * w``, over valid slots only (ULTRA lets padded slots
    into the softmax).

    Args:
        scores: [B, N] logits; labels: [B, N] clicks; weights: [B, N]; mask: [B, N].

    Returns:
        scalar.
    """
    weighted = (labels + _DLA_LABEL_EPSILON) * weights * mask.to(scores.dtype)
    per_query_mass = weighted.sum(dim=-1)
    distribution = weighted / per_query_mass.clamp(min=1e-30).unsqueeze(-1)
    cross_entropy = -(distribution * masked_log_softmax(scores, mask)).sum(dim=-1)
    return (cross_entropy * per_query_mass).sum() / per_query_mass.sum().clamp(min=1e-30)


def ipw_loss(scores: torch.Tensor, mask: torch.Tensor, clicks: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Eq. ipw_loss: mean over queries of ``sum_{d clicked} w_d Delta(d)``.

    Args:
        scores, mask, clicks, weights: [B, N].

    Returns:
        scalar.
    """
    deltas = listwise_document_losses(scores, mask)
    return (clicks * weights * deltas).sum(dim=-1).mean()


VARIANTS = ("dr", "eib")


def dr_document_weights(
    clicks: torch.Tensor,
    observed_pseudo_clicks: torch.Tensor,
    randomized_pseudo_clicks: torch.Tensor,
    weights: torch.Tensor,
    mask: torch.Tensor,
    variant: str = "dr",
) -> torch.Tensor:
    """How much each document's Delta counts in Eq. dr_loss.

    Because Delta(d | pi) is the same for every order pi of a query's
    documents, Eq. dr_loss collapses to ``sum_d W_d Delta(d)`` with

        dr:  W_d = [c^o_d + sum_s c^s_d + (c_d - c^o_d) w_d] / (S + 1)
        eib: W_d = [c_d + sum_s c^s_d] / (S + 1)

    where c is the real click, c^o the pseudo click on the observed list,
    c^s the pseudo click the document received in re-ranking s, and w its
    inverse propensity weight on the observed list.

    Args:
        clicks: [B, N] real clicks on the observed list.
        observed_pseudo_clicks: [B, N] simulator clicks on the observed list.
        randomized_pseudo_clicks: [B, S, N] simulator clicks of each
            re-ranking, moved back to observed-list slots (S may be 0).
        weights: [B, N] inverse propensity weights of the observed list.
        mask: [B, N] bool.
        variant: "dr" (MULTR) or "eib" (EIB-MULTR: real clicks on the
            observed list taken as they are, no propensity correction).

    Returns:
        [B, N] weights, 0 at padded slots; may be negative for "dr".
    """
    if variant not in VARIANTS:
        raise ValueError("variant must be one of %s, got %r" % (VARIANTS, variant))
    num_lists = randomized_pseudo_clicks.shape[1] + 1
    imputed = observed_pseudo_clicks + randomized_pseudo_clicks.sum(dim=1)
    if variant == "dr":
        correction = (clicks - observed_pseudo_clicks) * weights
    else:
        correction = clicks - observed_pseudo_clicks
    total = (imputed + correction) / num_lists
    return torch.where(mask, total, torch.zeros_like(total))


def dr_loss(
    scores: torch.Tensor,
    mask: torch.Tensor,
    clicks: torch.Tensor,
    observed_pseudo_clicks: torch.Tensor,
    randomized_pseudo_clicks: torch.Tensor,
    weights: torch.Tensor,
    variant: str = "dr",
) -> torch.Tensor:
    """Eq. dr_loss of the paper, averaged over the queries of the batch.

    Args:
        scores: [B, N] ranker scores of the observed list (gradients flow here).
        Others: as in :func:`dr_document_weights` (no gradient is taken
            through them; pass detached tensors).

    Returns:
        scalar: ``mean_q sum_d W_qd Delta(d | q)``.
    """
    doc_weights = dr_document_weights(
        clicks, observed_pseudo_clicks, randomized_pseudo_clicks, weights, mask, variant
    )
    deltas = listwise_document_losses(scores, mask)
    return (doc_weights.detach() * deltas).sum(dim=-1).mean()


# -- baselines: Naive / REM / PairD / PAL -------------------------------------


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` [B, N] over the valid slots of ``mask`` [B, N]; scalar."""
    valid = mask.to(values.dtype)
    return (values * valid).sum() / valid.sum().clamp(min=1.0)


def sigmoid_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of ``sigmoid(logits)`` against ``targets``, mean over valid slots.

    Args:
        logits, targets: [B, N]; mask: [B, N] bool.

    Returns:
        scalar.
    """
    per_slot = torch.nn.functional.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    return masked_mean(per_slot, mask)


def rem_posteriors(
    relevance_logits: torch.Tensor, examination: torch.Tensor, clicks: torch.Tensor, mask: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor]:
    """E-step of Regression EM (Wang et al., WSDM 2018) under the examination hypothesis.

    With gamma = P(R=1) = sigmoid(logit) and theta_t = P(E=1) at the slot's
    position, a click means E=1, R=1; without a click

        P(E=1, R=0 | C=0) = theta (1 - gamma) / (1 - theta gamma)
        P(E=0, R=1 | C=0) = (1 - theta) gamma / (1 - theta gamma)
        P(E=0, R=0 | C=0) = (1 - theta)(1 - gamma) / (1 - theta gamma)

    which sum to 1.

    Args:
        relevance_logits: [B, N] ranker scores (taken as relevance logits).
        examination: [N] examination probabilities theta, in (0, 1).
        clicks: [B, N] 0/1 clicks; mask: [B, N] bool.

    Returns:
        (p_relevant, p_examined): [B, N] each, P(R=1 | C) and P(E=1 | C);
        0 at padded slots.
    """
    gamma = torch.sigmoid(relevance_logits)
    theta = examination.to(gamma.dtype).expand_as(gamma)
    no_click = 1.0 - theta * gamma
    p_relevant = clicks + (1.0 - clicks) * (1.0 - theta) * gamma / no_click
    p_examined = clicks + (1.0 - clicks) * theta * (1.0 - gamma) / no_click
    zeros = torch.zeros_like(gamma)
    return torch.where(mask, p_relevant, zeros), torch.where(mask, p_examined, zeros)


def online_em_update(
    current: torch.Tensor, posteriors: torch.Tensor, mask: torch.Tensor, step_size: float
) -> torch.Tensor:
    """Online M-step: move each position's estimate towards its batch mean.

    ``new_t = (1 - step) current_t + step mean_b posteriors[b, t]``, the mean
    over valid slots only; a position with no valid slot in the batch keeps
    its estimate (ULTRA averages padding in as if it were a document).

    Args:
        current: [N]; posteriors: [B, N]; mask: [B, N] bool; step_size in (0, 1].

    Returns:
        [N].
    """
    valid = mask.to(posteriors.dtype)
    count = valid.sum(dim=0)
    mean = (posteriors * valid).sum(dim=0) / count.clamp(min=1.0)
    updated = (1.0 - step_size) * current + step_size * mean
    return torch.where(count > 0, updated, current)


def pairwise_debias_pair_losses(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-pair logistic losses of Pairwise Debiasing (Hu et al., WWW 2019), as ULTRA pairs them.

    Slot i is the positive and slot j the negative of pair (i, j) with
    weight ``clamp(y_i - y_j, 0, 1)`` (clicked vs not clicked for clicks);
    the pair loss is ``log(1 + exp(s_j - s_i))``.  Pairs touching a padded
    slot get 0.

    Args:
        scores, labels: [B, N]; mask: [B, N] bool.

    Returns:
        [B, N, N]: entry [b, i, j] is pair (i, j)'s weighted loss.
    """
    weight = (labels[:, :, None] - labels[:, None, :]).clamp(min=0.0, max=1.0)
    valid = (mask[:, :, None] & mask[:, None, :]).to(scores.dtype)
    loss = torch.nn.functional.softplus(scores[:, None, :] - scores[:, :, None])
    return weight * valid * loss


def pairwise_debias_loss(pair_losses: torch.Tensor, t_plus: torch.Tensor, t_minus: torch.Tensor) -> torch.Tensor:
    """The debiased pairwise loss ``sum_ij L_ij / (t+_i t-_j)``, mean over queries.

    Args:
        pair_losses: [B, N, N] from :func:`pairwise_debias_pair_losses`.
        t_plus, t_minus: [N] position biases of clicked / unclicked slots.

    Returns:
        scalar.  (ULTRA sums over the batch instead of averaging.)
    """
    ratio = t_plus[:, None] * t_minus[None, :]
    return (pair_losses / ratio).sum(dim=(1, 2)).mean()


def pairwise_debias_update(
    pair_losses: torch.Tensor,
    t_plus: torch.Tensor,
    t_minus: torch.Tensor,
    step_size: float,
    regulation_p: float,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """One step of Pairwise Debiasing's position-bias estimates.

    The closed form of Hu et al. (Eq. 12-13), normalised to position 1:

        t+_i  <-  [ sum_j L_ij / t-_j  /  sum_j L_1j / t-_j ] ** (1 / (p + 1))
        t-_j  <-  [ sum_i L_ij / t+_i  /  sum_i L_i1 / t+_i ] ** (1 / (p + 1))

    blended in with ``step_size`` as ULTRA does.  A position with no pair
    loss in the batch keeps its estimate, and a side whose position 1 has no
    pair loss is not updated (ULTRA shrinks such positions towards 0, whose
    inverse then blows the loss up, or divides by 0).

    Args:
        pair_losses: [B, N, N] (treated as constants).
        t_plus, t_minus: [N] current estimates.
        step_size: blend weight in (0, 1]; regulation_p: the p above (>= 0).

    Returns:
        (t_plus, t_minus): [N] each.
    """
    per_pair = pair_losses.detach().sum(dim=0)
    plus_mass = (per_pair / t_minus[None, :]).sum(dim=1)
    minus_mass = (per_pair / t_plus[:, None]).sum(dim=0)

    def blend(current: torch.Tensor, mass: torch.Tensor) -> torch.Tensor:
        if not mass[0] > 0:
            return current
        target = (mass / mass[0]) ** (1.0 / (regulation_p + 1.0))
        return torch.where(mass > 0, (1.0 - step_size) * current + step_size * target, current)

    return blend(t_plus, plus_mass), blend(t_minus, minus_mass)


_LOG_HALF = -0.6931471805599453


def log1mexp(x: torch.Tensor) -> torch.Tensor:
    """``log(1 - exp(x))`` for x < 0, accurate near 0 and for very negative x.

    Both branches get inputs valid for them, so no NaN leaks into gradients.
    """
    near_zero = x > _LOG_HALF
    small = torch.log(-torch.expm1(torch.where(near_zero, x, torch.full_like(x, _LOG_HALF))))
    large = torch.log1p(-torch.exp(torch.where(near_zero, torch.full_like(x, _LOG_HALF), x)))
    return torch.where(near_zero, small, large)


def pal_click_log_probability(relevance_logits: torch.Tensor, position_logits: torch.Tensor) -> torch.Tensor:
    """PAL's factorised click model: ``log P(click) = log sigmoid(r) + log sigmoid(p)``.

    P(click | d, t) = P(seen | t) * P(relevant | d)  (Guo et al., RecSys 2019).

    Args:
        relevance_logits: [B, N] relevance-tower logits.
        position_logits: [N] (or [B, N]) position-tower logits of the slots.

    Returns:
        [B, N] log click probabilities (< 0).
    """
    return torch.nn.functional.logsigmoid(relevance_logits) + torch.nn.functional.logsigmoid(position_logits)


def pal_click_loss(
    relevance_logits: torch.Tensor, position_logits: torch.Tensor, clicks: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """PAL's training loss: click cross-entropy of the factorised model, mean over valid slots.

    Computed in log space, so a saturated tower gives a large finite loss
    rather than ``log(0)``.

    Args:
        relevance_logits: [B, N]; position_logits: [N] or [B, N];
        clicks: [B, N] 0/1; mask: [B, N] bool.

    Returns:
        scalar.
    """
    log_click = pal_click_log_probability(relevance_logits, position_logits)
    log_click = log_click.clamp(max=-torch.finfo(log_click.dtype).tiny)
    nll = -(clicks * log_click + (1.0 - clicks) * log1mexp(log_click))
    return masked_mean(nll, mask)
