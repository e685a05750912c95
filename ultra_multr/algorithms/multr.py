"""MULTR (Luo et al., WSDM 2023) as a ULTRA learning algorithm: DLA + a user simulator + a doubly-robust loss.

Algorithm 1 of the paper inside ULTRA's unmodified ``main.py``, by composition:

* the host is :class:`~ultra_multr.algorithms.dla.DLA` (propensity model, ranker, examination loss);
* a :class:`~ultra_multr.components.simulator_phase.SimulatorPhase` trains (or reuses) the user simulator on
  main.py's training click stream and judges it, once, at the named point before the first update
  (:meth:`MULTR.prepare_training`); the guards may leave MULTR without one, and it then trains exactly as DLA;
* a :class:`~ultra_multr.components.doubly_robust.DoublyRobust` part replaces DLA's ranking loss by Eq.
  dr_loss on the simulator's pseudo clicks (DLA's extension point :meth:`~DLA.ranking_loss`);
* with ``propensity_ranker=dla`` (default) DLA's examination loss learns against a second ranker trained by
  DLA's own loss (DLA's extension point :meth:`~DLA.examination_target`), so MULTR's propensities are DLA's on
  the same batches; ``propensity_ranker=multr`` couples them to MULTR's ranker, as the paper does.

The estimator, its forms and every default that departs from the paper, with why: docs/estimator.md
(``settings/multr_paper.json`` is the paper's form, ``settings/multr_authors_code.json`` the authors' code's).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch

from ultra_multr import losses
from ultra_multr.batch import Batch
from ultra_multr.compat import runtime
from ultra_multr.compat.settings_check import CLICK_LOSS_OBJECTIVE
from ultra_multr.config import Off, knob, require
from ultra_multr.session_budget import HOST_LOSSES_BECAUSE, LEDGER
from ultra_multr.components.doubly_robust import DoublyRobust, DoublyRobustGroups, check_with_host
from ultra_multr.components.sessions import FeedHost, TrainingClicks
from ultra_multr.components.simulator_phase import SimulatorPhase, default_checkpoint_path
from ultra_multr.algorithms.dla import DLA, DLAConfig

#: propensity_ranker's values: which ranker DLA's examination loss divides clicks by.
PROPENSITY_RANKERS = ("dla", "multr")


@dataclass(frozen=True)
class MULTRConfig(DLAConfig, DoublyRobustGroups):
    """MULTR's hyper-parameters: DLA's (the host), the groups ``simulator``
    (:class:`~ultra_multr.components.simulator_phase.SimulatorSettings`), ``guards``
    (:class:`~ultra_multr.components.guards.GuardSettings`) and ``dr``
    (:class:`~ultra_multr.components.doubly_robust.DoublyRobustSettings`) of
    :class:`~ultra_multr.components.doubly_robust.DoublyRobustGroups`, every knob read by its own name from
    ULTRA's flat string, and:

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
            others.  1 (default): every update.  When the simulator is not used (MULTR trains as DLA) it has no
            effect.
        examination_ranker_layers: under ``propensity_ranker=dla``, the hidden layer sizes of the examination
            ranker, an ULTRA ``DNN`` of its own (e.g. ``[64]``: one hidden layer, a fraction of the ranker's
            cost); empty (default): a copy of the ranker, from its initial state.
    """

    propensity_ranker: str = "dla"
    propensity_update_every: int = knob(1, inert_when=Off("propensity_update_every", 1))
    examination_ranker_layers: Tuple[int, ...] = knob((), inert_when=Off("examination_ranker_layers", ()),
                                                      added_after_runs=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "examination_ranker_layers", tuple(self.examination_ranker_layers))
        check_with_host(self.dr, self.tune)
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
        require(
            not self.examination_ranker_layers or self.propensity_ranker == "dla",
            "examination_ranker_layers=%s shapes propensity_ranker=dla's examination ranker; propensity_ranker=%s "
            "has none: leave it empty or set propensity_ranker=dla"
            % (list(self.examination_ranker_layers), self.propensity_ranker),
        )
        require(all(size >= 1 for size in self.examination_ranker_layers),
                "examination_ranker_layers must hold sizes >= 1, got %s" % list(self.examination_ranker_layers))


def doubly_robust_parts(algorithm, host: str) -> Tuple[SimulatorPhase, DoublyRobust]:
    """The simulator phase and the doubly-robust part of an IPW ``algorithm`` whose hyper-parameters hold the
    groups ``simulator``, ``guards`` and ``dr`` (MULTR, MULTR_IPW), sharing the algorithm's ``generator``.

    Raises:
        ValueError: ``rerank_weight=auto`` with ``objective_metric=click_loss_neg`` (its pilot would compare
            the losses of different a).
    """
    config = algorithm.hparams
    require(
        not (algorithm.reports_click_loss and config.dr.rerank_weight.auto),
        "rerank_weight=auto: its pilot would compare the doubly-robust losses of different a, which "
        "objective_metric=%s cannot; choose a by a ranking metric or set it" % CLICK_LOSS_OBJECTIVE,
    )
    clicks = TrainingClicks(algorithm._train_set, algorithm.exp_settings, FeedHost.of(algorithm), algorithm.device)
    name = algorithm.exp_settings.get("learning_algorithm", type(algorithm).__name__)
    phase = SimulatorPhase(
        config.simulator, config.guards, clicks, algorithm.generator, config.seed,
        default_checkpoint_path(config.simulator, name), LEDGER,
        "%s trains with %s's own ranking and propensity losses instead" % (type(algorithm).__name__, host),
    )
    return phase, DoublyRobust(config.dr, algorithm.generator, config.seed, algorithm.device, host)


def prepare_doubly_robust(algorithm, valid_set=None, batch_size: Optional[int] = None) -> None:
    """Algorithm 1's first phase for a host of :func:`doubly_robust_parts`: the simulator phase, whose simulator (or
    none) the doubly-robust part learns from, then ``rerank_weight=auto``'s pilot (on ``valid_set``, ``batch_size``
    lists per update; None: main.py's)."""
    phase = algorithm.simulator_phase
    algorithm.doubly_robust.use(phase.run().simulator, phase.clicks, algorithm.hparams.simulator.cuda_graphs)
    if algorithm.doubly_robust.loss is None:  # "auto": chosen before the first update
        algorithm.doubly_robust.select_rerank_weight(algorithm, valid_set, batch_size)


def doubly_robust_trained_with(algorithm, host: str) -> Tuple[str, str, Optional[str]]:
    """:meth:`~ultra_multr.algorithms.base.PluginAlgorithm.trained_with` of a host of :func:`doubly_robust_parts`:
    its doubly-robust loss on the simulator's pseudo clicks, or its host's losses and why (the guards)."""
    name = type(algorithm).__name__
    if algorithm.doubly_robust.used:
        return name, "%s's doubly-robust loss (%s) on the user simulator's pseudo clicks, with %s's propensities" % (
            name, algorithm.doubly_robust.loss.describe(), host), None
    outcome = algorithm.simulator_phase.outcome
    return host, "%s's own losses" % host, HOST_LOSSES_BECAUSE.get(outcome.decision if outcome else None)


def with_clicks_per_list(batch: Batch, loss: torch.Tensor, parts: Dict[str, float]
                         ) -> Tuple[torch.Tensor, Dict[str, float]]:
    """``(loss, parts)`` with the batch's real clicks per list among the parts (beside the pseudo clicks')."""
    return loss, dict(parts, clicks_per_list=float(batch.labels.sum(-1).mean()))


def seeded_generator(device: torch.device, seed: Optional[int]) -> torch.Generator:
    """A generator on ``device`` seeded with ``seed`` (None: from the OS)."""
    generator = torch.Generator(device=device)
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator


def examination_ranker(algorithm: DLA, exp_settings: dict) -> torch.nn.Module:
    """propensity_ranker=dla's examination ranker: a copy of ``algorithm``'s ranker from its initial state, or an
    ULTRA ``DNN`` with the hidden layers ``examination_ranker_layers`` (same feature size and device)."""
    layers = algorithm.hparams.examination_ranker_layers
    if not layers:
        return copy.deepcopy(algorithm.model)
    settings = dict(exp_settings, ranking_model="ultra.ranking_model.DNN",
                    ranking_model_hparams="hidden_layer_sizes=[%s]" % ",".join(str(size) for size in layers))
    return runtime.create_ranking_model(settings, algorithm.feature_size, algorithm.device)


class MULTR(DLA):
    """DLA + a user simulator (:attr:`simulator_phase`) + the doubly-robust ranking loss (:attr:`doubly_robust`)."""

    config_class = MULTRConfig

    def __init__(self, data_set, exp_settings: dict) -> None:
        super().__init__(data_set, exp_settings)
        #: the randomness of the simulator's training and of the pseudo clicks
        self.generator = seeded_generator(self.device, self.hparams.seed)
        self.simulator_phase, self.doubly_robust = doubly_robust_parts(self, "DLA")
        #: the ranker DLA's examination loss divides clicks by (propensity_ranker=dla); None: MULTR's own
        self.examination_ranker: Optional[torch.nn.Module] = (
            examination_ranker(self, exp_settings) if self.hparams.propensity_ranker == "dla" else None
        )

    def prepare_training(self, valid_set=None, batch_size: Optional[int] = None) -> None:
        """Algorithm 1's first phase (:func:`prepare_doubly_robust`), then DLA's own."""
        prepare_doubly_robust(self, valid_set, batch_size)
        super().prepare_training(valid_set, batch_size)

    def trained_with(self) -> Tuple[str, str, Optional[str]]:
        return doubly_robust_trained_with(self, "DLA")

    def set_training_mode(self, training: bool) -> None:
        super().set_training_mode(training)
        if self.examination_ranker is not None:
            self.examination_ranker.train(training)

    def parameter_groups(self) -> List[Tuple[List[torch.nn.Parameter], float]]:
        groups = super().parameter_groups()
        if self.examination_ranker is not None:
            groups.append((list(self.examination_ranker.parameters()), self.hparams.learning_rate))
        return groups

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        return with_clicks_per_list(batch, *super().training_loss(batch))

    def ranking_loss(
        self, batch: Batch, scores: torch.Tensor, weights: torch.Tensor
    ) -> Tuple[torch.Tensor, Dict[str, float]]:
        """Eq. dr_loss (:attr:`doubly_robust`); DLA's own when there is no simulator."""
        if not self.doubly_robust.used:
            return super().ranking_loss(batch, scores, weights)
        return self.doubly_robust.ranking_loss(batch, scores, weights)

    def click_loss(self, batch: Batch) -> torch.Tensor:
        """The whole loss of the train step on ``batch``, its pseudo clicks drawn afresh for validation
        (:meth:`~ultra_multr.components.doubly_robust.DoublyRobust.validation_draws`)."""
        with self.doubly_robust.validation_draws():
            return super().click_loss(batch)

    def examination_target(
        self, batch: Batch, scores: torch.Tensor, weights: torch.Tensor
    ) -> Optional[Tuple[torch.Tensor, Optional[torch.Tensor]]]:
        """propensity_ranker=dla: the examination ranker's scores and DLA's ranking loss for it, so the
        propensity model and that ranker take DLA's updates exactly (the simulator never reaches them), on
        every ``propensity_update_every``-th update (global steps 0, k, 2k, ...; every validation loss);
        otherwise, or without a simulator (MULTR trains as DLA), DLA's own coupling."""
        if self.examination_ranker is None or not self.doubly_robust.used:
            return super().examination_target(batch, scores, weights)
        every = self.hparams.propensity_update_every
        if not (every == 1 or self.doubly_robust.validating or self.global_step % every == 0):
            return None
        relevance = self.scores(batch, self.examination_ranker)
        loss = losses.dla_softmax_loss(relevance, batch.labels, weights, batch.mask)
        return relevance, self.hparams.ranker_loss_weight * loss
