"""The simulator's sampling and training updates replayed as CUDA graphs (GPU only).

Sampling pseudo clicks runs three recurrences (both encoder directions and
the decoder) position by position: about 30 small kernels per position and
chunk, each too small to keep a GPU busy, so a GPU step is bound by kernel
launches, not arithmetic.  A CUDA graph records those launches once per
input shape and replays them with one launch.

The draws are made before the replay, from the caller's generator and in
the order eager sampling makes them (:func:`.sampling.sampling_uniforms`),
and the captured work reads nothing back from the device
(``static=True``), so a replay gives the same clicks as
:meth:`ContextAwareUserSimulator.sample_clicks` with the same generator
state (up to floating-point order; the kernels are the same).

:class:`GraphedSimulatorUpdate` does the same for a whole training update
(forward, backward, optimizer step).

The graphs read the simulator's parameters where they are: keep the
simulator in place (no ``.to()``; ``load_state_dict`` copies in
place and is fine) while a :class:`GraphedSampler` uses it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import torch

from ultra_multr.simulator.model import ContextAwareUserSimulator
from ultra_multr.simulator.sampling import LISTS_PER_CHUNK, sampling_uniforms
from ultra_multr.simulator.training import backward_and_step, simulator_loss

#: Eager runs on a side stream before a capture (lazy initialisations of
#: cuBLAS and the caching allocator must not happen inside it).
WARMUP_RUNS = 2


@dataclass
class _Captured:
    graph: "torch.cuda.CUDAGraph"
    features: torch.Tensor
    mask: torch.Tensor
    orders: torch.Tensor
    uniforms: List[torch.Tensor]
    clicks: torch.Tensor


class GraphedSampler:
    """``sample_clicks`` of a frozen simulator on CUDA, one graph per shape; the rest of the
    :class:`~ultra_multr.simulator.protocol.UserSimulator` is the simulator's own.

    Args:
        simulator: frozen (``requires_grad`` off), on a CUDA device.
        lists_per_chunk: as :meth:`ContextAwareUserSimulator.sample_clicks`.
    """

    def __init__(self, simulator: ContextAwareUserSimulator, lists_per_chunk: int = LISTS_PER_CHUNK) -> None:
        device = simulator.click_head.weight.device
        if device.type != "cuda":
            raise ValueError("GraphedSampler needs the simulator on a CUDA device, got %s" % device)
        self.simulator = simulator
        self.lists_per_chunk = lists_per_chunk
        self.device = device
        self.list_size = simulator.list_size
        self.exact_probabilities = simulator.exact_probabilities
        self._graphs: Dict[Tuple, _Captured] = {}

    def click_probabilities(self, features: torch.Tensor, mask: torch.Tensor, orders: torch.Tensor,
                            generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """The simulator's own (not replayed)."""
        return self.simulator.click_probabilities(features, mask, orders, generator, self.lists_per_chunk)

    def describe(self) -> Dict[str, Any]:
        return self.simulator.describe()

    def sample_clicks(
        self,
        features: torch.Tensor,
        mask: torch.Tensor,
        orders: torch.Tensor,
        generator: Optional[torch.Generator] = None,
    ) -> torch.Tensor:
        """As :meth:`ContextAwareUserSimulator.sample_clicks`.

        Args:
            features: [B, N, F]; mask: [B, N] bool; orders: [B, P, N] long.

        Returns:
            [B, P, N] float 0/1 clicks by position (a fresh tensor).
        """
        dtype = self.simulator.click_head.weight.dtype
        uniforms = sampling_uniforms(orders.shape, generator, dtype, self.device, self.lists_per_chunk)
        key = (tuple(features.shape), features.dtype, tuple(orders.shape))
        captured = self._graphs.get(key)
        if captured is None:
            captured = self._graphs[key] = self._capture(features, mask, orders, uniforms)
        captured.features.copy_(features)
        captured.mask.copy_(mask)
        captured.orders.copy_(orders)
        for static, uniform in zip(captured.uniforms, uniforms):
            static.copy_(uniform)
        captured.graph.replay()
        return captured.clicks.clone()

    @property
    def captured_shapes(self) -> int:
        """How many input shapes have a graph."""
        return len(self._graphs)

    def _capture(
        self, features: torch.Tensor, mask: torch.Tensor, orders: torch.Tensor, uniforms: List[torch.Tensor]
    ) -> _Captured:
        static_features, static_mask, static_orders = features.clone(), mask.clone(), orders.clone()
        static_uniforms = [u.clone() for u in uniforms]

        def run() -> torch.Tensor:
            return self.simulator.sample_with_uniforms(
                static_features, static_mask, static_orders, static_uniforms, static=True
            )[1]

        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.no_grad(), torch.cuda.stream(side):
            for _ in range(WARMUP_RUNS):
                run()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(graph):
            clicks = run()
        return _Captured(graph, static_features, static_mask, static_orders, static_uniforms, clicks)


class GraphedSimulatorUpdate:
    """:func:`.training.simulator_update` on CUDA as one graph replay per batch
    shape: forward, backward, gradient clipping and the optimizer step.

    Teacher forcing only (``teacher_forcing_ratio`` 1: nothing is drawn) and
    an optimizer built with ``capturable=True`` (``torch.optim.Adam``).  A
    capture needs a few eager updates first; the simulator's parameters and
    the optimizer's state are put back after them (a state the optimizer had
    not made yet is put back as its zero initial state, which is Adam's), so
    the updates are those of ``simulator_update`` step for step, up to
    floating-point order.  Unlike ``simulator_update``, a non-finite loss is
    found after the replay, so that step has been taken when it raises.

    Args:
        simulator: on a CUDA device; trained in place.
        optimizer: over ``simulator.parameters()``, ``capturable=True``.
        l2_weight, max_gradient_norm: as :func:`.training.simulator_update`.
    """

    def __init__(
        self,
        simulator: ContextAwareUserSimulator,
        optimizer: torch.optim.Optimizer,
        l2_weight: float,
        max_gradient_norm: float = 0.0,
    ) -> None:
        device = simulator.click_head.weight.device
        if device.type != "cuda":
            raise ValueError("GraphedSimulatorUpdate needs the simulator on a CUDA device, got %s" % device)
        if not optimizer.defaults.get("capturable", False):
            raise ValueError("GraphedSimulatorUpdate needs an optimizer built with capturable=True")
        self.simulator, self.optimizer, self.device = simulator, optimizer, device
        self.l2_weight, self.max_gradient_norm = l2_weight, max_gradient_norm
        self._graphs: Dict[Tuple, Tuple["torch.cuda.CUDAGraph", List[torch.Tensor], torch.Tensor]] = {}

    def __call__(self, features: torch.Tensor, mask: torch.Tensor, clicks: torch.Tensor, step: int = 0) -> float:
        """One update.

        Args:
            features: [B, N, F]; mask: [B, N] bool; clicks: [B, N].
            step: the step number, for the error message.

        Returns:
            the loss before the step.

        Raises:
            FloatingPointError: a non-finite loss.
        """
        self.simulator.train()
        key = (tuple(features.shape), features.dtype)
        if key not in self._graphs:
            self._graphs[key] = self._capture(features, mask, clicks)
        graph, inputs, loss = self._graphs[key]
        for static, value in zip(inputs, (features, mask, clicks)):
            static.copy_(value)
        graph.replay()
        value = float(loss)
        if not math.isfinite(value):
            raise FloatingPointError("non-finite simulator loss %r at simulator step %d" % (value, step))
        return value

    def _capture(self, features: torch.Tensor, mask: torch.Tensor, clicks: torch.Tensor):
        inputs = [features.clone(), mask.clone(), clicks.clone()]
        parameters = list(self.simulator.parameters())

        def update() -> torch.Tensor:
            logits = self.simulator.click_logits(inputs[0], inputs[1], inputs[2], static=True)
            loss = simulator_loss(self.simulator, logits, inputs[2], inputs[1], self.l2_weight)
            backward_and_step(self.simulator, self.optimizer, loss, self.max_gradient_norm)
            return loss.detach()

        saved_parameters = [p.detach().clone() for p in parameters]
        saved_state = {
            p: {k: v.clone() for k, v in self.optimizer.state[p].items() if torch.is_tensor(v)}
            for p in parameters
            if p in self.optimizer.state
        }
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_RUNS):
                self.optimizer.zero_grad(set_to_none=True)
                update()
        torch.cuda.current_stream(self.device).wait_stream(side)
        with torch.no_grad():  # undo the warm-up updates, in place (the graph reads these tensors)
            for parameter, saved in zip(parameters, saved_parameters):
                parameter.copy_(saved)
            for parameter in parameters:
                saved = saved_state.get(parameter)
                for name, value in self.optimizer.state[parameter].items():
                    if torch.is_tensor(value):
                        value.copy_(saved[name]) if saved is not None else value.zero_()
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            loss = update()
        return graph, inputs, loss
