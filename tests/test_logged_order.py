"""logged_order_fit: a ranker fitted to the logged order reproduces a logger that saw only the features, and not
one that ordered by something the features lack."""
from __future__ import annotations

import torch

from ultra_multr.logged_order import logged_order_fit, pair_mask


def logged(key: torch.Tensor, features: torch.Tensor, mask: torch.Tensor):
    """features [Q, N, F] and mask [Q, N] put in the order of ``key`` [Q, N] (highest first; padding last)."""
    order = torch.where(mask, key, -1e9).argsort(dim=1, descending=True)
    return torch.gather(features, 1, order[..., None].expand_as(features)), torch.gather(mask, 1, order)


def lists(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(300, 8, 6, generator=generator)
    mask = torch.ones(300, 8, dtype=torch.bool)
    mask[::2, 5:] = False  # every other list shows 5 documents
    return features, mask, generator


def test_a_logger_of_the_features_is_reproduced_and_one_of_hidden_relevance_is_not():
    features, mask, generator = lists()
    weights = torch.randn(6, generator=generator)
    on_features = logged_order_fit(*logged(features @ weights, features, mask), torch.Generator().manual_seed(1))
    hidden = torch.randn(300, 8, generator=generator)
    on_hidden = logged_order_fit(*logged(hidden, features, mask), torch.Generator().manual_seed(1))
    assert on_features.agreement > 0.95
    assert 0.4 < on_hidden.agreement < 0.65
    mixed = logged_order_fit(*logged(features @ weights + 2 * hidden, features, mask), torch.Generator().manual_seed(1))
    assert on_hidden.agreement < mixed.agreement < on_features.agreement


def test_only_pairs_of_shown_documents_count_and_the_generator_decides_everything():
    features, mask, generator = lists()
    key = features @ torch.randn(6, generator=generator)
    ordered, shown = logged(key, features, mask)
    first = logged_order_fit(ordered, shown, torch.Generator().manual_seed(3), heldout_fraction=0.1)
    assert first.heldout_queries == 30
    # the held-out queries are the generator's first permutation's first 30; lists of 5 documents give 10 pairs,
    # lists of 8 give 28
    heldout = torch.randperm(300, generator=torch.Generator().manual_seed(3))[:30]
    assert first.heldout_pairs == int(pair_mask(shown)[heldout].sum())
    assert 30 * 10 < first.heldout_pairs < 30 * 28
    # garbage in padded slots changes nothing
    noisy = torch.where(shown[..., None], ordered, torch.full_like(ordered, 1e6))
    assert logged_order_fit(noisy, shown, torch.Generator().manual_seed(3), heldout_fraction=0.1) == first
    before = torch.random.get_rng_state()
    assert logged_order_fit(ordered, shown, torch.Generator().manual_seed(3), heldout_fraction=0.1) == first
    assert torch.equal(torch.random.get_rng_state(), before)
