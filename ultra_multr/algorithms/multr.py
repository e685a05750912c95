"""MULTR (Luo et al., WSDM 2023) as a ULTRA learning algorithm.

Algorithm 1 of the paper inside ULTRA's unmodified ``main.py``:

1. Before the first ranker update, the context-aware user simulator is
   trained on the training click stream, then frozen.  The stream is the one
   main.py trains the ranker on: the same feed class and hyper-parameters
   (for a fixed click log, the same log) and the same rule for sessions
   without a click (dropped, ``check_validation=True``), so the simulator
   models the clicks the doubly-robust correction subtracts from.  It is
   measured on held-out sessions of the same training queries (the queries
   it will produce pseudo clicks for): with fresh clicks, new draws from a
   second feed with another seed stream; with a fixed click log, a seeded
   ``simulator_heldout_fraction`` of the logged sessions, which it never
   trains on.  Every ``simulator_eval_every`` steps it
   measures the held-out click log-likelihood, keeps the best state, stops
   after ``simulator_patience`` evaluations without improvement
   (``simulator_steps`` is the cap) and writes ``<checkpoint>.partial``, from
   which a killed run resumes.  The simulator is saved beside the ranker
   (``<model_dir>/<learning_algorithm>.simulator.ckpt``) and reused when its
   settings and the fingerprints of the training data and click model match.
   ``simulator_steps=0`` keeps the random initialisation (Rand-MULTR) and
   never loads a checkpoint.
2. Every ranker update is DLA's update with the ranking loss replaced by the
   doubly-robust loss of Eq. dr_loss: ``sample_num`` independent random
   re-rankings per query, pseudo clicks sampled from the frozen simulator on
   the observed list and on every re-ranking, the observed list corrected
   with DLA's inverse propensity weights.  By default each document's weight
   is the paper's ``(1 - a) [c^o + (c - c^o) w] + a mean_s c^s`` with
   ``a = S / (S + 1)``, its average over ``|Pi| = sample_num + 1`` lists
   (``rerank_weight=paper``), and the loss is reduced as DLA reduces its own,
   by the batch's total weight (``dr_normalization=batch_weight``; ``none``
   averages the printed equation over the queries, the paper's setting file).
   ``rerank_weight=authors_code`` is the combination of the authors' released
   code instead (:mod:`ultra_multr.losses.authors_code`).
   ``rerank_weight=randomized``
   (``settings/multr_randomized.json``) weighs ``mean_s c^s + (c - c^o) e_bar
   / e_k``, whose expectation is proportional to the click probability under
   random orders when either the simulator or the propensities are exact; it
   is not the default because it puts nearly all weight on the simulator's
   clicks on re-ranked lists, and a simulator trained on one logging order
   per query lost to the paper's form in the headroom study
   (docs/estimator_targets.md, docs/headroom.md).  ``rerank_weight=auto``
   chooses ``a`` before the first update by a short pilot scored on the
   validation split (:mod:`.pilot`).  ``variant=eib`` gives
   EIB-MULTR.  By default
   (``imputation=expected``) the pseudo clicks are their expectations,
   estimated once per training list after the simulator is frozen (see
   :mod:`ultra_multr.imputation`); ``imputation=sampled`` (the paper's)
   samples them every step.  A weight that would be negative without a click
   (the loss would be unbounded below) is rebalanced so that its expectation
   under the simulator's click probability is unchanged
   (``dr_weight_guard=rebalance``, :func:`ultra_multr.losses.rebalance_weights`;
   ``clip`` clamps weights at >= 0, ``none`` is the paper's form).
   A simulator that its held-out sessions reject (below a position-only
   click model) or cannot validate (too few distinct held-out sessions) is
   not used: MULTR then trains with its host's own losses, DLA's
   (:meth:`DoublyRobustMixin.validate_simulator`).  DLA's examination model
   learns against a second ranker that takes DLA's own loss
   (``propensity_ranker=dla``), so MULTR's propensities are DLA's on the same
   batches; ``propensity_ranker=multr`` couples it to MULTR's ranker as the
   paper does (studies/propensity_drift).

Where this follows the paper and where it differs:

* Follows: BiLSTM context encoder, LSTM click decoder over
  ``[W1 h_pi; W2 x_t; W3 a_{t-1}]`` with three action embeddings, sigmoid
  click probabilities, BCE + L2 simulator loss, DLA's propensity model and
  examination loss unchanged, Delta = the listwise softmax cross-entropy term
  of a clicked document, the 1/|Pi| average, sampling instead of all N!
  permutations (the paper's footnote).
* Adds: a position embedding in the decoder input (the decoder otherwise
  knows the position only through its recurrence); options ``cell=gru``, an
  input MLP and a teacher-forcing ratio; held-out sessions, early stopping
  on their click log-likelihood (``simulator_steps`` is a cap), resumable
  intermediate checkpoints, and checkpoints tied to fingerprints of the
  training data and of the click model's JSON content.
* Differs: the simulator's default optimizer is Adam 0.005 with an input MLP
  [128] (the paper: Adagrad 0.05, no MLP, 10,000 steps).  On MQ2008 Fold1
  with fresh cascade clicks (seed 0, 1,000 steps, held-out clicked sessions
  of the training queries) its click log-likelihood was -1.37 nats per
  session against -2.07 for the paper's setting (the true click model,
  conditioned on a click: -1.28); ``settings/multr_paper.json`` has the
  paper's values.  Re-rankings permute a query's *displayed* valid
  documents only (padding stays out of displayed slots); Delta does not
  depend on the order, so the loss is computed as per-document weights times
  one softmax instead of one softmax per list (equal by construction, and
  tested against the literal formula).  EIB takes the observed list's real
  clicks without propensity correction and the re-rankings' pseudo clicks,
  as the EIB estimator does.
* Propensities: by default DLA's examination model learns against a second
  ranker trained by DLA's own loss (``propensity_ranker=dla``), so they are
  DLA's; the paper couples it to MULTR's ranker (``propensity_ranker=multr``).
  ``propensity_update_every=k`` trains that second ranker and the propensity
  model on every k-th update only, for speed.
* Batch reduction: by default DLA's (the batch's weighted mean of Delta,
  ``dr_normalization=batch_weight``), so that one learning rate is one step
  size for DLA and MULTR; the mean of Eq. dr_loss over the batch's queries
  with ``dr_normalization=none``.

The paper presents MULTR as a plug-in for any IPW method.  The plug-in is
:class:`DoublyRobustMixin` (simulator + pseudo clicks + doubly-robust loss);
:class:`MULTR` is that mixin on DLA, and
:class:`ultra_multr.algorithms.multr_ipw.MULTR_IPW` the same mixin on IPW with
given propensities.  This module holds the loss phase and :class:`MULTR`;
the hyper-parameters are in :mod:`.multr_config`, the simulator phase in
:mod:`.multr_simulator` (its data in :mod:`.multr_simulator_data`) and its
training loop in :mod:`ultra_multr.simulator.trainer`.
"""
from __future__ import annotations

import copy
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from ultra_multr import losses
from ultra_multr.compat import runtime
from ultra_multr.compat.settings_check import CLICK_LOSS_OBJECTIVE
from ultra_multr.config import require
from ultra_multr.batch import Batch
from ultra_multr.imputation import expected_pseudo_clicks
from ultra_multr.randomization import random_permutations, to_document_order
from ultra_multr.algorithms.base import LOGGER
from ultra_multr.algorithms.dla import DLA
from ultra_multr.algorithms.multr_config import AUTHORS_CODE, RANDOMIZED, MULTRConfig
from ultra_multr.algorithms.multr_simulator import SimulatorLifecycle
from ultra_multr.algorithms.pilot import DEFAULT_BATCH_SIZE, choose_by_validation, read_validation_set, record_choice


#: Seed stream of :meth:`DoublyRobustMixin.click_loss`'s pseudo clicks (with the ``seed`` hparam).
CLICK_LOSS_STREAM = 4099


class DoublyRobustMixin(SimulatorLifecycle):
    """MULTR's plug-in for an IPW algorithm: put it first among the bases.

    The host algorithm (a :class:`~ultra_multr.algorithms.base.PluginAlgorithm`
    whose ``config_class`` includes :class:`DoublyRobustConfig`) must compute
    its inverse propensity weights in ``training_loss`` and pass them to
    ``self.ranking_loss(batch, scores, weights) -> (loss, parts)``; this mixin
    replaces that ranking loss with Eq. dr_loss and trains the simulator
    before the first update.  Everything else (propensity estimation, other
    losses, optimizers) stays the host's.
    """

    def __init__(self, data_set, exp_settings: dict) -> None:
        super().__init__(data_set, exp_settings)
        config = self.hparams
        #: the estimator's form: "randomized", "authors_code" or Eq. dr_loss's "mixture".
        self.dr_form = config.rerank_weight if config.rerank_weight in (RANDOMIZED, AUTHORS_CODE) else "mixture"
        #: a of Eq. dr_loss; None until "auto" has chosen it (first update); 1.0 for
        #: "randomized" (its re-ranked term has full weight; a is not used); S / (S + 2),
        #: the re-ranked term's share, for "authors_code".
        self.rerank_weight: Optional[float] = (
            None
            if config.rerank_weight == "auto"
            else 1.0
            if config.rerank_weight == RANDOMIZED
            else config.sample_num / (config.sample_num + 2.0)
            if config.rerank_weight == AUTHORS_CODE
            else config.resolve_rerank_weight(config.rerank_weight, "rerank_weight")
        )
        require(
            not (self.reports_click_loss and config.rerank_weight == "auto"),
            "rerank_weight=auto: its pilot would compare the doubly-robust losses of different a, which "
            "objective_metric=%s cannot; choose a by a ranking metric or set it" % CLICK_LOSS_OBJECTIVE,
        )
        #: the generator of :meth:`click_loss`'s pseudo clicks while it runs (None: training's)
        self._click_loss_generator: Optional[torch.Generator] = None

    @property
    def _in_click_loss(self) -> bool:
        """Whether :meth:`click_loss` is running (a validation's loss, not a train step)."""
        return self._click_loss_generator is not None

    # -- phase 2 (phase 1, the simulator: SimulatorLifecycle): the doubly-robust ranker update
    def pseudo_clicks(self, batch: Batch) -> Tuple[torch.Tensor, torch.Tensor]:
        """Pseudo clicks on the observed list [B, N] and on ``sample_num``
        random re-rankings, in observed-list slots [B, S, N] (S = 0 when the
        re-ranked term has weight 0: nothing to compute).  With
        ``imputation=expected`` both are expectations, the same for every
        re-ranking (an expanded view).  Inside :meth:`click_loss` they are
        drawn from its own generator, by the simulator itself, and not cached."""
        validating = self._in_click_loss
        generator = self._click_loss_generator if validating else self.generator
        if self.hparams.imputation == "expected":
            observed, randomized = (
                expected_pseudo_clicks(self.simulator, batch.features, batch.mask, self.hparams.imputation_samples,
                                       generator)
                if validating else self.pseudo_click_cache.lookup(batch.features, batch.mask)
            )
            return observed, randomized.unsqueeze(1).expand(-1, self.hparams.sample_num, -1)
        sample_num = self.hparams.sample_num if self.rerank_weight else 0
        permutations = random_permutations(batch.mask, sample_num, generator)
        identity = torch.arange(batch.mask.shape[1], device=self.device).expand(batch.batch_size, 1, -1)
        orders = torch.cat([identity, permutations], dim=1)
        with torch.no_grad():
            sampler = self.simulator if validating else self.sampler
            clicks = sampler.sample_clicks(batch.features, batch.mask, orders, generator)
        return clicks[:, 0], to_document_order(clicks[:, 1:], permutations)

    def click_loss(self, batch: Batch) -> torch.Tensor:
        """The whole loss the train step minimises (the host's with Eq. dr_loss as its ranking loss: for MULTR,
        DLA's examination loss + ``ranker_loss_weight`` x the doubly-robust loss, + the examination ranker's DLA
        loss under ``propensity_ranker=dla``; the host's own losses when the simulator is not used), on the
        batch's clicks.  The pseudo clicks come from a generator seeded afresh at each call
        (:data:`CLICK_LOSS_STREAM`), so every validation draws the same ones for the same lists and the training
        generator and the pseudo-click cache are left as they were.  The simulator is prepared first when it is
        not yet (Algorithm 1's first phase, with gradients)."""
        if not self._simulator_ready:
            with torch.enable_grad():
                self.prepare_simulator()
        seed = np.random.SeedSequence([self.hparams.seed or 0, CLICK_LOSS_STREAM]).generate_state(1)[0]
        self._click_loss_generator = torch.Generator(device=self.device).manual_seed(int(seed))
        try:
            return super().click_loss(batch)
        finally:
            self._click_loss_generator = None

    def select_rerank_weight(self, valid_set=None, batch_size: Optional[int] = None) -> float:
        """Choose a ("auto") by the validation pilot; sets and returns it, and writes it, with how it was
        chosen, into the run's ledger (decision ``rerank_weight``, :func:`.pilot.record_choice`).

        Args:
            valid_set: the validation split (ULTRA ``DataSet``, padded to
                ``max_candidate_num``); None: read main.py's ``--valid_data_prefix``.
                Without either (outside main.py), or with fewer than
                ``pilot_min_queries`` queries, keeps ``rerank_weight_fallback``.
            batch_size: lists per pilot update; None: main.py's ``--batch_size``.
        """
        config = self.hparams
        candidates = config.rerank_candidates()
        fallback = config.resolve_rerank_weight(config.rerank_weight_fallback, "rerank_weight_fallback")
        args = runtime.main_args()
        if valid_set is None and len(candidates) > 1:
            valid_set = read_validation_set(self.exp_settings) if args is not None else None
        if len(candidates) > 1 and not self._simulator_ready:  # Algorithm 1: simulator first, once
            self.prepare_simulator()
        scores = None
        if len(candidates) == 1:
            chosen, by = candidates[0], "only_candidate"
        elif self.simulator_fallback:
            chosen, by = 0.0, "simulator_not_used"
            LOGGER.warning("rerank_weight=auto: the user simulator is not used (%s's losses); a = 0 without a pilot",
                           self.host_name())
        elif valid_set is None:
            chosen, by = fallback, "no_validation_split"
            LOGGER.warning(
                "rerank_weight=auto: no validation split (not run by main.py and none passed to "
                "select_rerank_weight); using rerank_weight_fallback=%s, a = %.4f", config.rerank_weight_fallback, chosen,
            )
        elif len(valid_set.initial_list) < config.pilot_min_queries:
            chosen, by = fallback, "too_few_validation_queries"
            LOGGER.warning(
                "rerank_weight=auto: only %d validation queries (< pilot_min_queries=%d): too little evidence to "
                "choose; using rerank_weight_fallback=%s, a = %.4f",
                len(valid_set.initial_list), config.pilot_min_queries, config.rerank_weight_fallback, chosen,
            )
        else:
            chosen, scores = choose_by_validation(
                self, valid_set, candidates, self.hparams.rerank_pilot_steps,
                batch_size or (args.batch_size if args is not None else DEFAULT_BATCH_SIZE),
            )
            by = "pilot"
        record_choice("rerank_weight", chosen, by, valid_set, scores, candidates=list(candidates),
                      pilot_min_queries=config.pilot_min_queries)
        self.rerank_weight = chosen
        return chosen

    def train(self, input_feed):
        if self.rerank_weight is None:  # "auto": chosen before the first update
            self.select_rerank_weight()
        if not self._simulator_ready:  # Algorithm 1: simulator first, once (before the first update's clock)
            self.prepare_simulator()
        return super().train(input_feed)

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        if not self._simulator_ready:  # Algorithm 1: simulator first, once
            self.prepare_simulator()
        loss, parts = super().training_loss(batch)
        parts["clicks_per_list"] = float(batch.labels.sum(-1).mean())
        return loss, parts

    def ranking_loss(
        self, batch: Batch, scores: torch.Tensor, weights: torch.Tensor
    ) -> Tuple[torch.Tensor, Dict[str, float]]:
        """The doubly-robust ranking loss of ``self.dr_form``; the host's own when the simulator is not used."""
        if self.simulator_fallback:
            return super().ranking_loss(batch, scores, weights)
        observed, randomized = self.pseudo_clicks(batch)
        parts = {"pseudo_clicks_per_list": float(observed.sum(-1).mean())}
        if self.dr_form == AUTHORS_CODE:
            return losses.authors_code_dr_loss(scores, batch.mask, batch.labels, observed, randomized, weights), parts
        loss, unguarded = losses.dr_loss_and_weights(
            scores, batch.mask, batch.labels, observed, randomized, weights,
            self.hparams.variant, self.rerank_weight, self.hparams.dr_weight_guard, self.dr_form,
            self.hparams.dr_normalization,
        )
        return loss, dict(parts, negative_weight_share=losses.negative_weight_share(unguarded, batch.mask))


class MULTR(DoublyRobustMixin, DLA):
    """DLA + context-aware user simulator + doubly-robust ranking loss."""

    config_class = MULTRConfig

    def __init__(self, data_set, exp_settings: dict) -> None:
        super().__init__(data_set, exp_settings)
        #: the ranker DLA's examination loss divides clicks by (propensity_ranker=dla); None: MULTR's own
        self.examination_ranker: Optional[torch.nn.Module] = (
            copy.deepcopy(self.model) if self.hparams.propensity_ranker == "dla" else None
        )

    def set_training_mode(self, training: bool) -> None:
        super().set_training_mode(training)
        if self.examination_ranker is not None:
            self.examination_ranker.train(training)

    def parameter_groups(self) -> List[Tuple[List[torch.nn.Parameter], float]]:
        groups = super().parameter_groups()
        if self.examination_ranker is not None:
            groups.append((list(self.examination_ranker.parameters()), self.hparams.learning_rate))
        return groups

    def updates_examination(self) -> bool:
        """propensity_ranker=dla: True on every ``propensity_update_every``-th update (global steps 0, k, 2k, ...),
        and always inside :meth:`click_loss` (the whole loss, whatever the step) and when MULTR trains as DLA."""
        every = self.hparams.propensity_update_every
        return every == 1 or self._in_click_loss or self.simulator_fallback or self.global_step % every == 0

    def examination_relevance(
        self, batch: Batch, scores: torch.Tensor, weights: torch.Tensor
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """propensity_ranker=dla: the examination ranker's scores and DLA's ranking loss for it, so the
        propensity model and that ranker take DLA's updates exactly (the simulator never reaches them);
        otherwise, or when MULTR trains with DLA's losses anyway, DLA's own coupling."""
        if self.examination_ranker is None or self.simulator_fallback:
            return super().examination_relevance(batch, scores, weights)
        relevance = self.scores(batch, self.examination_ranker)
        loss = losses.dla_softmax_loss(relevance, batch.labels, weights, batch.mask)
        return relevance, self.hparams.ranker_loss_weight * loss
