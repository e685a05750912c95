"""Every simulator is a UserSimulator: the trained network, its CUDA-graph replay, the exact true-click-model
control and the estimator study's known click model; what each says of its probabilities holds."""
from __future__ import annotations

import json

import numpy as np
import torch

from ultra_multr.click_models import PositionBasedModel
from ultra_multr.experiments.estimator_targets import KnownClickSimulator
from ultra_multr.randomization import random_permutations
from ultra_multr.simulator import ContextAwareUserSimulator, GraphedSampler, SimulatorConfig, UserSimulator
from ultra_multr.simulator.controls import TrueClickModelSimulator

B, N, F = 3, 5, 4


def lists(device):
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(B, N, F, generator=generator)
    features[..., 0] = torch.arange(B * N, dtype=torch.float32).reshape(B, N)  # every document told apart
    mask = torch.ones(B, N, dtype=torch.bool)
    mask[1, 3:] = False
    return features.to(device), mask.to(device)


def simulators(device):
    features, mask = lists(device)
    network = ContextAwareUserSimulator(SimulatorConfig(feature_size=F, list_size=N, hidden_size=8)).to(device).eval()
    labels = torch.arange(B * N).remainder(3).float().reshape(B, N)
    rows = features[mask].cpu().numpy()
    pbm = PositionBasedModel([0.1, 0.5, 0.9], [1.0 / (k + 1) for k in range(N)])
    found = {
        "context_aware": network,
        "true_click_model": TrueClickModelSimulator(pbm, rows, labels[mask.cpu()].numpy(), N).to(device),
        "known_position_based": KnownClickSimulator(features[..., 0][mask].cpu().numpy(), np.linspace(0.1, 0.9, int(mask.sum())),
                                                    np.linspace(1.0, 0.2, N), 1.0).to(device),
    }
    if device == "cuda":
        found["graphed"] = GraphedSampler(network)
    return found


def test_every_simulator_is_a_user_simulator_and_keeps_its_word(device):
    features, mask = lists(device)
    orders = torch.cat([torch.arange(N, device=features.device).expand(B, 1, N),
                        random_permutations(mask, 2, torch.Generator(device=features.device).manual_seed(1))], dim=1)
    shown = torch.gather(mask.unsqueeze(1).expand_as(orders), 2, orders)
    for name, simulator in simulators(device).items():
        assert isinstance(simulator, UserSimulator), name
        assert simulator.list_size == N and simulator.device.type == torch.device(device).type, name
        described = json.loads(json.dumps(simulator.describe()))
        assert described["kind"] == name if name != "graphed" else described["kind"] == "context_aware"
        p = simulator.click_probabilities(features, mask, orders, torch.Generator(device=features.device).manual_seed(2))
        clicks = simulator.sample_clicks(features, mask, orders, torch.Generator(device=features.device).manual_seed(3))
        assert p.shape == clicks.shape == orders.shape, name
        assert ((p >= 0) & (p <= 1)).all() and (p[~shown] == 0).all() and (clicks[~shown] == 0).all(), name
        assert set(clicks.unique().tolist()) <= {0.0, 1.0}, name
        again = simulator.click_probabilities(features, mask, orders, torch.Generator(device=features.device).manual_seed(9))
        # exact probabilities do not depend on the draws; one-session estimates do
        assert torch.equal(p, again) == simulator.exact_probabilities, name


def test_a_module_without_the_interface_is_not_a_user_simulator():
    class Scores(torch.nn.Module):
        list_size = N

        def sample_clicks(self, features, mask, orders, generator=None):
            return torch.zeros(orders.shape)

    assert not isinstance(Scores(), UserSimulator)
