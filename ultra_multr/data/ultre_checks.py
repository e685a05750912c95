"""Checks of one split in ULTRA's ULTRE layout (``main.py --click_model_dir``), naming ``file:line``.

The layout is described in :mod:`ultra_multr.data.ultre`.  ULTRA's ULTRE
reader takes the first ``qid:`` of each line apart without a look at the
rest, keeps the last of two ``.feature`` lines with the same document id,
reads labels with ``int()`` (a click rate stops it with a bare ValueError)
and pairs ``.init_list`` and ``.labels`` lines by their order only, so a
labels file one line short shifts every session's clicks silently.
:func:`check_ultre_split` raises :class:`~ultra_multr.data.checks.DataCheckError`
at the first problem:

- every file ends in a newline; ``.feature`` lines are ``docid index:value ...``
  with indices in 1..feature_size and finite values
  (:func:`~ultra_multr.data.checks.check_feature_file`), and no document id
  has two lines;
- ``.init_list`` lines are ``qid:docid docid ...`` with document ids of ``.feature``;
- the labels file ULTRA takes (:func:`~ultra_multr.data.ultre.labels_path`)
  has one ``qid:label ...`` line per ``.init_list`` line, with the same qid
  and one integer label per document: 0/1 clicks in the click model's file,
  0..max_label grades in ``S/S.labels``;
- at least one list has two or more documents (ULTRA drops the others).
"""
from __future__ import annotations

import os
from typing import List, Tuple

from .checks import DataCheckError, DataSettings, check_ends_in_newline, check_feature_file


def check_ultre_split(data_dir: str, split: str, click_model_dir: str, settings: DataSettings) -> int:
    """Check one ULTRE-layout split (see the module docstring); returns its number of lists.

    Raises:
        DataCheckError: naming the file and line (or the split) of the first problem.
    """
    from .ultre import labels_path  # here: ultre needs ULTRA, the checks do not

    base = os.path.join(data_dir, split, split)
    for suffix in (".feature", ".init_list"):
        if not os.path.isfile(base + suffix):
            raise DataCheckError("split %r: %s%s does not exist" % (split, base, suffix))
    labels = labels_path(data_dir, split, click_model_dir)
    if not os.path.isfile(labels):
        raise DataCheckError(
            "split %r: neither %s nor %s exists (main.py --click_model_dir %r)"
            % (split, os.path.join(data_dir, split, click_model_dir + split + ".labels"), labels, click_model_dir)
        )
    check_feature_file(base + ".feature", settings.feature_size)
    documents = _document_ids(base + ".feature")
    lists = _qid_lines(base + ".init_list", "docid")
    for number, (qid, doc_ids) in enumerate(lists, start=1):
        unknown = [doc_id for doc_id in doc_ids if doc_id not in documents]
        if unknown:
            raise DataCheckError(
                "%s.init_list:%d: query %s lists document %s, which has no line in %s.feature"
                % (base, number, qid, unknown[0], base)
            )
    clicks = labels != base + ".labels"
    high = 1 if clicks else settings.max_label
    label_lines = _qid_lines(labels, "label")
    if len(label_lines) != len(lists):
        raise DataCheckError(
            "%s has %d lines but %s.init_list has %d; expected one line per logged list in both"
            % (labels, len(label_lines), base, len(lists))
        )
    for number, ((qid, doc_ids), (label_qid, values)) in enumerate(zip(lists, label_lines), start=1):
        if label_qid != qid or len(values) != len(doc_ids):
            raise DataCheckError(
                "%s:%d: query %s with %d labels; expected query %s with %d labels as in %s.init_list:%d"
                % (labels, number, label_qid, len(values), qid, len(doc_ids), base, number)
            )
        for value in values:
            try:
                label = int(value)
            except ValueError:
                label = None
            if label is None or not 0 <= label <= high:
                raise DataCheckError(
                    "%s:%d: query %s has label %r; expected %s (ULTRA reads ULTRE labels as integers)"
                    % (labels, number, qid, value,
                       "a click, 0 or 1" if clicks else "an integer grade 0..%g (max_label of settings.json)" % high)
                )
    if not any(len(doc_ids) >= 2 for _, doc_ids in lists):
        raise DataCheckError(
            "split %r (%s.init_list): none of its %d lists has two or more documents, so ULTRA keeps none"
            % (split, base, len(lists))
        )
    return len(lists)


def _document_ids(path: str) -> set:
    """The document ids of a checked ``.feature`` file, refusing one with two lines."""
    seen = {}
    with open(path) as handle:
        for number, line in enumerate(handle, start=1):
            doc_id = line.split(" ", 1)[0].strip()
            if doc_id in seen:
                raise DataCheckError(
                    "%s:%d: document %s already has line %d; expected one line per document id (ULTRA would keep "
                    "the last)" % (path, number, doc_id, seen[doc_id])
                )
            seen[doc_id] = number
    return set(seen)


def _qid_lines(path: str, what: str) -> List[Tuple[str, List[str]]]:
    """``qid:v0 v1 ...`` lines -> [(qid, [v0, v1, ...])]."""
    check_ends_in_newline(path)
    rows = []
    with open(path) as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            qid, sep, first = fields[0].partition(":") if fields else ("", "", "")
            if not sep or not qid or not first:
                raise DataCheckError(
                    "%s:%d: %r; expected 'qid:%s %s ...' (ULTRE layout: the qid and the first %s joined by ':')"
                    % (path, number, line.strip()[:60], what, what, what)
                )
            rows.append((qid, [first] + fields[1:]))
    return rows
