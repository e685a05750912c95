"""The trivial click model a user simulator must beat, and what replaces a simulator that does not.

The trivial model is a click rate per position, fitted on the simulator's own
training sessions (the lists the simulator trains on, lists without a click
dropped as they are there).  It knows nothing of the documents: a simulator
whose held-out click log-likelihood is below it has learned nothing usable
and is never used silently: :meth:`ultra_multr.components.simulator_phase.SimulatorPhase.run`
warns and MULTR trains with its host algorithm's own losses instead (DLA's for
:class:`~ultra_multr.algorithms.multr.MULTR`).
"""
from __future__ import annotations

from typing import Iterable, Tuple

import torch

#: Click rates are kept inside [RATE_FLOOR, 1 - RATE_FLOOR] (a position never clicked in training).
RATE_FLOOR = 1e-4


class PositionClickRates:
    """Running click counts per position; :meth:`rates` is the fitted model.

    Attributes:
        clicks, shown: [N] float64 sums over the sessions added.
    """

    def __init__(self, list_size: int) -> None:
        self.clicks = torch.zeros(list_size, dtype=torch.float64)
        self.shown = torch.zeros(list_size, dtype=torch.float64)

    def add(self, clicks: torch.Tensor, mask: torch.Tensor) -> None:
        """Count one batch: clicks [B, N] 0/1, mask [B, N] bool (any device)."""
        self.clicks += (clicks * mask).sum(0).double().cpu()
        self.shown += mask.sum(0).double().cpu()

    def rates(self) -> torch.Tensor:
        """[N] click rate per position (0.5 where nothing was shown)."""
        rates = torch.where(self.shown > 0, self.clicks / self.shown.clamp(min=1), torch.full_like(self.shown, 0.5))
        return rates.clamp(RATE_FLOOR, 1 - RATE_FLOOR)

    def log_likelihood(self, batches: Iterable[Tuple[torch.Tensor, torch.Tensor]]) -> float:
        """Mean log-likelihood per session of (clicks [B, N], mask [B, N]) batches under :meth:`rates`."""
        rates = self.rates()
        total, sessions = 0.0, 0
        for clicks, mask in batches:
            clicks, mask = clicks.double().cpu(), mask.cpu()
            log_lik = clicks * rates.log() + (1 - clicks) * (1 - rates).log()
            total += float(torch.where(mask, log_lik, torch.zeros_like(log_lik)).sum())
            sessions += clicks.shape[0]
        return total / max(sessions, 1)
