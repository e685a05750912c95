"""ultra_multr.experiments.significance: the paired randomisation test."""
import math

import numpy as np
import pytest

from ultra_multr.experiments.significance import randomization_test


def test_randomization_test_exact_hand_computed():
    # d = (0.1, 0.2, 0.3), sum 0.6: of the 8 sign patterns only all-plus and
    # all-minus reach |sum| >= 0.6, so p = 2/8.
    assert randomization_test([0.5, 0.7, 0.9], [0.4, 0.5, 0.6]) == pytest.approx(0.25)
    # A zero difference doubles every count: p unchanged.
    assert randomization_test([0.5, 0.7, 0.9, 0.3], [0.4, 0.5, 0.6, 0.3]) == pytest.approx(0.25)
    # d = (1, 1, 1, 1, -1), |sum| = 3: |sum| >= 3 needs at most one sign
    # against the majority: 2 * (1 + 5) = 12 of 32 patterns.
    assert randomization_test([1, 1, 1, 1, 0], [0, 0, 0, 0, 1]) == pytest.approx(12 / 32)
    assert randomization_test([0.2, 0.4], [0.2, 0.4]) == 1.0


def test_randomization_test_monte_carlo_agrees_with_exact():
    rng = np.random.default_rng(3)
    a = rng.random(14)
    b = a + rng.normal(0.05, 0.2, size=14)
    exact = randomization_test(a, b)
    n = 20000
    sampled = randomization_test(a, b, n_permutations=n, seed=1, exact_max_queries=0)
    tolerance = 4 * math.sqrt(exact * (1 - exact) / n) + 1.0 / (n + 1)
    assert abs(sampled - exact) <= tolerance
    assert sampled == randomization_test(a, b, n_permutations=n, seed=1, exact_max_queries=0)


def test_randomization_test_rejects_bad_input():
    with pytest.raises(ValueError, match="equal length"):
        randomization_test([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        randomization_test([1.0, float("nan")], [1.0, 2.0])
