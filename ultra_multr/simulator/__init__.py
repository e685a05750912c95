"""MULTR's context-aware user simulator (paper section 4.1), pure torch.

Modules: :mod:`.model` (the network and its hand-written recurrent steps),
:mod:`.sampling` (chunking and click draws of ``sample_clicks``),
:mod:`.graphs` (that sampling and the training updates replayed as CUDA graphs),
:mod:`.training` (loss, optimizer step, early stopping),
:mod:`.protocol` (:class:`UserSimulator`, what every simulator offers),
:mod:`.factorised` (a factorised design), :mod:`.designs` (the network of a design),
:mod:`.training_config` (the network's and the training's settings),
:mod:`.trainer` (the one training loop, MULTR's and the simulator report's) and
:mod:`.checkpoint` (simulator and training-state files).  Every public name
is re-exported here, so ``from ultra_multr.simulator import X`` works.
"""
from ultra_multr.simulator.checkpoint import check_compatible, load_simulator, load_training_state, save_simulator, save_training_state
from ultra_multr.simulator.graphs import GraphedSampler, GraphedSimulatorUpdate
from ultra_multr.simulator.protocol import UserSimulator
from ultra_multr.simulator.designs import TrainableSimulator, build_simulator
from ultra_multr.simulator.factorised import FactorisedUserSimulator
from ultra_multr.simulator.model import CELLS, DESIGNS, CLICK, SKIP, UNKNOWN, ContextAwareUserSimulator, DocumentGates, RecurrentCell, SimulatorConfig
from ultra_multr.simulator.sampling import LISTS_PER_CHUNK, click_thresholds, queries_per_chunk, sampling_uniforms
from ultra_multr.simulator.training import EarlyStopping, click_log_likelihood, simulator_loss, simulator_update
from ultra_multr.simulator.training_config import SimulatorTrainingConfig
from ultra_multr.simulator.trainer import SessionStream, SimulatorFit, train_simulator

__all__ = [
    "CELLS",
    "CLICK",
    "DESIGNS",
    "FactorisedUserSimulator",
    "TrainableSimulator",
    "build_simulator",
    "LISTS_PER_CHUNK",
    "SKIP",
    "UNKNOWN",
    "ContextAwareUserSimulator",
    "DocumentGates",
    "EarlyStopping",
    "GraphedSampler",
    "GraphedSimulatorUpdate",
    "RecurrentCell",
    "SessionStream",
    "SimulatorConfig",
    "SimulatorFit",
    "SimulatorTrainingConfig",
    "check_compatible",
    "click_log_likelihood",
    "click_thresholds",
    "load_simulator",
    "load_training_state",
    "queries_per_chunk",
    "sampling_uniforms",
    "save_simulator",
    "save_training_state",
    "simulator_loss",
    "simulator_update",
    "train_simulator",
    "UserSimulator",
]
