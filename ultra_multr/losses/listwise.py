"""Listwise softmax pieces every listwise loss here shares.

Shapes: B queries, N slots of the observed (displayed) list; ``mask`` [B, N]
is True for real documents and padded slots never carry weight or loss.
"""
from __future__ import annotations

import torch


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


#: ``normalization`` of :func:`weighted_listwise_loss`: "batch_weight" divides by the batch's total
#: weight (DLA's scale: ULTRA's ``softmax_loss`` divides by the batch's click mass), "none" averages the
#: per-query sums over the queries (the printed equations).
NORMALIZATIONS = ("batch_weight", "none")
#: The batch's total weight is clamped at least to this before dividing (as DLA clamps its click mass).
MIN_WEIGHT_MASS = 1e-30


def weighted_listwise_loss(
    scores: torch.Tensor, mask: torch.Tensor, document_weights: torch.Tensor, normalization: str = "none"
) -> torch.Tensor:
    """Per-document weights times Delta, reduced over the batch.

    The form of Eq. ipw_loss and Eq. dr_loss alike, which differ only in W:

        "none":          mean_q sum_d W_qd Delta(d | q)
        "batch_weight":  sum_qd W_qd Delta(d | q) / max(sum_qd |W_qd|, MIN_WEIGHT_MASS)

    "batch_weight" is DLA's reduction (:func:`ultra_multr.losses.dla_softmax_loss`
    is ``sum_qd W Delta / sum_qd W`` with ``W = (c + 1e-7) w``): a weighted mean
    of Delta, so one learning rate is one step size whatever the batch's click
    mass.  The divisor is the total of ``|W|`` (the total weight wherever the
    weights are >= 0, as every guard but "none" keeps them), so a batch whose
    signed weights cancel cannot blow the loss up.

    Args:
        scores: [B, N] (gradients flow here); mask: [B, N] bool;
        document_weights: [B, N], 0 at padded slots (detach them to keep
            gradients out of the weights).
        normalization: one of :data:`NORMALIZATIONS`.

    Returns:
        scalar.
    """
    if normalization not in NORMALIZATIONS:
        raise ValueError("normalization must be one of %s, got %r" % (NORMALIZATIONS, normalization))
    weighted = document_weights * listwise_document_losses(scores, mask)
    if normalization == "none":
        return weighted.sum(dim=-1).mean()
    return weighted.sum() / document_weights.abs().sum().clamp(min=MIN_WEIGHT_MASS)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` [B, N] over the valid slots of ``mask`` [B, N]; scalar."""
    valid = mask.to(values.dtype)
    return (values * valid).sum() / valid.sum().clamp(min=1.0)
