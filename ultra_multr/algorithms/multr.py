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
   validation split (:mod:`.rerank_weight`).  ``variant=eib`` gives
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
* Batch reduction: by default DLA's (the batch's weighted mean of Delta,
  ``dr_normalization=batch_weight``), so that one learning rate is one step
  size for DLA and MULTR; the mean of Eq. dr_loss over the batch's queries
  with ``dr_normalization=none``.

The paper presents MULTR as a plug-in for any IPW method.  The plug-in is
:class:`DoublyRobustMixin` (simulator + pseudo clicks + doubly-robust loss);
:class:`MULTR` is that mixin on DLA, and
:class:`ultra_multr.algorithms.multr_ipw.MULTR_IPW` the same mixin on IPW with
given propensities.
"""
from __future__ import annotations

import copy
import functools
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import torch
import ultra

from ultra_multr import losses, tensorboard
from ultra_multr.compat import runtime
from ultra_multr.batch import Batch
from ultra_multr.click_models import ClickModel
from ultra_multr.config import require
from ultra_multr.feeds.arrays import click_model_fingerprint, data_fingerprint, query_arrays, session_subset
from ultra_multr.imputation import IMPUTATION_MODES, PseudoClickCache
from ultra_multr.progress import Progress
from ultra_multr.randomization import random_permutations, to_document_order
from ultra_multr.session_budget import LEDGER
from ultra_multr.simulator.controls import SIMULATOR_CONTROLS, TrueClickModelSimulator, shuffle_positions
from ultra_multr.simulator.trivial import PositionClickRates
from ultra_multr.simulator import (
    CELLS,
    ContextAwareUserSimulator,
    EarlyStopping,
    GraphedSampler,
    GraphedSimulatorUpdate,
    SimulatorConfig,
    check_compatible,
    click_log_likelihood,
    load_simulator,
    load_training_state,
    save_simulator,
    save_training_state,
    simulator_update,
)
from ultra_multr.algorithms.base import LOGGER, AlgorithmConfig, open_training_writer
from ultra_multr.algorithms.dla import DLA, DLAConfig
from ultra_multr.algorithms.pilot import DEFAULT_BATCH_SIZE, choose_by_validation, read_validation_set

SIMULATOR_OPTIMIZERS = ("adagrad", "adam")
SIMULATOR_GUARDS = ("position", "none")
CUDA_GRAPHS = ("auto", "on", "off")
#: SeedSequence spawn keys of the simulator's random streams (with the seed).
HELDOUT_SPLIT_STREAM, HELDOUT_FEED_STREAM = 1, 2
#: A progress line at least this often while the simulator trains.
LOG_SECONDS = 60.0
#: rerank_weight's value for :func:`ultra_multr.losses.randomized_document_weights`.
RANDOMIZED = "randomized"
#: rerank_weight's value for :func:`ultra_multr.losses.authors_code_dr_loss`.
AUTHORS_CODE = "authors_code"
#: propensity_ranker's values: which ranker DLA's examination loss divides clicks by.
PROPENSITY_RANKERS = ("dla", "multr")
#: validate_simulator's decisions that make MULTR train with its host's losses (under simulator_guard=position).
FALLBACK_DECISIONS = ("rejected", "not_validated")
#: What metadata keys a checkpoint must match to be of the same data.
FINGERPRINTS = ("data_fingerprint", "click_model_fingerprint")


@dataclass(frozen=True)
class DoublyRobustConfig(AlgorithmConfig):
    """Hyper-parameters of the doubly-robust plug-in (simulator + DR loss).

    Attributes:
        sample_num: randomised re-rankings per query (>= 0; paper's best: 8).
        variant: "dr" (MULTR) or "eib" (EIB-MULTR).
        simulator_steps: most simulator training batches (0: Rand-MULTR);
            training stops earlier when early stopping says so.
        simulator_batch_size: sessions per simulator batch (paper: 256).
        simulator_learning_rate: simulator step size (paper: 0.05).
        simulator_optimizer: "adam" or "adagrad" (paper).
        simulator_l2: lambda of the simulator loss.
        simulator_hidden_size: H (paper: 64).
        simulator_cell: "lstm" (paper) or "gru".
        simulator_input_mlp: hidden sizes of an input MLP (paper: none).
            Defaults: Adam 0.005 with an input MLP [128], which fit MQ2008's
            held-out clicks better than the paper's setting
            (settings/multr_paper.json has the paper's).
        simulator_position_size: decoder position-embedding size.
        teacher_forcing_ratio: share of observed (vs sampled) previous clicks
            fed to the decoder in training (paper: 1.0).
        simulator_checkpoint: where to save / load the simulator (empty:
            beside the ranker's checkpoint in main.py's --model_dir).
        simulator_heldout_fraction: with a fixed click log
            (ClickLogFeed's sessions_per_query > 0), the share of its
            logged sessions held out from the simulator (at least one) to
            measure its click log-likelihood; with fresh clicks, held-out
            sessions are new draws from another seed stream instead.
        simulator_heldout_batches: batches of held-out sessions that
            measure the simulator's click log-likelihood.
        simulator_eval_every: measure the held-out log-likelihood (and write
            the intermediate checkpoint) every this many steps.
        simulator_patience: stop after this many evaluations without a
            better held-out log-likelihood and keep the best state (0: no
            early stopping; the last state is kept, as in the paper).
        simulator_log_every: progress line every this many simulator steps
            (0: none by steps); also one at least every LOG_SECONDS seconds.
        simulator_min_heldout_sessions: early stopping chooses a state, and
            the guard judges the simulator, only on at least this many
            distinct held-out sessions; with fewer, early stopping is off
            (logged; the last state is kept, the paper's rule) and the
            simulator cannot be validated (under simulator_guard=position
            MULTR trains with its host's losses, logged).
        (``pilot_min_queries``, of AlgorithmConfig: ``rerank_weight=auto``
            chooses only from at least this many validation queries; with
            fewer, logged, it keeps ``rerank_weight_fallback``.)
        rerank_weight_fallback: the stated default of "auto" without enough
            evidence or without a validation split ("paper" or a number).
        simulator_guard: "position" (a trained simulator whose held-out click
            log-likelihood is below a position-only click-rate model fitted on
            its training sessions is rejected, and one measured on fewer than
            ``simulator_min_heldout_sessions`` distinct sessions is not
            validated; either way, loudly, MULTR trains with its host
            algorithm's own ranking and propensity losses: DLA's) or "none"
            (compared and logged only).
        dr_weight_guard: "rebalance" (default, needs imputation=expected:
            where a weight without a click would be < 0, it is 0 without a
            click and E_p[W] / p with one, p the simulator's click
            probability; :func:`ultra_multr.losses.rebalance_weights`),
            "clip" (weights clamped at >= 0; biased where it acts,
            docs/estimator_targets.md) or "none" (the paper's form, unbounded
            below).
        rerank_weight: the estimator.  The weight a of the re-ranked
            (imputed) term of Eq. dr_loss, W_d = (1 - a) [c^o_d + (c_d -
            c^o_d) w_d] + a mean_s c^s_d: "paper" (default: S / (S + 1),
            Eq. dr_loss as printed), a number in [0, 1], or "auto" (chosen
            from ``rerank_weight_grid`` by a pilot scored on the validation
            split, :mod:`ultra_multr.algorithms.pilot`).  Or
            "randomized" (``settings/multr_randomized.json``): W_d = mean_s
            c^s_d + (c_d - c^o_d) e_bar / e_k(d), whose expectation is
            proportional to the click probability under random orders when
            the simulator or the propensities are exact
            (:func:`ultra_multr.losses.randomized_document_weights`; variant
            "dr" only).  "paper" is the default because "randomized" rests
            almost wholly on the simulator's re-ranked clicks, and a
            simulator trained on one logging order per query lost to the
            paper's form in the headroom study (docs/estimator_targets.md).
            Or "authors_code": the combination of the authors' released code,
            four ULTRA softmax losses each normalised by its own mass
            (:mod:`ultra_multr.losses.authors_code`; variant "dr" and
            dr_weight_guard "none" only).
        dr_normalization: how the loss of "paper", a number, "auto" and
            "randomized" is reduced over the batch: "batch_weight" (default:
            divided by the batch's total weight, as DLA divides its loss by
            the batch's click mass) or "none" (the mean over queries of
            Eq. dr_loss as printed, ``settings/multr_paper.json``).
            "authors_code" has its own per-term normalisation.
        rerank_weight_grid: candidates of "auto" ("paper" or numbers).
        rerank_pilot_steps: ranker updates of each pilot run of "auto".
        imputation: "expected" (default: the pseudo clicks' expectations,
            estimated once per training list after the simulator is frozen;
            see ultra_multr.imputation) or "sampled" (sampled every step,
            the paper's).
        imputation_samples: Monte-Carlo sessions per list and order type of
            "expected" (standard error <= 0.5 / sqrt(imputation_samples)).
        simulator_control: "none" (the trained simulator), or a control of
            the study (:mod:`ultra_multr.simulator.controls`):
            "true_click_model" (the training feed's click model stands in
            for the simulator: an upper bound) or "shuffled_positions" (the
            simulator trains on sessions in random order: a flat examination
            curve, a simulator that cannot debias).
        cuda_graphs: "auto" (on when the device is CUDA), "on" or "off":
            ``imputation=sampled`` replays each step's sampling as a CUDA
            graph (the same clicks), and the simulator's training replays
            whole updates (with Adam and teacher_forcing_ratio 1); see
            :mod:`ultra_multr.simulator.graphs`.
    """

    sample_num: int = 8
    variant: str = "dr"
    simulator_steps: int = 10000
    simulator_batch_size: int = 256
    simulator_learning_rate: float = 0.005
    simulator_optimizer: str = "adam"
    simulator_l2: float = 1e-5
    simulator_hidden_size: int = 64
    simulator_cell: str = "lstm"
    simulator_input_mlp: Tuple[int, ...] = (128,)
    simulator_position_size: int = 16
    teacher_forcing_ratio: float = 1.0
    simulator_checkpoint: str = ""
    simulator_heldout_fraction: float = 0.1
    simulator_heldout_batches: int = 4
    simulator_eval_every: int = 250
    simulator_patience: int = 5
    simulator_log_every: int = 500
    simulator_min_heldout_sessions: int = 300
    rerank_weight_fallback: str = "paper"
    simulator_guard: str = "position"
    dr_weight_guard: str = "rebalance"
    rerank_weight: str = "paper"
    dr_normalization: str = "batch_weight"
    rerank_weight_grid: Tuple[str, ...] = ("0", "0.5", "paper")
    rerank_pilot_steps: int = 200
    imputation: str = "expected"
    imputation_samples: int = 256
    simulator_control: str = "none"
    cuda_graphs: str = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.sample_num >= 0, "sample_num must be >= 0, got %d" % self.sample_num)
        require(self.variant in losses.VARIANTS, "variant must be one of %s, got %r" % (losses.VARIANTS, self.variant))
        require(self.simulator_steps >= 0, "simulator_steps must be >= 0, got %d" % self.simulator_steps)
        require(self.simulator_batch_size > 0, "simulator_batch_size must be > 0")
        require(
            self.simulator_cell in CELLS, "simulator_cell must be one of %s, got %r" % (CELLS, self.simulator_cell)
        )
        require(
            self.simulator_optimizer in SIMULATOR_OPTIMIZERS,
            "simulator_optimizer must be one of %s, got %r" % (SIMULATOR_OPTIMIZERS, self.simulator_optimizer),
        )
        require(
            0.0 <= self.teacher_forcing_ratio <= 1.0,
            "teacher_forcing_ratio must be in [0, 1], got %r" % self.teacher_forcing_ratio,
        )
        require(
            0.0 < self.simulator_heldout_fraction < 1.0,
            "simulator_heldout_fraction must be in (0, 1), got %r" % self.simulator_heldout_fraction,
        )
        require(self.simulator_heldout_batches > 0, "simulator_heldout_batches must be > 0")
        require(self.simulator_eval_every > 0, "simulator_eval_every must be > 0, got %d" % self.simulator_eval_every)
        require(self.simulator_patience >= 0, "simulator_patience must be >= 0, got %d" % self.simulator_patience)
        require(self.simulator_min_heldout_sessions >= 0, "simulator_min_heldout_sessions must be >= 0")
        require(
            not (self.tune and self.rerank_weight == "auto"),
            "tune=%s and rerank_weight=auto are two validation pilots, more tuning than the baselines' one: "
            "give MULTR the baselines' tune pilot with a fixed rerank_weight, or rerank_weight=auto without tune"
            % self.tune,
        )
        require(
            self.dr_normalization in losses.NORMALIZATIONS,
            "dr_normalization must be one of %s, got %r" % (losses.NORMALIZATIONS, self.dr_normalization),
        )
        self.resolve_rerank_weight(self.rerank_weight_fallback, "rerank_weight_fallback", needs_sample_num=False)
        require(
            self.simulator_guard in SIMULATOR_GUARDS,
            "simulator_guard must be one of %s, got %r" % (SIMULATOR_GUARDS, self.simulator_guard),
        )
        require(
            self.imputation in IMPUTATION_MODES,
            "imputation must be one of %s, got %r" % (IMPUTATION_MODES, self.imputation),
        )
        require(self.imputation_samples >= 1, "imputation_samples must be >= 1, got %d" % self.imputation_samples)
        require(
            self.simulator_control in SIMULATOR_CONTROLS,
            "simulator_control must be one of %s, got %r" % (SIMULATOR_CONTROLS, self.simulator_control),
        )
        require(
            self.cuda_graphs in CUDA_GRAPHS, "cuda_graphs must be one of %s, got %r" % (CUDA_GRAPHS, self.cuda_graphs)
        )
        object.__setattr__(self, "simulator_input_mlp", tuple(self.simulator_input_mlp))
        require(
            self.dr_weight_guard in losses.WEIGHT_GUARDS,
            "dr_weight_guard must be one of %s, got %r" % (losses.WEIGHT_GUARDS, self.dr_weight_guard),
        )
        require(
            self.dr_weight_guard != "rebalance" or self.imputation == "expected",
            "dr_weight_guard=rebalance moves weight by the simulator's click probabilities: it needs "
            "imputation=expected, got imputation=%s (with sampled pseudo clicks use dr_weight_guard=clip or none)"
            % self.imputation,
        )
        object.__setattr__(self, "rerank_weight_grid", tuple(self.rerank_weight_grid))
        require(self.rerank_pilot_steps > 0, "rerank_pilot_steps must be > 0, got %d" % self.rerank_pilot_steps)
        if self.rerank_weight == RANDOMIZED:
            require(
                self.variant == "dr",
                'rerank_weight=randomized corrects with propensities: it needs variant=dr, got variant=%s '
                '(EIB-MULTR: rerank_weight=auto, paper or a number)' % self.variant,
            )
            require(self.sample_num > 0, "rerank_weight=randomized needs re-ranked lists, but sample_num=0")
        elif self.rerank_weight == AUTHORS_CODE:
            require(
                self.variant == "dr",
                "rerank_weight=authors_code is the authors' doubly-robust loss: it needs variant=dr, got variant=%s"
                % self.variant,
            )
            require(
                self.dr_weight_guard == "none",
                "rerank_weight=authors_code has no weight guard in the authors' code: set dr_weight_guard=none "
                "(got %s)" % self.dr_weight_guard,
            )
        elif self.rerank_weight != "auto":
            self.resolve_rerank_weight(self.rerank_weight, "rerank_weight")
        require(len(self.rerank_weight_grid) > 0, "rerank_weight_grid must not be empty")
        for value in self.rerank_weight_grid:
            self.resolve_rerank_weight(value, "rerank_weight_grid", needs_sample_num=False)

    def resolve_rerank_weight(self, value: str, name: str, needs_sample_num: bool = True) -> float:
        """a for "paper" or a number (a > 0 refused when sample_num = 0, unless told otherwise)."""
        if value == "paper":
            return losses.paper_rerank_weight(self.sample_num)
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(
                '%s must be "randomized", "authors_code", "auto", "paper" or a number in [0, 1], got %r' % (name, value)
            ) from None
        require(0.0 <= weight <= 1.0, "%s must be in [0, 1], got %r" % (name, value))
        require(
            weight == 0.0 or self.sample_num > 0 or not needs_sample_num,
            "%s=%r needs re-ranked lists, but sample_num=0" % (name, value),
        )
        return weight

    def rerank_candidates(self) -> Tuple[float, ...]:
        """The distinct weights "auto" chooses among, in grid order (only 0 when sample_num = 0)."""
        if self.sample_num == 0:
            return (0.0,)
        weights = [self.resolve_rerank_weight(v, "rerank_weight_grid") for v in self.rerank_weight_grid]
        return tuple(dict.fromkeys(weights))


@dataclass(frozen=True)
class MULTRConfig(DLAConfig, DoublyRobustConfig):
    """MULTR's hyper-parameters: DLA's plus :class:`DoublyRobustConfig`'s, and:

    Attributes:
        propensity_ranker: the ranker whose relevance DLA's examination loss
            divides the clicks by.  "dla" (default): a second ranker, from the
            same initial state, trained by DLA's own ranking loss on the real
            clicks, so MULTR's propensities are exactly DLA's on the same
            batches.  "multr": MULTR's own ranker (DLA's dual coupling, the
            paper's and the authors' code), through which the simulator's bias
            moves the propensities (studies/propensity_drift).
    """

    propensity_ranker: str = "dla"

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            self.propensity_ranker in PROPENSITY_RANKERS,
            "propensity_ranker must be one of %s, got %r" % (PROPENSITY_RANKERS, self.propensity_ranker),
        )


class DoublyRobustMixin:
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
        self.simulator_config = SimulatorConfig(
            feature_size=self.feature_size,
            list_size=self.rank_list_size,
            hidden_size=config.simulator_hidden_size,
            cell=config.simulator_cell,
            input_mlp=config.simulator_input_mlp,
            position_size=config.simulator_position_size,
        )
        self.simulator = ContextAwareUserSimulator(self.simulator_config).to(self.device)
        self.simulator_checkpoint = self._checkpoint_path()
        self.generator = torch.Generator(device=self.device)
        if config.seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(config.seed)
        self._simulator_ready = False
        #: True when the simulator is not used and MULTR trains with its host's losses (:meth:`validate_simulator`)
        self.simulator_fallback = False
        require(
            config.cuda_graphs != "on" or self.device.type == "cuda",
            "cuda_graphs=on needs a CUDA device, but the device is %s" % self.device,
        )
        #: what samples pseudo clicks: the simulator, or its CUDA-graph replay (set when it is frozen).
        self.sampler: Union[ContextAwareUserSimulator, GraphedSampler] = self.simulator
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

    # -- phase 1: the user simulator -------------------------------------
    def _checkpoint_path(self) -> Optional[str]:
        if self.hparams.simulator_checkpoint:
            return self.hparams.simulator_checkpoint
        args = runtime.main_args()
        if args is None:
            return None
        name = self.exp_settings.get("learning_algorithm", type(self).__name__)
        return os.path.join(args.model_dir, "%s.simulator.ckpt" % name)

    def _checkpoint_metadata(self) -> Dict:
        """What a saved simulator (or training state) must match to be reused:
        the training settings and the fingerprints of the training data and
        of the click model's JSON content."""
        config = self.hparams
        return {
            "simulator_steps": config.simulator_steps,
            "simulator_batch_size": config.simulator_batch_size,
            "simulator_learning_rate": config.simulator_learning_rate,
            "simulator_optimizer": config.simulator_optimizer,
            "simulator_l2": config.simulator_l2,
            "teacher_forcing_ratio": config.teacher_forcing_ratio,
            "simulator_heldout_fraction": config.simulator_heldout_fraction,
            "simulator_heldout_batches": config.simulator_heldout_batches,
            "simulator_eval_every": config.simulator_eval_every,
            "simulator_patience": config.simulator_patience,
            "simulator_min_heldout_sessions": config.simulator_min_heldout_sessions,
            "simulator_control": config.simulator_control,
            "max_gradient_norm": config.max_gradient_norm,
            "train_input_feed": self.exp_settings.get("train_input_feed"),
            "train_input_hparams": self.exp_settings.get("train_input_hparams"),
            "seed": config.seed,
            "simulator_config": asdict(self.simulator_config),
            "data_fingerprint": data_fingerprint(self._train_set),
            "click_model_fingerprint": click_model_fingerprint(self._click_feed()),
        }

    def prepare_simulator(self) -> None:
        """Load, or train and save, the simulator; then freeze it.

        A checkpoint is reused when its metadata equals
        :meth:`_checkpoint_metadata`.  Otherwise a new simulator is trained
        (the reason is logged), except that a checkpoint pinned with
        ``simulator_checkpoint`` whose data or click-model fingerprint differs
        is refused.

        Raises:
            ValueError: the pinned checkpoint learned from other data or
                another click model.
        """
        started = time.perf_counter()
        steps = self.hparams.simulator_steps
        path = self.simulator_checkpoint
        wanted = self._checkpoint_metadata() if steps > 0 else {}
        fit: Dict = {}
        if self.hparams.simulator_control == "true_click_model":
            self.simulator = self._true_click_model_simulator()
            LOGGER.info("user simulator: simulator_control=true_click_model, the training feed's click model (not trained)")
            steps = 0
        elif steps > 0 and path and os.path.exists(path):
            loaded, metadata = load_simulator(path, self.device)
            check_compatible(loaded.config, self.feature_size, self.rank_list_size, path)
            differ = [k for k, v in wanted.items() if metadata.get(k) != v]
            if not differ:
                LOGGER.info("user simulator: reusing %s (held-out LL %s)", path, metadata.get("heldout_log_likelihood"))
                self.simulator = loaded.to(self.device)
                steps = 0
                fit = metadata
            elif self.hparams.simulator_checkpoint and set(differ) & set(FINGERPRINTS):
                raise ValueError(
                    "simulator_checkpoint=%s learned from other data or another click model (%s differ or "
                    "are missing); "
                    "remove it or point simulator_checkpoint elsewhere to train a new one"
                    % (path, ", ".join(sorted(set(differ) & set(FINGERPRINTS))))
                )
            else:
                LOGGER.info("user simulator: %s differs in %s; training a new one", path, ", ".join(differ))
        if steps > 0:
            fit = self.train_simulator(steps, wanted, path + ".partial" if path else None)
            if path:
                save_simulator(path, self.simulator, fit)
                LOGGER.info("user simulator: saved %s (%.1f s)", path, time.perf_counter() - started)
                if os.path.exists(path + ".partial"):
                    os.remove(path + ".partial")
        elif self.hparams.simulator_steps == 0 and self.hparams.simulator_control == "none":
            LOGGER.info("user simulator: simulator_steps=0, keeping the random initialisation (Rand-MULTR)")
        self.simulator.eval()
        for parameter in self.simulator.parameters():
            parameter.requires_grad_(False)
        self._simulator_ready = True
        if fit:
            self.validate_simulator(fit)
        if self.simulator_fallback:
            return
        self.sampler = self.simulator
        if (
            self.device.type == "cuda" and self.hparams.cuda_graphs != "off" and self.hparams.imputation == "sampled"
            and isinstance(self.simulator, ContextAwareUserSimulator)
        ):
            self.sampler = GraphedSampler(self.simulator)
        if self.hparams.imputation == "expected":
            self.pseudo_click_cache = PseudoClickCache(self.simulator, self.hparams.imputation_samples, self.generator)
            self.pseudo_click_cache.add_query_arrays(query_arrays(self._train_set, self.simulator.config.list_size))

    def _true_click_model_simulator(self) -> TrueClickModelSimulator:
        """The training feed's click model on the training split's labels (simulator_control=true_click_model).

        Raises:
            ValueError: the training feed has no click model (logged clicks).
        """
        click_model = getattr(getattr(self._click_feed(), "click_model", None), "model", None)
        if not isinstance(click_model, ClickModel):
            raise ValueError(
                "simulator_control=true_click_model needs a train_input_feed that simulates clicks with a "
                "label-based click model (ultra_multr.feeds.ClickSimulationFeed or ClickLogFeed with a PBM, "
                "cascade, UBM or DCM click_model_json), got %s with %s"
                % (self.exp_settings["train_input_feed"], self.exp_settings.get("train_input_hparams", ""))
            )
        arrays = query_arrays(self._train_set, self.rank_list_size)
        rows = arrays.doc_ids[arrays.mask]
        return TrueClickModelSimulator(
            click_model, arrays.features[rows], arrays.labels[arrays.mask], self.rank_list_size
        ).to(self.device)

    def heldout_sessions(self, sessions_per_query: int) -> np.ndarray:
        """[Q, K] bool: the logged sessions held out from the simulator, a
        seeded (seed 0 when none is set) ``max(1, round(fraction * Q * K))``
        of the Q * K (query, session) pairs of a fixed click log.

        Raises:
            ValueError: no session would be left to train on.
        """
        n_queries = len(self._train_set.initial_list)
        n_sessions = n_queries * sessions_per_query
        fraction = self.hparams.simulator_heldout_fraction
        n_heldout = max(1, int(round(fraction * n_sessions)))
        if n_sessions - n_heldout < 1:
            raise ValueError(
                "simulator_heldout_fraction=%g of a click log of %d sessions (%d queries x sessions_per_query=%d) "
                "leaves no session to train the user simulator on; it needs at least 2 sessions"
                % (fraction, n_sessions, n_queries, sessions_per_query)
            )
        seed = self.hparams.seed or 0
        order = np.random.default_rng(np.random.SeedSequence([seed, HELDOUT_SPLIT_STREAM])).permutation(n_sessions)
        heldout = np.zeros(n_sessions, dtype=bool)
        heldout[order[:n_heldout]] = True
        return heldout.reshape(n_queries, sessions_per_query)

    def simulator_data(self, feed) -> Tuple[Any, Any]:
        """(training, held-out) data sets of the simulator, for a new instance
        ``feed`` of main.py's training feed.

        With a fixed click log (the feed's ``logged_sessions_per_list`` K > 0:
        a :class:`~ultra_multr.feeds.ClickLogFeed` with ``sessions_per_query``
        K, or the logged sessions of a
        :class:`~ultra_multr.feeds.ultre.UltreSessionFeed`, K = 1),
        :meth:`heldout_sessions` are held out: two :func:`~ultra_multr.feeds.arrays.session_subset` views
        with disjoint logged sessions.  With fresh clicks every session is a
        new draw: both are the training set, and the held-out sessions come
        from a feed with another seed stream (:meth:`_click_feed`).
        """
        sessions_per_query = getattr(feed, "logged_sessions_per_list", 0)
        if not sessions_per_query:
            return self._train_set, self._train_set
        heldout = self.heldout_sessions(sessions_per_query)
        return session_subset(self._train_set, ~heldout), session_subset(self._train_set, heldout)

    def _click_feed(self, stream: int = 0, batch_size: Optional[int] = None):
        """A new instance of main.py's training feed (class and hparams) of
        ``batch_size`` lists (default: simulator batches).  ``stream`` != 0
        reseeds the feed's batch generator (feeds with a torch ``generator``,
        like ours) into another stream, leaving its click-log seed alone."""
        feed_class = ultra.utils.find_class(self.exp_settings["train_input_feed"])
        feed = feed_class(
            self, batch_size or self.hparams.simulator_batch_size, self.exp_settings.get("train_input_hparams", "")
        )
        generator = getattr(feed, "generator", None)
        if stream and isinstance(generator, torch.Generator):
            generator.manual_seed(int(np.random.SeedSequence([generator.initial_seed(), stream]).generate_state(1)[0]))
        return feed

    def _session_batch(self, feed, data_set) -> Batch:
        """A batch of sessions drawn as main.py draws ranker batches
        (``check_validation=True``: lists without a click are redrawn)."""
        input_feed, _ = feed.get_batch(data_set, check_validation=True)
        batch = self.batch(input_feed, self.rank_list_size)
        if self.hparams.simulator_control == "shuffled_positions":
            batch = shuffle_positions(batch, self.generator)
        if not bool(((batch.labels == 0) | (batch.labels == 1)).all()):
            raise ValueError(
                "train_input_feed %s gives labels other than 0/1 (max %g): the user simulator "
                "learns from clicks; use a click feed, not relevance labels"
                % (self.exp_settings["train_input_feed"], float(batch.labels.max()))
            )
        return batch

    def simulator_log_likelihood(self, batches: List[Batch]) -> Tuple[float, List[float]]:
        """Mean held-out log-likelihood per session and per-position mean."""
        self.simulator.eval()
        total, sessions = 0.0, 0
        per_position = torch.zeros(self.rank_list_size, device=self.device)
        shown = torch.zeros(self.rank_list_size, device=self.device)
        with torch.no_grad():
            for batch in batches:
                logits = self.simulator.click_logits(batch.features, batch.mask, batch.labels)
                log_lik = click_log_likelihood(logits, batch.labels, batch.mask)
                total += float(log_lik.sum())
                sessions += batch.batch_size
                per_position += log_lik.sum(0)
                shown += batch.mask.sum(0)
        return total / max(sessions, 1), (per_position / shown.clamp(min=1)).tolist()

    @staticmethod
    def _feed_state(feed) -> Dict:
        """The random state of a feed (ours: its generator, batch count and a
        dynamically changing eta); ULTRA's own feeds draw from Python's global
        random module, which is not saved."""
        state: Dict = {"global_batch_count": getattr(feed, "global_batch_count", 0)}
        if isinstance(getattr(feed, "generator", None), torch.Generator):
            state["generator"] = feed.generator.get_state()
        if getattr(getattr(feed, "hparams", None), "dynamic_bias_eta_change", 0):
            state["eta"] = feed.click_model.eta
        return state

    @staticmethod
    def _restore_feed_state(feed, state: Dict) -> None:
        feed.global_batch_count = state["global_batch_count"]
        if "generator" in state:
            feed.generator.set_state(state["generator"])
        if "eta" in state:
            feed.click_model.setExamProb(state["eta"])

    def train_simulator(self, steps: int, metadata: Dict, partial_path: Optional[str] = None) -> Dict:
        """Algorithm 1, lines 2-5, with early stopping; returns the checkpoint
        metadata (``metadata`` plus the held-out results).

        Trains for at most ``steps`` batches; every ``simulator_eval_every``
        steps measures the held-out log-likelihood, keeps the best state and
        writes the training state to ``partial_path`` (when given), from which
        a killed run resumes and ends as an uninterrupted one would.
        """
        config = self.hparams
        open_training_writer()  # the simulator's curves go beside the ranker's
        feed, heldout_feed = self._click_feed(), self._click_feed(HELDOUT_FEED_STREAM)
        train_set, heldout_set = self.simulator_data(feed)
        with LEDGER.in_phase("simulator_heldout"):
            heldout = [self._session_batch(heldout_feed, heldout_set) for _ in range(config.simulator_heldout_batches)]
        parameters = self.simulator.parameters()
        # CUDA graphs replay whole updates where nothing is drawn inside one and the optimizer can be captured.
        graphed = (
            self.device.type == "cuda"
            and config.cuda_graphs != "off"
            and config.simulator_optimizer == "adam"
            and config.teacher_forcing_ratio == 1.0
        )
        if config.simulator_optimizer == "adam":
            optimizer = torch.optim.Adam(parameters, lr=config.simulator_learning_rate, capturable=graphed)
        else:
            optimizer = torch.optim.Adagrad(parameters, lr=config.simulator_learning_rate)
        n_heldout = self.heldout_session_count(train_set, heldout_set, feed)
        patience = config.simulator_patience
        if patience and n_heldout < config.simulator_min_heldout_sessions:
            LOGGER.warning(
                "user simulator: only %d distinct held-out sessions (< simulator_min_heldout_sessions=%d): too little "
                "evidence to choose a state; early stopping is off and the last state after %d steps is kept "
                "(the paper's rule)", n_heldout, config.simulator_min_heldout_sessions, steps,
            )
            patience = 0
        stopping = EarlyStopping(patience)
        trivial = PositionClickRates(self.rank_list_size)
        best_state: Optional[Dict] = None
        step = 0
        if partial_path and os.path.exists(partial_path):
            saved = load_training_state(partial_path)
            if saved.get("metadata") == metadata:
                self.simulator.load_state_dict(saved["simulator"])
                optimizer.load_state_dict(saved["optimizer"])
                self.generator.set_state(saved["generator"])
                self._restore_feed_state(feed, saved["feed"])
                stopping = EarlyStopping(**saved["early_stopping"])
                trivial.clicks, trivial.shown = saved["trivial"]
                best_state, step = saved["best_state"], saved["step"]
                LOGGER.info("user simulator: resuming from %s at step %d", partial_path, step)
            else:
                LOGGER.info("user simulator: %s was written with other settings; starting over", partial_path)
        LOGGER.info(
            "user simulator: training for at most %d steps of %d sessions of %d queries, held-out sessions of %d%s",
            steps, config.simulator_batch_size, len(train_set.initial_list), len(heldout_set.initial_list),
            "" if train_set is heldout_set else " (a share of the click log held out)",
        )
        if graphed:
            update = GraphedSimulatorUpdate(self.simulator, optimizer, config.simulator_l2, config.max_gradient_norm)
        else:
            update = functools.partial(
                simulator_update,
                self.simulator,
                optimizer,
                l2_weight=config.simulator_l2,
                max_gradient_norm=config.max_gradient_norm,
                teacher_forcing_ratio=config.teacher_forcing_ratio,
                generator=self.generator,
            )
        last_log = time.monotonic()
        meter = Progress(steps, "user simulator", "steps", initial=step, log_lines=False)  # rate and time left
        while step < steps and not stopping.stop:
            step += 1
            with LEDGER.in_phase("simulator_train"):
                batch = self._session_batch(feed, train_set)
            loss = update(batch.features, batch.mask, batch.labels, step=step)
            meter.set(step)
            trivial.add(batch.labels, batch.mask)
            if step % config.simulator_eval_every == 0 or step == steps:
                heldout_ll, _ = self.simulator_log_likelihood(heldout)
                tensorboard.scalars("simulator", {"loss": loss, "heldout_log_likelihood": heldout_ll}, step)
                if stopping.update(heldout_ll, step) and patience > 0:
                    best_state = copy.deepcopy(self.simulator.state_dict())
                LOGGER.info(
                    "user simulator: step %d/%d loss %.4f held-out click log-likelihood %.4f per session "
                    "(best %.4f at step %d, %s), %s",
                    step, steps, loss, heldout_ll, stopping.best, stopping.best_step,
                    "%d/%d evaluations without improvement" % (stopping.bad_evals, stopping.patience)
                    if stopping.patience else "no early stopping", meter.text(),
                )
                if partial_path:
                    save_training_state(partial_path, {
                        "metadata": metadata,
                        "step": step,
                        "simulator": self.simulator.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "generator": self.generator.get_state(),
                        "feed": self._feed_state(feed),
                        "early_stopping": asdict(stopping),
                        "best_state": best_state,
                        "trivial": (trivial.clicks, trivial.shown),
                    })
                last_log = time.monotonic()
            elif (config.simulator_log_every and step % config.simulator_log_every == 0) or (
                time.monotonic() - last_log >= LOG_SECONDS
            ):
                LOGGER.info("user simulator: step %d/%d loss %.4f, %s", step, steps, loss, meter.text())
                last_log = time.monotonic()
        meter.close()
        if best_state is not None:
            self.simulator.load_state_dict(best_state)
            LOGGER.info(
                "user simulator: ended at step %d; keeping the best held-out state (step %d)", step, stopping.best_step
            )
        heldout_ll, per_position = self.simulator_log_likelihood(heldout)
        return dict(
            metadata,
            steps_run=step,
            best_step=stopping.best_step if best_state is not None else step,
            heldout_log_likelihood=heldout_ll,
            heldout_log_likelihood_per_position=per_position,
            heldout_sessions=n_heldout,
            trivial_log_likelihood=trivial.log_likelihood((b.labels, b.mask) for b in heldout),
        )

    def heldout_session_count(self, train_set, heldout_set, feed) -> int:
        """Distinct sessions the simulator is measured on: a click log's held-out
        sessions (the feed's ``distinct_sessions`` of the view where a list is a
        bucket of sessions, as in :class:`~ultra_multr.feeds.baidu.BaiduSessionFeed`),
        or (fresh clicks) the held-out batches' draws."""
        if heldout_set is train_set:
            return self.hparams.simulator_heldout_batches * self.hparams.simulator_batch_size
        if hasattr(feed, "distinct_sessions"):
            return int(feed.distinct_sessions(heldout_set))
        return int(np.asarray(heldout_set.subset_sessions).sum())

    def host_name(self) -> str:
        """The IPW algorithm this mixin sits on (``DLA`` for :class:`MULTR`)."""
        return next(
            cls.__name__ for cls in type(self).__mro__[1:]
            if not issubclass(cls, DoublyRobustMixin) and hasattr(cls, "config_class")
        )

    def validate_simulator(self, fit: Dict) -> str:
        """Judge a trained simulator on its held-out sessions; record and return the decision.

        "accepted": its held-out click log-likelihood is at least that of the
        position-only click model (:mod:`ultra_multr.simulator.trivial`);
        "rejected": below it; "not_validated": measured on fewer than
        ``simulator_min_heldout_sessions`` distinct held-out sessions, too few
        to tell; "not_compared": a checkpoint without the comparison.  Under
        ``simulator_guard=position`` a rejected or unvalidated simulator is
        never used: MULTR trains with its host algorithm's own ranking and
        propensity losses (warned).  The decision, the sessions it rests on
        and the log-likelihoods go to the run's ledger
        (:meth:`ultra_multr.session_budget.SessionLedger.record_decision`).
        """
        config = self.hparams
        simulator_ll, trivial_ll = fit.get("heldout_log_likelihood"), fit.get("trivial_log_likelihood")
        sessions = fit.get("heldout_sessions")
        if simulator_ll is None or trivial_ll is None:
            decision = "not_compared"
        elif sessions is not None and sessions < config.simulator_min_heldout_sessions:
            decision = "not_validated"
        else:
            decision = "accepted" if simulator_ll >= trivial_ll else "rejected"
        self.simulator_fallback = decision in FALLBACK_DECISIONS and config.simulator_guard == "position"
        LEDGER.record_decision("user_simulator", {
            "decision": decision,
            "used": not self.simulator_fallback,
            "host_losses": self.simulator_fallback,
            "heldout_sessions": sessions,
            "min_heldout_sessions": config.simulator_min_heldout_sessions,
            "heldout_log_likelihood": simulator_ll,
            "position_only_log_likelihood": trivial_ll,
            "simulator_guard": config.simulator_guard,
        })
        if decision == "not_compared":
            LOGGER.info("user simulator: no position-only baseline in its metadata (an older checkpoint); not compared")
            return decision
        comparison = "held-out click log-likelihood %.4f per session on %d distinct held-out sessions, %s the " \
            "position-only click model's %.4f" % (
                simulator_ll, sessions, "above" if simulator_ll >= trivial_ll else "below", trivial_ll)
        if decision == "accepted":
            LOGGER.info("user simulator: %s", comparison)
        elif not self.simulator_fallback:
            LOGGER.info("user simulator: %s (%s; simulator_guard=none: used anyway)", comparison, decision)
        elif decision == "rejected":
            LOGGER.warning(
                "USER SIMULATOR REJECTED: its %s, so its pseudo clicks carry no usable information. MULTR trains "
                "with %s's own ranking and propensity losses instead (more simulator steps, held-out sessions or "
                "another simulator setting may help)", comparison, self.host_name(),
            )
        else:
            LOGGER.warning(
                "USER SIMULATOR NOT VALIDATED: its held-out click log-likelihood rests on only %d distinct held-out "
                "sessions (< simulator_min_heldout_sessions=%d), too few to tell it from a position-only click model "
                "(%.4f against %.4f). MULTR trains with %s's own ranking and propensity losses instead (a longer "
                "click log or a larger simulator_heldout_fraction gives more; simulator_guard=none uses it "
                "unvalidated)", sessions, config.simulator_min_heldout_sessions, simulator_ll, trivial_ll,
                self.host_name(),
            )
        return decision

    # -- phase 2: the doubly-robust ranker update ------------------------
    def pseudo_clicks(self, batch: Batch) -> Tuple[torch.Tensor, torch.Tensor]:
        """Pseudo clicks on the observed list [B, N] and on ``sample_num``
        random re-rankings, in observed-list slots [B, S, N] (S = 0 when the
        re-ranked term has weight 0: nothing to compute).  With
        ``imputation=expected`` both are expectations, the same for every
        re-ranking (an expanded view)."""
        if self.hparams.imputation == "expected":
            observed, randomized = self.pseudo_click_cache.lookup(batch.features, batch.mask)
            return observed, randomized.unsqueeze(1).expand(-1, self.hparams.sample_num, -1)
        sample_num = self.hparams.sample_num if self.rerank_weight else 0
        permutations = random_permutations(batch.mask, sample_num, self.generator)
        identity = torch.arange(batch.mask.shape[1], device=self.device).expand(batch.batch_size, 1, -1)
        orders = torch.cat([identity, permutations], dim=1)
        with torch.no_grad():
            clicks = self.sampler.sample_clicks(batch.features, batch.mask, orders, self.generator)
        return clicks[:, 0], to_document_order(clicks[:, 1:], permutations)

    def select_rerank_weight(self, valid_set=None, batch_size: Optional[int] = None) -> float:
        """Choose a ("auto") by the validation pilot; sets and returns it.

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
        if len(candidates) == 1:
            chosen = candidates[0]
        elif self.simulator_fallback:
            chosen = 0.0
            LOGGER.warning("rerank_weight=auto: the user simulator is not used (%s's losses); a = 0 without a pilot",
                           self.host_name())
        elif valid_set is None:
            chosen = fallback
            LOGGER.warning(
                "rerank_weight=auto: no validation split (not run by main.py and none passed to "
                "select_rerank_weight); using rerank_weight_fallback=%s, a = %.4f", config.rerank_weight_fallback, chosen,
            )
        elif len(valid_set.initial_list) < config.pilot_min_queries:
            chosen = fallback
            LOGGER.warning(
                "rerank_weight=auto: only %d validation queries (< pilot_min_queries=%d): too little evidence to "
                "choose; using rerank_weight_fallback=%s, a = %.4f",
                len(valid_set.initial_list), config.pilot_min_queries, config.rerank_weight_fallback, chosen,
            )
        else:
            chosen = choose_by_validation(
                self, valid_set, candidates, self.hparams.rerank_pilot_steps,
                batch_size or (args.batch_size if args is not None else DEFAULT_BATCH_SIZE),
            )
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

    def parameter_groups(self) -> List[Tuple[List[torch.nn.Parameter], float]]:
        groups = super().parameter_groups()
        if self.examination_ranker is not None:
            groups.append((list(self.examination_ranker.parameters()), self.hparams.learning_rate))
        return groups

    def examination_relevance(
        self, batch: Batch, scores: torch.Tensor, weights: torch.Tensor
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """propensity_ranker=dla: the examination ranker's scores and DLA's ranking loss for it, so the
        propensity model and that ranker take DLA's updates exactly (the simulator never reaches them);
        otherwise, or when MULTR trains with DLA's losses anyway, DLA's own coupling."""
        if self.examination_ranker is None or self.simulator_fallback:
            return super().examination_relevance(batch, scores, weights)
        self.examination_ranker.train()
        relevance = self.scores(batch, self.examination_ranker)
        loss = losses.dla_softmax_loss(relevance, batch.labels, weights, batch.mask)
        return relevance, self.hparams.ranker_loss_weight * loss
