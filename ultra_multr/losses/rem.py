"""Regression EM (Wang et al., WSDM 2018): E-step posteriors, online M-step and the sigmoid loss.

Shapes: B queries, N slots of the observed (displayed) list; ``mask`` [B, N]
is True for real documents and padded slots never carry weight or loss.
"""
from __future__ import annotations

from typing import Tuple

import torch

from ultra_multr.losses.listwise import masked_mean


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
