"""Baidu-ULTR reader and generator on files in the release's layout: one row per document, sessions as runs
of ``query_no`` (philipphager/baidu-ultr ``src/util.py``: a pandas frame, ``df.to_feather``)."""
from __future__ import annotations

import os
import numpy as np
import pytest

from conftest import REPO_ROOT, require

pa = require("pyarrow")
feather = require("pyarrow.feather")
pd = require("pandas")

from ultra_multr.click_logs import baidu_schema as schema  # noqa: E402
from ultra_multr.click_logs.baidu import BaiduSchemaError, read_sessions, session_count, signed_log1p  # noqa: E402
from ultra_multr.generate.baidu_log import LOGGER_FEATURE, logger_scores, write_baidu_log  # noqa: E402


def _document(query_no, query_id, query, doc, **values):
    """One row as the writer builds it: Python ints and floats, strings, token lists, a float16 embedding."""
    row = {"query_no": query_no, "query_id": query_id, "query_md5": "md5-%s" % query, "text_md5": "text-%s" % doc,
           "query": [11, 12], "title": [13], "abstract": [14, 15]}
    for j, name in enumerate(schema.LEXICAL_FEATURES):
        row[name] = (doc * 10 + j) if name in schema.INTEGER_LEXICAL_FEATURES else doc + 0.01 * j
    row["query_length"] = 2
    row[schema.EMBEDDING] = np.full(schema.EMBEDDING_SIZE, doc / 8, dtype=np.float16)
    row.update(values)
    return row


def _click_rows():
    """Three sessions: query A at positions 1, 2, 4, 5, 6 (3 dropped: a gap); query B (another query, the
    same query_id "7") at 1-5; query A again at 1-6, its rows stored out of position order."""
    rows = [_document(10, "7", "A", d, url_md5="u%d" % d, position=p, click=int(p == 4), media_type=0,
                      displayed_time=0.0, serp_height=100, slipoff_count_after_click=0)
            for d, p in zip((1, 2, 3, 4, 5), (1, 2, 4, 5, 6))]
    rows += [_document(11, "7", "B", d, url_md5="u%d" % d, position=d - 10, click=int(d == 11), media_type=1,
                       displayed_time=1.5, serp_height=200, slipoff_count_after_click=1) for d in range(11, 16)]
    rows += [_document(12, "3", "A", d, url_md5="u%d" % d, position=7 - d, click=0, media_type=0,
                       displayed_time=0.0, serp_height=100, slipoff_count_after_click=0) for d in range(1, 7)]
    return rows


def _write_frame(path, rows):
    """The writer's ``df.to_feather`` of one row per document."""
    pd.DataFrame(rows).to_feather(path)
    return str(path)


def test_a_file_written_as_the_writer_does_reads_as_sessions_at_their_logged_positions(tmp_path):
    path = _write_frame(tmp_path / "part-1_split-0.feather", _click_rows())
    found = feather.read_table(path).schema
    # pandas 2 writes strings as string, pandas 3 as large_string: the release's files come in either
    query_id = found.field("query_id").type
    assert found.field("position").type == pa.int64()
    assert pa.types.is_string(query_id) or pa.types.is_large_string(query_id)
    assert "n" not in found.names
    sessions = read_sessions(path, "both", 6, log1p_lexical=False)
    assert session_count(path) == len(sessions) == 3
    assert sessions.n.tolist() == [5, 5, 6] and sessions.query_no.tolist() == [10, 11, 12]
    # query_id is a string shared by two queries; query_md5 tells them apart
    assert sessions.query_id.tolist() == ["7", "7", "3"]
    assert sessions.query_md5.tolist() == ["md5-A", "md5-B", "md5-A"]
    # the gap at position 3 is a masked slot: the documents after it keep their logged rank
    assert sessions.mask[0].tolist() == [True, True, False, True, True, True]
    assert sessions.positions[0].tolist() == [1, 2, 0, 4, 5, 6]
    assert sessions.clicks[0].tolist() == [0, 0, 0, 1, 0, 0]
    assert sessions.text_md5[0].tolist() == ["text-1", "text-2", "", "text-3", "text-4", "text-5"]
    assert not sessions.features[0, 2].any()
    # rows out of position order are put at their positions
    assert sessions.text_md5[2].tolist() == ["text-%d" % d for d in range(6, 0, -1)]
    assert sessions.mask[1].tolist() == [True] * 5 + [False]
    np.testing.assert_allclose(sessions.features[0, 3, :12], [3 + 0.01 * j if j < 9 else 30 + j for j in range(12)],
                               rtol=1e-6)
    np.testing.assert_array_equal(sessions.features[0, 3, 12:], np.float32(np.float16(3 / 8)))
    cut = read_sessions(path, "lexical", 3)
    assert cut.mask[0].tolist() == [True, True, False] and cut.n.tolist() == [5, 5, 6]
    np.testing.assert_allclose(cut.features[0, 1], signed_log1p(sessions.features[0, 1, :12]), rtol=1e-6)
    assert read_sessions(path, "lexical", None).mask.shape == (3, 6)


def test_narrower_integer_and_float_widths_are_read_and_cast(tmp_path):
    wide = _write_frame(tmp_path / "part-1_split-0.feather", _click_rows())
    table = feather.read_table(wide)
    narrow_types = {"int64": pa.int32(), "double": pa.float32()}
    for index, field in enumerate(table.schema):
        if str(field.type) in narrow_types:
            new_type = narrow_types[str(field.type)]
            table = table.set_column(index, pa.field(field.name, new_type), table.column(field.name).cast(new_type))
    table = table.set_column(table.schema.get_field_index("query_id"), pa.field("query_id", pa.large_string()),
                             table.column("query_id").cast(pa.large_string()))
    narrow = str(tmp_path / "part-1_split-1.feather")
    feather.write_feather(table, narrow)
    a, b = read_sessions(wide, "both", 6), read_sessions(narrow, "both", 6)
    for name in ("features", "mask", "clicks", "positions", "n", "query_no", "query_id", "text_md5"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_an_annotation_file_without_url_md5_keys_documents_by_text(tmp_path):
    rows = [_document(q, "5", "Q%d" % q, 10 * q + d, label=(d + q) % 5, frequency_bucket=q)
            for q in range(2) for d in range(5 + q)]
    path = _write_frame(tmp_path / "validation.feather", rows)
    assert "url_md5" not in feather.read_table(path).schema.names
    annotations = read_sessions(path, "lexical", None)
    assert annotations.kind == "annotations" and len(annotations) == 2
    assert annotations.mask.sum(1).tolist() == [5, 6] and annotations.mask.shape == (2, 6)
    assert annotations.text_md5[1, :6].tolist() == ["text-%d" % (10 + d) for d in range(6)]
    assert annotations.clicks[1, :6].tolist() == [(d + 1) % 5 for d in range(6)]
    assert annotations.positions[0].tolist() == [1, 2, 3, 4, 5, 0]
    assert annotations.query_id.tolist() == ["5", "5"] and len(set(annotations.query_md5)) == 2


def _bad(rows, row, **values):
    rows = [dict(r) for r in rows]
    rows[row].update(values)
    return rows


@pytest.mark.parametrize("change, column, expected", [
    (lambda rows: _bad(rows, 4, position=2), "'position' row 4", "repeats position 2"),
    (lambda rows: _bad(rows, 5, position=0), "'position' row 5", "is 0, expected >= 1"),
    (lambda rows: _bad(rows, 7, click=2), "'click' row 7", "expected in 0..1"),
    (lambda rows: _bad(rows, 3, query_md5="md5-Z"), "'query_md5' row 3", "starting at row 0"),
    (lambda rows: _bad(rows, 6, **{schema.EMBEDDING: np.zeros(767, np.float16)}), "row 6", "767 values"),
    (lambda rows: _bad(rows, 8, text_md5=None), "'text_md5' row 8", "is null"),
    (lambda rows: [{k: v for k, v in r.items() if k != "text_md5"} for r in rows], "'text_md5' is missing", ""),
    (lambda rows: [dict(r, click=str(r["click"])) for r in rows], "'click' has type", "string, expected int64"),
    (lambda rows: _bad(rows, 2, tf=float("-inf")), "'tf' row 2", "is -inf: features must be finite"),
    (lambda rows: _bad(rows, 4, idf=1e39), "'idf' row 4", "is 1e+39: features must be finite numbers within float32"),
    (lambda rows: _bad(rows, 1, **{schema.EMBEDDING: np.r_[np.zeros(5), np.inf, np.zeros(762)].astype(np.float16)}),
     "row 1 holds inf at index 5", "must be finite"),
])
def test_errors_name_the_file_the_column_and_the_row(tmp_path, change, column, expected):
    path = _write_frame(tmp_path / "part-2_split-0.feather", change(_click_rows()))
    with pytest.raises(BaiduSchemaError) as error:
        read_sessions(path, "both")
    message = str(error.value)
    assert path in message and column in message and expected in message


def test_a_nan_feature_is_refused_with_its_column_and_row(tmp_path):
    """pandas writes a NaN as null (refused as such); a file written otherwise can hold a NaN value."""
    path = _write_frame(tmp_path / "part-1_split-0.feather", _click_rows())
    table = feather.read_table(path)
    bm25 = table.column("bm25").to_pylist()
    bm25[9] = float("nan")
    index = table.schema.get_field_index("bm25")
    feather.write_feather(table.set_column(index, "bm25", pa.array(bm25, pa.float64())), path)
    assert feather.read_table(path).column("bm25").null_count == 0
    with pytest.raises(BaiduSchemaError, match=r"part-1_split-0.feather: column 'bm25' row 9 is nan: features must "
                                               r"be finite"):
        read_sessions(path)


def test_the_kind_of_a_file_is_its_layout_name_or_given(tmp_path):
    """A cached copy with a hashed name reads with its kind given, and is refused without; a file read as the other
    kind is refused, naming what it holds."""
    hashed = _write_frame(tmp_path / "3f9a0c1e7b.feather", _click_rows())
    with pytest.raises(ValueError, match=r"3f9a0c1e7b.feather: its name does not say what it holds.*kind='clicks'"):
        read_sessions(hashed)
    assert read_sessions(hashed, kind="clicks").kind == "clicks" and session_count(hashed) == 3
    with pytest.raises(BaiduSchemaError, match=r"3f9a0c1e7b.feather holds click sessions \(a 'click' column, no "
                                               r"'label'\), not annotations"):
        read_sessions(hashed, kind="annotations")
    for name, kind in (("part-0_split-9.feather", "clicks"), ("validation.feather", "annotations")):
        assert schema.file_kind(str(tmp_path / "parts" / name)) == kind
    with pytest.raises(ValueError, match="validation-copy.feather: its name does not say"):
        schema.file_kind("validation-copy.feather")  # a name that only starts like one


def test_labels_outside_0_4_are_refused_with_their_row(tmp_path):
    rows = [_document(0, "1", "Q", d, label=d, frequency_bucket=0) for d in range(6)]
    path = _write_frame(tmp_path / "validation.feather", rows)
    with pytest.raises(BaiduSchemaError, match=r"column 'label' row 5 is 5, expected in 0..4"):
        read_sessions(path)


@pytest.fixture(scope="module")
def baidu_log(tmp_path_factory):
    """200 training sessions (2 files), 50 test sessions, 20 annotated queries; 6-10 documents per list,
    each document dropped with probability 0.15 (gaps; sessions left with < 5 documents are not written)."""
    return write_baidu_log(str(tmp_path_factory.mktemp("baidu")), n_queries=20, n_sessions=200, seed=3,
                           missing_doc_prob=0.15)


def test_the_generator_writes_the_writers_layout(baidu_log):
    for path in baidu_log.train_files + baidu_log.test_files:
        frame = feather.read_table(path).to_pandas()
        assert list(frame.columns) == list(schema.CLICK_COLUMNS)
        assert feather.read_table(path).schema.equals(schema.arrow_schema("clicks"))
        runs = (frame.query_no != frame.query_no.shift()).cumsum()
        assert frame.query_no.is_monotonic_increasing and runs.iloc[-1] == frame.query_no.nunique()
        per_session = frame.groupby("query_no")
        assert per_session.size().min() >= schema.MIN_DOCS_PER_QUERY
        assert (per_session.position.diff().dropna() > 0).all() and frame.position.min() == 1
        assert (per_session.query_md5.nunique() == 1).all()
        assert (per_session.position.max() > per_session.size()).any()  # gaps
        # query_id is a string that two different queries share
        assert (frame.groupby("query_id").query_md5.nunique() > 1).any()
    annotations = feather.read_table(baidu_log.validation_file)
    assert annotations.schema.names == list(schema.ANNOTATION_COLUMNS)
    assert "url_md5" not in annotations.schema.names and "position" not in annotations.schema.names
    frame = annotations.to_pandas()
    assert set(frame.label) <= set(range(5)) and (frame.groupby("query_no").frequency_bucket.nunique() == 1).all()


def test_the_reader_puts_generated_documents_at_their_logged_positions(baidu_log):
    path = baidu_log.train_files[1]
    frame = feather.read_table(path).to_pandas()
    sessions = read_sessions(path, "lexical", 10, log1p_lexical=False)
    assert len(sessions) == session_count(path) == frame.query_no.nunique()
    for s, (query_no, rows) in enumerate(frame.groupby("query_no", sort=False)):
        assert sessions.query_no[s] == query_no and sessions.n[s] == len(rows)
        slots = rows.position.to_numpy() - 1
        assert np.flatnonzero(sessions.mask[s]).tolist() == slots.tolist()
        assert sessions.text_md5[s, slots].tolist() == rows.text_md5.tolist()
        assert sessions.clicks[s, slots].tolist() == rows.click.tolist()
        np.testing.assert_allclose(sessions.features[s, slots, 0], rows.bm25.to_numpy(np.float32))


def test_gaps_leave_every_other_draw_as_it_was(tmp_path):
    kwargs = dict(n_queries=10, n_sessions=60, n_test_sessions=0, n_annotated=3, sessions_per_file=60, seed=8)
    full = feather.read_table(write_baidu_log(str(tmp_path / "full"), **kwargs).train_files[0]).to_pandas()
    gaps = feather.read_table(write_baidu_log(str(tmp_path / "gaps"), missing_doc_prob=0.2,
                                              **kwargs).train_files[0]).to_pandas()
    assert len(gaps) < len(full)
    merged = gaps.merge(full, on=["query_no", "position"], suffixes=("", "_full"))
    assert len(merged) == len(gaps)
    for column in ("text_md5", "click", "media_type", "serp_height", "bm25"):
        assert (merged[column] == merged[column + "_full"]).all(), column


def test_benchmark_metrics_of_one_query():
    from ultra_multr.click_logs.baidu_evaluate import baidu_metrics

    labels, scores = np.array([0.0, 2.0, 1.0, 0.0]), np.array([4.0, 3.0, 2.0, 1.0])
    values = baidu_metrics(labels, scores)
    assert values["dcg_1"] == 0.0
    assert values["dcg_3"] == pytest.approx(3 / np.log2(3) + 1 / np.log2(4))
    assert values["mrr_10"] == pytest.approx(0.5)
    assert values["ndcg_10"] == pytest.approx(values["dcg_10"] / (3 + 1 / np.log2(3)))


def test_generated_cascade_clicks_follow_the_cascade(tmp_path):
    """A log generated with cascade clicks whose click probability is 0.3 for every grade: the first click
    ends the session, so P(click at t) = 0.3 * 0.7^(t-1) whatever the documents (every list has >= 6)."""
    from ultra_multr.click_models import CascadeModel

    log = write_baidu_log(str(tmp_path), n_queries=50, n_sessions=4000, n_test_sessions=0, n_annotated=2,
                          sessions_per_file=4000, click_model=CascadeModel([0.3] * 5), seed=1)
    assert log.exam_prob is None and log.click_model["model_name"] == "cascade_model"
    clicks = read_sessions(log.train_files[0], "lexical", 10).clicks
    assert clicks.sum(1).max() == 1
    np.testing.assert_allclose(clicks[:, :6].mean(0), 0.3 * 0.7 ** np.arange(6), atol=0.025)


def test_logger_bias_puts_the_popularity_feature_on_top_independently_of_relevance(tmp_path):
    """With logger_bias the logging ranker favours z, which LOGGER_FEATURE carries and the grade does not:
    documents with high z sit higher in the logged lists, and in the annotations z is unrelated to the label.
    Without it the feature follows the grade like every other lexical feature."""
    column = schema.LEXICAL_FEATURES.index(LOGGER_FEATURE)

    def top_minus_bottom_and_label_correlation(logger_bias):
        log = write_baidu_log(str(tmp_path / str(logger_bias)), n_queries=200, n_sessions=2000, n_test_sessions=0,
                              n_annotated=400, sessions_per_file=2000, seed=2, logger_bias=logger_bias)
        sessions = read_sessions(log.train_files[0], "lexical", 10, log1p_lexical=False)
        feature = sessions.features[:, :, column]
        frame = feather.read_table(log.validation_file, columns=[LOGGER_FEATURE, "label"]).to_pandas()
        return feature[:, 0].mean() - feature[:, 5].mean(), np.corrcoef(frame[LOGGER_FEATURE], frame.label)[0, 1]

    biased_gap, biased_corr = top_minus_bottom_and_label_correlation(3.0)
    plain_gap, plain_corr = top_minus_bottom_and_label_correlation(0.0)
    assert biased_gap > 15 and abs(biased_corr) < 0.1  # z in units of 10: > 1.5 sd higher on top, unrelated to relevance
    assert plain_corr > 0.5
    with pytest.raises(ValueError, match="logger_bias >= 0, .* got -1.0, 1.0 and 1.0"):
        write_baidu_log(str(tmp_path / "bad"), logger_bias=-1.0)
    with pytest.raises(ValueError, match="feature_noise > 0 .* got 0.0, 0.0 and 1.0"):
        write_baidu_log(str(tmp_path / "bad"), feature_noise=0.0)
    with pytest.raises(ValueError, match="logger_noise >= 0, got 0.0, 1.0 and -0.5"):
        write_baidu_log(str(tmp_path / "bad"), logger_noise=-0.5)
    with pytest.raises(ValueError, match="logger='oracle', expected one of grade, features"):
        write_baidu_log(str(tmp_path / "bad"), logger="oracle")
    with pytest.raises(ValueError, match=r"missing_doc_prob must be in \[0, 1\), got 1.0"):
        write_baidu_log(str(tmp_path / "bad"), missing_doc_prob=1.0)


def test_feature_noise_weakens_what_the_features_tell_of_the_grade(tmp_path):
    def bm25_label_correlation(feature_noise):
        log = write_baidu_log(str(tmp_path / str(feature_noise)), n_queries=2, n_sessions=2, n_test_sessions=0,
                              n_annotated=400, sessions_per_file=2, seed=4, feature_noise=feature_noise)
        frame = feather.read_table(log.validation_file, columns=["bm25", "label"]).to_pandas()
        return np.corrcoef(frame.bm25, frame.label)[0, 1]

    assert bm25_label_correlation(1.0) > 0.6 > 0.4 > bm25_label_correlation(4.0) > 0.1


def _orders(path):
    """query_md5 -> the set of logged orders (text_md5 by position) of its sessions."""
    frame = feather.read_table(path, columns=["query_no", "query_md5", "text_md5", "position"]).to_pandas()
    orders = {}
    for _, rows in frame.sort_values(["query_no", "position"]).groupby("query_no"):
        orders.setdefault(rows.query_md5.iloc[0], set()).add(tuple(rows.text_md5))
    return orders


def test_logger_noise_sets_how_many_orders_a_query_is_logged_in(tmp_path):
    def orders_per_query(logger_noise):
        log = write_baidu_log(str(tmp_path / str(logger_noise)), n_queries=10, n_sessions=400, n_test_sessions=0,
                              n_annotated=2, sessions_per_file=400, seed=5, logger_bias=2.0, logger_noise=logger_noise)
        orders = _orders(log.train_files[0])
        return max(len(o) for o in orders.values()), min(len(o) for o in orders.values())

    assert orders_per_query(0.0) == (1, 1)  # a deterministic logger: one order per query
    assert orders_per_query(1.0)[1] > 5  # the study's default: many


def test_the_features_logger_does_not_see_the_labels():
    """Under logger="features" other labels (same features, same noise) give the same logged order; under the
    grade logger they do not."""
    from ultra_multr.generate.baidu_log import features_logger_weights

    rng = np.random.default_rng(0)
    lexical = {name: rng.gamma(2.0, 3.0, size=8) for name in schema.LEXICAL_FEATURES}
    grades, other = rng.integers(0, 5, size=8), rng.integers(0, 5, size=8)
    noise, popularity = rng.normal(0.0, 0.5, size=8), rng.normal(size=8)
    weights = features_logger_weights()
    for bias in (0.0, 2.0):
        for logger, same in (("features", True), ("grade", False)):
            a = np.argsort(-logger_scores(lexical, grades, popularity, noise, logger, bias, weights), kind="stable")
            b = np.argsort(-logger_scores(lexical, other, -popularity, noise, logger, bias, weights), kind="stable")
            assert (a.tolist() == b.tolist()) == same, (logger, bias)
    with pytest.raises(ValueError, match="need 12 weights"):
        features_logger_weights([1.0, 2.0])


def test_a_noiseless_features_logger_logs_the_order_of_its_linear_score(tmp_path):
    """End to end: the logged order of every session is the descending weighted sum of the signed-log1p
    lexical features the file holds (what the reader gives the learner), whatever the grades."""
    weights = np.linspace(1.0, -0.5, 12)
    log = write_baidu_log(str(tmp_path), n_queries=15, n_sessions=60, n_test_sessions=0, n_annotated=2,
                          sessions_per_file=60, seed=6, logger="features", logger_weights=weights, logger_noise=0.0)
    sessions = read_sessions(log.train_files[0], "lexical", 10)
    for s in range(len(sessions)):
        score = sessions.features[s, sessions.mask[s]].astype(np.float64) @ weights
        assert np.all(np.diff(score) <= 1e-5), s
    assert all(len(o) == 1 for o in _orders(log.train_files[0]).values())


def test_the_baidu_tools_are_console_scripts():
    """pyproject.toml's entry points name callables that exist (issue 27, item 7)."""
    import importlib

    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as handle:
        scripts = tomllib.load(handle)["project"]["scripts"]
    for name in ("ultra-multr-baidu-convert", "ultra-multr-baidu-evaluate", "ultra-multr-baidu-click-ll"):
        module, function = scripts[name].split(":")
        entry = getattr(importlib.import_module(module), function)
        with pytest.raises(SystemExit) as stop:
            entry(["--help"])
        assert stop.value.code == 0
