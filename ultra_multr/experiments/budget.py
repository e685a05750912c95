"""Per run: the sessions each phase drew and what the run's pilots and guards decided.

The fair protocol (docs/fair_protocol.md) gives every method one click budget
and the same tuning budget; this module puts the evidence beside the result
tables.  For every finished run under a runner's ``runs`` folder:

* the sessions per phase (the run's ledger ``<run>/model/session_budget.json``,
  written by :mod:`ultra_multr.session_budget`; also in ``done.json`` under
  ``sessions``) and the ranker's clicks per list (lists without a click dropped);
* from the ledger's decisions: the rerank pilot's and a ``tune`` pilot's
  choice, the refusals (the logger guard, too few validation queries or
  held-out sessions, a rejected or unvalidated simulator) and, where a run
  trained with its host's losses, ``trained as`` (``DLA (logger guard)``).

CLI::

    python -m ultra_multr.experiments.budget OUT/runs --out OUT/results/sessions.md
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, Dict, List, Sequence

from ultra_multr.files import atomic_write_text
from ultra_multr.session_budget import PHASES, read_summary, trained_as_host
from ultra_multr.experiments.aggregate import finished_run_dirs

#: The ledger's simulator decisions that refuse it (simulator_guard=position), as the table names them.
REFUSED_SIMULATOR = {"rejected": "USER SIMULATOR REJECTED", "not_validated": "USER SIMULATOR NOT VALIDATED"}
#: The logger guard's decisions that make MULTR train as its host, as the table names them (% the decision).
LOGGER_GUARD = {"fired": "LOGGER GUARD FIRED (%(agreement).3f of held-out pairs)",
                "too_few_queries": "only %(training_queries)d training queries (logger guard)"}
#: (column, pattern of train.stderr whose first group is the cell): the facts of a run before ledger_version 2.
LOG_FACTS = (
    ("pilot choice", re.compile(r"rerank_weight=auto: pilot of .*; chosen a = ([0-9.]+)")),
    ("pilot choice", re.compile(r"tune=(\w+: pilot of .*); chosen \w+ = ([0-9.e+-]+)")),
    ("refused", re.compile(r"(only \d+ (?:validation queries|distinct held-out sessions))")),
    ("refused", re.compile(r"(USER SIMULATOR (?:REJECTED|NOT VALIDATED))")),
    ("pilot choice", re.compile(r"rerank_weight=auto: (the user simulator (?:was rejected|is not used))")),
)


def decided_facts(decisions: Dict[str, Dict[str, Any]]) -> Dict[str, str]:
    """The "pilot choice" and "refused" cells of a ledger's decisions (:mod:`ultra_multr.session_budget`).

    Refusals in the order a run meets them: the logger guard (before any
    simulator is trained), early stopping for too few
    held-out sessions, a simulator not validated on too few of them, a pilot
    with too few validation queries; then a refused simulator's verdict.
    """
    choices, refused = [], []
    logger_guard = decisions.get("logger_guard", {})
    if logger_guard.get("host_losses"):
        refused.append(LOGGER_GUARD[logger_guard["decision"]] % logger_guard)
    if decisions.get("simulator_training", {}).get("early_stopping") == "too_few_heldout_sessions":
        refused.append("only %d distinct held-out sessions" % decisions["simulator_training"]["heldout_sessions"])
    simulator = decisions.get("user_simulator", {})
    simulator_refused = simulator.get("host_losses", False)
    if simulator_refused and simulator["decision"] == "not_validated":
        refused.append("only %d distinct held-out sessions" % simulator["heldout_sessions"])
    for name, cell in (("rerank_weight", lambda d: "%.4f" % d["chosen"]),
                       ("tune", lambda d: "%s = %g" % (d["hparam"], d["chosen"]))):
        choice = decisions.get(name, {})
        if choice.get("by") == "pilot":
            choices.append(cell(choice))
        elif choice.get("by") == "simulator_not_used":
            choices.append("the user simulator is not used")
        elif choice.get("by") == "too_few_validation_queries":
            refused.append("only %d validation queries" % choice["validation_queries"])
    if simulator_refused:
        refused.append(REFUSED_SIMULATOR[simulator["decision"]])
    return {"pilot choice": "; ".join(choices), "refused": "; ".join(refused)}


def logged_facts(run_dir: str) -> Dict[str, str]:
    """The "pilot choice" and "refused" cells of a run's ``train.stderr`` (:data:`LOG_FACTS`)."""
    stderr = os.path.join(run_dir, "train.stderr")
    text = open(stderr).read() if os.path.isfile(stderr) else ""
    facts: Dict[str, str] = {}
    for column, pattern in LOG_FACTS:
        for match in pattern.finditer(text):
            cell = match.group(match.lastindex)
            if pattern.groups > 1:  # tune: "<hparam>: pilot ..." -> "<hparam> = value"
                cell = "%s = %s" % (match.group(1).split(":")[0], cell)
            facts[column] = "; ".join(filter(None, [facts.get(column, ""), cell]))
    return facts


def run_facts(run_dir: str) -> Dict[str, str]:
    """The run's sessions per phase and its pilot choices / refusals (column -> cell)."""
    with open(os.path.join(run_dir, "run.json")) as handle:
        info = json.load(handle)
    facts = {
        "run": "%s / %s / %s%s / seed %s" % (
            info.get("dataset"), info.get("fold"), info.get("label", info.get("method")),
            " (%s)" % info["variant"] if info.get("variant") else "", info.get("seed"),
        )
    }
    summary = read_summary(run_dir)
    for phase in PHASES:
        count = (summary or {}).get("phases", {}).get(phase)
        facts[phase] = "%d" % count["sessions"] if count else ""
    facts["total sessions"] = "%d" % summary["total_sessions"] if summary else "n/a"
    ranker = (summary or {}).get("phases", {}).get("ranker", {})
    if ranker.get("lists") and "clicks" in ranker:
        facts["ranker clicks per list"] = "%.3f" % (ranker["clicks"] / ranker["lists"])
    # Runs before ledger_version 2 are read from their log: the committed sessions tables were made from such runs.
    if summary and "ledger_version" in summary:
        facts.update(decided_facts(summary["decisions"]))
        as_host = trained_as_host(summary["decisions"])
        facts["trained as"] = "%(host)s (%(why)s)" % as_host if as_host else ""
    else:
        facts.update(logged_facts(run_dir))
    return facts


def format_markdown(runs_dir: str) -> str:
    """One row per finished run: sessions per phase (those without a click included), total, pilot choices, refusals."""
    columns = ["run"] + list(PHASES) + ["total sessions", "ranker clicks per list", "pilot choice", "refused",
                                        "trained as"]
    rows: List[Dict[str, str]] = sorted((run_facts(d) for d in finished_run_dirs(runs_dir)), key=lambda f: f["run"])
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    lines += ["| " + " | ".join(row.get(c, "") for c in columns) + " |" for row in rows]
    return (
        "Sessions drawn per phase (lists without a click included), the pilots' choices and the guards' refusals, "
        "per finished run; \"trained as\": a run that trained with its host's losses, and why.\n\n"
        + "\n".join(lines) + "\n"
    )


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs_dir", help="a runner's <output_dir>/runs")
    parser.add_argument("--out", help="also write the table here")
    args = parser.parse_args(argv)
    table = format_markdown(args.runs_dir)
    print(table, end="")
    if args.out:
        atomic_write_text(args.out, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
