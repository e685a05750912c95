"""Generated web-LETOR-like data: about half the features of a document zero, heavy-tailed log-normal values with
scales that differ by feature, groups of correlated features, per-query shifts; prepared in ULTRA's recipe with a
features-only Rank SVM logger or a logger that orders by the labels."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import require

require("sklearn")

from ultra_multr.generate.web_letor import WebLetor, draw_split, draw_structure, prepare_web_letor  # noqa: E402

SMALL = WebLetor(train_queries=40, valid_queries=5, test_queries=5, features=300, seed=2)


def test_features_are_sparse_heavy_tailed_correlated_in_groups_and_shifted_per_query():
    structure = draw_structure(SMALL)
    queries = draw_split(SMALL, structure, "train").queries
    features = np.concatenate([q.features for q in queries])
    assert features.shape[1] == 300 and 4 <= np.bincount(structure.group).min()
    zero = (features == 0).mean(axis=1)
    assert 0.45 < zero.mean() < 0.55 and zero.min() > 0.3 and zero.max() < 0.7
    logs = np.where(features > 0, np.log(np.where(features > 0, features, 1.0)), np.nan)
    spread = np.nanstd(logs, axis=0)
    assert spread.min() < 0.6 and spread.max() > 1.5  # log-normal scales differ by feature
    widest = int(np.argmax(spread))
    values = features[features[:, widest] > 0, widest]
    assert values.max() > 20 * np.median(values)  # heavy-tailed
    # two features of one group move together; features of different groups do not
    first = np.flatnonzero(structure.group == 0)[:2]
    other = np.flatnonzero(structure.group == 1)[0]
    both = ~np.isnan(logs[:, first]).any(axis=1) & ~np.isnan(logs[:, other])
    within = np.corrcoef(logs[both, first[0]], logs[both, first[1]])[0, 1]
    across = np.corrcoef(logs[both, first[0]], logs[both, other])[0, 1]
    assert within > 0.2 + abs(across)
    # a query's documents share its shift: its mean log value over a group is spread wider than without shifts
    assert query_spread(SMALL) > 1.3 * query_spread(WebLetor(**dict(SMALL.__dict__, query_shift=0.0)))


def query_spread(spec: WebLetor) -> float:
    """The std over training queries of the mean (over its documents and group 0's features) of the centred
    logarithms of the non-zero values."""
    structure = draw_structure(spec)
    group = structure.group == 0
    means = []
    for query in draw_split(spec, structure, "train").queries:
        values = query.features[:, group]
        present = values > 0
        means.append(np.mean((np.log(values[present]) - np.broadcast_to(structure.mu[group], values.shape)[present])))
    return float(np.std(means))

@pytest.mark.parametrize("logger", ["rank_svm", "labels"])
def test_lists_are_in_the_loggers_order_and_the_data_are_a_function_of_the_spec(logger):
    spec = WebLetor(**dict(SMALL.__dict__, logger=logger))
    prepared = prepare_web_letor(spec)
    assert prepared.report["web_letor"]["logger"] == logger and prepared.feature_size == 300
    weights = np.array(prepared.report["rank_svm"]["weights"])
    for query in prepared.ranked["train"]:
        assert np.all(np.diff(query.initial_scores) <= 0)
        if logger == "rank_svm":
            np.testing.assert_allclose(query.initial_scores, query.features @ weights)
        else:
            assert np.all(np.abs(query.initial_scores - query.labels) < 6 * spec.logger_noise)
    structure = draw_structure(spec)
    first, again = draw_split(spec, structure, "train"), draw_split(spec, draw_structure(spec), "train")
    assert all(np.array_equal(a.features, b.features) and np.array_equal(a.labels, b.labels)
               for a, b in zip(first.queries, again.queries))


def test_a_bad_spec_is_refused_naming_the_knob():
    with pytest.raises(ValueError, match="logger must be one of"):
        WebLetor(logger="oracle")
    with pytest.raises(ValueError, match="docs_per_query"):
        WebLetor(docs_per_query=(2, 12))
