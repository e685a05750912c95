"""Screening for data in ULTRA's recipe with headroom: is the Oracle significantly above DLA?

A study of debiasing means something only where the Oracle (trained on the
true labels) is significantly above DLA.  This screens at most eight recipes
of generated data in ULTRA's recipe (:mod:`ultra_multr.generate.ultra_recipe`:
the logging ranker is a Rank SVM fitted on 1 % of the labelled training
queries, on the features the learner sees), one seed each::

    python studies/paper_setting/screen.py --out out/screen [--recipes linear nonlinear ...] [--steps 2000]
        [--seed 0] [--workers 2] [--threads 1] [--results studies/paper_setting/results] [--tables-only]

Per recipe: the data directory ``<out>/data/<recipe>``; the Oracle and DLA
through ULTRA's main.py (the runner), cascade clicks (epsilon 0.1) drawn on the
fly on the top 10, the same ``--steps`` ranker updates, each method's learning
rate from the same validation pilot ({0.01, 0.05}, 200 updates each); the
goal is Oracle - DLA >= 0.010 nDCG@10 at p <= 0.01 (paired two-sided Fisher
randomisation test over the test queries).  ``screening.csv`` and
``screening.md`` go to ``--results``, with the logging ranker's nDCG@10 on
the training queries it was not fitted on (from ``prepare_report.json``).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from dataclasses import asdict, replace
from typing import Dict, List, Sequence

import numpy as np

from ultra_multr.files import atomic_write_text
from ultra_multr.generate.ultra_dataset import write_stress_set
from ultra_multr.generate.ultra_recipe import SCREENED_RECIPES as RECIPES
from ultra_multr.generate.ultra_recipe import write_recipe_dataset
from ultra_multr.experiments import budget, compare
from ultra_multr.experiments.aggregate import as_host_counts, collect_runs, marked_label, runs_over_runs
from ultra_multr.experiments.runner import cli as runner
from ultra_multr.experiments.significance import randomization_test

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASCADE = os.path.join(REPO, "settings", "click_models", "cascade_eps0.1_ymax4.json")
RESULTS = os.path.join(REPO, "studies", "paper_setting", "results")
#: Every method's learning rate from the same validation pilot.
PILOT = {"tune": "learning_rate", "tune_grid": [0.01, 0.05], "tune_pilot_steps": 200}
METHODS = {
    "oracle_pilot": {"label": "Oracle", "role": "multr", "learning_algorithm": "ultra_multr.Naive",
                     "learning_algorithm_hparams": PILOT, "train_input_hparams": {"oracle_mode": True}},
    "dla_pilot": {"label": "DLA", "role": "baseline", "learning_algorithm": "ultra_multr.DLA",
                  "learning_algorithm_hparams": PILOT},
    "naive_pilot": {"label": "Naive", "role": "baseline", "learning_algorithm": "ultra_multr.Naive",
                    "learning_algorithm_hparams": PILOT},
    # the simulator stops on its held-out curve (patience 5 x 250 steps), the cap of 10,000 is the paper's.
    # MULTR's rows without the label-free logger guard name logger_guard=none (the default was none when their runs
    # finished: named, the runner's fingerprint keeps them, ultra_multr.experiments.runner.runs._NAMED_OLD_DEFAULTS)
    "multr_pilot": {"label": "MULTR", "role": "multr", "learning_algorithm": "ultra_multr.MULTR",
                    "learning_algorithm_hparams": dict(PILOT, simulator_steps=10000, logger_guard="none")},
    "rand_multr_pilot": {"label": "Rand-MULTR", "role": "multr", "learning_algorithm": "ultra_multr.MULTR",
                         "learning_algorithm_hparams": dict(PILOT, simulator_steps=0, logger_guard="none")},
    # MULTR with the label-free logger guard (MULTR's default): DLA's losses where the features miss the logged order
    "multr_guarded_pilot": {"label": "MULTR guarded", "role": "multr", "learning_algorithm": "ultra_multr.MULTR",
                            "learning_algorithm_hparams": dict(PILOT, simulator_steps=10000, logger_guard="order_fit")},
    # the stress log with 10 % of its sessions shown with one adjacent pair swapped (the feed's intervention_share)
    "multr_swap10_pilot": {"label": "MULTR, 10 % swap sessions", "role": "multr",
                           "learning_algorithm": "ultra_multr.MULTR",
                           "learning_algorithm_hparams": dict(PILOT, simulator_steps=10000, logger_guard="none"),
                           "train_input_hparams": {"intervention_share": 0.1}},
    "dla_swap10_pilot": {"label": "DLA, 10 % swap sessions", "role": "baseline", "learning_algorithm": "ultra_multr.DLA",
                         "learning_algorithm_hparams": PILOT, "train_input_hparams": {"intervention_share": 0.1}},
    # the sparse regime's MULTR with 15 % of the log held out for its simulator: the default 10 % of one session per
    # query on 3,000 queries leaves fewer held-out sessions than simulator_min_heldout_sessions (300)
    "multr_heldout15_pilot": {"label": "MULTR, 15 % held out", "role": "multr", "learning_algorithm": "ultra_multr.MULTR",
                              "learning_algorithm_hparams": dict(PILOT, simulator_steps=10000, logger_guard="none",
                                                                 simulator_heldout_fraction=0.15)},
    # the same with the held-out sessions raised to simulator_min_heldout_sessions where that is at most a quarter of
    # the log (simulator_heldout_max_share; 300 of the sparse log's 2,980 sessions)
    "multr_minheldout_pilot": {"label": "MULTR, held-out max share 0.25", "role": "multr",
                               "learning_algorithm": "ultra_multr.MULTR",
                               "learning_algorithm_hparams": dict(PILOT, simulator_steps=10000, logger_guard="none",
                                                                  simulator_heldout_max_share=0.25)},
    # IPS with the true propensities: the feed's position-based click model's (position-based clicks only)
    "ips_true_pilot": {"label": "IPS (true propensities)", "role": "baseline", "learning_algorithm": "ultra_multr.IPW",
                       "learning_algorithm_hparams": PILOT},
}
#: The methods of --grid unless --methods names others: IPS needs position-based clicks.
GRID_METHODS = ("oracle_pilot", "dla_pilot", "naive_pilot", "multr_pilot", "rand_multr_pilot")
#: The runner's dataset of each group, and the group's name in the grid's table.
GROUPS = {"recipe": "ultra_recipe", "stress": "stress"}
#: The screening's two methods; the grid's (--grid) add Naive, MULTR and Rand-MULTR.
SCREEN_METHODS = ("oracle_pilot", "dla_pilot")
#: Beside the pooled query-level test (p_vs_dla, p_holm): the paired differences over runs (same set, same seed)
#: against DLA, their 95 % t-interval (ci_low, ci_high) and sign-flip p (p_runs, from 6 pairs).
GRID_COLUMNS = ("data", "regime", "method", "runs", "ndcg10", "delta_vs_dla", "ci_low", "ci_high", "p_runs",
                "p_vs_dla", "p_holm")
SET_COLUMNS = ("data", "set", "regime", "method", "runs", "ndcg10", "delta_vs_dla", "ci_low", "ci_high", "p_runs",
               "p_vs_dla")
SEED_COLUMNS = ("data", "set", "seed", "regime", "method", "ndcg10", "delta_vs_dla", "p_vs_dla")
GOAL_GAP, GOAL_P = 0.010, 0.01
COLUMNS = ("recipe", "nonlinear", "label_noise", "features", "train_queries", "logger_ndcg10", "oracle_ndcg10",
           "dla_ndcg10", "gap", "p", "goal_met")


def study_config(out: str, data_dirs: Dict[str, str], seeds: Sequence[int], steps: int,
                 methods: Sequence[str] = SCREEN_METHODS, click_model: str = CASCADE,
                 stress_dirs: Dict[str, str] = None, sessions_per_query: int = 0,
                 definitions: Dict[str, dict] = None) -> dict:
    """The runner's config: each recipe set a fold of the dataset "recipe", each stress set one of "stress".

    ``sessions_per_query`` K > 0: every method trains on one fixed log of K sessions per training query
    (``ClickLogFeed``; the same log for every method of a seed), its simulator and pilot included; 0: fresh clicks.
    ``definitions``: the methods' definitions (the runner's ``extra_methods``; default: :data:`METHODS`).
    """
    definitions = METHODS if definitions is None else definitions
    feed = {"train_input_feed": "ultra_multr.feeds.ClickLogFeed"} if sessions_per_query else {}
    log = {"sessions_per_query": sessions_per_query} if sessions_per_query else {}
    return {
        "output_dir": out,
        "datasets": {name: dict(dirs) for name, dirs in (("recipe", data_dirs), ("stress", stress_dirs or {})) if dirs},
        "methods": list(methods),
        "extra_methods": {name: definitions[name] for name in methods},
        "seeds": list(seeds),
        "settings": {
            **feed,
            "train_input_hparams": dict({"click_model_json": click_model}, **log),
            "ranking_model_hparams": {"hidden_layer_sizes": [512, 256, 128]},
            "learning_algorithm_hparams": {"learning_rate": 0.05, "log_every": 500},
        },
        "main_args": {"batch_size": 256, "max_train_iteration": steps, "steps_per_checkpoint": 200,
                      "selection_bias_cutoff": 10},
    }


def logger_quality(data_dir: str) -> float:
    """The Rank SVM's nDCG@10 on the training queries it was not fitted on (prepare_report.json)."""
    with open(os.path.join(data_dir, "prepare_report.json")) as handle:
        return float(json.load(handle)["rank_svm"]["heldout_training_queries"]["ndcg_10"])


def screening_rows(runs_dir: str, data_dirs: Dict[str, str], n_permutations: int = 10000) -> List[dict]:
    """One row per recipe whose Oracle and DLA have finished."""
    rows = []
    for name, data_dir in data_dirs.items():
        try:
            oracle, dla = (
                [r for r in compare.method_runs(runs_dir, method) if r.info["fold"] == name]
                for method in ("oracle_pilot", "dla_pilot")
            )
        except ValueError:  # a method of the screening has not finished a run yet
            continue
        if not oracle or not dla:
            continue
        a, b = compare.paired(oracle, dla, "ndcg_10")
        p = randomization_test(a, b, n_permutations)
        recipe = RECIPES[name]
        gap = float(np.mean(a - b))
        rows.append({
            "recipe": name, "nonlinear": recipe.nonlinear, "label_noise": recipe.label_noise,
            "features": recipe.features, "train_queries": recipe.train_queries,
            "logger_ndcg10": "%.4f" % logger_quality(data_dir), "oracle_ndcg10": "%.4f" % float(np.mean(a)),
            "dla_ndcg10": "%.4f" % float(np.mean(b)), "gap": "%+.4f" % gap, "p": "%.4g" % p,
            "goal_met": "yes" if gap >= GOAL_GAP and p <= GOAL_P else "no",
        })
    return rows


def _finished(runs_dir: str, methods: Sequence[str]) -> Dict[str, list]:
    """method -> its finished runs without a sweep (methods without one left out), from one pass over ``runs_dir``."""
    runs: Dict[str, list] = {}
    for record in collect_runs(runs_dir):
        if record.info["method"] in methods and not record.info.get("sweep"):
            runs.setdefault(record.info["method"], []).append(record)
    return {method: runs[method] for method in methods if method in runs}


def over_runs_cells(mine: list, theirs: list, n_permutations: int) -> dict:
    """ci_low, ci_high and p_runs of ``mine``'s runs against ``theirs``' paired by set and seed (empty where
    there are too few pairs)."""
    result = runs_over_runs(mine, theirs, "ndcg_10", n_permutations)
    if result is None:
        return {"ci_low": "", "ci_high": "", "p_runs": ""}
    bound = lambda value: "" if np.isnan(value) else "%+.4f" % value  # noqa: E731
    return {"ci_low": bound(result.ci_low), "ci_high": bound(result.ci_high),
            "p_runs": "" if result.p is None else "%.4g" % result.p}


def _against_dla(mine: list, dla: list, method: str, n_permutations: int) -> dict:
    """runs, ndcg10, delta_vs_dla (pooled queries), ci_low, ci_high and p_runs (over runs), p_vs_dla and p_holm
    (= p: one test) of ``mine`` against ``dla``; the method's label marks runs that trained as their host."""
    a, b = compare.paired(mine, dla, "ndcg_10")
    same = method == "dla_pilot"
    p = 1.0 if same else randomization_test(a, b, n_permutations)
    runs = {"ci_low": "", "ci_high": "", "p_runs": ""} if same else over_runs_cells(mine, dla, n_permutations)
    return dict(runs, method=marked_label(METHODS[method]["label"], as_host_counts(mine), len(mine)), runs=len(mine),
                ndcg10="%.4f" % float(np.mean(a)), delta_vs_dla="" if same else "%+.4f" % float(np.mean(a - b)),
                p_vs_dla="" if same else "%.4g" % p, p_holm="" if same else "%.4g" % p)


def grid_rows(runs_dir: str, methods: Sequence[str], regime: str = "cascade", n_permutations: int = 10000
              ) -> List[dict]:
    """The issue's table, one click regime: per group (the runner's dataset), each method against DLA over the test
    queries of every set and seed that both finished (each query averaged over seeds); Holm over this one cell is p
    itself (``--combine`` adjusts over the cells)."""
    runs = _finished(runs_dir, methods)
    rows = []
    for dataset, group in GROUPS.items():
        dla = [r for r in runs.get("dla_pilot", []) if r.info["dataset"] == dataset]
        for method, records in runs.items():
            mine = [r for r in records if r.info["dataset"] == dataset]
            if mine and dla:
                rows.append(dict({"data": group, "regime": regime}, **_against_dla(mine, dla, method, n_permutations)))
    return rows


def set_rows(runs_dir: str, methods: Sequence[str], regime: str = "cascade", n_permutations: int = 10000,
             by_seed: bool = False) -> List[dict]:
    """The spread behind :func:`grid_rows`: the same comparison on each set alone (columns :data:`SET_COLUMNS`), or
    with ``by_seed`` on each set and seed alone (:data:`SEED_COLUMNS`: a seed's clicks, log and initialisation are
    the same for every method, so the runs of one seed are paired)."""
    runs = _finished(runs_dir, methods)

    def cell(record) -> tuple:
        return (record.info["dataset"], record.info["fold"]) + ((record.info["seed"],) if by_seed else ())

    columns = SEED_COLUMNS if by_seed else SET_COLUMNS
    rows = []
    for key in sorted({cell(r) for records in runs.values() for r in records}):
        dla = [r for r in runs.get("dla_pilot", []) if cell(r) == key]
        for method, records in runs.items():
            mine = [r for r in records if cell(r) == key]
            if mine and dla:
                row = dict(_against_dla(mine, dla, method, n_permutations), data=GROUPS[key[0]], set=key[1],
                           regime=regime, seed=key[2] if by_seed else "")
                rows.append({c: row[c] for c in columns})
    return rows


#: Comparisons besides "against DLA": MULTR against Rand-MULTR (goal A2: the gain comes from the simulator) and, on
#: the log with 10 % swap sessions, MULTR against DLA on that log and against MULTR on the plain log.
PAIRS = (("multr_pilot", "rand_multr_pilot"), ("multr_swap10_pilot", "dla_swap10_pilot"),
         ("multr_swap10_pilot", "multr_pilot"))
PAIR_COLUMNS = ("data", "regime", "method", "against", "runs", "delta", "ci_low", "ci_high", "p_runs", "p")


def pair_rows(runs_dir: str, regime: str = "cascade", n_permutations: int = 10000) -> List[dict]:
    """:data:`PAIRS` per group where both finished: the paired difference in nDCG@10 over the pooled test queries
    (each averaged over seeds) and its two-sided Fisher randomisation p."""
    runs = _finished(runs_dir, sorted({m for pair in PAIRS for m in pair}))
    rows = []
    for dataset, group in GROUPS.items():
        for method, against in PAIRS:
            mine, theirs = ([r for r in runs.get(m, []) if r.info["dataset"] == dataset] for m in (method, against))
            if mine and theirs:
                a, b = compare.paired(mine, theirs, "ndcg_10")
                rows.append(dict(over_runs_cells(mine, theirs, n_permutations), data=group, regime=regime,
                                 method=marked_label(METHODS[method]["label"], as_host_counts(mine), len(mine)),
                                 against=marked_label(METHODS[against]["label"], as_host_counts(theirs), len(theirs)),
                                 runs="%d vs %d" % (len(mine), len(theirs)), delta="%+.4f" % float(np.mean(a - b)),
                                 p="%.4g" % randomization_test(a, b, n_permutations)))
    return rows


def write_rows(rows: Sequence[dict], columns: Sequence[str], results_dir: str, name: str, caption: str) -> None:
    """``<name>.csv`` and ``<name>.md`` (the caption, then the rows as a table), atomically; a column a row lacks
    (a table written before the column existed, combined with newer ones) is empty."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")  # quotes a label with a comma
    writer.writerow(columns)
    writer.writerows([row.get(c, "") for c in columns] for row in rows)
    atomic_write_text(os.path.join(results_dir, name + ".csv"), buffer.getvalue())
    lines = [caption, "", "| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    lines += ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows]
    atomic_write_text(os.path.join(results_dir, name + ".md"), "\n".join(lines) + "\n")


def holm(p_values: Sequence[float]) -> List[float]:
    """Holm's step-down adjustment of ``p_values`` (one family), in their order."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def combine_grids(csv_paths: Sequence[str]) -> List[dict]:
    """The rows of several grid tables (one per group x regime), ``p_holm`` adjusted over each method's tests."""
    rows: List[dict] = []
    for path in csv_paths:
        with open(path, newline="") as handle:
            rows.extend(csv.DictReader(handle))
    for method in {row["method"] for row in rows}:
        tested = [row for row in rows if row["method"] == method and row["p_vs_dla"]]
        for row, adjusted in zip(tested, holm([float(row["p_vs_dla"]) for row in tested])):
            row["p_holm"] = "%.4g" % adjusted
    return rows


def write_grid(rows: Sequence[dict], results_dir: str, steps: int, seeds: Sequence[int], sets: Sequence[str],
               regime: str = "cascade") -> None:
    """``paper_setting.csv`` and ``paper_setting.md`` (``paper_setting_<regime>`` for a regime other than cascade)."""
    name = "paper_setting" if regime == "cascade" else "paper_setting_" + regime
    write_rows(rows, GRID_COLUMNS, results_dir, name, (
        "Sets %s, %s clicks, seeds %s, %d ranker updates for every method, every learning rate from "
        "the same pilot {0.01, 0.05}; MULTR's simulator stopped by its held-out curve (cap 10,000). runs: the "
        "finished runs behind a row (sets x seeds). delta_vs_dla: against DLA on the same group, over the pooled "
        "test queries (each averaged over seeds); ci_low, ci_high: the 95 %% t-interval of the mean paired "
        "difference over runs (same set and seed), p_runs its sign-flip p (from 6 pairs): the claim rests on "
        "these; p_vs_dla: the paired two-sided Fisher randomisation test over the pooled queries, beside it. "
        "A method marked → DLA (...) trained as DLA in that many runs (a guard's fallback)."
        % (", ".join(sets), regime, ", ".join(map(str, seeds)), steps)))


def write_tables(rows: Sequence[dict], results_dir: str, steps: int, seed: int) -> None:
    """``screening.csv`` and ``screening.md``."""
    write_rows(rows, COLUMNS, results_dir, "screening", (
        "Screening of recipes in ULTRA's recipe (logger: Rank SVM on 1 %% of labelled training queries, features "
        "only), seed %d, %d ranker updates, cascade clicks, learning rates from the pilot {0.01, 0.05}; gap = Oracle - "
        "DLA nDCG@10, p: paired two-sided Fisher randomisation test over the test queries; goal: gap >= %.3f at "
        "p <= %.2f." % (seed, steps, GOAL_GAP, GOAL_P)))


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="the study's folder (data, runs); not needed with --combine")
    parser.add_argument("--recipes", nargs="*", default=list(RECIPES), choices=list(RECIPES),
                        help="the recipe sets (none: with --grid, only the stress sets of --stress-seeds)")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--valid-queries", type=int,
                        help="validation queries of every generated recipe set (default: the recipe's, "
                             "ultra_multr.generate.ultra_recipe.Recipe.valid_queries)")
    parser.add_argument("--seed", type=int, default=0, help="the screening's seed")
    parser.add_argument("--grid", type=int, nargs="+", metavar="SEED",
                        help="the grid instead of the screening: Oracle, Naive, DLA, MULTR, Rand-MULTR with these "
                             "seeds on --recipes (and on the stress sets of --stress-seeds)")
    parser.add_argument("--sets", type=int, default=1,
                        help="with --grid: sets per recipe, drawn with recipe seeds 0..N-1 (seed 0 keeps the "
                             "recipe's name, seed k is <recipe>_set<k>)")
    parser.add_argument("--stress-seeds", type=int, nargs="*", default=[],
                        help="with --grid: the stress group, one set per seed (a logger that orders by the label "
                             "plus noise: STRESS_SET of ultra_multr.generate.ultra_dataset), named stress_<seed>")
    parser.add_argument("--methods", nargs="+", choices=list(METHODS),
                        help="with --grid: run these (default: %s)" % ", ".join(GRID_METHODS))
    parser.add_argument("--click-model", default=CASCADE, help="the click model (default: cascade, epsilon 0.1)")
    parser.add_argument("--regime", default="cascade", help="the click regime's name in the grid's table")
    parser.add_argument("--sessions-per-query", type=int, default=0, metavar="K",
                        help="with --grid: train every method on one fixed log of K sessions per training query "
                             "(the sparse regime: K = 1, --regime sparse); default 0, fresh clicks")
    parser.add_argument("--combine", nargs="+", metavar="CSV",
                        help="train nothing: the grid tables given as one, p_holm over each method's tests "
                             "(paper_setting_all.csv / .md in --results)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--results", default=RESULTS)
    parser.add_argument("--tables-only", action="store_true", help="train nothing: the tables of the finished runs")
    args = parser.parse_args(argv)
    if args.combine:
        write_rows(combine_grids(args.combine), GRID_COLUMNS, args.results, "paper_setting_all", (
            "The grid's cells (%s) as one table; p_holm: Holm's adjustment over each method's tests across the cells."
            % ", ".join(os.path.basename(path) for path in args.combine)))
        print(open(os.path.join(args.results, "paper_setting_all.md")).read(), end="")
        return 0
    if not args.out:
        parser.error("--out is needed (but with --combine)")
    if args.sessions_per_query < 0 or (args.sessions_per_query and not args.grid):
        parser.error("--sessions-per-query %d: a count >= 0, with --grid" % args.sessions_per_query)
    out = os.path.abspath(args.out)
    sizes = {"valid_queries": args.valid_queries} if args.valid_queries else {}
    recipes = {("%s_set%d" % (name, k) if k else name): replace(RECIPES[name], seed=k, **sizes)
               for name in args.recipes for k in range(args.sets if args.grid else 1)}
    data_dirs = {name: os.path.join(out, "data", name) for name in recipes}
    stress_dirs = {"stress_%d" % k: os.path.join(out, "data", "stress_%d" % k) for k in args.stress_seeds}
    methods = args.methods or list(GRID_METHODS)
    if not args.tables_only:
        for name, data_dir in data_dirs.items():
            if not os.path.isfile(os.path.join(data_dir, "prepare_report.json")):
                write_recipe_dataset(data_dir, recipes[name])
            atomic_write_text(os.path.join(out, "data", name + ".recipe.json"),
                              json.dumps(asdict(recipes[name]), sort_keys=True) + "\n")
        for k in args.stress_seeds:
            write_stress_set(stress_dirs["stress_%d" % k], k)
        config_path = os.path.join(out, "grid.json" if args.grid else "screen.json")
        click_model = os.path.abspath(args.click_model)
        config = (study_config(out, data_dirs, args.grid, args.steps, methods, click_model, stress_dirs,
                               args.sessions_per_query)
                  if args.grid else study_config(out, data_dirs, [args.seed], args.steps, click_model=click_model))
        atomic_write_text(config_path, json.dumps(config, indent=1) + "\n")
        code = runner.main([config_path, "--workers", str(args.workers)]
                           + (["--threads", str(args.threads)] if args.threads else []))
        if code:
            return code
    if args.grid:
        write_grid(grid_rows(os.path.join(out, "runs"), methods, args.regime), args.results,
                   args.steps, args.grid, list(data_dirs) + list(stress_dirs), args.regime)
        name = "paper_setting" if args.regime == "cascade" else "paper_setting_" + args.regime
        write_rows(set_rows(os.path.join(out, "runs"), methods, args.regime), SET_COLUMNS, args.results,
                   name + "_sets", "Each set alone (the spread behind %s.md): against DLA on the same set, seeds "
                   "pooled." % name)
        write_rows(set_rows(os.path.join(out, "runs"), methods, args.regime, by_seed=True), SEED_COLUMNS,
                   args.results, name + "_seeds", "Each set and seed alone (the spread behind %s.md): against DLA on "
                   "the same set and seed." % name)
        pairs = pair_rows(os.path.join(out, "runs"), args.regime)
        if pairs:
            write_rows(pairs, PAIR_COLUMNS, args.results, name + "_pairs", (
                "Comparisons besides against DLA, per group: paired difference in nDCG@10 over the pooled test "
                "queries (each averaged over seeds), two-sided Fisher randomisation test."))
        atomic_write_text(os.path.join(args.results, name.replace("paper_setting", "grid_sessions") + ".md"),
                          budget.format_markdown(os.path.join(out, "runs")))
        print(open(os.path.join(args.results, name + ".md")).read(), end="")
        return 0
    rows = screening_rows(os.path.join(out, "runs"), data_dirs)
    write_tables(rows, args.results, args.steps, args.seed)
    print(open(os.path.join(args.results, "screening.md")).read(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
