"""The components MULTR is made of, used apart from MULTR: a toy algorithm owns the simulator phase and trains
through ULTRA's main.py; a test double of the UserSimulator protocol plugs into MULTR in place of the phase."""
from __future__ import annotations

import json
import os
from typing import Any, Dict

import pytest
import torch

from conftest import REPO_ROOT, require_ultra, run_ultra_main
from algorithm_setup import CASCADE, build, train_losses

ultra = require_ultra()

from ultra_multr import losses  # noqa: E402
from ultra_multr.components.simulator_phase import SimulatorOutcome  # noqa: E402
from ultra_multr.session_budget import BUDGET_FILE  # noqa: E402
from ultra_multr.simulator import UserSimulator  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.slow
def test_a_toy_algorithm_owns_a_simulator_phase_and_trains_through_main_py(ultra_main, synthetic_data_dir, tmp_path,
                                                                          monkeypatch):
    settings = {
        "train_input_feed": "ultra_multr.feeds.ClickSimulationFeed",
        "train_input_hparams": "click_model_json=%s,seed=0" % CASCADE,
        "valid_input_feed": "ultra.input_layer.DirectLabelFeed", "valid_input_hparams": "",
        "test_input_feed": "ultra.input_layer.DirectLabelFeed", "test_input_hparams": "",
        "ranking_model": "ultra.ranking_model.DNN", "ranking_model_hparams": "hidden_layer_sizes=[16]",
        "learning_algorithm": "toy_algorithm.SimulatedClicksNaive",
        "learning_algorithm_hparams": "seed=0,simulator_steps=4,simulator_batch_size=8,simulator_heldout_batches=2,"
                                      "simulator_guard=none,logger_guard=none,log_every=0",
        "metrics": ["ndcg"], "metrics_topn": [10], "objective_metric": "ndcg_10",
    }
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(settings))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([HERE, REPO_ROOT, os.environ.get("PYTHONPATH", "")]))
    model_dir = tmp_path / "model"
    done = run_ultra_main(ultra_main, ["--setting_file", str(path), "--data_dir", synthetic_data_dir,
                                       "--model_dir", str(model_dir), "--output_dir", str(tmp_path / "out") + "/",
                                       "--batch_size", "16", "--selection_bias_cutoff", "10",
                                       "--max_train_iteration", "2", "--steps_per_checkpoint", "2"], cwd=str(tmp_path))
    assert "toy: trained on the simulator's clicks; MULTR's module imported: False" in done.stdout
    decisions = json.loads((model_dir / BUDGET_FILE).read_text())["decisions"]
    assert decisions["simulator_training"]["steps_run"] == 4 and decisions["user_simulator"]["used"] is True
    assert (model_dir / "toy_algorithm.SimulatedClicksNaive.simulator.ckpt").is_file()


class FixedClicks:
    """A test double of :class:`UserSimulator`: every real document is clicked with probability ``p`` at position 1
    and ``p / 2`` below, exactly; no network."""

    exact_probabilities = True

    def __init__(self, list_size: int, p: float = 0.6) -> None:
        self.list_size, self.p = list_size, p

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def click_probabilities(self, features, mask, orders, generator=None) -> torch.Tensor:
        shown = torch.gather(mask.unsqueeze(1).expand_as(orders), 2, orders)
        by_position = torch.full(orders.shape, self.p / 2)
        by_position[..., 0] = self.p
        return by_position * shown

    def sample_clicks(self, features, mask, orders, generator=None) -> torch.Tensor:
        p = self.click_probabilities(features, mask, orders)
        return (torch.rand(p.shape, generator=generator) < p).float()

    def describe(self) -> Dict[str, Any]:
        return {"kind": "fixed_clicks", "p": self.p}


class GivenSimulator:
    """In place of MULTR's simulator phase: the phase's ``run`` gives this simulator, judged by nobody."""

    def __init__(self, simulator: UserSimulator, clicks) -> None:
        self.simulator, self.clicks = simulator, clicks

    def run(self) -> SimulatorOutcome:
        return SimulatorOutcome(self.simulator, None)


def test_a_test_double_user_simulator_plugs_into_multr(synthetic_data_dir):
    double = FixedClicks(10)
    assert isinstance(double, UserSimulator)
    model, feed, data = build(synthetic_data_dir, "seed=2,sample_num=3,device=cpu,log_every=0,imputation_samples=4")
    model.simulator_phase = GivenSimulator(double, model.simulator_phase.clicks)
    assert all(torch.isfinite(torch.tensor(train_losses(model, feed, data, steps=2))))
    assert model.doubly_robust.simulator is double
    batch = model.batch(feed.get_batch(data, check_validation=True)[0], model.rank_list_size)
    observed, randomized = model.doubly_robust.pseudo_clicks(batch)
    expected_observed = torch.where(batch.mask, torch.full_like(observed, 0.3), torch.zeros_like(observed))
    expected_observed[:, 0] = 0.6
    # exact probabilities: on the logged order the expected pseudo clicks are the double's, whatever the samples
    torch.testing.assert_close(observed, expected_observed)
    # under uniform re-rankings of a list of n documents a document is at the top 1/n of the time (4 samples: near it)
    shown = batch.mask.sum(-1, keepdim=True).float()
    target = torch.where(batch.mask, 0.3 + 0.3 / shown, torch.zeros_like(observed))
    assert (randomized[:, 0] - target).abs().max() < 0.3 and randomized.shape[1] == 3
    scores = model.scores(batch)
    ipw = model.propensity_weights(model.propensity_model(batch.labels.t()), batch.mask).detach()
    loss, _ = model.ranking_loss(batch, scores, ipw)
    direct, _ = losses.DoublyRobustLoss(rerank_weight=3 / 4)(scores, batch.mask, batch.labels, observed, randomized, ipw)
    torch.testing.assert_close(loss, direct)
