"""64-bit fingerprints of feature rows and of displayed lists, exact on every device (pure torch)."""
from __future__ import annotations

import functools

import torch

#: Seed of the fingerprint's fixed multipliers.
_MULTIPLIER_SEED = 0x5EED
_LOW_32 = (1 << 32) - 1


def _to_signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


_MIX_1 = _to_signed(0xBF58476D1CE4E5B9)
_MIX_2 = _to_signed(0x94D049BB133111EB)


def _shift_right(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 (torch's ``>>`` is arithmetic)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def _mix(x: torch.Tensor) -> torch.Tensor:
    """splitmix64's finaliser, in wrapping int64 arithmetic."""
    x = (x ^ _shift_right(x, 30)) * _MIX_1
    x = (x ^ _shift_right(x, 27)) * _MIX_2
    return x ^ _shift_right(x, 31)


@functools.lru_cache(maxsize=8)
def _multipliers(slots: int, width: int, device: torch.device) -> torch.Tensor:
    """[2, N, F] fixed odd int32 multipliers, two per (position, feature)."""
    generator = torch.Generator().manual_seed(_MULTIPLIER_SEED)
    draws = torch.randint(-(1 << 31), (1 << 31) - 1, (2, slots, width), generator=generator, dtype=torch.int32)
    return (draws | 1).to(device)


def list_fingerprints(features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A 64-bit fingerprint of each displayed list.

    For each slot, two 32-bit sums ``sum_f bits[t, f] * C_k[t, f] mod 2^32``
    of its float32 feature bits with fixed odd multipliers that depend on
    the position (wrapping int32 arithmetic: exact, so independent of the
    summation order and the device) form one 64-bit value; it is -1 at
    padded slots, mixed with splitmix64's finaliser and summed over slots
    (mod 2^64).  Changing one feature of one slot always changes the slot's
    value (odd multipliers are invertible mod 2^32); other changes collide
    with probability about 2^-64.  Costs two element-wise products and sums
    over the [B, N, F] features.

    Args:
        features: [B, N, F] float32; mask: [B, N] bool.

    Returns:
        [B] int64.
    """
    batch, slots, width = features.shape
    per_slot = torch.where(mask, _feature_hash(features, _multipliers(slots, width, features.device)), -1)
    return _mix(per_slot + torch.arange(slots, device=features.device)).sum(dim=-1)


def row_fingerprints(features: torch.Tensor) -> torch.Tensor:
    """A 64-bit fingerprint of each feature row, the same at every position.

    The per-slot value of :func:`list_fingerprints` with the multipliers of
    the first position: equal rows always get equal values (exact integer
    arithmetic), different rows collide with probability about 2^-64.

    Args:
        features: [..., F] float32.

    Returns:
        [...] int64.
    """
    return _feature_hash(features, _multipliers(1, features.shape[-1], features.device)[:, 0])


def _feature_hash(features: torch.Tensor, multipliers: torch.Tensor) -> torch.Tensor:
    """[...] int64: two wrapping 32-bit sums of the float32 bits of features [..., F] times
    ``multipliers`` [2, ..., F] (broadcast), joined into one 64-bit value."""
    bits = features.to(torch.float32).contiguous().view(torch.int32)
    high, low = ((bits * m).sum(dim=-1, dtype=torch.int32).to(torch.int64) & _LOW_32 for m in multipliers)
    return (high << 32) | low
