"""The simulator-validity statistics: the decile statistic and the per-position ratio against the true click model."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from conftest import REPO_ROOT, require_ultra

ultra = require_ultra()

from ultra_multr.experiments.simulator_validity import (  # noqa: E402
    decile_statistic, logger_score_matrix, position_ratio, simulator_validity,
)
from ultra_multr.feeds.arrays import query_arrays  # noqa: E402
from ultra_multr.simulator.controls import TrueClickModelSimulator  # noqa: E402
from ultra_multr.click_models.ultra import load_click_model_file  # noqa: E402

CASCADE = os.path.join(REPO_ROOT, "settings", "click_models", "cascade_eps0.1_ymax4.json")


def test_the_decile_statistic_on_a_hand_made_case():
    scores = np.arange(100, dtype=float).reshape(10, 10)  # documents 0..99: deciles 0-9 and 90-99
    mask = np.ones((10, 10), dtype=bool)
    truth = np.full((10, 10), 0.2)
    biased = truth + np.where(scores >= 90, 0.05, 0.0) - np.where(scores <= 9, 0.05, 0.0)
    assert decile_statistic(biased, truth, scores, mask) == pytest.approx((0.05 + 0.05) / 0.2)
    assert decile_statistic(truth + 0.03, truth, scores, mask) == pytest.approx(0.0, abs=1e-12)  # error not by score
    mask[9] = False  # the top decile padded away: the deciles are of the real documents only
    assert decile_statistic(biased, truth, scores, mask) == pytest.approx(0.05 / 0.2)
    observed = np.tile(np.linspace(0.5, 0.05, 10), (10, 1))
    np.testing.assert_allclose(position_ratio(observed * 0.5, observed, np.ones((10, 10), dtype=bool)), 0.5)


def test_a_simulator_that_favours_what_the_logger_ranked_high_is_caught(synthetic_data_dir):
    data = ultra.utils.read_data(synthetic_data_dir, "train", None, 0)
    arrays = query_arrays(data, 10)
    rows = arrays.doc_ids[arrays.mask]
    model = load_click_model_file(CASCADE).model
    labels = arrays.labels[arrays.mask]
    truth = TrueClickModelSimulator(model, arrays.features[rows], labels, 10)
    scores = np.where(arrays.mask, logger_score_matrix(synthetic_data_dir, "train", data, 10), 0.0)
    features, mask = torch.from_numpy(arrays.list_features(np.arange(arrays.n_queries))), torch.from_numpy(arrays.mask)
    exact = simulator_validity(truth, truth, features, mask, scores, samples=64)
    assert exact["decile_statistic"] == 0.0 and np.allclose(exact["position_ratio"], 1.0)
    # a simulator that adds a grade to every document the logger scored in its top decile
    top = scores[arrays.mask] >= np.quantile(scores[arrays.mask], 0.9)
    favouring = TrueClickModelSimulator(model, arrays.features[rows], np.minimum(labels + top, 4.0), 10)
    assert simulator_validity(favouring, truth, features, mask, scores, samples=64)["decile_statistic"] > 0.1
