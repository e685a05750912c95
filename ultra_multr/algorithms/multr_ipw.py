"""MULTR's simulator and doubly-robust loss on IPW instead of DLA (the paper's "plugs into any IPW method")."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import torch

from ultra_multr.batch import Batch
from ultra_multr.components.doubly_robust import DoublyRobustGroups, check_with_host
from ultra_multr.algorithms.ipw import IPW, IPWConfig
from ultra_multr.algorithms.multr import (
    doubly_robust_parts, doubly_robust_trained_with, prepare_doubly_robust, seeded_generator, with_clicks_per_list,
)


@dataclass(frozen=True)
class MULTRIPWConfig(IPWConfig, DoublyRobustGroups):
    """:class:`IPWConfig` (the host) and MULTR's groups ``simulator``, ``guards`` and ``dr``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_with_host(self.dr, self.tune)


class MULTR_IPW(IPW):  # noqa: N801 - reads as "MULTR on IPW" in settings files
    """MULTR's doubly-robust loss on IPW's given propensities.

    Same simulator phase, pseudo clicks and Eq. dr_loss as :class:`~ultra_multr.MULTR`
    (:func:`~ultra_multr.algorithms.multr.doubly_robust_parts`), with the inverse propensity weights of
    :class:`IPW` instead of DLA's learnt ones and no examination loss.  IPW rather than REM is the second
    framework because its propensities are exact under position-based clicks, which isolates what the
    doubly-robust correction adds; REM's EM reads its posteriors from a sigmoid-calibrated ranker, which the
    listwise DR loss does not train.
    """

    config_class = MULTRIPWConfig

    def __init__(self, data_set, exp_settings: dict) -> None:
        super().__init__(data_set, exp_settings)
        self.generator = seeded_generator(self.device, self.hparams.seed)
        self.simulator_phase, self.doubly_robust = doubly_robust_parts(self, "IPW")

    def prepare_training(self, valid_set=None, batch_size: Optional[int] = None) -> None:
        prepare_doubly_robust(self, valid_set, batch_size)
        super().prepare_training(valid_set, batch_size)

    def trained_with(self) -> Tuple[str, str, Optional[str]]:
        return doubly_robust_trained_with(self, "IPW")

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        return with_clicks_per_list(batch, *super().training_loss(batch))

    def ranking_loss(self, batch: Batch, scores: torch.Tensor, weights: torch.Tensor
                     ) -> Tuple[torch.Tensor, Dict[str, float]]:
        if not self.doubly_robust.used:
            return super().ranking_loss(batch, scores, weights)
        return self.doubly_robust.ranking_loss(batch, scores, weights)

    def click_loss(self, batch: Batch) -> torch.Tensor:
        with self.doubly_robust.validation_draws():
            return super().click_loss(batch)
