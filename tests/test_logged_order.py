"""logged_order_fit: a ranker fitted to the logged order reproduces a logger that saw only the features as well as
it reproduces the null orders (orders of the features by construction), and one that ordered by something the
features lack far worse; ties are ties."""
from __future__ import annotations

import pytest
import torch

from ultra_multr.logged_order import (
    NULL_LINEAR,
    NULL_SHALLOW,
    agreements,
    distinguishable_pairs,
    logged_order_fit,
    null_scores,
    pair_mask,
    rank_svm,
)


def logged(key: torch.Tensor, features: torch.Tensor, mask: torch.Tensor):
    """features [Q, N, F] and mask [Q, N] put in the order of ``key`` [Q, N] (highest first; padding last)."""
    order = torch.where(mask, key, -1e9).argsort(dim=1, descending=True)
    return torch.gather(features, 1, order[..., None].expand_as(features)), torch.gather(mask, 1, order)


def lists(seed: int = 0, n_queries: int = 300):
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(n_queries, 8, 6, generator=generator)
    mask = torch.ones(n_queries, 8, dtype=torch.bool)
    mask[::2, 5:] = False  # every other list shows 5 documents
    return features, mask, generator


def test_a_logger_of_the_features_is_as_reproducible_as_the_null_and_one_of_hidden_relevance_is_not():
    features, mask, generator = lists(n_queries=150)
    weights = torch.randn(6, generator=generator)
    on_features = logged_order_fit(*logged(features @ weights, features, mask), torch.Generator().manual_seed(1),
                                   steps=150)
    hidden = torch.randn(150, 8, generator=generator)
    on_hidden = logged_order_fit(*logged(hidden, features, mask), torch.Generator().manual_seed(1), steps=150)
    assert len(on_features.null_agreements) == NULL_LINEAR + NULL_SHALLOW
    assert on_features.agreement > 0.95 and abs(on_features.null_agreement - on_features.agreement) < 0.03
    # the null orders come from the same features whatever the logger did: as reproducible as before
    assert 0.4 < on_hidden.agreement < 0.65 and on_hidden.null_agreement > 0.9


def test_pairs_of_documents_with_identical_features_are_neither_hits_nor_misses():
    features = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [5.0, 5.0]]])
    mask = torch.tensor([[True, True, True, False]])
    # (0, 2) have the same features, slot 3 is not shown
    assert distinguishable_pairs(features, mask).nonzero().tolist() == [[0, 0, 1], [0, 1, 2]]
    # every list shows one document twice (slots 0 and 1): the fit's held-out pairs leave that pair out
    base, mask, _ = lists()
    twice = base.clone()
    twice[:, 1] = twice[:, 0]
    fit = logged_order_fit(twice, mask, torch.Generator().manual_seed(3), heldout_fraction=0.1, steps=20)
    heldout = torch.randperm(300, generator=torch.Generator().manual_seed(3))[:30]
    assert fit.heldout_pairs == int(pair_mask(mask)[heldout].sum()) - 30


def test_a_pair_the_ranker_scores_equally_counts_half_and_a_row_without_pairs_is_nan():
    scores = torch.tensor([[[1.0, 1.0, 0.0]], [[0.0, 1.0, 2.0]]])  # [R=2, B=1, N=3]
    better = pair_mask(torch.ones(1, 3, dtype=torch.bool))[None].repeat(2, 1, 1, 1)  # slot i above slot j > i
    shares = agreements(scores, better)
    assert shares[0] == pytest.approx(2.5 / 3) and shares[1] == 0.0
    assert agreements(scores[:1], torch.zeros_like(better[:1])).isnan().all()


def test_the_rank_svm_orders_pairs_a_feature_separates():
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(20, 6, 3, generator=generator, dtype=torch.float64).float()
    ordered, mask = logged(features[:, :, 0], features, torch.ones(20, 6, dtype=torch.bool))
    weights = rank_svm(ordered, pair_mask(mask), c=1e5)
    scores = (ordered.double() @ weights).float()
    assert agreements(scores[None], pair_mask(mask)[None]).item() == 1.0
    assert weights[0] > 10 * weights[1:].abs().max()


def test_null_orders_are_functions_of_the_features_drawn_from_the_queries_given():
    features, mask, generator = lists()
    features[:, 1] = features[:, 0]  # two documents with the same features in every list
    pairs = distinguishable_pairs(features, mask)
    x = features / features.std()
    nulls = null_scores(features, x, pairs, torch.arange(100), torch.Generator().manual_seed(0))
    assert nulls.shape == (NULL_LINEAR + NULL_SHALLOW, 300, 8)
    assert torch.equal(nulls[:, :, 0], nulls[:, :, 1])
    # the logged order of queries outside the 100 given is never read
    reversed_rest = pairs.clone()
    reversed_rest[100:] = pairs[100:].transpose(1, 2)
    again = null_scores(features, x, reversed_rest, torch.arange(100), torch.Generator().manual_seed(0))
    assert torch.equal(nulls, again)


def test_only_pairs_of_shown_documents_count_and_the_generator_decides_everything():
    features, mask, generator = lists()
    key = features @ torch.randn(6, generator=generator)
    ordered, shown = logged(key, features, mask)
    first = logged_order_fit(ordered, shown, torch.Generator().manual_seed(3), heldout_fraction=0.1, steps=20)
    assert first.heldout_queries == 30
    # the held-out queries are the generator's first permutation's first 30; lists of 5 documents give 10 pairs,
    # lists of 8 give 28
    heldout = torch.randperm(300, generator=torch.Generator().manual_seed(3))[:30]
    assert first.heldout_pairs == int(pair_mask(shown)[heldout].sum())
    assert 30 * 10 < first.heldout_pairs < 30 * 28
    # garbage in padded slots changes nothing, the generator decides every draw and the global one is left alone
    noisy = torch.where(shown[..., None], ordered, torch.full_like(ordered, 1e6))
    before = torch.random.get_rng_state()
    assert logged_order_fit(noisy, shown, torch.Generator().manual_seed(3), heldout_fraction=0.1, steps=20) == first
    assert torch.equal(torch.random.get_rng_state(), before)
