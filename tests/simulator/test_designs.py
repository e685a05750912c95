"""The simulator's designs and options (issue 37): the factorised click model against its formula, the authors'
code's options (two actions, dropout, teacher forcing per batch), dropout on the position input, and held-out
queries for model selection."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ultra_multr.simulator import FactorisedUserSimulator, SimulatorConfig, build_simulator, simulator_update
from ultra_multr.simulator.model import ContextAwareUserSimulator

N, F = 4, 3


def lists(batch=2, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, N, F, generator=generator), torch.ones(batch, N, dtype=torch.bool)


def factorised() -> FactorisedUserSimulator:
    simulator = FactorisedUserSimulator(SimulatorConfig(feature_size=F, list_size=N, design="factorised"))
    with torch.no_grad():
        simulator.relevance[-1].weight.copy_(torch.tensor([[1.0, -0.5, 0.25]]))
        simulator.relevance[-1].bias.fill_(0.1)
        simulator.examination.copy_(torch.randn(N, N + 1, generator=torch.Generator().manual_seed(7)))
    return simulator


def test_the_factorised_click_probability_is_relevance_times_examination_given_the_last_click():
    simulator = factorised()
    features, mask = lists()
    clicks = torch.tensor([[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 1.0, 1.0]])
    got = torch.sigmoid(simulator.click_logits(features, mask, clicks))
    relevance = features @ torch.tensor([1.0, -0.5, 0.25]) + 0.1
    for b in range(2):
        last = None
        for t in range(N):
            since = 0 if last is None else t - last
            expected = torch.sigmoid(relevance[b, t]) * torch.sigmoid(simulator.examination[t, since])
            assert float(got[b, t]) == pytest.approx(float(expected), rel=1e-5)
            if clicks[b, t] > 0:
                last = t
    assert build_simulator(simulator.config).__class__ is FactorisedUserSimulator
    assert build_simulator(SimulatorConfig(feature_size=F, list_size=N)).__class__ is ContextAwareUserSimulator


def test_re_ranking_moves_a_factorised_documents_click_only_through_its_position_and_the_clicks_above():
    """The document shown first has the same click probability whatever the order of the others below it (the
    context-aware network reads the whole list: its first click probability moves with the others)."""
    features, mask = lists(batch=1)
    orders = torch.tensor([[[0, 1, 2, 3], [0, 3, 2, 1], [0, 2, 1, 3]]])
    first = factorised().click_probabilities(features, mask, orders, torch.Generator().manual_seed(1))[0, :, 0]
    assert torch.allclose(first, first[0].expand(3))
    network = ContextAwareUserSimulator(SimulatorConfig(feature_size=F, list_size=N, hidden_size=8)).eval()
    first = network.click_probabilities(features, mask, orders, torch.Generator().manual_seed(1))[0, :, 0]
    assert not torch.allclose(first, first[0].expand(3))


def test_the_factorised_designs_sampled_clicks_have_its_probabilities():
    simulator = factorised()
    features, mask = lists(batch=1)
    orders = torch.arange(N).expand(1, 20000, N)
    clicks = simulator.sample_clicks(features, mask, orders, torch.Generator().manual_seed(2))
    first = torch.sigmoid(features[0, 0] @ torch.tensor([1.0, -0.5, 0.25]) + 0.1) * torch.sigmoid(
        simulator.examination[0, 0])
    assert float(clicks[0, :, 0].mean()) == pytest.approx(float(first), abs=0.015)


def network(**options) -> ContextAwareUserSimulator:
    torch.manual_seed(0)
    return ContextAwareUserSimulator(SimulatorConfig(feature_size=F, list_size=N, hidden_size=8, **options))


def test_two_actions_make_the_first_previous_action_a_skip():
    features, mask = lists()
    three, two = network(), network(actions=2)
    two.load_state_dict(three.state_dict())
    with torch.no_grad():  # make "unknown" and "skip" the same row: the two designs then agree
        same = network()
        same.load_state_dict(three.state_dict())
        same.action_embedding.weight[0].copy_(same.action_embedding.weight[1])
    clicks = torch.zeros(2, N)
    assert not torch.allclose(three.click_logits(features, mask, clicks), two.click_logits(features, mask, clicks))
    assert torch.allclose(same.click_logits(features, mask, clicks), two.click_logits(features, mask, clicks))


def test_output_dropout_and_position_dropout_act_in_training_only():
    features, mask = lists()
    clicks = torch.zeros(2, N)
    for options in ({"dropout": 0.4}, {"position_dropout": 1.0}):
        plain, dropped = network(), network(**options)
        dropped.load_state_dict(plain.state_dict())
        plain.eval(), dropped.eval()
        assert torch.equal(plain.click_logits(features, mask, clicks), dropped.click_logits(features, mask, clicks))
        dropped.train()
        generator = torch.Generator().manual_seed(0)
        assert not torch.allclose(plain.click_logits(features, mask, clicks),
                                  dropped.click_logits(features, mask, clicks, generator=generator))
    no_position = network(position_size=0)
    without = network(position_dropout=1.0)
    with torch.no_grad():  # every list drops its position input: as a network without position embedding
        without.position_embedding.weight.zero_()
    without.train()
    assert torch.allclose(without.click_logits(features, mask, clicks, generator=torch.Generator()),
                          without.eval().click_logits(features, mask, clicks))
    assert no_position.decoder.cell.weight_ih.shape[1] == 3 * 8


def test_teacher_forcing_per_batch_feeds_the_whole_batch_observed_or_sampled(monkeypatch):
    """teacher_forcing_unit=batch: one draw per batch decides, and the network then sees ratio 1 or 0."""
    from ultra_multr.simulator import training

    seen = []
    simulator = network()
    real = simulator.click_logits
    monkeypatch.setattr(simulator, "click_logits", lambda *args: seen.append(args[3]) or real(*args))
    optimizer = torch.optim.Adam(simulator.parameters())
    features, mask = lists()
    generator = torch.Generator().manual_seed(3)
    for _ in range(20):
        training.simulator_update(simulator, optimizer, features, mask, torch.zeros(2, N), 0.0, 0.0, 0.5, generator,
                                  teacher_forcing_unit="batch")
    assert set(seen) == {0.0, 1.0} and 4 <= seen.count(1.0) <= 16
    simulator_update(simulator, optimizer, features, mask, torch.zeros(2, N), 0.0, 0.0, 0.5, generator)
    assert seen[-1] == 0.5  # per click: the network decides each click


def test_held_out_queries_are_a_seeded_share_of_the_training_queries():
    from ultra_multr.components.simulator_phase import SimulatorSettings

    settings = SimulatorSettings(simulator_heldout_unit="queries", simulator_heldout_fraction=0.25)
    held = settings.heldout_queries(40, seed=1)
    assert held.sum() == 10 and np.array_equal(held, settings.heldout_queries(40, seed=1))
    assert not np.array_equal(held, settings.heldout_queries(40, seed=2))
    assert settings.heldout_queries(2, seed=0).sum() == 1
    with pytest.raises(ValueError, match="at least 2 training queries"):
        settings.heldout_queries(1, seed=0)
    assert math.isclose(SimulatorSettings().simulator_heldout_fraction, 0.1)
