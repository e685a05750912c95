"""Tables (Table 2 layout), significance markers, gap fractions and sweep figures.

Input: a runs directory written by :mod:`.runner` (each finished run has
``done.json``, ``run.json`` and ``per_query_metrics.csv``).  Runs are grouped
by (dataset, variant); each group gives one table:

* rows: methods in Table 2 order; columns nDCG@1,3,5,10 and ERR@1,3,5,10;
* cell: mean over the group's runs (folds x seeds) of the run's mean over
  queries, +- the sample standard deviation over runs (none with one run);
* ``*``: a "multr"-role row whose paired two-sided Fisher randomisation test
  against the column's best baseline (highest mean among "baseline" rows)
  gives p <= alpha, with a positive mean difference.  The test pairs queries
  pooled across folds, each query's value averaged over seeds first;
* every p value says its direction: "better" or "worse" than the best
  baseline (the sign of the mean difference over the pooled queries);
* beside that pooled test, the paired differences over runs against the same
  baseline (runs paired by fold and seed): their mean with a 95 % t-interval
  over the pairs, and the sign-flip p over the pairs where there are 6 or more
  (:func:`~ultra_multr.experiments.significance.over_runs`); a claim rests on
  these, the pooled query-level p goes beside it;
* a MULTR run that trained with its host's losses (a guard's fallback: its
  ledger's ``ranker_losses``, :func:`ultra_multr.session_budget.trained_as_host`)
  marks its row, ``MULTR → DLA (logger guard: 3 of 3 runs)``, and the CSV's
  ``trained_as_host`` column;
* the fraction of the DLA-to-Oracle gap each multr-role row closes,
  ``(row - DLA) / (Oracle - DLA)``, per metric; "n/a (Oracle <= DLA)" where
  there is no gap to close.

Incomplete groups are marked, not refused: a table whose methods x folds
have different numbers of finished seeds, or whose run folders include
unfinished ones (running, pending or failed: ``run.json`` without
``done.json``), is titled "INCOMPLETE" with the reasons, so a look at
results while runs are still going cannot pass for the final table.

Sweep runs (``run.json`` has a ``sweep``) with at least two numeric values
also give one figure per (dataset, sweep, method): nDCG@k and ERR@k against
the value (Figure 3 of the paper for a ``sample_num`` sweep).
"""
from __future__ import annotations

import csv
import glob
import io
import json
import logging
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ultra_multr.files import atomic_write_file, atomic_write_text
from ultra_multr.experiments.evaluate import PER_QUERY_CSV, read_per_query_csv
from ultra_multr.metrics import metric_names
from ultra_multr.experiments.significance import (
    EXACT_MAX_QUERIES, MIN_PAIRS_FOR_P, OverRuns, over_runs, randomization_test,
)
from ultra_multr.session_budget import read_summary, trained_as_host

logger = logging.getLogger(__name__)

METRICS = metric_names()
GAP_LOW, GAP_HIGH = "dla", "oracle"
#: What the swept parameter is, for figure axes (else the parameter's name).
AXIS_LABELS = {
    "sessions_per_query": "sessions per query (click budget)",
    "sample_num": "sample_num (simulated rankings per query)",
}


@dataclass
class RunRecord:
    """A finished run: its ``run.json``, per-query metrics (qid -> metric -> value) and, when it trained with
    its host's losses, ``{"host", "why"}`` (:func:`ultra_multr.session_budget.trained_as_host`)."""

    info: Dict
    per_query: Dict[str, Dict[str, float]]
    as_host: Optional[Dict[str, str]] = None

    def mean(self, metric: str) -> float:
        return float(np.mean([values[metric] for values in self.per_query.values()]))

    @property
    def pair_key(self) -> Tuple[str, int]:
        """What pairs two methods' runs: the same set (fold) and seed."""
        return self.info["fold"], self.info["seed"]


def runs_over_runs(a: Sequence[RunRecord], b: Sequence[RunRecord], metric: str,
                   n_permutations: int = 10000, seed: int = 0) -> Optional[OverRuns]:
    """The paired differences of ``a``'s and ``b``'s runs on the (fold, seed) both have; None with none."""
    mine, theirs = ({r.pair_key: r.mean(metric) for r in runs} for runs in (a, b))
    keys = sorted(set(mine) & set(theirs))
    if not keys:
        return None
    return over_runs([mine[k] for k in keys], [theirs[k] for k in keys], n_permutations=n_permutations, seed=seed)


def as_host_counts(records: Sequence[RunRecord]) -> Dict[Tuple[str, str], int]:
    """(host, why) -> how many of ``records`` trained with that host's losses for that reason."""
    counts: Dict[Tuple[str, str], int] = defaultdict(int)
    for record in records:
        if record.as_host:
            counts[(record.as_host["host"], record.as_host["why"])] += 1
    return dict(counts)


def marked_label(label: str, as_host: Dict[Tuple[str, str], int], n_runs: int) -> str:
    """``MULTR → DLA (logger guard: 3 of 3 runs)`` where runs trained as their host; ``label`` else."""
    if not as_host:
        return label
    parts = ["%s (%s: %d of %d runs)" % (host, why, count, n_runs) for (host, why), count in sorted(as_host.items())]
    return "%s → %s" % (label, "; ".join(parts))


def as_host_cell(as_host: Dict[Tuple[str, str], int]) -> str:
    """The CSV's ``trained_as_host``: ``DLA (logger guard): 3`` per reason, ``; ``-separated (empty: none)."""
    return "; ".join("%s (%s): %d" % (host, why, count) for (host, why), count in sorted(as_host.items()))


@dataclass
class TableRow:
    method: str
    label: str
    role: str
    n_runs: int
    mean: Dict[str, float]
    std: Dict[str, float]  # NaN with a single run
    p_value: Dict[str, float] = field(default_factory=dict)  # multr rows only
    significant: Dict[str, bool] = field(default_factory=dict)
    #: multr rows, when DLA and Oracle ran; None where Oracle <= DLA (no gap to close)
    gap_closed: Dict[str, Optional[float]] = field(default_factory=dict)
    #: "better" / "worse" / "equal": the sign of (this row - best baseline) over the tested queries
    direction: Dict[str, str] = field(default_factory=dict)
    #: multr rows: the paired differences over runs against the best baseline (None where no run pairs)
    over_runs: Dict[str, Optional[OverRuns]] = field(default_factory=dict)
    #: (host, why) -> runs of this row that trained with their host's losses
    as_host: Dict[Tuple[str, str], int] = field(default_factory=dict)

    @property
    def marked_label(self) -> str:
        return marked_label(self.label, self.as_host, self.n_runs)


@dataclass
class ResultTable:
    dataset: str
    variant: Optional[str]
    rows: List[TableRow]
    best_baseline: Dict[str, Optional[str]]  # metric -> method
    n_pooled_queries: Dict[str, int]  # multr method -> queries in its tests
    alpha: float
    n_permutations: int
    #: why the table is incomplete (empty: complete)
    incomplete: List[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.dataset + ("__" + self.variant if self.variant else "")


def unfinished_runs(runs_dir: str) -> List[Dict]:
    """``run.json`` of every run folder without ``done.json`` (running, pending or failed)."""
    infos = []
    for path in sorted(glob.glob(os.path.join(runs_dir, "**", "run.json"), recursive=True)):
        if not os.path.exists(os.path.join(os.path.dirname(path), "done.json")):
            with open(path) as handle:
                infos.append(json.load(handle))
    return infos


def incompleteness(records: Sequence[RunRecord], n_unfinished: int = 0) -> List[str]:
    """Why a group of runs is not complete: methods x folds with fewer seeds than the others, unfinished runs."""
    seeds: Dict[Tuple[str, str], int] = defaultdict(int)
    for record in records:
        seeds[(record.info["method"], record.info["fold"])] += 1
    methods = sorted({m for m, _ in seeds})
    folds = sorted({f for _, f in seeds})
    most = max(seeds.values()) if seeds else 0
    reasons = [
        "%s/%s has %d of %d seeds" % (m, f, seeds.get((m, f), 0), most)
        for m in methods for f in folds if seeds.get((m, f), 0) < most
    ]
    if n_unfinished:
        reasons.append("%d run(s) not finished (running, pending or failed)" % n_unfinished)
    return reasons


def finished_run_dirs(runs_dir: str) -> List[str]:
    """The folders under ``runs_dir`` of every finished run (with ``done.json``), sorted."""
    return [
        os.path.dirname(done) for done in sorted(glob.glob(os.path.join(runs_dir, "**", "done.json"), recursive=True))
    ]


def collect_runs(runs_dir: str) -> List[RunRecord]:
    """Every finished run under ``runs_dir`` (unfinished ones are ignored)."""
    records = []
    for run_dir in finished_run_dirs(runs_dir):
        with open(os.path.join(run_dir, "run.json")) as handle:
            info = json.load(handle)
        per_query = read_per_query_csv(os.path.join(run_dir, PER_QUERY_CSV))
        if not per_query:
            raise ValueError("%s has no queries" % os.path.join(run_dir, PER_QUERY_CSV))
        missing = set(METRICS) - set(next(iter(per_query.values())))
        if missing:
            raise ValueError("%s lacks columns %s" % (os.path.join(run_dir, PER_QUERY_CSV), sorted(missing)))
        ledger = read_summary(run_dir)
        as_host = trained_as_host(ledger.get("decisions", {})) if ledger else None
        records.append(RunRecord(info=info, per_query=per_query, as_host=as_host))
    return records


def pooled_queries(records: Sequence[RunRecord], metric: str) -> Dict[Tuple[str, str], float]:
    """(fold, qid) -> the metric averaged over the runs (seeds) that have it."""
    values: Dict[Tuple[str, str], List[float]] = defaultdict(list)
    for record in records:
        for qid, metrics in record.per_query.items():
            values[(record.info["fold"], qid)].append(metrics[metric])
    return {key: float(np.mean(v)) for key, v in values.items()}


def build_table(
    records: Sequence[RunRecord],
    dataset: str,
    variant: Optional[str],
    alpha: float = 0.05,
    n_permutations: int = 10000,
    seed: int = 0,
) -> ResultTable:
    """The Table 2 style table of one (dataset, variant) group of runs."""
    by_method: Dict[str, List[RunRecord]] = defaultdict(list)
    for record in records:
        by_method[record.info["method"]].append(record)
    order = sorted(by_method, key=lambda m: (by_method[m][0].info.get("order", 1 << 30), m))
    rows = []
    for method in order:
        runs = by_method[method]
        run_means = {metric: np.array([r.mean(metric) for r in runs]) for metric in METRICS}
        rows.append(
            TableRow(
                method=method,
                label=runs[0].info.get("label", method),
                role=runs[0].info.get("role", "baseline"),
                n_runs=len(runs),
                mean={m: float(v.mean()) for m, v in run_means.items()},
                std={m: float(v.std(ddof=1)) if v.size > 1 else float("nan") for m, v in run_means.items()},
                as_host=as_host_counts(runs),
            )
        )
    baselines = [row for row in rows if row.role == "baseline"]
    best = {m: max(baselines, key=lambda row: row.mean[m]).method if baselines else None for m in METRICS}
    means = {row.method: row.mean for row in rows}
    n_pooled: Dict[str, int] = {}
    for row in rows:
        if row.role != "multr":
            continue
        for metric in METRICS:
            if best[metric] is not None:
                mine = pooled_queries(by_method[row.method], metric)
                theirs = pooled_queries(by_method[best[metric]], metric)
                keys = sorted(set(mine) & set(theirs))
                if not keys:
                    raise ValueError("%s: %s and %s share no query" % (dataset, row.method, best[metric]))
                a = np.array([mine[k] for k in keys])
                b = np.array([theirs[k] for k in keys])
                p = randomization_test(a, b, n_permutations=n_permutations, seed=seed)
                difference = float(a.mean() - b.mean())
                row.p_value[metric] = p
                row.direction[metric] = "better" if difference > 0 else "worse" if difference < 0 else "equal"
                row.significant[metric] = bool(p <= alpha and difference > 0)
                row.over_runs[metric] = runs_over_runs(by_method[row.method], by_method[best[metric]], metric,
                                                       n_permutations, seed)
                n_pooled[row.method] = len(keys)
            if GAP_LOW in means and GAP_HIGH in means:
                gap = means[GAP_HIGH][metric] - means[GAP_LOW][metric]
                row.gap_closed[metric] = (row.mean[metric] - means[GAP_LOW][metric]) / gap if gap > 0 else None
    return ResultTable(dataset, variant, rows, best, n_pooled, alpha, n_permutations, incompleteness(records))


def _header(metric: str) -> str:
    family, k = metric.split("_")
    return "%s@%s" % ({"ndcg": "nDCG", "err": "ERR"}[family], k)


def _cell(row: TableRow, metric: str) -> str:
    text = "%.3f" % row.mean[metric]
    if not np.isnan(row.std[metric]):
        text += " ± %.3f" % row.std[metric]
    return text + ("*" if row.significant.get(metric) else "")


def _over_runs_cell(result: Optional[OverRuns]) -> str:
    if result is None:
        return "n/a (no run pairs)"
    return "%s (%s)" % (result.interval_text(), "-" if result.p is None else "%.3g" % result.p)


def _gap_cell(fraction: Optional[float]) -> str:
    return "n/a (Oracle <= DLA)" if fraction is None else "%.0f%%" % (100 * fraction)


def format_markdown(table: ResultTable) -> str:
    """The table, its legend, the p-values and the gap fractions as Markdown."""
    title = table.dataset + (" (%s)" % table.variant if table.variant else "")
    if table.incomplete:
        title += " -- INCOMPLETE"
    lines = ["### %s" % title, ""]
    if table.incomplete:
        lines += ["**Incomplete, not a final result**: %s." % "; ".join(table.incomplete), ""]
    lines.append("| Method | %s | Runs |" % " | ".join(_header(m) for m in METRICS))
    lines.append("|---|%s---|" % ("---|" * len(METRICS)))
    for row in table.rows:
        lines.append("| %s | %s | %d |" % (row.marked_label, " | ".join(_cell(row, m) for m in METRICS), row.n_runs))
    lines.append("")
    lines.append(
        "Mean ± sample standard deviation over runs (folds × seeds) of the per-run mean over test queries."
    )
    tested = [row for row in table.rows if row.p_value]
    if tested:
        labels = {row.method: row.label for row in table.rows}
        if len(set(table.best_baseline.values())) == 1:
            best = "%s in every column" % labels[table.best_baseline[METRICS[0]]]
        else:
            best = ", ".join("%s %s" % (_header(m), labels[table.best_baseline[m]]) for m in METRICS)
        lines.append(
            "\\* p <= %g in a paired two-sided Fisher randomisation test against the column's best baseline "
            "(%s), over queries pooled across folds with each query averaged over seeds "
            "(exact up to %d queries, else %d random permutations)."
            % (table.alpha, best, EXACT_MAX_QUERIES, table.n_permutations)
        )
        lines += ["", "| p vs best baseline (direction) | %s | Queries |" % " | ".join(_header(m) for m in METRICS)]
        lines.append("|---|%s---|" % ("---|" * len(METRICS)))
        for row in tested:
            cells = " | ".join("%.4f (%s)" % (row.p_value[m], row.direction[m]) for m in METRICS)
            lines.append("| %s | %s | %d |" % (row.marked_label, cells, table.n_pooled_queries[row.method]))
        lines += [
            "",
            "Over runs: the mean of the paired per-run differences against the column's best baseline (runs paired "
            "by fold and seed) with its 95 %% t-interval over the pairs, and the two-sided sign-flip p over the "
            "pairs (from %d pairs; \"-\" with fewer). A claim rests on these; the pooled query-level p above goes "
            "beside them." % MIN_PAIRS_FOR_P,
            "",
            "| Δ over runs vs best baseline [95%% interval] (p over runs) | %s | Pairs |"
            % " | ".join(_header(m) for m in METRICS),
            "|---|%s---|" % ("---|" * len(METRICS)),
        ]
        for row in tested:
            cells = " | ".join(_over_runs_cell(row.over_runs.get(m)) for m in METRICS)
            pairs = max((r.pairs for r in row.over_runs.values() if r is not None), default=0)
            lines.append("| %s | %s | %d |" % (row.marked_label, cells, pairs))
    marked = [row for row in table.rows if row.as_host]
    if marked:
        lines += ["", "→ marks runs that trained with their host algorithm's losses, not their own (a guard's "
                      "fallback, from each run's ledger): their results are the host's."]
    gapped = [row for row in table.rows if row.gap_closed]
    if gapped:
        lines += ["", "| DLA-to-Oracle gap closed | %s |" % " | ".join(_header(m) for m in METRICS)]
        lines.append("|---|%s" % ("---|" * len(METRICS)))
        for row in gapped:
            lines.append("| %s | %s |" % (row.label, " | ".join(_gap_cell(row.gap_closed[m]) for m in METRICS)))
    return "\n".join(lines) + "\n"


def format_csv(table: ResultTable) -> str:
    """One row per method: mean, std, p vs best baseline, significance, gap closed."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    columns = ["method", "label", "role", "n_runs", "incomplete", "trained_as_host"]
    for m in METRICS:
        columns += [
            m, m + "_std", m + "_p", m + "_direction", m + "_significant", m + "_gap_closed", m + "_best_baseline",
            m + "_delta_runs", m + "_ci_low", m + "_ci_high", m + "_p_runs", m + "_pairs",
        ]
    writer.writerow(columns)

    def fmt(value: Optional[float]) -> str:
        return "" if value is None or np.isnan(value) else "%.6f" % value

    for row in table.rows:
        cells = [row.method, row.label, row.role, row.n_runs, "; ".join(table.incomplete), as_host_cell(row.as_host)]
        for m in METRICS:
            gap = row.gap_closed.get(m, float("nan"))
            runs = row.over_runs.get(m)
            cells += [
                fmt(row.mean[m]), fmt(row.std[m]), fmt(row.p_value.get(m)), row.direction.get(m, ""),
                "" if m not in row.significant else int(row.significant[m]),
                "n/a" if gap is None else fmt(gap), table.best_baseline[m] or "",
            ] + ([fmt(runs.mean), fmt(runs.ci_low), fmt(runs.ci_high), fmt(runs.p), runs.pairs]
                 if runs is not None else [""] * 5)
        writer.writerow(cells)
    return buffer.getvalue()


def sweep_figure(records: Sequence[RunRecord], title: str):
    """nDCG@k and ERR@k (mean ± std over runs) against the sweep value, as a PNG.

    The x axis names the swept parameter (:data:`AXIS_LABELS`); the legend
    names each line's metric and cutoff (nDCG@1, ..., ERR@10).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_value: Dict[float, List[RunRecord]] = defaultdict(list)
    for record in records:
        by_value[float(record.info["sweep"]["value"])].append(record)
    xs = sorted(by_value)
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for axis, family in zip(axes, ("ndcg", "err")):
        for metric in (m for m in METRICS if m.startswith(family + "_")):
            values = [np.array([r.mean(metric) for r in by_value[x]]) for x in xs]
            mean = [v.mean() for v in values]
            std = [v.std(ddof=1) if v.size > 1 else 0.0 for v in values]
            axis.errorbar(xs, mean, yerr=std, marker="o", capsize=3, label=_header(metric))
        axis.set_xlabel(sweep_axis_label(records[0].info["sweep"]["parameter"]))
        axis.set_ylabel("%s@k (test)" % ("nDCG" if family == "ndcg" else "ERR"))
        axis.set_xticks(xs)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def plot_sweep(records: Sequence[RunRecord], path: str, title: str) -> None:
    """:func:`sweep_figure` written as a PNG to ``path``."""
    import matplotlib.pyplot as plt

    figure = sweep_figure(records, title)
    try:
        atomic_write_file(path, lambda tmp: figure.savefig(tmp, dpi=120, format="png"))
    finally:
        plt.close(figure)


def sweep_axis_label(parameter: str) -> str:
    return AXIS_LABELS.get(parameter, parameter)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def aggregate(
    runs_dir: str, out_dir: str, alpha: float = 0.05, n_permutations: int = 10000, seed: int = 0
) -> List[str]:
    """Write every table (``.md``, ``.csv``), ``summary.md`` and the sweep figures.

    Returns:
        The paths written.
    """
    records = collect_runs(runs_dir)
    if not records:
        raise ValueError("no finished run (done.json) under %s" % runs_dir)
    unfinished: Dict[Tuple[str, str], int] = defaultdict(int)
    for info in unfinished_runs(runs_dir):
        unfinished[(info["dataset"], info.get("variant") or "")] += 1
    groups: Dict[Tuple[str, str], List[RunRecord]] = defaultdict(list)
    sweeps: Dict[Tuple[str, str, str], List[RunRecord]] = defaultdict(list)
    for record in records:
        info = record.info
        groups[(info["dataset"], info.get("variant") or "")].append(record)
        if info.get("sweep"):
            sweeps[(info["dataset"], info["sweep"]["name"], info["method"])].append(record)
    written, sections = [], []
    for (dataset, variant), members in sorted(groups.items()):
        table = build_table(members, dataset, variant or None, alpha, n_permutations, seed)
        table.incomplete = incompleteness(members, unfinished[(dataset, variant)])
        if table.incomplete:
            logger.warning("%s is incomplete: %s", table.name, "; ".join(table.incomplete))
        markdown = format_markdown(table)
        sections.append(markdown)
        for suffix, text in ((".md", markdown), (".csv", format_csv(table))):
            path = os.path.join(out_dir, table.name + suffix)
            atomic_write_text(path, text)
            written.append(path)
    for (dataset, sweep, method), members in sorted(sweeps.items()):
        if not all(_is_number(r.info["sweep"]["value"]) for r in members):
            logger.info("sweep %s of %s has non-numeric values: no figure", sweep, method)
            continue
        if len({r.info["sweep"]["value"] for r in members}) < 2:
            logger.info("sweep %s of %s has one value: no figure", sweep, method)
            continue
        path = os.path.join(out_dir, "%s__%s__%s.png" % (dataset, sweep, method))
        parameter = sweep_axis_label(members[0].info["sweep"]["parameter"])
        plot_sweep(members, path, "%s: %s against %s" % (dataset, members[0].info.get("label", method), parameter))
        written.append(path)
    summary = os.path.join(out_dir, "summary.md")
    atomic_write_text(summary, "\n".join(sections))
    written.append(summary)
    return written
