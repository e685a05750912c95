"""ultra_multr.experiments.aggregate: the tables (significance marks, gaps, incomplete groups) and the sweep
figures, from records and from run folders."""
import numpy as np
import pytest
from run_records import METRICS, method_runs, write_runs

from ultra_multr.experiments.aggregate import aggregate, build_table, format_csv, format_markdown, sweep_figure


def test_table_marks_only_significant_multr_rows():
    rng = np.random.default_rng(0)
    base = {fold: rng.uniform(0.3, 0.6, size=30) for fold in ("F1", "F2")}
    records = (
        method_runs("oracle", "oracle", {f: v + 0.2 for f, v in base.items()})
        + method_runs("dla", "baseline", base)
        + method_runs("naive", "baseline", {f: v - 0.05 for f, v in base.items()})
        + method_runs("multr", "multr", {f: v + 0.05 for f, v in base.items()})
        + method_runs("rand_multr", "multr", {f: v + rng.normal(0, 0.05, size=30) for f, v in base.items()})
    )
    table = build_table(records, "toy", None, n_permutations=2000)
    rows = {row.method: row for row in table.rows}
    assert [row.method for row in table.rows] == ["oracle", "multr", "dla", "naive", "rand_multr"]
    assert table.best_baseline == {m: "dla" for m in METRICS}
    assert all(rows["multr"].significant.values()) and rows["multr"].p_value["ndcg_10"] < 0.01
    assert not any(rows["rand_multr"].significant.values())
    assert not rows["dla"].p_value and not rows["oracle"].significant
    assert table.n_pooled_queries["multr"] == 60  # 30 queries x 2 folds, seeds averaged
    assert rows["multr"].gap_closed["err_3"] == pytest.approx(0.25)  # +0.05 of a 0.2 gap

    markdown = format_markdown(table)
    multr_line = next(line for line in markdown.splitlines() if line.startswith("| MULTR |"))
    assert multr_line.count("*") == len(METRICS)
    rand_line = next(line for line in markdown.splitlines() if line.startswith("| RAND_MULTR |"))
    assert "*" not in rand_line
    assert "| nDCG@1 | nDCG@3 | nDCG@5 | nDCG@10 | ERR@1 | ERR@3 | ERR@5 | ERR@10 |" in markdown
    assert "| MULTR | 25% |" in markdown
    p_line = next(line for line in markdown.splitlines() if line.startswith("| MULTR | 0.0"))
    assert p_line.count("(better)") == len(METRICS)  # each p value says which way the difference goes
    assert not table.incomplete and "INCOMPLETE" not in markdown

    lines = format_csv(table).splitlines()
    header = lines[0].split(",")
    multr = dict(zip(header, next(l for l in lines if l.startswith("multr,")).split(",")))
    assert multr["ndcg_10_significant"] == "1" and multr["ndcg_10_best_baseline"] == "dla"
    assert float(multr["ndcg_10"]) == pytest.approx(np.mean(np.concatenate(list(base.values()))) + 0.05)
    dla = dict(zip(header, next(l for l in lines if l.startswith("dla,")).split(",")))
    assert dla["ndcg_10_p"] == "" and dla["n_runs"] == "4"
    assert multr["ndcg_10_direction"] == "better"


def test_gap_is_na_when_oracle_is_not_above_dla_and_p_values_say_worse():
    base = {"F1": np.linspace(0.3, 0.6, 20)}
    records = (
        method_runs("oracle", "oracle", {f: v - 0.01 for f, v in base.items()})
        + method_runs("dla", "baseline", base)
        + method_runs("multr", "multr", {f: v - 0.05 for f, v in base.items()})
    )
    table = build_table(records, "toy", None, n_permutations=200)
    multr = next(row for row in table.rows if row.method == "multr")
    assert all(multr.gap_closed[m] is None for m in METRICS)
    assert all(multr.direction[m] == "worse" and not multr.significant[m] for m in METRICS)
    markdown = format_markdown(table)
    assert "| MULTR | %s |" % " | ".join(["n/a (Oracle <= DLA)"] * len(METRICS)) in markdown
    assert "(worse)" in markdown and "(better)" not in markdown
    multr_csv = next(l for l in format_csv(table).splitlines() if l.startswith("multr,"))
    assert multr_csv.count(",n/a,") == len(METRICS)


def test_incomplete_groups_are_marked(tmp_path):
    base = {"F1": np.linspace(0.3, 0.6, 10), "F2": np.linspace(0.2, 0.5, 10)}
    records = method_runs("dla", "baseline", base) + method_runs("multr", "multr", base)
    records = [r for r in records if not (r.info["method"] == "multr" and r.info["fold"] == "F2" and r.info["seed"])]
    table = build_table(records, "toy", None, n_permutations=100)
    assert table.incomplete == ["multr/F2 has 1 of 2 seeds"]
    assert "### toy -- INCOMPLETE" in format_markdown(table) and "multr/F2 has 1 of 2 seeds" in format_markdown(table)
    # Through aggregate: a run folder without done.json (still running) marks its group too.
    runs_dir = tmp_path / "runs"
    write_runs(runs_dir, method_runs("dla", "baseline", {"F1": base["F1"]}))
    still_going = sorted(runs_dir.iterdir())[1]
    (still_going / "done.json").unlink()
    (still_going / "per_query_metrics.csv").unlink()
    aggregate(str(runs_dir), str(tmp_path / "results"), n_permutations=100)
    markdown = (tmp_path / "results" / "toy.md").read_text()
    assert "INCOMPLETE" in markdown and "1 run(s) not finished" in markdown


def test_sweep_figure_is_written(tmp_path):
    runs_dir = tmp_path / "runs"
    for value in (0, 2, 8):
        write_runs(runs_dir / ("v%d" % value), method_runs(
            "multr", "multr", {"F1": np.full(5, 0.4 + value / 100)}, variant="sample_num=%d" % value,
            sweep={"name": "samples", "parameter": "sample_num", "value": value}))
    written = aggregate(str(runs_dir), str(tmp_path / "results"), n_permutations=100)
    figure = tmp_path / "results" / "toy__samples__multr.png"
    assert str(figure) in written
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "results" / "toy__sample_num=8.md").exists()


def test_sweep_figure_names_its_axes_and_one_value_gives_no_figure(tmp_path):
    import matplotlib.pyplot as plt

    sweep = lambda k: {"name": "K", "parameter": "sessions_per_query", "value": k}
    records = [r for k in (1, 4, 16) for r in method_runs("dla", "baseline", {"F1": np.full(4, 0.3 + k / 100)},
                                                        variant="sessions_per_query=%d" % k, sweep=sweep(k))]
    figure = sweep_figure(records, "toy")
    ndcg, err = figure.axes
    assert ndcg.get_xlabel() == err.get_xlabel() == "sessions per query (click budget)"
    assert [t.get_text() for t in ndcg.get_legend().get_texts()] == ["nDCG@1", "nDCG@3", "nDCG@5", "nDCG@10"]
    assert [t.get_text() for t in err.get_legend().get_texts()] == ["ERR@1", "ERR@3", "ERR@5", "ERR@10"]
    plt.close(figure)

    runs_dir = tmp_path / "runs"
    write_runs(runs_dir, [r for r in records if r.info["sweep"]["value"] == 4])
    written = aggregate(str(runs_dir), str(tmp_path / "results"), n_permutations=100)
    assert not [path for path in written if path.endswith(".png")]


def test_every_writer_marks_runs_that_trained_as_their_host_and_gives_intervals_over_runs(tmp_path):
    """Six MULTR runs (2 folds x 3 seeds) paired with DLA's: three trained as DLA (the logger guard fired: equal to
    DLA), three with offsets +0.02, +0.04, +0.06.  The runner's tables, the CSV, compare and the sessions table mark
    the fallback runs with their count; the interval and p over runs are the hand-computed ones."""
    from scipy import stats

    from ultra_multr.experiments import budget, compare
    from ultra_multr.experiments.significance import randomization_test

    rng = np.random.default_rng(5)
    base = {fold: rng.uniform(0.3, 0.6, size=20) for fold in ("F1", "F2")}
    guard = {"host": "DLA", "why": "logger guard"}
    runs = tmp_path / "runs"
    offsets = {("F1", 0): 0.0, ("F1", 1): 0.0, ("F1", 2): 0.0, ("F2", 0): 0.02, ("F2", 1): 0.04, ("F2", 2): 0.06}
    multr = []
    for (fold, seed), offset in offsets.items():
        multr += method_runs("multr", "multr", {fold: base[fold] + offset}, seeds=(seed,),
                             as_host=guard if offset == 0.0 else None)
    write_runs(runs, method_runs("dla", "baseline", base, seeds=(0, 1, 2)) + multr)
    written = aggregate(str(runs), str(tmp_path / "results"), n_permutations=500)
    markdown = (tmp_path / "results" / "toy.md").read_text()
    label = "MULTR → DLA (logger guard: 3 of 6 runs)"
    assert markdown.count("| %s |" % label) == 3  # the means, the pooled p, the intervals over runs
    assert "→ marks runs that trained with their host algorithm's losses" in markdown
    assert str(tmp_path / "results" / "summary.md") in written and label in (tmp_path / "results" / "summary.md").read_text()
    differences = np.array(list(offsets.values()))
    half = stats.t.ppf(0.975, 5) * differences.std(ddof=1) / np.sqrt(6)
    p_runs = randomization_test(differences, np.zeros(6), exact_max_queries=20)
    cell = "%+.4f [%+.4f, %+.4f] (%.3g)" % (differences.mean(), differences.mean() - half, differences.mean() + half,
                                          p_runs)
    interval_line = next(line for line in markdown.splitlines() if line.startswith("| %s | %s" % (label, cell)))
    assert interval_line.endswith("| 6 |")
    lines = (tmp_path / "results" / "toy.csv").read_text().splitlines()
    row = dict(zip(lines[0].split(","), next(line for line in lines if line.startswith("multr,")).split(",")))
    assert row["trained_as_host"] == "DLA (logger guard): 3" and row["ndcg_10_pairs"] == "6"
    assert float(row["ndcg_10_ci_low"]) == pytest.approx(differences.mean() - half, abs=1e-6)
    assert float(row["ndcg_10_p_runs"]) == pytest.approx(p_runs, abs=1e-6)
    table = compare.comparison_table(str(runs), str(runs), "multr", "dla", ("before", "after"), 500)
    assert "| after → DLA (logger guard: 3 of 6 runs) (6 runs) |" in table
    assert "| after vs dla: over runs | %s; 6 pairs)" % cell.replace("(", "(p ")[:-1] in table
    sessions = budget.format_markdown(str(runs))
    assert sessions.count("| DLA (logger guard) |") == 3 and "\"trained as\"" in sessions
