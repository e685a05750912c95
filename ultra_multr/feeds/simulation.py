"""Click-simulation input feeds for ULTRA: seeded, vectorised, padding-safe.

:class:`ClickSimulationFeed` is a drop-in for
``ultra.input_layer.ClickSimulationFeed``: same constructor, methods, input
feed dictionary and hyper-parameters, plus ``seed``.  Differences:

* padded slots are never shown nor clicked (ULTRA's feed gives them the
  click probability of label 0, so short lists get clicks on documents that
  do not exist); padding may be anywhere in a list;
* the click model comes from :func:`ultra_multr.click_models.ultra.load_click_model_file`:
  ULTRA's three names or any dotted class path, found relative to the CWD,
  the settings file or this repository;
* a data set whose labels exceed the click model's range is refused;
* every draw comes from the feed's own generator, so a run repeats exactly;
* sampling is vectorised over the batch, on per-query arrays built once per
  data set;
* ``intervention_share`` (0: off) shows that share of the training sessions
  with an adjacent pair swapped or shuffled (``intervention``), clicks drawn
  on the order shown and the documents fed in it; :attr:`ClickSimulationFeed.last_interventions`
  says which rows of the last batch were interventions and where
  (:mod:`ultra_multr.interventions`), the run's ledger counts them.

:class:`ClickLogFeed` adds the click-log budget: ``sessions_per_query=K``
samples a fixed log of K sessions per query once (from the seed alone, so
every method trained with the same seed sees the same log) and draws each
list's clicks uniformly from its query's logged sessions; K = 0 means fresh
clicks every time.  The feeds of one process (main.py's, MULTR's simulator
feeds, the rerank_weight pilot's) share one log per data set, click-model
file, seed, K and list size: it is sampled and announced once.  The label
range is checked once per data set and click-model file, on the whole split
(the top ``rank_list_size`` positions of every query), never on a view.
Every training batch is counted, per phase, in the run's
click budget (:mod:`ultra_multr.session_budget`; ``session_budget`` caps it).

:func:`query_subset` gives a view of a data set with some of its queries
and, for a :class:`ClickLogFeed`, some of their logged sessions
(:func:`session_subset`; what MULTR's user simulator trains and is measured
on).  Every feed here and ULTRA's own feeds accept it, and a
:class:`ClickLogFeed` takes a view's log from the full data set's log, so a
query's logged sessions are the same in the view and in the full data set.

Data read in ULTRA's ULTRE layout (main.py ``--click_model_dir``) is turned
into ULTRA's layout by the feeds' ``preprocess_data`` hook
(:func:`ultra_multr.data.ultre.to_ultra_layout`); the feed that replays its
logged sessions is :class:`ultra_multr.feeds.ultre.UltreSessionFeed`.

The input feed: ``letor_features`` [D, F] float32, the real documents of the
batch; per position i, ``docid_input{i}`` [B] float32 row indices into it
(D marks padding) and ``label{i}`` [B] float32 clicks (labels in oracle mode).
"""
from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch
from ultra.input_layer import BaseInputFeed

from ultra_multr import interventions
from ultra_multr.compat.settings_check import check_main_py_settings
from ultra_multr.config import Off, knob, parse_hparams, require
from ultra_multr.data import ultre
from ultra_multr.feeds.arrays import (
    QueryArrays,
    build_input_feed,
    describe_data_set,
    in_shown_order,
    max_shown_label,
    once_per_data_set,
    query_arrays,
    root_data_set,
)
from ultra_multr.session_budget import LEDGER
from ultra_multr.click_models.ultra import UltraClickModel, load_click_model_file

logger = logging.getLogger(__name__)

#: Sessions sampled per call while building a click log (bounds memory when a
#: click model needs [rows, N, F] features).
LOG_CHUNK_ROWS = 4096


@dataclass(frozen=True)
class ClickFeedHParams:
    """Hyper-parameters of :class:`ClickSimulationFeed` (ULTRA's, plus seed).

    Attributes:
        click_model_json: click-model JSON file; required unless oracle_mode.
        oracle_mode: feed relevance labels instead of clicks.
        dynamic_bias_eta_change: added to the click model's eta every
            ``dynamic_bias_step_interval`` training batches (0: never).
        dynamic_bias_step_interval: see above.
        seed: seed of every random draw of the feed.
        session_budget: most sessions the run's phases may draw together
            (:mod:`ultra_multr.session_budget`; 0: no limit, only counted).
        intervention_share: in [0, 1], the probability that a training
            session (:meth:`ClickSimulationFeed.get_batch`) is an
            intervention session, each independently (0: none, the feed
            draws exactly what it drew without the option).  Ignored in
            oracle mode; evaluation batches are never interventions.
        intervention: ``swap`` (one adjacent pair of real documents, the
            pair uniform) or ``shuffle`` (a uniformly random order of the
            real documents); see :mod:`ultra_multr.interventions`.
    """

    click_model_json: str = ""
    oracle_mode: bool = False
    dynamic_bias_eta_change: float = 0.0
    dynamic_bias_step_interval: int = 1000
    seed: int = 0
    session_budget: int = 0
    # added after studies had finished: while off (share 0), both stay out of a run's identity
    intervention_share: float = knob(0.0, inert_when=Off("intervention_share", 0.0))
    intervention: str = knob("swap", inert_when=Off("intervention_share", 0.0))

    def __post_init__(self) -> None:
        require(
            self.oracle_mode or bool(self.click_model_json),
            "click_model_json is required unless oracle_mode=true",
        )
        require(
            self.dynamic_bias_step_interval > 0,
            "dynamic_bias_step_interval must be > 0, got %d" % self.dynamic_bias_step_interval,
        )
        require(self.session_budget >= 0, "session_budget must be >= 0, got %d" % self.session_budget)
        require(
            0.0 <= self.intervention_share <= 1.0,
            "intervention_share must be in [0, 1], got %g" % self.intervention_share,
        )
        close = difflib.get_close_matches(self.intervention, interventions.KINDS, n=1)
        require(
            self.intervention in interventions.KINDS,
            "intervention must be one of %s, got %r%s"
            % (", ".join(interventions.KINDS), self.intervention, " (did you mean %r?)" % close[0] if close else ""),
        )


@dataclass(frozen=True)
class ClickLogFeedHParams(ClickFeedHParams):
    """:class:`ClickFeedHParams` plus the click-log budget.

    Attributes:
        sessions_per_query: K logged sessions per query; 0 = unlimited
            (fresh clicks for every list).  Ignored in oracle mode.
    """

    sessions_per_query: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.sessions_per_query >= 0, "sessions_per_query must be >= 0, got %d" % self.sessions_per_query)
        require(
            self.sessions_per_query == 0 or self.dynamic_bias_eta_change == 0,
            "a fixed click log (sessions_per_query=%d) cannot follow dynamic_bias_eta_change=%g"
            % (self.sessions_per_query, self.dynamic_bias_eta_change),
        )
        require(
            self.sessions_per_query == 0 or self.intervention_share == 0,
            "intervention_share=%g needs fresh clicks: a fixed click log (sessions_per_query=%d) holds its "
            "sessions in the logged order; set one of them to 0" % (self.intervention_share, self.sessions_per_query),
        )
        require(
            self.sessions_per_query == 0 or self.session_budget == 0,
            "a fixed click log (sessions_per_query=%d) is its own budget, the same for every phase; "
            "session_budget=%d caps fresh clicks only" % (self.sessions_per_query, self.session_budget),
        )


def _rows(rows: np.ndarray, *values: Optional[np.ndarray]) -> Tuple[Optional[np.ndarray], ...]:
    """The ``rows`` (indices or [B] bool) of each of ``values`` ([B, ...] arrays; None stays None)."""
    return tuple(None if value is None else value[rows] for value in values)


class ClickSimulationFeed(BaseInputFeed):
    """Drop-in for ``ultra.input_layer.ClickSimulationFeed`` (see the module docstring).

    Hyper-parameters: :class:`ClickFeedHParams`.

    Attributes:
        last_interventions: [B] int64, per row of the last batch: -1 for a
            session shown in its logged order, k >= 0 for one shown with the
            0-based positions k and k + 1 swapped, -2 for a shuffled one
            (:mod:`ultra_multr.interventions`).
    """

    HPARAMS = ClickFeedHParams
    #: main.py's hook after reading each split: ULTRE-layout data becomes ULTRA's layout.
    preprocess_data = staticmethod(ultre.preprocess_data)

    def __init__(self, model: Any, batch_size: int, hparam_str: str) -> None:
        check_main_py_settings(model)  # all of main.py's hyper-parameter strings, before the first batch
        self.hparams = parse_hparams(self.HPARAMS, hparam_str, source="%s hparams" % type(self).__name__)
        # Two independent streams: batches, and (ClickLogFeed) the click log,
        # so the log depends on the seed only, not on how many batches came first.
        batch_seed, self.log_seed = (int(s) for s in np.random.SeedSequence(self.hparams.seed).generate_state(2))
        self.generator = torch.Generator().manual_seed(batch_seed)
        self.click_model: Optional[UltraClickModel] = None
        if not self.hparams.oracle_mode:
            self.click_model = load_click_model_file(
                self.hparams.click_model_json,
                self.generator,
                what="click_model_json hparam of %s" % type(self).__name__,
            )
        self.model = model
        self.rank_list_size = int(model.rank_list_size)
        self.batch_size = int(batch_size)
        self.global_batch_count = 0
        self._arrays: Dict[int, QueryArrays] = {}
        self.last_interventions = np.zeros(0, dtype=np.int64)

    #: Fresh clicks for every list: no fixed log for MULTR to hold sessions out of.
    #: A feed whose clicks are K fixed logged sessions per list says K.
    logged_sessions_per_list = 0

    # -- per data set ---------------------------------------------------
    def arrays_for(self, data_set: Any) -> QueryArrays:
        """The data set's :class:`QueryArrays`, built and checked on first use."""
        arrays = self._arrays.get(id(data_set))
        if arrays is None or arrays.data_set is not data_set or arrays.n_queries != len(data_set.initial_list):
            arrays = query_arrays(data_set, self.rank_list_size)
            self._arrays[id(data_set)] = arrays
            self._check_label_range(data_set)
        return arrays

    def _check_label_range(self, data_set: Any) -> None:
        """The click model's label range against the labels in the top ``rank_list_size`` positions of every query.

        A :func:`query_subset` view's labels are some of its source's: the
        source is checked (once per process and click-model file), never a view,
        whose labels may stop short of the data's top grade.
        """
        if self.click_model is None:
            return
        root = root_data_set(data_set)

        def check() -> bool:
            top = max_shown_label(root, self.rank_list_size)
            if top is not None:
                self.click_model.check_max_label(
                    top,
                    "%s (the top %d positions of all its %d queries) with click_model_json=%s"
                    % (describe_data_set(root), self.rank_list_size, len(root.initial_list),
                       self.hparams.click_model_json),
                )
            return True

        once_per_data_set(root, ("label range", self.hparams.click_model_json, self.rank_list_size), check)

    # -- clicks -----------------------------------------------------------
    def sample_sessions(
        self, arrays: QueryArrays, query_idx: np.ndarray, generator: torch.Generator,
        order: Optional[np.ndarray] = None,
    ) -> np.ndarray:
        """[B, N] float32 fresh clicks (labels in oracle mode) for the given queries, per position of the
        order shown (``order`` [B, N] int64, :func:`~ultra_multr.feeds.arrays.in_shown_order`; None: logged)."""
        labels = in_shown_order(arrays.labels[query_idx], order)
        if self.click_model is None:
            return labels
        mask = in_shown_order(arrays.mask[query_idx], order)
        features = None
        if self.click_model.needs_features:
            features = torch.from_numpy(arrays.list_features(query_idx, order))
        clicks = self.click_model.sample_clicks(
            torch.from_numpy(labels), torch.from_numpy(mask), features, generator
        ).numpy()
        return np.where(mask, clicks, 0.0).astype(np.float32)

    def clicks_for(
        self, arrays: QueryArrays, query_idx: np.ndarray, order: Optional[np.ndarray] = None
    ) -> np.ndarray:
        """[B, N] float32 clicks of one batch, on the order shown; the source ClickLogFeed replaces."""
        return self.sample_sessions(arrays, query_idx, self.generator, order)

    def draw_interventions(
        self, arrays: QueryArrays, query_idx: np.ndarray
    ) -> Tuple[Optional[np.ndarray], np.ndarray]:
        """The order each training list of a batch is shown in and its intervention code.

        Drawn from a generator derived from the state of :attr:`generator`
        (:func:`~ultra_multr.interventions.derived_generator`), which is not
        advanced: the queries and clicks' uniforms are those drawn without
        interventions.  Off (``intervention_share=0``) and in oracle mode
        nothing is drawn.

        Returns:
            (order [B, N] int64, None when off; codes [B] int64, see :attr:`last_interventions`).
        """
        share = self.hparams.intervention_share
        if share == 0 or self.click_model is None:
            return None, np.full(len(query_idx), interventions.LOGGED, dtype=np.int64)
        order, codes = interventions.draw_interventions(
            torch.from_numpy(arrays.mask[query_idx]), share, self.hparams.intervention,
            interventions.derived_generator(self.generator),
        )
        return order.numpy(), codes.numpy()

    # -- batches ------------------------------------------------------------
    def _check_format(self, data_format: str) -> None:
        if data_format != "ULTRA":
            raise ValueError("%s reads data_format='ULTRA' only, got %r" % (type(self).__name__, data_format))

    def _feed(
        self, arrays: QueryArrays, query_idx: np.ndarray, clicks: np.ndarray, check_validation: bool,
        order: Optional[np.ndarray] = None, codes: Optional[np.ndarray] = None,
    ) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
        """The input feed of lists ``query_idx`` [B] shown in ``order`` [B, N] (None: logged) with ``clicks``
        [B, N]; ``codes`` [B] their intervention codes (None: all logged) become :attr:`last_interventions`."""
        if codes is None:
            codes = np.full(len(query_idx), interventions.LOGGED, dtype=np.int64)
        if check_validation:  # ULTRA drops lists without any click
            query_idx, clicks, order, codes = _rows(clicks.sum(axis=1) > 0, query_idx, clicks, order, codes)
        self.last_interventions = codes
        return build_input_feed(self.model, arrays, query_idx, clicks, order)

    def get_batch(self, data_set: Any, check_validation: bool = False, data_format: str = "ULTRA"):
        """A batch of ``batch_size`` lists of uniformly drawn queries (training).

        With ``check_validation`` lists without clicks are dropped and
        replaced by new draws, as ULTRA does.  With ``intervention_share``
        > 0 lists are shown (clicked and fed) in their intervention order
        (:meth:`draw_interventions`, :attr:`last_interventions`).

        Returns:
            (input_feed, info_map); info_map has 'rank_list_idxs',
            'input_list' (docids, D at padding), 'click_list' and
            'letor_features'.
        """
        self._check_format(data_format)
        arrays = self.arrays_for(data_set)
        rounds = []
        n_chosen = n_drawn = 0
        for _ in range(self.MAX_SAMPLE_ROUND_NUM):
            *drawn, sessions = self._draw_round(arrays, self.batch_size - n_chosen, check_validation)
            rounds.append(drawn)
            n_drawn += sessions
            n_chosen += len(drawn[0])
            if n_chosen >= self.batch_size:
                break
        else:
            raise RuntimeError(
                "%s: only %d of %d x %d sampled lists had a click; the click model (%s) hardly ever clicks on %s"
                % (
                    type(self).__name__,
                    n_chosen,
                    self.MAX_SAMPLE_ROUND_NUM,
                    self.batch_size,
                    self.hparams.click_model_json,
                    describe_data_set(data_set),
                )
            )
        query_idx, batch_clicks, order, batch_codes = (
            None if parts[0] is None else np.concatenate(parts)[: self.batch_size] for parts in zip(*rounds)
        )
        self._count_batch()
        if self.click_model is not None:  # clicks, not labels: they count against the run's budget
            if order is not None:
                LEDGER.note_interventions(self.hparams.intervention_share, self.hparams.intervention)
            LEDGER.record(n_drawn, len(query_idx), self.hparams.session_budget, float(batch_clicks.sum()),
                          int((batch_codes != interventions.LOGGED).sum()))
        return self._feed(arrays, query_idx, batch_clicks, False, order, batch_codes)

    def _draw_round(
        self, arrays: QueryArrays, need: int, check_validation: bool
    ) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray], np.ndarray, int]:
        """One round of :meth:`get_batch`: ``batch_size`` lists drawn, those without a click dropped with
        ``check_validation``, ``need`` of them still wanted.

        Returns:
            (query_idx [b] int64, clicks [b, N] float32, order [b, N] int64 or None, codes [b] int64 of the
            lists kept (:meth:`draw_interventions`), the sessions a log needs for the ``need`` wanted).
        """
        query_idx = torch.randint(arrays.n_queries, (self.batch_size,), generator=self.generator).numpy()
        order, codes = self.draw_interventions(arrays, query_idx)
        clicks = self.clicks_for(arrays, query_idx, order)
        if not check_validation:
            return query_idx, clicks, order, codes, need
        kept = np.flatnonzero(clicks.sum(axis=1) > 0)
        # the sessions a log needs to fill the batch: up to the last list used, those without a click included
        sessions = len(query_idx) if len(kept) < need else int(kept[need - 1]) + 1
        return (*_rows(kept, query_idx, clicks, order, codes), sessions)

    def _count_batch(self) -> None:
        self.global_batch_count += 1
        change = self.hparams.dynamic_bias_eta_change
        if change != 0 and self.click_model is not None:
            if self.global_batch_count % self.hparams.dynamic_bias_step_interval == 0:
                self.click_model.setExamProb(self.click_model.eta + change)
                logger.info("dynamic bias: click model eta is now %.3f", self.click_model.eta)

    def get_next_batch(self, index: int, data_set: Any, check_validation: bool = False, data_format: str = "ULTRA"):
        """Lists ``index .. index + batch_size - 1`` in order (evaluation)."""
        self._check_format(data_format)
        arrays = self.arrays_for(data_set)
        query_idx = np.arange(index, min(index + self.batch_size, arrays.n_queries))
        return self._feed(arrays, query_idx, self.clicks_for(arrays, query_idx), check_validation)

    def get_data_by_index(self, data_set: Any, index: int, check_validation: bool = False):
        """The single list ``index`` (none if check_validation drops it)."""
        arrays = self.arrays_for(data_set)
        query_idx = np.array([index])
        return self._feed(arrays, query_idx, self.clicks_for(arrays, query_idx), check_validation)


class ClickLogFeed(ClickSimulationFeed):
    """:class:`ClickSimulationFeed` drawing clicks from a fixed log of
    ``sessions_per_query`` sessions per query (hyper-parameters:
    :class:`ClickLogFeedHParams`).  Every click it feeds, in training and
    evaluation batches, is a logged session of that query."""

    HPARAMS = ClickLogFeedHParams

    @property
    def logged_sessions_per_list(self) -> int:
        """K when every click is one of K fixed logged sessions per list, 0 for fresh clicks
        (what MULTR holds sessions out of; see :attr:`ClickSimulationFeed.logged_sessions_per_list`)."""
        return self.hparams.sessions_per_query if self.click_model is not None else 0

    def click_log(self, arrays: QueryArrays) -> np.ndarray:
        """[Q, K, N] bool: the data set's log, sampled on first use from the
        seed alone; a :func:`query_subset` view's log is its rows of the
        full data set's log."""
        source = getattr(arrays.data_set, "subset_of", None)
        if arrays.click_log is None and source is not None:
            arrays.click_log = self.click_log(self.arrays_for(source))[arrays.data_set.subset_queries]
        if arrays.click_log is None:
            k = self.hparams.sessions_per_query

            def sample() -> np.ndarray:
                generator = torch.Generator().manual_seed(self.log_seed)
                rows = np.repeat(np.arange(arrays.n_queries), k)
                sessions = [
                    self.sample_sessions(arrays, rows[start : start + LOG_CHUNK_ROWS], generator)
                    for start in range(0, len(rows), LOG_CHUNK_ROWS)
                ]
                logger.info("sampled a click log of %d sessions for each of the %d queries of %s",
                            k, arrays.n_queries, describe_data_set(arrays.data_set))
                return np.concatenate(sessions).reshape(arrays.n_queries, k, -1) > 0

            # The log is a function of the data, the click model file, the seed, K and the positions:
            # every feed of this process with the same ones shares it (sampled and logged once).
            key = ("click log", self.hparams.click_model_json, self.log_seed, k, self.rank_list_size)
            arrays.click_log = once_per_data_set(arrays.data_set, key, sample)
            LEDGER.log_sessions = arrays.n_queries * k
        return arrays.click_log

    def clicks_for(self, arrays, query_idx, order=None):
        if self.click_model is None or self.hparams.sessions_per_query == 0:
            return super().clicks_for(arrays, query_idx, order)
        allowed = getattr(arrays.data_set, "subset_sessions", None)
        if allowed is None:
            pick = torch.randint(self.hparams.sessions_per_query, (len(query_idx),), generator=self.generator).numpy()
        else:  # uniform over the view's sessions of each query
            if allowed.shape[1] != self.hparams.sessions_per_query:
                raise ValueError(
                    "%s: the data set view allows sessions of a log of %d per query, the feed's log has %d"
                    % (type(self).__name__, allowed.shape[1], self.hparams.sessions_per_query)
                )
            allowed = allowed[query_idx]
            uniform = torch.rand(len(query_idx), generator=self.generator, dtype=torch.float64).numpy()
            rank = (uniform * allowed.sum(axis=1)).astype(np.int64)
            pick = (np.cumsum(allowed, axis=1) > rank[:, None]).argmax(axis=1)
        return self.click_log(arrays)[query_idx, pick].astype(np.float32)
