"""Baidu-ULTR reader and generator: a generated log in exactly the release's schema."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import require

pa = require("pyarrow")
feather = require("pyarrow.feather")

from ultra_multr.logs import baidu_schema as schema  # noqa: E402
from ultra_multr.logs.baidu import BaiduSchemaError, read_sessions, signed_log1p  # noqa: E402
from ultra_multr.logs.generate import write_baidu_log  # noqa: E402


@pytest.fixture(scope="module")
def baidu_log(tmp_path_factory):
    """200 training sessions (2 files), 50 test sessions, 20 annotated queries; 6-10 documents per list."""
    return write_baidu_log(str(tmp_path_factory.mktemp("baidu")), n_queries=20, n_sessions=200, seed=3)


def test_generated_files_have_exactly_the_declared_schema(baidu_log):
    for path in baidu_log.train_files + baidu_log.test_files:
        assert feather.read_table(path).schema.equals(schema.arrow_schema("clicks"))
    assert feather.read_table(baidu_log.validation_file).schema.equals(schema.arrow_schema("annotations"))
    assert len(schema.LEXICAL_FEATURES) == 12


def test_round_trip_in_displayed_order_cut_to_top_n(baidu_log, tmp_path):
    path = baidu_log.train_files[0]
    rows = feather.read_table(path).to_pylist()
    # The same sessions with every document list stored in reverse: the reader orders by logged position.
    columns = {name: [row[name][::-1] if name in schema.CLICK_COLUMNS and schema.CLICK_COLUMNS[name].startswith("list")
                      else row[name] for row in rows] for name in schema.CLICK_COLUMNS}
    shuffled = str(tmp_path / "part-1_split-9.feather")
    feather.write_feather(pa.Table.from_pydict(columns, schema=schema.arrow_schema("clicks")), shuffled)
    top_n = 5
    for source in (path, shuffled):
        sessions = read_sessions(source, "both", top_n)
        assert sessions.features.shape == (len(rows), top_n, 12 + 768)
        for s, row in enumerate(rows):
            kept = min(row["n"], top_n)
            assert sessions.query_md5[s] == row["query_md5"] and sessions.query_id[s] == row["query_id"]
            assert sessions.mask[s].tolist() == [True] * kept + [False] * (top_n - kept)
            assert sessions.url_md5[s, :kept].tolist() == row["url_md5"][:kept]
            assert sessions.clicks[s, :kept].tolist() == row["click"][:kept]
            assert sessions.positions[s, :kept].tolist() == list(range(1, kept + 1))
            np.testing.assert_allclose(sessions.features[s, :kept, 0], signed_log1p(np.float32(row["bm25"][:kept])),
                                       rtol=1e-6)
            np.testing.assert_array_equal(sessions.features[s, :kept, 12:],
                                          np.asarray(row[schema.EMBEDDING][:kept], np.float16).astype(np.float32))
            assert not sessions.features[s, kept:].any() and not sessions.clicks[s, kept:].any()


def test_feature_choices_and_annotations(baidu_log):
    lexical = read_sessions(baidu_log.train_files[1], "lexical", 10, log1p_lexical=False)
    embedding = read_sessions(baidu_log.train_files[1], "embedding", 10)
    assert lexical.features.shape[-1] == 12 and embedding.features.shape[-1] == 768
    rows = feather.read_table(baidu_log.train_files[1]).to_pylist()
    assert lexical.features[0, 0, schema.LEXICAL_FEATURES.index("title_length")] == rows[0]["title_length"][0]
    annotations = read_sessions(baidu_log.validation_file, "lexical", None)
    assert annotations.kind == "annotations"
    assert annotations.mask.shape[1] == max(row["n"] for row in feather.read_table(baidu_log.validation_file).to_pylist())
    assert set(np.unique(annotations.clicks[annotations.mask])) <= {0, 1, 2, 3, 4}
    # query_id collides across queries; query_md5 does not.
    assert len(set(annotations.query_md5)) == len(annotations) > len(set(annotations.query_id))


@pytest.mark.parametrize("column, new_type, expected", [
    ("click", pa.list_(pa.float32()), "column 'click' has type list<item: float> , expected list<item: int32>"),
    ("query_md5", None, "column 'query_md5' is missing"),
])
def test_schema_mismatch_names_file_and_column(baidu_log, tmp_path, column, new_type, expected):
    table = feather.read_table(baidu_log.train_files[0])
    index = table.schema.get_field_index(column)
    if new_type is None:
        table = table.remove_column(index)
    else:
        table = table.set_column(index, pa.field(column, new_type), table.column(column).cast(new_type))
    path = str(tmp_path / "part-2_split-0.feather")
    feather.write_feather(table, path)
    with pytest.raises(BaiduSchemaError) as error:
        read_sessions(path)
    message = str(error.value)
    assert path in message
    for part in expected.split(" , "):
        assert part in message


def test_benchmark_metrics_of_one_query():
    from ultra_multr.logs.baidu_evaluate import baidu_metrics

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
    from ultra_multr.logs.generate import LOGGER_FEATURE

    column = schema.LEXICAL_FEATURES.index(LOGGER_FEATURE)

    def top_minus_bottom_and_label_correlation(logger_bias):
        log = write_baidu_log(str(tmp_path / str(logger_bias)), n_queries=200, n_sessions=2000, n_test_sessions=0,
                              n_annotated=400, sessions_per_file=2000, seed=2, logger_bias=logger_bias)
        sessions = read_sessions(log.train_files[0], "lexical", 10, log1p_lexical=False)
        feature = sessions.features[:, :, column]
        rows = feather.read_table(log.validation_file).to_pylist()
        values = np.concatenate([row[LOGGER_FEATURE] for row in rows]).astype(float)
        labels = np.concatenate([row["label"] for row in rows]).astype(float)
        return feature[:, 0].mean() - feature[:, 5].mean(), np.corrcoef(values, labels)[0, 1]

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


def test_feature_noise_weakens_what_the_features_tell_of_the_grade(tmp_path):
    def bm25_label_correlation(feature_noise):
        log = write_baidu_log(str(tmp_path / str(feature_noise)), n_queries=2, n_sessions=2, n_test_sessions=0,
                              n_annotated=400, sessions_per_file=2, seed=4, feature_noise=feature_noise)
        rows = feather.read_table(log.validation_file).to_pylist()
        values = np.concatenate([row["bm25"] for row in rows])
        return np.corrcoef(values, np.concatenate([row["label"] for row in rows]))[0, 1]

    assert bm25_label_correlation(1.0) > 0.6 > 0.4 > bm25_label_correlation(4.0) > 0.1


def test_logger_noise_sets_how_many_orders_a_query_is_logged_in(tmp_path):
    def orders_per_query(logger_noise):
        log = write_baidu_log(str(tmp_path / str(logger_noise)), n_queries=10, n_sessions=400, n_test_sessions=0,
                              n_annotated=2, sessions_per_file=400, seed=5, logger_bias=2.0, logger_noise=logger_noise)
        orders = {}
        for row in feather.read_table(log.train_files[0]).to_pylist():
            orders.setdefault(row["query_md5"], set()).add(tuple(row["url_md5"]))
        return max(len(o) for o in orders.values()), min(len(o) for o in orders.values())

    assert orders_per_query(0.0) == (1, 1)  # a deterministic logger: one order per query
    assert orders_per_query(1.0)[1] > 5  # the study's default: many
