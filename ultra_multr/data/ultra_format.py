"""Writing ULTRA's on-disk data formats (its own, and the libsvm layout its reader also takes).

A ULTRA data directory holds ``settings.json`` (``feature_size``, ``max_label``)
and, per split ``S``, ``S/S.feature`` (one line per document:
``docid 1:v 2:v ...``), ``S/S.init_list`` (``qid i0 i1 ...``: indices into that
split's feature lines, in the initial ranking's order), ``S/S.labels`` and
``S/S.initial_scores`` (``qid v0 v1 ...`` aligned with the initial list).

Every file is written to a temporary name in the same directory and renamed
into place, so an interrupted run never leaves a half-written file behind.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Iterable, List, Sequence

import numpy as np

from ultra_multr.files import atomic_text_writers, atomic_write_text


@dataclass
class RankedQuery:
    """One query's candidate documents in the order of the initial ranking.

    Attributes:
        qid: query id.
        doc_ids: [n] document ids (strings, unique within the split).
        features: [n, feature_size] float array.
        labels: [n] graded relevance labels.
        initial_scores: [n] scores of the initial ranker, non-increasing.
    """

    qid: str
    doc_ids: List[str]
    features: np.ndarray
    labels: np.ndarray
    initial_scores: np.ndarray


def _format_features(row: np.ndarray) -> str:
    # Sparse like LETOR: zeros are implicit.
    return " ".join("%d:%.6g" % (j + 1, v) for j, v in enumerate(row) if v != 0.0)


def write_split(directory: str, split: str, queries: Iterable[RankedQuery]) -> int:
    """Write one split of a ULTRA data directory; returns the number of queries.

    Streams: ``queries`` may be a generator, and only one query's lines are
    held at a time (the files appear, atomically, when all are written).
    """
    base = os.path.join(directory, split, split)
    paths = [base + suffix for suffix in (".feature", ".init_list", ".labels", ".initial_scores")]
    count = documents = 0
    with atomic_text_writers(paths) as handles:
        features, init_list, labels, scores = (handles[path] for path in paths)
        for query in queries:
            indices = [str(documents + i) for i in range(len(query.doc_ids))]
            features.write("".join(
                ("%s %s" % (doc_id, _format_features(row))).rstrip() + "\n"
                for doc_id, row in zip(query.doc_ids, query.features)
            ))
            documents += len(query.doc_ids)
            init_list.write(" ".join([query.qid] + indices) + "\n")
            labels.write(" ".join([query.qid] + ["%g" % y for y in query.labels]) + "\n")
            scores.write(" ".join([query.qid] + ["%.8g" % s for s in query.initial_scores]) + "\n")
            count += 1
    return count


def write_libsvm_split(directory: str, split: str, queries: Iterable[RankedQuery]) -> int:
    """Write one split in the libsvm layout ULTRA's reader also takes, ``S/S.txt``; returns the number of queries.

    One line per document in the initial ranking's order, ``label qid:Q index:value ...``
    (integer labels: ULTRA reads them with ``int``; no comments: it cannot read them).
    """
    lines = [
        ("%d qid:%s %s" % (label, query.qid, _format_features(row))).rstrip()
        for query in queries
        for label, row in zip(query.labels, query.features)
    ]
    atomic_write_text(os.path.join(directory, split, split + ".txt"), "\n".join(lines) + "\n")
    return len({line.split(" ")[1] for line in lines})


def write_settings(directory: str, feature_size: int, max_label: float) -> None:
    atomic_write_text(
        os.path.join(directory, "settings.json"),
        json.dumps({"feature_size": int(feature_size), "max_label": float(max_label)}) + "\n",
    )


def ultra_data_dir(path: str) -> str:
    """ULTRA joins paths by string concatenation: it needs the trailing slash."""
    return os.path.join(os.path.abspath(path), "")


def query_order(scores: Sequence[float]) -> np.ndarray:
    """Indices that sort ``scores`` in decreasing order (stable for ties)."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
