"""A compact reader for ULTRA's data layouts: a split's features as one float32 matrix.

ULTRA's reader (``ultra.utils.data_utils.Raw_data``) keeps every feature as a
Python float in one list per document (about 40 bytes a feature: 0.67 MB per
query at Yahoo's 700 features) and parses the text one float at a time.
:class:`CompactRawData` is a ``Raw_data`` (a subclass, ULTRA's own
``__init__``, ``remove_invalid_data`` and list padding) whose ``features`` is
a ``[D, F]`` float32 numpy matrix, 4 bytes a feature, read in blocks with
numpy (:mod:`.feature_text`).  Every other attribute is what ULTRA's reader
gives, built by the same steps.

What uses ``features`` gets the same numbers: row ``i`` is document ``i``'s
vector, equal to ``float(text)`` rounded to float32; ``pad`` appends ULTRA's
zero row.  ULTRA's feeds append ``features[i]`` to a list and call
``np.array`` on it: a float32 matrix here, float64 from ULTRA's lists, and
ULTRA's rankers (``Linear``, ``DNN``, ``SetRank``) cast their input to
float32 before anything else, as our feeds' matrix
(:func:`ultra_multr.feeds.arrays.feature_matrix`, which now takes this
matrix without a copy) always was.

A block of lines that is not plain ``head index:value ...`` (a tab, a
carriage return, a doubled space, non-ASCII bytes, a field ULTRA would fail
on) is read line by line with ULTRA's own statements, so its numbers and its
errors are ULTRA's, at ULTRA's line.  The small files (``.init_list``,
``.labels``, ``.initial_scores``) are read as ULTRA reads them.  The ULTRE
layout (``main.py --click_model_dir``) is left to ULTRA's code
(``features_dict`` of lists; :mod:`.ultre` converts it).

Installed by the start-up hook (:mod:`ultra_multr.compat.startup`) when ULTRA
is imported, as ``ultra.utils.read_data`` (and ``ultra.utils.data_utils``'s),
so main.py, ULTRA's feeds and ours all read through it (main.py's first read checks its arguments and settings
file first: :func:`~ultra_multr.compat.main_py_start.check_main_py_start`);
``ULTRA_MULTR_COMPACT_READER=0`` (looked at on every call) gives ULTRA's own
reader.  Parsed splits are kept for later starts by :mod:`.feature_cache`
(``ULTRA_MULTR_FEATURE_CACHE=0``: not).
"""
from __future__ import annotations

import hashlib
import locale
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from ultra.utils import data_utils
from ultra.utils.data_utils import Raw_data

from ultra_multr.compat.early_checks import is_ultra_main_py
from ultra_multr.data import feature_cache
from ultra_multr.data.feature_text import PAD, parse_block

ENV = "ULTRA_MULTR_COMPACT_READER"
#: Bytes per block of lines: a block's arrays (8 bytes per field, about 13 bytes of text) stay under glibc's
#: 128 KiB mmap threshold, so they reuse the heap instead of faulting in fresh pages every block (measured in a
#: fresh process: 25 % less CPU than 256 KiB blocks, 15 % less than 64 KiB ones), and in the processor's cache.
BLOCK_BYTES = 1 << 17


def enabled() -> bool:
    """Whether ``read_data`` gives the compact reader (``ULTRA_MULTR_COMPACT_READER`` is not "0")."""
    return os.environ.get(ENV, "1").strip() != "0"


@dataclass
class ParsedSplit:
    """One file's parse.

    Attributes:
        matrix: [D + 1, F] float32, the documents' rows and ULTRA's zero padding row last.
        dids: [D] document ids.
        lists: the libsvm layout's ``qids``, ``initial_list`` and ``labels`` (empty for ULTRA's layout).
        source: "parsed" or "cache"; seconds: how long it took.
        ultra_lines: how many lines were read line by line with ULTRA's statements (blocks that are not plain).
    """

    matrix: np.ndarray
    dids: List[str]
    lists: Dict[str, list] = field(default_factory=dict)
    source: str = "parsed"
    seconds: float = 0.0
    ultra_lines: int = 0


class _Rows:
    """A growing [rows, width] float32 matrix, one spare zero row at the end (ULTRA's padding row).

    Allocated zeroed and untouched (pages cost memory only when written),
    sized from the first block; grown in place (``ndarray.resize``: realloc,
    no second copy) if the estimate was short, shrunk to fit at the end.
    """

    def __init__(self, width: int) -> None:
        self.width = width
        self.array: Optional[np.ndarray] = None
        self.count = 0

    def take(self, rows: int, estimate: int = 0) -> int:
        """Room for ``rows`` more rows; returns the first one's index."""
        need = self.count + rows + 1
        if self.array is None:
            self.array = np.zeros((max(need, estimate + 1), self.width), dtype=np.float32)
        elif need > self.array.shape[0]:
            self.array.resize((max(need, self.array.shape[0] * 5 // 4), self.width), refcheck=False)
        start = self.count
        self.count += rows
        return start

    def finish(self) -> np.ndarray:
        if self.array is None:
            self.take(0)
        self.array.resize((self.count + 1, self.width), refcheck=False)
        return self.array


class _Split:
    """The parse of one file: :func:`parse_block` for plain blocks, ULTRA's statements for the others."""

    def __init__(self, layout: str, feature_size: int, removed: Sequence[int], rank_cut, file_prefix: str) -> None:
        self.layout = layout
        self.feature_size = feature_size
        self.removed = list(removed)
        self.rank_cut = rank_cut
        self.file_prefix = file_prefix
        self.encoding = locale.getpreferredencoding(False)  # what ULTRA's open() decodes with
        try:  # ULTRA deletes these slots from every row; where it fails, the first line fails as ULTRA's would
            kept = list(range(feature_size))
            for rf_idx in self.removed:
                del kept[rf_idx - 1]
            self.columns: Optional[np.ndarray] = np.asarray(kept, dtype=np.int64) if self.removed else None
            self.fast = True
        except IndexError:
            self.columns, self.fast = None, False
        self.rows = _Rows(feature_size - len(self.removed))
        self.dids: List[str] = []
        # the libsvm layout's state, as ULTRA's loop keeps it
        self.qid_to_idx: Dict[str, int] = {}
        self.qids: List[str] = []
        self.initial_list: List[List[int]] = []
        self.labels: List[list] = []
        self.line_num = -1
        self.estimate = 0
        self.ultra_lines = 0

    # -- one block --------------------------------------------------------------------------------------------
    def add_block(self, buffer: bytearray, start: int, stop: int, file_bytes: int) -> None:
        """Add the lines ``buffer[start:stop]`` (see :func:`_blocks`)."""
        if self.rows.array is None:  # rows ~ lines: size the matrix from the first block
            lines = buffer.count(b"\n", start, stop)
            self.estimate = int(lines * file_bytes / max(stop - start, 1) * 1.05) + 16
        commit = None
        if self.fast:
            try:  # reads the block and changes nothing; commit() then adds it
                commit = self._fast(buffer, start, stop)
            except Exception:  # a field ULTRA fails on: its statements below raise ULTRA's error at its line
                commit = None
        if commit is None:
            self._ultra_statements(bytes(buffer[start:stop]))
        else:
            commit()

    def _store(self, lines: int, line_of_field: np.ndarray, slot: np.ndarray, value: np.ndarray) -> None:
        start = self.rows.take(lines, self.estimate)
        with np.errstate(over="ignore"):  # a value beyond float32 becomes inf, as ULTRA's float32 cast makes it
            if self.columns is None:
                self.rows.array[start + line_of_field, slot] = value
            else:
                block = np.zeros((lines, self.feature_size), dtype=np.float32)
                block[line_of_field, slot] = value
                self.rows.array[start:start + lines] = block[:, self.columns]

    def _fast(self, buffer: bytearray, start: int, stop: int) -> Optional[Callable[[], None]]:
        block = parse_block(buffer, start, stop, self.feature_size, 1 if self.layout == "ultra" else 2)
        if block is None:
            return None
        fields = block.fields
        if self.layout == "ultra":
            dids = [head.decode("ascii") for head in block.heads]

            def commit() -> None:
                self._store(len(dids), fields.line, fields.slot, fields.value)
                self.dids += dids

            return commit
        heads = []  # (qid, label) of each line, as ULTRA's loop reads them
        for head in block.heads:
            label_text, qid_field = head.split(b" ")
            heads.append((qid_field.decode("ascii").split(":")[1], label_text))
        counts: Dict[str, int] = {}  # which lines rank_cut keeps, without touching the state yet
        kept = []
        for qid, label_text in heads:
            known = self.qid_to_idx.get(qid)
            count = counts.get(qid, len(self.initial_list[known]) if known is not None else 0)
            keep = not (self.rank_cut and count >= self.rank_cut)
            counts[qid] = count + keep
            kept.append(int(label_text) if keep else None)
        kept_lines = np.asarray([label is not None for label in kept])
        row_of_line = np.cumsum(kept_lines) - 1
        of_kept = kept_lines[fields.line]

        def commit() -> None:
            for (qid, _), label in zip(heads, kept):  # ULTRA's loop, its state changes in its order
                self.line_num += 1
                qidx = self._query(qid)
                if label is None:
                    continue
                self.initial_list[qidx].append(self.line_num)
                self.labels[qidx].append(label)
                self.dids.append(self.file_prefix + "_" + qid + "_" + str(self.line_num))
                if self.line_num % 10000 == 0:
                    print("Reading finish: %d lines" % self.line_num)
            self._store(int(row_of_line[-1]) + 1, row_of_line[fields.line[of_kept]], fields.slot[of_kept],
                        fields.value[of_kept])

        return commit

    def _query(self, qid: str) -> int:
        if qid not in self.qid_to_idx:
            self.qid_to_idx[qid] = len(self.qid_to_idx)
            self.qids.append(qid)
            self.initial_list.append([])
            self.labels.append([])
        return self.qid_to_idx[qid]

    def _ultra_statements(self, block: bytes) -> None:
        """The block read line by line with the statements of ULTRA's reader (text decoded as its open() does)."""
        text = block.decode(self.encoding)
        if "\r" in text:  # universal newlines
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        lines.pop()
        self.ultra_lines += len(lines)
        for line in lines:
            arr = line.strip().split(" ")
            if self.layout == "ultra":
                self.dids.append(arr[0])
                features = arr[1:]
            else:
                self.line_num += 1
                qid = arr[1].split(":")[1]
                qidx = self._query(qid)
                if self.rank_cut and len(self.initial_list[qidx]) >= self.rank_cut:
                    continue
                self.initial_list[qidx].append(self.line_num)
                label = int(arr[0])
                self.labels[qidx].append(label)
                self.dids.append(self.file_prefix + "_" + qid + "_" + str(self.line_num))
                features = arr[2:]
            row = [0.0 for _ in range(self.feature_size)]
            for x in features:
                arr2 = x.split(":")
                feautre_idx = int(arr2[0]) - 1
                if feautre_idx < self.feature_size:
                    row[int(feautre_idx)] = float(arr2[1])
            for rf_idx in self.removed:
                del row[rf_idx - 1]
            start = self.rows.take(1, self.estimate)
            with np.errstate(over="ignore"):  # as in _store
                self.rows.array[start] = row
            if self.layout == "libsvm" and self.line_num % 10000 == 0:
                print("Reading finish: %d lines" % self.line_num)

    def finish(self) -> ParsedSplit:
        lists = {}
        if self.layout == "libsvm":
            lists = {"qids": self.qids, "initial_list": self.initial_list, "labels": self.labels}
        return ParsedSplit(matrix=self.rows.finish(), dids=self.dids, lists=lists, ultra_lines=self.ultra_lines)


def _blocks(path: str, digest, block_bytes: int) -> Iterator[Tuple[bytearray, int, int]]:
    """(buffer, start, stop) for blocks of whole lines ``buffer[start:stop]`` of a file, about ``block_bytes``
    each, read into one reused buffer (a block is valid until the next is asked for); :data:`PAD` bytes come
    before ``start``.  A last line without its newline gets one (ULTRA's reader reads it).  Every byte read
    goes into ``digest`` (None: no digest)."""
    buffer = bytearray(PAD + block_bytes)
    filled = PAD
    with open(path, "rb") as handle:
        while True:
            if filled == len(buffer):  # a line longer than the buffer
                buffer = buffer + bytearray(len(buffer))
            with memoryview(buffer) as view:
                read = handle.readinto(view[filled:])
                if read and digest is not None:
                    digest.update(view[filled:filled + read])
            if not read:
                break
            filled += read
            stop = buffer.rfind(b"\n", PAD, filled) + 1
            if stop:
                yield buffer, PAD, stop
                rest = filled - stop
                buffer[PAD:PAD + rest] = buffer[stop:filled]
                filled = PAD + rest
    if filled > PAD:
        if filled == len(buffer):
            buffer = buffer + bytearray(1)
        buffer[filled] = ord("\n")
        yield buffer, PAD, filled + 1


def read_split(path: str, layout: str, feature_size: int, removed: Sequence[int], rank_cut,
               file_prefix: str) -> ParsedSplit:
    """Parse one split file (``layout`` "ultra": a ``.feature`` file; "libsvm": a ``.txt`` file), or take its
    parse from the feature cache when the file is the one parsed before."""
    started = time.perf_counter()
    split = _Split(layout, feature_size, removed, rank_cut, file_prefix)
    parse = {"layout": layout, "feature_size": feature_size, "removed": list(removed), "encoding": split.encoding,
             "rank_cut": rank_cut or None if layout == "libsvm" else None,
             "file_prefix": file_prefix if layout == "libsvm" else None}
    key = None
    if feature_cache.enabled():
        key = feature_cache.entry_key(path, parse)
        entry = feature_cache.load(key, path)
        if entry is not None:
            lists = {name: entry.meta[name] for name in ("qids", "initial_list", "labels") if name in entry.meta}
            return ParsedSplit(matrix=entry.matrix, dids=entry.meta["dids"], lists=lists, source="cache",
                               seconds=time.perf_counter() - started)
    digest = hashlib.sha256() if key is not None else None
    file_bytes = os.path.getsize(path)
    for buffer, start, stop in _blocks(path, digest, BLOCK_BYTES):
        split.add_block(buffer, start, stop, file_bytes)
    parsed = split.finish()
    parsed.seconds = time.perf_counter() - started
    if key is not None and key == feature_cache.entry_key(path, parse):  # not changed while it was read
        why = feature_cache.store(key, path, parse, digest.hexdigest(), parsed.matrix,
                                  dict(parsed.lists, dids=parsed.dids))
        if why:
            print("Compact reader: %s not kept for later starts: %s" % (path, why))
    return parsed


class CompactRawData(Raw_data):
    """ULTRA's ``Raw_data`` with ``features`` as one [D, F] float32 matrix (see the module docstring)."""

    def load_data_in_ULTRA_format(self, data_path=None, file_prefix=None, rank_cut=None):
        print('Read data from %s/%s in ULTRA format.' % (data_path, file_prefix))
        self.load_basic_data_information(data_path)
        base = data_path + file_prefix + '/' + file_prefix
        self._take(read_split(base + '.feature', "ultra", self.feature_size, self.removed_feature_ids, rank_cut,
                              file_prefix))
        self.feature_size -= len(self.removed_feature_ids)
        print('Feature reading finish.')
        with open(base + '.init_list') as init_list_fin:
            for line in init_list_fin:
                arr = line.strip().split(' ')
                self.qids.append(arr[0])
                if rank_cut:
                    self.initial_list.append([int(x) for x in arr[1:][:rank_cut]])
                else:
                    self.initial_list.append([int(x) for x in arr[1:]])
                if len(self.initial_list[-1]) > self.rank_list_size:
                    self.rank_list_size = len(self.initial_list[-1])
        print('List reading finish.')
        with open(base + '.labels') as label_fin:
            for line in label_fin:
                self.labels.append([float(x) for x in line.strip().split(' ')[1:][:self.rank_list_size]])
        if os.path.isfile(base + '.intial_scores'):  # sic: ULTRA looks for this name, then reads .initial_scores
            with open(base + '.initial_scores') as fin:
                for line in fin:
                    self.initial_scores.append([float(x) for x in line.strip().split(' ')[1:]])
        print('Label reading finish.')
        self.initial_list_lengths = [len(self.initial_list[i]) for i in range(len(self.initial_list))]
        self.remove_invalid_data()
        print('Data reading finish!')

    def load_data_in_libsvm_format(self, data_path=None, file_prefix=None, rank_cut=None):
        print('Read data from %s/%s in libsvm format.' % (data_path, file_prefix))
        self.load_basic_data_information(data_path)
        parsed = read_split(data_path + file_prefix + '/' + file_prefix + '.txt', "libsvm", self.feature_size,
                            self.removed_feature_ids, rank_cut, file_prefix)
        self._take(parsed)
        self.qids, self.initial_list, self.labels = (parsed.lists[name] for name in ("qids", "initial_list", "labels"))
        self.feature_size -= len(self.removed_feature_ids)
        self.initial_list_lengths = [len(self.initial_list[i]) for i in range(len(self.initial_list))]
        for i in range(len(self.initial_list_lengths)):
            x = self.initial_list_lengths[i]
            if self.rank_list_size < x:
                self.rank_list_size = x
        self.remove_invalid_data()
        print('Data reading finish!')

    def _take(self, parsed: ParsedSplit) -> None:
        self._feature_rows = parsed.matrix  # the rows and ULTRA's padding row (pad() shows it)
        self.features = self._features_given = parsed.matrix[:-1]
        self.dids = parsed.dids
        matrix = parsed.matrix
        print("Compact reader: %d documents x %d features, float32 (%.0f MB), %s in %.2f s%s"
              % (matrix.shape[0] - 1, matrix.shape[1], matrix.nbytes / 2 ** 20,
                 "parsed" if parsed.source == "parsed" else "mapped from the feature cache", parsed.seconds,
                 " (%d lines not plain, read with ULTRA's statements)" % parsed.ultra_lines
                 if parsed.ultra_lines else ""))

    def pad(self, rank_list_size, pad_tails=True):
        """ULTRA's ``pad``: the lists padded with -1 (ULTRA's own code), one zero row after the features."""
        features = self.features
        if not isinstance(features, np.ndarray):  # the ULTRE layout, converted to lists: ULTRA's pad as it is
            return super().pad(rank_list_size, pad_tails)
        self.features = []
        super().pad(rank_list_size, pad_tails)  # appends one zero row to the empty list, pads the lists
        if features is getattr(self, "_features_given", None):  # the matrix read: its zero row follows
            self.features = self._feature_rows
        else:  # padded before (ULTRA appends another zero row), or features replaced since
            self.features = np.concatenate([features, np.zeros((1, features.shape[1]), dtype=features.dtype)])
        self._features_given = None


def read_data(data_path, file_prefix, click_model_dir, rank_cut=None):
    """``ultra.utils.read_data`` with the compact reader (ULTRA's own when ``ULTRA_MULTR_COMPACT_READER=0``).

    main.py's first call (its first split) checks its arguments and settings file first
    (:func:`~ultra_multr.compat.main_py_start.check_main_py_start`), before anything is read.
    """
    if is_ultra_main_py(sys._getframe(1).f_code.co_filename):  # main.py's own call (not a feed's, a pilot's)
        from ultra_multr.compat.main_py_start import check_main_py_start  # here: it imports ULTRA, which installs us

        check_main_py_start()
    if not enabled():
        return ULTRA_READ_DATA(data_path, file_prefix, click_model_dir, rank_cut)
    return CompactRawData(data_path, file_prefix, click_model_dir, rank_cut)


read_data.ultra_multr_compact_reader = True  # type: ignore[attr-defined]
#: ULTRA's own ``read_data`` (what :func:`install` replaced).
ULTRA_READ_DATA = data_utils.read_data


def install() -> None:
    """Make :func:`read_data` ULTRA's ``read_data`` (``ultra.utils`` and ``ultra.utils.data_utils``); idempotent."""
    global ULTRA_READ_DATA
    import ultra.utils

    if not getattr(data_utils.read_data, "ultra_multr_compact_reader", False):
        ULTRA_READ_DATA = data_utils.read_data
    data_utils.read_data = read_data
    ultra.utils.read_data = read_data
