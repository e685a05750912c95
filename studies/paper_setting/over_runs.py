"""The paper_setting grid judged over runs: every method's paired differences from DLA (same set, same seed).

The grid's committed per-run tables (``results/paper_setting_seeds.csv``, ``_pbm_seeds.csv``, ``_sparse_seeds.csv``:
one row per set, seed and method, nDCG@10 to 4 decimals) hold everything this needs; the grid's run folders are
not needed again.  Written: ``results/paper_setting_over_runs.csv`` / ``.md``, one row per data, regime and method:
the mean nDCG@10 over its runs, the mean paired difference from DLA, its 95 % t-interval over the pairs and the
sign-flip p over them (exact; from 6 pairs, where p <= 0.05 is reachable), beside the pooled query-level p of
``paper_setting_all.csv`` (Holm-adjusted over each method's cells).

    python studies/paper_setting/over_runs.py [--results studies/paper_setting/results]
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from collections import defaultdict
from typing import Dict, List, Sequence, Tuple

import numpy as np

from ultra_multr.experiments.significance import over_runs
from ultra_multr.files import atomic_write_text

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
PER_RUN = ("paper_setting_seeds.csv", "paper_setting_pbm_seeds.csv", "paper_setting_sparse_seeds.csv")
POOLED = "paper_setting_all.csv"
COLUMNS = ("data", "regime", "method", "runs", "ndcg10", "delta_vs_dla", "ci_low", "ci_high", "p_runs", "p_holm")
BASELINE = "DLA"


def read_rows(path: str) -> List[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def per_run(results: str) -> Dict[Tuple[str, str, str], Dict[Tuple[str, int], float]]:
    """(data, regime, method) -> (set, seed) -> nDCG@10, from the grid's per-run tables."""
    found: Dict[Tuple[str, str, str], Dict[Tuple[str, int], float]] = defaultdict(dict)
    for name in PER_RUN:
        for row in read_rows(os.path.join(results, name)):
            found[(row["data"], row["regime"], row["method"])][(row["set"], int(row["seed"]))] = float(row["ndcg10"])
    return found


def pooled_holm(results: str) -> Dict[Tuple[str, str, str], str]:
    """(data, regime, method) -> the pooled query-level p (Holm) of the grid's table."""
    return {(row["data"], row["regime"], row["method"]): row["p_holm"]
            for row in read_rows(os.path.join(results, POOLED))}


def table_rows(results: str) -> List[dict]:
    """One row per (data, regime, method), DLA first in each cell, in the per-run tables' order."""
    runs, holm = per_run(results), pooled_holm(results)
    rows = []
    for (data, regime, method), values in runs.items():
        row = {"data": data, "regime": regime, "method": method, "runs": len(values),
               "ndcg10": "%.4f" % np.mean(list(values.values())), "p_holm": holm.get((data, regime, method), "")}
        dla = runs.get((data, regime, BASELINE))
        if method != BASELINE and dla:
            keys = sorted(set(values) & set(dla))
            result = over_runs([values[k] for k in keys], [dla[k] for k in keys])
            row.update(delta_vs_dla="%+.4f" % result.mean, p_runs="" if result.p is None else "%.4f" % result.p,
                       ci_low="" if np.isnan(result.ci_low) else "%+.4f" % result.ci_low,
                       ci_high="" if np.isnan(result.ci_high) else "%+.4f" % result.ci_high)
        rows.append(row)
    return sorted(rows, key=lambda r: (list(runs).index((r["data"], r["regime"], BASELINE))
                                       if (r["data"], r["regime"], BASELINE) in runs else 0, r["method"] != BASELINE))


def write(rows: Sequence[dict], results: str) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({c: row.get(c, "") for c in COLUMNS} for row in rows)
    atomic_write_text(os.path.join(results, "paper_setting_over_runs.csv"), buffer.getvalue())
    lines = ["The paper_setting grid over runs (studies/paper_setting/over_runs.py, from the per-run tables "
             "%s): delta_vs_dla the mean paired difference in nDCG@10 from DLA over runs (same set, same seed), "
             "ci_low/ci_high its 95 %% t-interval, p_runs the exact sign-flip p over the pairs (from 6 pairs); "
             "p_holm the pooled query-level test of %s beside it." % (", ".join(PER_RUN), POOLED), "",
             "| " + " | ".join(COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
    lines += ["| " + " | ".join(str(row.get(c, "")) for c in COLUMNS) + " |" for row in rows]
    atomic_write_text(os.path.join(results, "paper_setting_over_runs.md"), "\n".join(lines) + "\n")


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=RESULTS, help="the grid's results folder (read and written)")
    args = parser.parse_args(argv)
    write(table_rows(args.results), args.results)
    print(open(os.path.join(args.results, "paper_setting_over_runs.md")).read(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
