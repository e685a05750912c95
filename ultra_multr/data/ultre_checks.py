"""Checks of one split in ULTRA's ULTRE layout (``main.py --click_model_dir``), naming ``file:line``.

The layout is described in :mod:`ultra_multr.data.ultre`.  ULTRA's ULTRE
reader takes the first ``qid:`` of each line apart without a look at the
rest, keeps the last of two ``.feature`` lines with the same document id,
reads labels with ``int()`` (a click rate stops it with a bare ValueError)
and pairs ``.init_list`` and ``.labels`` lines by their order only, so a
labels file one line short shifts every session's clicks silently.
:func:`~ultra_multr.data.checks.check_data_dir` with a ``click_model_dir``
checks the layout with :func:`check_ultre_files`, which reads each file once
(hashing it on the way, for the check cache and the data fingerprint, as for
ULTRA's own layout) and raises :class:`~ultra_multr.data.checks.DataCheckError`
at the first problem:

- every file ends in a newline; ``.feature`` lines are ``docid index:value ...``
  with indices in 1..feature_size and finite values
  (:func:`~ultra_multr.data.feature_fields.checked_feature_blocks`), and no document id
  has two lines;
- ``.init_list`` lines are ``qid:docid docid ...`` with document ids of ``.feature``;
- the labels file ULTRA takes (:func:`~ultra_multr.data.ultre.labels_path`)
  has one ``qid:label ...`` line per ``.init_list`` line, with the same qid
  and one integer label per document: 0/1 clicks in the click model's file,
  0..max_label grades in ``S/S.labels``;
- at least one list has two or more documents (ULTRA drops the others).
"""
from __future__ import annotations

from typing import Dict, Iterable, Iterator, List, Tuple

from ultra_multr.data.feature_fields import DataCheckError, checked_feature_blocks, line_blocks, separator_checked
from ultra_multr.data.settings import DataSettings


def check_ultre_files(
    split: str, base: str, labels: str, settings: DataSettings, digests: Dict, warnings: List[str]
) -> Tuple[int, int, int]:
    """Check one ULTRE-layout split (see the module docstring); returns (documents, lists, lists of two or more
    documents).

    Args:
        split: the split's name.
        base: ``<data_dir>/S/S``, the prefix of its ``.feature`` and ``.init_list``.
        labels: the labels file ULTRA takes (:func:`~ultra_multr.data.ultre.labels_path`).
        settings: the data directory's settings.
        digests: ".feature", ".init_list" and ".labels" (``labels``) -> the hash every byte read goes into.
        warnings: the warnings given are appended here.

    Raises:
        DataCheckError: naming the file and line (or the split) of the first problem.
    """
    documents = _document_ids(base + ".feature", settings.feature_size, digests[".feature"], warnings)
    lists = _qid_lines(base + ".init_list", "docid", digests[".init_list"])
    for number, (qid, doc_ids) in enumerate(lists, start=1):
        unknown = [doc_id for doc_id in doc_ids if doc_id not in documents]
        if unknown:
            raise DataCheckError(
                "%s.init_list:%d: query %s lists document %s, which has no line in %s.feature"
                % (base, number, qid, unknown[0], base)
            )
    clicks = labels != base + ".labels"
    high = 1 if clicks else settings.max_label
    label_lines = _qid_lines(labels, "label", digests[".labels"])
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
    kept = sum(1 for _, doc_ids in lists if len(doc_ids) >= 2)
    if not kept:
        raise DataCheckError(
            "split %r (%s.init_list): none of its %d lists has two or more documents, so ULTRA keeps none"
            % (split, base, len(lists))
        )
    return len(documents), len(lists), kept


def _lines(blocks: Iterable[Tuple[int, bytes]]) -> Iterator[Tuple[int, str]]:
    """(line number, line without its newline) of :func:`~ultra_multr.data.feature_fields.line_blocks`' blocks."""
    for first, block in blocks:
        yield from enumerate(block.decode().split("\n")[:-1], start=first)


def _document_ids(path: str, feature_size: int, digest, warnings: List[str]) -> Dict[str, int]:
    """Check a ``.feature`` file; returns document id -> its line, refusing an id with two lines."""
    seen: Dict[str, int] = {}
    for number, line in _lines(checked_feature_blocks(path, feature_size, digest, warnings)):
        doc_id = line.split(" ", 1)[0].strip()
        if doc_id in seen:
            raise DataCheckError(
                "%s:%d: document %s already has line %d; expected one line per document id (ULTRA would keep "
                "the last)" % (path, number, doc_id, seen[doc_id])
            )
        seen[doc_id] = number
    return seen


def _qid_lines(path: str, what: str, digest) -> List[Tuple[str, List[str]]]:
    """``qid:v0 v1 ...`` lines -> [(qid, [v0, v1, ...])]."""
    rows = []
    for number, line in _lines(separator_checked(path, line_blocks(path, digest), "qid:%s" % what)):
        fields = line.split()
        qid, sep, first = fields[0].partition(":") if fields else ("", "", "")
        if not sep or not qid or not first:
            raise DataCheckError(
                "%s:%d: %r; expected 'qid:%s %s ...' (ULTRE layout: the qid and the first %s joined by ':')"
                % (path, number, line.strip()[:60], what, what, what)
            )
        rows.append((qid, [first] + fields[1:]))
    return rows
