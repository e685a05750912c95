"""Training the user simulator: its loss, one optimizer step, early stopping."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from ultra_multr.simulator.designs import TrainableSimulator


def click_log_likelihood(logits: torch.Tensor, clicks: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-slot log P(observed click) under the logits.

    Args:
        logits, clicks: [B, N]; mask: [B, N] bool.

    Returns:
        [B, N], 0 at padded slots.
    """
    log_prob = -nn.functional.binary_cross_entropy_with_logits(logits, clicks, reduction="none")
    return torch.where(mask, log_prob, torch.zeros_like(log_prob))


def simulator_loss(
    simulator: TrainableSimulator,
    logits: torch.Tensor,
    clicks: torch.Tensor,
    mask: torch.Tensor,
    l2_weight: float,
) -> torch.Tensor:
    """Eq. user_simulator_loss: BCE summed over a list's slots, averaged over
    lists, plus ``l2_weight * ||phi||^2`` over every simulator parameter."""
    nll = -click_log_likelihood(logits, clicks, mask).sum(dim=-1).mean()
    if l2_weight <= 0:
        return nll
    return nll + l2_weight * sum((p * p).sum() for p in simulator.parameters())


def simulator_update(
    simulator: TrainableSimulator,
    optimizer: torch.optim.Optimizer,
    features: torch.Tensor,
    mask: torch.Tensor,
    clicks: torch.Tensor,
    l2_weight: float,
    max_gradient_norm: float = 0.0,
    teacher_forcing_ratio: float = 1.0,
    generator: Optional[torch.Generator] = None,
    step: int = 0,
    teacher_forcing_unit: str = "click",
) -> float:
    """One optimizer step on the simulator loss of a batch of sessions.

    Args:
        features: [B, N, F]; mask: [B, N] bool; clicks: [B, N].
        max_gradient_norm: clip the gradient norm (<= 0: no clipping).
        step: the step number, for the error message.
        teacher_forcing_unit: "click" (each previous click observed with probability ``teacher_forcing_ratio``)
            or "batch" (the whole batch's, one draw from ``generator``).

    Returns:
        the loss before the step.

    Raises:
        FloatingPointError: a non-finite loss (the step is not taken).
    """
    simulator.train()
    if teacher_forcing_unit == "batch":
        draw = float(torch.rand((), generator=generator, device=features.device))
        teacher_forcing_ratio = 1.0 if draw < teacher_forcing_ratio else 0.0
    logits = simulator.click_logits(features, mask, clicks, teacher_forcing_ratio, generator)
    loss = simulator_loss(simulator, logits, clicks, mask, l2_weight)
    value = float(loss.detach())
    if not math.isfinite(value):
        raise FloatingPointError("non-finite simulator loss %r at simulator step %d" % (value, step))
    optimizer.zero_grad(set_to_none=True)
    backward_and_step(simulator, optimizer, loss, max_gradient_norm)
    return value


def backward_and_step(
    simulator: TrainableSimulator, optimizer: torch.optim.Optimizer, loss: torch.Tensor, max_gradient_norm: float
) -> None:
    """Gradients of ``loss`` (into zeroed or absent ``.grad``), clipped to
    ``max_gradient_norm`` (<= 0: not clipped), and one optimizer step; no host sync."""
    loss.backward()
    if max_gradient_norm > 0:
        torch.nn.utils.clip_grad_norm_(simulator.parameters(), max_gradient_norm)
    optimizer.step()


@dataclass
class EarlyStopping:
    """Tracks the best held-out log-likelihood; stops after ``patience``
    evaluations without improvement (``patience`` 0: never stops).

    Attributes:
        best: best held-out log-likelihood so far (-inf before the first).
        best_step: the step it was measured at (0: none yet).
        bad_evals: evaluations since the last improvement.
    """

    patience: int
    best: float = -math.inf
    best_step: int = 0
    bad_evals: int = 0

    def update(self, value: float, step: int) -> bool:
        """Record one evaluation; True when it improves on the best."""
        if value > self.best:
            self.best, self.best_step, self.bad_evals = value, step, 0
            return True
        self.bad_evals += 1
        return False

    @property
    def stop(self) -> bool:
        return self.patience > 0 and self.bad_evals >= self.patience
