"""Checkpoint I/O of the user simulator: the trained simulator and the
intermediate training state (each written to a temporary name and renamed)."""
from __future__ import annotations

from dataclasses import asdict
from typing import Dict, Optional, Tuple

import torch

from ..data.ultra_format import atomic_write_file
from .model import ContextAwareUserSimulator, SimulatorConfig


def save_training_state(path: str, state: Dict) -> None:
    """Write an intermediate training state (tensors, numbers, dicts) to
    ``path`` via a temporary file."""
    atomic_write_file(path, lambda tmp_path: torch.save(state, tmp_path))


def load_training_state(path: str) -> Dict:
    """Inverse of :func:`save_training_state`, on the CPU."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, ValueError, EOFError) as error:
        raise ValueError("%s is not a simulator training state (%s)" % (path, error)) from None


def save_simulator(path: str, simulator: ContextAwareUserSimulator, metadata: Dict) -> None:
    """Save config, weights and ``metadata`` to ``path`` via a temporary file."""
    payload = {
        "config": asdict(simulator.config),
        "state_dict": simulator.state_dict(),
        "metadata": dict(metadata),
    }
    atomic_write_file(path, lambda tmp_path: torch.save(payload, tmp_path))


def load_simulator(
    path: str, map_location: Optional[torch.device] = None
) -> Tuple[ContextAwareUserSimulator, Dict]:
    """Inverse of :func:`save_simulator`; returns (simulator, metadata)."""
    try:
        payload = torch.load(path, map_location=map_location or "cpu", weights_only=True)
        config = SimulatorConfig(**payload["config"])
        simulator = ContextAwareUserSimulator(config)
        simulator.load_state_dict(payload["state_dict"])
        return simulator, dict(payload.get("metadata", {}))
    except (KeyError, TypeError, AttributeError, RuntimeError, ValueError) as error:
        raise ValueError("%s is not a ultra_multr simulator checkpoint (%s)" % (path, error)) from None


def check_compatible(config: SimulatorConfig, feature_size: int, list_size: int, source: str) -> None:
    """Refuse a simulator whose feature or list size does not fit the data."""
    if config.feature_size != feature_size:
        raise ValueError(
            "%s: simulator feature size %d does not match the data's %d"
            % (source, config.feature_size, feature_size)
        )
    if config.list_size < list_size:
        raise ValueError(
            "%s: simulator list size %d is shorter than the data's %d" % (source, config.list_size, list_size)
        )
