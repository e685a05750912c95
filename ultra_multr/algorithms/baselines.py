"""The baselines of the paper's Table 2, and MULTR on a second IPW framework.

Every class is a ULTRA learning algorithm (select it as
``"learning_algorithm": "ultra_multr.<Name>"``) on the shared plumbing of
:class:`~ultra_multr.algorithms.base.PluginAlgorithm`; the math is in
:mod:`ultra_multr.losses`.

* :class:`Naive`: ULTRA's ``NavieAlgorithm`` with its default listwise
  softmax loss on the clicks as they are.  Fed relevance labels
  (``oracle_mode=true`` in the click feed) it is the Oracle.
* :class:`REM`: ULTRA's ``RegressionEM`` (Wang et al., WSDM 2018): online EM
  over per-position examination probabilities, the ranker fitted with a
  sigmoid loss to relevance labels sampled from the E-step posterior.
* :class:`PairD`: ULTRA's ``PairDebias`` (Hu et al., WWW 2019): pairwise
  logistic loss divided by position biases t+ (clicked slot) and t-
  (unclicked slot), re-estimated from the loss every step.
* :class:`PAL`: Guo et al., RecSys 2019.  P(click) = P(seen | position) *
  P(relevant | document), trained with click cross-entropy; the ranking uses
  the relevance tower alone.  ULTRA has no PAL.
* :class:`IPW`: ULTRA's ``IPWrank`` with *given* position propensities (a
  list, or a position-based click model's examination probabilities).
* :class:`MULTR_IPW`: MULTR's simulator and doubly-robust loss
  (:class:`~ultra_multr.algorithms.multr.DoublyRobustMixin`) on :class:`IPW`
  instead of DLA: the paper's "plugs into any IPW method", measurable with
  propensities that are known rather than learnt.

What the ULTRA originals (commit 1757587) get wrong and these do not: every
loss, posterior and bias estimate ignores padded slots (ULTRA averages or
pairs them as documents); one device throughout (ULTRA moves tensors to
CUDA whenever it exists, PairD's sampler always); optimizers are created
once; PairD's bias estimate of a position without pairs in the batch stays
put (ULTRA shrinks it towards 0 and then divides by it).  Loss reductions
are means over queries or valid slots (ULTRA's PairD sums over the batch).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

import torch

from .. import losses
from ..click_models import PositionBasedModel, per_rank
from ..compat.runtime import Batch
from ..config import require, split_assignments
from ..ultra_click_models import load_click_model_file
from .base import AlgorithmConfig, PluginAlgorithm
from .multr import DoublyRobustConfig, DoublyRobustMixin

LOGGER = logging.getLogger("ultra_multr")

#: REM's initial examination probability at every position (ULTRA's value).
REM_INITIAL_EXAMINATION = 0.9


class Naive(PluginAlgorithm):
    """Listwise softmax loss on the feed's labels, no debiasing.

    With clicks this is the Naive baseline; with the click feed's
    ``oracle_mode=true`` (relevance labels) it is the Oracle.
    Hyper-parameters: those of :class:`~ultra_multr.algorithms.base.AlgorithmConfig`.
    """

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        scores = self.scores(batch)
        uniform = batch.mask.to(scores.dtype)
        return losses.dla_softmax_loss(scores, batch.labels, uniform, batch.mask), {}


# -- REM ----------------------------------------------------------------------


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

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        scores = self.scores(batch)
        with torch.no_grad():
            p_relevant, p_examined = losses.rem_posteriors(scores, self.examination, batch.labels, batch.mask)
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


# -- PairD --------------------------------------------------------------------


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

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        scores = self.scores(batch)
        pair_losses = losses.pairwise_debias_pair_losses(scores, batch.labels, batch.mask)
        loss = losses.pairwise_debias_loss(pair_losses, self.t_plus, self.t_minus)
        with torch.no_grad():
            self.t_plus, self.t_minus = losses.pairwise_debias_update(
                pair_losses, self.t_plus, self.t_minus, self.hparams.EM_step_size, self.hparams.regulation_p
            )
        return loss, {"t_plus_last": float(self.t_plus[-1]), "t_minus_last": float(self.t_minus[-1])}


# -- PAL ----------------------------------------------------------------------


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

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        scores = self.scores(batch)
        position_logits = self.position_model()
        loss = losses.pal_click_loss(scores, position_logits, batch.labels, batch.mask)
        seen = torch.sigmoid(position_logits.detach())
        return loss, {"seen_first": float(seen[0]), "seen_last": float(seen[-1])}


# -- IPW with given propensities, and MULTR on it ----------------------------


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


@dataclass(frozen=True)
class MULTRIPWConfig(IPWConfig, DoublyRobustConfig):
    """:class:`IPWConfig` plus MULTR's :class:`~ultra_multr.algorithms.multr.DoublyRobustConfig`."""


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

