"""Generated Baidu-ULTR files, in the release's layout (:mod:`ultra_multr.click_logs.baidu_schema`), from a known click model.

The files are written as the release's writer (philipphager/baidu-ultr,
``src/util.py`` ``DatasetWriter.save``) writes them: one row per document,
a session a run of rows with one ``query_no``, the writer's columns in its
order and with the types pandas gives them (int64, float64, string,
list<int64> tokens, one list<float16> embedding per row), sessions with
fewer than 5 documents left out.

Queries have 6..N documents with a latent relevance grade 0-4 that the
lexical features and the embedding carry (plus noise); each session shows
one query's documents in the order of a noisy logging ranker (so a query is
logged in several orders) and clicks follow a position-based model
(:class:`ultra_multr.click_models.PositionBasedModel`) or any other
label-based click model given (e.g. the cascade).  ``query_id`` is a string
that deliberately collides across queries (as in the release);
``query_md5`` is the key.  With ``missing_doc_prob`` > 0 a shown document
is dropped from the file after the clicks were drawn, leaving a gap in the
session's positions (the writer's ``drop_missing_docs``).  For tests and
studies where the truth (examination, relevance) is known.

The logging ranker (``logger``): "grade" scores each document by its grade
plus noise; "features" by a linear function of the signed-log1p lexical
features (what the learner is fed) plus noise, so that the logged position
carries no relevance the features lack.

With ``logger_bias`` > 0 the logging ranker also prefers documents by a
per-document "popularity" z ~ N(0, 1) that is independent of relevance and
that one lexical feature (``LOGGER_FEATURE``) carries: clicks then reward z
through position alone, so a ranker that ignores position bias can learn z as
relevant (the confound that gives debiasing room to matter; ULTRA's DNN with
its default per-document layer norm turns z into a sign of irrelevance
instead, studies/baidu/README.md).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from ultra_multr.click_models import ClickModel, PositionBasedModel, graded_click_prob, per_rank, reciprocal_rank_exam_prob
from ultra_multr.files import atomic_write_file
from ultra_multr.click_logs import baidu_schema as schema
from ultra_multr.click_logs.baidu import signed_log1p

MAX_LABEL = schema.MAX_LABEL
#: The lexical feature that carries the logging ranker's popularity z when ``logger_bias`` > 0.
LOGGER_FEATURE = "abstract_length"
#: Logging rankers: by the grade, or by the lexical features only.
LOGGERS = ("grade", "features")
#: The token offset of the writer (``src/const.py`` TOKEN_OFFSET): token ids start at 10.
TOKEN_OFFSET = 10


@dataclass(frozen=True)
class GeneratedLog:
    """What :func:`write_baidu_log` wrote and the truth it drew clicks from.

    Attributes:
        train_files: click files of parts 1.. (training sessions).
        test_files: click files of part 0 (held-out sessions).
        validation_file: the annotated queries.
        exam_prob: [N] examination per position of the PBM (None for another click model).
        click_prob: [5] click probability per grade.
        click_model: the click model's description (its JSON).
    """

    train_files: List[str]
    test_files: List[str]
    validation_file: str
    exam_prob: Optional[np.ndarray]
    click_prob: np.ndarray
    click_model: Dict


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


@dataclass
class _Queries:
    prefix: str
    md5: List[str]
    urls: List[List[str]]
    grades: List[np.ndarray]
    lexical: List[Dict[str, np.ndarray]]
    embedding: List[np.ndarray]
    popularity: List[np.ndarray]  # z per document, zeros without a logger bias


def _queries(n_queries: int, n_positions: int, prefix: str, rng: np.random.Generator, logger_bias: float,
             feature_noise: float) -> _Queries:
    queries = _Queries(prefix, [], [], [], [], [], [])
    for q in range(n_queries):
        n = int(rng.integers(min(6, n_positions), n_positions + 1))
        grades = np.minimum(rng.geometric(0.45, size=n) - 1, MAX_LABEL)
        queries.md5.append(_md5("%s-query-%d" % (prefix, q)))
        queries.urls.append([_md5("%s-query-%d-doc-%d" % (prefix, q, d)) for d in range(n)])
        queries.grades.append(grades)
        lexical = {}
        for j, name in enumerate(schema.LEXICAL_FEATURES):
            value = np.abs((1.0 + 0.3 * j) * grades + rng.normal(0.0, feature_noise, size=n)) * (1 + j % 4)
            lexical[name] = (np.round(10 * value + 20).astype(np.int64) if name in schema.INTEGER_LEXICAL_FEATURES
                             else value)
        queries.lexical.append(lexical)
        embedding = rng.normal(0.0, 0.1, size=(n, schema.EMBEDDING_SIZE))
        embedding[:, :8] += grades[:, None] / MAX_LABEL
        queries.embedding.append(embedding.astype(np.float16))
        popularity = np.zeros(n)
        if logger_bias > 0:  # drawn only then: logs without it stay as they were, draw for draw
            popularity = rng.normal(0.0, 1.0, size=n)
            lexical[LOGGER_FEATURE] = np.round(10 * popularity + 50).astype(np.int64)
        queries.popularity.append(popularity)
    return queries


def _query_tokens(prefix: str, q: int) -> List[int]:
    """The query's token ids (they only identify the query: 2-6 tokens)."""
    return [TOKEN_OFFSET + (7919 * q + k + (prefix == "annotated") * 5003) % 20000 for k in range(2 + q % 5)]


def _text_tokens(prefix: str, q: int, d: int) -> tuple:
    """(title, abstract) token ids of document d of query q; they identify it, their md5 is ``text_md5``."""
    title = [TOKEN_OFFSET + q % 20000, TOKEN_OFFSET + d, TOKEN_OFFSET + (prefix == "annotated")]
    abstract = [TOKEN_OFFSET + (q * 31 + d) % 20000, TOKEN_OFFSET + q // 20000]
    return title, abstract


def _text_md5(title: List[int], abstract: List[int]) -> str:
    """md5 of the document's text, title then abstract, tokens joined by spaces (as the writer's ``src/hash.py``)."""
    return _md5(" ".join(str(t) for t in title + abstract))


def features_logger_weights(weights: Optional[Sequence[float]] = None) -> np.ndarray:
    """[12] the features logger's weight of each signed-log1p lexical feature (default: 1/12 each)."""
    if weights is None:
        return np.full(len(schema.LEXICAL_FEATURES), 1.0 / len(schema.LEXICAL_FEATURES))
    values = np.asarray(weights, dtype=np.float64)
    if values.shape != (len(schema.LEXICAL_FEATURES),):
        raise ValueError("logger_weights: need %d weights (one per lexical feature), got %d"
                         % (len(schema.LEXICAL_FEATURES), values.size))
    return values


def logger_scores(lexical: Dict[str, np.ndarray], grades: np.ndarray, popularity: np.ndarray, noise: np.ndarray,
                  logger: str, logger_bias: float, weights: np.ndarray) -> np.ndarray:
    """[n] the logging ranker's scores of one query's documents in one session (higher is shown first).

    ``logger="grade"``: grade + ``logger_bias`` * z + noise.  ``logger="features"``: the ``weights`` [12] of
    the signed-log1p lexical features + noise; ``grades`` and z are not read (with a logger bias z is in
    ``LOGGER_FEATURE``, which the features logger weighs in by ``logger_bias`` * (feature - 50) / 10).

    Args:
        lexical: name -> [n] the query's lexical features.
        grades, popularity, noise: [n] each.
    """
    if logger == "grade":
        return grades + logger_bias * popularity + noise
    if logger != "features":
        raise ValueError("logger=%r: expected one of %s" % (logger, ", ".join(LOGGERS)))
    matrix = np.stack([np.asarray(lexical[name], dtype=np.float64) for name in schema.LEXICAL_FEATURES], axis=1)
    score = signed_log1p(matrix) @ weights
    if logger_bias > 0:
        score = score + logger_bias * (np.asarray(lexical[LOGGER_FEATURE], dtype=np.float64) - 50.0) / 10.0
    return score + noise


@dataclass(frozen=True)
class _Logging:
    """How sessions are logged: the click model, the logging ranker and the gaps."""

    model: ClickModel
    n_positions: int
    generator: torch.Generator
    logger: str
    logger_bias: float
    logger_noise: float
    weights: np.ndarray
    missing_doc_prob: float
    gap_rng: np.random.Generator


def _write(path: str, columns: Dict[str, list], kind: str) -> None:
    """Write ``columns`` (one value per document row) as the writer's feather file, atomically.  The
    embeddings ([768] float16 each) become one list per row without a Python object per value."""
    import pyarrow as pa
    import pyarrow.feather as feather

    target = schema.arrow_schema(kind)
    arrays = []
    for field in target:
        if field.name == schema.EMBEDDING:
            flat = np.stack(columns[field.name]).astype(np.float16).reshape(-1) if columns[field.name] else \
                np.zeros(0, dtype=np.float16)
            offsets = pa.array(np.arange(len(columns[field.name]) + 1, dtype=np.int32) * schema.EMBEDDING_SIZE)
            arrays.append(pa.ListArray.from_arrays(offsets, pa.array(flat, type=pa.float16())))
        else:
            arrays.append(pa.array(columns[field.name], type=field.type))
    table = pa.Table.from_arrays(arrays, schema=target)
    atomic_write_file(path, lambda tmp: feather.write_feather(table, tmp))


def _append_query_rows(columns: Dict[str, list], queries: _Queries, q: int, docs: np.ndarray, query_no: int,
                       query_id: str) -> None:
    """The query and document columns of the rows of documents ``docs`` [k] of query ``q``."""
    tokens = _query_tokens(queries.prefix, q)
    for d in docs:
        title, abstract = _text_tokens(queries.prefix, q, int(d))
        columns[schema.SESSION_KEY].append(query_no)
        columns["query_id"].append(query_id)
        columns["query_md5"].append(queries.md5[q])
        if "url_md5" in columns:
            columns["url_md5"].append(queries.urls[q][d])
        columns["text_md5"].append(_text_md5(title, abstract))
        columns["query"].append(tokens)
        columns["title"].append(title)
        columns["abstract"].append(abstract)
        columns["query_length"].append(len(tokens))
        for name in schema.LEXICAL_FEATURES:
            value = queries.lexical[q][name][d]
            columns[name].append(int(value) if name in schema.INTEGER_LEXICAL_FEATURES else float(value))
        columns[schema.EMBEDDING].append(queries.embedding[q][d])


def _session_rows(queries: _Queries, query: np.ndarray, first_query_no: int, rng: np.random.Generator,
                  logging: _Logging) -> Dict[str, list]:
    """The click-file columns of sessions of the given queries: one row per document kept, sessions numbered
    ``first_query_no`` + i (the numbers of sessions left with fewer than 5 documents are skipped)."""
    columns: Dict[str, list] = {name: [] for name in schema.CLICK_COLUMNS}
    for i, q in enumerate(query):
        grades = queries.grades[q]
        n = len(grades)
        noise = rng.normal(0.0, logging.logger_noise, size=n)
        score = logger_scores(queries.lexical[q], grades, queries.popularity[q], noise, logging.logger,
                              logging.logger_bias, logging.weights)
        order = np.argsort(-score, kind="stable")  # the logging ranker
        labels = torch.zeros(1, logging.n_positions, dtype=torch.float64)
        labels[0, :n] = torch.from_numpy(grades[order].astype(np.float64))
        mask = torch.arange(logging.n_positions)[None] < n
        clicks = logging.model.sample_with_probabilities(labels, mask, logging.generator)[0][0, :n].numpy()
        clicks = clicks.astype(np.int64)
        media_type = rng.integers(0, 5, size=n)
        displayed_time = clicks * rng.exponential(30.0, size=n)
        serp_height = rng.integers(100, 400, size=n)
        slipoff = clicks * rng.integers(0, 3, size=n)
        shown = np.ones(n, dtype=bool)
        if logging.missing_doc_prob > 0:  # the writer drops documents whose text is missing; positions stay
            shown = logging.gap_rng.random(n) >= logging.missing_doc_prob
        if shown.sum() < schema.MIN_DOCS_PER_QUERY:
            continue  # the writer's filter_queries
        kept = np.flatnonzero(shown)
        _append_query_rows(columns, queries, int(q), order[kept], first_query_no + i, str(q % 7))
        columns["position"].extend((kept + 1).tolist())
        columns["media_type"].extend(media_type[kept].tolist())
        columns["displayed_time"].extend(displayed_time[kept].tolist())
        columns["serp_height"].extend(serp_height[kept].tolist())
        columns["slipoff_count_after_click"].extend(slipoff[kept].tolist())
        columns["click"].extend(clicks[kept].tolist())
    return columns


def _annotation_rows(annotated: _Queries) -> Dict[str, list]:
    """The validation-file columns: every document of each annotated query, in base order, graded."""
    columns: Dict[str, list] = {name: [] for name in schema.ANNOTATION_COLUMNS}
    for q, grades in enumerate(annotated.grades):
        _append_query_rows(columns, annotated, q, np.arange(len(grades)), q, str(q % 7))
        columns["label"].extend(grades.astype(np.int64).tolist())
        columns["frequency_bucket"].extend([q % 10] * len(grades))
    return columns


def write_baidu_log(
    directory: str,
    n_queries: int = 20,
    n_sessions: int = 200,
    n_test_sessions: int = 50,
    n_annotated: int = 20,
    n_positions: int = 10,
    sessions_per_file: int = 100,
    exam_prob: Sequence[float] = (),
    click_prob: Sequence[float] = (),
    seed: int = 0,
    click_model: Optional[ClickModel] = None,
    logger_bias: float = 0.0,
    feature_noise: float = 1.0,
    logger_noise: float = 1.0,
    logger: str = "grade",
    logger_weights: Optional[Sequence[float]] = None,
    missing_doc_prob: float = 0.0,
) -> GeneratedLog:
    """Write ``<directory>/parts/``: ``part-1_split-{s}.feather`` (``n_sessions`` training sessions,
    ``sessions_per_file`` per file, query_no counting on across the part's splits), ``part-0_split-0.feather``
    (``n_test_sessions`` of the same queries) and ``validation.feather`` (``n_annotated`` new queries, graded,
    in base order); a pure function of its arguments.  Default PBM: examination 1/k (``exam_prob``), click
    probability per grade of ``graded_click_prob(0.1, 4)`` (``click_prob``); ``click_model`` replaces both.
    The logging ranker (``logger``, see the module docstring) orders by grade + ``logger_bias`` * z, or by
    the ``logger_weights`` [12] of the signed-log1p lexical features, + N(0, ``logger_noise``) noise per
    session (the smaller the noise, the fewer orders a query is logged in).  Lexical feature j is
    |(1 + 0.3 j) * grade + N(0, ``feature_noise``)| (scaled): the larger the noise, the less the features tell
    the grade and the more a ranker has to learn from clicks.  Each shown document is dropped with
    probability ``missing_doc_prob`` (a gap in the positions, drawn from its own generator, so the other
    draws do not change); a session left with fewer than 5 documents is not written.
    """
    if logger_bias < 0 or feature_noise <= 0 or logger_noise < 0:
        raise ValueError("write_baidu_log: need logger_bias >= 0, feature_noise > 0 and logger_noise >= 0, got %r, "
                         "%r and %r" % (logger_bias, feature_noise, logger_noise))
    if logger not in LOGGERS:
        raise ValueError("write_baidu_log: logger=%r, expected one of %s" % (logger, ", ".join(LOGGERS)))
    if not 0.0 <= missing_doc_prob < 1.0:
        raise ValueError("write_baidu_log: missing_doc_prob must be in [0, 1), got %r" % missing_doc_prob)
    rng = np.random.default_rng(seed)
    if click_model is not None and (exam_prob or click_prob):
        raise ValueError("write_baidu_log: give click_model or exam_prob/click_prob, not both")
    model = click_model or PositionBasedModel(
        list(click_prob) or graded_click_prob(0.1, MAX_LABEL), list(exam_prob) or reciprocal_rank_exam_prob(1.0, n_positions)
    )
    model.check_max_label(MAX_LABEL, "write_baidu_log")
    logging = _Logging(model, n_positions, torch.Generator().manual_seed(seed), logger, logger_bias, logger_noise,
                       features_logger_weights(logger_weights), missing_doc_prob, np.random.default_rng([seed, 27]))
    parts = os.path.join(directory, "parts")
    os.makedirs(parts, exist_ok=True)
    queries = _queries(n_queries, n_positions, "train", rng, logger_bias, feature_noise)
    train_files, test_files = [], []
    for start in range(0, n_sessions, sessions_per_file):
        path = os.path.join(parts, "part-1_split-%d.feather" % (start // sessions_per_file))
        count = min(sessions_per_file, n_sessions - start)
        _write(path, _session_rows(queries, rng.integers(0, n_queries, size=count), start, rng, logging), "clicks")
        train_files.append(path)
    if n_test_sessions:
        path = os.path.join(parts, "part-0_split-0.feather")
        _write(path, _session_rows(queries, rng.integers(0, n_queries, size=n_test_sessions), 0, rng, logging),
               "clicks")
        test_files.append(path)
    annotated = _queries(n_annotated, n_positions, "annotated", rng, logger_bias, feature_noise)
    validation = os.path.join(parts, "validation.feather")
    _write(validation, _annotation_rows(annotated), "annotations")
    exam = per_rank(model.exam_prob, n_positions).numpy().astype(float) if isinstance(model, PositionBasedModel) else None
    return GeneratedLog(
        train_files, test_files, validation, exam, model.click_prob.numpy().astype(float), model.describe()
    )
