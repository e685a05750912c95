"""Reader of the Baidu-ULTR feather files (schema: :mod:`ultra_multr.logs.baidu_schema`).

One file at a time (memory is bounded by one file: a click file of the
release holds about 60,000 sessions), each session's documents sorted by
their logged position and cut to the top N, the features the user chose
(the 12 lexical ones, the 768-d embedding, or both) as one float32 array.
pyarrow (optional extra ``logs``) is imported when a file is read.  A file
whose columns do not have the declared types is refused with a
:class:`BaiduSchemaError` naming the file and the column.
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence

import numpy as np

from . import baidu_schema as schema

#: Feature choices: the lexical features, the embedding, or both (lexical first).
FEATURE_SETS = ("lexical", "embedding", "both")


class BaiduSchemaError(ValueError):
    """A Baidu-ULTR file whose columns differ from the declared schema (the message names file and column)."""


def feature_size(features: str) -> int:
    """F of a feature choice: 12 (lexical), 768 (embedding) or 780 (both)."""
    check_feature_set(features)
    return len(schema.LEXICAL_FEATURES) * (features != "embedding") + schema.EMBEDDING_SIZE * (features != "lexical")


def check_feature_set(features: str) -> None:
    if features not in FEATURE_SETS:
        raise ValueError("features=%r: expected one of %s" % (features, ", ".join(FEATURE_SETS)))


@dataclass
class Sessions:
    """The sessions (or annotated queries) of one file, documents in displayed order, first N kept.

    Attributes:
        path: the file.
        kind: "clicks" or "annotations".
        query_md5: [S] str, the query key (``query_id`` collides across queries).
        query_id: [S] int64.
        url_md5: [S, N] str document ids; "" at padding.
        features: [S, N, F] float32; 0 at padding.
        mask: [S, N] bool, True for real documents.
        clicks: [S, N] float32 clicks (annotations: the 0-4 labels); 0 at padding.
        positions: [S, N] int32 the logged positions (annotations: 1..n); 0 at padding.
    """

    path: str
    kind: str
    query_md5: np.ndarray
    query_id: np.ndarray
    url_md5: np.ndarray
    features: np.ndarray
    mask: np.ndarray
    clicks: np.ndarray
    positions: np.ndarray

    def __len__(self) -> int:
        return int(self.mask.shape[0])


def check_schema(path: str, found, kind: str) -> None:
    """Every declared column of ``kind`` is in ``found`` (a pyarrow schema) with its declared type.

    Raises:
        BaiduSchemaError: naming the file, the column, the expected and the found type.
    """
    for name, notation in schema.SESSION_KINDS[kind].items():
        expected = schema.arrow_type(notation)
        if name not in found.names:
            raise BaiduSchemaError("%s: column %r is missing (expected type %s; the file has %s)"
                                   % (path, name, expected, ", ".join(found.names)))
        actual = found.field(name).type
        if actual != expected:
            raise BaiduSchemaError("%s: column %r has type %s, expected %s" % (path, name, actual, expected))


def _document_values(table, name: str, n: np.ndarray, path: str) -> np.ndarray:
    """[sum(n)] the flattened list column ``name``, checked to hold ``n`` values per row."""
    import pyarrow.compute as pc

    column = table.column(name).combine_chunks()
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
    wrong = np.flatnonzero(lengths != n)
    if wrong.size:
        row = int(wrong[0])
        raise BaiduSchemaError("%s: column %r row %d has %d values, but n = %d"
                               % (path, name, row, lengths[row], n[row]))
    return column.flatten().to_numpy(zero_copy_only=False)


def _embedding(table, n: np.ndarray, path: str) -> np.ndarray:
    """[sum(n), 768] float16 the embedding column."""
    import pyarrow.compute as pc

    column = table.column(schema.EMBEDDING).combine_chunks()
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
    if np.any(lengths != n):
        row = int(np.flatnonzero(lengths != n)[0])
        raise BaiduSchemaError("%s: column %r row %d has %d vectors, but n = %d"
                               % (path, schema.EMBEDDING, row, lengths[row], n[row]))
    vectors = column.flatten()
    sizes = pc.list_value_length(vectors).to_numpy(zero_copy_only=False)
    if np.any(sizes != schema.EMBEDDING_SIZE):
        raise BaiduSchemaError("%s: column %r holds vectors of %d values, expected %d"
                               % (path, schema.EMBEDDING, int(sizes[sizes != schema.EMBEDDING_SIZE][0]),
                                  schema.EMBEDDING_SIZE))
    return vectors.flatten().to_numpy(zero_copy_only=False).reshape(-1, schema.EMBEDDING_SIZE)


def signed_log1p(values: np.ndarray) -> np.ndarray:
    """sign(x) log(1 + |x|): the lexical features' scaling (BM25 scores and lengths span orders of magnitude)."""
    return np.sign(values) * np.log1p(np.abs(values))


def read_sessions(path: str, features: str = "lexical", top_n: Optional[int] = 10, log1p_lexical: bool = True
                  ) -> Sessions:
    """Read one Baidu-ULTR feather file (see the module docstring).

    Args:
        path: a ``part-{p}_split-{s}.feather`` (clicks) or ``validation.feather`` (annotations) file.
        features: "lexical" (12), "embedding" (768) or "both" (780, lexical first).
        top_n: N, the positions kept per session (None: every document of the longest list).
        log1p_lexical: scale the lexical features by :func:`signed_log1p`.

    Raises:
        BaiduSchemaError: a declared column is missing or has another type, or a list's length is not ``n``.
        FileNotFoundError: no such file.
    """
    import pyarrow as pa
    import pyarrow.feather as feather

    check_feature_set(features)
    if not os.path.isfile(path):
        raise FileNotFoundError("Baidu-ULTR file %s does not exist" % path)
    kind = schema.file_kind(path)
    try:
        with pa.memory_map(path) as source:
            found = pa.ipc.open_file(source).schema
    except pa.ArrowInvalid as error:
        raise BaiduSchemaError("%s: not a feather (Arrow IPC) file: %s" % (path, error)) from None
    check_schema(path, found, kind)
    wanted = ["query_id", "query_md5", "n", "url_md5", "click" if kind == "clicks" else "label"]
    wanted += ["position"] if kind == "clicks" else []
    wanted += list(schema.LEXICAL_FEATURES) if features != "embedding" else []
    wanted += [schema.EMBEDDING] if features != "lexical" else []
    table = feather.read_table(path, columns=wanted, memory_map=True)

    n = table.column("n").to_numpy().astype(np.int64)
    n_sessions = len(n)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)
    session = np.repeat(np.arange(n_sessions), n)
    if kind == "clicks":
        logged = _document_values(table, "position", n, path).astype(np.int64)
        order = np.lexsort((logged, session))
    else:
        logged = (np.arange(len(session)) - starts[session] + 1).astype(np.int64)
        order = np.arange(len(session))
    slot = np.empty(len(session), dtype=np.int64)
    slot[order] = np.arange(len(session)) - starts[session[order]]
    width = int(n.max(initial=0)) if top_n is None else int(top_n)
    keep = slot < width
    rows, slots = session[keep], slot[keep]

    def scatter(values: np.ndarray, dtype, fill) -> np.ndarray:
        out = np.full((n_sessions, width) + values.shape[1:], fill, dtype=dtype)
        out[rows, slots] = values[keep]
        return out

    # Each feature block is cast to float32 while it is scattered: no float32 copy of the documents.
    documents = np.zeros((n_sessions, width, feature_size(features)), dtype=np.float32)
    lexical_width = 0
    if features != "embedding":
        lexical = np.stack([_document_values(table, name, n, path).astype(np.float32)
                            for name in schema.LEXICAL_FEATURES], axis=1)
        lexical_width = lexical.shape[1]
        documents[rows, slots, :lexical_width] = (signed_log1p(lexical) if log1p_lexical else lexical)[keep]
    if features != "lexical":
        documents[rows, slots, lexical_width:] = _embedding(table, n, path)[keep]
    mask = scatter(np.ones(len(session), dtype=bool), bool, False)
    return Sessions(
        path=path,
        kind=kind,
        query_md5=table.column("query_md5").to_numpy(zero_copy_only=False).astype(str),
        query_id=table.column("query_id").to_numpy().astype(np.int64),
        url_md5=scatter(_document_values(table, "url_md5", n, path).astype(str), object, ""),
        features=documents,
        mask=mask,
        clicks=scatter(_document_values(table, "click" if kind == "clicks" else "label", n, path), np.float32, 0.0),
        positions=scatter(logged, np.int32, 0),
    )


def session_count(path: str) -> int:
    """Rows (sessions, or annotated queries) of one file, read from one small column."""
    import pyarrow.feather as feather

    return feather.read_table(path, columns=["n"], memory_map=True).num_rows


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
                  log1p_lexical: bool = True) -> Iterator[Sessions]:
    """:func:`read_sessions` of each file in turn (one file in memory at a time)."""
    for path in paths:
        yield read_sessions(path, features, top_n, log1p_lexical)
