"""The context-aware user simulator of MULTR (paper section 4.1): the network.

Architecture (paper notation):

* local context encoder: a bidirectional LSTM over the displayed list; the
  context ``h_pi = W^T [h_fwd; h_bwd]`` is a linear map of the final states of
  both directions over the list's *real* length (padded slots are skipped).
* context-aware click decoder: an LSTM over
  ``z_t = [W1 h_pi + b1; W2 x_t + b2; W3 A[a_{t-1}] + b3; P[t]]`` with three
  action embeddings (click, skip, unknown; unknown before the first slot) and
  a position embedding ``P``; ``p_t = sigmoid(W4 h_t + b4)``.
* loss (:mod:`.training`): binary cross-entropy over the valid slots plus
  ``lambda ||phi||^2``.

Options beyond the paper: ``cell="gru"``, an input MLP applied to the
features first, and a teacher-forcing ratio below 1 during training.

Speed.  Every input-to-gate product of both LSTMs is linear in a per-document
or per-list quantity, so it is computed once per *document* and gathered for
each re-ranking of the same documents, instead of once per (re-ranking,
slot).  The recurrences themselves are hand-written steps over the weights
of ``nn.LSTMCell`` / ``nn.GRUCell``, so they are exactly those cells; only the
N list positions are looped over, never queries or samples.  The first step
of every recurrence starts from the zero state and skips its matrix product,
and sampling runs over chunks of lists (see :mod:`.sampling`).
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

from ultra_multr.config import require
from ultra_multr.simulator.sampling import LISTS_PER_CHUNK, click_thresholds, sampling_uniforms

UNKNOWN, SKIP, CLICK = 0, 1, 2
CELLS = ("lstm", "gru")
#: The simulator's designs (:func:`ultra_multr.simulator.designs.build_simulator`): the paper's context-aware
#: network (:class:`ContextAwareUserSimulator`) or a factorised click model
#: (:class:`~ultra_multr.simulator.factorised.FactorisedUserSimulator`).
DESIGNS = ("context_aware", "factorised")


@dataclass(frozen=True)
class SimulatorConfig:
    """Shape of a :class:`ContextAwareUserSimulator`.

    Attributes:
        feature_size: F, document feature dimension.
        list_size: N, the longest list the position embedding covers.
        hidden_size: H of every recurrent state (paper: 64).
        cell: "lstm" (paper) or "gru".
        input_mlp: hidden sizes of an ELU MLP applied to features first
            (empty: raw features, as in the paper).
        position_size: dimension of the decoder's position embedding (0: none, the paper's Eq. click_decoder,
            where the decoder knows the position only through its recurrence).
        design: one of :data:`DESIGNS`.
        dropout: dropout on the decoder's output before the click head, in training (the authors' code: 0.4).
        actions: 3 (unknown, skip, click: the previous action at the first position is "unknown") or 2 (skip,
            click: it is "skip", the authors' code's zero click).
        position_dropout: in training, the share of lists whose decoder reads no position embedding (dropout on
            the position input, Zhang et al., KDD 2023), so that position explains less of what relevance did.
    """

    feature_size: int
    list_size: int
    hidden_size: int = 64
    cell: str = "lstm"
    input_mlp: Tuple[int, ...] = field(default_factory=tuple)
    position_size: int = 16
    design: str = "context_aware"
    dropout: float = 0.0
    actions: int = 3
    position_dropout: float = 0.0

    def __post_init__(self) -> None:
        require(self.cell in CELLS, "cell must be one of %s, got %r" % (CELLS, self.cell))
        require(self.design in DESIGNS, "design must be one of %s, got %r" % (DESIGNS, self.design))
        require(0.0 <= self.dropout < 1.0, "dropout must be in [0, 1), got %r" % self.dropout)
        require(self.actions in (2, 3), "actions must be 2 or 3, got %r" % self.actions)
        require(0.0 <= self.position_dropout <= 1.0,
                "position_dropout must be in [0, 1], got %r" % self.position_dropout)
        require(self.feature_size > 0, "feature_size must be > 0, got %d" % self.feature_size)
        require(self.list_size > 0, "list_size must be > 0, got %d" % self.list_size)
        require(self.hidden_size > 0, "hidden_size must be > 0, got %d" % self.hidden_size)
        require(self.position_size >= 0, "position_size must be >= 0, got %d" % self.position_size)
        object.__setattr__(self, "input_mlp", tuple(int(s) for s in self.input_mlp))


class RecurrentCell(nn.Module):
    """An ``nn.LSTMCell`` or ``nn.GRUCell`` stepped on precomputed input gates.

    Callers project each block of the cell's input once with :meth:`project`,
    add the blocks (and :meth:`input_bias`) into ``pre_gates`` and call
    :meth:`step`.  For the LSTM the candidate gate's columns are scaled by 2 so
    that one in-place sigmoid serves all four gates
    (``tanh(x) = 2 sigmoid(2x) - 1``); the result is the same LSTM.
    """

    def __init__(self, kind: str, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.kind = kind
        self.hidden_size = hidden_size
        self.cell = nn.LSTMCell(input_size, hidden_size) if kind == "lstm" else nn.GRUCell(input_size, hidden_size)

    def _gate_scale(self) -> torch.Tensor:
        weight = self.cell.weight_ih
        scale = torch.ones(weight.shape[0], dtype=weight.dtype, device=weight.device)
        if self.kind == "lstm":
            scale[2 * self.hidden_size : 3 * self.hidden_size] = 2.0
        return scale

    def project(self, inputs: torch.Tensor, start: int = 0, stop: Optional[int] = None) -> torch.Tensor:
        """Input block [..., stop-start] -> its gate contribution [..., G], no bias.

        G = 4H (lstm) or 3H (gru)."""
        return inputs @ (self.cell.weight_ih[:, start:stop].t() * self._gate_scale())

    def input_bias(self) -> torch.Tensor:
        """[G]: the bias that belongs in ``pre_gates``."""
        if self.kind == "lstm":
            return (self.cell.bias_ih + self.cell.bias_hh) * self._gate_scale()
        return self.cell.bias_ih

    def recurrent_weight(self) -> torch.Tensor:
        """[H, G]: hidden-to-gate weight (scaled like :meth:`project`)."""
        return self.cell.weight_hh.t() * self._gate_scale()

    def with_extra_input(self, extra_weight: torch.Tensor) -> torch.Tensor:
        """[H + K, G]: the recurrent weight with ``extra_weight`` [K, G] below."""
        return torch.cat([self.recurrent_weight(), extra_weight], dim=0)

    def step(
        self,
        pre_gates: torch.Tensor,
        state: Optional[Tuple[torch.Tensor, ...]],
        recurrent_weight: torch.Tensor,
        extra_input: Optional[torch.Tensor] = None,
        overwrite: bool = False,
    ) -> Tuple[torch.Tensor, ...]:
        """One step.

        Args:
            pre_gates: [M, G] input contributions plus :meth:`input_bias`.
            state: ([M, H], ...), or None for the zero state that starts a
                recurrence (no matrix product is then needed).
            recurrent_weight: [H, G] from :meth:`recurrent_weight`, or
                [H + K, G] from :meth:`with_extra_input`.
            extra_input: [M, K], one more input block that changes every
                step, multiplied by the rows of ``recurrent_weight`` below H
                (zero in the zero state).
            overwrite: ``pre_gates`` is scratch (a fresh tensor, not a view of
                a table) and the LSTM may accumulate its gates in place.

        Returns:
            the new state: (h, c) for the LSTM, (h,) for the GRU.
        """
        if self.kind == "lstm":
            return self._lstm_step(pre_gates, state, recurrent_weight, extra_input, overwrite)
        return self._gru_step(pre_gates, state, recurrent_weight, extra_input)

    @staticmethod
    def _lstm_step(
        pre_gates: torch.Tensor,
        state: Optional[Tuple[torch.Tensor, ...]],
        recurrent_weight: torch.Tensor,
        extra_input: Optional[torch.Tensor],
        overwrite: bool,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        if state is None:
            gates = pre_gates.sigmoid()
        else:
            inputs = state[0] if extra_input is None else torch.cat([state[0], extra_input], dim=-1)
            product = pre_gates.addmm_ if overwrite else functools.partial(torch.addmm, pre_gates)
            gates = product(inputs, recurrent_weight).sigmoid_()
        i, f, g, o = gates.chunk(4, dim=-1)
        # g holds sigmoid(2 x_g), so tanh(x_g) = 2 g - 1 and
        # c' = f c + i tanh(x_g) = (f c - i) + 2 i g; likewise
        # h' = o tanh(c') = 2 o sigmoid(2 c') - o.  Same LSTM, fewer passes
        # over memory, and sigmoid is about 3.5x cheaper than tanh on CPU.
        base = -i if state is None else (f * state[1]).sub_(i)
        memory = torch.addcmul(base, i, g, value=2.0)
        return torch.addcmul(-o, o, torch.sigmoid(2.0 * memory), value=2.0), memory

    def _gru_step(
        self,
        pre_gates: torch.Tensor,
        state: Optional[Tuple[torch.Tensor, ...]],
        recurrent_weight: torch.Tensor,
        extra_input: Optional[torch.Tensor],
    ) -> Tuple[torch.Tensor]:
        hidden = pre_gates.new_zeros((pre_gates.shape[0], self.hidden_size)) if state is None else state[0]
        if extra_input is not None:
            pre_gates = torch.addmm(pre_gates, extra_input, recurrent_weight[self.hidden_size :])
        recurrent = torch.addmm(self.cell.bias_hh, hidden, recurrent_weight[: self.hidden_size])
        x_r, x_z, x_n = pre_gates.chunk(3, dim=-1)
        h_r, h_z, h_n = recurrent.chunk(3, dim=-1)
        reset = torch.sigmoid(x_r + h_r)
        update = torch.sigmoid(x_z + h_z)
        candidate = torch.tanh(x_n + reset * h_n)
        return ((1.0 - update) * candidate + update * hidden,)


def seeded_dropout(x: torch.Tensor, p: float, generator: Optional[torch.Generator]) -> torch.Tensor:
    """Inverted dropout of ``x`` at rate ``p`` with its mask drawn from ``generator`` (``nn.Dropout`` draws from
    torch's global stream, which a resumed training does not restore; the simulator's generator is checkpointed)."""
    if p <= 0.0:
        return x
    keep = torch.rand(x.shape, generator=generator, device=x.device, dtype=x.dtype) >= p
    return x * keep / (1.0 - p)


def _keep_where(
    valid: torch.Tensor,
    new: Tuple[torch.Tensor, ...],
    old: Optional[Tuple[torch.Tensor, ...]],
    all_valid: bool = False,
) -> Tuple[torch.Tensor, ...]:
    """Take the new state only where the current slot is valid. valid: [M].

    ``old`` None is the zero state; ``all_valid`` (known in advance) skips
    the selection."""
    if all_valid:
        return new
    keep = valid.unsqueeze(-1)
    if old is None:
        return tuple(torch.where(keep, n, 0.0) for n in new)
    return tuple(torch.where(keep, n, o) for n, o in zip(new, old))


class _Layout:
    """Which per-document row each list shows at each position.

    Args:
        order: [B, P, N] slot shown at each position; shown: [B, P, N] bool.
        slots: N of the per-document tables (rows are ``b * N + slot``).
        static: read nothing back from the device (no host sync: what a
            CUDA graph capture needs); the shortcuts below, which depend on
            the data, are then not taken.  Same results either way.
        identity: the caller knows whether ``order`` is the observed lists
            (None: find out, unless ``static``).

    Attributes:
        shown: [N, M] bool with M = B * P lists.
        all_shown: N bools (every list shows a document at that position).
        identity: the lists are the observed ones (strided views replace the gathers).
    """

    def __init__(
        self, order: torch.Tensor, shown: torch.Tensor, slots: int, static: bool = False, identity: Optional[bool] = None
    ) -> None:
        batch, lists, positions = order.shape
        self.lists, self.slots = batch * lists, positions
        self.shown = shown.permute(2, 0, 1).reshape(positions, self.lists)
        # one sync each, unless static
        self.all_shown = [False] * positions if static else self.shown.all(dim=1).tolist()
        if identity is None:
            arange = torch.arange(positions, device=order.device)
            identity = not static and lists == 1 and positions == slots and bool((order == arange).all())
        self.identity = identity
        self.rows: Optional[torch.Tensor] = None
        if not self.identity:
            offsets = (torch.arange(batch, device=order.device) * slots).view(batch, 1, 1)
            self.rows = (order + offsets).permute(2, 0, 1).reshape(positions, self.lists)

    def reader(self, table: torch.Tensor) -> Callable[[int], torch.Tensor]:
        """[B*N, G] per-document table -> ``read(t)``, the [M, G] rows shown at position t."""
        if self.identity:
            # One unbind: its backward stacks the N slices once, where N
            # separate slices would each allocate a zero-filled table.
            return table.view(self.lists, self.slots, -1).unbind(1).__getitem__
        return lambda t: table.index_select(0, self.rows[t])


@dataclass
class DocumentGates:
    """Per-document input-gate products, shared by every order of the documents.

    Attributes:
        encoder_forward, encoder_backward: [B*N, G] the encoder cells' input
            gates (with biases).
        decoder: [B*N, G] the decoder's document block.
        slots: N.
    """

    encoder_forward: torch.Tensor
    encoder_backward: torch.Tensor
    decoder: torch.Tensor
    slots: int


class ContextAwareUserSimulator(nn.Module):
    """Learned click model: click probabilities for any ranked list (a
    :class:`~ultra_multr.simulator.protocol.UserSimulator` whose probabilities are one-session estimates)."""

    exact_probabilities = False

    def __init__(self, config: SimulatorConfig) -> None:
        super().__init__()
        self.config = config
        hidden = config.hidden_size
        layers = []
        width = config.feature_size
        for size in config.input_mlp:
            layers += [nn.Linear(width, size), nn.ELU()]
            width = size
        self.input_mlp = nn.Sequential(*layers)
        self.encoder_forward = RecurrentCell(config.cell, width, hidden)
        self.encoder_backward = RecurrentCell(config.cell, width, hidden)
        self.context = nn.Linear(2 * hidden, hidden)  # W of h_pi = W^T h_N
        self.context_projection = nn.Linear(hidden, hidden)  # W1, b1
        self.document_projection = nn.Linear(width, hidden)  # W2, b2
        self.action_embedding = nn.Embedding(3, hidden)  # A: unknown, skip, click
        self.action_projection = nn.Linear(hidden, hidden)  # W3, b3
        self.position_embedding = nn.Embedding(config.list_size, config.position_size)
        self.decoder = RecurrentCell(config.cell, 3 * hidden + config.position_size, hidden)
        self.click_head = nn.Linear(hidden, 1)  # W4, b4

    @property
    def list_size(self) -> int:
        return self.config.list_size

    @property
    def device(self) -> torch.device:
        return self.click_head.weight.device

    def describe(self) -> Dict[str, Any]:
        return dict(kind="context_aware", **asdict(self.config))

    # -- building blocks -------------------------------------------------
    def document_gates(self, features: torch.Tensor) -> DocumentGates:
        """features: [B, N, F] -> per-document gate products (flattened B*N)."""
        batch, slots, _ = features.shape
        docs = self.input_mlp(features).reshape(batch * slots, -1)
        hidden = self.config.hidden_size
        return DocumentGates(
            encoder_forward=self.encoder_forward.project(docs) + self.encoder_forward.input_bias(),
            encoder_backward=self.encoder_backward.project(docs) + self.encoder_backward.input_bias(),
            decoder=self.decoder.project(self.document_projection(docs), hidden, 2 * hidden),
            slots=slots,
        )

    def _context(self, gates: DocumentGates, layout: "_Layout") -> torch.Tensor:
        """BiLSTM context h_pi [M, H] of every list of ``layout``."""
        final = []
        for cell, table, backward in (
            (self.encoder_forward, gates.encoder_forward, False),
            (self.encoder_backward, gates.encoder_backward, True),
        ):
            read, weight = layout.reader(table), cell.recurrent_weight()
            state: Optional[Tuple[torch.Tensor, ...]] = None
            for step in range(layout.slots):
                t = layout.slots - 1 - step if backward else step
                # Gathers (not identity) are fresh tensors the step may overwrite.
                new = cell.step(read(t), state, weight, overwrite=not layout.identity)
                state = _keep_where(layout.shown[t], new, state, layout.all_shown[t])
            final.append(state[0])
        return self.context(torch.cat(final, dim=-1))

    def _decode(
        self,
        gates: DocumentGates,
        order: torch.Tensor,
        shown: torch.Tensor,
        given_clicks: Optional[torch.Tensor],
        teacher_forcing_ratio: float,
        generator: Optional[torch.Generator],
        uniform: Optional[torch.Tensor] = None,
        static: bool = False,
        identity: Optional[bool] = None,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Run the click decoder over lists given as orders of the documents.

        Args:
            gates: from :meth:`document_gates`.
            order: [B, P, N] slot of the document shown at each position.
            shown: [B, P, N] bool, a real document is shown at that position.
            given_clicks: [B, P, N] observed clicks (teacher forcing) or None
                to sample every action from the simulator itself.
            teacher_forcing_ratio: probability of feeding the observed click
                rather than a sampled one as the next step's previous action.
            generator: randomness for sampled actions.
            uniform: [N, B*P] the sampled actions' draws made beforehand
                (:func:`.sampling.sampling_uniforms`); None draws them here.
            static, identity: see :class:`_Layout`.

        Returns:
            (logits [B, P, N], clicks [B, P, N]); clicks are the actions fed
            back (observed or sampled), 0 where nothing is shown.  The
            previous action is "unknown" at the first position and "click" or
            "skip" (an empty slot counts as a skip) after it.
        """
        batch, lists, slots = order.shape
        rows = batch * lists
        hidden = self.config.hidden_size
        layout = _Layout(order, shown, gates.slots, static, identity)
        context_gates = self.decoder.project(self.context_projection(self._context(gates, layout)), 0, hidden)
        actions = self.decoder.project(self.action_projection(self.action_embedding.weight), 2 * hidden, 3 * hidden)
        positions = self.decoder.project(self.position_embedding.weight[:slots], 3 * hidden)  # [N, G]
        # Constant part per position: position, bias and the "skip" (or, at
        # t = 0, "unknown") action; a click adds (click - skip) on top.
        # (Rows joined rather than indexed with a filled index tensor: setting one
        # entry of a CUDA tensor from Python copies from the host, which a CUDA graph
        # capture refuses.)
        first = UNKNOWN if self.config.actions == 3 else SKIP
        previous_action = torch.cat([actions[first : first + 1], actions[SKIP].expand(slots - 1, -1)])
        constant = positions + previous_action + self.decoder.input_bias()  # [N, G]
        # dropout on the position input: in training, lists whose decoder reads no position embedding
        unpositioned = None
        if self.training and self.config.position_dropout > 0:
            draws = torch.rand(rows, 1, generator=generator, device=order.device, dtype=constant.dtype)
            unpositioned = (draws < self.config.position_dropout).to(constant.dtype)
        weight = self.decoder.with_extra_input((actions[CLICK] - actions[SKIP]).unsqueeze(0))
        given = None if given_clicks is None else (given_clicks * shown).permute(2, 0, 1).reshape(slots, rows)
        threshold = None
        if given is None or teacher_forcing_ratio < 1.0:
            threshold = click_thresholds(
                layout.shown, given, teacher_forcing_ratio, generator, context_gates.dtype, uniform
            )
        state: Optional[Tuple[torch.Tensor, ...]] = None
        previous_click: Optional[torch.Tensor] = None  # [M, 1]
        logits, clicks = [], []
        read = layout.reader(gates.decoder)
        for t in range(slots):
            # index_select returns a fresh tensor we may add into; a view may not be.
            pre = read(t) + context_gates if layout.identity else read(t).add_(context_gates)
            pre = pre.add_(constant[t])
            if unpositioned is not None:
                pre = pre - unpositioned * positions[t]
            step = self.decoder.step(pre, state, weight, previous_click, overwrite=True)
            state = _keep_where(layout.shown[t], step, state, layout.all_shown[t])
            hidden = seeded_dropout(state[0], self.config.dropout, generator) if self.training else state[0]
            logit = self.click_head(hidden).squeeze(-1)
            click = given[t] if threshold is None else (logit.detach() > threshold[t]).to(logit.dtype)
            previous_click = click.unsqueeze(-1)
            logits.append(logit)
            clicks.append(click)
        return (
            torch.stack(logits).reshape(slots, batch, lists).permute(1, 2, 0),
            torch.stack(clicks).reshape(slots, batch, lists).permute(1, 2, 0),
        )

    # -- public API ----------------------------------------------------
    def click_logits(
        self,
        features: torch.Tensor,
        mask: torch.Tensor,
        clicks: torch.Tensor,
        teacher_forcing_ratio: float = 1.0,
        generator: Optional[torch.Generator] = None,
        static: bool = False,
    ) -> torch.Tensor:
        """Logits of P(click at t | clicks before t) on observed lists.

        Args:
            features: [B, N, F]; mask: [B, N] bool; clicks: [B, N].
            static: read nothing back from the device (see :class:`_Layout`).

        Returns:
            [B, N] logits (meaningless at padded slots).
        """
        order = torch.arange(mask.shape[1], device=mask.device).expand(mask.shape[0], 1, -1)
        logits, _ = self._decode(
            self.document_gates(features),
            order,
            mask.unsqueeze(1),
            clicks.unsqueeze(1),
            teacher_forcing_ratio,
            generator,
            static=static,
            identity=True,
        )
        return logits.squeeze(1)

    def sample_clicks(
        self,
        features: torch.Tensor,
        mask: torch.Tensor,
        orders: torch.Tensor,
        generator: Optional[torch.Generator] = None,
        lists_per_chunk: int = LISTS_PER_CHUNK,
    ) -> torch.Tensor:
        """Sample click sessions on re-orderings of each query's documents.

        Args:
            features: [B, N, F] documents in observed-list slots.
            mask: [B, N] bool.
            orders: [B, P, N] slot shown at each position of each list (the
                identity is the observed list); padded slots must stay at
                positions whose slot is padded.
            generator: randomness.
            lists_per_chunk: the recurrences run over at most about this many
                lists at a time (whole queries per chunk).

        Returns:
            [B, P, N] float 0/1 clicks by *position*, 0 where nothing is shown.
        """
        return self._sample(features, mask, orders, generator, lists_per_chunk)[1]

    def click_probabilities(
        self,
        features: torch.Tensor,
        mask: torch.Tensor,
        orders: torch.Tensor,
        generator: Optional[torch.Generator] = None,
        lists_per_chunk: int = LISTS_PER_CHUNK,
    ) -> torch.Tensor:
        """``P(click at t | actions sampled before t)`` along one sampled
        session per list: its mean over sessions estimates the click
        probability ``E[c_t]`` without bias and with no more variance than the
        sampled clicks' (the last click's coin is averaged out).

        Args and shapes: as :meth:`sample_clicks`.

        Returns:
            [B, P, N] probabilities by *position*, 0 where nothing is shown.
        """
        logits, _, shown = self._sample(features, mask, orders, generator, lists_per_chunk)
        return torch.where(shown, torch.sigmoid(logits), torch.zeros_like(logits))

    def _sample(
        self,
        features: torch.Tensor,
        mask: torch.Tensor,
        orders: torch.Tensor,
        generator: Optional[torch.Generator],
        lists_per_chunk: int,
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sampled sessions: (logits, clicks, shown), each [B, P, N] by position."""
        uniforms = sampling_uniforms(
            orders.shape, generator, self.click_head.weight.dtype, features.device, lists_per_chunk
        )
        return self.sample_with_uniforms(features, mask, orders, uniforms)

    def sample_with_uniforms(
        self,
        features: torch.Tensor,
        mask: torch.Tensor,
        orders: torch.Tensor,
        uniforms: List[torch.Tensor],
        static: bool = False,
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sampled sessions from draws made beforehand: a function of its
        inputs alone, which :mod:`.graphs` captures as a CUDA graph.

        Args:
            features, mask, orders: as :meth:`sample_clicks`.
            uniforms: from :func:`.sampling.sampling_uniforms` for
                ``orders.shape`` (their chunks set the chunking).
            static: read nothing back from the device (see :class:`_Layout`).

        Returns:
            (logits, clicks, shown), each [B, P, N] by position.
        """
        shown = torch.gather(mask.unsqueeze(1).expand_as(orders), 2, orders)
        gates = self.document_gates(features)
        slots = orders.shape[2]
        logits, clicks = [], []
        start = 0
        for uniform in uniforms:
            stop = start + uniform.shape[1] // orders.shape[1]
            rows = slice(start * slots, stop * slots)
            part = DocumentGates(gates.encoder_forward[rows], gates.encoder_backward[rows], gates.decoder[rows], slots)
            part_logits, part_clicks = self._decode(
                part, orders[start:stop], shown[start:stop], None, 0.0, None, uniform, static
            )
            logits.append(part_logits)
            clicks.append(part_clicks)
            start = stop
        return torch.cat(logits), torch.cat(clicks), shown
