"""Naive and Oracle: listwise softmax on the feed's labels as they are (ULTRA's ``NavieAlgorithm``)."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch

from ultra_multr import losses
from ultra_multr.batch import Batch
from ultra_multr.algorithms.base import PluginAlgorithm


class Naive(PluginAlgorithm):
    """Listwise softmax loss on the feed's labels, no debiasing.

    With clicks this is the Naive baseline; with the click feed's
    ``oracle_mode=true`` (relevance labels) it is the Oracle.
    Hyper-parameters: those of :class:`~ultra_multr.algorithms.base.AlgorithmConfig`.
    """

    def click_examination(self) -> Optional[torch.Tensor]:
        """Every rank examined: clicks are ``sigmoid(score)`` (ultr-reproducibility's Naive clicks with its
        relevance logits)."""
        return torch.ones(self.rank_list_size, device=self.device)

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        scores = self.scores(batch)
        uniform = batch.mask.to(scores.dtype)
        return losses.dla_softmax_loss(scores, batch.labels, uniform, batch.mask), {}
