"""``rerank_weight=auto``: the re-ranked term's weight a chosen on the validation split.

MULTR's loss mixes the observed list's doubly-robust term with the simulator's
clicks on random re-rankings, the latter with share a (the formula:
docs/estimator.md; the paper fixes a = S / (S + 1)).  The simulator only ever saw
each query's logged order, so its clicks on other orders are extrapolation
whose worth depends on the data.  The pilot measures it: for every candidate
a, a copy of the ranker and propensity model, from the same initial state,
is trained for ``rerank_pilot_steps`` updates on the training click stream
(its own feed instance: the training feed's class and hyper-parameters, the
same batches for every candidate, drawn from a seed stream distinct from
main.py's) and scored on the validation split with the settings'
``objective_metric``.  The best a is kept (ties: the earlier candidate), every
candidate's score is logged, and the algorithm's state is restored exactly
(parameters, optimizers, step count, every random number generator), so the
real run then starts from its initial state as if a had been given.

Only the validation split reaches this module: it never reads a test set.
"""
from __future__ import annotations

import copy
import logging
import math
import random
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Tuple

import numpy as np
import torch
import ultra

from ultra_multr import tensorboard
from ultra_multr.compat import runtime
from ultra_multr.session_budget import CHOSEN_BY, LEDGER

LOGGER = logging.getLogger("ultra_multr")

#: Lists per pilot update outside main.py (main.py's own default --batch_size).
DEFAULT_BATCH_SIZE = 256
#: Distinguishes the pilot's seed stream from main.py's feed (same seed hparam).
PILOT_STREAM = 7919


def read_validation_set(exp_settings: dict):
    """main.py's validation split, padded as main.py pads it: main.py's own (no second read) when
    called from its training loop, else read; None outside main.py."""
    args = runtime.main_args()
    if args is None:
        return None
    valid_set = runtime.main_py_local("valid_set")
    if valid_set is not None and getattr(valid_set, "rank_list_size", None) == int(exp_settings["max_candidate_num"]):
        return valid_set
    valid_set = ultra.utils.read_data(args.data_dir, args.valid_data_prefix, args.click_model_dir, args.max_list_cutoff)
    feed_class = ultra.utils.find_class(exp_settings["train_input_feed"])
    feed_class.preprocess_data(valid_set, exp_settings["train_input_hparams"], exp_settings)
    valid_set.pad(int(exp_settings["max_candidate_num"]))
    return valid_set


@contextmanager
def restored_state(algorithm) -> Iterator[None]:
    """Run a block, then put back every module, optimizer, counter and RNG of ``algorithm``."""
    modules = {name: value for name, value in vars(algorithm).items() if isinstance(value, torch.nn.Module)}
    saved_modules = {name: copy.deepcopy(module.state_dict()) for name, module in modules.items()}
    saved_attributes = {
        name: getattr(algorithm, name)
        for name in ("_optimizers", "global_step", "train_summary", "eval_summary", "output", "hparams",
                     "learning_rate", "updates_started")
        if hasattr(algorithm, name)
    }
    generator = getattr(algorithm, "generator", None)  # MULTR's; the baselines draw from the global ones
    generator_state = generator.get_state() if generator is not None else None
    global_states = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    try:
        yield
    finally:
        for name, module in modules.items():
            module.load_state_dict(saved_modules[name])
        for name, value in saved_attributes.items():
            setattr(algorithm, name, value)
        if generator is not None:
            generator.set_state(generator_state)
        random.setstate(global_states[0])
        np.random.set_state(global_states[1])
        torch.set_rng_state(global_states[2])
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)


def pilot_feed(algorithm, batch_size: int):
    """A training feed like main.py's, on a distinct, fixed seed stream.

    ULTRA's own feeds draw from the global ``random`` module (seeded here and
    restored by :func:`restored_state`); ours draw from their ``generator``,
    reseeded here (a :class:`~ultra_multr.feeds.ClickLogFeed` keeps its log,
    which depends on its own seed alone, so every phase draws from one log).
    """
    settings = algorithm.exp_settings
    feed = ultra.utils.find_class(settings["train_input_feed"])(
        algorithm, batch_size, settings.get("train_input_hparams", "")
    )
    feed_seed = int(getattr(getattr(feed, "hparams", None), "seed", 0) or 0)
    seed = int(np.random.SeedSequence([feed_seed, PILOT_STREAM]).generate_state(1)[0])
    random.seed(seed)
    np.random.seed(seed)
    if isinstance(getattr(feed, "generator", None), torch.Generator):
        feed.generator.manual_seed(seed)
    return feed


def validation_metric(algorithm, valid_set) -> float:
    """The settings' ``objective_metric`` (default: the first metric) on ``valid_set``,
    merged over batches as main.py does."""
    settings = algorithm.exp_settings
    feed = ultra.utils.find_class(settings.get("valid_input_feed", "ultra.input_layer.DirectLabelFeed"))(
        algorithm, DEFAULT_BATCH_SIZE, settings.get("valid_input_hparams", "")
    )
    summaries, sizes, index = [], [], 0
    while index < len(valid_set.initial_list):
        input_feed, info_map = feed.get_next_batch(index, valid_set, check_validation=False)
        _, _, summary = algorithm.validation(input_feed)
        summaries.append(dict(summary))
        sizes.append(len(info_map["input_list"]))
        index += sizes[-1]
    merged = ultra.utils.merge_Summary(summaries, sizes)
    metric = settings.get("objective_metric") or next(iter(merged))
    if metric not in merged:
        raise ValueError(
            "objective_metric %r is not among the validation metrics %s (settings 'metrics'/'metrics_topn')"
            % (metric, sorted(merged))
        )
    return float(merged[metric])


def pilot_scores(
    algorithm, valid_set, candidates: Sequence[float], steps: int, batch_size: int,
    apply: Callable[[Any, float], None], phase: str,
) -> Dict[float, float]:
    """Validation score of each candidate after ``steps`` pilot updates from the current state.

    Each run sets its candidate with ``apply(algorithm, value)`` (e.g. a of
    Eq. dr_loss), goes through ``algorithm.train`` (the real update:
    losses, optimizers, clipping) and leaves no trace: the state is restored
    after it.  Its sessions count in the run's budget under ``phase``.  A
    candidate whose training loss is not finite (``FloatingPointError`` from
    ``train``, which names the step) or whose validation score is not finite
    is dropped, with a warning: it gets no score, and the others go on.

    Raises:
        FloatingPointError: every candidate's loss was not finite.
    """
    scores: Dict[float, float] = {}
    failures = []
    for weight in candidates:
        with restored_state(algorithm), tensorboard.paused(), LEDGER.in_phase(phase):
            feed = pilot_feed(algorithm, batch_size)
            algorithm._optimizers = None  # a fresh optimizer, as the real run starts with
            algorithm.global_step = 0
            algorithm.updates_started = True  # the pilot's updates are not the run's (no "first update" line)
            apply(algorithm, weight)
            try:
                for _ in range(steps):
                    input_feed, _ = feed.get_batch(algorithm._train_set, check_validation=True)
                    algorithm.train(input_feed)
            except FloatingPointError as error:
                failures.append("%g: %s" % (weight, error))
                LOGGER.warning("%s: candidate %g dropped, its pilot stopped: %s", phase, weight, error)
                continue
            score = validation_metric(algorithm, valid_set)
            if not math.isfinite(score):
                failures.append("%g: validation score %r" % (weight, score))
                LOGGER.warning("%s: candidate %g dropped, its validation score is %r", phase, weight, score)
                continue
            scores[weight] = score
    if not scores:
        raise FloatingPointError(
            "%s: every candidate's training loss became non-finite (%s); the run cannot choose among them"
            % (phase, "; ".join(failures))
        )
    return scores


def choose_by_validation(
    algorithm, valid_set, candidates: Sequence[float], steps: int, batch_size: int,
    apply: Callable[[Any, float], None],
) -> Tuple[float, Dict[float, float]]:
    """The candidate a with the best validation score after the pilot (logged, set with ``apply``), and every
    candidate's score."""
    started = time.perf_counter()
    scores = pilot_scores(algorithm, valid_set, candidates, steps, batch_size, apply, "rerank_pilot")
    chosen = max(scores, key=lambda weight: scores[weight])  # first of the best on ties (candidates' order)
    metric = algorithm.exp_settings.get("objective_metric", "validation metric")
    LOGGER.info(
        "rerank_weight=auto: pilot of %d steps, %s by a: %s; chosen a = %.4f (%.1f s)",
        steps, metric, ", ".join("%.4f: %.4f" % kv for kv in scores.items()), chosen, time.perf_counter() - started,
    )
    return chosen, scores


def record_choice(
    name: str, chosen: float, by: str, valid_set=None, scores: Optional[Dict[float, float]] = None, **facts: Any
) -> None:
    """Write a pilot's choice into the run's ledger as the decision ``name`` (``rerank_weight``, ``tune``).

    Args:
        by: how it was chosen, one of :data:`ultra_multr.session_budget.CHOSEN_BY`.
        valid_set: the validation split it had (None: none), counted as ``validation_queries``.
        scores: each candidate's validation score, when its pilot ran.
        facts: more JSON-serialisable facts (e.g. ``pilot_min_queries``).
    """
    if by not in CHOSEN_BY:
        raise ValueError("unknown way of choosing %r; known: %s" % (by, ", ".join(CHOSEN_BY)))
    LEDGER.record_decision(name, dict(
        facts,
        chosen=chosen,
        by=by,
        validation_queries=None if valid_set is None else len(valid_set.initial_list),
        scores=None if scores is None else [[value, score] for value, score in scores.items()],
    ))


__all__ = [
    "DEFAULT_BATCH_SIZE", "choose_by_validation", "pilot_scores", "read_validation_set", "record_choice",
    "restored_state",
]
