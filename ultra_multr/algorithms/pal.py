"""PAL (Guo et al., RecSys 2019): P(click) = P(seen | position) x P(relevant | document).

ULTRA has no PAL; the ranking uses the relevance tower alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch

from ultra_multr import losses
from ultra_multr.batch import Batch
from ultra_multr.algorithms.base import AlgorithmConfig, PluginAlgorithm


@dataclass(frozen=True)
class PALConfig(AlgorithmConfig):
    """PAL's hyper-parameters.

    Attributes:
        position_learning_rate: step size of the position tower (<= 0: the
            ranker's learning rate).
    """

    position_learning_rate: float = -1.0


class PositionTower(torch.nn.Module):
    """P(seen | position t) = sigmoid(logit_t): one learned logit per position.

    The PAL paper's position module reads a position feature; with the
    position as its only input, any such module is a function of t, i.e. a
    table of N logits, which this is.  Initialised at P(seen) = 0.5.
    """

    def __init__(self, n_positions: int) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(torch.zeros(n_positions))

    def forward(self) -> torch.Tensor:
        """[N] position logits."""
        return self.logits


class PAL(PluginAlgorithm):
    """Position-bias aware learning: a position tower times the relevance tower.

    Training: click cross-entropy of sigmoid(position logit) *
    sigmoid(ranker score).  Ranking (validation, test): the ranker's score
    alone, i.e. P(relevant) without position.

    (The authors' MULTR fork has a PAL that multiplies the position
    probability into raw ranker scores under the softmax loss and never
    updates its position model; this follows the PAL paper instead.)
    """

    config_class = PALConfig

    def __init__(self, data_set, exp_settings: dict) -> None:
        super().__init__(data_set, exp_settings)
        self.position_model = PositionTower(self.rank_list_size).to(self.device)

    def parameter_groups(self) -> List[Tuple[List[torch.nn.Parameter], float]]:
        rate = self.hparams.position_learning_rate
        return [
            (list(self.position_model.parameters()), rate if rate > 0 else self.hparams.learning_rate),
            (list(self.model.parameters()), self.hparams.learning_rate),
        ]

    def click_examination(self) -> Optional[torch.Tensor]:
        """P(seen | position): the position tower."""
        with torch.no_grad():
            return torch.sigmoid(self.position_model())

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        scores = self.scores(batch)
        position_logits = self.position_model()
        loss = losses.pal_click_loss(scores, position_logits, batch.labels, batch.mask)
        seen = torch.sigmoid(position_logits.detach())
        return loss, {"seen_first": float(seen[0]), "seen_last": float(seen[-1])}
