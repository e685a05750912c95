"""Ranking losses as pure functions of tensors.

Shapes: B queries, N slots of the observed (displayed) list, S randomised
re-rankings per query.  ``mask`` [B, N] is True for real documents; padded
slots never carry clicks, pseudo clicks, weight or loss.
"""
from __future__ import annotations

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
