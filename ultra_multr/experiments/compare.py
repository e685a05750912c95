"""Compare one method across two run folders: "before" and "after" a change, paired per query.

The runner's tables test each MULTR row against the best baseline of the same
run folder.  A change to MULTR itself (a new estimator, new defaults) is
measured by running the old code into one folder and the new code into
another on the same prepared data, and pairing their test queries here::

    python -m ultra_multr.experiments.compare BEFORE_RUNS AFTER_RUNS --method multr \\
        [--against dla] [--label-before ...] [--label-after ...] [--out table.md]
        [--variant-before rerank_weight=0] [--variant-after ...] [--seeds 0]

The two folders may be the same one: ``--variant-before``/``--variant-after``
pick a sweep's runs (the runner's variant name, e.g. ``rerank_weight=0``)
instead of the runs without a sweep, so a fixed setting is paired with the
default on the same data.  ``--seeds`` keeps only the runs of those seeds on
both sides (e.g. when one folder has more seeds than the other).

Rows: mean +- standard deviation over runs (folds x seeds) of each metric
(a group whose runs trained with their host's losses marked ``→ DLA (logger
guard: k of n runs)``); then, for after against before and each against
``--against`` (a baseline of the *after* folder and variant): the paired
differences over runs (runs paired by fold and seed; mean, 95 % t-interval,
sign-flip p from 6 pairs; :func:`~ultra_multr.experiments.significance.over_runs`)
and, beside them, the paired two-sided Fisher randomisation test on the test
queries pooled over folds (each query averaged over seeds), with the direction
of the difference.
"""
from __future__ import annotations

import argparse
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ultra_multr.files import atomic_write_text
from ultra_multr.experiments.aggregate import (
    METRICS, RunRecord, as_host_counts, collect_runs, marked_label, pooled_queries, runs_over_runs,
)
from ultra_multr.experiments.significance import randomization_test


def method_runs(
    runs_dir: str, method: str, variant: Optional[str] = None, seeds: Optional[Sequence[int]] = None
) -> List[RunRecord]:
    """The finished runs of ``method``: those of sweep variant ``variant``, or without a sweep (None);
    with ``seeds``, only the runs of those seeds."""
    def chosen(record: RunRecord) -> bool:
        in_variant = not record.info.get("sweep") if variant is None else record.info.get("variant") == variant
        return in_variant and (seeds is None or record.info.get("seed") in seeds)

    records = [r for r in collect_runs(runs_dir) if r.info["method"] == method and chosen(r)]
    if not records:
        what = "without a sweep" if variant is None else "of variant %r" % variant
        which = "" if seeds is None else " of seeds %s" % ", ".join(map(str, seeds))
        raise ValueError("no finished %r run %s%s under %s" % (method, what, which, runs_dir))
    return records


def paired(a: Sequence[RunRecord], b: Sequence[RunRecord], metric: str) -> Tuple[np.ndarray, np.ndarray]:
    """Per-query values [n] of ``a`` and ``b`` on the (fold, qid) both have, pooled over seeds."""
    pa, pb = pooled_queries(a, metric), pooled_queries(b, metric)
    keys = sorted(set(pa) & set(pb))
    if not keys:
        raise ValueError("the two groups of runs share no test query")
    return np.array([pa[k] for k in keys]), np.array([pb[k] for k in keys])


def significance_row(a: Sequence[RunRecord], b: Sequence[RunRecord], n_permutations: int) -> Dict[str, str]:
    """metric -> "p (better|worse|equal)" for ``a`` against ``b``."""
    cells = {}
    for metric in METRICS:
        x, y = paired(a, b, metric)
        p = randomization_test(x, y, n_permutations)
        diff = float(np.mean(x - y))
        direction = "better" if diff > 0 else "worse" if diff < 0 else "equal"
        cells[metric] = "%.3g (%s)" % (p, direction)
    return cells


def over_runs_row(a: Sequence[RunRecord], b: Sequence[RunRecord], n_permutations: int) -> Dict[str, str]:
    """metric -> "mean [interval] (p)" of ``a``'s runs minus ``b``'s, paired by fold and seed."""
    cells = {}
    for metric in METRICS:
        result = runs_over_runs(a, b, metric, n_permutations)
        cells[metric] = "n/a (no run pairs)" if result is None else "%s (%s; %d pairs)" % (
            result.interval_text(), "-" if result.p is None else "p %.3g" % result.p, result.pairs)
    return cells


def group_label(label: str, records: Sequence[RunRecord]) -> str:
    """``label (n runs)``, marked where runs trained with their host's losses."""
    return "%s (%d runs)" % (marked_label(label, as_host_counts(records), len(records)), len(records))


def mean_row(records: Sequence[RunRecord]) -> Dict[str, str]:
    """metric -> "mean +- std" over the runs."""
    cells = {}
    for metric in METRICS:
        values = np.array([r.mean(metric) for r in records])
        spread = "%.3f" % values.std(ddof=1) if len(values) > 1 else "n/a"
        cells[metric] = "%.3f +- %s" % (values.mean(), spread)
    return cells


def comparison_table(
    before_dir: str,
    after_dir: str,
    method: str,
    against: Optional[str],
    labels: Tuple[str, str],
    n_permutations: int = 10000,
    variants: Tuple[Optional[str], Optional[str]] = (None, None),
    seeds: Optional[Sequence[int]] = None,
) -> str:
    """The Markdown table described in the module docstring."""
    before = method_runs(before_dir, method, variants[0], seeds)
    after = method_runs(after_dir, method, variants[1], seeds)
    rows: List[Tuple[str, Dict[str, str]]] = [
        (group_label(labels[0], before), mean_row(before)),
        (group_label(labels[1], after), mean_row(after)),
    ]
    pairs = [(labels[1], after, labels[0], before)]
    if against:
        baseline = method_runs(after_dir, against, variants[1], seeds)
        rows.insert(0, (group_label(against, baseline), mean_row(baseline)))
        pairs = [(labels[0], before, against, baseline), (labels[1], after, against, baseline)] + pairs
    for name_a, a, name_b, b in pairs:
        rows.append(("%s vs %s: over runs" % (name_a, name_b), over_runs_row(a, b, n_permutations)))
        rows.append(("%s vs %s: p over queries" % (name_a, name_b), significance_row(a, b, n_permutations)))
    lines = ["| | " + " | ".join(METRICS) + " |", "|---" * (len(METRICS) + 1) + "|"]
    lines += ["| %s | %s |" % (name, " | ".join(cells[m] for m in METRICS)) for name, cells in rows]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", help="runs folder of the old code (the runner's <output_dir>/runs)")
    parser.add_argument("after", help="runs folder of the new code")
    parser.add_argument("--method", default="multr")
    parser.add_argument(
        "--against", default="dla", help="a baseline of the after folder and variant ('' for none)"
    )
    parser.add_argument("--label-before", default="before")
    parser.add_argument("--label-after", default="after")
    parser.add_argument("--variant-before", help="a sweep variant of the before folder (default: runs without a sweep)")
    parser.add_argument("--variant-after", help="a sweep variant of the after folder (default: runs without a sweep)")
    parser.add_argument("--seeds", type=int, nargs="+", help="only the runs of these seeds (default: all)")
    parser.add_argument("--permutations", type=int, default=10000)
    parser.add_argument("--out", help="also write the table here")
    args = parser.parse_args(argv)
    try:
        table = comparison_table(
            args.before, args.after, args.method, args.against or None,
            (args.label_before, args.label_after), args.permutations, (args.variant_before, args.variant_after),
            args.seeds,
        )
    except ValueError as error:
        print("error: %s" % error, file=sys.stderr)
        return 2
    print(table, end="")
    if args.out:
        atomic_write_text(args.out, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
