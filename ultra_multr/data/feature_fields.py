"""Feature fields ``index:value`` as ULTRA's reader takes them, checked in blocks of lines.

ULTRA's reader (``Raw_data``, every layout) starts each document with
``feature_size`` zeros and, for a field ``k:v``, stores ``v`` in slot ``k - 1``
whenever ``k - 1 < feature_size``.  With Python's negative indexing that means:

- ``1 <= k <= feature_size``: slot ``k - 1`` (what everybody expects);
- ``k = 0``: slot ``-1``, the last one, where feature ``feature_size`` goes.
  Nothing is lost unless the same line also holds ``feature_size``; ULTRA's own
  toy data uses index 0.  Accepted, with one warning per file;
- ``k > feature_size``: dropped without a word;
- ``k < 0``: another slot counted from the end: misplaced;
- a slot written twice on one line (a repeated index, or 0 with
  ``feature_size``): the first value is overwritten.

The last three, non-integer indices and non-finite values are refused with
``file:line``.  So is whitespace other than a space inside a line (a tab, a
no-break space, ...; :func:`check_separators`): ULTRA splits every line of
every file on single spaces only (``line.strip().split(' ')``), so a
tab-separated line becomes one doc id with every feature 0.  The fast path
is vectorised over a block of whole lines; a line is parsed in Python only
when the block is not surely clean (an unusual but valid line costs time,
never a false error).
"""
from __future__ import annotations

import hashlib
import logging
import math
import re
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional, Tuple

import numpy as np

logger = logging.getLogger("ultra_multr")

BLOCK_BYTES = 1 << 20  # small blocks keep the arrays in cache; measured no slower than 16 MiB


class DataCheckError(ValueError):
    """Bad data; the message starts with the file (and line) or the split."""


@dataclass
class ZeroIndexLines:
    """Lines of one file that use feature index 0 (accumulated over its blocks).

    Attributes:
        count: how many lines use it.
        first: the number of the first such line (0: none).
    """

    count: int = 0
    first: int = 0

    def add(self, line_numbers: np.ndarray) -> None:
        if line_numbers.size:
            self.first = self.first or int(line_numbers.min())
            self.count += int(line_numbers.size)

    def warning(self, path: str, feature_size: int) -> Optional[str]:
        """The one warning for the file (None if no line uses index 0)."""
        if not self.count:
            return None
        return (
            "%s: %d line(s) use feature index 0 (first at line %d). ULTRA stores feature k in slot k-1, so index 0 "
            "goes to the last slot, the one of feature index %d (feature_size); no line holds both, so nothing is "
            "lost: the model sees feature 0 as feature %d" % (path, self.count, self.first, feature_size, feature_size)
        )


def line_blocks(path: str, digest: "hashlib._Hash") -> Iterator[Tuple[int, bytes]]:
    """(number of the first line, block) for blocks of whole lines (about BLOCK_BYTES each) of a file.

    Every byte read also goes into ``digest``, so one read of the file serves
    the checks and the data fingerprint.

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
            digest.update(block)
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


#: Bytes that may start whitespace other than a space: ASCII control whitespace, and any non-ASCII byte
#: (UTF-8 of a no-break space, an em space, ...); a block without them needs no line-by-line look.
_SUSPECT_BYTES = re.compile(rb"[\t\r\x0b\x0c\x1c-\x1f\x80-\xff]")
_SEPARATOR_NAMES = {"\t": "a tab", "\r": "a carriage return", "\x0b": "a vertical tab", "\x0c": "a form feed",
                    "\xa0": "a no-break space"}


def separator_problem(line: bytes, head: str) -> Optional[str]:
    """What is wrong with whitespace other than a space inside one line (without its newline), or None.

    ULTRA opens the files as text (UTF-8, universal newlines), strips each
    line and splits it on ``' '`` only: leading and trailing whitespace of
    any kind is harmless (one ``\\r`` before the newline too), any other
    inside the line glues the fields around it into one (``head``: what the
    first field is, e.g. "doc id"), and a carriage return inside starts a new
    line.
    """
    text = line.decode("utf-8", errors="replace")
    body = text.strip()
    found = next((i for i, char in enumerate(body) if char.isspace() and char != " "), None)
    if found is None:
        return None
    char = body[found]
    column = len(text) - len(text.lstrip()) + found + 1
    name = "%s (U+%04X)" % (_SEPARATOR_NAMES.get(char, "a whitespace character"), ord(char))
    if char == "\r":
        return ("%s at column %d; ULTRA reads its files with universal newlines, so it would start a new line "
                "there and every later line would be off by one" % (name, column))
    start = body.rfind(" ", 0, found) + 1
    end = body.find(" ", found)
    glued = body[start:] if end < 0 else body[start:end]
    return (
        "%s at column %d; ULTRA splits lines on single spaces only, so it would read %r as one field%s. "
        "Separate the fields with single spaces"
        % (name, column, glued[:60], " (the %s; a line separated by tabs throughout is one %s and nothing else)"
           % (head, head) if start == 0 else "")
    )


def check_separators(path: str, first: int, block: bytes, head: str) -> None:
    """Refuse whitespace other than a space inside a line of a block of whole lines (:func:`separator_problem`).

    Vectorised: only a block holding a suspect byte (ASCII control whitespace,
    a non-ASCII byte; CRLF line ends aside) is looked at line by line.

    Raises:
        DataCheckError: ``path:line`` and the character.
    """
    plain = block.replace(b"\r\n", b"\n") if b"\r" in block else block
    if _SUSPECT_BYTES.search(plain) is None:
        return
    for number, line in enumerate(block.split(b"\n")[:-1], start=first):
        problem = separator_problem(line, head)
        if problem:
            raise DataCheckError("%s:%d: %s" % (path, number, problem))


def separator_checked(path: str, blocks: Iterable[Tuple[int, bytes]], head: str) -> Iterator[Tuple[int, bytes]]:
    """``blocks`` (of :func:`line_blocks`), each given after :func:`check_separators` passed it."""
    for first, block in blocks:
        check_separators(path, first, block, head)
        yield first, block


_PLAIN = np.zeros(256, dtype=bool)  # digits and the markers
_PLAIN[[ord(c) for c in "0123456789 :\n"]] = True
_SPACE, _COLON, _NEWLINE, _DOT, _MINUS = (ord(c) for c in " :\n.-")


def clean_block_zero_lines(block: bytes, feature_size: int) -> Optional[np.ndarray]:
    """Vectorised test of whole lines ``head index:value ...``.

    Returns None when the block is not surely clean (then judge each line with
    :func:`fields_problem`), else the 0-based numbers, within the block, of
    the lines that use feature index 0.

    The block is cut at its spaces, colons and newlines (the markers) into
    segments: a clean line is a head segment (the docid) followed by
    `` <digits>:<value>`` fields with strictly increasing indices in
    0..feature_size, not 0 together with feature_size.  A value of digits with
    at most one dot and a leading minus is a finite number; any other value
    (an exponent, ``nan``) goes to ``float``.  Only the bytes that are neither
    digits nor markers are looked up one by one.
    """
    text = np.frombuffer(b"\n" + block, dtype=np.uint8)  # the leading newline starts the first line
    markers = np.flatnonzero((text == _SPACE) | (text == _COLON) | (text == _NEWLINE))
    kind, following = text[markers[:-1]], text[markers[1:]]
    length = np.diff(markers) - 1  # [S] bytes of each segment, between consecutive markers
    is_field, is_value = kind == _SPACE, kind == _COLON
    # A line: a non-empty head, then " index:value" fields, each part non-empty.
    expected_next = np.where(is_field, following == _COLON, following != _COLON)
    if not np.all(expected_next & (length > 0)):
        return None
    special = np.flatnonzero(~_PLAIN[text])  # dots, minus signs, letters (docids, exponents, nan)
    segment = np.searchsorted(markers, special) - 1
    special_kind = text[special]
    n_segments = length.size
    specials = np.bincount(segment, minlength=n_segments)
    # Field indices: digits only, in 0..feature_size, strictly increasing within a line.
    width = len(str(feature_size))
    index_length = length[is_field]
    if np.any(specials[is_field] > 0) or np.any(index_length > width):
        return None
    colons = markers[1:][is_field]
    index = np.zeros(colons.size, dtype=np.int64)
    for j in range(1, width + 1):
        index += np.where(index_length >= j, text[colons - j].astype(np.int64) - ord("0"), 0) * 10 ** (j - 1)
    if np.any(index > feature_size):
        return None
    newlines = np.flatnonzero(text == _NEWLINE)
    line = np.searchsorted(newlines, colons) - 1  # [fields] line of each field within the block
    same_line = line[1:] == line[:-1]
    if np.any(same_line & (index[1:] <= index[:-1])):
        return None
    zero_lines = line[index == 0]
    if zero_lines.size and np.intersect1d(zero_lines, line[index == feature_size]).size:
        return None
    # Values: simple when the only specials are one dot and a minus right after the colon.
    dots = np.bincount(segment[special_kind == _DOT], minlength=n_segments)
    minus = special_kind == _MINUS
    leading_minus = np.bincount(segment[minus & (text[special - 1] == _COLON)], minlength=n_segments)
    simple = (specials == dots + leading_minus) & (dots <= 1) & (length > specials)
    for k in np.flatnonzero(is_value & ~simple):
        start = int(markers[k]) + 1
        try:
            if not math.isfinite(float(text[start : start + int(length[k])].tobytes())):
                return None
        except ValueError:
            return None
    return zero_lines


def fields_problem(fields: List[bytes], feature_size: int) -> Tuple[Optional[str], bool]:
    """What is wrong with a line's ``index:value`` fields, as ULTRA would read them.

    Returns:
        (problem or None, whether the line uses feature index 0).
    """
    slots = {}
    for field in fields:
        index_text, sep, value_text = field.partition(b":")
        if not sep or b":" in value_text:
            return "field %r is not 'index:value' (fields are separated by one space)" % field.decode(errors="replace"), False
        try:
            index = int(index_text)
        except ValueError:
            return "feature index %r is not an integer" % index_text.decode(errors="replace"), False
        if index < 0:
            return (
                "feature index %d is negative; ULTRA would silently misplace it (into slot %d, counted from the end)"
                % (index, -index + 1), False
            )
        if index > feature_size:
            return (
                "feature index %d is outside 0..%d (feature_size of settings.json); ULTRA would silently drop it"
                % (index, feature_size), False
            )
        slot = index - 1 if index else feature_size - 1
        if slot in slots:
            if {index, slots[slot]} == {0, feature_size}:
                return (
                    "the line holds feature index 0 and feature index %d (feature_size); ULTRA stores index 0 in "
                    "the last slot, the one of index %d, so one value would silently overwrite the other"
                    % (feature_size, feature_size), False
                )
            return "feature index %d appears twice; ULTRA would silently keep only the last value" % index, False
        slots[slot] = index
        try:
            value = float(value_text)
        except ValueError:
            return "value %r of feature %d is not a number" % (value_text.decode(errors="replace"), index), False
        if not math.isfinite(value):
            return "value of feature %d is %r; expected a finite number" % (index, value_text.decode(errors="replace")), False
    return None, 0 in slots.values()


def check_feature_block(
    path: str, first: int, block: bytes, feature_size: int, zeros: ZeroIndexLines, head: str = "doc id"
) -> None:
    """Check the separators and the feature fields of a block of whole lines, each a head field, then
    ``index:value`` fields.

    The head is ULTRA's ``docid``; a libsvm caller joins ``label qid:Q`` into
    one head (``label_qid_Q``) after checking them itself (``head`` names it
    in messages).

    Raises:
        DataCheckError: ``path:line`` and what is wrong.
    """
    check_separators(path, first, block, head)
    zero_lines = clean_block_zero_lines(block, feature_size)
    if zero_lines is not None:
        zeros.add(zero_lines + first)
        return
    for number, line in enumerate(block.split(b"\n")[:-1], start=first):
        fields = line.strip().split(b" ")
        if not fields[0]:
            raise DataCheckError("%s:%d: empty line" % (path, number))
        problem, uses_zero = fields_problem(fields[1:], feature_size)
        if problem:
            raise DataCheckError("%s:%d: %s" % (path, number, problem))
        if uses_zero:
            zeros.add(np.array([number]))


def checked_feature_blocks(path: str, feature_size: int, digest, warnings: List[str]) -> Iterator[Tuple[int, bytes]]:
    """:func:`line_blocks` of a ``.feature`` file, each block checked before it is given; after the last,
    warns once if the file uses index 0 (and appends the warning to ``warnings``)."""
    zeros = ZeroIndexLines()
    for first, block in line_blocks(path, digest):
        check_feature_block(path, first, block, feature_size, zeros)
        yield first, block
    warn_zero_index(zeros, path, feature_size, warnings)


def check_feature_file(path: str, feature_size: int, digest, warnings: List[str]) -> int:
    """Check a ``.feature`` file (see :func:`checked_feature_blocks`); returns its number of lines (documents)."""
    return sum(block.count(b"\n") for _, block in checked_feature_blocks(path, feature_size, digest, warnings))


def warn_zero_index(zeros: ZeroIndexLines, path: str, feature_size: int, warnings: List[str]) -> None:
    warning = zeros.warning(path, feature_size)
    if warning:
        logger.warning(warning)
        warnings.append(warning)
