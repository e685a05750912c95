"""main.py's training click stream, for a part of an algorithm that learns from it (MULTR's user simulator).

A component that learns from clicks before the ranker does must see the clicks
the ranker will see: new instances of main.py's training feed (the same class
and hyper-parameters; for a fixed click log, the same log) on the training
split, drawn as main.py draws them (lists without a click redrawn,
``check_validation=True``).  ULTRA's feeds are built with the algorithm
object and read a few of its attributes; :class:`FeedHost` is those
attributes and nothing else, so a component never holds the algorithm.

:class:`TrainingClicks` is the stream's source: feeds, batches, the split's
per-query arrays, a fixed click log's held-out views, the click model behind
simulated clicks and the fingerprints a saved component is tied to.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
import ultra

from ultra_multr.batch import Batch, batch_from_input_feed
from ultra_multr.click_models import ClickModel
from ultra_multr.feeds.arrays import (
    QueryArrays, click_model_fingerprint, data_fingerprint, query_arrays, session_subset,
)
from ultra_multr.session_budget import SessionLedger


@dataclass(frozen=True)
class FeedHost:
    """What ULTRA's input feeds (and ours) read of the algorithm they are built with.

    Attributes:
        rank_list_size, max_candidate_num, feature_size: the algorithm's (main.py's list sizes, F).
        letor_features_name, docid_inputs_name, labels_name: the input feed's keys.
        hparams: the algorithm's hyper-parameters (ULTRA's online feeds look for ``need_interleave``).
        is_cuda_avail: whether the algorithm's scores come back on CUDA (ULTRA's online feeds; ours return
            them as a numpy array).
        validation: the algorithm's ``validation`` (ULTRA's online feeds rank by the current ranker).
    """

    rank_list_size: int
    max_candidate_num: int
    feature_size: int
    letor_features_name: str
    docid_inputs_name: List[str]
    labels_name: List[str]
    hparams: Any
    is_cuda_avail: bool
    validation: Callable

    @classmethod
    def of(cls, algorithm: Any) -> "FeedHost":
        """The attributes of a :class:`~ultra_multr.algorithms.base.PluginAlgorithm`."""
        return cls(
            rank_list_size=algorithm.rank_list_size, max_candidate_num=algorithm.max_candidate_num,
            feature_size=algorithm.feature_size, letor_features_name=algorithm.letor_features_name,
            docid_inputs_name=algorithm.docid_inputs_name, labels_name=algorithm.labels_name,
            hparams=algorithm.hparams, is_cuda_avail=getattr(algorithm, "is_cuda_avail", False),
            validation=algorithm.validation,
        )


class TrainingClicks:
    """main.py's training click stream on its training split.

    Args:
        data_set: the training split, as main.py gave it to the algorithm (padded).
        exp_settings: main.py's settings (``train_input_feed``, ``train_input_hparams``).
        host: what the feeds read of the algorithm.
        device: where batches go.
    """

    def __init__(self, data_set: Any, exp_settings: Dict[str, Any], host: FeedHost, device: torch.device) -> None:
        self.data_set = data_set
        self.feed_class = exp_settings["train_input_feed"]
        self.feed_hparams = exp_settings.get("train_input_hparams", "")
        self.host = host
        self.device = device

    @property
    def n_queries(self) -> int:
        return len(self.data_set.initial_list)

    def new_feed(self, batch_size: int, stream: int = 0) -> Any:
        """A new instance of main.py's training feed (class and hyper-parameters) of ``batch_size`` lists.

        ``stream`` != 0 reseeds the feed's batch generator (feeds with a torch ``generator``, like ours) into
        another stream, leaving its click-log seed alone.
        """
        feed = ultra.utils.find_class(self.feed_class)(self.host, batch_size, self.feed_hparams)
        generator = getattr(feed, "generator", None)
        if stream and isinstance(generator, torch.Generator):
            generator.manual_seed(int(np.random.SeedSequence([generator.initial_seed(), stream]).generate_state(1)[0]))
        return feed

    def draw(self, feed: Any, data_set: Any) -> Batch:
        """A batch of sessions of ``data_set`` (the split or a view of it) drawn as main.py draws ranker batches
        (lists without a click are redrawn), its first ``rank_list_size`` positions.

        Raises:
            ValueError: the feed gives labels other than 0/1 (relevance labels, not clicks).
        """
        input_feed, _ = feed.get_batch(data_set, check_validation=True)
        size = self.host.rank_list_size
        batch = batch_from_input_feed(input_feed, self.host.docid_inputs_name[:size], self.host.labels_name[:size],
                                      self.device)
        if not bool(((batch.labels == 0) | (batch.labels == 1)).all()):
            raise ValueError(
                "train_input_feed %s gives labels other than 0/1 (max %g): the user simulator "
                "learns from clicks; use a click feed, not relevance labels"
                % (self.feed_class, float(batch.labels.max()))
            )
        return batch

    @staticmethod
    def logged_sessions_per_list(feed: Any) -> int:
        """K of a fixed click log (a :class:`~ultra_multr.feeds.ClickLogFeed`'s ``sessions_per_query``, a
        session feed's 1); 0: fresh clicks at every draw."""
        return int(getattr(feed, "logged_sessions_per_list", 0) or 0)

    def heldout_views(self, heldout: np.ndarray) -> Tuple[Any, Any]:
        """(training, held-out) views of a fixed click log: ``heldout`` [Q, K] bool picks the held-out sessions
        (:func:`~ultra_multr.feeds.arrays.session_subset`)."""
        return session_subset(self.data_set, ~heldout), session_subset(self.data_set, heldout)

    @staticmethod
    def distinct_sessions(feed: Any, view: Any) -> int:
        """Distinct logged sessions of a held-out view: the feed's ``distinct_sessions`` where a list is a bucket
        of sessions (:class:`~ultra_multr.feeds.baidu.BaiduSessionFeed`), else the view's own count."""
        if hasattr(feed, "distinct_sessions"):
            return int(feed.distinct_sessions(view))
        return int(np.asarray(view.subset_sessions).sum())

    def query_arrays(self, list_size: int) -> QueryArrays:
        """The split's per-query arrays at ``list_size`` positions (built once per data set)."""
        return query_arrays(self.data_set, list_size)

    @staticmethod
    def click_model(feed: Any) -> Optional[ClickModel]:
        """The label-based click model behind a feed's simulated clicks (None: logged clicks, or a model that
        is no :class:`~ultra_multr.click_models.ClickModel`)."""
        model = getattr(getattr(feed, "click_model", None), "model", None)
        return model if isinstance(model, ClickModel) else None

    def fingerprints(self, feed: Any) -> Dict[str, str]:
        """What a component learned from a feed's clicks is tied to: the training data's and the click model's."""
        return {"data_fingerprint": data_fingerprint(self.data_set),
                "click_model_fingerprint": click_model_fingerprint(feed)}


class FeedStream:
    """Batches of one feed of :class:`TrainingClicks` on one view, as the simulator trainer's
    :class:`~ultra_multr.simulator.trainer.SessionStream`, counted in ``ledger`` under ``phase``; ``transform``
    is applied to each batch (e.g. a study's control that shuffles positions)."""

    def __init__(self, clicks: TrainingClicks, feed: Any, data_set: Any, ledger: SessionLedger, phase: str,
                 transform: Callable[[Batch], Batch] = lambda batch: batch) -> None:
        self.clicks, self.feed, self.data_set = clicks, feed, data_set
        self.ledger, self.phase, self.transform = ledger, phase, transform

    def next_batch(self) -> Batch:
        with self.ledger.in_phase(self.phase):
            return self.transform(self.clicks.draw(self.feed, self.data_set))

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
