"""Generated Baidu-ULTR files (exact schema of :mod:`ultra_multr.logs.baidu_schema`) from a known click model.

Queries have 6..N documents with a latent relevance grade 0-4 that the
lexical features and the embedding carry (plus noise); each session shows
one query's documents in the order of a noisy logging ranker (so a query is
logged in several orders) and clicks follow a position-based model
(:class:`ultra_multr.click_models.PositionBasedModel`) or any other
label-based click model given (e.g. the cascade).  ``query_id``
deliberately collides across queries (as in the release); ``query_md5`` is
the key.  For tests and studies where the truth (examination, relevance)
is known.

With ``logger_bias`` > 0 the logging ranker also prefers documents by a
per-document "popularity" z ~ N(0, 1) that is independent of relevance and
that one lexical feature (``LOGGER_FEATURE``) carries: clicks then reward z
through position alone, so a ranker that ignores position bias can learn z as
relevant (the confound that gives debiasing room to matter; ULTRA's DNN with
its default per-document layer norm turns z into a sign of irrelevance
instead, docs/baidu_study.md).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from ..click_models import ClickModel, PositionBasedModel, graded_click_prob, per_rank, reciprocal_rank_exam_prob
from ..data.ultra_format import atomic_write_file
from . import baidu_schema as schema

MAX_LABEL = 4
#: The lexical feature that carries the logging ranker's popularity z when ``logger_bias`` > 0.
LOGGER_FEATURE = "abstract_length"


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
    md5: List[str]
    urls: List[List[str]]
    grades: List[np.ndarray]
    lexical: List[Dict[str, np.ndarray]]
    embedding: List[np.ndarray]
    popularity: List[np.ndarray]  # z per document, zeros without a logger bias


def _queries(n_queries: int, n_positions: int, prefix: str, rng: np.random.Generator, logger_bias: float,
             feature_noise: float) -> _Queries:
    queries = _Queries([], [], [], [], [], [])
    for q in range(n_queries):
        n = int(rng.integers(min(6, n_positions), n_positions + 1))
        grades = np.minimum(rng.geometric(0.45, size=n) - 1, MAX_LABEL)
        queries.md5.append(_md5("%s-query-%d" % (prefix, q)))
        queries.urls.append([_md5("%s-query-%d-doc-%d" % (prefix, q, d)) for d in range(n)])
        queries.grades.append(grades)
        lexical = {}
        for j, name in enumerate(schema.LEXICAL_FEATURES):
            value = np.abs((1.0 + 0.3 * j) * grades + rng.normal(0.0, feature_noise, size=n)) * (1 + j % 4)
            lexical[name] = (np.round(10 * value + 20).astype(np.int32) if name in schema.INTEGER_LEXICAL_FEATURES
                             else value.astype(np.float32))
        queries.lexical.append(lexical)
        embedding = rng.normal(0.0, 0.1, size=(n, schema.EMBEDDING_SIZE))
        embedding[:, :8] += grades[:, None] / MAX_LABEL
        queries.embedding.append(embedding.astype(np.float16))
        popularity = np.zeros(n)
        if logger_bias > 0:  # drawn only then: logs without it stay as they were, draw for draw
            popularity = rng.normal(0.0, 1.0, size=n)
            lexical[LOGGER_FEATURE] = np.round(10 * popularity + 50).astype(np.int32)
        queries.popularity.append(popularity)
    return queries


def _write(path: str, columns: Dict[str, list], kind: str) -> None:
    import pyarrow as pa
    import pyarrow.feather as feather

    table = pa.Table.from_pydict(columns, schema=schema.arrow_schema(kind))
    atomic_write_file(path, lambda tmp: feather.write_feather(table, tmp))


def _session_rows(queries: _Queries, query: np.ndarray, rng: np.random.Generator, model: ClickModel,
                  n_positions: int, generator: torch.Generator, logger_bias: float,
                  logger_noise: float) -> Dict[str, list]:
    """The click-file columns of sessions of the given queries (one row each)."""
    columns: Dict[str, list] = {name: [] for name in schema.CLICK_COLUMNS}
    for q in query:
        grades = queries.grades[q]
        n = len(grades)
        logger_score = grades + logger_bias * queries.popularity[q] + rng.normal(0.0, logger_noise, size=n)
        order = np.argsort(-logger_score, kind="stable")  # the logging ranker
        labels = torch.zeros(1, n_positions, dtype=torch.float64)
        labels[0, :n] = torch.from_numpy(grades[order].astype(np.float64))
        mask = torch.arange(n_positions)[None] < n
        clicks = model.sample_with_probabilities(labels, mask, generator)[0][0, :n].numpy().astype(np.int32)
        columns["query_id"].append(int(q % 7))  # collides across queries, as in the release
        columns["query_md5"].append(queries.md5[q])
        columns["n"].append(n)
        columns["url_md5"].append([queries.urls[q][d] for d in order])
        columns[schema.EMBEDDING].append(queries.embedding[q][order].tolist())
        columns["click"].append(clicks.tolist())
        columns["position"].append(list(range(1, n + 1)))
        columns["media_type"].append(rng.integers(0, 5, size=n).tolist())
        columns["displayed_time"].append((clicks * rng.exponential(30.0, size=n)).astype(np.float32).tolist())
        columns["serp_height"].append(rng.integers(100, 400, size=n).tolist())
        columns["slipoff_count_after_click"].append((clicks * rng.integers(0, 3, size=n)).tolist())
        for name in schema.LEXICAL_FEATURES:
            columns[name].append(queries.lexical[q][name][order].tolist())
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
) -> GeneratedLog:
    """Write ``<directory>/parts/``: ``part-1_split-{s}.feather`` (``n_sessions`` training sessions,
    ``sessions_per_file`` per file), ``part-0_split-0.feather`` (``n_test_sessions`` of the same queries)
    and ``validation.feather`` (``n_annotated`` new queries, graded, in base order); a pure function of
    its arguments.  Default PBM: examination 1/k (``exam_prob``), click probability per grade of
    ``graded_click_prob(0.1, 4)`` (``click_prob``); ``click_model`` replaces both.  The logging ranker
    orders by grade + ``logger_bias`` * z + N(0, ``logger_noise``) noise per session (z: see the module
    docstring; the smaller the noise, the fewer orders a query is logged in).  Lexical
    feature j is |(1 + 0.3 j) * grade + N(0, ``feature_noise``)| (scaled): the larger the noise, the less the
    features tell the grade and the more a ranker has to learn from clicks.
    """
    if logger_bias < 0 or feature_noise <= 0 or logger_noise < 0:
        raise ValueError("write_baidu_log: need logger_bias >= 0, feature_noise > 0 and logger_noise >= 0, got %r, "
                         "%r and %r" % (logger_bias, feature_noise, logger_noise))
    rng = np.random.default_rng(seed)
    generator = torch.Generator().manual_seed(seed)
    if click_model is not None and (exam_prob or click_prob):
        raise ValueError("write_baidu_log: give click_model or exam_prob/click_prob, not both")
    model = click_model or PositionBasedModel(
        list(click_prob) or graded_click_prob(0.1, MAX_LABEL), list(exam_prob) or reciprocal_rank_exam_prob(1.0, n_positions)
    )
    model.check_max_label(MAX_LABEL, "write_baidu_log")
    parts = os.path.join(directory, "parts")
    os.makedirs(parts, exist_ok=True)
    queries = _queries(n_queries, n_positions, "train", rng, logger_bias, feature_noise)
    train_files, test_files = [], []
    for start in range(0, n_sessions, sessions_per_file):
        path = os.path.join(parts, "part-1_split-%d.feather" % (start // sessions_per_file))
        count = min(sessions_per_file, n_sessions - start)
        _write(path, _session_rows(queries, rng.integers(0, n_queries, size=count), rng, model, n_positions,
                                   generator, logger_bias, logger_noise), "clicks")
        train_files.append(path)
    if n_test_sessions:
        path = os.path.join(parts, "part-0_split-0.feather")
        _write(path, _session_rows(queries, rng.integers(0, n_queries, size=n_test_sessions), rng, model,
                                   n_positions, generator, logger_bias, logger_noise), "clicks")
        test_files.append(path)
    annotated = _queries(n_annotated, n_positions, "annotated", rng, logger_bias, feature_noise)
    columns: Dict[str, list] = {
        "query_id": [q % 7 for q in range(n_annotated)],
        "query_md5": annotated.md5,
        "n": [len(g) for g in annotated.grades],
        "url_md5": annotated.urls,
        schema.EMBEDDING: [e.tolist() for e in annotated.embedding],
        "label": [g.astype(np.int32).tolist() for g in annotated.grades],
        "frequency_bucket": [int(q % 10) for q in range(n_annotated)],
    }
    for name in schema.LEXICAL_FEATURES:
        columns[name] = [lexical[name].tolist() for lexical in annotated.lexical]
    validation = os.path.join(parts, "validation.feather")
    _write(validation, columns, "annotations")
    exam = per_rank(model.exam_prob, n_positions).numpy().astype(float) if isinstance(model, PositionBasedModel) else None
    return GeneratedLog(
        train_files, test_files, validation, exam, model.click_prob.numpy().astype(float), model.describe()
    )
