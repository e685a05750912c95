"""The user simulator's one training loop (Algorithm 1, lines 2-5), used by MULTR and the simulator report.

:func:`train_simulator` trains a simulator on a stream of session batches
(:class:`SessionStream`: MULTR's is its training click feed, the report's its
sampled sessions) with the settings of :class:`SimulatorTrainingConfig`:
Adam or Adagrad at a constant step size on the simulator loss (BCE + L2,
gradients clipped), the held-out click log-likelihood measured every
``simulator_eval_every`` steps, the best state kept and training stopped
after ``simulator_patience`` evaluations without improvement (off when the
held-out sessions are fewer than ``simulator_min_heldout_sessions``).  Each
evaluation can write the whole training state to a partial checkpoint, from
which a killed run resumes and ends as an uninterrupted one would.  Beside
the simulator it fits the position-only click model on the same batches
(:mod:`.trivial`), the baseline MULTR's guard compares it with.

Shapes: B sessions per batch, N positions.
"""
from __future__ import annotations

import copy
import functools
import logging
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Protocol, Tuple

import torch

from ultra_multr import tensorboard
from ultra_multr.batch import Batch
from ultra_multr.progress import Progress
from ultra_multr.simulator.checkpoint import load_training_state, save_training_state
from ultra_multr.simulator.graphs import GraphedSimulatorUpdate
from ultra_multr.simulator.designs import TrainableSimulator
from ultra_multr.simulator.model import ContextAwareUserSimulator
from ultra_multr.simulator.training import EarlyStopping, click_log_likelihood, simulator_update
from ultra_multr.simulator.training_config import SimulatorTrainingConfig
from ultra_multr.simulator.trivial import PositionClickRates

LOGGER = logging.getLogger("ultra_multr")
#: A progress line at least this often while the simulator trains.
LOG_SECONDS = 60.0
#: SimulatorFit.early_stopping: on, off (simulator_patience=0), or off for too few held-out sessions.
EARLY_STOPPING = ("on", "off", "too_few_heldout_sessions")


class SessionStream(Protocol):
    """Where the simulator's training batches come from, and their random state (for resuming)."""

    def next_batch(self) -> Batch:
        """The next batch of sessions: labels are 0/1 clicks [B, N]."""

    def state(self) -> Dict[str, Any]:
        """What :meth:`restore` needs to continue the stream exactly."""

    def restore(self, state: Dict[str, Any]) -> None:
        """Continue from a :meth:`state`."""


@dataclass(frozen=True)
class SimulatorFit:
    """What a training run measured.

    Attributes:
        steps_run: steps taken (resumed ones included).
        best_step: the step of the kept state (the last step without early stopping).
        heldout_log_likelihood: the kept state's mean held-out click log-likelihood per session (nats).
        heldout_log_likelihood_per_position: [N] its mean per position.
        heldout_sessions: the distinct held-out sessions it rests on.
        trivial_log_likelihood: the position-only click model's, on the same held-out batches.
        early_stopping: one of :data:`EARLY_STOPPING`.
        curve: one ``{"step", "loss", "heldout_log_likelihood"}`` per evaluation.
    """

    steps_run: int
    best_step: int
    heldout_log_likelihood: float
    heldout_log_likelihood_per_position: List[float]
    heldout_sessions: int
    trivial_log_likelihood: float
    early_stopping: str
    curve: Tuple[Dict[str, float], ...]

    def checkpoint_facts(self) -> Dict[str, Any]:
        """The measurements MULTR saves in a simulator checkpoint's metadata (and its guard reads)."""
        return {
            "steps_run": self.steps_run,
            "best_step": self.best_step,
            "heldout_log_likelihood": self.heldout_log_likelihood,
            "heldout_log_likelihood_per_position": self.heldout_log_likelihood_per_position,
            "heldout_sessions": self.heldout_sessions,
            "trivial_log_likelihood": self.trivial_log_likelihood,
        }


def heldout_log_likelihood(simulator: TrainableSimulator, batches: List[Batch]) -> Tuple[float, List[float]]:
    """Mean click log-likelihood per session of ``batches`` and its [N] mean per position."""
    simulator.eval()
    list_size = simulator.list_size
    device = simulator.device
    total, sessions = 0.0, 0
    per_position = torch.zeros(list_size, device=device)
    shown = torch.zeros(list_size, device=device)
    with torch.no_grad():
        for batch in batches:
            logits = simulator.click_logits(batch.features, batch.mask, batch.labels)
            log_lik = click_log_likelihood(logits, batch.labels, batch.mask)
            total += float(log_lik.sum())
            sessions += batch.batch_size
            per_position[: log_lik.shape[1]] += log_lik.sum(0)
            shown[: log_lik.shape[1]] += batch.mask.sum(0)
    return total / max(sessions, 1), (per_position / shown.clamp(min=1)).tolist()


def _optimizer(simulator: TrainableSimulator, config: SimulatorTrainingConfig, graphed: bool):
    if config.simulator_optimizer == "adam":
        return torch.optim.Adam(simulator.parameters(), lr=config.simulator_learning_rate, capturable=graphed)
    return torch.optim.Adagrad(simulator.parameters(), lr=config.simulator_learning_rate)


def train_simulator(
    simulator: TrainableSimulator,
    config: SimulatorTrainingConfig,
    stream: SessionStream,
    heldout: List[Batch],
    heldout_sessions: int,
    generator: torch.Generator,
    partial_path: Optional[str] = None,
    metadata: Optional[Dict[str, Any]] = None,
) -> SimulatorFit:
    """Train ``simulator`` in place for at most ``config.simulator_steps`` batches of ``stream``.

    Args:
        heldout: the batches the held-out click log-likelihood is measured on.
        heldout_sessions: the distinct sessions among them (early stopping
            needs ``simulator_min_heldout_sessions``).
        generator: the randomness of the updates (teacher forcing), on the
            simulator's device; saved and restored with the training state.
        partial_path: where each evaluation writes the training state (None:
            nowhere); a state found there with the same ``metadata`` is resumed.
        metadata: what a partial state must match to be resumed.

    Returns:
        the fit, with ``simulator`` left in the kept (best or last) state.
    """
    device = simulator.device
    steps = config.simulator_steps
    # CUDA graphs replay whole updates of the context-aware network where nothing is drawn inside one and the
    # optimizer can be captured.
    graphed = (
        device.type == "cuda"
        and isinstance(simulator, ContextAwareUserSimulator)
        and config.cuda_graphs != "off"
        and config.simulator_optimizer == "adam"
        and config.teacher_forcing_ratio == 1.0
        and config.simulator_dropout == 0.0
        and config.simulator_position_dropout == 0.0
    )
    optimizer = _optimizer(simulator, config, graphed)
    patience = config.simulator_patience
    if patience and heldout_sessions < config.simulator_min_heldout_sessions:
        LOGGER.warning(
            "user simulator: only %d distinct held-out sessions (< simulator_min_heldout_sessions=%d): too little "
            "evidence to choose a state; early stopping is off and the last state after %d steps is kept "
            "(the paper's rule)", heldout_sessions, config.simulator_min_heldout_sessions, steps,
        )
        patience = 0
    stopping = EarlyStopping(patience)
    trivial = PositionClickRates(simulator.list_size)
    best_state: Optional[Dict] = None
    curve: List[Dict[str, float]] = []
    step = 0
    if partial_path and os.path.exists(partial_path):
        saved = load_training_state(partial_path)
        if saved.get("metadata") == metadata:
            simulator.load_state_dict(saved["simulator"])
            optimizer.load_state_dict(saved["optimizer"])
            generator.set_state(saved["generator"])
            stream.restore(saved["feed"])
            stopping = EarlyStopping(**saved["early_stopping"])
            trivial.clicks, trivial.shown = saved["trivial"]
            best_state, step, curve = saved["best_state"], saved["step"], list(saved.get("curve", []))
            LOGGER.info("user simulator: resuming from %s at step %d", partial_path, step)
        else:
            LOGGER.info("user simulator: %s was written with other settings; starting over", partial_path)
    if graphed:
        update = GraphedSimulatorUpdate(simulator, optimizer, config.simulator_l2,
                                        config.simulator_max_gradient_norm)
    else:
        update = functools.partial(
            simulator_update,
            simulator,
            optimizer,
            l2_weight=config.simulator_l2,
            max_gradient_norm=config.simulator_max_gradient_norm,
            teacher_forcing_ratio=config.teacher_forcing_ratio,
            generator=generator,
            teacher_forcing_unit=config.teacher_forcing_unit,
        )
    last_log = time.monotonic()
    meter = Progress(steps, "user simulator", "steps", initial=step, log_lines=False)  # rate and time left
    while step < steps and not stopping.stop:
        step += 1
        batch = stream.next_batch()
        loss = update(batch.features, batch.mask, batch.labels, step=step)
        meter.set(step)
        trivial.add(batch.labels, batch.mask)
        if step % config.simulator_eval_every == 0 or step == steps:
            heldout_ll, _ = heldout_log_likelihood(simulator, heldout)
            curve.append({"step": step, "loss": loss, "heldout_log_likelihood": heldout_ll})
            tensorboard.scalars("simulator", {"loss": loss, "heldout_log_likelihood": heldout_ll}, step)
            if stopping.update(heldout_ll, step) and patience > 0:
                best_state = copy.deepcopy(simulator.state_dict())
            LOGGER.info(
                "user simulator: step %d/%d loss %.4f held-out click log-likelihood %.4f per session "
                "(best %.4f at step %d, %s), %s",
                step, steps, loss, heldout_ll, stopping.best, stopping.best_step,
                "%d/%d evaluations without improvement" % (stopping.bad_evals, stopping.patience)
                if stopping.patience else "no early stopping", meter.text(),
            )
            if partial_path:
                save_training_state(partial_path, {
                    "metadata": metadata,
                    "step": step,
                    "simulator": simulator.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "generator": generator.get_state(),
                    "feed": stream.state(),
                    "early_stopping": asdict(stopping),
                    "best_state": best_state,
                    "trivial": (trivial.clicks, trivial.shown),
                    "curve": curve,
                })
            last_log = time.monotonic()
        elif (config.simulator_log_every and step % config.simulator_log_every == 0) or (
            time.monotonic() - last_log >= LOG_SECONDS
        ):
            LOGGER.info("user simulator: step %d/%d loss %.4f, %s", step, steps, loss, meter.text())
            last_log = time.monotonic()
    meter.close()
    if best_state is not None:
        simulator.load_state_dict(best_state)
        LOGGER.info(
            "user simulator: ended at step %d; keeping the best held-out state (step %d)", step, stopping.best_step
        )
    heldout_ll, per_position = heldout_log_likelihood(simulator, heldout)
    return SimulatorFit(
        steps_run=step,
        best_step=stopping.best_step if best_state is not None else step,
        heldout_log_likelihood=heldout_ll,
        heldout_log_likelihood_per_position=per_position,
        heldout_sessions=heldout_sessions,
        trivial_log_likelihood=trivial.log_likelihood((b.labels, b.mask) for b in heldout),
        early_stopping="on" if patience else "too_few_heldout_sessions" if config.simulator_patience else "off",
        curve=tuple(curve),
    )
