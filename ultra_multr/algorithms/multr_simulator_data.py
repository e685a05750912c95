"""Where MULTR's user simulator learns and is measured: main.py's training click stream and held-out sessions.

The simulator learns from the clicks the doubly-robust correction subtracts
from: a new instance of main.py's training feed (same class and
hyper-parameters; for a fixed click log, the same log), drawn with main.py's
rule for sessions without a click (redrawn).  It is measured on held-out
sessions of the same training queries: with fresh clicks, draws from a second
feed instance on another seed stream; with a fixed click log, a seeded
``simulator_heldout_fraction`` of the logged sessions, never trained on.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch
import ultra

from ultra_multr.batch import Batch
from ultra_multr.feeds.arrays import session_subset
from ultra_multr.session_budget import LEDGER
from ultra_multr.simulator.controls import shuffle_positions

LOGGER = logging.getLogger("ultra_multr")
#: SeedSequence spawn keys of the simulator's random streams (with the seed).
HELDOUT_SPLIT_STREAM, HELDOUT_FEED_STREAM = 1, 2


class FeedStream:
    """main.py's training click stream as the simulator trainer's :class:`~ultra_multr.simulator.trainer.SessionStream`:
    batches of ``feed`` (a new instance of the training feed) on ``data_set``, drawn as main.py draws
    (:meth:`SimulatorData._session_batch`) and counted in the run's ledger as ``simulator_train``."""

    def __init__(self, algorithm: "SimulatorData", feed, data_set) -> None:
        self.algorithm, self.feed, self.data_set = algorithm, feed, data_set

    def next_batch(self) -> Batch:
        with LEDGER.in_phase("simulator_train"):
            return self.algorithm._session_batch(self.feed, self.data_set)

    def state(self) -> Dict:
        """The feed's random state (ours: its generator, batch count and a dynamically changing eta);
        ULTRA's own feeds draw from Python's global random module, which is not saved."""
        feed = self.feed
        state: Dict = {"global_batch_count": getattr(feed, "global_batch_count", 0)}
        if isinstance(getattr(feed, "generator", None), torch.Generator):
            state["generator"] = feed.generator.get_state()
        if getattr(getattr(feed, "hparams", None), "dynamic_bias_eta_change", 0):
            state["eta"] = feed.click_model.eta
        return state

    def restore(self, state: Dict) -> None:
        self.feed.global_batch_count = state["global_batch_count"]
        if "generator" in state:
            self.feed.generator.set_state(state["generator"])
        if "eta" in state:
            self.feed.click_model.setExamProb(state["eta"])


class SimulatorData:
    """The simulator's data, for :class:`~ultra_multr.algorithms.multr_simulator.SimulatorLifecycle`:
    needs the host algorithm's ``hparams`` (a ``DoublyRobustConfig``), ``exp_settings``, ``_train_set``,
    ``rank_list_size``, ``generator`` and ``batch``."""

    def heldout_sessions(self, sessions_per_query: int) -> np.ndarray:
        """[Q, K] bool: the logged sessions held out from the simulator, a
        seeded (seed 0 when none is set) choice of
        :meth:`~ultra_multr.simulator.training_config.SimulatorTrainingConfig.heldout_count`
        of the Q * K (query, session) pairs of a fixed click log.

        Raises:
            ValueError: no session would be left to train on.
        """
        n_queries = len(self._train_set.initial_list)
        n_sessions = n_queries * sessions_per_query
        n_heldout = self.hparams.heldout_count(
            n_sessions, " (%d queries x sessions_per_query=%d)" % (n_queries, sessions_per_query)
        )
        share = self.hparams.heldout_share(n_sessions)
        if n_heldout != share:
            LOGGER.info(
                "user simulator: %d of the click log's %d sessions held out (simulator_min_heldout_sessions, at most "
                "simulator_heldout_max_share=%g of the log), where simulator_heldout_fraction=%g would hold out %d, "
                "too few to judge it", n_heldout, n_sessions, self.hparams.simulator_heldout_max_share,
                self.hparams.simulator_heldout_fraction, share,
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
