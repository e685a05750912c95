"""Regression EM (Wang et al., WSDM 2018) as ULTRA's ``RegressionEM`` defines it, padding masked."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import torch

from ultra_multr import losses
from ultra_multr.batch import Batch
from ultra_multr.config import require
from ultra_multr.algorithms.base import AlgorithmConfig, PluginAlgorithm


#: REM's initial examination probability at every position (ULTRA's value).
REM_INITIAL_EXAMINATION = 0.9


@dataclass(frozen=True)
class REMConfig(AlgorithmConfig):
    """REM's hyper-parameters (ULTRA's names and defaults).

    Attributes:
        EM_step_size: weight of each batch in the online M-step, in (0, 1].
    """

    EM_step_size: float = 0.05

    def __post_init__(self) -> None:
        super().__post_init__()
        require(0.0 < self.EM_step_size <= 1.0, "EM_step_size must be in (0, 1], got %r" % self.EM_step_size)


class REM(PluginAlgorithm):
    """Regression EM: per-position examination estimated by online EM.

    Each step: E-step posteriors from the current ranker (gamma =
    sigmoid(score)) and examination estimates; binary relevance targets
    sampled from P(R=1 | C) train the ranker with a sigmoid loss (the
    "regression" of REM); the M-step moves each position's examination
    towards the batch mean of P(E=1 | C).  The ranker's scores are relevance
    logits; the examination estimates are kept in ``self.examination`` [N].
    """

    config_class = REMConfig

    def __init__(self, data_set, exp_settings: dict) -> None:
        super().__init__(data_set, exp_settings)
        self.examination = torch.full((self.rank_list_size,), REM_INITIAL_EXAMINATION, device=self.device)
        self.generator = torch.Generator(device=self.device)
        if self.hparams.seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(self.hparams.seed)

    def posteriors(self, batch: Batch) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(scores [B, N], P(R=1 | C) [B, N], P(E=1 | C) [B, N]) under the current examination estimates."""
        scores = self.scores(batch)
        with torch.no_grad():
            p_relevant, p_examined = losses.rem_posteriors(scores, self.examination, batch.labels, batch.mask)
        return scores, p_relevant, p_examined

    def click_loss(self, batch: Batch) -> torch.Tensor:
        """The training loss's expectation over its sampled targets: the sigmoid cross-entropy against
        P(R=1 | C) itself (it is linear in the target); no draw, no M-step."""
        scores, p_relevant, _ = self.posteriors(batch)
        return losses.sigmoid_cross_entropy(scores, p_relevant, batch.mask)

    def click_examination(self) -> Optional[torch.Tensor]:
        """Its examination estimates."""
        return self.examination

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        scores, p_relevant, p_examined = self.posteriors(batch)
        with torch.no_grad():
            targets = torch.bernoulli(p_relevant, generator=self.generator)
            self.examination = losses.online_em_update(
                self.examination, p_examined, batch.mask, self.hparams.EM_step_size
            )
        loss = losses.sigmoid_cross_entropy(scores, targets, batch.mask)
        parts = {
            "relevant_targets_per_list": float(targets.sum(-1).mean()),
            "examination_last": float(self.examination[-1]),
        }
        return loss, parts
