"""``index:value`` feature fields parsed in blocks with numpy, to the numbers ULTRA's reader gets.

ULTRA's reader (``Raw_data``) turns every field ``k:v`` of a line into
``int(k)`` and ``float(v)``, one Python object per number (about 0.7 us per
field).  :func:`parse_fields` does the same for a block of lines at once:

- the block is cut at its markers (space, newline, colon, dot); a block whose
  markers are not exactly ``index:value`` fields separated by single spaces
  (at most one dot per value, none in an index) is refused (None), and the
  caller reads it line by line as ULTRA does;
- indices of up to 8 digits and values ``[-]digits[.digits]`` of up to 16
  digits on either side of the dot are read eight bytes at a time (an
  unaligned 64-bit load per eight digits, the digits combined with three
  multiplications: the "SWAR" trick of simdjson);
- a value becomes ``m / 10**f`` with its digits as the integer ``m`` and ``f``
  digits after the dot.  With ``m < 2**53`` and ``f <= 22`` both operands are
  exact doubles, so the one IEEE division is correctly rounded: the same
  double as Python's ``float`` (Clinger's fast path);
- any other field (an exponent, ``nan``, a sign on the index, more digits) is
  read with Python's ``int`` and ``float``, exactly as ULTRA does; their
  errors propagate (the caller then reads the block line by line, where
  ULTRA's error is raised at ULTRA's line).

Slots follow ULTRA: feature ``k`` goes to slot ``k - 1``, ``k = 0`` to the last
slot, ``k > feature_size`` is dropped, and of a slot written twice on a line
the last value wins.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

#: Bytes of padding before and after a block, so that every 16-byte window ending inside it is in bounds.
PAD = 16
#: Padding byte: a digit, so it is never a marker (it is masked out of every window).
_PAD_BYTE = b"0"
_SPACE, _NEWLINE, _COLON, _DOT, _MINUS = (ord(c) for c in " \n:.-")
_U64 = np.uint64
_ZEROS = 0x3030303030303030  # eight ASCII '0'
_ALL = (1 << 64) - 1
#: [m] the bits of the last m bytes of a little-endian word (the m digits of a right-aligned window).
_LAST_BYTES = np.array([0] + [(_ALL << (8 * (8 - m))) & _ALL for m in range(1, 9)], dtype=_U64)
#: [m] ASCII '0' in the other 8 - m bytes (so a masked word is always eight digits).
_ZERO_FILL = np.array([_ZEROS & ~int(mask) & _ALL for mask in _LAST_BYTES], dtype=_U64)
#: Exact powers of ten as doubles (10**22 is the largest).
_POW10 = 10.0 ** np.arange(23)
_EXACT = float(2 ** 53)


@dataclass
class Fields:
    """The fields of a block that land in a slot, in file order, a repeated slot of a line only once (its last).

    Attributes:
        line: [n] int64 line of each field (0 = the block's first line of fields).
        slot: [n] int64 slot in 0..feature_size-1.
        value: [n] float64 ``float`` of the value text.
    """

    line: np.ndarray
    slot: np.ndarray
    value: np.ndarray


def _eight_digits(words: np.ndarray) -> np.ndarray:
    """[n] uint64 number of each little-endian word of eight ASCII digits (the first byte the leading digit)."""
    v = words - _U64(_ZEROS)
    v = v * _U64(10) + (v >> _U64(8))
    return (((v & _U64(0x000000FF000000FF)) * _U64(100 + (1000000 << 32)))
            + (((v >> _U64(16)) & _U64(0x000000FF000000FF)) * _U64(1 + (10000 << 32)))) >> _U64(32)


def _are_digits(words: np.ndarray) -> np.ndarray:
    """[n] bool: every byte of the word is an ASCII digit."""
    high = _U64(0xF0F0F0F0F0F0F0F0)
    return ((words & high) | (((words + _U64(0x0606060606060606)) & high) >> _U64(4))) == _U64(0x3333333333333333)


def _right_aligned(loads: np.ndarray, ends: np.ndarray, count: np.ndarray, words: int):
    """(number, ok) of the ``count`` (<= 8 * words) bytes before ``ends``; ok: all of them are digits."""
    number = np.zeros(ends.shape, dtype=_U64)
    ok = np.ones(ends.shape, dtype=bool)
    for w in range(words):  # w = 0: the last eight bytes
        m = np.clip(count - 8 * w, 0, 8)
        word = (loads[ends - 8 * (w + 1)] & _LAST_BYTES[m]) | _ZERO_FILL[m]
        ok &= _are_digits(word)
        number += _eight_digits(word) * _U64(10 ** (8 * w))
    return number, ok


def parse_fields(text: bytes, feature_size: int) -> Optional[Fields]:
    """The fields of ``text``: lines of ``index:value`` fields separated by single spaces, each line (none
    empty) ending in a newline.  None: ``text`` is not of that form (read its lines as ULTRA does).

    Raises:
        ValueError, IndexError: a field ULTRA's reader would fail on (as ``int`` / ``float`` raise them).
    """
    if feature_size <= 0:
        return None
    buffer = _PAD_BYTE * PAD + text + _PAD_BYTE * PAD
    t = np.frombuffer(buffer, dtype=np.uint8)
    # loads[p]: the eight bytes from p as a little-endian word (an unaligned view, no copy).
    loads = np.ndarray((t.size - 7,), dtype="<u8", buffer=buffer, strides=(1,))
    markers = np.flatnonzero((t == _SPACE) | (t == _NEWLINE) | (t == _COLON) | (t == _DOT))
    kinds = t[markers]
    colon = np.flatnonzero(kinds == _COLON)  # into markers
    n = colon.size
    if n == 0 or colon[-1] + 1 >= markers.size:
        return None
    has_dot = kinds[colon + 1] == _DOT
    after = colon + 1 + has_dot
    # Exactly "colon [dot] separator" per field and nothing else (every line holds a field).
    if after[-1] >= markers.size or markers.size != 2 * n + int(has_dot.sum()):
        return None
    end_kind = kinds[after]
    if not np.all((end_kind == _SPACE) | (end_kind == _NEWLINE)) or kinds[-1] != _NEWLINE:
        return None
    colons, ends, dots = markers[colon], markers[after], markers[colon + 1]
    starts = np.empty_like(ends)
    starts[0] = PAD
    starts[1:] = ends[:-1] + 1
    index_length = colons - starts
    negative = t[colons + 1] == _MINUS
    body = colons + 1 + negative
    point = np.where(has_dot, dots, ends)
    whole_digits = point - body
    fraction_digits = np.where(has_dot, ends - dots - 1, 0)
    # Indices: up to 8 digits.
    index, ok = _right_aligned(loads, colons, np.minimum(index_length, 8), 1)
    ok &= (index_length >= 1) & (index_length <= 8)
    # Values: up to 16 digits before and after the dot, at least one in all.
    whole, whole_ok = _right_aligned(loads, point, np.minimum(whole_digits, 16), 2)
    fraction, fraction_ok = _right_aligned(loads, ends, np.minimum(fraction_digits, 16), 2)
    ok &= whole_ok & fraction_ok & (whole_digits <= 16) & (fraction_digits <= 16)
    ok &= (whole_digits + fraction_digits >= 1) & (whole_digits + fraction_digits <= 19)
    powers = np.array([10 ** k for k in range(17)], dtype=_U64)
    mantissa = whole * powers[np.minimum(fraction_digits, 16)] + fraction
    mantissa_f = mantissa.astype(np.float64)
    ok &= mantissa_f < _EXACT
    value = mantissa_f / _POW10[np.minimum(fraction_digits, 16)]
    value = np.where(negative, -value, value)
    slot = index.astype(np.int64) - 1
    line = np.cumsum(t[ends] == _NEWLINE) - (t[ends] == _NEWLINE)
    for k in np.flatnonzero(~ok):  # as ULTRA: int(index) - 1, float(value) only for a slot it keeps
        index_k = int(buffer[starts[k]:colons[k]]) - 1
        slot[k] = index_k
        if index_k < feature_size:
            value[k] = float(buffer[colons[k] + 1:ends[k]])
            if index_k < -feature_size:
                raise IndexError("list assignment index out of range")
    slot = np.where(slot < 0, slot + feature_size, slot)
    keep = slot < feature_size
    line, slot, value = line[keep], slot[keep], value[keep]
    same_line = line[1:] == line[:-1]
    if np.any(same_line & (slot[1:] <= slot[:-1])):  # a slot written twice on a line: the last value wins
        key = line * feature_size + slot
        _, first_from_end = np.unique(key[::-1], return_index=True)
        last = np.sort(key.size - 1 - first_from_end)
        line, slot, value = line[last], slot[last], value[last]
    return Fields(line=line, slot=slot, value=value)
