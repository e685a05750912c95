"""A factorised user simulator: what a document is worth, times whether the user gets to it.

The context-aware network reads the whole list at every position, so on logs
with one deterministic order per query it can credit position (and the other
documents) for what relevance did, and carry that to orders no user saw
(issue 37; Deffayet et al., TOIS 2023: factorised click models hold up better
under a policy shift).  This design separates the two as UBM does:

    P(c_t = 1 | c_<t) = sigmoid(r(x_d)) * sigmoid(e[t, k_t])

with ``r`` a network of the shown document's own features alone (the input
MLP, then a linear head) and ``e`` a table of examination logits by position
t and by k_t, the distance to the last click above t (0: none yet).  Re-ranking
a list changes a document's click probability only through where it lands and
the clicks above it.  It trains on the same sessions, with the same loss and
trainer as the context-aware network (:func:`~ultra_multr.simulator.trainer.train_simulator`):
:meth:`click_logits` gives the logit of that probability, conditioned on the
observed clicks above (teacher forcing) or on sampled ones.

Shapes: B lists, N slots, F features, P orders per list; as
:class:`~ultra_multr.simulator.protocol.UserSimulator`.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any, Dict, Optional, Tuple

import torch
from torch import nn

from ultra_multr.losses.pal import log1mexp
from ultra_multr.simulator.model import SimulatorConfig


class FactorisedUserSimulator(nn.Module):
    """``sigmoid(relevance of the document) * sigmoid(examination at its position, given the last click above)``.

    Args:
        config: its shape: ``feature_size``, ``list_size`` (N: positions), ``input_mlp`` (the relevance tower's
            hidden sizes; ELU), ``design="factorised"``.  The recurrent sizes are not read.
    """

    exact_probabilities = False

    def __init__(self, config: SimulatorConfig) -> None:
        super().__init__()
        self.config = config
        layers, width = [], config.feature_size
        for size in config.input_mlp:
            layers += [nn.Linear(width, size), nn.ELU()]
            width = size
        self.relevance = nn.Sequential(*layers, nn.Linear(width, 1))
        #: examination logits [N, N + 1]: position t, distance k to the last click above (0: none yet)
        self.examination = nn.Parameter(torch.zeros(config.list_size, config.list_size + 1))

    @property
    def list_size(self) -> int:
        return self.config.list_size

    @property
    def device(self) -> torch.device:
        return self.examination.device

    def describe(self) -> Dict[str, Any]:
        return dict(kind="factorised", **asdict(self.config))

    def _log_probabilities(self, relevance: torch.Tensor, position: int, since_click: torch.Tensor) -> torch.Tensor:
        """log P(click) [M] of the documents shown at ``position`` with logits ``relevance`` [M] and distances
        ``since_click`` [M] (long) to the last click above."""
        return nn.functional.logsigmoid(relevance) + nn.functional.logsigmoid(self.examination[position, since_click])

    def _walk(self, relevance: torch.Tensor, shown: torch.Tensor, given: Optional[torch.Tensor],
              teacher_forcing_ratio: float, generator: Optional[torch.Generator]) -> Tuple[torch.Tensor, torch.Tensor]:
        """Down the positions of M lists: (log P(click) [M, N], the clicks fed back [M, N]).

        Args:
            relevance: [M, N] the shown documents' relevance logits, by position.
            shown: [M, N] bool.
            given: [M, N] observed clicks (fed back with probability ``teacher_forcing_ratio``, else sampled), or
                None: every click sampled.
        """
        lists, positions = relevance.shape
        since = torch.zeros(lists, dtype=torch.long, device=relevance.device)
        log_p, clicks = [], []
        for t in range(positions):
            current = self._log_probabilities(relevance[:, t], t, since)
            uniform = torch.rand(lists, generator=generator, device=relevance.device)
            sampled = (uniform < current.detach().exp()).to(relevance.dtype)
            if given is None:
                click = sampled
            elif teacher_forcing_ratio >= 1.0:
                click = given[:, t]
            else:
                forced = torch.rand(lists, generator=generator, device=relevance.device) < teacher_forcing_ratio
                click = torch.where(forced, given[:, t], sampled)
            click = click * shown[:, t]
            log_p.append(current)
            clicks.append(click)
            since = torch.where(click > 0, torch.ones_like(since), torch.where(since > 0, since + 1, since))
        return torch.stack(log_p, 1), torch.stack(clicks, 1)

    def click_logits(self, features: torch.Tensor, mask: torch.Tensor, clicks: torch.Tensor,
                     teacher_forcing_ratio: float = 1.0, generator: Optional[torch.Generator] = None,
                     static: bool = False) -> torch.Tensor:
        """[B, N] logits of P(click at t | clicks before t) on the observed lists (features [B, N, F], mask
        [B, N], clicks [B, N]); ``static`` is not read (no CUDA-graph path)."""
        relevance = self.relevance(features).squeeze(-1)
        log_p, _ = self._walk(relevance, mask, clicks, teacher_forcing_ratio, generator)
        log_p = log_p.clamp(max=-1e-6)  # a saturated probability of 1 would be an infinite logit
        return log_p - log1mexp(log_p)

    def _on_orders(self, features: torch.Tensor, mask: torch.Tensor, orders: torch.Tensor,
                   generator: Optional[torch.Generator]) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sampled sessions on every order: (log P(click), clicks, shown), each [B, P, N] by position."""
        batch, lists, positions = orders.shape
        relevance = self.relevance(features).squeeze(-1)  # [B, N] by slot
        by_position = torch.gather(relevance.unsqueeze(1).expand(-1, lists, -1), 2, orders).reshape(-1, positions)
        shown = torch.gather(mask.unsqueeze(1).expand_as(orders), 2, orders)
        log_p, clicks = self._walk(by_position, shown.reshape(-1, positions), None, 0.0, generator)
        shape = (batch, lists, positions)
        return log_p.reshape(shape), clicks.reshape(shape), shown

    def sample_clicks(self, features: torch.Tensor, mask: torch.Tensor, orders: torch.Tensor,
                      generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """[B, P, N] 0/1 clicks by position, sampled down each order."""
        return self._on_orders(features, mask, orders, generator)[1]

    def click_probabilities(self, features: torch.Tensor, mask: torch.Tensor, orders: torch.Tensor,
                            generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """[B, P, N] P(click at t | the clicks sampled above t) along one sampled session per order (a one-session
        estimate, unbiased in its mean), 0 where nothing is shown."""
        log_p, _, shown = self._on_orders(features, mask, orders, generator)
        return torch.where(shown, log_p.exp(), torch.zeros_like(log_p))
