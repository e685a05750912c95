"""imputation=expected: same expected DR loss as sampling, cache keyed by the displayed list."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import require_ultra

ultra = require_ultra()  # noqa: E402 below: the modules under test import ULTRA

from ultra_multr.batch import Batch  # noqa: E402
from ultra_multr.imputation import PseudoClickCache
from ultra_multr.fingerprints import list_fingerprints
from ultra_multr.simulator import ContextAwareUserSimulator, SimulatorConfig

N, F = 6, 5


def varied_simulator(seed: int = 0) -> ContextAwareUserSimulator:
    """A frozen simulator whose click probabilities vary with position and
    context (random weights of scale 0.7 rather than PyTorch's small init)."""
    torch.manual_seed(seed)
    simulator = ContextAwareUserSimulator(SimulatorConfig(feature_size=F, list_size=N)).eval()
    with torch.no_grad():
        for parameter in simulator.parameters():
            parameter.normal_(0.0, 0.7)
    return simulator.requires_grad_(False)


def random_lists(n_lists: int, seed: int, lengths=(3, N)):
    """features [B, N, F] (zeros at padding) and mask [B, N], tail padding."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lengths[0], lengths[1] + 1, (n_lists,), generator=generator)
    mask = torch.arange(N).unsqueeze(0) < lengths.unsqueeze(1)
    features = torch.randn(n_lists, N, F, generator=generator) * mask.unsqueeze(-1)
    return features, mask


def test_fingerprints_identify_the_displayed_list():
    features, mask = random_lists(64, seed=1, lengths=(N, N))
    keys = list_fingerprints(features, mask)
    assert keys.unique().numel() == 64
    # A list's fingerprint does not depend on the batch it comes in.
    assert torch.equal(list_fingerprints(features[5:6], mask[5:6]), keys[5:6])
    assert torch.equal(list_fingerprints(features.flip(0), mask.flip(0)), keys.flip(0))
    # Same length, other list: one feature of one document, two documents swapped,
    # the last document replaced by padding, padding replaced by an all-zero document.
    changed = features[0].clone()
    changed[3, 2] = torch.nextafter(changed[3, 2], torch.tensor(10.0))
    swapped = features[0][[1, 0, 2, 3, 4, 5]]
    padded = features[0].clone()
    padded[-1] = 0.0
    short_mask = mask[0].clone()
    short_mask[-1] = False
    variants = torch.stack([features[0], changed, swapped, padded, padded])
    variant_masks = torch.stack([mask[0], mask[0], mask[0], short_mask, mask[0]])
    assert list_fingerprints(variants, variant_masks).unique().numel() == 5


def test_cache_returns_each_lists_entry_when_a_query_shows_different_lists():
    simulator = varied_simulator()
    cache = PseudoClickCache(simulator, samples=2048, generator=torch.Generator().manual_seed(0))
    features, mask = random_lists(1, seed=2, lengths=(N, N))
    reverse = list(range(N))[::-1]
    lists = torch.cat([features, features[:, reverse], features[:, [1, 0, 2, 3, 4, 5]]])  # one query, three orders
    masks = mask.expand(3, -1)
    assert cache.add(lists, masks) == 3
    observed, randomized = cache.lookup(lists[[1, 0, 2, 1]], masks[[1, 0, 2, 1]])
    assert cache.misses == 0 and len(cache) == 3
    assert torch.equal(observed[0], observed[3]) and torch.equal(randomized[0], randomized[3])
    alone_observed, alone_randomized = cache.lookup(lists[2:3], masks[2:3])
    assert torch.equal(alone_observed[0], observed[2]) and torch.equal(alone_randomized[0], randomized[2])
    # The right entry: uniform re-rankings depend on the set of documents only, so the
    # reversed list's randomized clicks are the original's, reversed (Monte-Carlo error
    # <= 0.5 / sqrt(2048) = 0.011 each); its observed-order clicks are not.
    assert torch.allclose(randomized[0], randomized[1][reverse], atol=0.05)
    assert (observed[0] - observed[1][reverse]).abs().max() > 0.1


def test_a_list_missing_from_the_cache_is_computed_and_added(caplog):
    simulator = varied_simulator()
    features, mask = random_lists(8, seed=3)
    cache = PseudoClickCache(simulator, samples=64, generator=torch.Generator().manual_seed(0))
    cache.add(features[:6], mask[:6])
    with caplog.at_level(logging.WARNING, logger="ultra_multr.imputation"):
        observed, _ = cache.lookup(features[[0, 6, 7, 6]], mask[[0, 6, 7, 6]])
    assert cache.misses == 2 and len(cache) == 8
    assert "outside the cache of 6 training lists" in caplog.text
    assert torch.equal(observed[1], observed[3]) and (observed * ~mask[[0, 6, 7, 6]]).abs().max() == 0
    cache.lookup(features, mask)
    assert cache.misses == 2


from ultra_multr.algorithms.multr import MULTR  # noqa: E402
from ultra_multr import losses  # noqa: E402
from ultra_multr.feeds.simulation import ClickSimulationFeed  # noqa: E402
from ultra_multr.losses.listwise import listwise_document_losses  # noqa: E402


def multr(data_set, imputation: str, sample_num: int, samples: int = 4096, device: str = "cpu") -> MULTR:
    settings = {
        "train_input_feed": "ultra_multr.feeds.ClickSimulationFeed",
        "train_input_hparams": "oracle_mode=true",
        "ranking_model": "ultra.ranking_model.DNN",
        "ranking_model_hparams": "hidden_layer_sizes=[8]",
        "learning_algorithm": "ultra_multr.MULTR",
        # The unguarded paper weighting, averaged over queries: the loss is
        # linear in the pseudo clicks only without the clip guard (clipping
        # the mean of weights is not the mean of clipped weights) and without
        # the batch's weight as divisor (a ratio's mean is not the ratio of means).
        "learning_algorithm_hparams": "seed=0,simulator_steps=0,simulator_input_mlp=[],dr_weight_guard=none,"
        "dr_normalization=none,"
        "rerank_weight=paper,sample_num=%d,imputation=%s,imputation_samples=%d,device=%s"
        % (sample_num, imputation, samples, device),
        "max_candidate_num": N,
        "selection_bias_cutoff": N,
        "metrics": ["ndcg"],
        "metrics_topn": [N],
    }
    return MULTR(data_set, settings)


def raw_data(features: torch.Tensor, mask: torch.Tensor) -> SimpleNamespace:
    """A ULTRA Raw_data stand-in showing these lists (negative ids at padding)."""
    table = features[mask].numpy()
    ids = np.full(mask.shape, -1)
    ids[mask.numpy()] = np.arange(len(table))
    return SimpleNamespace(
        feature_size=F,
        features=table.tolist(),
        initial_list=ids.tolist(),
        labels=mask.float().numpy().tolist(),
    )


def test_expected_loss_is_the_mean_of_the_sampled_loss(device):
    features, mask = random_lists(6, seed=4)
    data_set = raw_data(features, mask)
    sampled, expected = multr(data_set, "sampled", 3, device=device), multr(data_set, "expected", 3, device=device)
    sampled.simulator_phase.network.load_state_dict(varied_simulator().state_dict())
    expected.simulator_phase.network.load_state_dict(sampled.simulator_phase.network.state_dict())
    sampled.prepare()
    expected.prepare()  # the one-off pass over the data set's 6 lists
    generator = torch.Generator().manual_seed(5)
    clicks = (torch.rand(mask.shape, generator=generator) < 0.4).float() * mask
    weights = 0.5 + 2.0 * torch.rand(mask.shape, generator=generator)  # IPW weights, not 1
    scores = torch.randn(mask.shape, generator=generator)
    features, clicks, mask, weights, scores = (t.to(device) for t in (features, clicks, mask, weights, scores))
    batch = Batch(features, clicks, mask)

    expected_loss = float(expected.ranking_loss(batch, scores, weights)[0])
    draws = []
    for seed in range(400):
        sampled.generator.manual_seed(seed)
        draws.append(float(sampled.ranking_loss(batch, scores, weights)[0]))
    draws = torch.tensor(draws)
    mask, weights, scores, clicks = mask.cpu(), weights.cpu(), scores.cpu(), clicks.cpu()
    # Standard error of the mean of the draws, and of the expectations: each pseudo click's
    # is at most 0.5 / sqrt(4096); the loss is linear in them,
    # mean_q sum_d Delta_qd [(1 - w_qd) c^o_qd + S r_qd + w_qd c_qd] / (S + 1), clicks of one
    # list may be correlated (Minkowski: at most the sum over its documents), lists are independent.
    deltas = listwise_document_losses(scores, mask) * mask
    per_list = (deltas * ((1 - weights).abs() + 3) / 4).sum(-1) / len(mask) * 0.5 / 64
    standard_error = (float(draws.var()) / len(draws) + float((per_list**2).sum())) ** 0.5
    tolerance = 4 * standard_error
    assert abs(expected_loss - float(draws.mean())) < tolerance
    # The check can fail: the loss without the re-ranked term is outside it.
    observed, randomized = (t.cpu() for t in expected.doubly_robust.pseudo_clicks(batch))
    assert randomized.shape == (6, 3, N)
    without = float(losses.DoublyRobustLoss(guard="clip", reduction="none")(
        scores, mask, clicks, observed, randomized[:, :0], weights)[0])
    assert abs(without - float(draws.mean())) > tolerance
    assert expected.doubly_robust.pseudo_click_cache.misses == 0


def test_our_feed_shows_only_cached_lists():
    features, mask = random_lists(20, seed=6)
    data_set = raw_data(features, mask)
    model = multr(data_set, "expected", 2, samples=16)
    model.prepare()
    feed = ClickSimulationFeed(model, 16, "oracle_mode=true")
    for _ in range(3):
        input_feed, _ = feed.get_batch(data_set)
        model.train(input_feed)
    assert model.doubly_robust.pseudo_click_cache.misses == 0 and len(model.doubly_robust.pseudo_click_cache) == 20
