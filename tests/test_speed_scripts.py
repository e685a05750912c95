"""The speed scripts of benchmarks/ run, print the rows their docs name, and keep to their time limits."""
from __future__ import annotations

import csv
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, require_ultra

pytestmark = pytest.mark.slow  # every test here starts a process

require_ultra()

TINY = ["--batch-size", "8", "--features", "6", "--list-size", "5", "--warmup", "1"]


def run_script(name, *args):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "benchmarks", name)] + TINY + list(args),
        capture_output=True, text=True, timeout=240, env=env, cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_profile_reports_both_steps():
    out = run_script("profile_step.py", "--steps", "1", "--samples", "2", "--rows", "3")
    headers = re.findall(r"^## (DLA|MULTR .*?): ([0-9.]+) ms per step under the profiler", out, flags=re.M)
    assert [h[0].split()[0] for h in headers] == ["DLA", "MULTR"]
    assert "sample_num=2" in headers[1][0]
    assert out.count("Self CPU time total") == 2


def test_whole_run_gpu_script_tiny_mode_measures_the_pair_from_later_starts(tmp_path):
    env = dict(os.environ, WHOLE_RUN_WORK=str(tmp_path / "work"),
               PYTHONPATH=os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "out"
    result = subprocess.run([os.path.join(REPO_ROOT, "benchmarks", "whole_run_gpu.sh"), "--tiny", str(out)],
                            capture_output=True, text=True, timeout=240, env=env, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert sorted(os.listdir(out)) == ["dla.log", "multr_default.log", "propensity_ranker_cost.md", "run.log",
                                       "step_time.log", "whole_run.csv", "whole_run.md"]
    with open(out / "whole_run.csv") as handle:
        runs = {row["config"]: row for row in csv.DictReader(handle)}
    assert list(runs) == ["multr_default", "dla"] and all(r["status"] == "ok" for r in runs.values())
    # both start as later starts: the script filled the check cache before them
    assert runs["dla"]["checks_cached"] == runs["multr_default"]["checks_cached"] == "yes"
    for name in ("ultra_read_s", "checks_s", "first_update_s", "startup_s", "step_s", "peak_rss_mb"):
        assert float(runs["dla"][name]) >= 0 and float(runs["multr_default"][name]) >= 0, name
    multr = runs["multr_default"]
    assert runs["dla"]["simulator_s"] == runs["dla"]["expected_pass_s"] == ""
    assert float(multr["simulator_s"]) > 0 and float(multr["expected_pass_s"]) > 0 and multr["pilot_s"] == ""
    # the simulator's facts are the ledger's (2 steps under --tiny; its decision recorded though the guard is off)
    assert (multr["sim_steps_run"], multr["sim_best_step"]) == ("2.00", "2.00")
    assert multr["sim_decision"] in ("accepted", "rejected") and runs["dla"]["sim_decision"] == ""
    table = (out / "whole_run.md").read_text().split("## Whole runs as measured")[1]
    row = re.search(r"^\| multr_default \| 1 \| ([0-9.]+) \| ([0-9.]+)x \| .*\| 2 / 2 \|", table, flags=re.M)
    assert row and float(row.group(2)) == pytest.approx(float(multr["total_s"]) / float(runs["dla"]["total_s"]), abs=0.01)
    assert "## Extrapolated to 10000 ranker steps (not measured)" in (out / "whole_run.md").read_text()
    # a summary rewritten from the CSV (scale.py --summarize) gives the step times the runs' own summary gave
    again = tmp_path / "again"
    result = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "benchmarks", "scale.py"), "--summarize",
                             str(out / "whole_run.csv"), "--out", str(again)],
                            capture_output=True, text=True, timeout=120, env=env, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    live, rewritten = ms_per_step(out / "whole_run.md"), ms_per_step(tmp_path / "again.md")
    assert list(rewritten) == ["multr_default", "dla"]
    assert all(rewritten[c] == pytest.approx(live[c], abs=0.011) for c in live), (live, rewritten)
    # the step benchmark (step_time.py): a time for every configuration, DLA's ratio 1 (a ratio printed with 2
    # decimals can round to 0.00 on a loaded machine)
    steps = (out / "step_time.log").read_text()
    rows = {name: (ms, ratio) for name, ms, ratio in re.findall(r"^\| (.+?) \| ([0-9.]+) \| ([0-9.]+) ", steps, flags=re.M)}
    assert rows["DLA"][1] == "1.00", steps
    for name in ("MULTR sample_num=4", "MULTR imputation=expected sample_num=4", "simulator training step (Adam)",
                 "lower bound: simulator matrix products alone, sample_num=4"):
        assert float(rows[name][0]) > 0, (name, steps)
    assert re.search(r"one-off pass \(imputation_samples=256\): [0-9.]+ s per 1,000 lists", steps), steps
    # the propensity side's cost and statistic (propensity_ranker_cost.py): every configuration; DLA's ratio 1;
    # propensity_ranker=dla at k = 1 learns DLA's propensities exactly, DLA from another seed does not
    cost = (out / "propensity_ranker_cost.md").read_text()
    assert "16 updates per configuration in 4 interleaved rounds of 4" in cost  # --steps 12, --every 1 2 4: L = 4
    rows = re.findall(r"^\| (.+?) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9. /]+) \|$", cost, flags=re.M)
    assert [r[0] for r in rows] == [
        "DLA", "DLA, another seed (DLA's own spread)", "MULTR propensity_ranker=multr (the paper's coupling)",
        "MULTR propensity_ranker=dla, propensity_update_every=1 (default)",
        "MULTR propensity_ranker=dla, propensity_update_every=2", "MULTR propensity_ranker=dla, propensity_update_every=4",
        "MULTR propensity_ranker=dla, examination_ranker_layers=[16]"]
    statistics = {label: [float(v) for v in values.split(" / ")] for label, _, _, values in rows}
    assert rows[0][2] == "1.00" and all(float(ms) > 0 for _, ms, _, _ in rows)
    assert statistics["DLA"] == [0.0] * 4 and statistics[rows[3][0]] == [0.0] * 4
    assert min(statistics[rows[1][0]]) > 0 and min(statistics[rows[6][0]]) > 0

def ms_per_step(summary) -> dict:
    """config -> ms / step of scale.py's table "Whole runs as measured" in the file ``summary``."""
    table = summary.read_text().split("## Whole runs as measured")[1].split("\n## ")[0]
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    column = [cell.strip() for cell in rows[0]].index("ms / step")
    return {row[0].strip(): float(row[column]) for row in rows[1:]}


def test_benchmark_scale_stops_a_run_at_its_time_limit_and_starts_no_other(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")]))
    work, script = tmp_path / "work", os.path.join(REPO_ROOT, "benchmarks", "scale.py")
    for args in (["--tiny", "--workdir", str(work), "--prepare-only"],
                 ["--data", str(work / "data"), "--workdir", str(work), "--configs", "dla", "multr_default",
                  "--steps", "100000", "--repeats", "1", "--time-limit", "6", "--out", str(tmp_path / "limited")]):
        result = subprocess.run([sys.executable, script] + args, capture_output=True, text=True, timeout=240, env=env,
                                cwd=REPO_ROOT)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    summary = (tmp_path / "limited.md").read_text()
    assert re.search(r"^dla #0: stopped at the time limit after [0-9.]+ s", summary, flags=re.M)
    assert "Not started (time limit): multr_default #0" in summary
    with open(tmp_path / "limited.csv") as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["status"] == "stopped at the time limit" and 5 <= float(row["total_s"]) < 6 + 25  # SIGKILL 20 s after SIGINT


def test_the_compact_reader_benchmark_measures_every_reader_and_summarizes(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")]))
    results = tmp_path / "results"
    results.mkdir()
    result = subprocess.run(  # 6 training queries: every reader, ULTRA's among them
        [sys.executable, os.path.join(REPO_ROOT, "benchmarks", "compact_reader.py"), "--shape", "yahoo",
         "--fraction", "0.0003", "--data", str(tmp_path / "data"), "--repeats", "1", "--ultra-max-fraction", "0.0006",
         "--out", str(results / "yahoo_0.0003")],
        capture_output=True, text=True, timeout=240, env=env, cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    rows = (results / "yahoo_0.0003.csv").read_text().splitlines()
    assert [row.split(",")[2] for row in rows[1:]] == ["ultra", "compact_first", "compact_store", "compact_later"]
    # the summary's projection of ULTRA's reader needs it measured at two sizes and a size beyond: the measured rows
    # again at 5/3 and 8/3 of the documents (times and peaks scaled alike), ULTRA's left out at the largest
    with open(results / "yahoo_0.0003.csv") as handle:
        measured_rows = list(csv.DictReader(handle))
    for fraction, scale in (("0.0005", 5 / 3), ("0.0008", 8 / 3)):
        with open(results / ("yahoo_%s.csv" % fraction), "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(measured_rows[0]))
            writer.writeheader()
            for row in measured_rows:
                if fraction == "0.0008" and row["config"] == "ultra":
                    continue
                writer.writerow(dict(row, fraction=fraction, **{
                    column: "%g" % (float(row[column]) * scale) for column in ("documents", "read_s", "peak_rss_mb")
                    if row.get(column)}))
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "benchmarks", "compact_reader.py"), "--summarize", str(results)],
        capture_output=True, text=True, timeout=240, env=env, cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = (results / "summary.md").read_text()
    measured = (r"\| yahoo \| 0.0003 \| \d+ \| \d+ \| compact_first \| 1 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|  "
                r"\| [0-9.]+x \|")
    assert re.search(measured, summary), summary
    # beyond the sizes ULTRA's reader was measured at: a line through them, labelled
    assert re.search(r"\| yahoo \| 0.0008 \| \d+ \| \| ultra \(projected, not measured\) \|", summary), summary
    assert re.search(r"\| yahoo \| 0.0008 .* compact_first .* \| [0-9.]+x \(ULTRA projected\) \|", summary), summary
