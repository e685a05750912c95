"""Checkpoint I/O of the user simulator: the trained simulator and the
intermediate training state (each written to a temporary name and renamed).

Both carry the metadata a later run compares with its own to reuse them
(the knobs declared ``checkpoint=True``, :func:`ultra_multr.config.identity`,
and the data's fingerprints).  Files written before a knob was renamed are
read with today's names (:func:`upgrade_metadata`)."""
from __future__ import annotations

import io
from dataclasses import MISSING, asdict, fields
from typing import Any, Dict, Optional, Tuple

import torch

from ultra_multr.files import atomic_write_bytes
from ultra_multr.simulator.designs import TrainableSimulator, build_simulator
from ultra_multr.simulator.model import SimulatorConfig


def _save(path: str, payload: Any) -> None:
    """torch.save ``payload`` to ``path`` via a temporary file.

    Serialised in memory first and written by Python: torch.save's own file
    writer reports a full disk as "basic_ios::clear: iostream error" (or
    "unexpected pos"), naming neither the file nor the cause, while Python's
    write gives ENOSPC, which :func:`atomic_write_file` turns into a
    ``DiskFullError`` naming the file.
    """
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    atomic_write_bytes(path, buffer.getvalue())


#: Metadata keys renamed since checkpoints were saved: old -> new.
RENAMED_KEYS = {"max_gradient_norm": "simulator_max_gradient_norm"}


def upgrade_metadata(metadata: Dict) -> Dict:
    """``metadata`` of a checkpoint or training state with today's key names and network fields.

    Compatibility with files saved before the rename of :data:`RENAMED_KEYS` (the simulator's gradient clip
    was ``max_gradient_norm``, shared with the ranker's, until the two were split), and before the network
    had the fields it has now (a ``simulator_config`` without them gets their defaults, which every earlier
    network had): the only place that knows the old forms.
    """
    upgraded = dict(metadata)
    for old, new in RENAMED_KEYS.items():
        if old in upgraded and new not in upgraded:
            upgraded[new] = upgraded.pop(old)
    if isinstance(upgraded.get("simulator_config"), dict):
        upgraded["simulator_config"] = network_config(upgraded["simulator_config"])
    return upgraded


def network_config(saved: Dict) -> Dict:
    """A saved network config with every :class:`SimulatorConfig` field, the missing ones at their defaults."""
    defaults = {f.name: f.default for f in fields(SimulatorConfig) if f.default is not MISSING}
    return dict(defaults, **saved)


def save_training_state(path: str, state: Dict) -> None:
    """Write an intermediate training state (tensors, numbers, dicts) to
    ``path`` via a temporary file."""
    _save(path, state)


def load_training_state(path: str) -> Dict:
    """Inverse of :func:`save_training_state`, on the CPU (its metadata upgraded: :func:`upgrade_metadata`)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, ValueError, EOFError) as error:
        raise ValueError("%s is not a simulator training state (%s)" % (path, error)) from None
    if isinstance(state, dict) and isinstance(state.get("metadata"), dict):
        state["metadata"] = upgrade_metadata(state["metadata"])
    return state


def save_simulator(path: str, simulator: TrainableSimulator, metadata: Dict) -> None:
    """Save config, weights and ``metadata`` to ``path`` via a temporary file."""
    payload = {
        "config": asdict(simulator.config),
        "state_dict": simulator.state_dict(),
        "metadata": dict(metadata),
    }
    _save(path, payload)


def load_simulator(
    path: str, map_location: Optional[torch.device] = None
) -> Tuple[TrainableSimulator, Dict]:
    """Inverse of :func:`save_simulator`; returns (simulator, in eval mode: a
    :class:`~ultra_multr.simulator.protocol.UserSimulator`; metadata, upgraded: :func:`upgrade_metadata`)."""
    try:
        payload = torch.load(path, map_location=map_location or "cpu", weights_only=True)
        config = SimulatorConfig(**payload["config"])
        simulator = build_simulator(config)
        simulator.load_state_dict(payload["state_dict"])
        return simulator.eval(), upgrade_metadata(payload.get("metadata", {}))
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
