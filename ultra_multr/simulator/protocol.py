"""What every user simulator offers: the interface MULTR's doubly-robust loss, its imputation and the
simulator-validity study read, whatever stands behind it.

Satisfied by the trained :class:`~ultra_multr.simulator.model.ContextAwareUserSimulator`, its CUDA-graph
replay :class:`~ultra_multr.simulator.graphs.GraphedSampler`, the exact
:class:`~ultra_multr.simulator.controls.TrueClickModelSimulator` (a study's upper bound) and any test double
(``isinstance(x, UserSimulator)`` checks the members).

Shapes: B lists, N slots of each displayed list (its logged order), F features, P orders per list.

* ``features`` [B, N, F] float32: the documents in their displayed slots;
* ``mask`` [B, N] bool: True for a real document (padding may sit anywhere, and stays out of every
  displayed position);
* ``orders`` [B, P, N] long: order p shows slot ``orders[b, p, t]`` at position t (a permutation of the
  slots; the identity is the displayed list itself; a padded slot only at a position whose slot is padded);
* every output is by *position*, [B, P, N] float32, 0 where nothing is shown.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Protocol, runtime_checkable

import torch


@runtime_checkable
class UserSimulator(Protocol):
    """A click model of users on any order of a displayed list.

    Attributes:
        list_size: N, the most positions it takes.
        exact_probabilities: True when :meth:`click_probabilities` are exact marginals ``P(c_t = 1)`` (a known
            click model); False when they are one-session estimates: ``P(c_t | the actions sampled before t)``
            along one sampled session per order, unbiased for the marginal only in their mean over sessions
            (a learned sequential simulator).
    """

    list_size: int
    exact_probabilities: bool

    @property
    def device(self) -> torch.device:
        """Where it computes (inputs go there)."""

    def sample_clicks(self, features: torch.Tensor, mask: torch.Tensor, orders: torch.Tensor,
                      generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """[B, P, N] sampled 0/1 clicks by position on each order."""

    def click_probabilities(self, features: torch.Tensor, mask: torch.Tensor, orders: torch.Tensor,
                            generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """[B, P, N] click probabilities by position on each order (exact or one-session estimates:
        :attr:`exact_probabilities`)."""

    def describe(self) -> Dict[str, Any]:
        """What it is, JSON-serialisable: ``{"kind": ..., ...}`` (its settings; for the run's ledger)."""
