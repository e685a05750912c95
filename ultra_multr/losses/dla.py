"""DLA's pieces (Ai et al., SIGIR 2018): propensity -> inverse weights, and ULTRA's ``softmax_loss``.

Shapes: B queries, N slots of the observed (displayed) list; ``mask`` [B, N]
is True for real documents and padded slots never carry weight or loss.
"""
from __future__ import annotations

import math

import torch

from ultra_multr.losses.listwise import masked_log_softmax


#: DLA's label smoothing constant (ULTRA's ``softmax_loss``), kept for parity.
_DLA_LABEL_EPSILON = 1e-7


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
    else:
        probs = torch.sigmoid(_centred(logits, mask, kind))
    return torch.where(mask, probs, torch.ones_like(probs))


def _centred(logits: torch.Tensor, mask: torch.Tensor, kind: str) -> torch.Tensor:
    """[B, N] ``logits`` minus their mean over valid slots, what the "sigmoid" form takes the sigmoid of (ULTRA's
    ``sigmoid_prob``); ``kind`` is checked here, after "softmax" was handled by the caller."""
    if kind != "sigmoid":
        raise ValueError("logits_to_prob must be one of %s, got %r" % (PROBABILITY_FUNCTIONS, kind))
    valid = mask.to(logits.dtype)
    return logits - (logits * valid).sum(-1, keepdim=True) / valid.sum(-1, keepdim=True).clamp(min=1.0)


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


def relative_ipw_weights(
    logits: torch.Tensor, mask: torch.Tensor, kind: str = "softmax", max_weight: float = -1.0
) -> torch.Tensor:
    """:func:`ipw_weights` of :func:`logits_to_probability`, up to one positive factor for the whole batch, without
    overflow: ``log w_i = log p_1 - log p_i`` (clamped at ``log(max_weight)`` when > 0) minus its largest value
    over the batch's valid slots, so the largest weight is 1.

    ``p_1 / p_i = exp(s_1 - s_i)`` overflows float32 once a list's logits spread over about 88.7, and a loss
    normalised by the weights' sum then computes inf / inf.  :func:`dla_softmax_loss` does not change when every
    weight is multiplied by one positive number, so it takes these weights as they are.

    Args:
        logits: [B, N]; mask: [B, N] bool.

    Returns:
        [B, N] in [0, 1]; 0 at padded slots.
    """
    if kind == "softmax":
        log_probs = masked_log_softmax(logits, mask)
    else:
        log_probs = torch.nn.functional.logsigmoid(_centred(logits, mask, kind))
    log_weights = log_probs[:, :1] - log_probs
    if max_weight > 0:
        log_weights = log_weights.clamp(max=math.log(max_weight))
    log_weights = torch.where(mask, log_weights, torch.full_like(log_weights, -math.inf))
    return torch.exp(log_weights - log_weights.max().clamp(min=-1e30))


def dla_softmax_loss(
    scores: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """ULTRA's ``softmax_loss`` (DLA's ranking and examination loss), masked.

    ``sum_q CE(scores_q, w*y / sum(w*y)) * sum(w*y) / sum_q sum(w*y)`` with
    ``w*y = (y + 1e-7) * w``, over valid slots only (ULTRA lets padded slots
    into the softmax).  Multiplying every weight by one positive number
    leaves it unchanged (:func:`relative_ipw_weights`).

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
