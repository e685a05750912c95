"""Pairwise Debiasing (Hu et al., WWW 2019) as ULTRA's ``PairDebias`` defines it, with vectorised pairs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

import torch

from ultra_multr import losses
from ultra_multr.batch import Batch
from ultra_multr.config import require
from ultra_multr.algorithms.base import AlgorithmConfig, PluginAlgorithm


@dataclass(frozen=True)
class PairDConfig(AlgorithmConfig):
    """PairD's hyper-parameters (ULTRA's names and defaults).

    Attributes:
        learning_rate: ULTRA's PairD default, 0.005.
        EM_step_size: blend weight of each batch's bias estimate, in (0, 1].
        regulation_p: p of Hu et al.'s L_p regulariser (>= 0); the estimate
            is raised to 1 / (p + 1).
    """

    learning_rate: float = 0.005
    EM_step_size: float = 0.05
    regulation_p: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require(0.0 < self.EM_step_size <= 1.0, "EM_step_size must be in (0, 1], got %r" % self.EM_step_size)
        require(self.regulation_p >= 0, "regulation_p must be >= 0, got %r" % self.regulation_p)


class PairD(PluginAlgorithm):
    """Pairwise Debiasing: pairwise loss / (t+_i t-_j), biases re-estimated each step.

    ``self.t_plus`` and ``self.t_minus`` [N] are the position biases of
    clicked and unclicked slots, 1 at position 1.  The loss of a step uses
    the biases from before the step, as ULTRA does.
    """

    config_class = PairDConfig

    def __init__(self, data_set, exp_settings: dict) -> None:
        super().__init__(data_set, exp_settings)
        self.t_plus = torch.ones(self.rank_list_size, device=self.device)
        self.t_minus = torch.ones(self.rank_list_size, device=self.device)

    def debiased_loss(self, batch: Batch) -> Tuple[torch.Tensor, torch.Tensor]:
        """(the pairwise loss weighted by the current biases [], the unweighted pair losses the bias update reads)."""
        pair_losses = losses.pairwise_debias_pair_losses(self.scores(batch), batch.labels, batch.mask)
        return losses.pairwise_debias_loss(pair_losses, self.t_plus, self.t_minus), pair_losses

    def click_loss(self, batch: Batch) -> torch.Tensor:
        """The training loss with the biases as they are (training re-estimates them after computing it)."""
        return self.debiased_loss(batch)[0]

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        loss, pair_losses = self.debiased_loss(batch)
        with torch.no_grad():
            self.t_plus, self.t_minus = losses.pairwise_debias_update(
                pair_losses, self.t_plus, self.t_minus, self.hparams.EM_step_size, self.hparams.regulation_p
            )
        return loss, {"t_plus_last": float(self.t_plus[-1]), "t_minus_last": float(self.t_minus[-1])}
