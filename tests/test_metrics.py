"""ultra_multr.metrics: nDCG and ERR per query, as ULTRA computes them."""
import math

import numpy as np
import pytest
from conftest import require_ultra

from ultra_multr.metrics import metric_names, per_query_metrics, query_metrics

METRICS = metric_names()


def test_metrics_match_hand_computed_values():
    # Ranking by score: labels 0, 2, 1 (max_label 2).
    values = query_metrics(np.array([1.0, 2.0, 0.0]), np.array([0.1, 0.2, 0.3]), max_label=2)
    dcg3 = 0.0 + 3.0 / math.log2(3) + 1.0 / 2.0
    ideal3 = 3.0 + 1.0 / math.log2(3)
    assert values["ndcg_1"] == 0.0
    assert values["ndcg_3"] == pytest.approx(dcg3 / ideal3)
    assert values["ndcg_10"] == pytest.approx(dcg3 / ideal3)  # cutoff beyond the list
    # R = (2^y - 1) / 2^2: 0, 3/4, 1/4.  ERR@3 = 3/4 / 2 + (1/4)(1 - 3/4) / 3.
    assert values["err_1"] == 0.0
    assert values["err_3"] == pytest.approx(0.375 + 1.0 / 48.0)
    assert values["err_10"] == values["err_3"]


def test_metrics_ties_keep_input_order_and_no_relevant_scores_zero():
    tied = query_metrics(np.array([2.0, 0.0]), np.array([1.0, 1.0]), max_label=2)
    assert tied["ndcg_1"] == 1.0 and tied["err_1"] == pytest.approx(0.75)
    reversed_input = query_metrics(np.array([0.0, 2.0]), np.array([1.0, 1.0]), max_label=2)
    assert reversed_input["ndcg_1"] == 0.0
    none_relevant = query_metrics(np.zeros(4), np.arange(4.0), max_label=4)
    assert all(v == 0.0 for v in none_relevant.values())


def test_metrics_reject_bad_input():
    with pytest.raises(ValueError, match="exceeds max_label"):
        query_metrics(np.array([5.0, 0.0]), np.array([1.0, 0.0]), max_label=4)
    with pytest.raises(ValueError, match="query 1"):
        per_query_metrics([np.zeros(2), np.array([1.0, -1.0])], [np.zeros(2), np.zeros(2)], max_label=1)


def test_metrics_equal_ultra_functions(device):
    require_ultra()
    import torch
    import ultra

    from ultra_multr.compat.runtime import ranking_metrics, ultra_metric_device

    rng = np.random.default_rng(7)
    max_label = 4
    labels, scores = [], []
    for _ in range(25):
        n = int(rng.integers(2, 14))  # some lists shorter than the cutoffs
        labels.append(rng.integers(0, max_label + 1, size=n).astype(np.float64))
        scores.append(rng.normal(size=n))  # continuous: no ties
    ours = per_query_metrics(labels, scores, max_label)
    previous = ultra.utils.metrics.RankingMetricKey.MAX_LABEL
    ultra.utils.metrics.RankingMetricKey.MAX_LABEL = max_label
    try:
        cutoffs = [1, 3, 5, 10]
        for q in range(len(labels)):
            y = torch.tensor(labels[q][None, :], dtype=torch.float32, device=ultra_metric_device())
            s = torch.tensor(scores[q][None, :], dtype=torch.float32, device=ultra_metric_device())
            for family in ("ndcg", "err"):
                theirs = ultra.utils.make_ranking_metric_fn(family, cutoffs)(y, s, None).reshape(-1)
                mine = [ours["%s_%d" % (family, k)][q] for k in cutoffs]
                np.testing.assert_allclose(mine, theirs.cpu().numpy(), rtol=1e-5, atol=1e-6)
        # A padded batch on our model's device, as ULTRA validates: the batch mean equals our query mean.

        width = max(len(y) for y in labels)
        pad = lambda arrays: torch.tensor(
            np.array([np.pad(a, (0, width - len(a))) for a in arrays]), dtype=torch.float32, device=device
        )
        mask = torch.tensor([[i < len(a) for i in range(width)] for a in labels], device=device)
        batch = ranking_metrics(pad(labels), pad(scores), mask, ["ndcg", "err"], cutoffs)
        for name in METRICS:
            assert batch[name] == pytest.approx(ours[name].mean(), rel=1e-5)
    finally:
        ultra.utils.metrics.RankingMetricKey.MAX_LABEL = previous
