"""Common plumbing of our ULTRA learning algorithms.

ULTRA's ``main.py`` drives an algorithm through three calls: the constructor
``(data_set, exp_settings)``, ``train(input_feed) -> (loss, None, summary)``
and ``validation(input_feed) -> (None, scores, summary)``, and reads the
attributes ``model``, ``global_step``, ``learning_rate``, ``rank_list_size``,
``feature_size``, ``letor_features_name``, ``docid_inputs_name`` and
``labels_name``.  :class:`PluginAlgorithm` implements that contract once;
subclasses provide :meth:`PluginAlgorithm.training_loss`.

Model selection by the algorithm's own loss: with ``objective_metric`` =
``click_loss_neg`` (:data:`~ultra_multr.compat.settings_check.CLICK_LOSS_OBJECTIVE`)
each validation summary also holds minus :meth:`PluginAlgorithm.click_loss` of
the batch's lists (their labels taken as clicks), so main.py, which keeps the
checkpoint of the largest objective, keeps the one of the smallest loss
(ultr-reproducibility's early stopping on its validation clicks).  Any other
objective computes nothing more.
"""
from __future__ import annotations

import atexit
import logging
import math
import random
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from ultra.learning_algorithm.base_algorithm import BaseAlgorithm

from ultra_multr import tensorboard
from ultra_multr.algorithms.examination import record_examination
from ultra_multr.batch import Batch, batch_from_input_feed
from ultra_multr.compat import runtime
from ultra_multr.compat.model_dir import check_model_dir
from ultra_multr.compat.settings_check import CLICK_LOSS_OBJECTIVE, check_settings_hparams
from ultra_multr.compat.startup import PROCESS_STARTED
from ultra_multr.config import parse_hparams, require
from ultra_multr.data import checks
from ultra_multr.session_budget import LEDGER, record_ranker_losses

LOGGER = logging.getLogger("ultra_multr")
#: The ranker's optimizers (``grad_strategy``): Adagrad (ULTRA's default), SGD, and AdamW with optax.adamw's defaults
#: (betas 0.9 / 0.999, eps 1e-8, decoupled weight decay 1e-4), the optimizer ultr-reproducibility trains with
#: (``optax.adamw(learning_rate=config.lr)`` in its main.py at 78d8060).
OPTIMIZER_CLASSES: Dict[str, Callable[..., torch.optim.Optimizer]] = {
    "ada": torch.optim.Adagrad,
    "sgd": torch.optim.SGD,
    "adamw": lambda params, lr: torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-4),
}
GRAD_STRATEGIES = tuple(OPTIMIZER_CLASSES)


def ensure_console_logging() -> None:
    """Show our INFO progress under main.py, which configures no logging."""
    if not logging.getLogger().handlers and not LOGGER.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[ultra_multr] %(message)s"))
        LOGGER.addHandler(handler)
        LOGGER.setLevel(logging.INFO)


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch.

    ULTRA's feeds draw queries with the global ``random`` module and main.py
    builds the algorithm before the feeds, so seeding here makes a whole CPU
    run of main.py repeat exactly.
    """
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


@dataclass(frozen=True)
class AlgorithmConfig:
    """Hyper-parameters every algorithm of ours accepts.

    Attributes:
        learning_rate: ranker learning rate.
        max_gradient_norm: clip each parameter group's gradient norm (<= 0: off).
        l2_loss: L2 weight on the ranker's parameters.
        grad_strategy: "ada" (Adagrad, ULTRA's default), "sgd" or "adamw" (:data:`OPTIMIZER_CLASSES`).
        rebuild_optimizer_each_step: ULTRA's DLA builds a new Adagrad every
            step, which makes every update ``lr * sign(grad)``; True
            reproduces that for parity with published ULTRA numbers.
        seed: seed of every random number generator (None: not seeded).
        device: "auto" (CUDA when available), "cpu", "cuda" or "cuda:K".
        log_every: log the training losses every this many steps (0: never).
        tune: "" (off) or the hyper-parameter a validation pilot chooses
            before the first update (:mod:`ultra_multr.algorithms.tuning`):
            one of ``TUNABLE`` that the algorithm has, e.g. learning_rate or
            max_propensity_weight; the same pilot budget as MULTR's
            ``rerank_weight=auto`` gives every baseline equal tuning.
        tune_grid: its candidate values (at least 2).
        tune_pilot_steps: ranker updates of each candidate's pilot run.
        pilot_min_queries: a pilot chooses only from at least this many
            validation queries; with fewer it keeps the configured value
            (logged).
    """

    learning_rate: float = 0.05
    max_gradient_norm: float = 5.0
    l2_loss: float = 0.0
    grad_strategy: str = "ada"
    rebuild_optimizer_each_step: bool = False
    seed: Optional[int] = None
    device: str = "auto"
    log_every: int = 50
    tune: str = ""
    tune_grid: Tuple[float, ...] = ()
    tune_pilot_steps: int = 200
    pilot_min_queries: int = 30

    def __post_init__(self) -> None:
        require(self.learning_rate > 0, "learning_rate must be > 0, got %r" % self.learning_rate)
        object.__setattr__(self, "tune_grid", tuple(float(v) for v in self.tune_grid))
        if self.tune:
            require(
                self.tune in TUNABLE and hasattr(self, self.tune),
                "tune must be one of %s that %s has, got %r"
                % (", ".join(TUNABLE), type(self).__name__, self.tune),
            )
            require(len(self.tune_grid) >= 2, "tune=%s needs a tune_grid of at least 2 values" % self.tune)
        require(self.tune_pilot_steps > 0, "tune_pilot_steps must be > 0, got %d" % self.tune_pilot_steps)
        require(self.pilot_min_queries >= 1, "pilot_min_queries must be >= 1, got %d" % self.pilot_min_queries)
        require(
            self.grad_strategy in GRAD_STRATEGIES,
            "grad_strategy must be one of %s, got %r" % (GRAD_STRATEGIES, self.grad_strategy),
        )
        require(self.l2_loss >= 0, "l2_loss must be >= 0, got %r" % self.l2_loss)


class Optimizers:
    """One optimizer per parameter group, created once.

    Args:
        groups: (parameters, learning rate) pairs, each stepped by its own
            optimizer with its own gradient-norm clipping (as DLA does).
        grad_strategy: one of :data:`GRAD_STRATEGIES`.
        max_gradient_norm: clip threshold (<= 0: no clipping).
        rebuild_each_step: recreate the optimizers before every step
            (ULTRA's behaviour, kept for parity only).
    """

    def __init__(
        self,
        groups: Sequence[Tuple[List[torch.nn.Parameter], float]],
        grad_strategy: str,
        max_gradient_norm: float,
        rebuild_each_step: bool = False,
    ) -> None:
        factory = OPTIMIZER_CLASSES[grad_strategy]
        self._make: Callable[[], List[torch.optim.Optimizer]] = lambda: [
            factory(params, lr=lr) for params, lr in groups
        ]
        self._groups = [params for params, _ in groups]
        self._optimizers = self._make()
        self._max_norm = max_gradient_norm
        self._rebuild = rebuild_each_step

    def step(self, loss: torch.Tensor) -> None:
        if self._rebuild:
            self._optimizers = self._make()
        for optimizer in self._optimizers:
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self._max_norm > 0:
            for params in self._groups:
                torch.nn.utils.clip_grad_norm_(params, self._max_norm)
        for optimizer in self._optimizers:
            optimizer.step()


#: Hyper-parameters ``tune`` may choose (they are read when used, not copied at construction).
TUNABLE = ("learning_rate", "max_propensity_weight")


class PluginAlgorithm(BaseAlgorithm):
    """ULTRA's algorithm contract, implemented once for our algorithms."""

    config_class = AlgorithmConfig

    def __init__(self, data_set, exp_settings: dict) -> None:  # noqa: D401 - ULTRA's signature
        ensure_console_logging()
        runtime.check_main_flags()
        args = runtime.main_args()
        # Every hyper-parameter string, ULTRA's classes' too, before the data checks and the model dir.
        check_settings_hparams(exp_settings, "settings file %s" % args.setting_file if args is not None else "the settings")
        runtime.mend_output_dir()
        runtime.write_ranklist_atomically()
        if args is not None:  # the files main.py reads: ULTRA's reader has hidden some problems by now
            started = time.perf_counter()
            checks.check_main_py_data(args)
            LOGGER.info("data checks of %s passed in %.1f s (files read once, hashed on the way)",
                        ", ".join(checks.splits_main_py_reads(args)), time.perf_counter() - started)
        self.exp_settings = exp_settings
        name = exp_settings.get("learning_algorithm", type(self).__name__)
        self.hparams = parse_hparams(
            self.config_class,
            exp_settings.get("learning_algorithm_hparams", ""),
            "learning_algorithm_hparams of %s" % name,
        )
        self.device = runtime.choose_device(self.hparams.device)
        if self.hparams.seed is not None:
            seed_everything(self.hparams.seed)
        self.max_candidate_num = int(exp_settings["max_candidate_num"])
        self.rank_list_size = int(exp_settings.get("selection_bias_cutoff", self.max_candidate_num))
        self.feature_size = int(data_set.feature_size)
        if args is not None and not args.test_only:  # before any phase of training (MULTR's simulator comes first)
            self._check_list_size()
        self._progress = check_model_dir(args, exp_settings, self.feature_size) if args is not None else None
        #: main.py validates (and may save the ranker) every this many updates (0: not run by main.py)
        self.validates_every = int(args.steps_per_checkpoint) if args is not None else 0
        if self._progress is not None:  # main.py validates (and may save) once more after the last update
            atexit.register(self._record_examination)
        self.letor_features_name = "letor_features"
        self.docid_inputs_name = ["docid_input{0}".format(i) for i in range(self.max_candidate_num)]
        self.labels_name = ["label{0}".format(i) for i in range(self.max_candidate_num)]
        self.model = runtime.create_ranking_model(exp_settings, self.feature_size, self.device)
        self.learning_rate = self.hparams.learning_rate
        self.global_step = 0
        self.train_summary: Dict[str, float] = runtime.EMPTY_SUMMARY
        self.eval_summary: Dict[str, float] = {}
        self.output = None
        self._optimizers: Optional[Optimizers] = None
        #: whether the run's first update has begun (a pilot's updates are not the run's: it sets this first)
        self.updates_started = False
        self._train_set = data_set
        #: whether :meth:`prepare_training` has run (once, before the first update)
        self._prepared = False
        #: whether validation reports :meth:`click_loss_summary` (the settings' objective asks for it)
        self.reports_click_loss = exp_settings.get("objective_metric") == CLICK_LOSS_OBJECTIVE
        require(
            not (self.reports_click_loss and self.hparams.tune == "max_propensity_weight"),
            "tune=max_propensity_weight changes the loss objective_metric=%s compares; choose it by a ranking "
            "metric" % CLICK_LOSS_OBJECTIVE,
        )

    # -- for subclasses --------------------------------------------------
    def prepare_training(self, valid_set=None, batch_size: Optional[int] = None) -> None:
        """The one named point before the first update, run once (:meth:`prepare`): where an algorithm's parts
        that learn before the ranker do so (MULTR's user simulator, then its ``rerank_weight=auto`` pilot), then
        the ``tune`` pilot (:mod:`ultra_multr.algorithms.tuning`).  An override calls this last.

        Args:
            valid_set, batch_size: the pilots' validation split and lists per update (None: main.py's).
        """
        if self.hparams.tune:
            from ultra_multr.algorithms.tuning import tune  # the pilot trains through train()

            tune(self, valid_set, batch_size)

    def parameter_groups(self) -> List[Tuple[List[torch.nn.Parameter], float]]:
        """(parameters, learning rate) per optimizer; default: the ranker."""
        return [(list(self.model.parameters()), self.hparams.learning_rate)]

    def training_loss(self, batch: Batch) -> Tuple[torch.Tensor, Dict[str, float]]:
        """The loss of one training batch and named parts for logging."""
        raise NotImplementedError

    def click_loss(self, batch: Batch) -> torch.Tensor:
        """[] The loss :meth:`training_loss` gives ``batch``, changing no training state (run in eval mode,
        without gradients, by :meth:`click_loss_summary`).

        This default is ``training_loss`` itself: an algorithm whose ``training_loss`` draws random numbers or
        updates an estimate overrides it (PairD, REM, MULTR).
        """
        return self.training_loss(batch)[0]

    def set_training_mode(self, training: bool) -> None:
        """Put every network ``training_loss`` runs into training (True) or eval mode; default: the ranker."""
        self.model.train(training)

    def training_curves(self) -> Dict[str, float]:
        """Curves (TensorBoard tag -> value) to log after each step besides the losses."""
        return {}

    def click_examination(self) -> Optional[torch.Tensor]:
        """[N] e_r = P(examined | rank r) of the algorithm's click model ``P(click) = e_r * sigmoid(score)``, each in
        (0, 1], as the Baidu-ULTR benchmark's click metric reads it (:mod:`ultra_multr.algorithms.examination`);
        None (this default): the algorithm has no such click model."""
        return None

    # -- shared helpers --------------------------------------------------
    def batch(self, input_feed: Dict[str, np.ndarray], list_size: int) -> Batch:
        return batch_from_input_feed(
            input_feed, self.docid_inputs_name[:list_size], self.labels_name[:list_size], self.device
        )

    def scores(self, batch: Batch, model: Optional[torch.nn.Module] = None) -> torch.Tensor:
        """Scores [B, L] of a batch by the ranker (or by ``model``, another ranking model)."""
        flat = batch.features.reshape(-1, batch.features.shape[-1])
        return runtime.score_documents(self.model if model is None else model, flat).reshape(batch.mask.shape)

    def ranker_l2(self) -> torch.Tensor:
        return self.hparams.l2_loss * sum((p * p).sum() for p in self.model.parameters()) / 2.0

    # -- ULTRA's contract ------------------------------------------------
    def trained_with(self) -> Tuple[str, str, Optional[str]]:
        """(whose losses the ranker trains with, them in words, why when they are another algorithm's), known once
        :meth:`prepare_training` has run.  Here: the algorithm's own; MULTR may train as its host."""
        name = type(self).__name__
        return name, "%s's losses" % name, None

    def prepare(self, valid_set=None, batch_size: Optional[int] = None) -> None:
        """:meth:`prepare_training`, once: the first update and the first validation loss call it (with main.py's
        validation split); a caller with a validation split of its own may call it first.  Then the run's ledger
        and log say, once, whose losses the ranker trains with (:meth:`trained_with`)."""
        if not self._prepared:
            self._prepared = True  # first: the pilots train through train()
            self.prepare_training(valid_set, batch_size)
            LOGGER.info(record_ranker_losses(type(self).__name__, *self.trained_with()))

    def train(self, input_feed: Dict[str, np.ndarray]):
        """One update. Returns (loss, None, summary) as ULTRA's main.py expects."""
        self.prepare()
        if self._progress is not None:  # which step main.py's checkpoint holds
            self._progress.step(self.global_step)
            self._record_examination()
        if not self.updates_started:
            self.updates_started = True
            LOGGER.info("ranker: first update starts %.1f s after the process started", time.time() - PROCESS_STARTED)
        if self._optimizers is None:
            runtime.open_training_writer()
            self._optimizers = Optimizers(
                self.parameter_groups(),
                self.hparams.grad_strategy,
                self.hparams.max_gradient_norm,
                self.hparams.rebuild_optimizer_each_step,
            )
        self.set_training_mode(True)
        batch = self.batch(input_feed, self.rank_list_size)
        loss, parts = self.training_loss(batch)
        if self.hparams.l2_loss > 0:
            loss = loss + self.ranker_l2()
        value = float(loss.detach())
        if not math.isfinite(value):
            raise FloatingPointError(
                "non-finite training loss %r at step %d (%s); stopping rather than training on it"
                % (value, self.global_step, ", ".join("%s=%.4g" % kv for kv in parts.items()))
            )
        self._optimizers.step(loss)
        self.global_step += 1
        if tensorboard.log_dir() is not None:
            tensorboard.scalars("train", dict(parts, loss=value), self.global_step)
            for tag, curve_value in self.training_curves().items():
                tensorboard.scalar(tag, curve_value, self.global_step)
        if self.hparams.log_every and self.global_step % self.hparams.log_every == 0:
            LOGGER.info(
                "step %d loss %.4f (%s)",
                self.global_step,
                value,
                ", ".join("%s %.4f" % kv for kv in parts.items()),
            )
        return value, None, self.train_summary

    def _record_examination(self) -> None:
        """Record :meth:`click_examination` beside main.py's checkpoint when main.py has just validated: its ranker may
        be the one main.py saved (main.py validates every ``--steps_per_checkpoint`` updates; not a pilot's
        updates, which count in another phase)."""
        if self.global_step == 0 or self.global_step % self.validates_every or LEDGER.phase != "ranker":
            return
        examination = self.click_examination()
        if examination is not None:
            record_examination(self._progress.checkpoint, self.global_step, examination.detach().cpu().tolist())

    def validation(self, input_feed: Dict[str, np.ndarray], is_online_simulation: bool = False):
        """Scores all candidates; returns (None, scores [B, L], metrics).

        The scores are a float32 numpy array: main.py --test_only writes
        ``str(score)`` into its ranklist (a tensor would print as
        ``tensor(0.1, device='cuda:0')``) and sorts each list by
        element-wise comparisons (one device sync each on CUDA).
        """
        self.model.eval()
        batch = self.batch(input_feed, self.max_candidate_num)
        with torch.no_grad():
            scores = self.scores(batch)
        self.output = scores.masked_fill(~batch.mask, self.PADDING_SCORE)
        if not is_online_simulation:
            self.eval_summary = runtime.ranking_metrics(
                batch.labels,
                scores,
                batch.mask,
                list(self.exp_settings.get("metrics", ["ndcg"])),
                list(self.exp_settings.get("metrics_topn", [10])),
            )
            args = runtime.main_args()
            if self.reports_click_loss and not (args is not None and args.test_only):
                self.eval_summary = dict(self.eval_summary, **self.click_loss_summary(input_feed))
        return None, self.output.cpu().numpy(), self.eval_summary

    def click_loss_summary(self, input_feed: Dict[str, np.ndarray]) -> Dict[str, float]:
        """``{"click_loss_neg": -loss}``: minus :meth:`click_loss` of a validation batch.

        The batch is read as the train step reads one: its first ``rank_list_size`` slots
        (``selection_bias_cutoff``), labels as clicks; every network in eval mode (no dropout draws, no
        running statistics updated: with such layers the value differs from the train step's, computed in
        training mode), no gradient.  The L2 penalty (``l2_loss``) is left out: it does not depend on the
        clicks.  main.py averages it over the validation batches weighted by their lists.
        """
        self.prepare()
        self.set_training_mode(False)
        batch = self.batch(input_feed, self.rank_list_size)
        with torch.no_grad():
            loss = float(self.click_loss(batch))
        return {CLICK_LOSS_OBJECTIVE: -loss}

    def _check_list_size(self) -> None:
        requested = runtime.requested_selection_bias_cutoff(self.exp_settings)
        if requested is not None and requested > self.rank_list_size:
            raise ValueError(
                "selection_bias_cutoff %d is longer than the longest list in the data (%d documents); "
                "ULTRA's main.py silently shortens it. Set --selection_bias_cutoff %d or less."
                % (requested, self.rank_list_size, self.rank_list_size)
            )
