"""TREC run and qrels files, written atomically.

Run file lines: ``qid Q0 docid rank score tag`` (rank from 1, documents in
decreasing score; ties keep the input order, as in :mod:`.metrics`).  Qrels
lines: ``qid 0 docid label``.  trec_eval itself re-sorts a run by score and
breaks ties by docid, so on tied scores its numbers can differ from ours.
"""
from __future__ import annotations

from typing import Iterable, List, Sequence, Tuple

import numpy as np

from ultra_multr.files import atomic_write_text

#: (qid, doc_ids [n], values [n]) for one query.
QueryRows = Tuple[str, Sequence[str], np.ndarray]


def _check_token(value: str, what: str) -> str:
    if not value or any(c.isspace() for c in value):
        raise ValueError("%s %r must be non-empty and contain no whitespace" % (what, value))
    return value


def format_run(queries: Iterable[QueryRows], tag: str) -> str:
    """The text of a TREC run file.

    Args:
        queries: per query ``(qid, doc_ids, scores)`` with ``scores`` [n].
        tag: the run name in the last column.
    """
    _check_token(tag, "run tag")
    lines: List[str] = []
    for qid, doc_ids, scores in queries:
        scores = np.asarray(scores, dtype=np.float64)
        if len(doc_ids) != scores.size:
            raise ValueError("query %s: %d doc ids but %d scores" % (qid, len(doc_ids), scores.size))
        _check_token(qid, "qid")
        for rank, index in enumerate(np.argsort(-scores, kind="stable"), start=1):
            doc_id = _check_token(doc_ids[index], "docid of query %s" % qid)
            lines.append("%s Q0 %s %d %.9g %s" % (qid, doc_id, rank, scores[index], tag))
    return "".join(line + "\n" for line in lines)


def format_qrels(queries: Iterable[QueryRows]) -> str:
    """The text of a qrels file from per query ``(qid, doc_ids, labels)``."""
    lines: List[str] = []
    for qid, doc_ids, labels in queries:
        _check_token(qid, "qid")
        if len(doc_ids) != len(labels):
            raise ValueError("query %s: %d doc ids but %d labels" % (qid, len(doc_ids), len(labels)))
        for doc_id, label in zip(doc_ids, labels):
            if label != int(label):
                raise ValueError("query %s, doc %s: qrels labels must be integers, got %r" % (qid, doc_id, label))
            lines.append("%s 0 %s %d" % (qid, _check_token(doc_id, "docid of query %s" % qid), int(label)))
    return "".join(line + "\n" for line in lines)


def write_run(path: str, queries: Iterable[QueryRows], tag: str) -> None:
    """Write a TREC run file (see :func:`format_run`) atomically."""
    atomic_write_text(path, format_run(queries, tag))


def write_qrels(path: str, queries: Iterable[QueryRows]) -> None:
    """Write a qrels file (see :func:`format_qrels`) atomically."""
    atomic_write_text(path, format_qrels(queries))
