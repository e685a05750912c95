"""A toy algorithm that owns MULTR's simulator phase without MULTR: Naive's listwise loss on clicks the user
simulator draws on each displayed list, instead of the logged clicks (the real ones when there is no simulator).

Found by main.py as ``"learning_algorithm": "toy_algorithm.SimulatedClicksNaive"`` with this folder on
PYTHONPATH; it imports no MULTR module: the phase, its knobs and the click stream are the components'.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import torch

from ultra_multr import losses
from ultra_multr.algorithms.base import AlgorithmConfig, PluginAlgorithm
from ultra_multr.batch import Batch
from ultra_multr.components.guards import GuardSettings
from ultra_multr.components.sessions import FeedHost, TrainingClicks
from ultra_multr.components.simulator_phase import SimulatorPhase, SimulatorSettings, default_checkpoint_path
from ultra_multr.config import group
from ultra_multr.session_budget import LEDGER
from ultra_multr.simulator import UserSimulator


@dataclass(frozen=True)
class ToyConfig(AlgorithmConfig):
    simulator: SimulatorSettings = group(SimulatorSettings)
    guards: GuardSettings = group(GuardSettings)


class SimulatedClicksNaive(PluginAlgorithm):
    config_class = ToyConfig

    def __init__(self, data_set, exp_settings: dict) -> None:
        super().__init__(data_set, exp_settings)
        config = self.hparams
        self.generator = torch.Generator(device=self.device).manual_seed(config.seed or 0)
        clicks = TrainingClicks(data_set, exp_settings, FeedHost.of(self), self.device)
        name = exp_settings.get("learning_algorithm", type(self).__name__)
        self.phase = SimulatorPhase(config.simulator, config.guards, clicks, self.generator, config.seed,
                                    default_checkpoint_path(config.simulator, name), LEDGER,
                                    "the toy trains on the logged clicks instead")
        self.simulator: Optional[UserSimulator] = None

    def prepare_training(self, valid_set=None, batch_size: Optional[int] = None) -> None:
        self.simulator = self.phase.run().simulator
        print("toy: trained on %s; MULTR's module imported: %s" % (
            "the simulator's clicks" if self.simulator is not None else "the logged clicks",
            "ultra_multr.algorithms.multr" in sys.modules))
        super().prepare_training(valid_set, batch_size)

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        labels = batch.labels
        if self.simulator is not None:
            identity = torch.arange(batch.mask.shape[1], device=self.device).expand(batch.batch_size, 1, -1)
            labels = self.simulator.sample_clicks(batch.features, batch.mask, identity, self.generator)[:, 0]
        scores = self.scores(batch)
        return losses.dla_softmax_loss(scores, labels, batch.mask.to(scores.dtype), batch.mask), {}
