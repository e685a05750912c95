"""Checks of a data directory as ULTRA's main.py reads it, with errors that name the file and line.

ULTRA's reader (``ultra.utils.data_utils.Raw_data``) accepts bad data quietly
or fails far away from the cause: it drops feature indices above
``feature_size`` without a word, reads ``nan`` / ``inf`` features as numbers
(NaN test features still give plausible metrics under ``--test_only``, NaN
training features surface as a non-finite loss), takes a cut-short last line
as a document, and says only "No valid query has been found." for a split
with no usable query.  :func:`check_data_dir` reads the files once and raises
:class:`DataCheckError` at the first problem, naming ``file:line`` (or the
split) and what was expected.  The same read hashes every file, so the model
dir's identity and MULTR's simulator checkpoint need no second pass
(:func:`data_fingerprint`).  A split that passed before with the same
bytes (:mod:`.check_cache`: stored per paths, sizes and times, verified by
SHA-256) is only hashed, not parsed again: at Yahoo's size a full check costs
about as much as ULTRA's own read.

Layouts, chosen per split ``S`` as ULTRA chooses them (by the files present):

- ULTRA's own: ``S/S.feature`` (``docid index:value ...``), ``S/S.init_list``
  (``qid i0 i1 ...``, indices of ``.feature`` lines) and ``S/S.labels`` (the
  same queries in the same order, one label per listed document);
- libsvm: ``S/S.txt`` (``label qid:Q index:value ...``; the lines of one
  query together, in one block; integer labels; no ``#`` comments, which
  ULTRA cannot read);
- ULTRA's ULTRE layout, which ULTRA reads whenever main.py has a
  ``--click_model_dir``: checked by :mod:`.ultre_checks`, hashed and cached
  as the others.

All need ``settings.json`` with a positive integer ``feature_size`` and a
``max_label``; every file must end in a newline; labels lie in
0..max_label; at least one query is one ULTRA keeps (two or more documents,
a label > 0); fields are separated by single spaces (ULTRA splits on ``' '``
only: a tab glues two fields into one, a tab-separated line is one doc id
with every feature 0).  In the libsvm layout a qid's lines form one block
of consecutive lines (ULTRA's reader merges the lines of a qid wherever they
are, so two blocks, e.g. two files concatenated whose qids collide, silently
become one query), and with main.py's ``--max_list_cutoff`` N
(``list_cutoff``) no query has more than N lines: ULTRA's libsvm reader
skips the features of the lines past the cutoff but keeps counting lines, so
every later document would be read with another line's features.  In
ULTRA's own layout the split main.py ``--test_only`` ranks (``ranklist_split``) gives each qid one ``.init_list`` line: ULTRA
keys the ``test.ranklist`` it writes by qid, so a qid on two lines would be
written twice with the second line's ranking and the first's lost.  Other
splits may repeat a qid: a click log has one line per logged session (the
Baidu train stub), and main.py trains and validates on each line as a list.  Feature
indices follow ULTRA's semantics (:mod:`.feature_fields`): index 0 is
accepted with one warning per file (ULTRA puts it in the last slot); indices
ULTRA would drop, misplace or overwrite are refused.

Command line: ``python -m ultra_multr.data.checks DATA_DIR [--splits train valid test] [--click_model_dir DIR]
[--ranklist_split test] [--max_list_cutoff N]``, the checks main.py runs (:func:`check_main_py_data`: the
keywords of :func:`~ultra_multr.compat.early_checks.main_py_checks`, which the start-up hook's early checks pass
on this command line): ``--click_model_dir`` and ``--max_list_cutoff`` as main.py's; ``--ranklist_split``
(default ``test``, main.py's ``--test_data_prefix``): the split main.py ``--test_only`` writes a ranklist of,
whose qids must be unique (``--ranklist_split ''``: none).
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ultra_multr.compat.early_checks import main_py_checks, splits_main_py_reads, wait_for_early_checks
from ultra_multr.data import check_cache
from ultra_multr.data.feature_fields import (
    DataCheckError,
    ZeroIndexLines,
    check_feature_block,
    check_feature_file,
    check_separators,
    line_blocks,
    separator_checked,
    warn_zero_index,
)
from ultra_multr.data.settings import DataSettings, read_settings
from ultra_multr.data.ultre_checks import check_ultre_files

LOGGER = logging.getLogger("ultra_multr")

SPLITS = ("train", "valid", "test")
#: The files of a split per layout; ULTRE's ".labels" is the file :func:`.ultre.labels_path` names.
LAYOUT_FILES = {"ultra": (".feature", ".init_list", ".labels"), "libsvm": (".txt",),
                "ultre": (".feature", ".init_list", ".labels")}


@dataclass(frozen=True)
class SplitSummary:
    """Counts of one checked split and the files read.

    Attributes:
        layout: "ultra", "libsvm" or "ultre".
        documents: document lines (``.feature`` or ``.txt``).
        queries: queries (``.init_list`` lines, or distinct qids); ULTRE:
            logged lists (``.init_list`` lines).
        kept_queries: queries ULTRA keeps (>= 2 documents, a label > 0);
            ULTRE: lists of >= 2 documents.
        files: (path relative to the data dir, sha256) of each file read.
    """

    layout: str
    documents: int
    queries: int
    kept_queries: int
    files: Tuple[Tuple[str, str], ...]


def check_data_dir(
    data_dir: str, splits: Sequence[str] = SPLITS, click_model_dir: Optional[str] = None,
    ranklist_split: Optional[str] = None, list_cutoff: int = 0,
) -> Dict[str, SplitSummary]:
    """Check ``settings.json`` and each split; returns split -> summary.

    ``click_model_dir``: main.py's ``--click_model_dir``, under which ULTRA
    reads the ULTRE layout (None: ULTRA's own or libsvm).  ``ranklist_split``:
    the split main.py ``--test_only`` writes a ranklist of (its
    ``--test_data_prefix``), whose qids must each have one ``.init_list``
    line (:func:`check_unique_qids`); None: no such split.  ``list_cutoff``:
    main.py's ``--max_list_cutoff`` (0: none), which no libsvm query may
    exceed (:func:`_check_libsvm_split`).

    Raises:
        DataCheckError: at the first problem, naming the file and line or the split.
    """
    settings_path = os.path.join(os.path.abspath(data_dir), "settings.json")
    _STAT_AT_CHECK[settings_path] = _stat(settings_path)
    settings = read_settings(data_dir)
    summaries = {split: check_split(data_dir, split, settings, click_model_dir, split == ranklist_split, list_cutoff)
                 for split in splits}
    _CHECKED[(os.path.abspath(data_dir), click_model_dir)] = (settings, dict(summaries))
    return summaries


def split_layout(data_dir: str, split: str) -> str:
    """The layout ULTRA's reader takes for a split: "ultra" (``S/S.feature``) before "libsvm" (``S/S.txt``)."""
    base = os.path.join(data_dir, split, split)
    if os.path.isfile(base + ".feature"):
        return "ultra"
    if os.path.isfile(base + ".txt"):
        return "libsvm"
    raise DataCheckError(
        "split %r: neither %s.feature (ULTRA's format) nor %s.txt (libsvm) exists; ULTRA reads one of them"
        % (split, base, base)
    )


def split_files(data_dir: str, split: str, click_model_dir: Optional[str] = None) -> Tuple[str, List[str]]:
    """(layout, paths of :data:`LAYOUT_FILES`) of the files ULTRA's reader reads for a split, which exist.

    The layout is "ultre" with a ``click_model_dir`` (main.py's
    ``--click_model_dir``), else :func:`split_layout`'s.

    Raises:
        DataCheckError: a file is missing.
    """
    layout = split_layout(data_dir, split) if click_model_dir is None else "ultre"
    base = os.path.join(data_dir, split, split)
    paths = [base + suffix for suffix in LAYOUT_FILES[layout]]
    if layout == "ultre":
        from ultra_multr.data.ultre import labels_path  # here: ultre needs ULTRA, the checks do not

        paths[-1] = labels_path(data_dir, split, click_model_dir)
    for path in paths:
        if not os.path.isfile(path):
            if layout == "ultre" and path == paths[-1]:
                raise DataCheckError(
                    "split %r: neither %s nor %s exists (main.py --click_model_dir %r)"
                    % (split, os.path.join(data_dir, split, click_model_dir + split + ".labels"), path, click_model_dir)
                )
            raise DataCheckError("split %r: %s does not exist" % (split, path))
    return layout, paths


def check_split(
    data_dir: str, split: str, settings: DataSettings, click_model_dir: Optional[str] = None,
    unique_qids: bool = False, list_cutoff: int = 0,
) -> SplitSummary:
    """Check the files of one split in the layout ULTRA would read (see the module docstring;
    ``click_model_dir`` and ``list_cutoff`` as in :func:`check_data_dir`; ``unique_qids``: the split is the
    ranklist split, ULTRA's layout: each qid on one ``.init_list`` line)."""
    layout, paths = split_files(data_dir, split, click_model_dir)
    base = os.path.join(data_dir, split, split)
    for path in paths:  # taken before reading: a file changed while read shows as changed later
        _STAT_AT_CHECK[os.path.abspath(path)] = _stat(path)
    list_cutoff = list_cutoff if layout == "libsvm" else 0  # ULTRA's own layout cuts its lists correctly
    rules = {"layout": layout, "feature_size": settings.feature_size, "max_label": settings.max_label,
             "unique_qids": unique_qids, **({"list_cutoff": list_cutoff} if list_cutoff else {})}
    key = check_cache.stat_key(paths, rules)
    found = check_cache.lookup(key, paths)
    if found is not None:  # passed before, byte for byte: the lookup's hashing was the one read
        result, hashes = found
        for warning in result["warnings"]:
            LOGGER.warning(warning)
        LOGGER.info("data checks of %s: the files are the ones that passed on %s; not parsed again",
                    split, result["checked"])
        documents, n_queries, kept = result["documents"], result["queries"], result["kept_queries"]
    else:
        digests = {suffix: hashlib.sha256() for suffix in LAYOUT_FILES[layout]}
        warnings: List[str] = []
        if layout == "ultre":

            documents, n_queries, kept = check_ultre_files(split, base, paths[-1], settings, digests, warnings)
        else:
            if layout == "ultra":
                documents, qids, labels = _check_ultra_split(base, settings, digests, warnings, unique_qids)
            else:
                documents, qids, labels = _check_libsvm_split(base + ".txt", settings, digests[".txt"], warnings,
                                                              list_cutoff)
            kept = sum(1 for values in labels if len(values) >= 2 and values.sum() > 0)
            if kept == 0:
                raise DataCheckError(
                    "split %r (%s.*): none of its %d queries has two or more documents and a label > 0, so ULTRA "
                    "keeps none and stops with 'No valid query has been found.'" % (split, base, len(qids))
                )
            n_queries = len(qids)
        hashes = [digest.hexdigest() for digest in digests.values()]
        check_cache.store(key, hashes, {
            "documents": documents, "queries": n_queries, "kept_queries": kept, "warnings": warnings,
            "checked": time.strftime("%Y-%m-%d %H:%M:%S"),
        })
    files = tuple((os.path.relpath(path, data_dir), sha) for path, sha in zip(paths, hashes))
    return SplitSummary(layout=layout, documents=documents, queries=n_queries, kept_queries=kept, files=files)


def _check_ultra_split(
    base: str, settings: DataSettings, digests, warnings: List[str], unique_qids: bool
) -> Tuple[int, List[str], List[np.ndarray]]:
    documents = check_feature_file(base + ".feature", settings.feature_size, digests[".feature"], warnings)
    qids, lists = _read_lists(base + ".init_list", int, "document index", digests[".init_list"])
    label_qids, labels = _read_lists(base + ".labels", float, "label", digests[".labels"])
    if unique_qids:
        check_unique_qids(base + ".init_list", qids)
    for number, (qid, indices) in enumerate(zip(qids, lists), start=1):
        outside = (indices < 0) | (indices >= documents)
        if outside.any():
            raise DataCheckError(
                "%s.init_list:%d: query %s lists document index %d; expected 0..%d (%s.feature has %d lines)"
                % (base, number, qid, indices[outside][0], documents - 1, base, documents)
            )
    if len(label_qids) != len(qids):
        raise DataCheckError(
            "%s.labels has %d lines but %s.init_list has %d; expected one line per query in both"
            % (base, len(label_qids), base, len(qids))
        )
    for number, (qid, label_qid, indices, values) in enumerate(zip(qids, label_qids, lists, labels), start=1):
        if label_qid != qid or len(values) != len(indices):
            raise DataCheckError(
                "%s.labels:%d: query %s with %d labels; expected query %s with %d labels as in %s.init_list:%d"
                % (base, number, label_qid, len(values), qid, len(indices), base, number)
            )
        _check_label_range("%s.labels:%d: query %s" % (base, number, qid), values, settings)
    return documents, qids, labels


def check_unique_qids(path: str, qids: Sequence[str]) -> None:
    """Refuse a qid on two lines of the ``.init_list`` of the split main.py ``--test_only`` ranks
    (``qids[i]``: the qid of line i + 1).

    ULTRA keys its ranklist by qid (``generate_ranklist_by_scores``), then
    writes one block per line of ``.init_list``: both get the ranking of the
    qid's last line, and the other's is lost.

    Raises:
        DataCheckError: naming ``path:line`` of both lines.
    """
    first_line: Dict[str, int] = {}
    for number, qid in enumerate(qids, start=1):
        seen = first_line.setdefault(qid, number)
        if seen != number:
            raise DataCheckError(
                "%s:%d and %s:%d: query %s has two lines (two lists); ULTRA keys its output test.ranklist by qid, so "
                "it would write the ranking of line %d twice and lose the one of line %d. Give each list its own qid"
                % (path, seen, path, number, qid, number, seen)
            )


class QidBlocks:
    """The blocks of consecutive lines of each qid of a libsvm file, fed line by line; refuses a qid's second block.

    ULTRA's libsvm reader (and the LETOR reader of data preparation,
    ``reader``) merges every line of a qid into one query wherever it is, so
    a qid in two separate blocks (two files concatenated whose qids collide,
    a query split by a sort) silently becomes one query.
    """

    def __init__(self, path: str, reader: str = "ULTRA's libsvm reader") -> None:
        self.path = path
        self.reader = reader
        self.ended: Dict[str, Tuple[int, int]] = {}  # qid -> (first, last line) of its finished block
        self.qid: Optional[str] = None
        self.start = 0

    def add(self, number: int, qid: str) -> None:
        """Line ``number`` holds ``qid``.

        Raises:
            DataCheckError: ``qid`` already had a block; names ``path:first-last`` of it and ``path:number``.
        """
        if qid == self.qid:
            return
        if self.qid is not None:
            self.ended[self.qid] = (self.start, number - 1)
        if qid in self.ended:
            first, last = self.ended[qid]
            lines = str(first) if first == last else "%d-%d" % (first, last)
            raise DataCheckError(
                "%s:%s and %s:%d: query %s appears in two separate blocks of lines (lines %s, then from line %d on); "
                "%s would silently merge them into one query. Keep each query's lines together, and give different "
                "queries different qids" % (self.path, lines, self.path, number, qid, lines, number, self.reader)
            )
        self.qid, self.start = qid, number


def _check_label_range(where: str, values: np.ndarray, settings: DataSettings) -> None:
    outside = ~((values >= 0) & (values <= settings.max_label))
    if outside.any():
        raise DataCheckError(
            "%s has label %r; expected 0..%g (max_label of settings.json)" % (where, float(values[outside][0]), settings.max_label)
        )


def _check_libsvm_split(
    path: str, settings: DataSettings, digest, warnings: List[str], list_cutoff: int = 0
) -> Tuple[int, List[str], List[np.ndarray]]:
    """Check a libsvm ``S.txt``: ``label qid:Q index:value ...`` lines, a qid's lines in one block (:class:`QidBlocks`)
    and, with main.py's ``--max_list_cutoff`` (``list_cutoff`` > 0), at most that many (:func:`check_list_cutoff`),
    grouped by qid as ULTRA groups them."""
    labels_of: Dict[str, List[int]] = {}
    documents = 0
    zeros = ZeroIndexLines()
    blocks = QidBlocks(path)
    for first, block in line_blocks(path, digest):
        check_separators(path, first, block, "label")
        for number, line in enumerate(block.split(b"\n")[:-1], start=first):
            head = line.strip().split(b" ", 2)
            problem = _libsvm_head_problem(line, head)
            if problem:
                raise DataCheckError("%s:%d: %s" % (path, number, problem))
            label = int(head[0])
            qid = head[1][4:].decode(errors="replace")
            blocks.add(number, qid)
            _check_label_range("%s:%d: query %s" % (path, number, qid), np.array([label], dtype=np.float64), settings)
            labels_of.setdefault(qid, []).append(label)
            if list_cutoff and len(labels_of[qid]) > list_cutoff:
                raise libsvm_cutoff_error(path, number, qid, list_cutoff)
        # One head segment per line ("label_qid_Q"): the feature fields are checked like ULTRA's .feature lines.
        check_feature_block(path, first, block.replace(b" qid:", b"_qid_"), settings.feature_size, zeros, "label")
        documents += block.count(b"\n")
    warn_zero_index(zeros, path, settings.feature_size, warnings)
    return documents, list(labels_of), [np.array(values, dtype=np.float64) for values in labels_of.values()]


def libsvm_cutoff_error(path: str, number: int, qid: str, list_cutoff: int) -> DataCheckError:
    """Line ``number`` of a libsvm file is line ``list_cutoff + 1`` of query ``qid``, past main.py's
    ``--max_list_cutoff``: ULTRA's libsvm reader skips that line's features but numbers the later documents by
    line, so each of them would point at another line's features (or past the last one)."""
    return DataCheckError(
        "%s:%d: query %s has more lines than --max_list_cutoff %d; ULTRA's libsvm reader skips the features of the "
        "lines past the cutoff but keeps numbering documents by line, so every later document of the split would be "
        "read with another line's features. Cut each query to its first %d lines in the file, or leave "
        "--max_list_cutoff out" % (path, number, qid, list_cutoff, list_cutoff)
    )


def _libsvm_head_problem(line: bytes, head: List[bytes]):
    """What is wrong with a libsvm line's ``label qid:Q`` (None if nothing)."""
    if b"#" in line:
        return (
            "a '#' comment (%r); ULTRA's libsvm reader cannot read comments (it parses them as features): strip "
            "them, e.g. with ultra-multr-prepare" % line[line.index(b"#"):][:40].decode(errors="replace")
        )
    if len(head) < 2 or not head[0]:
        return "expected 'label qid:Q index:value ...', got %r" % line[:60].decode(errors="replace")
    try:
        int(head[0])
    except ValueError:
        return "label %r is not an integer (ULTRA reads libsvm labels with int())" % head[0].decode(errors="replace")
    if not head[1].startswith(b"qid:") or len(head[1]) == 4:
        return "second field %r is not 'qid:Q'" % head[1].decode(errors="replace")
    return None


#: (data dir, click_model_dir) -> (settings, split -> summary) of the last check in this process, and the
#: size and modification time of each file read then (see :func:`data_fingerprint`).
_CHECKED: Dict[Tuple[str, Optional[str]], Tuple[DataSettings, Dict[str, SplitSummary]]] = {}
_STAT_AT_CHECK: Dict[str, Tuple[int, int]] = {}


def data_fingerprint(data_dir: str, splits: Sequence[str], click_model_dir: Optional[str] = None) -> str:
    """SHA-256 of ``settings.json`` and every file ULTRA reads for ``splits``
    (``click_model_dir`` as in :func:`check_data_dir`).

    From the hashes taken while checking (:func:`checked_fingerprint`); splits
    not checked in this process, or changed since, are checked (read) again.
    """
    fingerprint = checked_fingerprint(data_dir, splits, click_model_dir)
    if fingerprint is None:
        check_data_dir(data_dir, splits, click_model_dir)
        fingerprint = checked_fingerprint(data_dir, splits, click_model_dir)
    return fingerprint


def checked_fingerprint(data_dir: str, splits: Sequence[str], click_model_dir: Optional[str] = None) -> Optional[str]:
    """:func:`data_fingerprint` from the last check in this process, or None.

    None when a split was not checked (in the layout ``click_model_dir``
    selects), or when any file read then has another size or modification
    time now.
    """
    data_dir = os.path.abspath(data_dir)
    settings, summaries = _CHECKED.get((data_dir, click_model_dir), (None, {}))
    if settings is None or any(split not in summaries for split in splits) or _changed_since_check(data_dir):
        return None
    digest = hashlib.sha256(("settings.json\0%s" % settings.sha256).encode())
    for split in splits:
        for relpath, sha in summaries[split].files:
            digest.update(("\0%s\0%s" % (relpath, sha)).encode())
    return digest.hexdigest()


def _changed_since_check(data_dir: str) -> bool:
    return any(_stat(path) != stat for path, stat in _STAT_AT_CHECK.items() if path.startswith(data_dir + os.sep))


def _stat(path: str) -> Tuple[int, int]:
    try:
        info = os.stat(path)
    except OSError:
        return (-1, -1)
    return (info.st_size, info.st_mtime_ns)


def _read_lists(path: str, parse, what: str, digest) -> Tuple[List[str], List[np.ndarray]]:
    """``qid v0 v1 ...`` lines -> (qids, value arrays), checking numbers are finite."""
    qids: List[str] = []
    values: List[np.ndarray] = []
    for first, block in separator_checked(path, line_blocks(path, digest), "qid"):
        for number, line in enumerate(block.split(b"\n")[:-1], start=first):
            fields = line.strip().split(b" ")
            if not fields[0]:
                raise DataCheckError("%s:%d: empty line; expected 'qid %s ...'" % (path, number, what.replace(" ", "_")))
            try:
                row = np.array([parse(field) for field in fields[1:]], dtype=np.float64)
            except ValueError:
                bad = next(f for f in fields[1:] if not _parses(parse, f))
                raise DataCheckError(
                    "%s:%d: %s %r is not %s" % (path, number, what, bad.decode(errors="replace"),
                                                "an integer" if parse is int else "a number")
                ) from None
            if not np.isfinite(row).all():
                raise DataCheckError("%s:%d: %s %r is not finite" % (path, number, what, float(row[~np.isfinite(row)][0])))
            qids.append(fields[0].decode(errors="replace"))
            values.append(row)
    return qids, values


def _parses(parse, field: bytes) -> bool:
    try:
        parse(field)
        return True
    except ValueError:
        return False


def check_ends_in_newline(path: str) -> None:
    """Refuse a file whose last line has no newline (a cut-short copy), e.g. a raw LETOR file."""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() == 0:
            return
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) != b"\n":
            raise DataCheckError(
                "%s: the last line does not end in a newline, so it was probably cut short; "
                "expected every line to end in a newline" % path
            )


def check_main_py_data(args: argparse.Namespace) -> None:
    """Check the splits ULTRA's main.py reads with these arguments, in the layout it reads them
    (under ``--test_only`` the test split is the one it writes a ranklist of).

    With ``--click_model_dir`` main.py's reader takes ULTRA's ULTRE layout
    (:mod:`.ultre_checks`); otherwise ULTRA's own or the libsvm layout, after
    waiting for the checks the start-up hook started in a second process
    (:func:`~ultra_multr.compat.early_checks.start_early_checks`): the splits they
    passed are then found in the check cache.

    Raises:
        DataCheckError: naming the file and line (or the split) of the first problem.
    """
    waited = wait_for_early_checks()  # the start-up hook's second process (ULTRA's layout only), if it started one
    if waited:
        LOGGER.info(waited)
    check_data_dir(**main_py_checks(args))


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ultra_multr.data.checks", description=__doc__.split("\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("--splits", nargs="+", default=list(SPLITS))
    parser.add_argument("--click_model_dir", default=None, help="main.py's --click_model_dir: the ULTRE layout")
    parser.add_argument("--ranklist_split", default="test",
                        help="the split main.py --test_only ranks (its --test_data_prefix): each qid on one line "
                        "(default: test; '': none)")
    parser.add_argument("--max_list_cutoff", type=int, default=0,
                        help="main.py's --max_list_cutoff: no libsvm query may have more lines (default 0: none)")
    args = parser.parse_args(argv)
    if not LOGGER.handlers and not logging.getLogger().handlers:
        logging.basicConfig(format="warning: %(message)s", level=logging.WARNING)
    start = time.time()
    try:
        summaries = check_data_dir(args.data_dir, args.splits, args.click_model_dir, args.ranklist_split or None,
                                   args.max_list_cutoff)
    except DataCheckError as error:
        print("error: %s" % error, file=sys.stderr)
        return 1
    for split, summary in summaries.items():
        print("%-6s %d documents, %d queries (%d kept by ULTRA)" % (split, summary.documents, summary.queries, summary.kept_queries))
    print("data checks passed in %.1f s" % (time.time() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
