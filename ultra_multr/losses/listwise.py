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


def weighted_listwise_loss(scores: torch.Tensor, mask: torch.Tensor, document_weights: torch.Tensor) -> torch.Tensor:
    """``mean_q sum_d W_qd Delta(d | q)``: per-document weights times Delta, mean over queries.

    The form of Eq. ipw_loss and Eq. dr_loss alike, which differ only in W.

    Args:
        scores: [B, N] (gradients flow here); mask: [B, N] bool;
        document_weights: [B, N], 0 at padded slots (detach them to keep
            gradients out of the weights).

    Returns:
        scalar.
    """
    return (document_weights * listwise_document_losses(scores, mask)).sum(dim=-1).mean()


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` [B, N] over the valid slots of ``mask`` [B, N]; scalar."""
    valid = mask.to(values.dtype)
    return (values * valid).sum() / valid.sum().clamp(min=1.0)
