"""Expected pseudo clicks of the frozen simulator, once per displayed list.

MULTR's ranker step needs, per displayed list, the simulator's pseudo clicks
on the observed order and on ``sample_num`` uniform re-rankings.  Once the
simulator is frozen these depend only on the displayed list (and on the
uniform re-ranking), never on the ranker, and Eq. dr_loss is linear in them.
So ``imputation=expected`` replaces the per-step samples by their
expectations, estimated once per list and looked up every step:

* ``observed[d] = E[c_hat_d | observed order]`` and
* ``randomized[d] = E_pi E[c_hat_d | pi]`` over uniform re-rankings ``pi`` of
  the list's displayed documents (document ``d`` in its observed slot).

The loss keeps its expectation exactly and loses its Monte-Carlo noise.

Estimator.  ``samples = M`` sessions on the observed order and M sessions on
M independent uniform re-rankings per list; each session contributes
``P(click at t | actions sampled before t)`` (the simulator's
:meth:`~ultra_multr.simulator.protocol.UserSimulator.click_probabilities`),
a value in [0, 1] whose mean is unbiased (exact for a simulator with exact
probabilities, up to the re-rankings' sampling).  Its variance is at most
1/4, so the standard error of every entry is at most ``0.5 / sqrt(M)``
(M = 256: 0.031); the probabilities average out the last click's coin, so
the real error is smaller.

Cache key.  A displayed list is identified by what a feed shows, not by a
feed's internals: a 64-bit fingerprint of the IEEE bits of every slot's
feature vector, the slot's position and whether it is padding (see
:func:`ultra_multr.fingerprints.list_fingerprints`), computed on the device in wrapping integer
arithmetic (no dependence on reduction order) and looked up with
``searchsorted``.  Two lists with equal fingerprints have the same
expectations unless the 64-bit hashes collide (about ``K^2 / 2^65``: 1e-11 for
K = 20,000 lists).

A list missing from the cache (a feed that shows other lists than the
training set's, e.g. an online feed re-ranking by the current model) is
computed on the fly and added: the quantity is the same, so results do not
depend on whether the one-off pass saw the list; the first miss is logged,
because when most lists miss, ``imputation=sampled`` is the cheaper mode.

Layout: keys [K] int64 sorted, observed and randomized [K, N] float32 on the
device: ``8 + 8 N`` bytes per list (88 at N = 10).
"""
from __future__ import annotations

import logging
import time
from typing import Any, Tuple

import numpy as np
import torch

from ultra_multr.fingerprints import list_fingerprints
from ultra_multr.randomization import random_permutations, to_document_order
from ultra_multr.simulator import UserSimulator

LOGGER = logging.getLogger(__name__)

IMPUTATION_MODES = ("sampled", "expected")
#: queries per batch of the one-off pass (x 2 M lists each).
QUERIES_PER_PASS_BATCH = 64
def expected_pseudo_clicks(
    simulator: UserSimulator,
    features: torch.Tensor,
    mask: torch.Tensor,
    samples: int,
    generator: torch.Generator,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Monte-Carlo expectations of the pseudo clicks (see the module docstring).

    Args:
        features: [B, N, F]; mask: [B, N] bool; samples: M >= 1.

    Returns:
        (observed [B, N], randomized [B, N]) in observed-list slots, 0 at padding.
    """
    batch, slots = mask.shape
    identity = torch.arange(slots, device=mask.device).expand(batch, samples, slots)
    permutations = random_permutations(mask, samples, generator)
    with torch.no_grad():
        probabilities = simulator.click_probabilities(
            features, mask, torch.cat([identity, permutations], dim=1), generator
        )
    observed = probabilities[:, :samples].mean(dim=1)
    randomized = to_document_order(probabilities[:, samples:], permutations).mean(dim=1)
    return observed, randomized


class PseudoClickCache:
    """Expected pseudo clicks per displayed list, keyed by :func:`ultra_multr.fingerprints.list_fingerprints`.

    Args:
        simulator: the frozen simulator.
        samples: M, Monte-Carlo sessions per list and order type.
        generator: randomness (on the simulator's device).
    """

    def __init__(self, simulator: UserSimulator, samples: int, generator: torch.Generator) -> None:
        if samples < 1:
            raise ValueError("imputation_samples must be >= 1, got %d" % samples)
        self.simulator = simulator
        self.samples = samples
        self.generator = generator
        device = simulator.device
        slots = simulator.list_size
        self.keys = torch.empty(0, dtype=torch.int64, device=device)
        self.observed = torch.empty(0, slots, device=device)
        self.randomized = torch.empty(0, slots, device=device)
        self.misses = 0

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def _find(self, keys: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Index into the cache [B] and whether it holds the key [B] bool."""
        index = torch.searchsorted(self.keys, keys).clamp_(max=max(len(self) - 1, 0))
        found = self.keys[index] == keys if len(self) else torch.zeros_like(keys, dtype=torch.bool)
        return index, found

    def add(self, features: torch.Tensor, mask: torch.Tensor) -> int:
        """Compute and store the lists not yet cached. Returns how many were new.

        Args:
            features: [B, N, F] on the device; mask: [B, N] bool.
        """
        keys = list_fingerprints(features, mask)
        unique, inverse = torch.unique(keys, return_inverse=True)
        first = torch.full_like(unique, keys.shape[0]).scatter_reduce_(
            0, inverse, torch.arange(keys.shape[0], device=keys.device), "amin"
        )
        _, found = self._find(unique)
        new = first[~found]
        if new.numel() == 0:
            return 0
        observed, randomized = expected_pseudo_clicks(
            self.simulator, features[new], mask[new], self.samples, self.generator
        )
        keys, order = torch.sort(torch.cat([self.keys, keys[new]]))
        self.keys = keys
        self.observed = torch.cat([self.observed, observed])[order]
        self.randomized = torch.cat([self.randomized, randomized])[order]
        return int(new.numel())

    def add_query_arrays(self, arrays: Any, batch_queries: int = QUERIES_PER_PASS_BATCH) -> None:
        """The one-off pass over the training lists.

        Args:
            arrays: a :class:`ultra_multr.feeds.arrays.QueryArrays` of the training
                set at the simulator's ``list_size`` N (``n_queries``, ``mask`` [Q, N] bool and
                ``list_features(queries)`` [q, N, F] float32).
        """
        device = self.keys.device
        started = time.perf_counter()
        for start in range(0, arrays.n_queries, batch_queries):
            queries = np.arange(start, min(start + batch_queries, arrays.n_queries))
            features = torch.from_numpy(arrays.list_features(queries)).to(device)
            self.add(features, torch.from_numpy(arrays.mask[queries]).to(device))
        LOGGER.info(
            "imputation=expected: expected pseudo clicks of %d distinct lists (%d samples each) in %.1f s",
            len(self), self.samples, time.perf_counter() - started,
        )

    def lookup(self, features: torch.Tensor, mask: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Expected pseudo clicks of each displayed list; lists not cached
        are computed and added first.

        Args:
            features: [B, N, F]; mask: [B, N] bool.

        Returns:
            (observed [B, N], randomized [B, N]) in observed-list slots.
        """
        keys = list_fingerprints(features, mask)
        index, found = self._find(keys)
        if not bool(found.all()):
            missing = ~found
            if self.misses == 0:
                LOGGER.warning(
                    "imputation=expected: the feed shows lists outside the cache of %d training lists; "
                    "computing them now (%d samples each). If most lists miss (an online feed), "
                    "imputation=sampled is cheaper.",
                    len(self),
                    self.samples,
                )
            self.misses += self.add(features[missing], mask[missing])
            index, found = self._find(keys)
        return self.observed[index], self.randomized[index]
