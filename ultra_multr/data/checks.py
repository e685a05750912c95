"""Checks of a ULTRA data directory, with errors that name the file and line.

ULTRA's reader (``ultra.utils.data_utils.Raw_data``) accepts bad data quietly
or fails far away from the cause: it drops feature indices above
``feature_size`` without a word, reads ``nan`` / ``inf`` features as numbers
(NaN test features still give plausible metrics under ``--test_only``, NaN
training features surface as a non-finite loss), takes a cut-short last line
as a document, and says only "No valid query has been found." for a split
with no usable query.  :func:`check_data_dir` reads the files once and raises
:class:`DataCheckError` at the first problem, naming ``file:line`` (or the
split) and what was expected.

What is checked, per split ``S`` (``S/S.feature``, ``S/S.init_list``,
``S/S.labels``; see :mod:`.ultra_format`) and ``settings.json``:

- ``settings.json`` is JSON with a positive integer ``feature_size`` and a
  ``max_label``;
- every file ends in a newline (else its last line was cut short);
- ``.feature`` lines are ``docid index:value ...`` with integer indices in
  1..feature_size and finite values;
- ``.init_list`` lines are ``qid i0 i1 ...`` with indices of ``.feature``
  lines; ``.labels`` has the same queries in the same order, one finite label
  in 0..max_label per listed document;
- at least one query is one ULTRA keeps (two or more documents, a label > 0).

Speed: the feature file, which holds nearly all the bytes, is read in blocks
of lines and its numbers parsed by numpy in one call per block; a line is
parsed in Python only to explain an error.  Only ULTRA's own format is
checked (not the libsvm ``S/S.txt`` or ULTRE formats ULTRA also reads).

Command line: ``python -m ultra_multr.data.checks DATA_DIR [--splits train valid test]``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

SPLITS = ("train", "valid", "test")
BLOCK_BYTES = 1 << 20  # small blocks keep the arrays in cache; measured no slower than 16 MiB


class DataCheckError(ValueError):
    """Bad data; the message starts with the file (and line) or the split."""


@dataclass(frozen=True)
class DataSettings:
    """What ``settings.json`` says about the data.

    Attributes:
        feature_size: F; feature indices run over 1..F.
        max_label: the largest allowed label.
    """

    feature_size: int
    max_label: float


@dataclass(frozen=True)
class SplitSummary:
    """Counts of one checked split.

    Attributes:
        documents: lines of the ``.feature`` file.
        queries: lines of the ``.init_list`` file.
        kept_queries: queries ULTRA keeps (>= 2 documents, a label > 0).
    """

    documents: int
    queries: int
    kept_queries: int


def read_settings(data_dir: str) -> DataSettings:
    """Read and check ``<data_dir>/settings.json``."""
    path = os.path.join(data_dir, "settings.json")
    try:
        with open(path) as handle:
            settings = json.load(handle)
    except OSError as error:
        raise DataCheckError("%s: cannot read the data settings: %s" % (path, error)) from None
    except ValueError as error:
        raise DataCheckError("%s: not valid JSON: %s" % (path, error)) from None
    if not isinstance(settings, dict):
        raise DataCheckError("%s: expected a JSON object, got %s" % (path, type(settings).__name__))
    feature_size = settings.get("feature_size")
    if isinstance(feature_size, bool) or not isinstance(feature_size, int) or feature_size < 1:
        raise DataCheckError("%s: feature_size must be a positive integer, got %r" % (path, feature_size))
    max_label = settings.get("max_label")
    if isinstance(max_label, bool) or not isinstance(max_label, (int, float)) or not max_label >= 0:
        raise DataCheckError("%s: max_label must be a number >= 0 (ULTRA reads it), got %r" % (path, max_label))
    return DataSettings(feature_size=feature_size, max_label=float(max_label))


def check_data_dir(data_dir: str, splits: Sequence[str] = SPLITS) -> Dict[str, SplitSummary]:
    """Check ``settings.json`` and each split; returns split -> counts.

    Raises:
        DataCheckError: at the first problem, naming the file and line or the split.
    """
    settings = read_settings(data_dir)
    return {split: check_split(data_dir, split, settings) for split in splits}


def check_split(data_dir: str, split: str, settings: DataSettings) -> SplitSummary:
    """Check the files of one split (see the module docstring)."""
    base = os.path.join(data_dir, split, split)
    for suffix in (".feature", ".init_list", ".labels"):
        if not os.path.isfile(base + suffix):
            raise DataCheckError("split %r: %s%s does not exist" % (split, base, suffix))
    documents = check_feature_file(base + ".feature", settings.feature_size)
    qids, lists = _read_lists(base + ".init_list", int, "document index")
    label_qids, labels = _read_lists(base + ".labels", float, "label")
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
        outside = ~((values >= 0) & (values <= settings.max_label))
        if outside.any():
            raise DataCheckError(
                "%s.labels:%d: query %s has label %r; expected 0..%g (max_label of settings.json)"
                % (base, number, qid, float(values[outside][0]), settings.max_label)
            )
    kept = sum(1 for values in labels if len(values) >= 2 and values.sum() > 0)
    if kept == 0:
        raise DataCheckError(
            "split %r (%s.*): none of its %d queries has two or more documents and a label > 0, so ULTRA "
            "keeps none and stops with 'No valid query has been found.'" % (split, base, len(qids))
        )
    return SplitSummary(documents=documents, queries=len(qids), kept_queries=kept)


def check_feature_file(path: str, feature_size: int) -> int:
    """Check a ``.feature`` file; returns its number of lines (documents)."""
    documents = 0
    for first, block in _line_blocks(path):
        if not _feature_block_is_clean(block, feature_size):
            for number, line in enumerate(block.split(b"\n")[:-1], start=first):
                problem = _feature_line_problem(line, feature_size)
                if problem:
                    raise DataCheckError("%s:%d: %s" % (path, number, problem))
        documents += block.count(b"\n")
    return documents


_PLAIN = np.zeros(256, dtype=bool)  # digits and the markers
_PLAIN[[ord(c) for c in "0123456789 :\n"]] = True
_SPACE, _COLON, _NEWLINE, _DOT, _MINUS = (ord(c) for c in " :\n.-")


def _feature_block_is_clean(block: bytes, feature_size: int) -> bool:
    """Vectorised test of whole ``.feature`` lines: True if surely clean.

    The block is cut at its spaces, colons and newlines (the markers) into
    segments: a clean line is a docid segment followed by `` <digits>:<value>``
    fields.  A value of digits with at most one dot and a leading minus is a
    finite number; any other value (an exponent, ``nan``) goes to ``float``.
    False means "look closer": :func:`_feature_line_problem` then judges each
    line, so an unusual but valid line (trailing space, ``1e-300``) costs
    time, never a false error.  Only the bytes that are neither digits nor
    markers are looked up one by one (no cumulative sums: numpy's are slow).
    """
    text = np.frombuffer(b"\n" + block, dtype=np.uint8)  # the leading newline starts the first line
    markers = np.flatnonzero((text == _SPACE) | (text == _COLON) | (text == _NEWLINE))
    kind, following = text[markers[:-1]], text[markers[1:]]
    length = np.diff(markers) - 1  # [S] bytes of each segment, between consecutive markers
    is_field, is_value = kind == _SPACE, kind == _COLON
    # A line: a non-empty docid, then " index:value" fields, each part non-empty.
    expected_next = np.where(is_field, following == _COLON, following != _COLON)
    if not np.all(expected_next & (length > 0)):
        return False
    special = np.flatnonzero(~_PLAIN[text])  # dots, minus signs, letters (docids, exponents, nan)
    segment = np.searchsorted(markers, special) - 1
    special_kind = text[special]
    n_segments = length.size
    specials = np.bincount(segment, minlength=n_segments)
    # Field indices: digits only, in 1..feature_size.
    width = len(str(feature_size))
    index_length = length[is_field]
    if np.any(specials[is_field] > 0) or np.any(index_length > width):
        return False
    colons = markers[1:][is_field]
    index = np.zeros(colons.size, dtype=np.int64)
    for j in range(1, width + 1):
        index += np.where(index_length >= j, text[colons - j].astype(np.int64) - ord("0"), 0) * 10 ** (j - 1)
    if np.any(index < 1) or np.any(index > feature_size):
        return False
    # Values: simple when the only specials are one dot and a minus right after the colon.
    dots = np.bincount(segment[special_kind == _DOT], minlength=n_segments)
    minus = special_kind == _MINUS
    leading_minus = np.bincount(segment[minus & (text[special - 1] == _COLON)], minlength=n_segments)
    simple = (specials == dots + leading_minus) & (dots <= 1) & (length > specials)
    for k in np.flatnonzero(is_value & ~simple):
        start = int(markers[k]) + 1
        try:
            if not math.isfinite(float(text[start : start + int(length[k])].tobytes())):
                return False
        except ValueError:
            return False
    return True


def _feature_line_problem(line: bytes, feature_size: int) -> Optional[str]:
    """What is wrong with one ``.feature`` line (None if nothing)."""
    fields = line.strip().split(b" ")
    if not fields[0]:
        return "empty line; expected 'docid index:value ...'"
    for field in fields[1:]:
        index_text, sep, value_text = field.partition(b":")
        if not sep or b":" in value_text:
            return "field %r is not 'index:value' (fields are separated by one space)" % field.decode(errors="replace")
        try:
            index = int(index_text)
        except ValueError:
            return "feature index %r is not an integer" % index_text.decode(errors="replace")
        if not 1 <= index <= feature_size:
            return (
                "feature index %d is outside 1..%d (feature_size of settings.json); ULTRA would silently %s it"
                % (index, feature_size, "drop" if index > feature_size else "misplace")
            )
        try:
            value = float(value_text)
        except ValueError:
            return "value %r of feature %d is not a number" % (value_text.decode(errors="replace"), index)
        if not math.isfinite(value):
            return "value of feature %d is %r; expected a finite number" % (index, value_text.decode(errors="replace"))
    return None


def _read_lists(path: str, parse, what: str) -> Tuple[List[str], List[np.ndarray]]:
    """``qid v0 v1 ...`` lines -> (qids, value arrays), checking numbers are finite."""
    qids: List[str] = []
    values: List[np.ndarray] = []
    for first, block in _line_blocks(path):
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


def _line_blocks(path: str) -> Iterator[Tuple[int, bytes]]:
    """(number of the first line, block) for blocks of whole lines (about BLOCK_BYTES each) of a file.

    Raises:
        DataCheckError: if the file does not end in a newline.
    """
    first = 1
    rest = b""
    with open(path, "rb") as handle:
        while True:
            block = handle.read(BLOCK_BYTES)
            if not block:
                break
            block = rest + block
            cut = block.rfind(b"\n") + 1
            rest = block[cut:]
            if cut:
                yield first, block[:cut]
                first += block.count(b"\n", 0, cut)
    if rest:
        raise DataCheckError(
            "%s:%d: the last line does not end in a newline, so it was probably cut short (%d bytes: %r...); "
            "expected every line to end in a newline" % (path, first, len(rest), rest[:40].decode(errors="replace"))
        )


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


def splits_main_py_reads(args: argparse.Namespace) -> List[str]:
    """The split prefixes ULTRA's ``main.py`` reads with these arguments.

    ``--test_only``: the test split; otherwise train and valid, and test with
    ``--test_while_train``.  Empty for data that is not in ULTRA's own format
    (``--click_model_dir`` switches main.py to the ULTRE format).
    """
    if getattr(args, "click_model_dir", None) is not None or getattr(args, "data_format", "ULTRA") != "ULTRA":
        return []
    if args.test_only:
        return [args.test_data_prefix]
    return [args.train_data_prefix, args.valid_data_prefix] + ([args.test_data_prefix] if args.test_while_train else [])


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ultra_multr.data.checks", description=__doc__.split("\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("--splits", nargs="+", default=list(SPLITS))
    args = parser.parse_args(argv)
    start = time.time()
    try:
        summaries = check_data_dir(args.data_dir, args.splits)
    except DataCheckError as error:
        print("error: %s" % error, file=sys.stderr)
        return 1
    for split, summary in summaries.items():
        print("%-6s %d documents, %d queries (%d kept by ULTRA)" % (split, summary.documents, summary.queries, summary.kept_queries))
    print("data checks passed in %.1f s" % (time.time() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
