"""Pairwise Debiasing (Hu et al., WWW 2019): pair losses, the debiased loss and the bias update.

Shapes: B queries, N slots of the observed (displayed) list; ``mask`` [B, N]
is True for real documents and padded slots never carry weight or loss.
"""
from __future__ import annotations

from typing import Tuple

import torch


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
