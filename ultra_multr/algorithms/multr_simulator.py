"""MULTR's user simulator from construction to freezing: train (or reuse), checkpoint, judge, freeze.

Algorithm 1, lines 2-5, before the first ranker update: the simulator is
trained by the one trainer (:func:`ultra_multr.simulator.trainer.train_simulator`)
on the training click stream and measured on held-out sessions
(:mod:`.multr_simulator_data`), saved beside the ranker
(``<model_dir>/<learning_algorithm>.simulator.ckpt``, with ``.partial``
training states from which a killed run resumes) and reused when its
settings and the fingerprints of the training data and click model match;
``simulator_steps=0`` keeps the random initialisation (Rand-MULTR).  A
trained simulator is then judged on its held-out sessions against a
position-only click model (:meth:`SimulatorLifecycle.validate_simulator`):
one rejected or not validated is not used, and MULTR trains with its host's
losses.  Frozen, it samples pseudo clicks (or fills the expected-click cache).
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict
from typing import Dict, Optional, Union

import torch

from ultra_multr.compat import runtime
from ultra_multr.click_models import ClickModel
from ultra_multr.config import require
from ultra_multr.feeds.arrays import click_model_fingerprint, data_fingerprint, query_arrays
from ultra_multr.imputation import PseudoClickCache
from ultra_multr.session_budget import LEDGER
from ultra_multr.simulator.controls import TrueClickModelSimulator
from ultra_multr.simulator import (
    ContextAwareUserSimulator,
    GraphedSampler,
    check_compatible,
    load_simulator,
    save_simulator,
    train_simulator,
)
from ultra_multr.algorithms.base import LOGGER, open_training_writer
from ultra_multr.algorithms.logger_guard import logger_guard_fires
from ultra_multr.algorithms.multr_simulator_data import HELDOUT_FEED_STREAM, FeedStream, SimulatorData

#: validate_simulator's decisions that make MULTR train with its host's losses (under simulator_guard=position).
FALLBACK_DECISIONS = ("rejected", "not_validated")
#: what gives a simulator more held-out sessions, for the warnings of too few
MORE_HELDOUT = ("a longer click log, a larger simulator_heldout_fraction or simulator_heldout_max_share=0.25, which "
                "holds out the minimum where it is at most a quarter of the log, gives more; simulator_guard=none "
                "trains and uses it unvalidated")
#: What metadata keys a checkpoint must match to be of the same data.
FINGERPRINTS = ("data_fingerprint", "click_model_fingerprint")


class SimulatorLifecycle(SimulatorData):
    """The simulator phase of :class:`~ultra_multr.algorithms.multr.DoublyRobustMixin` (put before the host
    algorithm among the bases, as that mixin is)."""

    def __init__(self, data_set, exp_settings: dict) -> None:
        super().__init__(data_set, exp_settings)
        config = self.hparams
        self.simulator_config = config.simulator_config(self.feature_size, self.rank_list_size)
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
        metadata = {
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
        if config.simulator_heldout_max_share:  # added later: checkpoints saved before held out the fraction only
            metadata["simulator_heldout_max_share"] = config.simulator_heldout_max_share
        return metadata

    def prepare_simulator(self) -> None:
        """Load, or train and save, the simulator; then freeze it (unless the logger guard fires first).

        A checkpoint is reused when its metadata equals
        :meth:`_checkpoint_metadata`.  Otherwise a new simulator is trained
        (the reason is logged), except that a checkpoint pinned with
        ``simulator_checkpoint`` whose data or click-model fingerprint differs
        is refused.

        Raises:
            ValueError: the pinned checkpoint learned from other data or
                another click model.
        """
        if logger_guard_fires(self):
            self.simulator_fallback = self._simulator_ready = True
            return
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
            fit = self.train_simulator(wanted, path + ".partial" if path else None)
            if fit is None:  # too few held-out sessions to judge it: not trained, not used (recorded, warned)
                self._simulator_ready = True
                return
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

    def train_simulator(self, metadata: Dict, partial_path: Optional[str] = None) -> Optional[Dict]:
        """Algorithm 1, lines 2-5: :func:`ultra_multr.simulator.trainer.train_simulator` on the
        training click stream, measured on held-out sessions (:meth:`simulator_data`); returns the
        checkpoint metadata (``metadata`` plus the held-out results).  Its steps and early stopping go to the
        run's ledger (decision ``simulator_training``).

        Returns None without training when fewer than ``simulator_min_heldout_sessions``
        distinct held-out sessions would measure it and ``simulator_guard=position``:
        :meth:`validate_simulator` would not validate it, so it would never be used.  The
        verdict is recorded and warned at once (``not_validated``, MULTR on its host's losses)
        instead of after ``simulator_steps`` steps.

        Every ``simulator_eval_every`` steps the training state goes to
        ``partial_path`` (when given), from which a killed run resumes and
        ends as an uninterrupted one would.
        """
        config = self.hparams
        open_training_writer()  # the simulator's curves go beside the ranker's
        feed, heldout_feed = self._click_feed(), self._click_feed(HELDOUT_FEED_STREAM)
        train_set, heldout_set = self.simulator_data(feed)
        heldout_sessions = self.heldout_session_count(train_set, heldout_set, feed)
        if heldout_sessions < config.simulator_min_heldout_sessions and config.simulator_guard == "position":
            self._record_training(0, 0, "not_trained", heldout_sessions)
            self._record_verdict("not_validated", heldout_sessions)
            LOGGER.warning(
                "USER SIMULATOR NOT VALIDATED: only %d distinct held-out sessions would measure it "
                "(< simulator_min_heldout_sessions=%d), too few to tell it from a position-only click model, so "
                "simulator_guard=position would not use it; it is not trained. MULTR trains with %s's own ranking "
                "and propensity losses instead (%s)", heldout_sessions, config.simulator_min_heldout_sessions,
                self.host_name(), MORE_HELDOUT,
            )
            return None
        with LEDGER.in_phase("simulator_heldout"):
            heldout = [self._session_batch(heldout_feed, heldout_set) for _ in range(config.simulator_heldout_batches)]
        LOGGER.info(
            "user simulator: training for at most %d steps of %d sessions of %d queries, held-out sessions of %d%s",
            config.simulator_steps, config.simulator_batch_size, len(train_set.initial_list),
            len(heldout_set.initial_list), "" if train_set is heldout_set else " (a share of the click log held out)",
        )
        fit = train_simulator(
            self.simulator, config, FeedStream(self, feed, train_set), heldout,
            heldout_sessions, self.generator, partial_path, metadata,
        )
        self._record_training(fit.steps_run, fit.best_step, fit.early_stopping, fit.heldout_sessions)
        return dict(metadata, **fit.checkpoint_facts())

    def _record_training(self, steps_run: int, best_step: int, early_stopping: str, heldout_sessions: int) -> None:
        """The run ledger's decision ``simulator_training``: the steps run, the state kept, early stopping
        (:data:`ultra_multr.simulator.trainer.EARLY_STOPPING`, or "not_trained") and the held-out sessions."""
        LEDGER.record_decision("simulator_training", {
            "steps_run": steps_run,
            "best_step": best_step,
            "early_stopping": early_stopping,
            "heldout_sessions": heldout_sessions,
            "min_heldout_sessions": self.hparams.simulator_min_heldout_sessions,
        })

    def host_name(self) -> str:
        """The IPW algorithm this mixin sits on (``DLA`` for :class:`MULTR`)."""
        return next(
            cls.__name__ for cls in type(self).__mro__[1:]
            if not issubclass(cls, SimulatorLifecycle) and hasattr(cls, "config_class")
        )

    def _record_verdict(self, decision: str, sessions: Optional[int], simulator_ll: Optional[float] = None,
                        trivial_ll: Optional[float] = None) -> None:
        """Whether the simulator is used after ``decision`` (``simulator_fallback``); the run ledger's record of it."""
        config = self.hparams
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

    def validate_simulator(self, fit: Dict) -> str:
        """Judge a trained simulator on its held-out sessions; record and return the decision.

        "accepted": its held-out click log-likelihood is at least that of the
        position-only click model (:mod:`ultra_multr.simulator.trivial`);
        "rejected": below it; "not_validated": measured on fewer than
        ``simulator_min_heldout_sessions`` distinct held-out sessions, too few
        to tell (:meth:`train_simulator` records it without training where
        the count alone decides); "not_compared": a checkpoint without the
        comparison.  Under
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
        self._record_verdict(decision, sessions, simulator_ll, trivial_ll)
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
                "(%.4f against %.4f). MULTR trains with %s's own ranking and propensity losses instead (%s)",
                sessions, config.simulator_min_heldout_sessions, simulator_ll, trivial_ll, self.host_name(),
                MORE_HELDOUT,
            )
        return decision
