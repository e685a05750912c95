"""Sampling helpers of the user simulator: chunking and the per-step click draws.

:meth:`ContextAwareUserSimulator.sample_clicks
<ultra_multr.simulator.model.ContextAwareUserSimulator.sample_clicks>` runs
its recurrences over chunks of whole queries (:func:`queries_per_chunk`) and
draws every action up front (:func:`sampling_uniforms`, :func:`click_thresholds`).
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch

#: Sampling runs its recurrences over chunks of about this many lists (whole
#: queries): a chunk's [lists, 4H] gate tensor (3 MB at H=64) stays in cache
#: and peak memory stops growing with sample_num.  On the 2-core benchmark
#: machine, S=32 sampling was 10-15 % faster than one chunk and peak RSS fell
#: from 1.31x to 1.18x a DLA step's; batch 256 is one chunk up to S=11.
LISTS_PER_CHUNK = 3072


def queries_per_chunk(batch: int, lists_per_query: int, lists_per_chunk: int = LISTS_PER_CHUNK) -> int:
    """How many whole queries each chunk of sampling takes (chunks balanced)."""
    chunks = -(-batch * lists_per_query // max(lists_per_chunk, 1))
    return -(-batch // chunks)


def sampling_uniforms(
    orders_shape: Tuple[int, int, int],
    generator: Optional[torch.Generator],
    dtype: torch.dtype,
    device: torch.device,
    lists_per_chunk: int = LISTS_PER_CHUNK,
) -> List[torch.Tensor]:
    """The uniform draws of one ``sample_clicks`` call, chunk by chunk.

    Drawn before any recurrence runs, in the order the chunks are decoded,
    so that sampling itself is a function of its inputs alone (what a CUDA
    graph replays) and gives the same clicks as drawing chunk by chunk.

    Args:
        orders_shape: (B, P, N) of the orders to sample on.

    Returns:
        one [N, M_c] tensor per chunk, M_c = (queries in chunk c) * P.
    """
    batch, lists, slots = orders_shape
    queries = queries_per_chunk(batch, lists, lists_per_chunk)
    return [
        torch.rand((slots, (min(start + queries, batch) - start) * lists), generator=generator, device=device, dtype=dtype)
        for start in range(0, batch, queries)
    ]


def click_thresholds(
    shown: torch.Tensor,
    given: Optional[torch.Tensor],
    teacher_forcing_ratio: float,
    generator: Optional[torch.Generator],
    dtype: torch.dtype,
    uniform: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Thresholds on the logits that give the action fed to the next step.

    A sampled click is ``u < sigmoid(logit)``, i.e. ``logit > logit(u)``,
    so one draw of ``u`` for every (position, list) up front replaces a
    draw and a sigmoid per step.  Where the observed click is fed instead
    (teacher forcing), the threshold is -inf (click) or +inf (skip);
    where nothing is shown it is +inf (never a click).

    Args:
        shown: [N, M] bool; given: [N, M] observed clicks or None.
        uniform: [N, M] draws of ``u`` made beforehand (see
            :func:`sampling_uniforms`); None draws them here from ``generator``.

    Returns:
        [N, M] thresholds: the action at t is ``logit_t > threshold[t]``.
    """
    if uniform is None:
        uniform = torch.rand(shown.shape, generator=generator, device=shown.device, dtype=dtype)
    threshold = torch.logit(uniform)
    if given is not None:
        use_given = torch.rand(shown.shape, generator=generator, device=shown.device) < teacher_forcing_ratio
        forced = torch.where(given > 0, -math.inf, math.inf).to(dtype)
        threshold = torch.where(use_given, forced, threshold)
    return threshold.masked_fill_(~shown, math.inf)
