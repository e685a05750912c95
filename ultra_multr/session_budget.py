"""One click budget for every phase of a run: sessions drawn, counted per phase.

Every training session any phase of a run draws from one of our click feeds
(:class:`ultra_multr.feeds.ClickSimulationFeed` and
:class:`~ultra_multr.feeds.ClickLogFeed`) is recorded here, under the phase
running at the time:

* ``ranker``: main.py's training batches (the default phase);
* ``simulator_train`` / ``simulator_heldout``: MULTR's user simulator, its
  training batches and its held-out sessions;
* ``rerank_pilot``: the pilot of ``rerank_weight=auto``;
* ``tuning_pilot``: the validation pilot of a baseline's hyper-parameter
  (:mod:`ultra_multr.algorithms.tuning`).

Per phase four numbers: ``sessions`` (lists drawn, those without a click
included: a logged session without a click is still a session), ``lists``
(lists handed to the learner: main.py and the simulator drop lists without
a click), ``clicks`` (on those lists; clicks per list = clicks / lists) and
``interventions`` (those lists that were intervention sessions, shown with an
adjacent pair swapped or shuffled: the click feed's ``intervention_share``;
their share is interventions / lists).  A run whose feeds show intervention
sessions also has ``interventions``: the feed's share and kind
(:meth:`SessionLedger.note_interventions`; None without).  With a fixed click log (``ClickLogFeed``,
``sessions_per_query=K``) every phase draws from the same log, so the run's
distinct sessions are the log's Q x K (``log_sessions``), whatever the draws.

With fresh clicks the budget is enforced by the feeds' ``session_budget``
hyper-parameter (0: none): the sessions of all phases together may not
exceed it, and a draw beyond it fails with :class:`SessionBudgetExceeded`,
naming the phases' counts.  A fair study gives every method the same
``session_budget`` (or the same click log).

Beside the counts, the ledger keeps what a run decided on its evidence
(:meth:`SessionLedger.record_decision`), each written once, when it is
decided: MULTR's ``user_simulator`` (accepted, rejected or not validated,
on how many held-out sessions), ``simulator_training`` (early stopping on,
off, or refused for too few held-out sessions), ``rerank_weight``
(``rerank_weight=auto``'s a) and ``tune`` (a ``tune`` pilot's value); the
last two say ``by`` what (one of :data:`CHOSEN_BY`); and, for every
algorithm of ours, ``ranker_losses``: whose losses the ranker trained with
and, when they were another algorithm's (MULTR's host's), why
(:func:`record_ranker_losses`, :func:`trained_as_host`).  Tables read them from
here (:mod:`ultra_multr.experiments.budget`), not from the log.  Also the
torch thread count (a simulator's fit differs at another thread count).

In a run of ULTRA's main.py the ledger is written to
``<model_dir>/session_budget.json`` when the process ends (the runner copies
it into the run's ``done.json``, key ``sessions``).
"""
from __future__ import annotations

import atexit
import json
import os
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional

import torch

from ultra_multr.compat import runtime
from ultra_multr.files import atomic_write_text

PHASES = ("ranker", "simulator_train", "simulator_heldout", "rerank_pilot", "tuning_pilot")
BUDGET_FILE = "session_budget.json"
#: ``session_budget.json``'s ``ledger_version``: 2 holds every pilot's choice and refusal among the decisions;
#: 3 adds the intervention sessions (``interventions`` per phase and for the run); 4 the decision ``ranker_losses``.
LEDGER_VERSION = 4
#: How a pilot's choice was made (``by`` of the ``rerank_weight`` and ``tune`` decisions): by its pilot, or
#: without one: too few validation queries, no validation split, the simulator not used, a single candidate.
CHOSEN_BY = ("pilot", "too_few_validation_queries", "no_validation_split", "simulator_not_used", "only_candidate")


#: The ledger decision naming the losses the ranker trained with (:func:`record_ranker_losses`).
RANKER_LOSSES = "ranker_losses"
#: Why an algorithm trained with its host's losses, by the decision that made it (the logger guard's, the
#: simulator guard's): the short name tables mark a run with.
HOST_LOSSES_BECAUSE = {"fired": "logger guard", "too_few_queries": "logger guard, too few queries",
                       "rejected": "simulator rejected", "not_validated": "simulator not validated"}


class SessionBudgetExceeded(RuntimeError):
    """A draw would take a run past its ``session_budget``."""


class SessionLedger:
    """Sessions and lists drawn per phase (one per process: :data:`LEDGER`)."""

    def __init__(self) -> None:
        self.phase = "ranker"
        self.counts: Dict[str, Dict[str, int]] = {}
        self.budget = 0
        self.log_sessions: Optional[int] = None
        #: the click feed's intervention sessions, ``{"share": s, "kind": "swap" | "shuffle"}`` (None: none shown)
        self.interventions: Optional[Dict[str, Any]] = None
        #: what the run decided on its evidence, by name (:meth:`record_decision`)
        self.decisions: Dict[str, Dict[str, Any]] = {}
        #: main.py's --model_dir, noted at the first draw (runpy restores __main__ before exit)
        self.model_dir: Optional[str] = None

    def reset(self) -> None:
        self.__init__()

    @property
    def total(self) -> int:
        return sum(count["sessions"] for count in self.counts.values())

    def note_model_dir(self) -> None:
        """Note main.py's --model_dir (once; runpy restores __main__ before the process exits)."""
        if self.model_dir is None:
            args = runtime.main_args()
            self.model_dir = args.model_dir if args is not None else ""

    def record_decision(self, name: str, facts: Dict[str, Any]) -> None:
        """Keep what the run decided under ``name`` (JSON-serialisable ``facts``; a later call replaces it)."""
        self.note_model_dir()
        self.decisions[name] = dict(facts)

    def note_interventions(self, share: float, kind: str) -> None:
        """Note that the run's click feed shows a ``share`` of its sessions as ``kind`` interventions."""
        self.interventions = {"share": float(share), "kind": kind}

    def record(self, sessions: int, lists: int, budget: int = 0, clicks: float = 0.0, interventions: int = 0) -> None:
        """Count ``sessions`` drawn, ``lists`` fed, their ``clicks`` and ``interventions`` under the current phase.

        Args:
            budget: the feed's ``session_budget`` (0: none); the largest one
                any feed gave is the run's.
            interventions: how many of the ``lists`` were intervention sessions.

        Raises:
            SessionBudgetExceeded: the sessions of all phases would exceed the budget.
        """
        self.note_model_dir()
        self.budget = max(self.budget, int(budget))
        if self.budget and self.total + sessions > self.budget:
            raise SessionBudgetExceeded(
                "session_budget=%d (train_input_hparams) exceeded in phase %r: %d sessions drawn so far (%s) "
                "and %d more asked for; give every method the same budget and fewer steps (main.py's "
                "--max_train_iteration, simulator_steps, rerank_pilot_steps)"
                % (self.budget, self.phase, self.total, self.describe(), sessions)
            )
        count = self.counts.setdefault(self.phase, {"sessions": 0, "lists": 0, "clicks": 0, "interventions": 0})
        count["sessions"] += int(sessions)
        count["lists"] += int(lists)
        count["clicks"] += int(clicks)
        count["interventions"] += int(interventions)

    @contextmanager
    def in_phase(self, phase: str) -> Iterator[None]:
        """Count the draws of a block under ``phase`` (one of :data:`PHASES`)."""
        if phase not in PHASES:
            raise ValueError("unknown phase %r; known: %s" % (phase, ", ".join(PHASES)))
        before, self.phase = self.phase, phase
        try:
            yield
        finally:
            self.phase = before

    def describe(self) -> str:
        return ", ".join("%s %d" % (phase, count["sessions"]) for phase, count in self.counts.items()) or "none"

    def summary(self) -> Dict:
        """What ``session_budget.json`` holds: per-phase counts, the total, the budget, the log's size,
        the intervention sessions' share and kind, the run's decisions, the torch thread count and the
        ledger's version."""
        return {
            "ledger_version": LEDGER_VERSION,
            "phases": {phase: dict(count) for phase, count in self.counts.items()},
            "total_sessions": self.total,
            "session_budget": self.budget,
            "log_sessions": self.log_sessions,
            "interventions": dict(self.interventions) if self.interventions else None,
            "decisions": {name: dict(facts) for name, facts in self.decisions.items()},
            "torch_threads": torch.get_num_threads(),
        }


LEDGER = SessionLedger()


def write_summary(model_dir: str) -> Optional[str]:
    """Write :data:`LEDGER`'s summary to ``<model_dir>/session_budget.json`` (nothing when no session was
    drawn and nothing decided)."""
    if not (LEDGER.counts or LEDGER.decisions) or not os.path.isdir(model_dir):
        return None
    path = os.path.join(model_dir, BUDGET_FILE)
    atomic_write_text(path, json.dumps(LEDGER.summary(), indent=1, sort_keys=True) + "\n")
    return path


def _write_at_exit() -> None:  # pragma: no cover - runs when main.py's process ends
    if LEDGER.model_dir:
        write_summary(LEDGER.model_dir)


atexit.register(_write_at_exit)


def record_ranker_losses(algorithm: str, trained_as: str, losses: str, why: Optional[str] = None) -> str:
    """Record whose losses the ranker trains with (decision :data:`RANKER_LOSSES`); returns the run's one log line
    of it, ``ranker trained with: <losses>[ (<algorithm> trained as <host>: <why>)]``.

    Args:
        algorithm: the algorithm's name ("MULTR").
        trained_as: whose losses: the algorithm's own name, or its host's ("DLA") when it trains as its host.
        losses: what they are, in words.
        why: the reason it trains as its host (one of :data:`HOST_LOSSES_BECAUSE`'s values); None otherwise.
    """
    LEDGER.record_decision(RANKER_LOSSES, {"algorithm": algorithm, "trained_as": trained_as, "why": why})
    line = "ranker trained with: %s" % losses
    if trained_as != algorithm:
        line += " (%s trained as %s: %s)" % (algorithm, trained_as, why)
    return line


def trained_as_host(decisions: Dict[str, Dict[str, Any]]) -> Optional[Dict[str, str]]:
    """``{"host": ..., "why": ...}`` when a run's ledger decisions say it trained with its host's losses, else None.

    Read from :data:`RANKER_LOSSES`; a ledger written before that decision existed says it through its guards'
    decisions (``host_losses``), which do not name the host ("host").
    """
    if RANKER_LOSSES in decisions:
        record = decisions[RANKER_LOSSES]
        if record["trained_as"] == record["algorithm"]:
            return None
        return {"host": record["trained_as"], "why": record["why"]}
    for name in ("logger_guard", "user_simulator"):
        decision = decisions.get(name, {})
        if decision.get("host_losses"):
            return {"host": "host", "why": HOST_LOSSES_BECAUSE[decision["decision"]]}
    return None


def read_summary(run_dir: str) -> Optional[Dict]:
    """A runner run's session counts (``<run_dir>/model/session_budget.json``), None without them."""
    path = os.path.join(run_dir, "model", BUDGET_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as handle:
        return json.load(handle)


__all__ = [
    "BUDGET_FILE", "CHOSEN_BY", "HOST_LOSSES_BECAUSE", "LEDGER", "LEDGER_VERSION", "PHASES", "RANKER_LOSSES",
    "SessionBudgetExceeded", "SessionLedger", "read_summary", "record_ranker_losses", "trained_as_host", "write_summary",
]
