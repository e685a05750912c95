"""Intervention sessions: a share of the sessions shown in another order than the logger's.

A click log may hold sessions whose list was deliberately perturbed before it
was shown: one adjacent pair swapped (the swap interventions of intervention
harvesting) or the whole list shuffled.  :func:`draw_interventions` chooses,
for each session of a batch independently, whether it is one and how its list
is shown; the feeds gather documents, labels and features by the returned
order and draw clicks on it (position = slot, as everywhere in ULTRA).

Per session a code (:func:`draw_interventions`): :data:`LOGGED` (-1) for the
logged order, ``k >= 0`` for a swap of the 0-based positions ``k`` and
``k + 1``, :data:`SHUFFLED` (-2) for a uniformly random order of the real
documents.  Padded slots never move and a swap never touches one; a session
drawn for an intervention whose list has no two adjacent real documents
(swap) or fewer than two real documents (shuffle) is shown as logged and
coded :data:`LOGGED`.  A shuffle may give back the logged order (one of the
n! it draws from); it is still coded :data:`SHUFFLED`.
"""
from __future__ import annotations

import hashlib
from typing import Tuple

import torch

from ultra_multr.randomization import random_permutations

#: The intervention kinds: one adjacent pair swapped, or the real documents shuffled.
KINDS = ("swap", "shuffle")
#: Code of a session shown in its logged order.
LOGGED = -1
#: Code of a session shown in a uniformly random order of its real documents.
SHUFFLED = -2


def derived_generator(generator: torch.Generator, stream: bytes = b"interventions") -> torch.Generator:
    """A new CPU generator seeded by a hash of ``generator``'s state and ``stream``.

    ``generator`` is not advanced, and the same state gives the same draws: a
    feed's intervention draws then follow its batch generator wherever that
    goes (reseeded into another stream, saved and restored) without changing
    the batches it draws.
    """
    digest = hashlib.sha256(generator.get_state().numpy().tobytes() + stream).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))


def adjacent_swaps(
    mask: torch.Tensor, chosen: torch.Tensor, generator: torch.Generator
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Swap one adjacent pair of real documents in each chosen list, the pair uniform among its lists' pairs.

    Args:
        mask: [B, N] bool, True for a real document.
        chosen: [B] bool, the lists to swap in.
        generator: CPU generator of the pair (one float64 per list is drawn).

    Returns:
        (order [B, N] int64: slot i shows logged slot ``order[b, i]``,
        codes [B] int64: k for a swap of k and k + 1, :data:`LOGGED` otherwise).
    """
    batch, slots = mask.shape
    uniform = torch.rand(batch, generator=generator, dtype=torch.float64)
    if slots < 2:
        return torch.zeros(batch, slots, dtype=torch.long), torch.full((batch,), LOGGED, dtype=torch.long)
    pairs = mask[:, :-1] & mask[:, 1:]  # [B, N - 1]: slots k and k + 1 both real
    n_pairs = pairs.sum(dim=1)
    rank = torch.minimum((uniform * n_pairs).long(), (n_pairs - 1).clamp(min=0))
    k = (torch.cumsum(pairs.long(), dim=1) > rank.unsqueeze(1)).long().argmax(dim=1)
    swapped = chosen & (n_pairs > 0)
    order = torch.arange(slots).repeat(batch, 1)
    rows = torch.nonzero(swapped).squeeze(1)
    order[rows, k[rows]] = k[rows] + 1
    order[rows, k[rows] + 1] = k[rows]
    return order, torch.where(swapped, k, torch.full_like(k, LOGGED))


def real_shuffles(
    mask: torch.Tensor, chosen: torch.Tensor, generator: torch.Generator
) -> Tuple[torch.Tensor, torch.Tensor]:
    """A uniformly random order of the real documents of each chosen list; padded slots stay where they are.

    Args:
        mask: [B, N] bool, True for a real document.
        chosen: [B] bool, the lists to shuffle.
        generator: CPU generator of the orders (B x N floats are drawn).

    Returns:
        (order [B, N] int64 as in :func:`adjacent_swaps`,
        codes [B] int64: :data:`SHUFFLED` or :data:`LOGGED`).
    """
    batch, slots = mask.shape
    slot_index = torch.arange(slots).repeat(batch, 1)
    # Both list the real slots first, then the padded slots in slot order: the real ones in slot order
    # (where they are) and in random order (what they show); padded slots are mapped to themselves.
    real_first = torch.argsort(torch.where(mask, slot_index, slot_index + slots), dim=1)
    shuffled = torch.zeros_like(slot_index).scatter_(1, real_first, random_permutations(mask, 1, generator)[:, 0])
    applied = chosen & (mask.sum(dim=1) >= 2)
    order = torch.where(applied.unsqueeze(1), shuffled, slot_index)
    return order, torch.where(applied, SHUFFLED, LOGGED).long()


def draw_interventions(
    mask: torch.Tensor, share: float, kind: str, generator: torch.Generator
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Which sessions of a batch are interventions, and the order each list is shown in.

    Each session is one independently with probability ``share``.

    Args:
        mask: [B, N] bool (CPU), True for a real document at that logged slot.
        share: in [0, 1].
        kind: one of :data:`KINDS`.
        generator: CPU generator of every draw.

    Returns:
        (order [B, N] int64: slot i shows the document of logged slot
        ``order[b, i]`` (the identity for a logged session),
        codes [B] int64: :data:`LOGGED`, k (swap of 0-based positions k and k + 1) or :data:`SHUFFLED`).
    """
    if kind not in KINDS:
        raise ValueError("intervention must be one of %s, got %r" % (", ".join(KINDS), kind))
    chosen = torch.rand(mask.shape[0], generator=generator, dtype=torch.float64) < share
    return (adjacent_swaps if kind == "swap" else real_shuffles)(mask, chosen, generator)
