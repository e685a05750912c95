"""The columns of the Baidu-ULTR release ``philipphager/baidu-ultr_uva-mlm-ctr``, as declared once here.

Files of the release (read directly: its script-based Hugging Face loader
breaks on ``datasets`` >= 4): ``parts/part-{p}_split-{s}.feather`` (parts
1-3 train, part 0 test, 10 splits each) hold click sessions,
``parts/validation.feather`` the annotated queries.  One row per session
(per annotated query): a query, its ``n`` documents as lists in displayed
order.  ``query_id`` collides across different queries in the release: key
queries by ``query_md5``.

The types follow the release's loader script (``int32``/``float32`` lists,
the embedding as n x 768 ``float16``); see docs/click_logs.md for which of
them were checked against published code and which are assumed.
"""
from __future__ import annotations

import os
from typing import Dict, Tuple

#: The 12 lexical (learning-to-rank) features per document, in feature order.
LEXICAL_FEATURES: Tuple[str, ...] = (
    "bm25", "bm25_title", "bm25_abstract", "tf_idf", "tf", "idf",
    "ql_jelinek_mercer_short", "ql_jelinek_mercer_long", "ql_dirichlet",
    "document_length", "title_length", "abstract_length",
)
#: Lexical features stored as integer counts (the rest are float32 scores).
INTEGER_LEXICAL_FEATURES = ("document_length", "title_length", "abstract_length")
#: The per-document BERT (cross-encoder) query-document embedding: [n, 768] float16.
EMBEDDING = "query_document_embedding"
EMBEDDING_SIZE = 768

#: Type notation of the declared schema: "int32", "string", "list<int32>", "list<list<float16>>", ...
_COMMON: Dict[str, str] = {
    "query_id": "int32",
    "query_md5": "string",
    "n": "int32",
    "url_md5": "list<string>",
    EMBEDDING: "list<list<float16>>",
}
_LEXICAL: Dict[str, str] = {
    name: "list<int32>" if name in INTEGER_LEXICAL_FEATURES else "list<float32>" for name in LEXICAL_FEATURES
}
#: Click sessions (``part-{p}_split-{s}.feather``).
CLICK_COLUMNS: Dict[str, str] = {
    **_COMMON,
    "click": "list<int32>",
    "position": "list<int32>",
    "media_type": "list<int32>",
    "displayed_time": "list<float32>",
    "serp_height": "list<int32>",
    "slipoff_count_after_click": "list<int32>",
    **_LEXICAL,
}
#: Annotated queries (``validation.feather``): graded ``label`` (0-4) instead of clicks and positions.
ANNOTATION_COLUMNS: Dict[str, str] = {
    **_COMMON,
    "label": "list<int32>",
    "frequency_bucket": "int32",
    **_LEXICAL,
}
#: The declared columns of each kind of file.
SESSION_KINDS = {"clicks": CLICK_COLUMNS, "annotations": ANNOTATION_COLUMNS}


def arrow_type(notation: str):
    """The pyarrow type of a notation of this module (``"list<list<float16>>"`` -> ``list_(list_(float16()))``)."""
    import pyarrow as pa

    if notation.startswith("list<") and notation.endswith(">"):
        return pa.list_(arrow_type(notation[len("list<"):-1]))
    return {"int32": pa.int32(), "float32": pa.float32(), "float16": pa.float16(), "string": pa.string()}[notation]


def arrow_schema(kind: str):
    """The declared ``pyarrow.Schema`` of ``kind`` ("clicks" or "annotations"), columns in declaration order."""
    import pyarrow as pa

    if kind not in SESSION_KINDS:
        raise ValueError("unknown Baidu-ULTR file kind %r; expected one of %s" % (kind, sorted(SESSION_KINDS)))
    return pa.schema([(name, arrow_type(notation)) for name, notation in SESSION_KINDS[kind].items()])


def file_kind(path: str) -> str:
    """"annotations" for ``validation.feather``, "clicks" for the session files."""
    return "annotations" if os.path.basename(path).startswith("validation") else "clicks"
