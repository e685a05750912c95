"""Reader of the Baidu-ULTR feather files in the release's layout (:mod:`ultra_multr.click_logs.baidu_schema`).

A file holds one row per document; a session (an annotated query) is a run
of consecutive rows with the same ``query_no``, and its ``n`` is the run's
length.  One file at a time (memory is bounded by one file: a click file of
the release holds about 60,000 sessions), the features the user chose (the
12 lexical ones, the 768-d embedding, or both) as one float32 array.

Ranks are the logged positions: slot k of a click session holds the
document logged at ``position`` k + 1.  The writer dropped documents with a
missing text and kept their positions, so a session can have gaps; a gap is
a masked slot (documents after it keep their rank).  Annotated queries have
no position: their documents fill the slots in file order.

A file's kind (click sessions or annotations) is given by the caller, or
read from its name as the release names its files
(:func:`~ultra_multr.click_logs.baidu_schema.file_kind`).

pyarrow (optional extra ``logs``) is imported when a file is read.  A file
whose columns cannot be read as the release's types, or whose features are
not finite, is refused with a :class:`BaiduSchemaError` naming the file, the
column and, for a bad value, the row.
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ultra_multr.click_logs import baidu_schema as schema

#: Feature choices: the lexical features, the embedding, or both (lexical first).
FEATURE_SETS = ("lexical", "embedding", "both")


#: Each kind of file in words.
_KIND_WORDS = {"clicks": "click sessions", "annotations": "annotations"}


class BaiduSchemaError(ValueError):
    """A Baidu-ULTR file that does not hold the release's layout (the message names file, column and row)."""


def feature_size(features: str) -> int:
    """F of a feature choice: 12 (lexical), 768 (embedding) or 780 (both)."""
    check_feature_set(features)
    return len(schema.LEXICAL_FEATURES) * (features != "embedding") + schema.EMBEDDING_SIZE * (features != "lexical")


def check_feature_set(features: str) -> None:
    if features not in FEATURE_SETS:
        raise ValueError("features=%r: expected one of %s" % (features, ", ".join(FEATURE_SETS)))


@dataclass
class Sessions:
    """The sessions (or annotated queries) of one file, slot k = logged position k + 1, first N slots kept.

    Attributes:
        path: the file.
        kind: "clicks" or "annotations".
        query_no: [S] int64 the writer's query number of each session (its run of rows).
        query_md5: [S] str, the query key (``query_id`` collides across queries).
        query_id: [S] str.
        n: [S] int64 the session's documents in the file (rows of its run), before the cut to N.
        text_md5: [S, N] str document ids (the release keys documents by text); "" at masked slots.
        features: [S, N, F] float32; 0 at masked slots.
        mask: [S, N] bool, True where a document is; False at padding and at a gap in the positions.
        clicks: [S, N] float32 clicks (annotations: the 0-4 labels); 0 at masked slots.
        positions: [S, N] int32 the logged position (annotations: the rank in the file, 1..n); 0 when masked.
    """

    path: str
    kind: str
    query_no: np.ndarray
    query_md5: np.ndarray
    query_id: np.ndarray
    n: np.ndarray
    text_md5: np.ndarray
    features: np.ndarray
    mask: np.ndarray
    clicks: np.ndarray
    positions: np.ndarray

    def __len__(self) -> int:
        return int(self.mask.shape[0])


def check_schema(path: str, found, kind: str, columns: Sequence[str]) -> None:
    """Each of ``columns`` is in ``found`` (a pyarrow schema) with a type readable as the release's.

    Raises:
        BaiduSchemaError: naming the file, the column, the expected and the found type (or the file's kind, when
            it holds the other kind's target column).
    """
    targets = {"clicks": "click", "annotations": "label"}
    other = "annotations" if kind == "clicks" else "clicks"
    if targets[kind] in columns and targets[kind] not in found.names and targets[other] in found.names:
        raise BaiduSchemaError("%s holds %s (a %r column, no %r), not %s"
                               % (path, _KIND_WORDS[other], targets[other], targets[kind], _KIND_WORDS[kind]))
    for name in columns:
        notation = schema.FILE_KINDS[kind][name]
        if name not in found.names:
            raise BaiduSchemaError("%s: column %r is missing (expected %s; the file has %s)"
                                   % (path, name, notation, ", ".join(found.names)))
        actual = found.field(name).type
        if not schema.accepts(notation, actual):
            raise BaiduSchemaError("%s: column %r has type %s, expected %s" % (path, name, actual, notation))


def session_runs(query_no: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(starts [S] int64, n [S] int64): the runs of equal consecutive values of ``query_no`` [R]."""
    if len(query_no) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[0], np.flatnonzero(query_no[1:] != query_no[:-1]) + 1]).astype(np.int64)
    return starts, np.diff(np.append(starts, len(query_no))).astype(np.int64)


def _column(path: str, table, name: str, dtype) -> np.ndarray:
    """[R] the scalar column ``name`` as ``dtype``.

    Raises:
        BaiduSchemaError: a null value (naming its row).
    """
    column = table.column(name)
    if column.null_count:
        import pyarrow.compute as pc

        row = int(np.flatnonzero(pc.is_null(column).to_numpy(zero_copy_only=False))[0])
        raise BaiduSchemaError("%s: column %r row %d is null" % (path, name, row))
    return column.to_numpy(zero_copy_only=False).astype(dtype)


def _check_per_query(path: str, name: str, values: np.ndarray, session: np.ndarray, starts: np.ndarray) -> None:
    """``values`` [R] are constant within each session (the writer repeats per-query values on each row)."""
    wrong = np.flatnonzero(values != values[starts][session])
    if wrong.size:
        row = int(wrong[0])
        start = int(starts[session[row]])
        raise BaiduSchemaError("%s: column %r row %d is %r, but the session (query_no run) starting at row %d has %r"
                               % (path, name, row, values[row].item(), start, values[start].item()))


def _check_range(path: str, name: str, values: np.ndarray, low: int, high: Optional[int]) -> None:
    """``low`` <= ``values`` [R] (<= ``high``), else an error naming the first row outside."""
    bad = (values < low) | ((values > high) if high is not None else False)
    if np.any(bad):
        row = int(np.flatnonzero(bad)[0])
        raise BaiduSchemaError("%s: column %r row %d is %r, expected %s" % (
            path, name, row, values[row].item(), ">= %d" % low if high is None else "in %d..%d" % (low, high)))


def _click_slots(path: str, table, session: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """[R] int64 the slot of each row of a click file: its logged ``position`` - 1.

    Raises:
        BaiduSchemaError: a position < 1, or two rows of a session at one position (naming the second row).
    """
    position = _column(path, table, "position", np.int64)
    _check_range(path, "position", position, 1, None)
    order = np.lexsort((position, session))
    same = (session[order][1:] == session[order][:-1]) & (position[order][1:] == position[order][:-1])
    if np.any(same):
        row = int(max(order[1:][same][0], order[:-1][same][0]))
        raise BaiduSchemaError("%s: column 'position' row %d repeats position %d of the session starting at row %d"
                               % (path, row, position[row], starts[session[row]]))
    return position - 1


def _lexical(path: str, table) -> np.ndarray:
    """[R, 12] float64 the lexical features, as stored.

    Raises:
        BaiduSchemaError: a value that is NaN, infinite or beyond float32's range (the features are read as
            float32), naming its column and row.
    """
    lexical = np.stack([_column(path, table, name, np.float64) for name in schema.LEXICAL_FEATURES], axis=1)
    finite = np.isfinite(lexical)
    bad = np.argwhere(~finite | (np.abs(np.where(finite, lexical, 0.0)) > np.finfo(np.float32).max))
    if len(bad):
        row, column = (int(i) for i in bad[0])
        raise BaiduSchemaError("%s: column %r row %d is %r: features must be finite numbers within float32's range"
                               % (path, schema.LEXICAL_FEATURES[column], row, lexical[row, column].item()))
    return lexical


#: Rows of the embedding checked at a time (bounds the check's temporary memory).
_FINITE_CHECK_ROWS = 65536


def _embedding(path: str, table) -> np.ndarray:
    """[R, 768] float16 (float32 if stored wider) the embedding column (one list per row).

    Raises:
        BaiduSchemaError: a list of another length, or a value that is not finite (naming its row).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    column = table.column(schema.EMBEDDING).combine_chunks()
    sizes = pc.list_value_length(column).to_numpy(zero_copy_only=False)
    wrong = np.flatnonzero(sizes != schema.EMBEDDING_SIZE)
    if wrong.size:
        row = int(wrong[0])
        raise BaiduSchemaError("%s: column %r row %d holds %s values, expected %d"
                               % (path, schema.EMBEDDING, row, sizes[row], schema.EMBEDDING_SIZE))
    values = column.flatten()
    if values.type != pa.float16():
        values = values.cast(pa.float32())
    embedding = values.to_numpy(zero_copy_only=False).reshape(-1, schema.EMBEDDING_SIZE)
    for start in range(0, len(embedding), _FINITE_CHECK_ROWS):
        bad = np.argwhere(~np.isfinite(embedding[start:start + _FINITE_CHECK_ROWS]))
        if len(bad):
            row, index = int(bad[0][0]) + start, int(bad[0][1])
            raise BaiduSchemaError("%s: column %r row %d holds %r at index %d: features must be finite numbers"
                                   % (path, schema.EMBEDDING, row, embedding[row, index].item(), index))
    return embedding


def signed_log1p(values: np.ndarray) -> np.ndarray:
    """sign(x) log(1 + |x|): the lexical features' scaling (BM25 scores and lengths span orders of magnitude)."""
    return np.sign(values) * np.log1p(np.abs(values))


def _open(path: str):
    """The pyarrow schema of a feather file; refuses a missing or non-feather file."""
    import pyarrow as pa

    if not os.path.isfile(path):
        raise FileNotFoundError("Baidu-ULTR file %s does not exist" % path)
    try:
        with pa.memory_map(path) as source:
            return pa.ipc.open_file(source).schema
    except pa.ArrowInvalid as error:
        raise BaiduSchemaError("%s: not a feather (Arrow IPC) file: %s" % (path, error)) from None


def columns_read(kind: str, features: str) -> List[str]:
    """The columns :func:`read_sessions` reads from a file of ``kind`` ("clicks" or "annotations")."""
    wanted = [schema.SESSION_KEY, "query_id", "query_md5", "text_md5", "click" if kind == "clicks" else "label"]
    wanted += ["position"] if kind == "clicks" else []
    wanted += list(schema.LEXICAL_FEATURES) if features != "embedding" else []
    wanted += [schema.EMBEDDING] if features != "lexical" else []
    return wanted


def resolve_kind(path: str, kind: Optional[str]) -> str:
    """``kind`` ("clicks" or "annotations"), or the kind the file's name gives when it is None.

    Raises:
        ValueError: an unknown kind, or None for a file whose name does not say.
    """
    return schema.file_kind(path) if kind is None else schema.check_kind(kind)


def check_files(paths: Sequence[str], features: str = "lexical", kind: Optional[str] = None) -> List[int]:
    """Check every file before anything is trained on them: each opens as feather, has the columns
    :func:`read_sessions` reads, of readable types, and holds at least one row (from the file's metadata: no
    column is read).  Returns each file's row count.

    Args:
        kind: of every file (None: each file's name says, :func:`resolve_kind`).

    Raises:
        BaiduSchemaError: naming the file and the column, or the empty file.
        FileNotFoundError: a missing file.
    """
    import pyarrow as pa

    check_feature_set(features)
    rows = []
    for path in paths:
        file_kind = resolve_kind(path, kind)
        found = _open(path)
        with pa.memory_map(path) as source:
            reader = pa.ipc.open_file(source)
            count = sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
        if count == 0:  # before the types: an empty frame's text columns are written as type null
            raise BaiduSchemaError("%s: the file holds no row (no session to read)" % path)
        check_schema(path, found, file_kind, columns_read(file_kind, features))
        rows.append(count)
    return rows


def read_sessions(path: str, features: str = "lexical", top_n: Optional[int] = 10, log1p_lexical: bool = True,
                  kind: Optional[str] = None) -> Sessions:
    """Read one Baidu-ULTR feather file (see the module docstring).

    Args:
        path: a file of click sessions or of annotations.
        features: "lexical" (12), "embedding" (768) or "both" (780, lexical first).
        top_n: N, the slots kept per session (None: up to the largest position, or the longest
            annotated query).
        log1p_lexical: scale the lexical features by :func:`signed_log1p`.
        kind: "clicks" or "annotations" (None: the file's name says, :func:`resolve_kind`).

    Raises:
        BaiduSchemaError: a needed column is missing or of another type, ``query_md5`` changes within a
            session, a position < 1 or repeated, a label outside 0-4, an embedding not 768 long, a feature
            that is not finite.
        FileNotFoundError: no such file.
        ValueError: no ``kind`` for a file whose name does not say.
    """
    import pyarrow.feather as feather

    check_feature_set(features)
    kind = resolve_kind(path, kind)
    found = _open(path)
    target = "click" if kind == "clicks" else "label"
    wanted = columns_read(kind, features)
    check_schema(path, found, kind, wanted)
    table = feather.read_table(path, columns=wanted, memory_map=True)

    query_no = _column(path, table, schema.SESSION_KEY, np.int64)
    starts, n = session_runs(query_no)
    session = np.repeat(np.arange(len(n)), n)
    query_md5 = _column(path, table, "query_md5", str)
    query_id = _column(path, table, "query_id", str)
    _check_per_query(path, "query_md5", query_md5, session, starts)
    target_values = _column(path, table, target, np.int64)
    _check_range(path, target, target_values, 0, 1 if kind == "clicks" else schema.MAX_LABEL)
    if kind == "clicks":
        slot = _click_slots(path, table, session, starts)
    else:
        slot = np.arange(len(session), dtype=np.int64) - starts[session]
    width = (int(slot.max(initial=-1)) + 1) if top_n is None else int(top_n)
    keep = slot < width
    rows, slots = session[keep], slot[keep]

    def scatter(values: np.ndarray, dtype, fill) -> np.ndarray:
        out = np.full((len(n), width) + values.shape[1:], fill, dtype=dtype)
        out[rows, slots] = values[keep]
        return out

    # Each feature block is cast to float32 while it is scattered: no float32 copy of the whole file.
    documents = np.zeros((len(n), width, feature_size(features)), dtype=np.float32)
    lexical_width = 0
    if features != "embedding":
        lexical = _lexical(path, table).astype(np.float32)
        lexical_width = lexical.shape[1]
        documents[rows, slots, :lexical_width] = (signed_log1p(lexical) if log1p_lexical else lexical)[keep]
    if features != "lexical":
        documents[rows, slots, lexical_width:] = _embedding(path, table)[keep]
    return Sessions(
        path=path,
        kind=kind,
        query_no=query_no[starts],
        query_md5=query_md5[starts],
        query_id=query_id[starts],
        n=n,
        text_md5=scatter(_column(path, table, "text_md5", str).astype(object), object, ""),
        features=documents,
        mask=scatter(np.ones(len(session), dtype=bool), bool, False),
        clicks=scatter(target_values.astype(np.float32), np.float32, 0.0),
        positions=scatter(slot + 1, np.int32, 0),
    )


def session_count(path: str) -> int:
    """Sessions (or annotated queries) of one file: runs of ``query_no``, read from that column alone."""
    import pyarrow.feather as feather

    found = _open(path)
    check_schema(path, found, "clicks", [schema.SESSION_KEY])  # the same column in either kind of file
    table = feather.read_table(path, columns=[schema.SESSION_KEY], memory_map=True)
    return len(session_runs(_column(path, table, schema.SESSION_KEY, np.int64))[0])


def deepest_position(path: str) -> int:
    """The largest logged ``position`` of a click file, read from that column alone."""
    import pyarrow.feather as feather

    found = _open(path)
    check_schema(path, found, "clicks", ["position"])
    table = feather.read_table(path, columns=["position"], memory_map=True)
    return int(_column(path, table, "position", np.int64).max(initial=0))


def log_files(patterns: Sequence[str]) -> List[str]:
    """The files matching the glob patterns, in sorted order per pattern.

    Raises:
        FileNotFoundError: a pattern that matches no file.
    """
    files: List[str] = []
    for pattern in patterns:
        matched = sorted(glob.glob(os.path.expanduser(pattern)))
        if not matched:
            raise FileNotFoundError("Baidu-ULTR log: no file matches %r" % pattern)
        files.extend(matched)
    return files


def iter_sessions(paths: Sequence[str], features: str = "lexical", top_n: Optional[int] = 10,
                  log1p_lexical: bool = True, kind: Optional[str] = None) -> Iterator[Sessions]:
    """:func:`read_sessions` of each file in turn (one file in memory at a time)."""
    for path in paths:
        yield read_sessions(path, features, top_n, log1p_lexical, kind)
