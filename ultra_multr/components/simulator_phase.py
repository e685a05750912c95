"""The user simulator's phase, from the click log to a frozen :class:`~ultra_multr.simulator.UserSimulator`.

Algorithm 1, lines 2-5, before the first ranker update, as a component any algorithm can own:
:meth:`SimulatorPhase.run` trains (or reuses) a simulator on main.py's training click stream
(:class:`~ultra_multr.components.sessions.TrainingClicks`), judges it and returns it frozen, or returns no
simulator with the recorded reason why (the run's ledger: decisions ``logger_guard``,
``simulator_training`` and ``user_simulator``).

* The logger guard (:mod:`.guards`) runs first, when a simulator would be fitted to the log.
* Training: the one trainer (:func:`ultra_multr.simulator.trainer.train_simulator`) on the stream, measured
  on held-out sessions of the same training queries: with fresh clicks, new draws from a second feed on
  another seed stream; with a fixed click log, a seeded ``simulator_heldout_fraction`` of the logged sessions
  (raised by ``simulator_heldout_max_share``), never trained on.  Every ``simulator_eval_every`` steps it
  writes ``<checkpoint>.partial``, from which a killed run resumes.
* Reuse: the simulator is saved at ``checkpoint_path`` (by default
  ``<model_dir>/<learning_algorithm>.simulator.ckpt``) and reused when its metadata matches: the knobs
  declared ``checkpoint=True`` (:func:`ultra_multr.config.identity`), the seed, the training feed and the
  fingerprints of the training data and click model.
* Judging (``simulator_guard=position``): a trained simulator whose held-out click log-likelihood is below
  a position-only click model's is rejected; one measured on fewer than ``simulator_min_heldout_sessions``
  distinct sessions is not validated (and not trained at all when the count alone decides).
* ``simulator_steps=0`` keeps the random initialisation (Rand-MULTR); ``simulator_control`` puts a study's
  control in its place (:mod:`ultra_multr.simulator.controls`).
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional

import numpy as np
import torch

from ultra_multr.compat import runtime
from ultra_multr.config import identity, knob, require
from ultra_multr.session_budget import SessionLedger
from ultra_multr.simulator import (
    SimulatorTrainingConfig,
    UserSimulator,
    build_simulator,
    check_compatible,
    load_simulator,
    save_simulator,
    train_simulator,
)
from ultra_multr.simulator.controls import SIMULATOR_CONTROLS, TrueClickModelSimulator, shuffle_positions
from ultra_multr.components.guards import GuardSettings, logger_guard_fires
from ultra_multr.components.sessions import FeedStream, TrainingClicks

LOGGER = logging.getLogger("ultra_multr")
#: The ledger's ``user_simulator`` decisions after which the simulator is not used (under simulator_guard=position).
FALLBACK_DECISIONS = ("rejected", "not_validated")
#: What gives a simulator more held-out sessions, for the warnings of too few.
MORE_HELDOUT = ("a longer click log, a larger simulator_heldout_fraction or simulator_heldout_max_share=0.25, which "
                "holds out the minimum where it is at most a quarter of the log, gives more; simulator_guard=none "
                "trains and uses it unvalidated")
#: Metadata keys a pinned checkpoint must match (its data): a mismatch is an error, not a retraining.
FINGERPRINTS = ("data_fingerprint", "click_model_fingerprint")
#: SeedSequence spawn keys of the simulator's random streams (with the seed).
HELDOUT_SPLIT_STREAM, HELDOUT_FEED_STREAM = 1, 2


@dataclass(frozen=True)
class SimulatorSettings(SimulatorTrainingConfig):
    """The user simulator's knobs (the group ``simulator`` of MULTR's hyper-parameters): its network and training
    (:class:`~ultra_multr.simulator.SimulatorTrainingConfig`) and:

    Attributes:
        simulator_checkpoint: where to save / load the simulator (empty: beside the ranker's checkpoint in
            main.py's --model_dir).
        simulator_control: "none" (the trained simulator), or a control of the study
            (:mod:`ultra_multr.simulator.controls`): "true_click_model" (the training feed's click model stands
            in for the simulator: an upper bound) or "shuffled_positions" (the simulator trains on sessions in
            random order: a flat examination curve, a simulator that cannot debias).
    """

    simulator_checkpoint: str = ""
    simulator_control: str = knob("none", checkpoint=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.simulator_control in SIMULATOR_CONTROLS,
                "simulator_control must be one of %s, got %r" % (SIMULATOR_CONTROLS, self.simulator_control))

    def heldout_sessions(self, n_queries: int, sessions_per_query: int, seed: Optional[int]) -> np.ndarray:
        """[Q, K] bool: the logged sessions of a fixed click log held out from the simulator, a seeded (seed 0
        when none is set) choice of :meth:`heldout_count` of the Q * K (query, session) pairs.

        Raises:
            ValueError: no session would be left to train on.
        """
        n_sessions = n_queries * sessions_per_query
        n_heldout = self.heldout_count(n_sessions, " (%d queries x sessions_per_query=%d)"
                                       % (n_queries, sessions_per_query))
        share = self.heldout_share(n_sessions)
        if n_heldout != share:
            LOGGER.info(
                "user simulator: %d of the click log's %d sessions held out (simulator_min_heldout_sessions, at most "
                "simulator_heldout_max_share=%g of the log), where simulator_heldout_fraction=%g would hold out %d, "
                "too few to judge it", n_heldout, n_sessions, self.simulator_heldout_max_share,
                self.simulator_heldout_fraction, share,
            )
        order = np.random.default_rng(np.random.SeedSequence([seed or 0, HELDOUT_SPLIT_STREAM])).permutation(n_sessions)
        heldout = np.zeros(n_sessions, dtype=bool)
        heldout[order[:n_heldout]] = True
        return heldout.reshape(n_queries, sessions_per_query)


    def heldout_queries(self, n_queries: int, seed: Optional[int]) -> np.ndarray:
        """[Q] bool: the training queries held out from the simulator under ``simulator_heldout_unit=queries``, a
        seeded ``simulator_heldout_fraction`` of them (at least one, and one left to train on).

        Raises:
            ValueError: fewer than 2 training queries.
        """
        require(n_queries >= 2, "simulator_heldout_unit=queries needs at least 2 training queries, got %d" % n_queries)
        n_heldout = min(max(1, int(round(self.simulator_heldout_fraction * n_queries))), n_queries - 1)
        order = np.random.default_rng(np.random.SeedSequence([seed or 0, HELDOUT_SPLIT_STREAM])).permutation(n_queries)
        heldout = np.zeros(n_queries, dtype=bool)
        heldout[order[:n_heldout]] = True
        return heldout


@dataclass(frozen=True)
class SimulatorOutcome:
    """What the phase ends with.

    Attributes:
        simulator: the frozen simulator to learn from; None when the algorithm trains without one.
        decision: why, as the ledger records it: the logger guard's ("fired", "too_few_queries"), the simulator
            guard's ("accepted", "rejected", "not_validated", "not_compared"), or None where nothing was judged
            (Rand-MULTR, a control).
    """

    simulator: Optional[UserSimulator]
    decision: Optional[str]


def default_checkpoint_path(settings: SimulatorSettings, learning_algorithm: str) -> Optional[str]:
    """``simulator_checkpoint``, else ``<main.py's --model_dir>/<learning_algorithm>.simulator.ckpt``; None outside
    main.py."""
    if settings.simulator_checkpoint:
        return settings.simulator_checkpoint
    args = runtime.main_args()
    return None if args is None else os.path.join(args.model_dir, "%s.simulator.ckpt" % learning_algorithm)


class SimulatorPhase:
    """Trains or loads, judges and freezes a user simulator (see the module docstring).

    Args:
        settings: the simulator's knobs.
        guards: the guards' knobs.
        clicks: main.py's training click stream.
        generator: the phase's randomness (teacher forcing, a control's shuffles), on the device; the caller
            may go on drawing from it.
        seed: the run's seed (None: not seeded): the held-out split's, the logger guard's, and part of the
            checkpoint's identity.
        checkpoint_path: where the simulator is saved and reused (None: nowhere).
        ledger: the run's ledger.
        fallback: what the algorithm does without a simulator, for the warnings (e.g. "MULTR trains with DLA's
            own ranking and propensity losses instead").

    Raises:
        ValueError: ``cuda_graphs=on`` without a CUDA device.
    """

    def __init__(self, settings: SimulatorSettings, guards: GuardSettings, clicks: TrainingClicks,
                 generator: torch.Generator, seed: Optional[int], checkpoint_path: Optional[str],
                 ledger: SessionLedger, fallback: str) -> None:
        self.settings, self.guards, self.clicks = settings, guards, clicks
        self.generator, self.seed, self.checkpoint_path = generator, seed, checkpoint_path
        self.ledger, self.fallback = ledger, fallback
        device = clicks.device
        require(settings.cuda_graphs != "on" or device.type == "cuda",
                "cuda_graphs=on needs a CUDA device, but the device is %s" % device)
        self.simulator_config = settings.simulator_config(clicks.host.feature_size, clicks.host.rank_list_size)
        #: the network it trains, at its random initialisation until :meth:`run`
        self.network = build_simulator(self.simulator_config).to(device)
        #: what :meth:`run` ended with (None before)
        self.outcome: Optional[SimulatorOutcome] = None

    def checkpoint_metadata(self) -> Dict[str, Any]:
        """What a saved simulator (or training state) must match to be reused: the knobs declared
        ``checkpoint=True``, the training feed, the seed, the network's shape and the fingerprints of the
        training data and click model."""
        return dict(
            identity(self.settings, "checkpoint"),
            train_input_feed=self.clicks.feed_class,
            train_input_hparams=self.clicks.feed_hparams,
            seed=self.seed,
            simulator_config=asdict(self.simulator_config),
            **self.clicks.fingerprints(self.clicks.new_feed(self.settings.simulator_batch_size)),
        )

    def run(self) -> SimulatorOutcome:
        """Algorithm 1, lines 2-5: the simulator to learn from, frozen, or none with the recorded reason (also kept
        as :attr:`outcome`).

        A checkpoint is reused when its metadata equals :meth:`checkpoint_metadata`; otherwise a new simulator
        is trained (the reason is logged), except that a checkpoint pinned with ``simulator_checkpoint`` whose
        data or click-model fingerprint differs is refused.

        Raises:
            ValueError: the pinned checkpoint learned from other data or another click model; a control the
                training feed cannot give.
        """
        self.outcome = self._run()
        return self.outcome

    def _run(self) -> SimulatorOutcome:
        settings = self.settings
        fitted_to_log = settings.simulator_steps > 0 and settings.simulator_control == "none"
        if fitted_to_log and self.guards.logger_guard != "none" and logger_guard_fires(
                self.clicks.query_arrays(self.clicks.host.rank_list_size), self.guards, self.seed, self.ledger,
                self.fallback):
            return SimulatorOutcome(None, self.ledger.decisions["logger_guard"]["decision"])
        started = time.perf_counter()
        steps = settings.simulator_steps
        path = self.checkpoint_path
        wanted = self.checkpoint_metadata() if steps > 0 else {}
        simulator: UserSimulator = self.network
        fit: Dict = {}
        if settings.simulator_control == "true_click_model":
            simulator = self._true_click_model()
            LOGGER.info("user simulator: simulator_control=true_click_model, the training feed's click model "
                        "(not trained)")
            steps = 0
        elif steps > 0 and path and os.path.exists(path):
            loaded, metadata = load_simulator(path, self.clicks.device)
            check_compatible(loaded.config, self.clicks.host.feature_size, self.clicks.host.rank_list_size, path)
            differ = [k for k, v in wanted.items() if metadata.get(k) != v]
            if not differ:
                LOGGER.info("user simulator: reusing %s (held-out LL %s)", path, metadata.get("heldout_log_likelihood"))
                simulator = self.network = loaded.to(self.clicks.device)
                steps = 0
                fit = metadata
            elif settings.simulator_checkpoint and set(differ) & set(FINGERPRINTS):
                raise ValueError(
                    "simulator_checkpoint=%s learned from other data or another click model (%s differ or "
                    "are missing); "
                    "remove it or point simulator_checkpoint elsewhere to train a new one"
                    % (path, ", ".join(sorted(set(differ) & set(FINGERPRINTS))))
                )
            else:
                LOGGER.info("user simulator: %s differs in %s; training a new one", path, ", ".join(differ))
        if steps > 0:
            fit = self._train(wanted, path + ".partial" if path else None)
            if fit is None:  # too few held-out sessions to judge it: not trained, not used (recorded, warned)
                return SimulatorOutcome(None, "not_validated")
            if path:
                save_simulator(path, self.network, fit)
                LOGGER.info("user simulator: saved %s (%.1f s)", path, time.perf_counter() - started)
                if os.path.exists(path + ".partial"):
                    os.remove(path + ".partial")
        elif settings.simulator_steps == 0 and settings.simulator_control == "none":
            LOGGER.info("user simulator: simulator_steps=0, keeping the random initialisation (Rand-MULTR)")
        if isinstance(simulator, torch.nn.Module):
            simulator.eval()
            for parameter in simulator.parameters():
                parameter.requires_grad_(False)
        if not fit:
            return SimulatorOutcome(simulator, None)
        decision = self._judge(fit)
        used = decision not in FALLBACK_DECISIONS or self.guards.simulator_guard == "none"
        return SimulatorOutcome(simulator if used else None, decision)

    def _true_click_model(self) -> TrueClickModelSimulator:
        """The training feed's click model on the training split's labels (simulator_control=true_click_model).

        Raises:
            ValueError: the training feed has no click model (logged clicks).
        """
        click_model = self.clicks.click_model(self.clicks.new_feed(self.settings.simulator_batch_size))
        if click_model is None:
            raise ValueError(
                "simulator_control=true_click_model needs a train_input_feed that simulates clicks with a "
                "label-based click model (ultra_multr.feeds.ClickSimulationFeed or ClickLogFeed with a PBM, "
                "cascade, UBM or DCM click_model_json), got %s with %s"
                % (self.clicks.feed_class, self.clicks.feed_hparams)
            )
        list_size = self.clicks.host.rank_list_size
        arrays = self.clicks.query_arrays(list_size)
        rows = arrays.doc_ids[arrays.mask]
        return TrueClickModelSimulator(click_model, arrays.features[rows], arrays.labels[arrays.mask], list_size,
                                       type(click_model).__name__).to(self.clicks.device)

    def draws(self, feed: Any, data_set: Any, phase: str) -> FeedStream:
        """Batches of ``feed`` on ``data_set`` counted under ``phase``, positions shuffled under the control that
        asks for it."""
        if self.settings.simulator_control == "shuffled_positions":
            return FeedStream(self.clicks, feed, data_set, self.ledger, phase,
                              lambda batch: shuffle_positions(batch, self.generator))
        return FeedStream(self.clicks, feed, data_set, self.ledger, phase)

    def _train(self, metadata: Dict, partial_path: Optional[str]) -> Optional[Dict]:
        """Train :attr:`network` on the training click stream, measured on held-out sessions; returns the
        checkpoint metadata (``metadata`` plus the held-out results).  Its steps and early stopping go to the
        ledger (decision ``simulator_training``).

        Returns None without training when fewer than ``simulator_min_heldout_sessions`` distinct held-out
        sessions would measure it and ``simulator_guard=position``: it would not be used.  The verdict is
        recorded and warned at once (``not_validated``) instead of after ``simulator_steps`` steps.
        """
        settings = self.settings
        runtime.open_training_writer()  # the simulator's curves go beside the ranker's
        feed = self.clicks.new_feed(settings.simulator_batch_size)
        heldout_feed = self.clicks.new_feed(settings.simulator_batch_size, HELDOUT_FEED_STREAM)
        sessions_per_query = self.clicks.logged_sessions_per_list(feed)
        if settings.simulator_heldout_unit == "queries":  # whole queries the simulator never trains on
            held = settings.heldout_queries(self.clicks.n_queries, self.seed)
            train_set, heldout_set = self.clicks.heldout_views(np.repeat(held[:, None], max(sessions_per_query, 1), 1))
            heldout_sessions = (self.clicks.distinct_sessions(feed, heldout_set) if sessions_per_query
                                else settings.simulator_heldout_batches * settings.simulator_batch_size)
        elif sessions_per_query:
            heldout_mask = settings.heldout_sessions(self.clicks.n_queries, sessions_per_query, self.seed)
            train_set, heldout_set = self.clicks.heldout_views(heldout_mask)
            heldout_sessions = self.clicks.distinct_sessions(feed, heldout_set)
        else:
            train_set = heldout_set = self.clicks.data_set
            heldout_sessions = settings.simulator_heldout_batches * settings.simulator_batch_size
        if heldout_sessions < settings.simulator_min_heldout_sessions and self.guards.simulator_guard == "position":
            self._record_training(0, 0, "not_trained", heldout_sessions)
            self._record_verdict("not_validated", heldout_sessions)
            LOGGER.warning(
                "USER SIMULATOR NOT VALIDATED: only %d distinct held-out sessions would measure it "
                "(< simulator_min_heldout_sessions=%d), too few to tell it from a position-only click model, so "
                "simulator_guard=position would not use it; it is not trained. %s (%s)", heldout_sessions,
                settings.simulator_min_heldout_sessions, self.fallback, MORE_HELDOUT,
            )
            return None
        heldout_draws = self.draws(heldout_feed, heldout_set, "simulator_heldout")
        heldout = [heldout_draws.next_batch() for _ in range(settings.simulator_heldout_batches)]
        LOGGER.info(
            "user simulator: training for at most %d steps of %d sessions of %d queries, held-out sessions of %d%s",
            settings.simulator_steps, settings.simulator_batch_size, len(train_set.initial_list),
            len(heldout_set.initial_list), "" if train_set is heldout_set else " (a share of the click log held out)",
        )
        fit = train_simulator(
            self.network, settings, self.draws(feed, train_set, "simulator_train"), heldout,
            heldout_sessions, self.generator, partial_path, metadata,
        )
        self._record_training(fit.steps_run, fit.best_step, fit.early_stopping, fit.heldout_sessions)
        return dict(metadata, **fit.checkpoint_facts())

    def _record_training(self, steps_run: int, best_step: int, early_stopping: str, heldout_sessions: int) -> None:
        """The ledger's decision ``simulator_training``: the steps run, the state kept, early stopping
        (:data:`ultra_multr.simulator.trainer.EARLY_STOPPING`, or "not_trained") and the held-out sessions."""
        self.ledger.record_decision("simulator_training", {
            "steps_run": steps_run,
            "best_step": best_step,
            "early_stopping": early_stopping,
            "heldout_sessions": heldout_sessions,
            "min_heldout_sessions": self.settings.simulator_min_heldout_sessions,
        })

    def _record_verdict(self, decision: str, sessions: Optional[int], simulator_ll: Optional[float] = None,
                        trivial_ll: Optional[float] = None) -> None:
        """The ledger's decision ``user_simulator``: the verdict, whether the simulator is used, what it rests on."""
        not_used = decision in FALLBACK_DECISIONS and self.guards.simulator_guard == "position"
        self.ledger.record_decision("user_simulator", {
            "decision": decision,
            "used": not not_used,
            "host_losses": not_used,
            "heldout_sessions": sessions,
            "min_heldout_sessions": self.settings.simulator_min_heldout_sessions,
            "heldout_log_likelihood": simulator_ll,
            "position_only_log_likelihood": trivial_ll,
            "simulator_guard": self.guards.simulator_guard,
        })

    def _judge(self, fit: Dict) -> str:
        """Judge a trained simulator on its held-out sessions; record and return the decision.

        "accepted": its held-out click log-likelihood is at least that of the position-only click model
        (:mod:`ultra_multr.simulator.trivial`); "rejected": below it; "not_validated": measured on fewer than
        ``simulator_min_heldout_sessions`` distinct held-out sessions, too few to tell; "not_compared": a
        checkpoint without the comparison.  Under ``simulator_guard=position`` a rejected or unvalidated
        simulator is not used (warned).
        """
        settings = self.settings
        simulator_ll, trivial_ll = fit.get("heldout_log_likelihood"), fit.get("trivial_log_likelihood")
        sessions = fit.get("heldout_sessions")
        if simulator_ll is None or trivial_ll is None:
            decision = "not_compared"
        elif sessions is not None and sessions < settings.simulator_min_heldout_sessions:
            decision = "not_validated"
        else:
            decision = "accepted" if simulator_ll >= trivial_ll else "rejected"
        self._record_verdict(decision, sessions, simulator_ll, trivial_ll)
        if decision == "not_compared":
            LOGGER.info("user simulator: no position-only baseline in its metadata (an older checkpoint); not compared")
            return decision
        comparison = "held-out click log-likelihood %.4f per session on %d distinct held-out sessions, %s the " \
            "position-only click model's %.4f" % (
                simulator_ll, sessions, "above" if simulator_ll >= trivial_ll else "below", trivial_ll)
        if decision == "accepted":
            LOGGER.info("user simulator: %s", comparison)
        elif self.guards.simulator_guard == "none":
            LOGGER.info("user simulator: %s (%s; simulator_guard=none: used anyway)", comparison, decision)
        elif decision == "rejected":
            LOGGER.warning(
                "USER SIMULATOR REJECTED: its %s, so its pseudo clicks carry no usable information. %s (more "
                "simulator steps, held-out sessions or another simulator setting may help)", comparison, self.fallback,
            )
        else:
            LOGGER.warning(
                "USER SIMULATOR NOT VALIDATED: its held-out click log-likelihood rests on only %d distinct held-out "
                "sessions (< simulator_min_heldout_sessions=%d), too few to tell it from a position-only click model "
                "(%.4f against %.4f). %s (%s)",
                sessions, settings.simulator_min_heldout_sessions, simulator_ll, trivial_ll, self.fallback,
                MORE_HELDOUT,
            )
        return decision
