"""The frozen simulator's sampling replayed as CUDA graphs (GPU only).

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

The graphs read the simulator's parameters where they are: keep the
simulator frozen and in place (no ``.to()``; ``load_state_dict`` copies in
place and is fine) while a :class:`GraphedSampler` uses it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch

from .model import ContextAwareUserSimulator
from .sampling import LISTS_PER_CHUNK, sampling_uniforms

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
    """``sample_clicks`` of a frozen simulator on CUDA, one graph per shape.

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
        self._graphs: Dict[Tuple, _Captured] = {}

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
