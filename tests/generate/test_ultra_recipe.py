"""Generated data in ULTRA's recipe: the logging ranker is a Rank SVM of the features, fitted on 1 % of the labels."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from conftest import require

require("sklearn")

from ultra_multr.data.prepare import PrepareOptions, prepare_split_files  # noqa: E402
from ultra_multr.generate.ultra_recipe import GRADE_QUANTILES, Recipe, write_recipe_dataset, write_recipe_letor  # noqa: E402

SMALL = Recipe(train_queries=300, valid_queries=30, test_queries=40, features=8, nonlinear=1.0, seed=3)


def init_lists(data_dir: str, split: str):
    """qid -> the documents' ids in logged order."""
    with open(os.path.join(data_dir, split, split + ".feature")) as handle:
        doc_ids = [line.split(" ", 1)[0] for line in handle]
    with open(os.path.join(data_dir, split, split + ".init_list")) as handle:
        return {parts[0]: [doc_ids[int(i)] for i in parts[1:]] for parts in (line.split() for line in handle)}


def labels(data_dir: str, split: str):
    with open(os.path.join(data_dir, split, split + ".labels")) as handle:
        return {parts[0]: [float(v) for v in parts[1:]] for parts in (line.split() for line in handle)}


def relabel(path: str, keep_qids) -> None:
    """Rewrite a LETOR file with every label of the queries outside ``keep_qids`` reversed (4 - y)."""
    with open(path) as handle:
        lines = handle.read().splitlines()
    out = []
    for line in lines:
        label, qid, rest = line.split(" ", 2)
        if qid.split(":", 1)[1] not in keep_qids:
            label = str(4 - int(label))
        out.append(" ".join([label, qid, rest]))
    with open(path, "w") as handle:
        handle.write("\n".join(out) + "\n")


def test_the_logger_reads_no_label_beyond_its_one_percent_sample(tmp_path):
    data_dir = str(tmp_path / "recipe")
    report = write_recipe_dataset(data_dir, SMALL)
    sampled = set(report["rank_svm"]["sampled_qids"])
    assert len(sampled) == 20  # 1 % of 300 queries is 3: the minimum of 20 applies, as for real data
    # The same LETOR files with every other query's labels reversed, prepared again: the logged orders do not move.
    paths = write_recipe_letor(str(tmp_path / "relabelled"), SMALL)
    for split, path in paths.items():
        relabel(path, sampled if split == "train" else set())
    prepare_split_files(paths["train"], paths["valid"], paths["test"], str(tmp_path / "relabelled"),
                        PrepareOptions(seed=SMALL.seed))
    for split in ("train", "valid", "test"):
        assert init_lists(str(tmp_path / "relabelled"), split) == init_lists(data_dir, split)
        changed = labels(str(tmp_path / "relabelled"), split) != labels(data_dir, split)
        assert changed  # the labels did change: the orders stayed because the logger never read them
    # ... and its sample's labels do move it: reversing them turns the logger around
    paths = write_recipe_letor(str(tmp_path / "sample_relabelled"), SMALL)
    relabel(paths["train"], set())
    prepare_split_files(paths["train"], paths["valid"], paths["test"], str(tmp_path / "sample_relabelled"),
                        PrepareOptions(seed=SMALL.seed))
    assert init_lists(str(tmp_path / "sample_relabelled"), "test") != init_lists(data_dir, "test")


def test_the_recipe_grades_0_to_4_shows_whole_lists_and_its_logger_is_between_random_and_ideal(tmp_path):
    data_dir = str(tmp_path / "recipe")
    report = write_recipe_dataset(data_dir, SMALL)
    quality = report["rank_svm"]["heldout_training_queries"]
    assert quality["random_ndcg_10"] + 0.05 < quality["ndcg_10"] < 0.99
    grades = np.concatenate([v for v in labels(data_dir, "train").values()])
    assert set(np.unique(grades)) == {0.0, 1.0, 2.0, 3.0, 4.0}
    # the grade shares follow GRADE_QUANTILES (to sampling noise on ~2,400 documents)
    shares = np.diff(np.concatenate([[0.0], GRADE_QUANTILES, [1.0]]))
    observed = np.bincount(grades.astype(int), minlength=5) / len(grades)
    assert np.abs(observed - shares).max() < 0.04
    assert max(len(v) for v in init_lists(data_dir, "train").values()) <= 10
    with open(os.path.join(data_dir + ".letor", "recipe.json")) as handle:
        assert json.load(handle)["nonlinear"] == 1.0


def test_a_recipe_with_lists_over_ten_is_refused():
    from ultra_multr.config import HParamError

    with pytest.raises((HParamError, ValueError), match="docs_per_query must be"):
        Recipe(docs_per_query=(6, 12))


def load_screen():
    import importlib.util

    from conftest import REPO_ROOT

    spec = importlib.util.spec_from_file_location("screen", os.path.join(REPO_ROOT, "studies", "paper_setting",
                                                                         "screen.py"))
    screen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(screen)
    return screen


def test_the_grids_multr_rows_name_their_logger_guard():
    """The running grid's MULTR rows finished while logger_guard's default was none: they name it, so the runner's
    fingerprint keeps their finished runs (tests/experiments/runner/test_runs.py); the guarded row names order_fit."""
    screen = load_screen()
    guard = {name: method["learning_algorithm_hparams"].get("logger_guard")
             for name, method in screen.METHODS.items() if method["learning_algorithm"] == "ultra_multr.MULTR"}
    assert guard == {"multr_pilot": "none", "rand_multr_pilot": "none", "multr_swap10_pilot": "none",
                     "multr_heldout15_pilot": "none", "multr_minheldout_pilot": "none",
                     "multr_guarded_pilot": "order_fit"}


def test_the_grids_table_is_in_the_issues_format(tmp_path):
    screen = load_screen()
    rows = [{"data": "ultra_recipe", "regime": "cascade", "method": "MULTR", "runs": 2, "ndcg10": "0.9400",
             "delta_vs_dla": "-0.0044", "p_vs_dla": "0.03", "p_holm": "0.03"}]
    screen.write_grid(rows, str(tmp_path), steps=2000, seeds=[0, 1], sets=["quadratic_1_f46", "stress_1"])
    assert (tmp_path / "paper_setting.csv").read_text().splitlines() == [
        "data,regime,method,runs,ndcg10,delta_vs_dla,ci_low,ci_high,p_runs,p_vs_dla,p_holm",
        "ultra_recipe,cascade,MULTR,2,0.9400,-0.0044,,,,0.03,0.03"]  # a row written before the columns existed
    assert "Sets quadratic_1_f46, stress_1, cascade clicks, seeds 0, 1, 2000 ranker updates" in \
        (tmp_path / "paper_setting.md").read_text()


def test_the_grid_compares_each_group_with_its_own_dla(tmp_path):
    from run_records import method_runs, write_runs

    screen = load_screen()
    records = []
    for dataset, dla, multr in (("recipe", [0.5, 0.6, 0.7], [0.6, 0.7, 0.8]), ("stress", [0.8, 0.8, 0.9],
                                                                                  [0.6, 0.7, 0.7])):
        records += method_runs("dla_pilot", "baseline", {"set": dla}, dataset=dataset)
        records += method_runs("multr_pilot", "multr", {"set": multr}, dataset=dataset)
    write_runs(tmp_path, records)
    rows = screen.grid_rows(str(tmp_path), ["multr_pilot", "dla_pilot"], n_permutations=100)
    assert [(r["data"], r["method"], r["runs"], r["ndcg10"], r["delta_vs_dla"]) for r in rows] == [
        ("ultra_recipe", "MULTR", 2, "0.7000", "+0.1000"), ("ultra_recipe", "DLA", 2, "0.6000", ""),
        ("stress", "MULTR", 2, "0.6667", "-0.1667"), ("stress", "DLA", 2, "0.8333", "")]
    # MULTR against Rand-MULTR where both ran: none here
    assert screen.pair_rows(str(tmp_path), n_permutations=100) == []
    write_runs(tmp_path / "more", method_runs("rand_multr_pilot", "multr", {"set": [0.5, 0.5, 0.5]}, dataset="recipe")
               + [r for r in records if r.info["method"] == "multr_pilot"])
    pairs = screen.pair_rows(str(tmp_path / "more"), n_permutations=100)
    assert [(r["data"], r["method"], r["against"], r["runs"], r["delta"]) for r in pairs] == [
        ("ultra_recipe", "MULTR", "Rand-MULTR", "2 vs 2", "+0.2000")]
    # the spread: each set alone (here one set per group, so the same figures, with the set named)
    per_set = screen.set_rows(str(tmp_path), ["multr_pilot", "dla_pilot"], n_permutations=100)
    assert [(r["data"], r["set"], r["method"], r["delta_vs_dla"]) for r in per_set] == [
        ("ultra_recipe", "set", "MULTR", "+0.1000"), ("ultra_recipe", "set", "DLA", ""),
        ("stress", "set", "MULTR", "-0.1667"), ("stress", "set", "DLA", "")]


def test_the_per_seed_table_pairs_each_seed_with_its_own_dla(tmp_path):
    from run_records import method_runs, write_runs

    screen = load_screen()
    records = (method_runs("dla_pilot", "baseline", {"set": [0.5, 0.6, 0.7]}, seeds=(0,), dataset="recipe")
               + method_runs("dla_pilot", "baseline", {"set": [0.9, 0.9, 0.9]}, seeds=(1,), dataset="recipe")
               + method_runs("multr_pilot", "multr", {"set": [0.6, 0.7, 0.8]}, seeds=(0,), dataset="recipe")
               + method_runs("multr_pilot", "multr", {"set": [0.8, 0.8, 0.8]}, seeds=(1,), dataset="recipe"))
    write_runs(tmp_path, records)
    per_seed = screen.set_rows(str(tmp_path), ["multr_pilot", "dla_pilot"], "sparse", n_permutations=100,
                               by_seed=True)
    assert [tuple(r[c] for c in screen.SEED_COLUMNS[:7]) for r in per_seed] == [
        ("ultra_recipe", "set", 0, "sparse", "MULTR", "0.7000", "+0.1000"),
        ("ultra_recipe", "set", 0, "sparse", "DLA", "0.6000", ""),
        ("ultra_recipe", "set", 1, "sparse", "MULTR", "0.8000", "-0.1000"),
        ("ultra_recipe", "set", 1, "sparse", "DLA", "0.9000", "")]
    # pooled over the seeds the two cancel: the per-seed table is what shows the spread
    (pooled,) = [r for r in screen.set_rows(str(tmp_path), ["multr_pilot", "dla_pilot"], n_permutations=100)
                 if r["method"] == "MULTR"]
    assert pooled["delta_vs_dla"] in ("+0.0000", "-0.0000")


def test_the_screenings_tables_hold_each_recipes_row(tmp_path):
    screen = load_screen()
    row = {"recipe": "quadratic_2", "nonlinear": 2.0, "label_noise": 0.5, "features": 20, "train_queries": 1000,
           "logger_ndcg10": "0.6913", "oracle_ndcg10": "0.9540", "dla_ndcg10": "0.9451", "gap": "+0.0089",
           "p": "0.0004", "goal_met": "no"}
    screen.write_tables([row], str(tmp_path), steps=2000, seed=0)
    csv = (tmp_path / "screening.csv").read_text().splitlines()
    assert csv == [",".join(screen.COLUMNS), "quadratic_2,2.0,0.5,20,1000,0.6913,0.9540,0.9451,+0.0089,0.0004,no"]
    markdown = (tmp_path / "screening.md").read_text()
    assert "Rank SVM on 1 % of labelled training queries" in markdown and "2000 ranker updates" in markdown
    assert "| quadratic_2 | 2.0 | 0.5 | 20 | 1000 | 0.6913 | 0.9540 | 0.9451 | +0.0089 | 0.0004 | no |" in markdown


def test_holm_adjusts_each_methods_tests_across_the_grids_cells(tmp_path):
    screen = load_screen()
    assert screen.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])  # 3 x 0.01, then max(2 x 0.03, ..)
    assert screen.holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    for regime, p in (("cascade", "0.08"), ("pbm", "0.013")):
        rows = [{"data": "ultra_recipe", "regime": regime, "method": "MULTR", "runs": 2, "ndcg10": "0.95",
                 "delta_vs_dla": "+0.004", "p_vs_dla": p, "p_holm": p},
                {"data": "ultra_recipe", "regime": regime, "method": "DLA", "runs": 2, "ndcg10": "0.946",
                 "delta_vs_dla": "", "p_vs_dla": "", "p_holm": ""}]
        screen.write_grid(rows, str(tmp_path), 2000, [0, 1], ["r"], regime)
    combined = screen.combine_grids([str(tmp_path / "paper_setting.csv"), str(tmp_path / "paper_setting_pbm.csv")])
    assert [(r["regime"], r["method"], r["p_holm"]) for r in combined] == [
        ("cascade", "MULTR", "0.08"), ("cascade", "DLA", ""), ("pbm", "MULTR", "0.026"), ("pbm", "DLA", "")]


def test_the_sparse_regime_gives_every_method_one_fixed_log_of_k_sessions_per_query(tmp_path):
    """--sessions-per-query K: every run's settings.json names ClickLogFeed with K (MULTR's simulator and the pilots
    take main.py's train feed, so they draw from the same log); fresh clicks otherwise."""
    from ultra_multr.experiments.runner.cli import expand_runs, load_config

    screen = load_screen()
    data = {"quadratic_1_3000q": str(tmp_path / "data")}
    for k, feed in ((1, "ultra_multr.feeds.ClickLogFeed"), (0, "ultra_multr.feeds.ClickSimulationFeed")):
        config = screen.study_config(str(tmp_path / "out"), data, [0], 2000, ["dla_pilot", "multr_pilot"],
                                     sessions_per_query=k)
        (tmp_path / "grid.json").write_text(json.dumps(config))
        runs = expand_runs(load_config(str(tmp_path / "grid.json")))
        assert len(runs) == 2
        for run in runs:
            assert run.settings["train_input_feed"] == feed
            hparams = dict(item.split("=", 1) for item in run.settings["train_input_hparams"].split(","))
            assert hparams.get("sessions_per_query") == (str(k) if k else None)
    with pytest.raises(SystemExit):
        screen.main(["--out", str(tmp_path / "x"), "--sessions-per-query", "1"])  # only with --grid


def test_the_grid_marks_runs_that_trained_as_dla_and_gives_intervals_over_runs(tmp_path):
    """Six MULTR runs against DLA on one group (one set, seeds 0-5): three trained as DLA by the logger guard (equal
    to DLA), three 0.05 above: the row is marked with the count, its interval over runs and p_runs are filled."""
    from run_records import method_runs, write_runs

    screen = load_screen()
    base = {"set": [0.5, 0.6, 0.7, 0.4]}
    records = method_runs("dla_pilot", "baseline", base, seeds=range(6), dataset="recipe")
    records += method_runs("multr_pilot", "multr", base, seeds=range(3), dataset="recipe",
                           as_host={"host": "DLA", "why": "logger guard"})
    records += method_runs("multr_pilot", "multr", {"set": [v + 0.05 for v in base["set"]]}, seeds=range(3, 6),
                           dataset="recipe")
    write_runs(tmp_path / "runs", records)
    row = next(r for r in screen.grid_rows(str(tmp_path / "runs"), ["multr_pilot", "dla_pilot"], n_permutations=100)
               if r["method"] != "DLA")
    assert row["method"] == "MULTR → DLA (logger guard: 3 of 6 runs)" and row["delta_vs_dla"] == "+0.0250"
    assert float(row["ci_low"]) < 0.025 < float(row["ci_high"]) and row["p_runs"] == "0.25"  # 16 of 64 sign flips reach it
    screen.write_grid([row], str(tmp_path), steps=2000, seeds=range(6), sets=["set"])
    assert "MULTR → DLA (logger guard: 3 of 6 runs)" in (tmp_path / "paper_setting.md").read_text()
