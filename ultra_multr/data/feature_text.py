"""Lines of ``head index:value ...`` parsed in blocks with numpy, to the numbers ULTRA's reader gets.

ULTRA's reader (``Raw_data``) turns every field ``k:v`` of a line into
``int(k)`` and ``float(v)``, one Python object per number (about 1 us per
field).  :func:`parse_block` reads a block of whole lines in place (no copy
of its bytes):

- each line's head (ULTRA's layout: the document id; libsvm: ``label
  qid:Q``) ends at its first (second) space; the rest is cut at its markers
  (space, newline, colon, dot).  A block that is not plain printable ASCII,
  or whose markers are not exactly ``index:value`` fields separated by single
  spaces (at most one dot per value, none in an index, every line with a
  field) is refused (None): the caller reads it line by line as ULTRA does;
- indices and the digits before and after a value's dot are read eight
  bytes at a time (an unaligned 64-bit load, the digits combined with three
  multiplications: the "SWAR" trick of simdjson), two loads for 9 to 16
  digits;
- a value becomes ``m / 10**f``, with its digits as the integer ``m`` and
  ``f`` digits after the dot.  With ``m < 2**53`` and ``f <= 16`` both
  operands are exact doubles, so the one IEEE division is correctly rounded:
  the double Python's ``float`` gives (Clinger's fast path);
- any other field (an exponent, ``nan``, a sign on the index, more digits)
  is read with Python's ``int`` and ``float``, exactly as ULTRA reads it;
  their errors propagate (the caller then reads the block line by line, so
  that ULTRA's error is raised at ULTRA's line).

Slots follow ULTRA: feature ``k`` goes to slot ``k - 1``, ``k = 0`` to the last
slot, ``k > feature_size`` is dropped, and of a slot written twice on a line
the last value wins.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import numpy as np

#: Bytes before a block's start that a load may touch (their contents are masked out).
PAD = 16
_SPACE, _NEWLINE, _COLON, _DOT, _MINUS = (ord(c) for c in " \n:.-")
_U64 = np.uint64
_ZEROS = 0x3030303030303030  # eight ASCII '0'
_ALL = (1 << 64) - 1
#: [m] the bits of the last m bytes of a little-endian word (the m digits of a right-aligned load).
_LAST_BYTES = np.array([0] + [(_ALL << (8 * (8 - m))) & _ALL for m in range(1, 9)], dtype=_U64)
#: [m] ASCII '0' in the other 8 - m bytes (so a masked word is always eight digits).
_ZERO_FILL = np.array([_ZEROS & ~int(mask) & _ALL for mask in _LAST_BYTES], dtype=_U64)
_POW10_INT = np.array([10 ** k for k in range(17)], dtype=_U64)
_POW10 = 10.0 ** np.arange(17)  # exact doubles
_EXACT = _U64(2 ** 53)


@dataclass
class Fields:
    """The fields of a block that land in a slot, in file order, a repeated slot of a line only once (its last).

    Attributes:
        line: [n] int64 line of each field (0 = the block's first line).
        slot: [n] int64 slot in 0..feature_size-1.
        value: [n] float64 ``float`` of the value text.
    """

    line: np.ndarray
    slot: np.ndarray
    value: np.ndarray


@dataclass
class Block:
    """A parsed block: ``heads`` [L] (each line's text before its fields, as bytes) and its ``fields``."""

    heads: List[bytes]
    fields: Fields


def _load(loads: np.ndarray, ends: np.ndarray, count: np.ndarray, shift: int = 0) -> np.ndarray:
    """[n] words of the ``count`` (0..8) bytes ending ``shift`` bytes before ``ends``, '0' in front."""
    return (loads[ends - (8 + shift)] & _LAST_BYTES[count]) | _ZERO_FILL[count]


def _eight_digits(words: np.ndarray) -> np.ndarray:
    """[n] uint64 number of each word of eight ASCII digits (its first byte in memory the leading digit)."""
    v = words - _U64(_ZEROS)
    v = v * _U64(10) + (v >> _U64(8))
    return (((v & _U64(0x000000FF000000FF)) * _U64(100 + (1000000 << 32)))
            + (((v >> _U64(16)) & _U64(0x000000FF000000FF)) * _U64(1 + (10000 << 32)))) >> _U64(32)


def _lines_and_heads(buffer, start: int, stop: int, head_fields: int):
    """([L] line starts, [L] head ends) of the block's lines: a head ends at the space after its
    ``head_fields``-th field (``start - 1`` without head).  None: a line without a field or with an empty head
    field.  A loop over lines (a line holds tens to hundreds of fields)."""
    line_starts, head_ends = [], []
    find = buffer.find
    position = start
    while position < stop:
        newline = find(b"\n", position, stop)
        end = position - 1
        for _ in range(head_fields):
            space = find(b" ", end + 1, newline)
            if space <= end + 1:  # no space (-1: a line without fields) or an empty field
                return None
            end = space
        line_starts.append(position)
        head_ends.append(end)
        position = newline + 1
    return np.asarray(line_starts, dtype=np.int64), np.asarray(head_ends, dtype=np.int64)


def _all_digits(*words: np.ndarray) -> np.ndarray:
    """[n] bool: every byte of each of the words is an ASCII digit (0x30-0x39)."""
    ored, anded, carried = words[0], words[0], words[0] + _U64(0x0606060606060606)
    for word in words[1:]:
        ored = ored | word
        anded = anded & word
        carried = carried | (word + _U64(0x0606060606060606))  # a byte 0x3A-0x3F carries into bit 6
    return (((ored | carried) & _U64(0xC0C0C0C0C0C0C0C0)) | ((anded & _U64(0x3030303030303030))
                                                              ^ _U64(0x3030303030303030))) == 0


def parse_block(buffer, start: int, stop: int, feature_size: int, head_fields: int) -> Optional[Block]:
    """Parse the lines ``buffer[start:stop]`` (``stop - 1`` a newline, ``start >= PAD``), each ``head_fields``
    space-separated head fields (0, 1 or 2) and then ``index:value`` fields separated by single spaces.

    Returns None when the block is not of that form (read its lines as ULTRA does).

    Raises:
        ValueError, IndexError: a field ULTRA's reader would fail on (as ``int`` / ``float`` raise them).
    """
    if feature_size <= 0 or stop <= start:
        return None
    t = np.frombuffer(buffer, dtype=np.uint8)
    segment = t[start:stop]
    if segment[-1] != _NEWLINE:
        return None
    if int(segment.max()) >= 127 or np.count_nonzero(segment < _SPACE) != np.count_nonzero(segment == _NEWLINE):
        return None
    found = _lines_and_heads(buffer, start, stop, head_fields)
    if found is None:
        return None
    line_starts, head_ends = found
    n_lines = line_starts.size
    markers = np.flatnonzero((segment == _SPACE) | (segment == _NEWLINE) | (segment == _COLON) | (segment == _DOT))
    markers += start
    kinds = t[markers]
    head_markers = 0
    if head_fields:  # the heads' markers (their spaces, a colon in qid:Q or in a document id) are no markers
        low = np.searchsorted(markers, line_starts)
        count = np.searchsorted(markers, head_ends, side="right") - low
        head_markers = int(count.sum())
        kinds[np.arange(head_markers) + np.repeat(low - (np.cumsum(count) - count), count)] = 0
    colon = np.flatnonzero(kinds == _COLON)  # into markers
    n = colon.size
    if n == 0 or colon[-1] + 1 >= markers.size:
        return None
    has_dot = kinds[colon + 1] == _DOT
    after = colon + 1 + has_dot
    # Exactly "colon [dot] separator" per field and nothing else; every line holds a field.
    if after[-1] >= markers.size or markers.size - head_markers != 2 * n + int(np.count_nonzero(has_dot)):
        return None
    end_kind = kinds[after]
    at_newline = end_kind == _NEWLINE
    line_ends = np.flatnonzero(at_newline)  # [L] the last field of each line
    if line_ends.size != n_lines or np.count_nonzero(end_kind == _SPACE) != n - n_lines:
        return None
    colons, ends, dots = markers[colon], markers[after], markers[colon + 1]
    starts = np.empty_like(ends)
    starts[1:] = ends[:-1] + 1
    first = np.empty_like(line_ends)  # [L] the first field of each line
    first[0] = 0
    first[1:] = line_ends[:-1] + 1
    starts[first] = head_ends + 1
    index_digits = colons - starts
    negative = t[colons + 1] == _MINUS
    point = np.where(has_dot, dots, ends)
    whole_digits = point - colons - 1 - negative
    fraction_digits = np.where(has_dot, ends - dots - 1, 0)
    # One load per part (a second for 9-16 digits; a whole part of one digit, the common case, is one byte);
    # each part all digits, at least one digit in the value.
    loads = np.ndarray((t.size - 7,), dtype="<u8", buffer=buffer, strides=(1,))
    index_word = _load(loads, colons, np.minimum(index_digits, 8))
    fraction_word = _load(loads, ends, np.minimum(fraction_digits, 8))
    ok = _all_digits(index_word, fraction_word)
    ok &= (index_digits >= 1) & (index_digits <= 8) & (whole_digits + fraction_digits >= 1)
    index = _eight_digits(index_word)
    fraction = _eight_digits(fraction_word)
    last_whole = t[point - 1] - np.uint8(ord("0"))  # the whole part's last digit where it has one
    ok &= (last_whole < 10) | (whole_digits != 1)
    whole = np.where(whole_digits == 1, last_whole, 0).astype(_U64)
    wide = np.flatnonzero(whole_digits > 1)
    if wide.size:
        whole_word = _load(loads, point[wide], np.minimum(whole_digits[wide], 8))
        ok[wide] &= _all_digits(whole_word)
        whole[wide] = _eight_digits(whole_word)
    long = np.flatnonzero(ok & ((whole_digits > 8) | (fraction_digits > 8)))
    if long.size:
        ok &= (whole_digits <= 16) & (fraction_digits <= 16)
        long = long[ok[long]]
        high_whole = _load(loads, point[long], np.clip(whole_digits[long] - 8, 0, 8), 8)
        high_fraction = _load(loads, ends[long], np.clip(fraction_digits[long] - 8, 0, 8), 8)
        ok[long] &= _all_digits(high_whole, high_fraction)
        whole[long] += _eight_digits(high_whole) * _U64(10 ** 8)
        fraction[long] += _eight_digits(high_fraction) * _U64(10 ** 8)
    fraction_digits = np.minimum(fraction_digits, 16)
    mantissa = whole * _POW10_INT[fraction_digits] + fraction  # wraps where a part is long: not ok below
    ok &= (mantissa < _EXACT) & (whole_digits + fraction_digits <= 16)
    value = mantissa.astype(np.float64) / _POW10[fraction_digits]
    np.negative(value, out=value, where=negative)
    slot = index.astype(np.int64) - 1
    line = np.repeat(np.arange(n_lines), line_ends - first + 1)
    view = memoryview(buffer)
    for k in np.flatnonzero(~ok).tolist():  # as ULTRA: int(index) - 1, float(value) only for a slot it keeps
        slot_k = int(view[starts[k]:colons[k]].tobytes()) - 1
        slot[k] = slot_k
        if slot_k < feature_size:
            value[k] = float(view[colons[k] + 1:ends[k]].tobytes())
            if slot_k < -feature_size:
                raise IndexError("list assignment index out of range")
    slot[slot < 0] += feature_size
    keep = slot < feature_size
    if not keep.all():
        line, slot, value = line[keep], slot[keep], value[keep]
    if np.any((line[1:] == line[:-1]) & (slot[1:] <= slot[:-1])):  # a slot written twice on a line: last wins
        key = line * feature_size + slot
        _, first_from_end = np.unique(key[::-1], return_index=True)
        last = np.sort(key.size - 1 - first_from_end)
        line, slot, value = line[last], slot[last], value[last]
    heads = [view[a:b].tobytes() for a, b in zip(line_starts.tolist(), head_ends.tolist())] if head_fields else []
    return Block(heads=heads, fields=Fields(line=line, slot=slot, value=value))
