"""Result randomisation: padding stays out of displayed slots; uniform order."""
from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
import torch

from ultra_multr.randomization import random_permutations, to_document_order


def test_padding_never_enters_a_displayed_slot():
    generator = torch.Generator().manual_seed(0)
    mask = torch.zeros(50, 10, dtype=torch.bool)
    lengths = torch.randint(1, 11, (50,), generator=generator)
    for b, n in enumerate(lengths):
        mask[b, :n] = True
    permutations = random_permutations(mask, 16, generator)
    for b, n in enumerate(lengths.tolist()):
        for s in range(16):
            shown = permutations[b, s, :n].tolist()
            assert sorted(shown) == list(range(n))  # a permutation of the valid slots
            assert permutations[b, s, n:].tolist() == list(range(n, 10))  # padding stays put


def test_permutations_are_uniform_and_independent_per_query():
    generator = torch.Generator().manual_seed(1)
    mask = torch.tensor([[True, True, True, False]] * 2)
    draws = 6000
    permutations = random_permutations(mask, draws, generator)
    counts = Counter(tuple(p[:3].tolist()) for p in permutations[0])
    assert set(counts) == set(itertools.permutations(range(3)))
    expected = draws / 6
    tolerance = 4 * math.sqrt(expected * (1 - 1 / 6))  # 4 binomial standard deviations
    assert all(abs(c - expected) < tolerance for c in counts.values())
    # each query gets its own permutations (the authors' code shares one per batch)
    assert not torch.equal(permutations[0], permutations[1])


def test_zero_samples_and_negative_samples():
    mask = torch.ones(3, 4, dtype=torch.bool)
    assert random_permutations(mask, 0).shape == (3, 0, 4)
    with pytest.raises(ValueError, match="num_samples"):
        random_permutations(mask, -1)


def test_to_document_order_inverts_the_permutation():
    generator = torch.Generator().manual_seed(2)
    mask = torch.ones(4, 5, dtype=torch.bool)
    permutations = random_permutations(mask, 3, generator)
    by_position = torch.rand(4, 3, 5, generator=generator)
    by_document = to_document_order(by_position, permutations)
    for b, s, t in itertools.product(range(4), range(3), range(5)):
        assert by_document[b, s, permutations[b, s, t]] == by_position[b, s, t]
