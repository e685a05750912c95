"""SimulatorClickModel: a trained MULTR simulator checkpoint as a ULTRA click model."""
import itertools
import json
import types

import numpy as np
import pytest
from conftest import require_ultra
import torch

ultra = require_ultra()

from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset  # noqa: E402
from ultra_multr.feeds.simulation import ClickSimulationFeed  # noqa: E402
from ultra_multr.simulator import ContextAwareUserSimulator, SimulatorConfig, save_simulator  # noqa: E402
from ultra_multr.click_models.ultra import (  # noqa: E402
    SimulatorClickModel,
    available_click_models,
    load_click_model,
    load_click_model_file,
)

F, N = 5, 10
NAME = "ultra_multr.click_models.ultra.SimulatorClickModel"
Z = 4.5  # Monte-Carlo tolerance in standard deviations (every test is seeded)


@pytest.fixture(scope="module")
def simulator():
    torch.manual_seed(0)
    sim = ContextAwareUserSimulator(SimulatorConfig(feature_size=F, list_size=N, hidden_size=8, position_size=4))
    with torch.no_grad():  # clicks neither rare nor certain, varying with the features
        sim.click_head.bias.fill_(-0.5)
        sim.click_head.weight.mul_(8.0)
    return sim.eval()


@pytest.fixture
def model_json(tmp_path, simulator):
    checkpoint = tmp_path / "sim.ckpt"
    save_simulator(str(checkpoint), simulator, {"note": "test"})
    path = tmp_path / "simulator_click_model.json"
    path.write_text(json.dumps({"model_name": NAME, "checkpoint": str(checkpoint)}))
    return str(path)


def random_lists(batch, n, seed):
    generator = torch.Generator().manual_seed(seed)
    features = torch.rand(batch, n, F, generator=generator) * 2 - 1
    mask = torch.ones(batch, n, dtype=torch.bool)
    mask[0, n - 2 :] = False
    mask[1, 1] = False
    return features * mask[..., None], mask


def exact_marginals(sim, features, mask):
    """features [1, N, F], mask [1, N] -> [N] P(click at t), summing the simulator's chain of
    conditionals over every session that clicks shown slots only."""
    shown = mask[0].nonzero().flatten().tolist()
    patterns = torch.zeros(2 ** len(shown), mask.shape[1])
    for i, bits in enumerate(itertools.product([0.0, 1.0], repeat=len(shown))):
        patterns[i, shown] = torch.tensor(bits)
    count = patterns.shape[0]
    with torch.no_grad():
        logits = sim.click_logits(features.expand(count, -1, -1), mask.expand(count, -1), patterns)
    log_p = -torch.nn.functional.binary_cross_entropy_with_logits(logits.double(), patterns.double(), reduction="none")
    probs = torch.where(mask, log_p, 0.0).sum(1).exp()
    assert float(probs.sum()) == pytest.approx(1.0, abs=1e-6)
    return (probs[:, None] * patterns.double()).sum(0)


def test_round_trip_through_a_checkpoint_samples_as_the_simulator(model_json, simulator):
    model = load_click_model_file(model_json)
    assert isinstance(model, SimulatorClickModel) and model.needs_features
    assert model.metadata == {"note": "test"}
    features, mask = random_lists(3, N, seed=1)
    labels = torch.zeros(3, N)
    ours = model.sample_clicks(labels, mask, features, torch.Generator().manual_seed(5))
    orders = torch.arange(N).expand(3, 1, N)
    direct = simulator.sample_clicks(features, mask, orders, torch.Generator().manual_seed(5))[:, 0]
    assert torch.equal(ours, direct)
    # getModelJson is a description the loader reads back, from any directory.
    again = load_click_model(model.getModelJson())
    assert torch.equal(again.sample_clicks(labels, mask, features, torch.Generator().manual_seed(5)), ours)


def test_sampled_click_rates_match_the_simulators_likelihood(model_json, simulator):
    model = load_click_model_file(model_json, torch.Generator().manual_seed(2))
    features, mask = random_lists(2, 6, seed=3)
    samples = 4000
    clicks = model.sample_clicks(
        torch.zeros(2 * samples, 6), mask.repeat(samples, 1), features.repeat(samples, 1, 1)
    ).view(samples, 2, 6)
    for b in range(2):
        expected = exact_marginals(simulator, features[b : b + 1], mask[b : b + 1])
        rates = clicks[:, b].double().mean(0)
        tolerance = Z * torch.sqrt(expected * (1 - expected) / samples) + 1e-12
        assert torch.all((rates - expected).abs() <= tolerance), (rates, expected)
        assert torch.all(rates[~mask[b]] == 0)
    assert 0.05 < float(clicks.float().mean()) < 0.95  # the test exercises real randomness


def test_mismatched_checkpoint_is_refused_with_both_numbers(model_json):
    model = load_click_model_file(model_json)
    features, mask = random_lists(2, N, seed=4)
    with pytest.raises(ValueError, match=r"sim.ckpt: simulator feature size 5 does not match the data's 7"):
        model.sample_clicks(torch.zeros(2, N), mask, torch.zeros(2, N, 7))
    long_mask = torch.ones(2, N + 2, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"simulator list size 10 is shorter than the data's 12"):
        model.sample_clicks(torch.zeros(2, N + 2), long_mask, torch.zeros(2, N + 2, F))
    with pytest.raises(ValueError, match="samples clicks from document features; got none"):
        model.sample_clicks(torch.zeros(2, N), mask)
    with pytest.raises(NotImplementedError, match="per-list API"):
        model.sampleClicksForOneList([1, 0, 2])
    with pytest.raises(AttributeError, match="no position-bias parameter eta"):
        model.setExamProb(2.0)


def test_bad_descriptions_and_checkpoints(tmp_path):
    assert NAME in available_click_models()
    with pytest.raises(ValueError, match="unknown; available: .*SimulatorClickModel"):
        load_click_model({"model_name": "SimulatorClickModel", "checkpoint": "x"})
    with pytest.raises(ValueError, match=r"missing \['checkpoint'\].*unknown \['path'\]"):
        load_click_model({"model_name": NAME, "path": "x.ckpt"})
    with pytest.raises(FileNotFoundError, match="checkpoint of SimulatorClickModel 'missing.ckpt' not found"):
        load_click_model({"model_name": NAME, "checkpoint": "missing.ckpt"})
    garbage = tmp_path / "garbage.ckpt"
    garbage.write_text("not a checkpoint\n")
    with pytest.raises(ValueError, match="garbage.ckpt is not a readable simulator checkpoint"):
        load_click_model({"model_name": NAME, "checkpoint": str(garbage)})


def test_the_click_simulation_feed_uses_it(tmp_path, model_json, simulator):
    directory = write_synthetic_ultra_dataset(
        str(tmp_path / "data"), {"train": 12}, docs_per_query=(4, 14), n_features=F, max_label=2, seed=6
    )
    data = ultra.utils.read_data(directory, "train", None)
    stub = types.SimpleNamespace(
        rank_list_size=N,
        letor_features_name="letor_features",
        docid_inputs_name=["docid_input%d" % i for i in range(N)],
        labels_name=["label%d" % i for i in range(N)],
    )
    feed = ClickSimulationFeed(stub, 500, "click_model_json=%s,seed=1" % model_json)
    arrays = feed.arrays_for(data)
    short = int(np.argmin(arrays.mask.sum(1)))  # a query with padded slots
    assert not arrays.mask[short].all()
    clicks = np.concatenate([feed.clicks_for(arrays, np.full(500, short)) for _ in range(8)])
    assert np.all(clicks[:, ~arrays.mask[short]] == 0)
    features = torch.from_numpy(arrays.features[np.maximum(arrays.doc_ids[short], 0)] * arrays.mask[short][:, None])
    expected = exact_marginals(simulator, features[None], torch.from_numpy(arrays.mask[short])[None]).numpy()
    tolerance = Z * np.sqrt(expected * (1 - expected) / len(clicks)) + 1e-12
    assert np.all(np.abs(clicks.mean(0) - expected) <= tolerance)
    input_feed, info = feed.get_batch(data, check_validation=True)
    assert all(sum(c) > 0 for c in info["click_list"])
