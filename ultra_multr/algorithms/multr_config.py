"""MULTR's hyper-parameters: the doubly-robust plug-in's (:class:`DoublyRobustConfig`, on any IPW
algorithm's) and MULTR's own on DLA's (:class:`MULTRConfig`).  The simulator's network and training are
:class:`~ultra_multr.simulator.training_config.SimulatorTrainingConfig`'s, which the plug-in's include."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from ultra_multr import losses
from ultra_multr.config import require
from ultra_multr.imputation import IMPUTATION_MODES
from ultra_multr.simulator.controls import SIMULATOR_CONTROLS
from ultra_multr.simulator.training_config import SimulatorTrainingConfig
from ultra_multr.algorithms.base import AlgorithmConfig
from ultra_multr.algorithms.dla import DLAConfig

SIMULATOR_GUARDS = ("position", "none")
#: logger_guard's values (:mod:`ultra_multr.algorithms.logger_guard`).
LOGGER_GUARDS = ("none", "order_fit")
#: rerank_weight's value for :func:`ultra_multr.losses.randomized_document_weights`.
RANDOMIZED = "randomized"
#: rerank_weight's value for :func:`ultra_multr.losses.authors_code_dr_loss`.
AUTHORS_CODE = "authors_code"
#: propensity_ranker's values: which ranker DLA's examination loss divides clicks by.
PROPENSITY_RANKERS = ("dla", "multr")


@dataclass(frozen=True)
class DoublyRobustConfig(AlgorithmConfig, SimulatorTrainingConfig):
    """Hyper-parameters of the doubly-robust plug-in (simulator + DR loss): the
    simulator's network and training (:class:`SimulatorTrainingConfig`'s
    ``simulator_*`` names, read by MULTR's and the simulator report's one
    trainer) and:

    Attributes:
        sample_num: randomised re-rankings per query (>= 0; paper's best: 8).
        variant: "dr" (MULTR) or "eib" (EIB-MULTR).
        simulator_checkpoint: where to save / load the simulator (empty:
            beside the ranker's checkpoint in main.py's --model_dir).
        (``simulator_heldout_fraction`` applies to a fixed click log:
            ClickLogFeed's sessions_per_query > 0.)
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
        logger_guard: "order_fit" (default) or "none": before the simulator
            is trained, a small ranker is fitted to the logged order of most
            training queries on the learner's features
            (:func:`ultra_multr.logged_order.logged_order_fit`); when it
            orders fewer than ``logger_guard_threshold`` of the held-out
            queries' document pairs as the logger did (a logger that knew more
            than the features), or the split has fewer than
            ``logger_guard_min_queries`` queries to tell, the simulator is not
            trained and MULTR trains with its host's losses, loudly
            (:mod:`ultra_multr.algorithms.logger_guard`).  "none" trains the
            simulator on any log (the paper's MULTR:
            ``settings/multr_paper.json``, ``settings/multr_authors_code.json``).
        logger_guard_threshold: the agreement below which it fires (0.5-1).
        logger_guard_min_queries: training queries it needs to measure.
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
    """

    sample_num: int = 8
    variant: str = "dr"
    simulator_checkpoint: str = ""
    rerank_weight_fallback: str = "paper"
    simulator_guard: str = "position"
    logger_guard: str = "order_fit"
    logger_guard_threshold: float = 0.95
    logger_guard_min_queries: int = 50
    dr_weight_guard: str = "rebalance"
    rerank_weight: str = "paper"
    dr_normalization: str = "batch_weight"
    rerank_weight_grid: Tuple[str, ...] = ("0", "0.5", "paper")
    rerank_pilot_steps: int = 200
    imputation: str = "expected"
    imputation_samples: int = 256
    simulator_control: str = "none"

    def __post_init__(self) -> None:
        super().__post_init__()
        SimulatorTrainingConfig.__post_init__(self)  # AlgorithmConfig's does not call on
        require(self.sample_num >= 0, "sample_num must be >= 0, got %d" % self.sample_num)
        require(self.variant in losses.VARIANTS, "variant must be one of %s, got %r" % (losses.VARIANTS, self.variant))
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
        require(self.logger_guard in LOGGER_GUARDS,
                "logger_guard must be one of %s, got %r" % (LOGGER_GUARDS, self.logger_guard))
        require(0.5 <= self.logger_guard_threshold <= 1.0,
                "logger_guard_threshold must be in [0.5, 1], got %r" % self.logger_guard_threshold)
        require(self.logger_guard_min_queries >= 2,
                "logger_guard_min_queries must be >= 2, got %r" % self.logger_guard_min_queries)
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
        propensity_update_every: under ``propensity_ranker=dla``, train the
            examination ranker and DLA's propensity model on every k-th
            ranker update only (updates 0, k, 2k, ...; the propensities
            stay those of the last such update in between), which saves
            the examination ranker's forward and backward pass on the
            others.  1 (default): every update.  ``propensity_ranker=multr``
            has no examination ranker to save: it takes 1 only.  When the
            simulator is not used (MULTR trains as DLA) it has no effect.
    """

    propensity_ranker: str = "dla"
    propensity_update_every: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            self.propensity_ranker in PROPENSITY_RANKERS,
            "propensity_ranker must be one of %s, got %r" % (PROPENSITY_RANKERS, self.propensity_ranker),
        )
        require(self.propensity_update_every >= 1,
                "propensity_update_every must be >= 1, got %r" % self.propensity_update_every)
        require(
            self.propensity_update_every == 1 or self.propensity_ranker == "dla",
            "propensity_update_every=%d thins the updates of propensity_ranker=dla's examination ranker; "
            "propensity_ranker=%s has none (DLA's propensity model learns against MULTR's own ranker, which every "
            "update trains): set propensity_update_every=1 or propensity_ranker=dla"
            % (self.propensity_update_every, self.propensity_ranker),
        )
