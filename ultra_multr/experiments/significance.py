"""Paired two-sided Fisher randomisation (permutation) test, in pure numpy.

The paper follows Ai et al. (SIGIR 2018) and Smucker et al. (CIKM 2007): under
the null hypothesis the two systems are exchangeable on every query, so each
per-query difference ``d_i = a_i - b_i`` is equally likely to carry either
sign.  The p-value is the probability, over the 2^n sign assignments, that
``|sum_i s_i d_i|`` is at least the observed ``|sum_i d_i|``.

With few queries all 2^n assignments are enumerated (the p-value is exact).
Otherwise ``n_permutations`` random assignments are drawn with a seeded
generator and ``p = (hits + 1) / (n_permutations + 1)``, which counts the
observed assignment and so never reports p = 0 (Phipson & Smyth, 2010).

Over runs (:func:`over_runs`): the pooled query-level test treats queries as
the only randomness, and a run's seed (its clicks, its initial ranker, its
pilot's choice) moves every query at once.  Per-run paired differences (the
same set and seed for both methods) with a t-interval over the runs, and the
same sign-flip test over runs where there are enough of them, carry that
spread; a headline claim rests on them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

#: Enumerate exactly up to this many queries (2^16 = 65536 assignments).
EXACT_MAX_QUERIES = 16
#: Sign-matrix entries per matrix product (bounds memory at 32 MB).
_CHUNK_ENTRIES = 2 ** 22


def _hits(signs: np.ndarray, diffs: np.ndarray, observed: float) -> int:
    """How many rows of ``signs`` [m, n] give ``|signs @ diffs| >= observed``."""
    stats = np.abs(signs @ diffs)
    # Relative slack so that the observed assignment (and equal-valued ones)
    # count despite float rounding in a different summation order.
    return int(np.count_nonzero(stats >= observed - 1e-9 * max(observed, 1e-300)))


def randomization_test(
    a: np.ndarray,
    b: np.ndarray,
    n_permutations: int = 10000,
    seed: int = 0,
    exact_max_queries: int = EXACT_MAX_QUERIES,
) -> float:
    """Two-sided p-value that paired per-query values ``a`` and ``b`` differ.

    Args:
        a: [n] per-query metric of system A.
        b: [n] per-query metric of system B, same queries in the same order.
        n_permutations: random sign assignments when n > exact_max_queries.
        seed: seed of the Monte-Carlo generator.
        exact_max_queries: enumerate all 2^n assignments up to this n.

    Returns:
        The p-value in (0, 1]; 1.0 when every difference is 0.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError("paired samples must be 1-D of equal length, got %s and %s" % (a.shape, b.shape))
    if a.size == 0:
        raise ValueError("the randomisation test needs at least one query")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("per-query values must be finite")
    if n_permutations < 1:
        raise ValueError("n_permutations must be >= 1, got %d" % n_permutations)
    diffs = a - b
    observed = abs(float(diffs.sum()))
    if observed == 0.0:
        return 1.0
    n = diffs.size
    chunk = max(1, _CHUNK_ENTRIES // n)
    if n <= exact_max_queries:
        hits = 0
        bits = np.arange(n)
        for start in range(0, 2 ** n, chunk):
            codes = np.arange(start, min(start + chunk, 2 ** n))
            signs = 1.0 - 2.0 * ((codes[:, None] >> bits) & 1)
            hits += _hits(signs, diffs, observed)
        return hits / float(2 ** n)
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, n_permutations, chunk):
        size = min(chunk, n_permutations - start)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(size, n))
        hits += _hits(signs, diffs, observed)
    return (hits + 1) / float(n_permutations + 1)


#: An interval over runs is given from this many paired runs, an exact sign-flip p from this many (2^6 = 64
#: assignments: the smallest two-sided p is 1/32).
MIN_PAIRS_FOR_INTERVAL, MIN_PAIRS_FOR_P = 2, 6
#: Enumerate the sign flips of runs exactly up to this many pairs (2^20 assignments).
EXACT_MAX_RUNS = 20


@dataclass(frozen=True)
class OverRuns:
    """Paired differences of two methods over runs (one per run pair: same set, same seed) and what they say.

    Attributes:
        differences: the per-run differences (a - b), one per pair.
        mean: their mean.
        ci_low, ci_high: the t-interval of the mean at ``confidence`` over the pairs (NaN with fewer than
            :data:`MIN_PAIRS_FOR_INTERVAL`).
        p: the two-sided sign-flip p of the mean over the pairs (exact up to :data:`EXACT_MAX_RUNS` pairs; None
            with fewer than :data:`MIN_PAIRS_FOR_P`, where no assignment could reach p <= 0.05).
        confidence: of the interval.
    """

    differences: Tuple[float, ...]
    mean: float
    ci_low: float
    ci_high: float
    p: Optional[float]
    confidence: float

    @property
    def pairs(self) -> int:
        return len(self.differences)

    def interval_text(self, digits: int = 4) -> str:
        """``+0.0031 [-0.0012, +0.0074]`` (the interval left out where there is none)."""
        text = "%+.*f" % (digits, self.mean)
        if not np.isnan(self.ci_low):
            text += " [%+.*f, %+.*f]" % (digits, self.ci_low, digits, self.ci_high)
        return text


def t_interval(values: Sequence[float], confidence: float = 0.95) -> Tuple[float, float, float]:
    """(mean, low, high): the mean of per-run ``values`` and its t-interval at ``confidence`` over the runs (NaN
    bounds with fewer than :data:`MIN_PAIRS_FOR_INTERVAL` values)."""
    from scipy import stats

    values = np.asarray(values, dtype=np.float64)
    mean = float(values.mean())
    if values.size < MIN_PAIRS_FOR_INTERVAL:
        return mean, float("nan"), float("nan")
    half = float(stats.t.ppf(0.5 + confidence / 2.0, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size))
    return mean, mean - half, mean + half


def over_runs(a: Sequence[float], b: Sequence[float], confidence: float = 0.95, n_permutations: int = 10000,
              seed: int = 0) -> OverRuns:
    """The paired differences ``a - b`` of per-run values (the i-th of each from the same set and seed).

    Raises:
        ValueError: unequal lengths, no pair, or a value that is not finite.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError("paired runs must be 1-D of equal, non-zero length, got %s and %s" % (a.shape, b.shape))
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("per-run values must be finite")
    differences = a - b
    mean, low, high = t_interval(differences, confidence)
    p = None
    if differences.size >= MIN_PAIRS_FOR_P:
        p = randomization_test(a, b, n_permutations=n_permutations, seed=seed, exact_max_queries=EXACT_MAX_RUNS)
    return OverRuns(tuple(float(d) for d in differences), mean, low, high, p, confidence)
