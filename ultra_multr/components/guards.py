"""The guards of a user simulator: their knobs, and the logger guard.

Two guards keep an algorithm from learning from a simulator that would
mislead it (either way, loudly, the algorithm trains without it):

* the **logger guard** (``logger_guard=order_fit``), before the simulator is
  trained: a small ranker is fitted to the logged order of the training
  split's lists on the learner's features (on the first N positions the
  simulator sees, most queries fitted and the rest held out), and the same fit
  is made to null orders that come from those features by construction (a few
  linear and shallow rankers fitted, without a label, to the logged order of
  small samples of queries: :func:`ultra_multr.logged_order.logged_order_fit`).
  The rule (:func:`logger_guard_fires`):

  - with at least ``logger_guard_min_queries`` (50) training queries it
    **fires** when the fit's agreement with the logged order on the held-out
    pairs is more than ``logger_guard_margin`` (0.1) below its mean agreement
    with the null orders (the null agreement): the logged order is clearly
    harder to reproduce from these features than an order of these features,
    so the logger ordered by something the features do not carry, which a
    simulator fitted to the log would take for position (the stress group of
    studies/headroom).  Otherwise it **passes**;
  - with fewer, the comparison is not judged (below 50 queries the null and the
    logged agreements of a features-only and a label-aware logger overlap,
    studies/logger_guard), and MULTR keeps its simulator only when the fit
    reproduces at least ``logger_guard_threshold`` (0.95) of the held-out pairs,
    which needs no comparison (decision ``too_few_queries_kept``); otherwise it
    trains without one (``too_few_queries``).  Both are warned.

  The decision, the agreements and what they rest on go to the run's ledger
  (decision ``logger_guard``);
* the **simulator guard** (``simulator_guard=position``), after training: a
  simulator below a position-only click model on its held-out sessions, or
  measured on too few of them, is not used
  (:meth:`ultra_multr.components.simulator_phase.SimulatorPhase.run`).

The margin comes from studies/logger_guard (its calibration table, seeds 0-2): on MQ2008
folds 1-5 prepared with ``prepare folds`` at its defaults, the recipe sets of
studies/paper_setting and web-LETOR-like generated features with a Rank SVM
logger (150 and 20,000 training queries) the logged agreement is at most 0.071
below the null agreement; on the stress sets and with a label-aware logger at
least 0.139 below.  The guard is on by default
(``logger_guard=none`` switches it off, as the paper's and the authors'
settings files do).  The logged order's noise is as invisible to it as a
logger's knowledge: a features-only logger with per-session noise (the
Baidu-layout logs of studies/baidu) is as hard to reproduce as a label-aware one.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ultra_multr.config import Off, knob, require
from ultra_multr.feeds.arrays import QueryArrays
from ultra_multr.logged_order import OrderFit, logged_order_fit
from ultra_multr.session_budget import SessionLedger

LOGGER = logging.getLogger("ultra_multr")
SIMULATOR_GUARDS = ("position", "none")
LOGGER_GUARDS = ("none", "order_fit")


@dataclass(frozen=True)
class GuardSettings:
    """The guards' knobs (the group ``guards`` of MULTR's hyper-parameters).

    Attributes:
        simulator_guard: "position" (a trained simulator whose held-out click
            log-likelihood is below a position-only click-rate model fitted on
            its training sessions is rejected, and one measured on fewer than
            ``simulator_min_heldout_sessions`` distinct sessions is not
            validated; either way it is not used) or "none" (compared and
            logged only).
        logger_guard: "order_fit" (default) or "none" (the simulator is trained on any log: the paper's MULTR,
            ``settings/multr_paper.json``); its default was "none" until the paper_setting grid measured it.
        logger_guard_margin: how far below the null agreement the logged order's agreement must be for it to fire
            (0-0.5; with at least ``logger_guard_min_queries`` training queries).
        logger_guard_min_queries: training queries it needs to compare the logged order with the null orders.
        logger_guard_threshold: with fewer, the agreement at or above which the simulator is kept (0.5-1; it was the
            agreement below which the guard fired at any number of queries until issue 38).
    """

    simulator_guard: str = "position"
    logger_guard: str = knob("order_fit", old_default="none")
    logger_guard_threshold: float = 0.95
    logger_guard_min_queries: int = 50
    # added by issue 38: runs with logger_guard=none keep their fingerprints
    logger_guard_margin: float = knob(0.1, inert_when=Off("logger_guard", "none"))

    def __post_init__(self) -> None:
        require(self.simulator_guard in SIMULATOR_GUARDS,
                "simulator_guard must be one of %s, got %r" % (SIMULATOR_GUARDS, self.simulator_guard))
        require(self.logger_guard in LOGGER_GUARDS,
                "logger_guard must be one of %s, got %r" % (LOGGER_GUARDS, self.logger_guard))
        require(0.5 <= self.logger_guard_threshold <= 1.0,
                "logger_guard_threshold must be in [0.5, 1], got %r" % self.logger_guard_threshold)
        require(0.0 <= self.logger_guard_margin < 0.5,
                "logger_guard_margin must be in [0, 0.5), got %r" % self.logger_guard_margin)
        require(self.logger_guard_min_queries >= 2,
                "logger_guard_min_queries must be >= 2, got %r" % self.logger_guard_min_queries)


def fit_to_logged_order(arrays: QueryArrays, seed: int) -> OrderFit:
    """:func:`ultra_multr.logged_order.logged_order_fit` on every list of ``arrays`` (their first N positions, in
    the logged order), with a generator seeded by ``seed``."""
    queries = np.arange(arrays.n_queries)
    return logged_order_fit(torch.from_numpy(arrays.list_features(queries)), torch.from_numpy(arrays.mask[queries]),
                            torch.Generator().manual_seed(seed))


def logger_guard_fires(arrays: QueryArrays, guards: GuardSettings, seed: int, ledger: SessionLedger,
                       fallback: str) -> bool:
    """Run the logger guard on the training split's ``arrays`` (the rule of the module docstring); record
    (decision ``logger_guard``: "passed", "fired", "too_few_queries_kept" or "too_few_queries"), warn, and
    return whether the algorithm trains without a simulator.

    Args:
        seed: of the fit's held-out split and null rankers.
        fallback: what the algorithm does without a simulator, for the warning (e.g. "MULTR trains with DLA's own
            ranking and propensity losses instead").
    """
    judged = arrays.n_queries >= guards.logger_guard_min_queries
    try:
        fit: Optional[OrderFit] = fit_to_logged_order(arrays, seed)
    except ValueError:  # fewer than 2 queries, or no held-out pair: nothing to measure
        if judged:
            raise
        fit = None
    if judged:
        host = fit.agreement < fit.null_agreement - guards.logger_guard_margin
        decision = "fired" if host else "passed"
    else:
        host = fit is None or fit.agreement < guards.logger_guard_threshold
        decision = "too_few_queries" if host else "too_few_queries_kept"
    record = {"guard": guards.logger_guard, "decision": decision, "host_losses": host,
              "margin": guards.logger_guard_margin, "threshold": guards.logger_guard_threshold,
              "training_queries": arrays.n_queries, "min_queries": guards.logger_guard_min_queries}
    if fit is not None:
        record.update(agreement=fit.agreement, null_agreement=fit.null_agreement,
                      null_agreements=list(fit.null_agreements), heldout_queries=fit.heldout_queries,
                      heldout_pairs=fit.heldout_pairs)
    ledger.record_decision("logger_guard", record)
    measured = "nothing to measure (fewer than 2 queries, or no held-out pair of documents with different " \
        "features)" if fit is None else (
        "a ranker fitted to the logged order on the learner's features orders %.3f of the %d document pairs of %d "
        "held-out queries as the logger did, %.3f of them as orders made from these features (null agreement)"
        % (fit.agreement, fit.heldout_pairs, fit.heldout_queries, fit.null_agreement))
    off = "(logger_guard=none trains the simulator anyway)"
    if not judged:
        LOGGER.warning(
            "LOGGER GUARD: only %d training queries (< logger_guard_min_queries=%d), too few to compare the logged "
            "order with orders of the features; the rule below that minimum keeps the simulator only when the fit "
            "reproduces at least logger_guard_threshold=%g of the held-out pairs: %s. %s",
            arrays.n_queries, guards.logger_guard_min_queries, guards.logger_guard_threshold, measured,
            "%s %s" % (fallback, off) if host else "The user simulator is trained (the simulator guard still judges it).",
        )
        return host
    if not host:
        LOGGER.info("logger guard: passed: %s, within logger_guard_margin=%g", measured, guards.logger_guard_margin)
        return False
    LOGGER.warning(
        "LOGGER GUARD FIRED: %s, more than logger_guard_margin=%g below: the logging ranker ordered by something the "
        "features do not carry, which a user simulator fitted to this log would take for position. %s %s",
        measured, guards.logger_guard_margin, fallback, off,
    )
    return True
