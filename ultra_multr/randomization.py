"""Result randomisation: random re-rankings of each query's displayed list."""
from __future__ import annotations

from typing import Optional

import torch


def random_permutations(
    mask: torch.Tensor, num_samples: int, generator: Optional[torch.Generator] = None
) -> torch.Tensor:
    """Independent uniform permutations of each list's valid documents.

    Each query gets its own ``num_samples`` permutations (the authors' code
    shares one permutation across the whole batch).  Valid documents fill the
    first ``n_valid`` positions of every permutation in uniformly random
    order; padded slots follow in their own order, so tail padding never
    moves and never enters a displayed slot.

    Args:
        mask: [B, N] bool, True for a real document at that slot.
        num_samples: S >= 0, permutations per query.
        generator: source of randomness (on ``mask``'s device).

    Returns:
        [B, S, N] int64: ``perm[b, s, t]`` is the slot of the observed list
        whose document is shown at position ``t`` of re-ranking ``s``.
    """
    if num_samples < 0:
        raise ValueError("num_samples must be >= 0, got %d" % num_samples)
    batch, slots = mask.shape
    keys = torch.rand((batch, num_samples, slots), generator=generator, device=mask.device)
    # Padded slots get keys above every valid key (valid keys < 1), in slot
    # order, so tail padding stays exactly where it was.
    slot_keys = 2.0 + torch.arange(slots, device=mask.device, dtype=keys.dtype)
    keys = torch.where(mask.unsqueeze(1), keys, slot_keys)
    return torch.argsort(keys, dim=-1)


def to_document_order(values_by_position: torch.Tensor, permutations: torch.Tensor) -> torch.Tensor:
    """Move per-position values of re-ranked lists back to observed-list slots.

    Args:
        values_by_position: [B, S, N], value at position t of re-ranking s.
        permutations: [B, S, N] from :func:`random_permutations`.

    Returns:
        [B, S, N]: ``out[b, s, permutations[b, s, t]] = values_by_position[b, s, t]``.
    """
    return torch.zeros_like(values_by_position).scatter_(-1, permutations, values_by_position)
