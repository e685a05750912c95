"""Sampling helpers of the user simulator: chunking and the per-step click draws.

:meth:`ContextAwareUserSimulator.sample_clicks
<ultra_multr.simulator.model.ContextAwareUserSimulator.sample_clicks>` runs
its recurrences over chunks of whole queries (:func:`queries_per_chunk`) and
draws every action up front (:func:`click_thresholds`).
"""
from __future__ import annotations

import math
from typing import Optional

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


def click_thresholds(
    shown: torch.Tensor,
    given: Optional[torch.Tensor],
    teacher_forcing_ratio: float,
    generator: Optional[torch.Generator],
    dtype: torch.dtype,
) -> torch.Tensor:
    """Thresholds on the logits that give the action fed to the next step.

    A sampled click is ``u < sigmoid(logit)``, i.e. ``logit > logit(u)``,
    so one draw of ``u`` for every (position, list) up front replaces a
    draw and a sigmoid per step.  Where the observed click is fed instead
    (teacher forcing), the threshold is -inf (click) or +inf (skip);
    where nothing is shown it is +inf (never a click).

    Args:
        shown: [N, M] bool; given: [N, M] observed clicks or None.

    Returns:
        [N, M] thresholds: the action at t is ``logit_t > threshold[t]``.
    """
    uniform = torch.rand(shown.shape, generator=generator, device=shown.device, dtype=dtype)
    threshold = torch.logit(uniform)
    if given is not None:
        use_given = torch.rand(shown.shape, generator=generator, device=shown.device) < teacher_forcing_ratio
        forced = torch.where(given > 0, -math.inf, math.inf).to(dtype)
        threshold = torch.where(use_given, forced, threshold)
    return threshold.masked_fill_(~shown, math.inf)
