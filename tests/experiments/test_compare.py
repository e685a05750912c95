"""ultra_multr.experiments.compare: one method across two run folders, paired per query."""
import numpy as np
from run_records import METRICS, method_runs, write_runs

from ultra_multr.experiments import compare


def test_compare_pairs_one_method_across_two_run_folders(tmp_path):
    rng = np.random.default_rng(1)
    base = {fold: rng.uniform(0.3, 0.6, size=40) for fold in ("F1", "F2")}
    write_runs(tmp_path / "before", method_runs("multr", "multr", {f: v - 0.1 for f, v in base.items()}))
    write_runs(tmp_path / "after", method_runs("multr", "multr", base) + method_runs("dla", "baseline", base))
    out = tmp_path / "table.md"
    assert compare.main([str(tmp_path / "before"), str(tmp_path / "after"), "--against", "dla",
                         "--permutations", "500", "--out", str(out)]) == 0
    rows = {line.split(" | ")[0].strip("| "): line for line in out.read_text().splitlines()[2:]}
    assert set(rows) == {"dla (4 runs)", "before (4 runs)", "after (4 runs)"} | {
        "%s vs %s: %s" % (a, b, what) for a, b in (("before", "dla"), ("after", "dla"), ("after", "before"))
        for what in ("p over queries", "over runs")}
    assert rows["after vs before: p over queries"].count("(better)") == len(METRICS)  # 0.1 higher on every query
    assert rows["before vs dla: p over queries"].count("(worse)") == len(METRICS)
    assert rows["after vs dla: p over queries"].count("1 (equal)") == len(METRICS)  # identical per-query values
    assert compare.main([str(tmp_path / "before"), str(tmp_path / "after"), "--method", "eib_multr"]) == 2


def test_compare_pairs_a_sweep_variant_with_the_default_in_one_folder(tmp_path):
    rng = np.random.default_rng(2)
    base = {fold: rng.uniform(0.3, 0.6, size=30) for fold in ("F1", "F2")}
    runs = tmp_path / "runs"
    write_runs(runs / "default", method_runs("multr", "multr", base) + method_runs("dla", "baseline", base))
    write_runs(runs / "fixed", method_runs(
        "multr", "multr", {f: v - 0.05 for f, v in base.items()}, variant="rerank_weight=0",
        sweep={"name": "rerank_weight", "parameter": "rerank_weight", "value": "0"}))
    out = tmp_path / "table.md"
    assert compare.main([str(runs), str(runs), "--variant-before", "rerank_weight=0", "--label-before", "a = 0",
                         "--label-after", "auto", "--permutations", "500", "--out", str(out)]) == 0
    rows = {line.split(" | ")[0].strip("| "): line for line in out.read_text().splitlines()[2:]}
    assert rows["auto vs a = 0: p over queries"].count("(better)") == len(METRICS)  # the default runs, not the sweep's
    assert rows["a = 0 vs dla: p over queries"].count("(worse)") == len(METRICS)
    assert compare.main([str(runs), str(runs), "--variant-before", "rerank_weight=paper"]) == 2  # no such runs


def test_compare_keeps_only_the_given_seeds_and_takes_the_baseline_from_the_after_variant(tmp_path, capsys):
    rng = np.random.default_rng(3)
    base = {fold: rng.uniform(0.3, 0.6, size=30) for fold in ("F1", "F2")}
    k4 = dict(variant="sessions_per_query=4", sweep={"name": "K", "parameter": "sessions_per_query", "value": 4})
    # The after folder: seed 0 equal to the before runs, seed 1 far above; DLA in the same sweep variant.
    write_runs(tmp_path / "before", method_runs("multr", "multr", base, seeds=(0,), **k4))
    write_runs(tmp_path / "after", method_runs("multr", "multr", base, seeds=(0,), **k4)
                + method_runs("multr", "multr", {f: v + 0.3 for f, v in base.items()}, seeds=(1,), **k4)
                + method_runs("dla", "baseline", {f: v - 0.1 for f, v in base.items()}, **k4))
    out = tmp_path / "table.md"
    argv = [str(tmp_path / "before"), str(tmp_path / "after"), "--variant-before", k4["variant"],
            "--variant-after", k4["variant"], "--permutations", "500", "--out", str(out)]
    assert compare.main(argv + ["--seeds", "0"]) == 0
    rows = {line.split(" | ")[0].strip("| "): line for line in out.read_text().splitlines()[2:]}
    assert {"dla (2 runs)", "before (2 runs)", "after (2 runs)"} <= set(rows)  # seed 1 of each left out
    assert rows["after vs before: p over queries"].count("1 (equal)") == len(METRICS)
    assert rows["after vs dla: p over queries"].count("(better)") == len(METRICS)
    assert compare.main(argv) == 0  # every seed: the after folder's seed 1 makes it better
    rows = {line.split(" | ")[0].strip("| "): line for line in out.read_text().splitlines()[2:]}
    assert "after (4 runs)" in rows and rows["after vs before: p over queries"].count("(better)") == len(METRICS)
    assert compare.main(argv + ["--seeds", "7"]) == 2
    assert "no finished 'multr' run of variant 'sessions_per_query=4' of seeds 7" in capsys.readouterr().err
