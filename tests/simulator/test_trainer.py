"""One simulator trainer: MULTR's simulator and the simulator report's come from ultra_multr.simulator.trainer."""
from __future__ import annotations

import dataclasses

import torch

from conftest import require_ultra
from test_training import SMALL, build

ultra = require_ultra()

from ultra_multr.algorithms.multr import MULTRConfig  # noqa: E402
from ultra_multr.components import sessions, simulator_phase  # noqa: E402
from ultra_multr.click_models import evaluation  # noqa: E402
from ultra_multr.config import parse_hparams  # noqa: E402
from ultra_multr.simulator import ContextAwareUserSimulator, SimulatorTrainingConfig, trainer  # noqa: E402

TRAINING = ("simulator_steps=6,simulator_eval_every=2,simulator_patience=2,simulator_min_heldout_sessions=0,"
            "cuda_graphs=off")


def training_fields(config) -> dict:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(SimulatorTrainingConfig)}


def test_the_report_and_multr_read_one_trainers_settings_with_the_same_names_and_defaults():
    for text in ("", SMALL.replace("seed=1,sample_num=1,", "") + "," + TRAINING):
        report = parse_hparams(SimulatorTrainingConfig, text, source="--simulator_hparams")
        assert training_fields(parse_hparams(MULTRConfig, text).simulator) == dataclasses.asdict(report)
    assert evaluation.train_simulator is trainer.train_simulator is simulator_phase.train_simulator


class Replay:
    """A recorded stream of batches, as a SessionStream."""

    def __init__(self, batches) -> None:
        self.batches = iter(batches)

    def next_batch(self):
        return next(self.batches)

    def state(self):
        return {}

    def restore(self, state) -> None:
        raise AssertionError("not resumed")


def test_multrs_simulator_is_the_trainers_on_multrs_batches(synthetic_data_dir, monkeypatch):
    """Given MULTR's batches, initial weights and generator, the trainer the report uses gives MULTR's simulator,
    parameter for parameter, after the same steps (early stopping included)."""
    model, _ = build(synthetic_data_dir, SMALL + "," + TRAINING + ",device=cpu")
    initial = {k: v.clone() for k, v in model.simulator_phase.network.state_dict().items()}
    calls, drawn = [], []
    real_next_batch = sessions.FeedStream.next_batch

    def recording_next_batch(stream):
        drawn.append(real_next_batch(stream))
        return drawn[-1]

    def recording_trainer(simulator, config, stream, heldout, heldout_sessions, generator, *rest):
        calls.append((config, heldout, heldout_sessions, generator.get_state()))
        return trainer.train_simulator(simulator, config, stream, heldout, heldout_sessions, generator, *rest)

    monkeypatch.setattr(sessions.FeedStream, "next_batch", recording_next_batch)
    monkeypatch.setattr(simulator_phase, "train_simulator", recording_trainer)
    model.prepare()
    (config, heldout, heldout_sessions, generator_state), = calls
    assert config is model.hparams.simulator and len(drawn) == 6 + len(heldout)  # the held-out batches first

    simulator = ContextAwareUserSimulator(model.simulator_phase.simulator_config)
    simulator.load_state_dict(initial)
    generator = torch.Generator()
    generator.set_state(generator_state)
    settings = SimulatorTrainingConfig(**training_fields(model.hparams.simulator))
    fit = trainer.train_simulator(simulator, settings, Replay(drawn[len(heldout):]), heldout, heldout_sessions,
                                  generator)
    assert fit.steps_run == 6 and len(fit.curve) == 3
    expected = model.simulator_phase.network.state_dict()
    assert all(torch.equal(expected[k], v) for k, v in simulator.state_dict().items())


def test_the_report_trains_through_the_trainer_with_its_settings(monkeypatch):
    lists = evaluation.QueryLists(torch.rand(4, 3, 2), torch.zeros(4, 3), torch.ones(4, 3, dtype=torch.bool))
    sessions = evaluation.Sessions(torch.arange(20) % 4, (torch.rand(20, 3) < 0.3).float())
    config = parse_hparams(SimulatorTrainingConfig, "simulator_steps=3,simulator_batch_size=4,simulator_hidden_size=4,"
                           "simulator_input_mlp=[],simulator_eval_every=1,simulator_heldout_fraction=0.25")
    seen = []
    real = evaluation.train_simulator
    monkeypatch.setattr(evaluation, "train_simulator", lambda *args: seen.append(args) or real(*args))
    simulator, fit = evaluation.fit_simulator(lists, sessions, config, torch.Generator().manual_seed(0))
    (_, used, _, heldout, heldout_sessions, _), = seen
    assert used is config and heldout_sessions == 5 and len(heldout) == config.simulator_heldout_batches
    assert fit.steps_run == 3 and [entry["step"] for entry in fit.curve] == [1, 2, 3] and not simulator.training
