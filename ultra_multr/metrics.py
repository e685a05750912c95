"""Per-query nDCG@k and ERR@k with ULTRA's conventions, in pure numpy.

ULTRA (``ultra/utils/metrics.py``) computes batch means in torch; the
significance test needs one value per query, so we recompute them here with
the same definitions:

* ranking: documents sorted by decreasing score.  Ties are broken by the
  position in the input arrays (the initial ranking's order), so a result is
  reproducible; ULTRA's ``torch.sort`` leaves the order of ties unspecified.
* nDCG@k: gain ``2^y - 1``, discount ``1 / log2(rank + 1)``, normalised by the
  DCG@k of the labels sorted decreasingly; a query whose ideal DCG is 0 (no
  relevant document) scores 0, like ULTRA's ``_safe_div``.
* ERR@k: grade probability ``R = (2^y - 1) / 2^ymax`` (ULTRA divides by
  ``2^ymax``, not ``2^ymax - 1``), ``ERR@k = sum_{i<=k} R_i prod_{j<i} (1 - R_j) / i``;
  not normalised.
* a cutoff larger than the list uses the whole list (ULTRA pads with label 0,
  which adds nothing).
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np

#: The cutoffs of the paper's Table 2.
CUTOFFS = (1, 3, 5, 10)
#: The metric families of Table 2, in column order.
METRIC_FAMILIES = ("ndcg", "err")


def metric_names(cutoffs: Sequence[int] = CUTOFFS) -> List[str]:
    """Column names in Table 2 order: ``ndcg_1, ..., ndcg_10, err_1, ..., err_10``."""
    return ["%s_%d" % (family, k) for family in METRIC_FAMILIES for k in cutoffs]


def _check_query(labels: np.ndarray, scores: np.ndarray) -> None:
    if labels.ndim != 1 or labels.shape != scores.shape:
        raise ValueError(
            "labels and scores must be 1-D arrays of equal length, got shapes %s and %s"
            % (labels.shape, scores.shape)
        )
    if labels.size and (np.any(labels < 0) or not np.all(np.isfinite(labels))):
        raise ValueError("labels must be finite and >= 0, got %s" % labels)
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite, got %s" % scores)


def ranked_labels(labels: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Labels in the order of decreasing score (stable: ties keep input order).

    Args:
        labels: [n] graded relevance; scores: [n].

    Returns:
        [n] labels of the ranking.
    """
    labels = np.asarray(labels, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    _check_query(labels, scores)
    return labels[np.argsort(-scores, kind="stable")]


def _dcg(sorted_labels: np.ndarray, k: int) -> float:
    top = sorted_labels[:k]
    discounts = 1.0 / np.log2(np.arange(top.size) + 2.0)
    return float(np.sum((np.power(2.0, top) - 1.0) * discounts))


def ndcg_at_k(labels: np.ndarray, scores: np.ndarray, k: int) -> float:
    """nDCG@k of one query (0 when the query has no relevant document)."""
    ranked = ranked_labels(labels, scores)
    ideal = _dcg(np.sort(ranked)[::-1], k)
    return _dcg(ranked, k) / ideal if ideal > 0 else 0.0


def dcg_at_k(labels: np.ndarray, scores: np.ndarray, k: int) -> float:
    """DCG@k of one query (gain ``2^y - 1``, discount ``1 / log2(rank + 1)``; not normalised)."""
    return _dcg(ranked_labels(labels, scores), k)


def mrr_at_k(labels: np.ndarray, scores: np.ndarray, k: int) -> float:
    """Reciprocal rank of the first document with label >= 1 among the top k (0 if none), as ULTRA's MRR."""
    relevant = np.flatnonzero(ranked_labels(labels, scores)[:k] >= 1.0)
    return 1.0 / (relevant[0] + 1.0) if relevant.size else 0.0


def err_at_k(labels: np.ndarray, scores: np.ndarray, k: int, max_label: float) -> float:
    """ERR@k of one query; ``max_label`` is the dataset's (settings.json)."""
    ranked = ranked_labels(labels, scores)
    if np.any(ranked > max_label):
        # R would reach 1 or more: not a probability (and ULTRA divides by 1 - R).
        raise ValueError("label %g exceeds max_label %g" % (ranked.max(), max_label))
    stop = (np.power(2.0, ranked[:k]) - 1.0) / np.power(2.0, max_label)
    reach = np.cumprod(np.concatenate([[1.0], 1.0 - stop[:-1]]))
    return float(np.sum(stop * reach / np.arange(1, stop.size + 1)))


def query_metrics(
    labels: np.ndarray, scores: np.ndarray, max_label: float, cutoffs: Sequence[int] = CUTOFFS
) -> Dict[str, float]:
    """All Table 2 metrics of one query, keyed by :func:`metric_names`.

    Args:
        labels: [n] graded relevance in 0..max_label.
        scores: [n] ranking scores.
        max_label: the dataset's maximum label (for ERR).
        cutoffs: the k values.
    """
    values = {"ndcg_%d" % k: ndcg_at_k(labels, scores, k) for k in cutoffs}
    values.update({"err_%d" % k: err_at_k(labels, scores, k, max_label) for k in cutoffs})
    return values


def per_query_metrics(
    labels: Sequence[np.ndarray],
    scores: Sequence[np.ndarray],
    max_label: float,
    cutoffs: Sequence[int] = CUTOFFS,
) -> Dict[str, np.ndarray]:
    """Metrics for many queries of variable length.

    Args:
        labels: Q arrays, query q of shape [n_q].
        scores: Q arrays aligned with ``labels``.

    Returns:
        metric name -> [Q] values, names in :func:`metric_names` order.
    """
    if len(labels) != len(scores):
        raise ValueError("%d label arrays but %d score arrays" % (len(labels), len(scores)))
    names = metric_names(cutoffs)
    table = np.zeros((len(names), len(labels)))
    for q, (query_labels, query_scores) in enumerate(zip(labels, scores)):
        try:
            values = query_metrics(query_labels, query_scores, max_label, cutoffs)
        except ValueError as error:
            raise ValueError("query %d: %s" % (q, error)) from None
        table[:, q] = [values[name] for name in names]
    return dict(zip(names, table))
