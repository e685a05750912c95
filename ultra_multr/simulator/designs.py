"""One network per simulator design, built from its :class:`~ultra_multr.simulator.model.SimulatorConfig`."""
from __future__ import annotations

from typing import Union

from ultra_multr.simulator.factorised import FactorisedUserSimulator
from ultra_multr.simulator.model import ContextAwareUserSimulator, SimulatorConfig

#: What the one trainer trains and a checkpoint holds.
TrainableSimulator = Union[ContextAwareUserSimulator, FactorisedUserSimulator]


def build_simulator(config: SimulatorConfig) -> TrainableSimulator:
    """A new simulator of ``config.design`` at its random initialisation."""
    if config.design == "factorised":
        return FactorisedUserSimulator(config)
    return ContextAwareUserSimulator(config)
