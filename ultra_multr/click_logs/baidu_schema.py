"""The columns of the Baidu-ULTR release ``philipphager/baidu-ultr_uva-mlm-ctr``, as its own code writes them.

The release was written by philipphager/baidu-ultr (``main.py`` with
``src/data.py`` and ``src/util.py``): a pandas frame with ONE ROW PER
DOCUMENT, ``df.to_feather(path)``.  A session (an annotated query) is a run
of consecutive rows with the same ``query_no``; its size ``n`` is not stored
(the release's Hugging Face loader counts the rows of the run).  Files:
``parts/part-{p}_split-{s}.feather`` (click sessions; the loader reads parts
1-3 as train and part 0 as test, 10 splits each) and
``parts/validation.feather`` (the annotated queries).

The on-disk types are those pandas gives the writer's values: Python ints
collated by torch are int64, floats float64, strings string, token lists
list<int64>, the embedding one list<float16> of 768 values per row.  The
reader accepts other integer / float widths (and Arrow's large variants) and
casts after reading; :data:`CLICK_COLUMNS` and :data:`ANNOTATION_COLUMNS`
are what the generator writes (the writer's column order).
"""
from __future__ import annotations

import os
import re
from typing import Dict, Tuple

#: The 12 lexical (learning-to-rank) features per document, in feature order.
LEXICAL_FEATURES: Tuple[str, ...] = (
    "bm25", "bm25_title", "bm25_abstract", "tf_idf", "tf", "idf",
    "ql_jelinek_mercer_short", "ql_jelinek_mercer_long", "ql_dirichlet",
    "document_length", "title_length", "abstract_length",
)
#: Lexical features that are integer counts (the rest are float scores).
INTEGER_LEXICAL_FEATURES = ("document_length", "title_length", "abstract_length")
#: The per-document BERT (cross-encoder) query-document embedding: one list of 768 float16 per row.
EMBEDDING = "query_document_embedding"
EMBEDDING_SIZE = 768
#: The column whose runs of equal consecutive values are the sessions (annotated queries) of a file.
SESSION_KEY = "query_no"
#: Smallest number of documents per query the writer keeps (its ``min_docs_per_query``).
MIN_DOCS_PER_QUERY = 5
MAX_LABEL = 4

#: Type notation: "int64", "float64", "string", "list<int64>", "list<float16>".
_QUERY: Dict[str, str] = {
    SESSION_KEY: "int64",
    "query_id": "string",  # not unique across queries: key queries by query_md5
    "query_md5": "string",
}
_TOKENS: Dict[str, str] = {"query": "list<int64>", "title": "list<int64>", "abstract": "list<int64>"}
#: The lexical model's outputs in the writer's order (query_length is per query, repeated on each row).
_LEXICAL: Dict[str, str] = {
    **{name: "float64" for name in LEXICAL_FEATURES if name not in INTEGER_LEXICAL_FEATURES},
    "query_length": "int64",
    **{name: "int64" for name in INTEGER_LEXICAL_FEATURES},
}
#: Click files (``part-{p}_split-{s}.feather``), one row per displayed document.
CLICK_COLUMNS: Dict[str, str] = {
    **_QUERY,
    "url_md5": "string",
    "text_md5": "string",
    **_TOKENS,
    "position": "int64",
    "media_type": "int64",
    "displayed_time": "float64",
    "serp_height": "int64",
    "slipoff_count_after_click": "int64",
    "click": "int64",
    **_LEXICAL,
    EMBEDDING: "list<float16>",
}
#: Annotation files (``validation.feather``), one row per annotated document: no url_md5, no SERP columns.
ANNOTATION_COLUMNS: Dict[str, str] = {
    **_QUERY,
    "text_md5": "string",
    **_TOKENS,
    "label": "int64",
    "frequency_bucket": "int64",
    **_LEXICAL,
    EMBEDDING: "list<float16>",
}
#: The columns of each kind of file.
FILE_KINDS = {"clicks": CLICK_COLUMNS, "annotations": ANNOTATION_COLUMNS}


def arrow_type(notation: str):
    """The pyarrow type of a notation of this module (``"list<float16>"`` -> ``list_(float16())``)."""
    import pyarrow as pa

    if notation.startswith("list<") and notation.endswith(">"):
        return pa.list_(arrow_type(notation[len("list<"):-1]))
    return {"int64": pa.int64(), "float64": pa.float64(), "float16": pa.float16(), "string": pa.string()}[notation]


def arrow_schema(kind: str):
    """The ``pyarrow.Schema`` the generator writes for ``kind`` ("clicks" or "annotations")."""
    import pyarrow as pa

    return pa.schema([(name, arrow_type(notation)) for name, notation in FILE_KINDS[check_kind(kind)].items()])


def accepts(notation: str, found) -> bool:
    """Whether a column of pyarrow type ``found`` can be read as ``notation`` (any integer width for an
    integer, any float or integer width for a float, string or large_string, and lists (also large or
    fixed-size) of such values for a list)."""
    import pyarrow.types as t

    if notation.startswith("list<"):
        if not (t.is_list(found) or t.is_large_list(found) or t.is_fixed_size_list(found)):
            return False
        return accepts(notation[len("list<"):-1], found.value_type)
    if notation == "int64":
        return t.is_integer(found)
    if notation in ("float64", "float16"):
        return t.is_floating(found) or t.is_integer(found)
    return t.is_string(found) or t.is_large_string(found)


#: The release's file names (its loader's): click sessions ``parts/part-{p}_split-{s}.feather``, annotations
#: ``parts/validation.feather``.
CLICK_FILE_NAME = re.compile(r"part-\d+_split-\d+\.feather")
ANNOTATION_FILE_NAME = "validation.feather"


def file_kind(path: str) -> str:
    """"clicks" for a ``part-{p}_split-{s}.feather``, "annotations" for ``validation.feather``.

    Raises:
        ValueError: any other name (a cached copy with a hashed name, say): the kind must then be given.
    """
    name = os.path.basename(path)
    if CLICK_FILE_NAME.fullmatch(name):
        return "clicks"
    if name == ANNOTATION_FILE_NAME:
        return "annotations"
    raise ValueError("%s: its name does not say what it holds (the release names its click files "
                     "part-{p}_split-{s}.feather and its annotations validation.feather); give the kind: "
                     "kind='clicks' or kind='annotations' (the converter's --log_files / --heldout_files are "
                     "click files, --annotations the annotations)" % path)


def check_kind(kind: str) -> str:
    """``kind`` if it is one of :data:`FILE_KINDS`.

    Raises:
        ValueError: another value.
    """
    if kind not in FILE_KINDS:
        raise ValueError("unknown Baidu-ULTR file kind %r; expected one of %s" % (kind, sorted(FILE_KINDS)))
    return kind
