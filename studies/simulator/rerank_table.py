"""The simulator on logged vs uniformly random orders: one Markdown table from simulator reports.

Usage::

    python studies/simulator/rerank_table.py REPORTS_DIR > table.md

``REPORTS_DIR`` holds ``<data>_Fold<k>_<order>/simulator_report.json`` as
``studies/simulator/rerank.sh`` writes them.  One row per report
(held-out log-likelihood of the true model and the simulator, perplexity gap
above the true model of the simulator, the fitted PBM and cascade), then the
simulator's mean gap per (data, order) with its range over folds.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from collections import defaultdict
from typing import Dict, List, Sequence

from ultra_multr.click_models.evaluation import FittedCascade, FittedPBM
from ultra_multr.files import JsonFileError, read_json
from ultra_multr.experiments.simulator_report import SIMULATOR, TRUE_MODEL, perplexity_gap

SCORED = (SIMULATOR, FittedPBM.name, FittedCascade.name)
REPORT_DIR = re.compile(r"^(?P<data>.+)_Fold(?P<fold>\d+)_(?P<order>logged|random)$")


def rerank_table(reports_dir: str) -> str:
    """The Markdown table of the module docstring; ValueError when there is no report or one lacks a model."""
    rows: List[str] = []
    gaps: Dict[tuple, List[float]] = defaultdict(list)
    names = sorted(name for name in os.listdir(reports_dir) if REPORT_DIR.match(name))
    if not names:
        raise ValueError("%s holds no <data>_Fold<k>_<logged|random> report folder" % reports_dir)
    for name in names:
        match = REPORT_DIR.match(name)
        path = os.path.join(reports_dir, name, "simulator_report.json")
        report = read_json(path, "simulator report")
        models = {model["name"]: model for model in report["models"]}
        missing = [m for m in (TRUE_MODEL,) + SCORED if m not in models]
        if missing:
            raise ValueError("%s: no %s in its models (a report sampled from a click model is needed)" % (path, missing))
        gap = {m: 100.0 * perplexity_gap(report, models[m]) for m in SCORED}
        key = (match["data"], match["order"])
        gaps[key].append(gap[SIMULATOR])
        rows.append(
            "| %s | %s | %s | %.3f | %.3f | %+.1f %% | %+.1f %% | %+.1f %% |"
            % (match["data"], match["fold"], match["order"], models[TRUE_MODEL]["log_likelihood"],
               models[SIMULATOR]["log_likelihood"], *(gap[m] for m in SCORED))
        )
    lines = [
        "| data | fold | held-out order | true model LL | simulator LL | simulator gap | PBM gap | cascade gap |",
        "|---|---|---|---|---|---|---|---|",
    ] + rows + [""]
    for (data, order), values in sorted(gaps.items()):
        lines.append(
            "- %s, %s orders: simulator perplexity gap mean %+.1f %% (folds %+.1f to %+.1f %%)"
            % (data, order, sum(values) / len(values), min(values), max(values))
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports_dir")
    args = parser.parse_args(argv)
    try:
        print(rerank_table(args.reports_dir), end="")
    except (ValueError, OSError, JsonFileError) as error:
        print("error: %s" % error, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
