"""MULTR (Luo et al., WSDM 2023) as a ULTRA learning algorithm.

Algorithm 1 of the paper inside ULTRA's unmodified ``main.py``:

1. Before the first ranker update, the context-aware user simulator is
   trained for ``simulator_steps`` batches of the training click stream (the
   same feed main.py trains the ranker with), then frozen.  Its checkpoint is
   saved beside the ranker's (``<model_dir>/<learning_algorithm>.simulator.ckpt``)
   and reused when present and of the same configuration.  ``simulator_steps=0``
   keeps the random initialisation (Rand-MULTR) and never loads a checkpoint.
2. Every ranker update is DLA's update with the ranking loss replaced by the
   doubly-robust loss of Eq. dr_loss: ``sample_num`` independent random
   re-rankings per query, pseudo clicks sampled from the frozen simulator on
   the observed list and on every re-ranking, the observed list corrected
   with DLA's inverse propensity weights, everything averaged over
   ``|Pi| = sample_num + 1`` lists.  ``variant=eib`` gives EIB-MULTR.
   ``imputation=expected`` uses the pseudo clicks' expectations instead,
   estimated once per training list after the simulator is frozen (the
   loss's expectation is the same; see :mod:`ultra_multr.imputation`).

Where this follows the paper and where it differs:

* Follows: BiLSTM context encoder, LSTM click decoder over
  ``[W1 h_pi; W2 x_t; W3 a_{t-1}]`` with three action embeddings, sigmoid
  click probabilities, BCE + L2 simulator loss, DLA's propensity model and
  examination loss unchanged, Delta = the listwise softmax cross-entropy term
  of a clicked document, the 1/|Pi| average, sampling instead of all N!
  permutations (the paper's footnote).
* Adds: a position embedding in the decoder input (the decoder otherwise
  knows the position only through its recurrence); options ``cell=gru``, an
  input MLP and a teacher-forcing ratio (defaults are the paper's).
* Differs: re-rankings permute a query's *displayed* valid documents only
  (padding stays out of displayed slots); Delta does not depend on the order,
  so the loss is computed as per-document weights times one softmax instead
  of one softmax per list (equal by construction, and tested against the
  literal formula).  The simulator learns from every session of the feed,
  including sessions without clicks, because a click model must also
  predict those; the ranker, as in DLA, sees only sessions with a click.
  EIB takes the observed list's real clicks without propensity correction
  and the re-rankings' pseudo clicks, as the EIB estimator does.
* Batch reduction: the mean of Eq. dr_loss over the batch's queries.

The paper presents MULTR as a plug-in for any IPW method.  The plug-in is
:class:`DoublyRobustMixin` (simulator + pseudo clicks + doubly-robust loss);
:class:`MULTR` is that mixin on DLA, and
:class:`ultra_multr.algorithms.multr_ipw.MULTR_IPW` the same mixin on IPW with
given propensities.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
import ultra

from .. import losses
from ..compat import runtime
from ..compat.runtime import Batch
from ..config import require
from ..imputation import IMPUTATION_MODES, PseudoClickCache
from ..randomization import random_permutations, to_document_order
from ..simulator import (
    CELLS,
    ContextAwareUserSimulator,
    SimulatorConfig,
    check_compatible,
    click_log_likelihood,
    load_simulator,
    save_simulator,
    simulator_update,
)
from .base import LOGGER, AlgorithmConfig
from .dla import DLA, DLAConfig

SIMULATOR_OPTIMIZERS = ("adagrad", "adam")


@dataclass(frozen=True)
class DoublyRobustConfig(AlgorithmConfig):
    """Hyper-parameters of the doubly-robust plug-in (simulator + DR loss).

    Attributes:
        sample_num: randomised re-rankings per query (>= 0; paper's best: 8).
        variant: "dr" (MULTR) or "eib" (EIB-MULTR).
        simulator_steps: simulator training batches (0: Rand-MULTR).
        simulator_batch_size: sessions per simulator batch (paper: 256).
        simulator_learning_rate: simulator step size.
        simulator_optimizer: "adagrad" (paper) or "adam".
        simulator_l2: lambda of the simulator loss.
        simulator_hidden_size: H (paper: 64).
        simulator_cell: "lstm" (paper) or "gru".
        simulator_input_mlp: hidden sizes of an input MLP (paper: none).
        simulator_position_size: decoder position-embedding size.
        teacher_forcing_ratio: share of observed (vs sampled) previous clicks
            fed to the decoder in training (paper: 1.0).
        simulator_checkpoint: where to save / load the simulator (empty:
            beside the ranker's checkpoint in main.py's --model_dir).
        simulator_heldout_batches: batches of sessions held out to report
            the simulator's click log-likelihood.
        simulator_log_every: progress line every this many simulator steps.
        imputation: "sampled" (pseudo clicks sampled every step, the paper's)
            or "expected" (their expectations, estimated once per training
            list after the simulator is frozen; see ultra_multr.imputation).
        imputation_samples: Monte-Carlo sessions per list and order type of
            "expected" (standard error <= 0.5 / sqrt(imputation_samples)).
    """

    sample_num: int = 8
    variant: str = "dr"
    simulator_steps: int = 10000
    simulator_batch_size: int = 256
    simulator_learning_rate: float = 0.05
    simulator_optimizer: str = "adagrad"
    simulator_l2: float = 1e-5
    simulator_hidden_size: int = 64
    simulator_cell: str = "lstm"
    simulator_input_mlp: Tuple[int, ...] = field(default_factory=tuple)
    simulator_position_size: int = 16
    teacher_forcing_ratio: float = 1.0
    simulator_checkpoint: str = ""
    simulator_heldout_batches: int = 4
    simulator_log_every: int = 500
    imputation: str = "sampled"
    imputation_samples: int = 256

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.sample_num >= 0, "sample_num must be >= 0, got %d" % self.sample_num)
        require(self.variant in losses.VARIANTS, "variant must be one of %s, got %r" % (losses.VARIANTS, self.variant))
        require(self.simulator_steps >= 0, "simulator_steps must be >= 0, got %d" % self.simulator_steps)
        require(self.simulator_batch_size > 0, "simulator_batch_size must be > 0")
        require(
            self.simulator_cell in CELLS, "simulator_cell must be one of %s, got %r" % (CELLS, self.simulator_cell)
        )
        require(
            self.simulator_optimizer in SIMULATOR_OPTIMIZERS,
            "simulator_optimizer must be one of %s, got %r" % (SIMULATOR_OPTIMIZERS, self.simulator_optimizer),
        )
        require(
            0.0 <= self.teacher_forcing_ratio <= 1.0,
            "teacher_forcing_ratio must be in [0, 1], got %r" % self.teacher_forcing_ratio,
        )
        require(
            self.imputation in IMPUTATION_MODES,
            "imputation must be one of %s, got %r" % (IMPUTATION_MODES, self.imputation),
        )
        require(self.imputation_samples >= 1, "imputation_samples must be >= 1, got %d" % self.imputation_samples)
        object.__setattr__(self, "simulator_input_mlp", tuple(self.simulator_input_mlp))


@dataclass(frozen=True)
class MULTRConfig(DLAConfig, DoublyRobustConfig):
    """MULTR's hyper-parameters: DLA's plus :class:`DoublyRobustConfig`'s."""


class DoublyRobustMixin:
    """MULTR's plug-in for an IPW algorithm: put it first among the bases.

    The host algorithm (a :class:`~ultra_multr.algorithms.base.PluginAlgorithm`
    whose ``config_class`` includes :class:`DoublyRobustConfig`) must compute
    its inverse propensity weights in ``training_loss`` and pass them to
    ``self.ranking_loss(batch, scores, weights) -> (loss, parts)``; this mixin
    replaces that ranking loss with Eq. dr_loss and trains the simulator
    before the first update.  Everything else (propensity estimation, other
    losses, optimizers) stays the host's.
    """

    def __init__(self, data_set, exp_settings: dict) -> None:
        super().__init__(data_set, exp_settings)
        config = self.hparams
        self.simulator_config = SimulatorConfig(
            feature_size=self.feature_size,
            list_size=self.rank_list_size,
            hidden_size=config.simulator_hidden_size,
            cell=config.simulator_cell,
            input_mlp=config.simulator_input_mlp,
            position_size=config.simulator_position_size,
        )
        self.simulator = ContextAwareUserSimulator(self.simulator_config).to(self.device)
        self.simulator_checkpoint = self._checkpoint_path()
        self.generator = torch.Generator(device=self.device)
        if config.seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(config.seed)
        self._train_set = data_set
        self._simulator_ready = False

    # -- phase 1: the user simulator -------------------------------------
    def _checkpoint_path(self) -> Optional[str]:
        if self.hparams.simulator_checkpoint:
            return self.hparams.simulator_checkpoint
        args = runtime.main_args()
        if args is None:
            return None
        name = self.exp_settings.get("learning_algorithm", type(self).__name__)
        return os.path.join(args.model_dir, "%s.simulator.ckpt" % name)

    def _checkpoint_metadata(self) -> Dict:
        config = self.hparams
        return {
            "simulator_steps": config.simulator_steps,
            "simulator_batch_size": config.simulator_batch_size,
            "simulator_learning_rate": config.simulator_learning_rate,
            "simulator_optimizer": config.simulator_optimizer,
            "simulator_l2": config.simulator_l2,
            "teacher_forcing_ratio": config.teacher_forcing_ratio,
            "train_input_feed": self.exp_settings.get("train_input_feed"),
            "train_input_hparams": self.exp_settings.get("train_input_hparams"),
            "seed": config.seed,
        }

    def prepare_simulator(self) -> None:
        """Load, or train and save, the simulator; then freeze it."""
        steps = self.hparams.simulator_steps
        path = self.simulator_checkpoint
        if steps > 0 and path and os.path.exists(path):
            loaded, metadata = load_simulator(path, self.device)
            check_compatible(loaded.config, self.feature_size, self.rank_list_size, path)
            wanted = self._checkpoint_metadata()
            if loaded.config == self.simulator_config and all(metadata.get(k) == v for k, v in wanted.items()):
                LOGGER.info("user simulator: reusing %s (held-out LL %s)", path, metadata.get("heldout_log_likelihood"))
                self.simulator = loaded.to(self.device)
                steps = 0
            else:
                LOGGER.info("user simulator: %s was trained with other settings; training a new one", path)
        if steps > 0:
            metadata = self.train_simulator(steps)
            if path:
                save_simulator(path, self.simulator, metadata)
                LOGGER.info("user simulator: saved %s", path)
        elif self.hparams.simulator_steps == 0:
            LOGGER.info("user simulator: simulator_steps=0, keeping the random initialisation (Rand-MULTR)")
        self.simulator.eval()
        for parameter in self.simulator.parameters():
            parameter.requires_grad_(False)
        self._simulator_ready = True
        if self.hparams.imputation == "expected":
            self.pseudo_click_cache = PseudoClickCache(self.simulator, self.hparams.imputation_samples, self.generator)
            self.pseudo_click_cache.add_data_set(self._train_set)

    def _click_feed(self):
        """A second instance of main.py's training feed, for simulator batches."""
        feed_class = ultra.utils.find_class(self.exp_settings["train_input_feed"])
        return feed_class(self, self.hparams.simulator_batch_size, self.exp_settings.get("train_input_hparams", ""))

    def _session_batch(self, feed) -> Batch:
        input_feed, _ = feed.get_batch(self._train_set, check_validation=False)
        batch = self.batch(input_feed, self.rank_list_size)
        if not bool(((batch.labels == 0) | (batch.labels == 1)).all()):
            raise ValueError(
                "train_input_feed %s gives labels other than 0/1 (max %g): the user simulator "
                "learns from clicks; use a click feed, not relevance labels"
                % (self.exp_settings["train_input_feed"], float(batch.labels.max()))
            )
        return batch

    def simulator_log_likelihood(self, batches: List[Batch]) -> Tuple[float, List[float]]:
        """Mean held-out log-likelihood per session and per-position mean."""
        self.simulator.eval()
        total, sessions = 0.0, 0
        per_position = torch.zeros(self.rank_list_size, device=self.device)
        shown = torch.zeros(self.rank_list_size, device=self.device)
        with torch.no_grad():
            for batch in batches:
                logits = self.simulator.click_logits(batch.features, batch.mask, batch.labels)
                log_lik = click_log_likelihood(logits, batch.labels, batch.mask)
                total += float(log_lik.sum())
                sessions += batch.batch_size
                per_position += log_lik.sum(0)
                shown += batch.mask.sum(0)
        return total / max(sessions, 1), (per_position / shown.clamp(min=1)).tolist()

    def train_simulator(self, steps: int) -> Dict:
        """Algorithm 1, lines 2-5. Returns the checkpoint metadata."""
        config = self.hparams
        feed = self._click_feed()
        heldout = [self._session_batch(feed) for _ in range(config.simulator_heldout_batches)]
        parameters = self.simulator.parameters()
        if config.simulator_optimizer == "adam":
            optimizer = torch.optim.Adam(parameters, lr=config.simulator_learning_rate)
        else:
            optimizer = torch.optim.Adagrad(parameters, lr=config.simulator_learning_rate)
        LOGGER.info("user simulator: training for %d steps of %d sessions", steps, config.simulator_batch_size)
        for step in range(1, steps + 1):
            batch = self._session_batch(feed)
            loss = simulator_update(
                self.simulator,
                optimizer,
                batch.features,
                batch.mask,
                batch.labels,
                config.simulator_l2,
                config.max_gradient_norm,
                config.teacher_forcing_ratio,
                self.generator,
                step,
            )
            if step == steps or (config.simulator_log_every and step % config.simulator_log_every == 0):
                heldout_ll, _ = self.simulator_log_likelihood(heldout)
                LOGGER.info(
                    "user simulator: step %d/%d loss %.4f held-out click log-likelihood %.4f per session",
                    step, steps, loss, heldout_ll,
                )
        heldout_ll, per_position = self.simulator_log_likelihood(heldout)
        return dict(
            self._checkpoint_metadata(),
            heldout_log_likelihood=heldout_ll,
            heldout_log_likelihood_per_position=per_position,
            simulator_config=asdict(self.simulator_config),
        )

    # -- phase 2: the doubly-robust ranker update ------------------------
    def pseudo_clicks(self, batch: Batch) -> Tuple[torch.Tensor, torch.Tensor]:
        """Pseudo clicks on the observed list [B, N] and on ``sample_num``
        random re-rankings, in observed-list slots [B, S, N].  With
        ``imputation=expected`` both are expectations, the same for every
        re-ranking (an expanded view)."""
        if self.hparams.imputation == "expected":
            observed, randomized = self.pseudo_click_cache.lookup(batch.features, batch.mask)
            return observed, randomized.unsqueeze(1).expand(-1, self.hparams.sample_num, -1)
        permutations = random_permutations(batch.mask, self.hparams.sample_num, self.generator)
        identity = torch.arange(batch.mask.shape[1], device=self.device).expand(batch.batch_size, 1, -1)
        orders = torch.cat([identity, permutations], dim=1)
        with torch.no_grad():
            clicks = self.simulator.sample_clicks(batch.features, batch.mask, orders, self.generator)
        return clicks[:, 0], to_document_order(clicks[:, 1:], permutations)

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        if not self._simulator_ready:  # Algorithm 1: simulator first, once
            self.prepare_simulator()
        return super().training_loss(batch)

    def ranking_loss(
        self, batch: Batch, scores: torch.Tensor, weights: torch.Tensor
    ) -> Tuple[torch.Tensor, Dict[str, float]]:
        observed, randomized = self.pseudo_clicks(batch)
        loss = losses.dr_loss(scores, batch.mask, batch.labels, observed, randomized, weights, self.hparams.variant)
        return loss, {"pseudo_clicks_per_list": float(observed.sum(-1).mean())}


class MULTR(DoublyRobustMixin, DLA):
    """DLA + context-aware user simulator + doubly-robust ranking loss."""

    config_class = MULTRConfig
