"""The guards of a user simulator: their knobs, and the logger guard.

Two guards keep an algorithm from learning from a simulator that would
mislead it (either way, loudly, the algorithm trains without it):

* the **logger guard** (``logger_guard=order_fit``), before the simulator is
  trained: a small ranker is fitted to the logged order of the training
  split's lists (:func:`ultra_multr.logged_order.logged_order_fit`, on the
  first N positions the simulator sees, most queries fitted and the rest held
  out).  When its agreement with the logged order on the held-out pairs is
  below ``logger_guard_threshold``, the logger ordered by something the
  features do not carry, which a simulator fitted to the log would take for
  position (the stress group of studies/headroom); with fewer than
  ``logger_guard_min_queries`` training queries it cannot tell.  Either way it
  fires (:func:`logger_guard_fires`).  The decision, the agreement and what it
  rests on go to the run's ledger (decision ``logger_guard``);
* the **simulator guard** (``simulator_guard=position``), after training: a
  simulator below a position-only click model on its held-out sessions, or
  measured on too few of them, is not used
  (:meth:`ultra_multr.components.simulator_phase.SimulatorPhase.run`).

On generated sets the logger guard's agreement was 0.984-0.995 on ten recipe
sets of studies/paper_setting and 0.824-0.838 on three stress sets of
studies/headroom (studies/paper_setting/results/logged_order.md), hence the
default threshold 0.95.  It is on by default (``logger_guard=none`` switches
it off, as the paper's and the authors' settings files do): in the
paper_setting grid it fired on 3 of 3 stress sets, where MULTR without it was
0.053-0.099 nDCG@10 below DLA, and MULTR then trained exactly as DLA; it stays
quiet on every recipe set (docs/results.md).  With fewer than
``logger_guard_min_queries`` (50) training queries it fires too: on toy data
MULTR trains as DLA unless told ``logger_guard=none``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from ultra_multr.config import knob, require
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
        logger_guard_threshold: the agreement below which it fires (0.5-1).
        logger_guard_min_queries: training queries it needs to measure.
    """

    simulator_guard: str = "position"
    logger_guard: str = knob("order_fit", old_default="none")
    logger_guard_threshold: float = 0.95
    logger_guard_min_queries: int = 50

    def __post_init__(self) -> None:
        require(self.simulator_guard in SIMULATOR_GUARDS,
                "simulator_guard must be one of %s, got %r" % (SIMULATOR_GUARDS, self.simulator_guard))
        require(self.logger_guard in LOGGER_GUARDS,
                "logger_guard must be one of %s, got %r" % (LOGGER_GUARDS, self.logger_guard))
        require(0.5 <= self.logger_guard_threshold <= 1.0,
                "logger_guard_threshold must be in [0.5, 1], got %r" % self.logger_guard_threshold)
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
    """Run the logger guard on the training split's ``arrays``; record (decision ``logger_guard``) and return
    whether it fired.

    Args:
        seed: of the fit's held-out split.
        fallback: what the algorithm does when it fires, for the warning (e.g. "MULTR trains with DLA's own
            ranking and propensity losses instead").
    """
    record = {"guard": guards.logger_guard, "threshold": guards.logger_guard_threshold,
              "training_queries": arrays.n_queries, "min_queries": guards.logger_guard_min_queries}
    if arrays.n_queries < guards.logger_guard_min_queries:
        record.update(decision="too_few_queries", host_losses=True)
        ledger.record_decision("logger_guard", record)
        LOGGER.warning(
            "LOGGER GUARD: only %d training queries (< logger_guard_min_queries=%d), too few to tell whether the "
            "logging ranker knew more than the features. %s (logger_guard=none trains the simulator anyway)",
            arrays.n_queries, guards.logger_guard_min_queries, fallback,
        )
        return True
    fit = fit_to_logged_order(arrays, seed)
    fired = fit.agreement < guards.logger_guard_threshold
    record.update(decision="fired" if fired else "passed", host_losses=fired, agreement=fit.agreement,
                  heldout_queries=fit.heldout_queries, heldout_pairs=fit.heldout_pairs)
    ledger.record_decision("logger_guard", record)
    measured = "a ranker fitted to the logged order on the learner's features orders %.3f of the %d document " \
        "pairs of %d held-out queries as the logger did (logger_guard_threshold=%g)" % (
            fit.agreement, fit.heldout_pairs, fit.heldout_queries, guards.logger_guard_threshold)
    if not fired:
        LOGGER.info("logger guard: passed: %s", measured)
        return False
    LOGGER.warning(
        "LOGGER GUARD FIRED: %s: the logging ranker ordered by something the features do not carry, which a user "
        "simulator fitted to this log would take for position. %s (logger_guard=none trains the simulator anyway)",
        measured, fallback,
    )
    return True
