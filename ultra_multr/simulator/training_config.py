"""How the user simulator is built and trained: the settings MULTR and the simulator report share.

:class:`SimulatorTrainingConfig` is read by the one training loop,
:func:`ultra_multr.simulator.trainer.train_simulator`.  MULTR's
hyper-parameters hold it as a group (``simulator``, through
:class:`ultra_multr.components.simulator_phase.SimulatorSettings`), and the
simulator report (``--simulator_hparams``) parses the same names with the
same defaults, so both train the same simulator from the same settings.
Each knob declares whether it is part of a saved simulator's identity
(``checkpoint=True``: :func:`ultra_multr.config.identity`); the network's
shape is, through the checkpoint's ``simulator_config``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from ultra_multr.config import Off, SameAs, knob, require
from ultra_multr.simulator.model import CELLS, DESIGNS, SimulatorConfig

SIMULATOR_OPTIMIZERS = ("adagrad", "adam")
CUDA_GRAPHS = ("auto", "on", "off")
#: teacher_forcing_unit's values: the observed-or-sampled choice is made per click or per batch.
TEACHER_FORCING_UNITS = ("click", "batch")
#: simulator_heldout_unit's values: what is held out to judge the simulator.
HELDOUT_UNITS = ("sessions", "queries")


@dataclass(frozen=True)
class SimulatorTrainingConfig:
    """The user simulator's network and training.

    Attributes:
        simulator_steps: most simulator training batches (0: Rand-MULTR);
            training stops earlier when early stopping says so.
        simulator_batch_size: sessions per simulator batch (paper: 256).
        simulator_learning_rate: simulator step size (paper: 0.05).
        simulator_optimizer: "adam" or "adagrad" (paper).
        simulator_l2: lambda of the simulator loss.
        simulator_max_gradient_norm: clip the simulator's gradient norm (<= 0:
            off); the ranker's is the algorithm's ``max_gradient_norm``.
        simulator_hidden_size: H (paper: 64).
        simulator_cell: "lstm" (paper) or "gru".
        simulator_input_mlp: hidden sizes of an input MLP (paper: none).
            Defaults: Adam 0.005 with an input MLP [128], which fit MQ2008's
            held-out clicks better than the paper's setting
            (settings/multr_paper.json has the paper's).
        simulator_position_size: decoder position-embedding size (0: none,
            the paper's decoder).
        teacher_forcing_ratio: share of observed (vs sampled) previous clicks
            fed to the decoder in training (paper: 1.0; default 0.5, the
            authors' code: a simulator trained on its own clicks half the time
            stays closer to the truth on re-ranked lists, the decile statistic
            of studies/simulator_designs).
        teacher_forcing_unit: "click" (each previous click observed or
            sampled on its own) or "batch" (the whole batch one or the other,
            the authors' code and the default).
        simulator_design: "context_aware" (the paper's network) or
            "factorised" (:mod:`ultra_multr.simulator.factorised`: relevance
            of the document's own features times examination by position and
            the last click above).
        simulator_dropout: dropout on the decoder's output in training (the
            authors' code and the default: 0.4; the paper: none).
        simulator_actions: 3 (unknown, skip, click) or 2 (skip, click: the
            authors' code and the default).
        simulator_position_dropout: in training, the share of lists whose
            decoder reads no position embedding (Zhang et al., KDD 2023).
        simulator_heldout_fraction: with a fixed click log, the share of its
            sessions held out from the simulator (at least one) to measure
            its click log-likelihood (:meth:`heldout_count`); with fresh
            clicks, held-out sessions are new draws instead.  Under
            ``simulator_heldout_unit=queries``, the share of training queries
            held out.
        simulator_heldout_unit: "sessions" (held-out sessions of the training
            queries: the queries the simulator imputes clicks for) or
            "queries" (held-out queries the simulator never trains on: model
            selection that does not reward what it learned of each logged
            order by heart).
        simulator_heldout_max_share: with a fixed click log, > 0 raises the
            held-out sessions to ``simulator_min_heldout_sessions`` where the
            fraction holds out fewer and the minimum is at most this share of
            the log (0: the fraction only; :meth:`heldout_count`).
        simulator_heldout_batches: batches of held-out sessions that
            measure the simulator's click log-likelihood.
        simulator_eval_every: measure the held-out log-likelihood (and write
            the intermediate checkpoint) every this many steps.
        simulator_patience: stop after this many evaluations without a
            better held-out log-likelihood and keep the best state (0: no
            early stopping; the last state is kept, as in the paper).
        simulator_log_every: progress line every this many simulator steps
            (0: none by steps); also one at least every ``LOG_SECONDS``
            seconds (:mod:`ultra_multr.simulator.trainer`).
        simulator_min_heldout_sessions: early stopping chooses a state (and
            MULTR's guard judges the simulator) only on at least this many
            distinct held-out sessions; with fewer, early stopping is off
            (logged; the last state is kept, the paper's rule).
        cuda_graphs: "auto" (on when the device is CUDA), "on" or "off": the
            simulator's training replays whole updates as CUDA graphs (with
            Adam and teacher_forcing_ratio 1), and MULTR's
            ``imputation=sampled`` replays each step's sampling (the same
            clicks); see :mod:`ultra_multr.simulator.graphs`.
    """

    simulator_steps: int = knob(10000, checkpoint=True)
    simulator_batch_size: int = knob(256, checkpoint=True)
    simulator_learning_rate: float = knob(0.005, checkpoint=True)
    simulator_optimizer: str = knob("adam", checkpoint=True)
    simulator_l2: float = knob(1e-5, checkpoint=True)
    # split off from the ranker's max_gradient_norm, which clipped both before (runs that kept them equal stay valid)
    simulator_max_gradient_norm: float = knob(5.0, checkpoint=True, inert_when=SameAs("max_gradient_norm"))
    simulator_hidden_size: int = 64
    simulator_cell: str = "lstm"
    simulator_input_mlp: Tuple[int, ...] = (128,)
    simulator_position_size: int = 16
    # options added after runs and checkpoints existed: at their defaults they change nothing (inert)
    simulator_design: str = knob("context_aware", inert_when=Off("simulator_design", "context_aware"))
    # the authors' training (studies/simulator_designs: the screening's choice) became the default after runs existed;
    # no old_default declared: the fingerprint would drop the namings of the old values from the hyper-parameters,
    # and a study that had pinned every knob (simulator_designs) would see its runs go stale
    simulator_dropout: float = knob(0.4, inert_when=Off("simulator_dropout", 0.0))
    simulator_actions: int = knob(2, inert_when=Off("simulator_actions", 3))
    simulator_position_dropout: float = knob(0.0, inert_when=Off("simulator_position_dropout", 0.0))
    teacher_forcing_ratio: float = knob(0.5, checkpoint=True)
    teacher_forcing_unit: str = knob("batch", checkpoint=True, inert_when=Off("teacher_forcing_unit", "click"))
    simulator_heldout_fraction: float = knob(0.1, checkpoint=True)
    simulator_heldout_max_share: float = knob(0.0, checkpoint=True,
                                              inert_when=Off("simulator_heldout_max_share", 0.0))
    simulator_heldout_unit: str = knob("sessions", checkpoint=True,
                                       inert_when=Off("simulator_heldout_unit", "sessions"))
    simulator_heldout_batches: int = knob(4, checkpoint=True)
    simulator_eval_every: int = knob(250, checkpoint=True)
    simulator_patience: int = knob(5, checkpoint=True)
    simulator_log_every: int = 500
    simulator_min_heldout_sessions: int = knob(300, checkpoint=True)
    cuda_graphs: str = "auto"

    def __post_init__(self) -> None:
        require(self.simulator_steps >= 0, "simulator_steps must be >= 0, got %d" % self.simulator_steps)
        require(self.simulator_batch_size > 0, "simulator_batch_size must be > 0")
        require(
            self.simulator_cell in CELLS, "simulator_cell must be one of %s, got %r" % (CELLS, self.simulator_cell)
        )
        require(self.simulator_design in DESIGNS,
                "simulator_design must be one of %s, got %r" % (DESIGNS, self.simulator_design))
        require(self.teacher_forcing_unit in TEACHER_FORCING_UNITS,
                "teacher_forcing_unit must be one of %s, got %r" % (TEACHER_FORCING_UNITS, self.teacher_forcing_unit))
        require(self.simulator_heldout_unit in HELDOUT_UNITS,
                "simulator_heldout_unit must be one of %s, got %r" % (HELDOUT_UNITS, self.simulator_heldout_unit))
        require(
            self.simulator_optimizer in SIMULATOR_OPTIMIZERS,
            "simulator_optimizer must be one of %s, got %r" % (SIMULATOR_OPTIMIZERS, self.simulator_optimizer),
        )
        require(
            0.0 <= self.teacher_forcing_ratio <= 1.0,
            "teacher_forcing_ratio must be in [0, 1], got %r" % self.teacher_forcing_ratio,
        )
        require(
            0.0 < self.simulator_heldout_fraction < 1.0,
            "simulator_heldout_fraction must be in (0, 1), got %r" % self.simulator_heldout_fraction,
        )
        require(
            0.0 <= self.simulator_heldout_max_share < 1.0,
            "simulator_heldout_max_share must be in [0, 1), got %r" % self.simulator_heldout_max_share,
        )
        require(self.simulator_heldout_batches > 0, "simulator_heldout_batches must be > 0")
        require(self.simulator_eval_every > 0, "simulator_eval_every must be > 0, got %d" % self.simulator_eval_every)
        require(self.simulator_patience >= 0, "simulator_patience must be >= 0, got %d" % self.simulator_patience)
        require(self.simulator_min_heldout_sessions >= 0, "simulator_min_heldout_sessions must be >= 0")
        require(
            self.cuda_graphs in CUDA_GRAPHS, "cuda_graphs must be one of %s, got %r" % (CUDA_GRAPHS, self.cuda_graphs)
        )
        object.__setattr__(self, "simulator_input_mlp", tuple(self.simulator_input_mlp))

    def simulator_config(self, feature_size: int, list_size: int) -> SimulatorConfig:
        """The network of these settings for ``feature_size`` features and lists of ``list_size``."""
        return SimulatorConfig(
            feature_size=feature_size,
            list_size=list_size,
            hidden_size=self.simulator_hidden_size,
            cell=self.simulator_cell,
            input_mlp=self.simulator_input_mlp,
            position_size=self.simulator_position_size,
            design=self.simulator_design,
            dropout=self.simulator_dropout,
            actions=self.simulator_actions,
            position_dropout=self.simulator_position_dropout,
        )

    def heldout_share(self, n_sessions: int) -> int:
        """``max(1, round(simulator_heldout_fraction * n_sessions))``: the sessions the fraction alone holds out."""
        return max(1, int(round(self.simulator_heldout_fraction * n_sessions)))

    def heldout_count(self, n_sessions: int, log: str = "") -> int:
        """Sessions of a fixed click log of ``n_sessions`` held out from the simulator:
        :meth:`heldout_share`, raised to ``simulator_min_heldout_sessions``
        where that is at most ``simulator_heldout_max_share`` of the log.
        Fewer held-out sessions than the minimum leave the simulator unjudged
        (no early stopping, and ``simulator_guard=position`` does not use it):
        with ``simulator_heldout_max_share=0.25`` a log of 4 to 10 times the
        minimum (1,200 to 3,000 sessions at the defaults) gives up a little
        more of its training share instead of its simulator.

        Args:
            log: what the log is, for the error message (e.g. its queries).

        Raises:
            ValueError: no session would be left to train on.
        """
        n_heldout = self.heldout_share(n_sessions)
        if n_heldout < self.simulator_min_heldout_sessions <= self.simulator_heldout_max_share * n_sessions:
            n_heldout = self.simulator_min_heldout_sessions
        if n_sessions - n_heldout < 1:
            raise ValueError(
                "simulator_heldout_fraction=%g of a click log of %d sessions%s leaves no session to train the user "
                "simulator on; it needs at least 2 sessions" % (self.simulator_heldout_fraction, n_sessions, log)
            )
        return n_heldout
