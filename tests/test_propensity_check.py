"""Item 5: intervention harvesting recovers a known PBM examination curve from a log whose rankings vary."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from conftest import require

require("ultr_bias_toolkit")
require("pandas")

from ultra_multr.click_logs.propensity_check import harvested_examination, sessions_frame, write_table  # noqa: E402
from ultra_multr.generate.ultre_log import adjacent_swaps, pbm_session_log  # noqa: E402

#: A steeper curve than the default 1/k, so the check is not tuned to one shape.
EXAM = tuple(float(x) for x in 0.9 ** np.arange(10) * np.linspace(1.0, 0.5, 10))


@pytest.fixture(scope="module")
def log():
    return pbm_session_log(n_queries=100, n_sessions=50_000, exam_prob=EXAM, seed=11)


def test_the_log_swaps_neighbours_only(log):
    orders = adjacent_swaps(2000, 10, 0.5, np.random.default_rng(0))
    assert (np.sort(orders, axis=1) == np.arange(10)).all()  # permutations
    assert (np.abs(orders - np.arange(10)) <= 1).all()  # nobody moves more than one position
    assert 0.3 < (orders != np.arange(10)).mean() < 0.7  # and many do
    naive = log.clicks.mean(axis=0) / log.clicks[:, 0].mean()
    truth = np.array(EXAM) / EXAM[0]
    assert np.max(np.abs(naive - truth)) > 0.1  # click rates alone confound position with relevance


def test_intervention_harvesting_recovers_the_examination_curve(log):
    # AllPairsEstimator (5,000 optimiser steps, 4-20 s here) runs in studies/propensity_check/run.py, not in a test.
    curve = harvested_examination(sessions_frame(log), "adjacent_chain", log.n_positions)
    truth = np.array(EXAM) / EXAM[0]
    assert curve[0] == 1.0
    np.testing.assert_allclose(curve, truth, atol=0.05)


def test_a_log_without_swaps_is_refused_naming_the_positions():
    fixed = pbm_session_log(n_queries=20, n_sessions=500, swap_prob=0.0, seed=1)
    with pytest.raises(ValueError, match=r"adjacent_chain: no intervention reaches position\(s\) \[2, 3"):
        harvested_examination(sessions_frame(fixed), "adjacent_chain", fixed.n_positions)


def test_table_lists_every_curve_and_its_largest_error(tmp_path):
    truth = np.array([1.0, 0.5, 0.25])
    paths = write_table({"a": np.array([1.0, 0.55, 0.25]), "b": np.array([1.0, 0.5, 0.2])}, truth, str(tmp_path), "n")
    with open(paths["csv"]) as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["position", "true", "a", "b"] and rows[2] == ["2", "0.5000", "0.5500", "0.5000"]
    assert rows[-1] == ["max abs error", "0.0000", "0.0500", "0.0500"]
    with open(paths["png"], "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
