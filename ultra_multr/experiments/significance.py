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
"""
from __future__ import annotations

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
