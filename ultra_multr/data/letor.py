"""Reading raw LETOR / SVMlight ranking files.

One line per query-document pair::

    label qid:Q 1:v 3:v ... # free comment, e.g. docid = GX008-86-4444840 inc = 1

Labels are non-negative integers (graded relevance), feature indices are
1-based and sparse (absent features are 0), and the trailing ``#`` comment is
part of the real format (LETOR 4.0 puts the document id there).  Blank lines
and comment-only lines are skipped.  A malformed line raises
:class:`LetorFormatError` naming the file, the line number and the problem;
a query's lines must be one block of consecutive lines (a qid that comes
back after another query, as in two files concatenated whose qids collide,
is refused naming both blocks: :class:`~ultra_multr.data.checks.QidBlocks`).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ultra_multr.data.checks import QidBlocks

_DOCID = re.compile(r"\bdocid\s*=\s*(\S+)")


class LetorFormatError(ValueError):
    """A LETOR file is malformed; the message starts with ``file:line:``."""


@dataclass
class LetorQuery:
    """One query's documents in file order.

    Attributes:
        qid: query id as written after ``qid:``.
        doc_ids: [n] the ``docid = ...`` of each line's comment, or
            ``<qid>-d<i>`` (i = position in the query) when there is none.
        features: [n, F] float64 dense features (absent indices are 0).
        labels: [n] int64 relevance labels.
    """

    qid: str
    doc_ids: List[str]
    features: np.ndarray
    labels: np.ndarray


@dataclass
class LetorFile:
    """The queries of one file, in order of their first line.

    Attributes:
        path: the file read.
        queries: its queries; ``features`` have ``feature_size`` columns.
        feature_size: F, the width of the feature arrays.
        max_label: the largest label in the file.
    """

    path: str
    queries: List[LetorQuery]
    feature_size: int
    max_label: int


@dataclass
class _QueryLines:
    """A query's lines while parsing: sparse features, first line for errors."""

    doc_ids: List[Optional[str]]
    labels: List[int]
    indices: List[np.ndarray]
    values: List[np.ndarray]
    first_line: int


def _parse_line(text: str, where: str) -> Optional[Tuple[int, str, np.ndarray, np.ndarray, Optional[str]]]:
    """(label, qid, 0-based indices, values, docid) of one line; None if it holds no data."""
    body, _, comment = text.partition("#")
    tokens = body.split()
    if not tokens:
        return None
    if len(tokens) < 2:
        raise LetorFormatError("%s: expected 'label qid:<id> index:value ...', got %r" % (where, body.strip()))
    try:
        label_value = float(tokens[0])
    except ValueError:
        raise LetorFormatError("%s: label %r is not a number" % (where, tokens[0])) from None
    if not (label_value >= 0 and label_value == int(label_value)):
        raise LetorFormatError("%s: label %r is not a non-negative integer" % (where, tokens[0]))
    if not tokens[1].startswith("qid:") or len(tokens[1]) == 4:
        raise LetorFormatError("%s: second field %r is not 'qid:<id>'" % (where, tokens[1]))
    indices: List[int] = []
    values: List[float] = []
    for token in tokens[2:]:
        index_text, sep, value_text = token.partition(":")
        if not sep:
            raise LetorFormatError("%s: feature %r is not 'index:value'" % (where, token))
        try:
            index = int(index_text)
        except ValueError:
            raise LetorFormatError("%s: feature index %r is not an integer" % (where, index_text)) from None
        if index < 1:
            raise LetorFormatError("%s: feature index %d is below 1 (indices are 1-based)" % (where, index))
        try:
            value = float(value_text)
        except ValueError:
            raise LetorFormatError("%s: value %r of feature %d is not a number" % (where, value_text, index)) from None
        if not math.isfinite(value):
            raise LetorFormatError("%s: value of feature %d is %r, not finite" % (where, index, value_text))
        indices.append(index - 1)
        values.append(value)
    if len(set(indices)) != len(indices):
        repeated = next(i for k, i in enumerate(indices) if i in indices[:k])
        raise LetorFormatError("%s: feature index %d appears twice" % (where, repeated + 1))
    match = _DOCID.search(comment)
    doc_id = match.group(1) if match else None
    return int(label_value), tokens[1][4:], np.asarray(indices, np.int64), np.asarray(values), doc_id


def _parse_file(path: str) -> Dict[str, _QueryLines]:
    queries: Dict[str, _QueryLines] = {}
    blocks = QidBlocks(path, "ultra-multr-prepare")
    with open(path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            where = "%s:%d" % (path, number)
            parsed = _parse_line(text, where)
            if parsed is None:
                continue
            label, qid, indices, values, doc_id = parsed
            blocks.add(number, qid)
            lines = queries.setdefault(qid, _QueryLines([], [], [], [], number))
            if doc_id is not None and doc_id in lines.doc_ids:
                raise LetorFormatError(
                    "%s: docid %s appears twice in query %s (first in the query at line %d)"
                    % (where, doc_id, qid, lines.first_line)
                )
            lines.doc_ids.append(doc_id)
            lines.labels.append(label)
            lines.indices.append(indices)
            lines.values.append(values)
    if not queries:
        raise LetorFormatError("%s: no data lines" % path)
    return queries


def _densify(qid: str, lines: _QueryLines, feature_size: int) -> LetorQuery:
    features = np.zeros((len(lines.labels), feature_size), dtype=np.float64)
    for row, (indices, values) in enumerate(zip(lines.indices, lines.values)):
        features[row, indices] = values
    doc_ids = [d if d is not None else "%s-d%d" % (qid, i) for i, d in enumerate(lines.doc_ids)]
    return LetorQuery(qid, doc_ids, features, np.asarray(lines.labels, dtype=np.int64))


def read_letor_files(paths: Sequence[str]) -> List[LetorFile]:
    """Read several LETOR files with one common feature width.

    F is the largest feature index in any of the files, so that splits read
    from different files share the same feature space.
    """
    parsed = [_parse_file(path) for path in paths]
    feature_size = max(
        (int(i.max()) + 1 for queries in parsed for lines in queries.values() for i in lines.indices if len(i)),
        default=0,
    )
    if feature_size == 0:
        raise LetorFormatError("%s: no line has any feature" % ", ".join(paths))
    files = []
    for path, queries in zip(paths, parsed):
        max_label = max(max(lines.labels) for lines in queries.values())
        files.append(
            LetorFile(
                path=path,
                queries=[_densify(qid, lines, feature_size) for qid, lines in queries.items()],
                feature_size=feature_size,
                max_label=max_label,
            )
        )
    return files


def read_letor(path: str) -> LetorFile:
    """Read one LETOR file; F is its largest feature index."""
    return read_letor_files([path])[0]
