"""Eq. ipw_loss of the paper: inverse-propensity-weighted listwise loss on real clicks.

Shapes: B queries, N slots of the observed (displayed) list; ``mask`` [B, N]
is True for real documents and padded slots never carry weight or loss.
"""
from __future__ import annotations

import torch

from ultra_multr.losses.listwise import weighted_listwise_loss


def ipw_loss(scores: torch.Tensor, mask: torch.Tensor, clicks: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Eq. ipw_loss: mean over queries of ``sum_{d clicked} w_d Delta(d)``.

    Args:
        scores, mask, clicks, weights: [B, N].

    Returns:
        scalar.
    """
    return weighted_listwise_loss(scores, mask, clicks * weights)
