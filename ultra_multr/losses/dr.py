"""Eq. dr_loss of the paper: MULTR's doubly-robust listwise loss.

Shapes: B queries, N slots of the observed (displayed) list; ``mask`` [B, N]
is True for real documents and padded slots never carry weight or loss.
"""
from __future__ import annotations

import torch

from .listwise import listwise_document_losses


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
