"""PAL (Guo et al., RecSys 2019): the factorised click model's loss, in log space.

Shapes: B queries, N slots of the observed (displayed) list; ``mask`` [B, N]
is True for real documents and padded slots never carry weight or loss.
"""
from __future__ import annotations

import torch

from ultra_multr.losses.listwise import masked_mean


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
