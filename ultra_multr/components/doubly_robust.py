"""MULTR's doubly-robust ranking loss as a part any IPW algorithm can own: knobs, pseudo clicks, loss.

The paper presents MULTR as a plug-in for any IPW method.  The plug-in is
:class:`DoublyRobust`: given a frozen user simulator (from
:class:`~ultra_multr.components.simulator_phase.SimulatorPhase`, or any
:class:`~ultra_multr.simulator.UserSimulator` passed to :meth:`DoublyRobust.use`),
it turns a batch of the host's clicks and inverse propensity weights into
Eq. dr_loss (:class:`~ultra_multr.losses.dr.DoublyRobustLoss`): ``sample_num``
independent random re-rankings per query, pseudo clicks from the simulator on
the observed list and on every re-ranking, the observed list corrected with
the host's weights.  By default (``imputation=expected``) the pseudo clicks
are their expectations, estimated once per training list
(:mod:`ultra_multr.imputation`); ``imputation=sampled`` (the paper's) samples
them every step.  ``rerank_weight=auto`` chooses a before the first update
by a pilot scored on the validation split (:mod:`.pilot`).

Hosts: :class:`ultra_multr.MULTR` (DLA) and :class:`ultra_multr.MULTR_IPW`
(IPW with given propensities).  Shapes: B queries, N slots of the observed
list, S = ``sample_num``.
"""
from __future__ import annotations

import json
import logging
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Dict, Iterator, Optional, Tuple

import numpy as np
import torch

from ultra_multr.batch import Batch
from ultra_multr.compat import runtime
from ultra_multr.config import group, require
from ultra_multr.imputation import IMPUTATION_MODES, PseudoClickCache, expected_pseudo_clicks
from ultra_multr.losses import (
    FORM_RULES, DoublyRobustLoss, DocumentWeightsOf, Reduction, RerankShare, RerankWeight, Variant,
    WeightGuard,
)
from ultra_multr.randomization import random_permutations, to_document_order
from ultra_multr.simulator import ContextAwareUserSimulator, GraphedSampler, UserSimulator
from ultra_multr.components.guards import GuardSettings
from ultra_multr.components.sessions import TrainingClicks
from ultra_multr.components.simulator_phase import SimulatorSettings
from ultra_multr.components.pilot import DEFAULT_BATCH_SIZE, choose_by_validation, read_validation_set, record_choice

LOGGER = logging.getLogger("ultra_multr")
#: Seed stream of the pseudo clicks of a validation loss (:meth:`DoublyRobust.validation_draws`, with the seed).
CLICK_LOSS_STREAM = 4099


@dataclass(frozen=True)
class DoublyRobustSettings:
    """The doubly-robust loss's knobs (the group ``dr`` of MULTR's hyper-parameters).

    Attributes:
        sample_num: randomised re-rankings per query (>= 0; paper's best: 8).
        variant: "dr" (MULTR) or "eib" (EIB-MULTR).
        rerank_weight: the estimator (:class:`~ultra_multr.losses.dr.RerankWeight`): "paper" (default: the
            mixture of Eq. dr_loss at a = S / (S + 1), as printed), a number in [0, 1] (that a), "auto" (a
            chosen from ``rerank_weight_grid`` by a pilot scored on the validation split), or a form's name
            ("randomized": ``settings/multr_randomized.json``; "authors_code": the authors' released code,
            ``settings/multr_authors_code.json``); docs/estimator.md.
        rerank_weight_fallback: the stated a of "auto" without enough evidence or without a validation split.
        rerank_weight_grid: candidates of "auto".
        rerank_pilot_steps: ranker updates of each pilot run of "auto".
        dr_weight_guard: "rebalance" (default, needs imputation=expected), "clip" or "none" (the paper's form):
            :class:`~ultra_multr.losses.dr.WeightGuard`.
        dr_normalization: the batch reduction: "batch_weight" (default, DLA's scale) or "none" (the printed
            equation averaged over the queries, ``settings/multr_paper.json``).
        imputation: "expected" (default: the pseudo clicks' expectations, estimated once per training list
            after the simulator is frozen) or "sampled" (sampled every step, the paper's).
        imputation_samples: Monte-Carlo sessions per list and order type of "expected" (standard error
            <= 0.5 / sqrt(imputation_samples)).
    """

    sample_num: int = 8
    variant: Variant = Variant.DR
    rerank_weight: RerankWeight = RerankWeight.parse("paper")
    rerank_weight_fallback: RerankShare = RerankShare.parse("paper")
    rerank_weight_grid: Tuple[RerankShare, ...] = tuple(RerankShare.parse(v) for v in ("0", "0.5", "paper"))
    rerank_pilot_steps: int = 200
    dr_weight_guard: WeightGuard = WeightGuard.REBALANCE
    dr_normalization: Reduction = Reduction.BATCH_WEIGHT
    imputation: str = "expected"
    imputation_samples: int = 256

    def __post_init__(self) -> None:
        require(self.sample_num >= 0, "sample_num must be >= 0, got %d" % self.sample_num)
        require(self.imputation in IMPUTATION_MODES,
                "imputation must be one of %s, got %r" % (IMPUTATION_MODES, self.imputation))
        require(self.imputation_samples >= 1, "imputation_samples must be >= 1, got %d" % self.imputation_samples)
        require(
            self.dr_weight_guard != WeightGuard.REBALANCE or self.imputation == "expected",
            "dr_weight_guard=rebalance moves weight by the simulator's click probabilities: it needs "
            "imputation=expected, got imputation=%s (with sampled pseudo clicks use dr_weight_guard=clip or none)"
            % self.imputation,
        )
        require(self.rerank_pilot_steps > 0, "rerank_pilot_steps must be > 0, got %d" % self.rerank_pilot_steps)
        require(len(self.rerank_weight_grid) > 0, "rerank_weight_grid must not be empty")
        rules = FORM_RULES[self.rerank_weight.form]
        require(not rules.needs_reranked or self.sample_num > 0,
                "rerank_weight=%s needs re-ranked lists, but sample_num=0" % self.rerank_weight)
        shares = [("rerank_weight", self.rerank_weight.share)] if self.rerank_weight.share else []
        for name, share in shares:
            require(share.resolve(self.sample_num) == 0.0 or self.sample_num > 0,
                    "%s=%s needs re-ranked lists, but sample_num=0" % (name, share))
        self.loss()  # the form takes this variant and guard (it says which it does not)

    def loss(self, a: Optional[float] = None) -> DoublyRobustLoss:
        """The loss these knobs make; the mixture's a is ``a`` under "auto", else its share's."""
        form = self.rerank_weight.form
        if self.rerank_weight.share is not None:
            a = self.rerank_weight.share.resolve(self.sample_num)
        return DoublyRobustLoss(form=form, variant=self.variant, guard=self.dr_weight_guard,
                                reduction=self.dr_normalization, rerank_weight=a if FORM_RULES[form].mixes else None)

    def rerank_candidates(self) -> Tuple[float, ...]:
        """The distinct a "auto" chooses among, in grid order (only 0 when sample_num = 0)."""
        if self.sample_num == 0:
            return (0.0,)
        return tuple(dict.fromkeys(share.resolve(self.sample_num) for share in self.rerank_weight_grid))


@dataclass(frozen=True)
class DoublyRobustGroups:
    """The groups of knobs MULTR's parts read, for a host's config to add to its own (``MULTRConfig(DLAConfig,
    DoublyRobustGroups)``): ``simulator`` (the simulator phase's), ``guards`` and ``dr`` (the doubly-robust
    part's).  The host's ``__post_init__`` calls :func:`check_with_host`."""

    simulator: SimulatorSettings = group(SimulatorSettings)
    guards: GuardSettings = group(GuardSettings)
    dr: DoublyRobustSettings = group(DoublyRobustSettings)


def check_with_host(settings: DoublyRobustSettings, tune: str) -> None:
    """The rules between the doubly-robust knobs and the host's (a ``tune`` pilot).

    Raises:
        ValueError: two validation pilots (``tune`` and ``rerank_weight=auto``).
    """
    require(
        not (tune and settings.rerank_weight.auto),
        "tune=%s and rerank_weight=auto are two validation pilots, more tuning than the baselines' one: "
        "give MULTR the baselines' tune pilot with a fixed rerank_weight, or rerank_weight=auto without tune" % tune,
    )


class DoublyRobust:
    """Eq. dr_loss on a frozen user simulator, for an IPW host (see the module docstring).

    Args:
        settings: the knobs.
        generator: the pseudo clicks' randomness, on the device (shared with the simulator's phase).
        seed: the run's seed (the validation loss's pseudo clicks are drawn from a stream of it).
        device: the host's device.
        host: the host algorithm's name, for messages ("DLA").
    """

    def __init__(self, settings: DoublyRobustSettings, generator: torch.Generator, seed: Optional[int],
                 device: torch.device, host: str) -> None:
        self.settings, self.generator, self.seed, self.device, self.host = settings, generator, seed, device, host
        #: the loss; None under "auto" until :meth:`select_rerank_weight` has chosen a
        self.loss: Optional[DoublyRobustLoss] = None if settings.rerank_weight.auto else settings.loss()
        #: the simulator the pseudo clicks come from (None: none, the host's own loss is used)
        self.simulator: Optional[UserSimulator] = None
        #: what samples pseudo clicks: the simulator, or its CUDA-graph replay
        self.sampler: Optional[UserSimulator] = None
        self.pseudo_click_cache: Optional[PseudoClickCache] = None
        #: the generator of a validation loss's pseudo clicks while one is computed (:meth:`validation_draws`)
        self._validation_generator: Optional[torch.Generator] = None

    @property
    def used(self) -> bool:
        """Whether the loss has a simulator (else its host trains with its own loss)."""
        return self.simulator is not None

    @property
    def validating(self) -> bool:
        """Whether a validation loss is being computed (:meth:`validation_draws`), not a training step."""
        return self._validation_generator is not None

    def use(self, simulator: Optional[UserSimulator], clicks: Optional[TrainingClicks] = None,
            cuda_graphs: str = "auto") -> None:
        """Learn from ``simulator`` (frozen; None: none, the host's own loss).

        Args:
            clicks: the training click stream, whose lists get their expected pseudo clicks in one pass
                (``imputation=expected``; None: each list when first seen).
            cuda_graphs: "off" keeps sampled pseudo clicks off CUDA graphs.
        """
        self.simulator = self.sampler = simulator
        if simulator is None:
            return
        settings = self.settings
        LOGGER.info("doubly-robust loss: pseudo clicks (imputation=%s) from the user simulator %s", settings.imputation,
                    json.dumps(simulator.describe(), sort_keys=True))
        if (self.device.type == "cuda" and cuda_graphs != "off" and settings.imputation == "sampled"
                and isinstance(simulator, ContextAwareUserSimulator)):
            self.sampler = GraphedSampler(simulator)
        if settings.imputation == "expected":
            self.pseudo_click_cache = PseudoClickCache(simulator, settings.imputation_samples, self.generator)
            if clicks is not None:
                self.pseudo_click_cache.add_query_arrays(clicks.query_arrays(simulator.list_size))

    def set_rerank_weight(self, a: float) -> None:
        """The mixture's a (``rerank_weight=auto``'s choice, or a pilot's candidate)."""
        self.loss = self.settings.loss(a)

    @contextmanager
    def validation_draws(self) -> Iterator[None]:
        """Inside, pseudo clicks come from a generator seeded afresh (:data:`CLICK_LOSS_STREAM`), by the simulator
        itself and not from the cache, so every validation draws the same ones for the same lists and the
        training generator and the cache are left as they were."""
        seed = np.random.SeedSequence([self.seed or 0, CLICK_LOSS_STREAM]).generate_state(1)[0]
        self._validation_generator = torch.Generator(device=self.device).manual_seed(int(seed))
        try:
            yield
        finally:
            self._validation_generator = None

    def pseudo_clicks(self, batch: Batch) -> Tuple[torch.Tensor, torch.Tensor]:
        """Pseudo clicks on the observed list [B, N] and on ``sample_num`` random re-rankings, in observed-list
        slots [B, S, N] (S = 0 when the loss reads no re-ranked list).  With ``imputation=expected`` both are
        expectations, the same for every re-ranking (an expanded view)."""
        settings = self.settings
        generator = self._validation_generator if self.validating else self.generator
        if settings.imputation == "expected":
            observed, randomized = (
                expected_pseudo_clicks(self.simulator, batch.features, batch.mask, settings.imputation_samples,
                                       generator)
                if self.validating else self.pseudo_click_cache.lookup(batch.features, batch.mask)
            )
            return observed, randomized.unsqueeze(1).expand(-1, settings.sample_num, -1)
        reads_reranked = not (FORM_RULES[self.loss.form].mixes and self.loss.rerank_weight == 0)
        permutations = random_permutations(batch.mask, settings.sample_num if reads_reranked else 0, generator)
        identity = torch.arange(batch.mask.shape[1], device=self.device).expand(batch.batch_size, 1, -1)
        orders = torch.cat([identity, permutations], dim=1)
        with torch.no_grad():
            sampler = self.simulator if self.validating else self.sampler
            clicks = sampler.sample_clicks(batch.features, batch.mask, orders, generator)
        return clicks[:, 0], to_document_order(clicks[:, 1:], permutations)

    def document_weights(self, batch: Batch, ipw: torch.Tensor) -> DocumentWeightsOf:
        """The per-document weights of a batch (its clicks, fresh pseudo clicks and the host's inverse
        propensity weights ``ipw`` [B, N]), as the loss computes them."""
        observed, randomized = self.pseudo_clicks(batch)
        return self.loss.weights(batch.labels, observed, randomized, ipw, batch.mask)

    def ranking_loss(self, batch: Batch, scores: torch.Tensor, ipw: torch.Tensor
                     ) -> Tuple[torch.Tensor, Dict[str, float]]:
        """Eq. dr_loss of a batch: its clicks, the scores [B, N] of the observed list and the host's inverse
        propensity weights ``ipw`` [B, N]; with named parts."""
        observed, randomized = self.pseudo_clicks(batch)
        loss, parts = self.loss(scores, batch.mask, batch.labels, observed, randomized, ipw)
        return loss, dict({"pseudo_clicks_per_list": float(observed.sum(-1).mean())}, **parts)

    def select_rerank_weight(self, algorithm: Any, valid_set: Any = None, batch_size: Optional[int] = None) -> float:
        """Choose a ("auto") by the validation pilot on its host ``algorithm``; sets and returns it, and writes
        it, with how it was chosen, into the run's ledger (decision ``rerank_weight``,
        :func:`.pilot.record_choice`).

        Args:
            algorithm: the host (the pilot trains it through its ``train`` and restores it).
            valid_set: the validation split (ULTRA ``DataSet``, padded to ``max_candidate_num``); None: read
                main.py's ``--valid_data_prefix``.  Without either (outside main.py), or with fewer than
                ``pilot_min_queries`` queries, keeps ``rerank_weight_fallback``.
            batch_size: lists per pilot update; None: main.py's ``--batch_size``.
        """
        settings, pilot_min_queries = self.settings, algorithm.hparams.pilot_min_queries
        candidates = settings.rerank_candidates()
        fallback = settings.rerank_weight_fallback.resolve(settings.sample_num)
        args = runtime.main_args()
        if valid_set is None and len(candidates) > 1:
            valid_set = read_validation_set(algorithm.exp_settings) if args is not None else None
        scores = None
        if len(candidates) == 1:
            chosen, by = candidates[0], "only_candidate"
        elif not self.used:
            chosen, by = 0.0, "simulator_not_used"
            LOGGER.warning("rerank_weight=auto: the user simulator is not used (%s's losses); a = 0 without a pilot",
                           self.host)
        elif valid_set is None:
            chosen, by = fallback, "no_validation_split"
            LOGGER.warning(
                "rerank_weight=auto: no validation split (not run by main.py and none passed to the algorithm's "
                "prepare); using rerank_weight_fallback=%s, a = %.4f", settings.rerank_weight_fallback,
                chosen,
            )
        elif len(valid_set.initial_list) < pilot_min_queries:
            chosen, by = fallback, "too_few_validation_queries"
            LOGGER.warning(
                "rerank_weight=auto: only %d validation queries (< pilot_min_queries=%d): too little evidence to "
                "choose; using rerank_weight_fallback=%s, a = %.4f",
                len(valid_set.initial_list), pilot_min_queries, settings.rerank_weight_fallback, chosen,
            )
        else:
            chosen, scores = choose_by_validation(
                algorithm, valid_set, candidates, settings.rerank_pilot_steps,
                batch_size or (args.batch_size if args is not None else DEFAULT_BATCH_SIZE),
                lambda _, a: self.set_rerank_weight(a),
            )
            by = "pilot"
        record_choice("rerank_weight", chosen, by, valid_set, scores, candidates=list(candidates),
                      pilot_min_queries=pilot_min_queries)
        self.set_rerank_weight(chosen)
        return chosen
