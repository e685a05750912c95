"""DLA (Ai et al., SIGIR 2018) on ultra_multr's plumbing.

The propensity model is ULTRA's own ``DenoisingNet`` and the losses are
ULTRA's ``softmax_loss`` semantics (:func:`ultra_multr.losses.dla_softmax_loss`),
so this is DLA as ULTRA defines it, minus ULTRA's defects: padded slots are
masked out of both softmaxes, ``max_propensity_weight`` really clamps, the
optimizers are created once (switch ``rebuild_optimizer_each_step`` for
parity), one device, no SummaryWriter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch
from ultra.learning_algorithm.dla import DenoisingNet

from ultra_multr import losses
from ultra_multr.batch import Batch
from ultra_multr.config import require
from ultra_multr.algorithms.base import AlgorithmConfig, PluginAlgorithm


@dataclass(frozen=True)
class DLAConfig(AlgorithmConfig):
    """DLA's hyper-parameters (ULTRA's names and defaults).

    Attributes:
        loss_func: only "softmax_loss" (the listwise loss MULTR builds on).
        logits_to_prob: "softmax" or "sigmoid".
        propensity_learning_rate: < 0 means the ranker's learning rate.
        ranker_loss_weight: weight of the ranking loss against the examination loss.
        max_propensity_weight: clamp of the inverse propensity weights (<= 0: none).
    """

    loss_func: str = "softmax_loss"
    logits_to_prob: str = "softmax"
    propensity_learning_rate: float = -1.0
    ranker_loss_weight: float = 1.0
    max_propensity_weight: float = -1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.loss_func == "softmax_loss", "loss_func must be 'softmax_loss', got %r" % self.loss_func)
        require(
            self.logits_to_prob in losses.PROBABILITY_FUNCTIONS,
            "logits_to_prob must be one of %s, got %r" % (losses.PROBABILITY_FUNCTIONS, self.logits_to_prob),
        )


class DLA(PluginAlgorithm):
    """Dual Learning Algorithm: a propensity model and a ranker learnt jointly.

    Two documented extension points: :meth:`ranking_loss` (the propensity-weighted ranking loss, which
    MULTR replaces by its doubly-robust one) and :meth:`examination_target` (what the examination loss divides
    the clicks by, and whether it trains this update).
    """

    config_class = DLAConfig

    def __init__(self, data_set, exp_settings: dict) -> None:
        super().__init__(data_set, exp_settings)
        self.propensity_model = DenoisingNet(self.rank_list_size).to(self.device)

    @property
    def propensity_learning_rate(self) -> float:
        """``propensity_learning_rate``, or the ranker's when it is <= 0 (read when used: ``tune`` may change it)."""
        rate = self.hparams.propensity_learning_rate
        return rate if rate > 0 else self.hparams.learning_rate

    def parameter_groups(self) -> List[Tuple[List[torch.nn.Parameter], float]]:
        return [
            (list(self.propensity_model.parameters()), self.propensity_learning_rate),
            (list(self.model.parameters()), self.hparams.learning_rate),
        ]

    def set_training_mode(self, training: bool) -> None:
        super().set_training_mode(training)
        self.propensity_model.train(training)

    def propensity_weights(self, logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """DLA's normalised inverse weights [B, N] from logits [B, N].

        Applied to the propensity logits they weight the ranking loss; applied
        to the ranker's scores (DLA's dual view) they weight the examination loss.
        """
        probs = losses.logits_to_probability(logits, mask, self.hparams.logits_to_prob)
        return losses.ipw_weights(probs, mask, self.hparams.max_propensity_weight)

    def relative_propensities(self) -> torch.Tensor:
        """[N] the learned propensity per position, softmax (or sigmoid) normalised as for the weights and relative
        to position 1."""
        with torch.no_grad():
            logits = self.propensity_model(torch.zeros(self.rank_list_size, 1, device=self.device))
            mask = torch.ones_like(logits, dtype=torch.bool)
            probs = losses.logits_to_probability(logits, mask, self.hparams.logits_to_prob)[0]
        return probs / probs[0]

    def training_curves(self) -> Dict[str, float]:
        """:meth:`relative_propensities`: ``propensity/position_01`` .. ``_N``."""
        relative = self.relative_propensities().tolist()
        return {"propensity/position_%02d" % (i + 1): value for i, value in enumerate(relative)}

    def click_examination(self) -> Optional[torch.Tensor]:
        """:meth:`relative_propensities`, at most 1: DLA learns the examination up to a factor, and position 1
        is examined (ultr-reproducibility's DLA predicts no clicks; this is the factor that makes it one)."""
        return self.relative_propensities().clamp(max=1.0)

    def ranking_loss(
        self, batch: Batch, scores: torch.Tensor, weights: torch.Tensor
    ) -> Tuple[torch.Tensor, Dict[str, float]]:
        """DLA's propensity-weighted listwise loss; MULTR replaces it."""
        return losses.dla_softmax_loss(scores, batch.labels, weights, batch.mask), {}

    def examination_target(
        self, batch: Batch, scores: torch.Tensor, weights: torch.Tensor
    ) -> Optional[Tuple[torch.Tensor, Optional[torch.Tensor]]]:
        """What the examination side learns from this update: the relevance scores [B, N] DLA's examination loss
        divides clicks by and a loss to add (None), or None when the examination side (the propensity model and
        that loss) does not train this update.

        DLA's dual view, every update: the ranker being trained (``scores``), nothing added.  MULTR may put
        another ranker there and thin its updates (:class:`ultra_multr.algorithms.multr.MULTR`).
        """
        return scores, None

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        """The examination loss + ``ranker_loss_weight`` x the ranking loss (+ the loss
        :meth:`examination_target` adds), with named parts; the ranking term alone (the propensities as they
        are) when :meth:`examination_target` says the examination side does not train."""
        scores = self.scores(batch)
        # DenoisingNet reads one [B] tensor per position (only for its shape).
        propensity_logits = self.propensity_model(batch.labels.t())
        with torch.no_grad():
            weights = self.propensity_weights(propensity_logits, batch.mask)
        rank_loss, parts = self.ranking_loss(batch, scores, weights)
        parts = dict(parts, rank_loss=float(rank_loss.detach()))
        loss = self.hparams.ranker_loss_weight * rank_loss
        target = self.examination_target(batch, scores, weights)
        if target is None:
            return loss, parts
        relevance, extra_loss = target
        with torch.no_grad():  # the examination loss is scale-free in them: no overflow on widely spread scores
            relevance_weights = losses.relative_ipw_weights(
                relevance, batch.mask, self.hparams.logits_to_prob, self.hparams.max_propensity_weight
            )
        exam_loss = losses.dla_softmax_loss(propensity_logits, batch.labels, relevance_weights, batch.mask)
        parts["exam_loss"] = float(exam_loss.detach())
        loss = exam_loss + loss
        if extra_loss is not None:
            parts["examination_ranker_loss"] = float(extra_loss.detach())
            loss = loss + extra_loss
        return loss, parts
