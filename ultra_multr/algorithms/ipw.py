"""Inverse propensity weighting with given position propensities (ULTRA's ``IPWrank``)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

import torch

from ultra_multr import losses
from ultra_multr.click_models import PositionBasedModel, per_rank
from ultra_multr.batch import Batch
from ultra_multr.config import require, split_assignments
from ultra_multr.click_models.ultra import load_click_model_file
from ultra_multr.algorithms.base import AlgorithmConfig, PluginAlgorithm

LOGGER = logging.getLogger("ultra_multr")


@dataclass(frozen=True)
class IPWConfig(AlgorithmConfig):
    """IPW's hyper-parameters.

    The position propensities come from, in order of precedence:
    ``propensities``; the position-based click model in
    ``propensity_json``; the training feed's ``click_model_json`` when that
    is a position-based model.

    Attributes:
        propensities: P(examined | position t) for t = 1..N, each in (0, 1].
        propensity_json: a click-model JSON (found like the feed's) whose
            ``exam_prob`` are the propensities; position-based models only.
        max_propensity_weight: clamp of the inverse propensity weights (<= 0: none).
    """

    propensities: Tuple[float, ...] = field(default_factory=tuple)
    propensity_json: str = ""
    max_propensity_weight: float = -1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "propensities", tuple(self.propensities))
        require(
            not (self.propensities and self.propensity_json),
            "give propensities or propensity_json, not both",
        )
        bad = [p for p in self.propensities if not 0.0 < p <= 1.0]
        require(not bad, "propensities must be in (0, 1], got %s" % (bad,))


def _feed_click_model_json(exp_settings: dict) -> str:
    """The training feed's ``click_model_json`` hparam ("" when absent)."""
    for assignment in split_assignments(exp_settings.get("train_input_hparams", "") or ""):
        name, _, value = assignment.partition("=")
        if name.strip() == "click_model_json":
            return value.strip().strip("'\"")
    return ""


def click_model_propensities(path: str, n_positions: int, what: str) -> torch.Tensor:
    """[n_positions] examination probabilities of a position-based click-model JSON.

    Raises:
        ValueError: for any other click model, whose examination is not a
            function of the position alone (e.g. cascade: a document is
            examined when no document above it was clicked, so position-only
            IPW is misspecified there).
    """
    loaded = load_click_model_file(path, what=what)
    model = getattr(loaded, "model", None)
    if not isinstance(model, PositionBasedModel):
        raise ValueError(
            "%s %s describes a %s, whose examination depends on more than the position; IPW needs "
            "position propensities. Give them explicitly with propensities=[...] (e.g. estimated by "
            "result randomisation) to run position-based IPW on these clicks anyway."
            % (what, path, getattr(loaded, "model_name", type(loaded).__name__))
        )
    return per_rank(model.exam_prob, n_positions).to(torch.float32)


class IPW(PluginAlgorithm):
    """Inverse propensity weighting with given position propensities.

    ULTRA's ``IPWrank`` with its default ``softmax_loss``: clicks weighted by
    ``P(e at 1) / P(e at t)``.  The propensities are fixed for the whole run
    (a feed with ``dynamic_bias_eta_change`` drifts away from them).  Under
    cascade clicks no position propensity is right: examination depends on
    the documents above, which is the classic mismatch of position-based
    IPW; pass ``propensities`` explicitly to measure it.
    """

    config_class = IPWConfig

    def __init__(self, data_set, exp_settings: dict) -> None:
        super().__init__(data_set, exp_settings)
        self.examination = self.position_propensities().to(self.device)
        LOGGER.info("IPW propensities by position: %s", ", ".join("%.4g" % p for p in self.examination.tolist()))

    def position_propensities(self) -> torch.Tensor:
        """[N] P(examined | position) from the hparams (see :class:`IPWConfig`)."""
        config, n, name = self.hparams, self.rank_list_size, type(self).__name__
        if config.propensities:
            require(
                len(config.propensities) >= n,
                "propensities has %d values but the displayed list has %d positions (selection_bias_cutoff)"
                % (len(config.propensities), n),
            )
            return torch.tensor(config.propensities[:n], dtype=torch.float32)
        if config.propensity_json:
            return click_model_propensities(config.propensity_json, n, "propensity_json hparam of %s" % name)
        feed_json = _feed_click_model_json(self.exp_settings)
        if not feed_json:
            raise ValueError(
                "%s needs position propensities: set propensities=[...] or propensity_json=<click model JSON> "
                "in learning_algorithm_hparams (the training feed has no click_model_json to take them from)" % name
            )
        what = "click_model_json of the training feed (the default source of %s's propensities)" % name
        return click_model_propensities(feed_json, n, what)

    def click_examination(self) -> Optional[torch.Tensor]:
        """The given propensities."""
        return self.examination

    def ranking_loss(
        self, batch: Batch, scores: torch.Tensor, weights: torch.Tensor
    ) -> Tuple[torch.Tensor, Dict[str, float]]:
        """IPW's weighted listwise loss; :class:`MULTR_IPW` replaces it."""
        return losses.dla_softmax_loss(scores, batch.labels, weights, batch.mask), {}

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        scores = self.scores(batch)
        weights = losses.ipw_weights(
            self.examination.expand_as(scores), batch.mask, self.hparams.max_propensity_weight
        )
        return self.ranking_loss(batch, scores, weights)
