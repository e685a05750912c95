"""Sampling replayed as a CUDA graph gives the clicks eager sampling gives."""
from __future__ import annotations

import pytest
import torch

from ultra_multr.randomization import random_permutations
from ultra_multr.simulator import (
    ContextAwareUserSimulator,
    GraphedSampler,
    SimulatorConfig,
    sampling_uniforms,
)

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")


def simulator(device, seed=0, features=5, slots=6):
    torch.manual_seed(seed)
    sim = ContextAwareUserSimulator(SimulatorConfig(feature_size=features, list_size=slots, input_mlp=(8,)))
    sim = sim.to(device).eval()
    for parameter in sim.parameters():
        parameter.requires_grad_(False)
    return sim


def lists(device, batch=9, slots=6, features=5, samples=3, seed=0):
    """features [B, N, F], mask [B, N] with padded tails, orders [B, 1 + S, N] (observed list first)."""
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(batch, slots, features, generator=generator)
    lengths = torch.randint(2, slots + 1, (batch,), generator=generator)
    lengths[0] = slots
    mask = torch.arange(slots) < lengths.unsqueeze(1)
    permutations = random_permutations(mask, samples, generator)
    orders = torch.cat([torch.arange(slots).expand(batch, 1, slots), permutations], dim=1)
    return features.to(device), mask.to(device), orders.to(device)


def generator(device, seed):
    return torch.Generator(device=device).manual_seed(seed)


@pytest.mark.parametrize("samples", [0, 3])
def test_draws_made_up_front_and_the_static_layout_give_the_same_sessions(device, samples):
    sim = simulator(device)
    features, mask, orders = lists(device, samples=samples)
    dtype = sim.click_head.weight.dtype
    with torch.no_grad():
        eager = sim.sample_clicks(features, mask, orders, generator(device, 1), lists_per_chunk=4)
        uniforms = sampling_uniforms(orders.shape, generator(device, 1), dtype, features.device, lists_per_chunk=4)
        assert len(uniforms) > 1  # several chunks
        dynamic = sim.sample_with_uniforms(features, mask, orders, uniforms)
        static = sim.sample_with_uniforms(features, mask, orders, uniforms, static=True)
    assert torch.equal(dynamic[1], eager)
    assert torch.equal(static[1], eager)
    shown = dynamic[2]
    torch.testing.assert_close(static[0][shown], dynamic[0][shown], rtol=1e-6, atol=1e-6)
    assert 0 < eager.sum() < shown.sum()  # neither all clicks nor none


@needs_cuda
def test_graph_replays_give_the_eager_clicks_for_new_inputs_and_shapes():
    sim = simulator("cuda")
    sampler = GraphedSampler(sim, lists_per_chunk=4)
    for seed, batch in [(1, 9), (2, 9), (3, 4), (4, 9)]:  # the second and fourth replay the first graph
        features, mask, orders = lists("cuda", batch=batch, seed=seed)
        eager_generator, graph_generator = generator("cuda", seed), generator("cuda", seed)
        with torch.no_grad():
            eager = sim.sample_clicks(features, mask, orders, eager_generator, lists_per_chunk=4)
        replayed = sampler.sample_clicks(features, mask, orders, graph_generator)
        assert torch.equal(replayed, eager), seed
        # the same draws were taken from the caller's generator
        assert torch.equal(torch.rand(3, generator=eager_generator, device="cuda"),
                           torch.rand(3, generator=graph_generator, device="cuda"))
    assert sampler.captured_shapes == 2


def test_graphs_are_refused_off_cuda():
    with pytest.raises(ValueError, match="CUDA device"):
        GraphedSampler(simulator("cpu"))


@needs_cuda
def test_graphed_training_updates_are_the_eager_updates():
    from ultra_multr.simulator import GraphedSimulatorUpdate, simulator_update

    eager, graphed = simulator("cuda"), simulator("cuda")
    for sim in (eager, graphed):
        for parameter in sim.parameters():
            parameter.requires_grad_(True)
    eager_optimizer = torch.optim.Adam(eager.parameters(), lr=0.01, capturable=True)
    update = GraphedSimulatorUpdate(
        graphed, torch.optim.Adam(graphed.parameters(), lr=0.01, capturable=True), l2_weight=1e-3, max_gradient_norm=1.0
    )
    for seed, batch in [(1, 9), (2, 9), (3, 4), (4, 9)]:  # two shapes: two graphs
        features, mask, _ = lists("cuda", batch=batch, seed=seed)
        clicks = (torch.rand(mask.shape, generator=torch.Generator().manual_seed(seed)) < 0.3).float().cuda() * mask
        expected = simulator_update(eager, eager_optimizer, features, mask, clicks, 1e-3, max_gradient_norm=1.0)
        assert update(features, mask, clicks) == pytest.approx(expected, rel=1e-5)
        for a, b in zip(eager.parameters(), graphed.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    with torch.no_grad():
        moved = sum(float((p - q).abs().sum()) for p, q in zip(graphed.parameters(), simulator("cuda").parameters()))
    assert moved > 0  # the updates changed the simulator


def test_graphed_updates_are_refused_off_cuda():
    from ultra_multr.simulator import GraphedSimulatorUpdate

    sim = simulator("cpu")
    with pytest.raises(ValueError, match="CUDA device"):
        GraphedSimulatorUpdate(sim, torch.optim.Adam(sim.parameters()), l2_weight=0.0)
