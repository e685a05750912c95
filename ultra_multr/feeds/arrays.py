"""Per-query arrays of a ULTRA data set, views of some of its queries (or logged sessions), and fingerprints.

What every feed of ours builds once per data set: :class:`QueryArrays` (the
top-N of every query as padded arrays), :func:`query_subset` and
:func:`session_subset` (views that ULTRA's feeds and ours accept),
:func:`data_fingerprint` and :func:`once_per_data_set` (work done once per
data set and process).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, Hashable, Optional, Sequence, Tuple

import numpy as np
from ultra.utils.data_utils import Raw_data

from ultra_multr.data import checks

#: Raw_data attributes with one entry per query (the rest is shared by views).
PER_QUERY_ATTRIBUTES = ("initial_list", "qids", "labels", "initial_scores", "initial_list_lengths")


@dataclass
class QueryArrays:
    """One data set's first N positions as arrays (built once per data set).

    Attributes:
        data_set: the ULTRA Raw_data they come from (kept so that its id,
            the cache key, cannot be reused by another object).
        doc_ids: [Q, N] int64 rows of ``features``; -1 at padded slots.
        labels: [Q, N] float32 relevance labels; 0 at padded slots.
        mask: [Q, N] bool, True for real documents.
        features: [R, F] float32 every feature row of the data set.
        click_log: [Q, K, N] bool logged sessions (ClickLogFeed only).
    """

    data_set: Any
    doc_ids: np.ndarray
    labels: np.ndarray
    mask: np.ndarray
    features: np.ndarray
    click_log: Optional[np.ndarray] = None

    @property
    def n_queries(self) -> int:
        return int(self.doc_ids.shape[0])

    def list_features(self, query_idx: np.ndarray, order: Optional[np.ndarray] = None) -> np.ndarray:
        """[B, N, F] float32 features of the given queries' displayed lists, zero vectors at padded slots.

        order: [B, N] int64 the logged slot each slot shows (:func:`in_shown_order`; None: the logged order).
        """
        mask = in_shown_order(self.mask[query_idx], order)
        doc_ids = in_shown_order(self.doc_ids[query_idx], order)
        return self.features[np.where(mask, doc_ids, 0)] * mask[..., None]


def in_shown_order(values: np.ndarray, order: Optional[np.ndarray]) -> np.ndarray:
    """[B, N, ...] per-slot values of the logged lists as shown: slot i holds ``values[b, order[b, i]]``.

    order: [B, N] int64 (an intervention's, :mod:`ultra_multr.interventions`); None: the logged order, ``values``.
    """
    if order is None:
        return values
    return values[np.arange(len(order))[:, None], order]


def feature_matrix(data_set: Any) -> np.ndarray:
    """[R, F] float32 of a ULTRA Raw_data's ``features`` (a list of R Python lists).

    Converted once per data set and kept on it (on the data set a
    :func:`query_subset` view comes from), so every feed, view and one-off
    pass of a process shares one copy: at Yahoo's size a conversion takes
    seconds and 1.3 GB.  Rebuilt when the list is another object or has
    another length (ULTRA's ``pad`` appends a zero row).
    """
    while getattr(data_set, "subset_of", None) is not None:
        data_set = data_set.subset_of
    rows = data_set.features
    cached = getattr(data_set, "ultra_multr_feature_matrix", None)
    if cached is None or cached[0] is not rows or cached[1] != len(rows):
        cached = (rows, len(rows), np.asarray(rows, dtype=np.float32).reshape(len(rows), -1))
        data_set.ultra_multr_feature_matrix = cached
    return cached[2]


def query_arrays(data_set: Any, n_positions: int) -> QueryArrays:
    """Read the first ``n_positions`` slots of every list of a ULTRA Raw_data.

    Lists shorter than ``n_positions`` are padded at the tail; slots whose
    initial_list entry is negative (ULTRA's padding) are padding wherever
    they are.
    """
    n_queries = len(data_set.initial_list)
    doc_ids = np.full((n_queries, n_positions), -1, dtype=np.int64)
    labels = np.zeros((n_queries, n_positions), dtype=np.float32)
    for q, (docs, grades) in enumerate(zip(data_set.initial_list, data_set.labels)):
        docs = list(docs[:n_positions])
        doc_ids[q, : len(docs)] = docs
        grades = list(grades[: len(docs)])
        labels[q, : len(grades)] = grades
    mask = doc_ids >= 0
    return QueryArrays(
        data_set=data_set,
        doc_ids=doc_ids,
        labels=np.where(mask, labels, 0.0).astype(np.float32),
        mask=mask,
        features=feature_matrix(data_set),
    )


def max_shown_label(data_set: Any, n_positions: int) -> Optional[float]:
    """The largest label in the first ``n_positions`` real slots of any list (None: no real slot)."""
    shown = [
        grade
        for docs, grades in zip(data_set.initial_list, data_set.labels)
        for doc, grade in zip(docs[:n_positions], grades[:n_positions])
        if doc >= 0
    ]
    return float(max(shown)) if shown else None


def query_subset(data_set: Any, queries: Sequence[int], sessions: Optional[np.ndarray] = None) -> Raw_data:
    """A view of a ULTRA Raw_data with only the given queries, in that order.

    The per-query lists (:data:`PER_QUERY_ATTRIBUTES`, where the data set has
    one entry per query) are subset; features, document ids and sizes are
    shared with ``data_set``.  The view records ``subset_of`` (``data_set``),
    ``subset_queries`` ([Q'] int64 query indices into it) and
    ``subset_sessions`` (``sessions``).

    Args:
        sessions: [Q', K] bool, which of each query's K logged sessions a
            :class:`ClickLogFeed` may draw in the view (None: all); every
            query needs one.

    Raises:
        ValueError: an index outside the data set, no query at all, or a
            query without a session.
    """
    queries = np.asarray(queries, dtype=np.int64).reshape(-1)
    n_queries = len(data_set.initial_list)
    if queries.size == 0 or queries.min() < 0 or queries.max() >= n_queries:
        raise ValueError(
            "query_subset: need 1 or more query indices in [0, %d) of %s, got %d (range %s)"
            % (n_queries, describe_data_set(data_set), queries.size,
               (int(queries.min()), int(queries.max())) if queries.size else "empty")
        )
    view = Raw_data()
    view.__dict__.update(data_set.__dict__)
    view.__dict__.pop(DONE_ATTRIBUTE, None)  # a view's work is its own
    for name in PER_QUERY_ATTRIBUTES:
        values = getattr(data_set, name, None)
        if values is not None and len(values) == n_queries:
            setattr(view, name, [values[q] for q in queries])
    if sessions is not None:
        sessions = np.asarray(sessions, dtype=bool)
        if sessions.ndim != 2 or sessions.shape[0] != queries.size or not sessions.any(axis=1).all():
            raise ValueError(
                "query_subset: sessions must be [%d, K] bool with a session for every query, got shape %s"
                % (queries.size, sessions.shape)
            )
    view.subset_of = data_set
    view.subset_queries = queries
    view.subset_sessions = sessions
    return view


def session_subset(data_set: Any, sessions: np.ndarray) -> Raw_data:
    """The :func:`query_subset` view of the queries with at least one of the
    given logged sessions. sessions: [Q, K] bool over every query."""
    sessions = np.asarray(sessions, dtype=bool)
    queries = np.flatnonzero(sessions.any(axis=1))
    return query_subset(data_set, queries, sessions[queries])


def data_fingerprint(data_set: Any) -> str:
    """SHA-256 of a ULTRA Raw_data's features, initial lists and labels.

    The features come from the hashes the data checks took of the files the
    data set was read from (under main.py: no second pass), or, where those
    files were not checked in this process or changed since, from the
    features themselves (one pass: seconds for MQ2008, minutes at Yahoo scale).
    """
    digest = hashlib.sha256()
    path, prefix = getattr(data_set, "data_path", None), getattr(data_set, "file_prefix", None)
    click_model_dir = getattr(data_set, "click_model_dir", None)  # ULTRA read the ULTRE layout
    files = checks.checked_fingerprint(path, [prefix], click_model_dir) if path and prefix else None
    if files is not None:
        digest.update(("files %s" % files).encode())
    else:
        digest.update(feature_matrix(data_set).tobytes())
    for lists, dtype in ((data_set.initial_list, np.int64), (data_set.labels, np.float32)):
        digest.update(np.asarray([len(values) for values in lists], dtype=np.int64).tobytes())
        for values in lists:
            digest.update(np.asarray(values, dtype=dtype).tobytes())
    return digest.hexdigest()


def click_model_fingerprint(feed: Any) -> str:
    """SHA-256 of the JSON content of a feed's click model ("none" without one,
    e.g. in oracle mode)."""
    click_model = getattr(feed, "click_model", None)
    if click_model is None:
        return "none"
    return hashlib.sha256(json.dumps(click_model.getModelJson(), sort_keys=True).encode()).hexdigest()


def build_input_feed(
    model: Any, arrays: QueryArrays, query_idx: np.ndarray, clicks: np.ndarray, order: Optional[np.ndarray] = None
) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
    """ULTRA's input feed of the given lists (see the module docstring) and its info map.

    Args:
        model: the algorithm (its ``letor_features_name``, ``docid_inputs_name``, ``labels_name``).
        arrays: the data set's first N positions; N input positions are filled.
        query_idx: [B] int64 lists of the batch.
        clicks: [B, N] float32 clicks (or labels) per position.
        order: [B, N] int64 the logged slot each position shows (an intervention session's order,
            :func:`in_shown_order`); None: the logged order.

    Returns:
        (input_feed, info_map); info_map has 'rank_list_idxs', 'input_list'
        (docids, D at padding), 'click_list' and 'letor_features'.
    """
    mask = in_shown_order(arrays.mask[query_idx], order)
    letor_features = arrays.features[in_shown_order(arrays.doc_ids[query_idx], order)[mask]]
    n_docs = letor_features.shape[0]
    # Real documents are numbered in row-major order, as they were stacked.
    numbering = (np.cumsum(mask.reshape(-1)) - 1).reshape(mask.shape)
    docid = np.where(mask, numbering, n_docs).astype(np.float32)
    input_feed = {model.letor_features_name: letor_features}
    for i in range(mask.shape[1]):
        input_feed[model.docid_inputs_name[i]] = docid[:, i]
        input_feed[model.labels_name[i]] = clicks[:, i]
    info_map = {
        "rank_list_idxs": query_idx.tolist(),
        "input_list": docid.astype(np.int64).tolist(),
        "click_list": clicks.tolist(),
        "letor_features": letor_features,
    }
    return input_feed, info_map


def describe_data_set(data_set: Any) -> str:
    """"data set <path><prefix>" or, for a :func:`query_subset` view, "Q' of the Q queries of data set ..."."""
    source = getattr(data_set, "subset_of", None)
    if source is not None:
        return "%d of the %d queries of %s" % (
            len(data_set.initial_list), len(source.initial_list), describe_data_set(source))
    path = getattr(data_set, "data_path", None)
    prefix = getattr(data_set, "file_prefix", None)
    return "data set %s%s" % (path, prefix) if path else "data set"


def root_data_set(data_set: Any) -> Any:
    """The data set a :func:`query_subset` view (of a view ...) was taken from; itself if none."""
    while getattr(data_set, "subset_of", None) is not None:
        data_set = data_set.subset_of
    return data_set


#: The attribute of a data set holding what any feed of this process has done
#: with it: main.py's training feed, MULTR's simulator feeds and the
#: rerank_weight pilot each build their own feed, so that work (and its log
#: line) would repeat.  :func:`query_subset` views start without it.
DONE_ATTRIBUTE = "_ultra_multr_feed_work"


def once_per_data_set(data_set: Any, key: Hashable, make: Callable[[], Any]) -> Any:
    """``make()`` the first time (``data_set``, ``key``) is asked for, the same result after."""
    done = data_set.__dict__.setdefault(DONE_ATTRIBUTE, {})
    if key not in done:
        done[key] = make()
    return done[key]
