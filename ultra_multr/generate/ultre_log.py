"""Generated click logs with a known position bias, and their ULTRE-layout data directory.

:func:`pbm_session_log` logs sessions of generated queries
(:func:`ultra_multr.generate.ultra_dataset.iter_synthetic_queries`): each session shows
its query's top N documents in the initial ranker's order with randomised
adjacent swaps (pairs (o, o+1), (o+2, o+3), ... for a random offset o in
{0, 1}, each swapped with probability ``swap_prob``), and a position-based
model clicks (P(click at k) = exam_prob[k] * click_prob[label]).  The swaps
are the interventions that intervention harvesting needs: every document is
seen at two neighbouring positions.  :func:`write_ultre_dataset` writes such
a log as ULTRA's ULTRE layout (:mod:`ultra_multr.data.ultre`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Sequence

import numpy as np
import torch

from ultra_multr.click_models import PositionBasedModel
from ultra_multr.generate.ultra_dataset import iter_synthetic_queries
from ultra_multr.data.ultra_format import RankedQuery, _format_features, ultra_data_dir, write_settings
from ultra_multr.files import atomic_write_text

#: P(examined | position k), k = 1..10: 1 / k (relative to position 1 it is itself).
DEFAULT_EXAM_PROB = tuple(1.0 / k for k in range(1, 11))
#: P(click | examined, label y), y = 0..4.
DEFAULT_CLICK_PROB = (0.05, 0.25, 0.45, 0.7, 0.95)


@dataclass(frozen=True)
class SessionLog:
    """Logged sessions of generated queries.

    Attributes:
        queries: [Q] the queries, documents in the base (initial ranker's) order.
        query: [S] int64 the query of each session.
        shown: [S, N] int64 per position, the index of the shown document in its query.
        clicks: [S, N] bool the logged clicks.
        exam_prob: [N] the click model's examination per position.
        click_prob: [max_label + 1] the click model's click probability per label.
    """

    queries: List[RankedQuery]
    query: np.ndarray
    shown: np.ndarray
    clicks: np.ndarray
    exam_prob: np.ndarray
    click_prob: np.ndarray

    @property
    def n_positions(self) -> int:
        return int(self.shown.shape[1])


def adjacent_swaps(n_sessions: int, n_positions: int, swap_prob: float, rng: np.random.Generator) -> np.ndarray:
    """[S, N] int64 per session a permutation of 0..N-1: disjoint adjacent pairs from a random offset, each swapped
    with probability ``swap_prob``."""
    order = np.tile(np.arange(n_positions), (n_sessions, 1))
    offset = rng.integers(0, 2, size=n_sessions)
    for first in range(n_positions - 1):
        swap = (first % 2 == offset) & (rng.random(n_sessions) < swap_prob)
        order[swap, first], order[swap, first + 1] = order[swap, first + 1], order[swap, first]
    return order


def pbm_session_log(
    n_queries: int,
    n_sessions: int,
    exam_prob: Sequence[float] = DEFAULT_EXAM_PROB,
    click_prob: Sequence[float] = DEFAULT_CLICK_PROB,
    swap_prob: float = 0.5,
    n_features: int = 20,
    seed: int = 0,
) -> SessionLog:
    """Sessions of ``n_queries`` generated queries of N = len(exam_prob) documents each (see the module docstring);
    a pure function of its arguments."""
    n_positions, max_label = len(exam_prob), len(click_prob) - 1
    queries = list(iter_synthetic_queries(n_queries, (n_positions, n_positions), n_features, max_label, seed,
                                          qid_prefix="q"))
    rng = np.random.default_rng([seed, 1])
    query = rng.integers(0, n_queries, size=n_sessions)
    shown = adjacent_swaps(n_sessions, n_positions, swap_prob, rng)
    labels = np.stack([q.labels for q in queries])[query[:, None], shown]
    model = PositionBasedModel(click_prob, exam_prob)
    mask = torch.ones(labels.shape, dtype=torch.bool)
    probabilities = model.click_probabilities(torch.from_numpy(labels), mask).numpy()
    clicks = rng.random(labels.shape) < probabilities
    return SessionLog(queries, query, shown, clicks, np.asarray(exam_prob, float), np.asarray(click_prob, float))


def _write_lists(directory: str, split: str, queries: List[RankedQuery], rows: List[str], labels_name: str,
                 label_rows: List[str]) -> None:
    base = os.path.join(directory, split)
    features = ["%s %s" % (doc_id, _format_features(row)) for q in queries for doc_id, row in zip(q.doc_ids, q.features)]
    atomic_write_text(os.path.join(base, split + ".feature"), "\n".join(line.rstrip() for line in features) + "\n")
    atomic_write_text(os.path.join(base, split + ".init_list"), "\n".join(rows) + "\n")
    atomic_write_text(os.path.join(base, labels_name), "\n".join(label_rows) + "\n")


def write_ultre_dataset(
    directory: str, log: SessionLog, click_model_dir: str = "pbm/", eval_queries: int = 10, seed: int = 0
) -> str:
    """Write ``log`` as the training split of a ULTRE-layout data directory; returns its path (with '/').

    ``train/``: the log's queries' documents, one ``.init_list`` line per
    session in displayed order, its clicks in ``train/<click_model_dir>train.labels``.
    ``valid/`` and ``test/``: ``eval_queries`` new queries each (same feature
    signal), their top N in the base order with relevance grades in ``S/S.labels``.
    """
    feature_size = log.queries[0].features.shape[1]
    max_label = len(log.click_prob) - 1
    rows, clicks = [], []
    for q, order, session_clicks in zip(log.query, log.shown, log.clicks):
        query = log.queries[q]
        rows.append("%s:%s" % (query.qid, " ".join(query.doc_ids[i] for i in order)))
        clicks.append("%s:%s" % (query.qid, " ".join("%d" % c for c in session_clicks)))
    _write_lists(directory, "train", log.queries, rows, click_model_dir + "train.labels", clicks)
    for offset, split in enumerate(("valid", "test"), start=1):
        queries = list(iter_synthetic_queries(eval_queries, (log.n_positions, log.n_positions), feature_size,
                                              max_label, seed + 1000 * offset, qid_prefix=split))
        rows = ["%s:%s" % (q.qid, " ".join(q.doc_ids)) for q in queries]
        grades = ["%s:%s" % (q.qid, " ".join("%d" % y for y in q.labels)) for q in queries]
        _write_lists(directory, split, queries, rows, split + ".labels", grades)
    write_settings(directory, feature_size, max_label)
    return ultra_data_dir(directory)
