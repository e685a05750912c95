"""``tune=<hparam>``: a baseline's validation pilot, the same budget MULTR's ``rerank_weight=auto`` gets.

MULTR chooses the weight of its re-ranked term by a pilot scored on the
validation labels (:mod:`.pilot`).  A fair study gives every other
method the same: ``tune=learning_rate,tune_grid=[0.01,0.05,0.2]`` (or
``max_propensity_weight`` for DLA and IPW) trains a copy of the ranker from
the same initial state for ``tune_pilot_steps`` updates per candidate, on the
training click stream (the same feed class and hyper-parameters, on the
pilot's own seed stream; with a click log, the same log), scores it on the
validation split with the settings' ``objective_metric``, keeps the best
(ties: the earlier candidate), logs every score and restores the algorithm's
state exactly, so the real run starts as if the value had been given.  Its
sessions count in the run's click budget (phase ``tuning_pilot``).  A
candidate whose loss becomes non-finite is dropped (warned) and the others
compete.  MULTR takes the same pilot: its user simulator is trained once,
before the pilot, and shared by every candidate.

With fewer than ``pilot_min_queries`` validation queries, or outside main.py
(no validation split), the configured value is kept and the log says why.
"""
from __future__ import annotations

import dataclasses
import logging

from ultra_multr.components.pilot import DEFAULT_BATCH_SIZE, pilot_scores, read_validation_set, record_choice
from ultra_multr.compat import runtime

LOGGER = logging.getLogger("ultra_multr")


def set_hparam(algorithm, name: str, value: float) -> None:
    """Give ``algorithm`` the hyper-parameter ``name`` = ``value`` (read when used)."""
    algorithm.hparams = dataclasses.replace(algorithm.hparams, **{name: value})
    algorithm.learning_rate = algorithm.hparams.learning_rate  # ULTRA's attribute


def tune(algorithm, valid_set=None, batch_size: int = None) -> float:
    """Choose ``algorithm.hparams.tune`` from ``tune_grid`` by the validation pilot; sets and returns it, and
    writes it, with how it was chosen, into the run's ledger (decision ``tune``, :func:`.pilot.record_choice`).

    Args:
        valid_set: the validation split (padded to ``max_candidate_num``);
            None: main.py's (:func:`.pilot.read_validation_set`).
        batch_size: lists per pilot update; None: main.py's ``--batch_size``.
    """
    config = algorithm.hparams
    name, configured = config.tune, getattr(config, config.tune)
    args = runtime.main_args()
    if valid_set is None:
        valid_set = read_validation_set(algorithm.exp_settings)
    facts = {"hparam": name, "configured": configured, "pilot_min_queries": config.pilot_min_queries}
    if valid_set is None:
        LOGGER.warning("tune=%s: no validation split (not run by main.py); keeping %s = %g", name, name, configured)
        record_choice("tune", configured, "no_validation_split", **facts)
        return configured
    if len(valid_set.initial_list) < config.pilot_min_queries:
        LOGGER.warning(
            "tune=%s: only %d validation queries (< pilot_min_queries=%d): too little evidence to choose; "
            "keeping %s = %g", name, len(valid_set.initial_list), config.pilot_min_queries, name, configured,
        )
        record_choice("tune", configured, "too_few_validation_queries", valid_set, **facts)
        return configured
    batch_size = batch_size or (args.batch_size if args is not None else DEFAULT_BATCH_SIZE)
    scores = pilot_scores(
        algorithm, valid_set, config.tune_grid, config.tune_pilot_steps, batch_size,
        apply=lambda target, value: set_hparam(target, name, value), phase="tuning_pilot",
    )
    chosen = max(scores, key=lambda value: scores[value])  # first of the best on ties (the grid's order)
    set_hparam(algorithm, name, chosen)
    LOGGER.info(
        "tune=%s: pilot of %d steps, %s by value: %s; chosen %s = %g",
        name, config.tune_pilot_steps, algorithm.exp_settings.get("objective_metric", "validation metric"),
        ", ".join("%g: %.4f" % kv for kv in scores.items()), name, chosen,
    )
    record_choice("tune", chosen, "pilot", valid_set, scores, **facts)
    return chosen


__all__ = ["set_hparam", "tune"]
