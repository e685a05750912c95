"""MULTR's simulator and doubly-robust loss on IPW instead of DLA (the paper's "plugs into any IPW method")."""
from __future__ import annotations

from dataclasses import dataclass

from ultra_multr.algorithms.ipw import IPW, IPWConfig
from ultra_multr.algorithms.multr import DoublyRobustMixin
from ultra_multr.algorithms.multr_config import DoublyRobustConfig


@dataclass(frozen=True)
class MULTRIPWConfig(IPWConfig, DoublyRobustConfig):
    """:class:`IPWConfig` plus MULTR's :class:`~ultra_multr.algorithms.multr_config.DoublyRobustConfig`."""


class MULTR_IPW(DoublyRobustMixin, IPW):  # noqa: N801 - reads as "MULTR on IPW" in settings files
    """MULTR's doubly-robust loss on IPW's given propensities.

    Same simulator, pseudo clicks and Eq. dr_loss as :class:`~ultra_multr.MULTR`,
    with the inverse propensity weights of :class:`IPW` instead of DLA's
    learnt ones and no examination loss.  IPW rather than REM is the second
    framework because its propensities are exact under position-based
    clicks, which isolates what the doubly-robust correction adds; REM's
    EM reads its posteriors from a sigmoid-calibrated ranker, which the
    listwise DR loss does not train.
    """

    config_class = MULTRIPWConfig
