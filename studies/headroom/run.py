"""Headroom check (issue 17, item 4): is the Oracle significantly above DLA on the study's data?

A study of debiasing means something only where unbiased learning has room to
gain: the Oracle (trained on the true labels) must be significantly above DLA
(p <= 0.01) before MULTR is compared with anything.  This script runs that
check on generated lists::

    python studies/headroom/run.py --out out/headroom [--datasets 1 2 3] [--seeds 0 1]
        [--train-queries 1000] [--valid-queries 100] [--test-queries 1000] [--features 46]
        [--docs-per-query 6 10] [--initial-noise 2.0] [--signal 1.0] [--no-ranker-feature] [--steps 500]
        [--click-model settings/click_models/cascade_eps0.1_ymax4.json] [--multr] [--workers 2] [--threads N]
        [--dry-run]

``studies/headroom/reproduce.sh`` runs it and copies the tables to
``studies/headroom/results/``.

1. Per ``--datasets`` value k, a generated ULTRA data directory
   ``<out>/data/Fold<k>`` (the recipe of ``studies/mq2008/generated_small.py``:
   graded labels 0-4) with ``--train-queries`` training queries, lists of
   at most 10 documents (so training, which sees the top 10, and evaluation
   see the same lists), a weak initial ranker (``--initial-noise``: the std
   of the noise added to the labels to order each list), a weaker label
   signal than the default (``--signal``) and, unless
   ``--no-ranker-feature``, the initial ranker's noise as a feature: a
   feature without relevance that position-biased clicks make look
   relevant, which is what debiasing has to undo.  Without it the features
   are independent of the position given the label, position bias changes
   nothing a ranker can learn, and Oracle, DLA and Naive come out level
   (``studies/headroom/results/exploration.md``).
2. The MQ2008 study's runner config (:mod:`ultra_multr.experiments.fold_study`) on those
   directories: cascade clicks (strong position bias: a user stops at the
   first click), fresh clicks every step, Naive, DLA, the Oracle (true
   labels) and the Oracle on unbiased clicks (Naive on clicks of the same
   click probabilities with every position examined: the same noise, no
   position bias).  Both Oracles are registered as tested rows (role
   ``multr``), so the runner's table marks them and gives their p-value
   against the best baseline; with
   ``--multr``, MULTR's rows of issue 17's grid join the same runs: the
   randomized form (``rerank_weight=randomized``, the default while the
   committed grid ran), with ``--sweeps`` its variants: paper-exact
   (``rerank_weight=paper,dr_weight_guard=none``), a = 0, the simulator
   controls (the true click model, shuffled positions), and opt-in the
   paper's mixture with the rebalance guard (today's default) and paper-exact
   with the true click model; DLA, PAL and Naive under the fair protocol's
   equal tuning (``*_tuned``: a 3-candidate learning-rate pilot on the
   validation split, docs/fair_protocol.md).
3. The runner (resumable): its table ``<out>/results/generated.md``; the
   paired table of every pair of methods ``<out>/results/pairwise.md``
   (two-sided Fisher randomisation test over the test queries pooled over
   datasets, each query averaged over seeds); the sessions each phase drew
   and the pilots' choices per run (``sessions.md``, :mod:`ultra_multr.experiments.budget`)
   and the learned propensities and simulator fit (``diagnostics.md``); with
   ``--multr`` also ``grid.md`` and ``grid_vs_dla.md``: each row over
   ``--datasets`` x ``--seeds`` against tuned DLA and against DLA, with the
   share of the Oracle gap closed.  ``--tables-only`` writes the tables of
   the finished runs without training.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys

import numpy as np

from ultra_multr.files import atomic_write_text
from ultra_multr.experiments import budget, compare, diagnostics
from ultra_multr.experiments.fold_study import study_config
from ultra_multr.experiments.runner import cli as runner
from ultra_multr.experiments.aggregate import METRICS, as_host_counts, collect_runs, marked_label
from ultra_multr.experiments.significance import randomization_test
from ultra_multr.generate.ultra_dataset import write_recipe_dataset

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASCADE_4 = os.path.join(REPO, "settings", "click_models", "cascade_eps0.1_ymax4.json")

#: The Oracle as a tested row: the runner's table then gives its p against the best baseline.
HEADROOM_ORACLE = {
    "oracle_tested": {
        "label": "Oracle", "role": "multr", "learning_algorithm": "ultra_multr.Naive",
        "train_input_hparams": {"oracle_mode": True},
    }
}
#: Naive on clicks from the click model's click probabilities with every position examined: the same
#: click noise without position bias, so its gap to DLA is what debiasing can recover.
UNBIASED_4 = os.path.join(REPO, "settings", "click_models", "pbm_eta0_eps0.1_ymax4.json")
HEADROOM_ORACLE["oracle_clicks"] = {
    "label": "Oracle (unbiased clicks)", "role": "multr", "learning_algorithm": "ultra_multr.Naive",
}
#: MULTR with the controls of its simulator (ultra_multr.simulator.controls): the click model that made the
#: clicks as its simulator (an upper bound), and a simulator trained on sessions in random order (cannot debias).
SIMULATOR_CONTROLS = {"name": "simulator_control", "methods": ["multr"], "section": "learning_algorithm_hparams",
                      "parameter": "simulator_control", "values": ["true_click_model", "shuffled_positions"]}
#: MULTR exactly as the paper writes it (Eq. dr_loss, no guard).
PAPER_EXACT = {"name": "rerank_weight", "methods": ["multr"], "section": "learning_algorithm_hparams",
               "parameter": "rerank_weight", "values": ["paper"],
               "overrides": {"learning_algorithm_hparams": {"dr_weight_guard": "none"}}}


#: The paper's mixture (a = S / (S + 1)) with the rebalance guard instead of none: the expectation of Eq. dr_loss's
#: weight kept exactly, the loss bounded below (opt-in: --sweeps paper_rebalance).
PAPER_REBALANCE = {"name": "paper_rebalance", "methods": ["multr"], "section": "learning_algorithm_hparams",
                   "parameter": "dr_weight_guard", "values": ["rebalance"],
                   "overrides": {"learning_algorithm_hparams": {"rerank_weight": "paper"}}}


#: The paper's exact form with the click model that made the clicks as its simulator (opt-in: --sweeps
#: paper_true_model): what an exact simulator does for the mixture, beside the randomized form's control.
PAPER_TRUE_MODEL = {"name": "paper_true_model", "methods": ["multr"], "section": "learning_algorithm_hparams",
                    "parameter": "dr_weight_guard", "values": ["none"],
                    "overrides": {"learning_algorithm_hparams": {"rerank_weight": "paper",
                                                                 "simulator_control": "true_click_model"}}}


#: MULTR's doubly-robust correction on the observed list only (a = 0: W = c^o + (c - c^o) w, DLA's w), default guard.
OBSERVED_ONLY = {"name": "observed_only", "methods": ["multr"], "section": "learning_algorithm_hparams",
                 "parameter": "rerank_weight", "values": ["0"]}


def finished_runs(runs_dir: str, method: str, variant, seeds) -> list:
    """The finished runs of (method, variant) with these seeds (all: None); [] where none has run (yet)."""
    try:
        return compare.method_runs(runs_dir, method, variant, seeds)
    except ValueError:
        return []


def pairwise_table(runs_dir: str, groups, n_permutations: int = 10000, pairs=None, seeds=None) -> str:
    """Markdown: per pair of (label, method, variant) groups with finished runs, per metric the paired differences
    over runs (same set and seed: mean, 95 % interval, sign-flip p) and the pooled query-level p beside them.

    ``pairs``: (label, label) pairs to test (default: every pair); ``seeds``: only the runs of these seeds
    (default: all), so that both sides of a pair have the same seeds."""
    # a group not run (yet) is left out of the table, and said so
    found = [(label, finished_runs(runs_dir, method, variant, seeds) or None) for label, method, variant in groups]
    lines = ["| pair (runs) | " + " | ".join(METRICS) + " |", "|---" * (len(METRICS) + 1) + "|"]
    for (label_a, a), (label_b, b) in itertools.combinations(found, 2):
        if a is None or b is None or (pairs is not None and (label_a, label_b) not in pairs):
            continue
        for what, cells in (("over runs", compare.over_runs_row(a, b, n_permutations)),
                            ("p over queries", compare.significance_row(a, b, n_permutations))):
            lines.append("| %s vs %s: %s | %s |" % (
                compare.group_label(label_a, a), compare.group_label(label_b, b), what,
                " | ".join(cells[m] for m in METRICS)))
    missing = [label for label, records in found if records is None]
    note = "\nNot run: %s.\n" % ", ".join(missing) if missing else ""
    return "\n".join(lines) + "\n" + note


def grid_table(runs_dir: str, groups, folds, seeds, reference: str = "DLA (tuned)", oracle: str = "Oracle",
               n_permutations: int = 10000) -> str:
    """Markdown: per group, over the runs of ``folds`` x ``seeds``, nDCG@10 and ERR@10 (mean ± sd over runs), the
    difference to ``reference`` over runs (same set and seed: mean [95 % interval] (sign-flip p)) and over the
    queries with its paired p (queries both have, pooled over sets, each averaged over seeds), and the share of the
    ``oracle`` - ``reference`` gap closed (nDCG@10).  A group whose runs trained as their host is marked."""
    wanted = {"Fold%d" % k for k in folds}
    found = {label: [r for r in finished_runs(runs_dir, method, variant, seeds) if r.info["fold"] in wanted]
             for label, method, variant in groups}
    base, top = found.get(reference), found.get(oracle)
    metrics = ("ndcg_10", "err_10")
    mean = {label: {m: np.mean([r.mean(m) for r in runs]) for m in metrics} for label, runs in found.items() if runs}
    lines = ["Sets %s, seeds %s.  Δ and p against %s (two-sided Fisher randomisation test, %d permutations); gap "
             "closed: (method - %s) / (%s - %s) in nDCG@10." % (", ".join(map(str, folds)), ", ".join(map(str, seeds)),
                                                               reference, n_permutations, reference, oracle, reference),
             "", "| method | runs | nDCG@10 | ERR@10 | Δ nDCG@10 over runs [95 % interval] (p) | Δ nDCG@10 (p) | "
                 "Δ ERR@10 (p) | gap closed |", "|---" * 8 + "|"]
    for label, runs in found.items():
        if not runs:
            lines.append("| %s | 0 | not run | | | | | |" % label)
            continue
        cells = ["%.3f ± %.3f" % (mean[label][m], np.std([r.mean(m) for r in runs], ddof=1) if len(runs) > 1 else 0.0)
                 for m in metrics]
        if base and label != reference:
            cells.append(compare.over_runs_row(runs, base, n_permutations)["ndcg_10"])
            for m in metrics:
                x, y = compare.paired(runs, base, m)
                cells.append("%+.3f (%.3g)" % (np.mean(x - y), randomization_test(x, y, n_permutations)))
            gap = mean[oracle]["ndcg_10"] - mean[reference]["ndcg_10"] if top else float("nan")
            cells.append("%.0f %%" % (100 * (mean[label]["ndcg_10"] - mean[reference]["ndcg_10"]) / gap)
                         if top and label != oracle and gap > 0 else "")
        else:
            cells += ["", "", "", ""]
        lines.append("| %s | %d | %s |" % (marked_label(label, as_host_counts(runs), len(runs)), len(runs),
                                           " | ".join(cells)))
    return "\n".join(lines) + "\n"


def cells_table(runs_dir: str, groups, folds, seeds) -> str:
    """Markdown: every (method, set) cell of the grid, with the seeds that finished ("not run" where none did)."""
    done = {(r.info["method"], r.info.get("variant") if r.info.get("sweep") else None, r.info["fold"], r.info["seed"])
            for r in collect_runs(runs_dir)}
    lines = ["| method | " + " | ".join("Fold%d" % k for k in folds) + " |", "|---" * (len(folds) + 1) + "|"]
    for label, method, variant in groups:
        cells = []
        for k in folds:
            finished = [seed for seed in seeds if (method, variant, "Fold%d" % k, seed) in done]
            cells.append("run (seeds %s)" % ", ".join(map(str, finished)) if finished else "not run")
        lines.append("| %s | %s |" % (label, " | ".join(cells)))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--datasets", type=int, nargs="+", default=[1, 2, 3], help="seeds of the generated datasets")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--train-queries", type=int, default=1000)
    parser.add_argument("--valid-queries", type=int, default=100)
    parser.add_argument("--test-queries", type=int, default=1000)
    parser.add_argument("--features", type=int, default=46)
    parser.add_argument("--initial-noise", type=float, default=2.0)
    parser.add_argument(
        "--docs-per-query", type=int, nargs=2, default=[6, 10],
        help="list lengths (at most 10 keeps whole lists in training, as in evaluation)",
    )
    parser.add_argument("--signal", type=float, default=1.0, help="label signal in the features (smaller: harder)")
    parser.add_argument(
        "--ranker-feature", action=argparse.BooleanOptionalAction, default=True,
        help="the initial ranker's noise is a feature (a non-relevant feature that clicks make look relevant)",
    )
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--click-model", default=CASCADE_4)
    parser.add_argument(
        "--multr", action="store_true", help="also MULTR (randomized form) with its variants and simulator controls, DLA, PAL and Naive tuned equally"
    )
    parser.add_argument(
        "--methods", nargs="+", default=None,
        help="run only these methods of the pass (default: all; the sweeps follow 'multr')",
    )
    parser.add_argument(
        "--sweeps", nargs="+", default=None, choices=["rerank_weight", "observed_only", "simulator_control", "paper_rebalance", "paper_true_model"],
        help="MULTR's variants of the --multr pass (default: paper-exact, a = 0 and the two simulator controls; "
             "paper_rebalance and paper_true_model only when named)",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="threads per run (the runner's --threads)")
    parser.add_argument("--dry-run", action="store_true", help="generate nothing, train nothing: list the runs")
    parser.add_argument(
        "--tables-only", action="store_true",
        help="train nothing: write the tables of the finished runs under --out (grid.md over --datasets x --seeds)",
    )
    args = parser.parse_args(argv)
    if min(args.train_queries, args.valid_queries, args.test_queries, args.features) < 2:
        parser.error("--train-queries, --valid-queries, --test-queries and --features must be >= 2")
    out = os.path.abspath(args.out)
    data_root = os.path.join(out, "data")
    methods = ["oracle_tested", "oracle_clicks", "naive", "dla"] + (
        ["multr", "dla_tuned", "pal_tuned", "naive_tuned"] if args.multr else []
    )
    if args.methods:
        unknown = sorted(set(args.methods) - set(methods))
        if unknown:
            parser.error("--methods %s: not in this pass's methods %s" % (" ".join(unknown), " ".join(methods)))
        methods = [m for m in methods if m in args.methods]
    config_args = argparse.Namespace(
        out=out, folds=args.datasets, seeds=args.seeds, steps=args.steps, click_model=args.click_model,
        methods=methods, budgets=[], no_fresh=False, rerank_weights=[], sweep=[],
        # the grid's base MULTR row and its simulator controls are the randomized form (MULTR's default while the
        # committed grid ran; the default is now the paper's mixture, the row "paper + rebalance")
        multr_hparams={"rerank_weight": "randomized"},
    )
    config = study_config(config_args, data_root)
    config["datasets"] = {"generated": config["datasets"]["mq2008"]}
    config["extra_methods"] = HEADROOM_ORACLE
    # the unbiased-click Oracle's click model must win over the shared settings' one
    config["method_overrides"]["oracle_clicks"] = {"train_input_hparams": {"click_model_json": UNBIASED_4}}
    sweeps = [PAPER_EXACT, OBSERVED_ONLY, SIMULATOR_CONTROLS, PAPER_REBALANCE, PAPER_TRUE_MODEL]
    sweeps = sweeps if args.multr and "multr" in methods else []
    chosen = args.sweeps or [PAPER_EXACT["name"], OBSERVED_ONLY["name"], SIMULATOR_CONTROLS["name"]]
    config["sweeps"] = [sweep for sweep in sweeps if sweep["name"] in chosen]
    if not (args.dry_run or args.tables_only):
        for k in args.datasets:
            recipe = {
                "seed": k, "train_queries": args.train_queries, "features": args.features,
                "valid_queries": args.valid_queries, "test_queries": args.test_queries,
                "initial_noise": args.initial_noise, "signal": args.signal,
                "ranker_feature": args.ranker_feature, "docs_per_query": list(args.docs_per_query),
            }
            write_recipe_dataset(os.path.join(data_root, "Fold%d" % k), recipe)
    config_path = os.path.join(out, "study.json")
    atomic_write_text(config_path, json.dumps(config, indent=2) + "\n")
    runner_argv = [config_path, "--workers", str(args.workers)] + (["--threads", str(args.threads)] if args.threads else [])
    if args.tables_only:
        code = runner.main(["--aggregate", os.path.join(out, "runs"), "--out", os.path.join(out, "results")])
    else:
        code = runner.main(runner_argv + (["--dry-run"] if args.dry_run else []))
    if args.dry_run:
        return code
    groups = [("Oracle", "oracle_tested", None), ("Oracle (unbiased clicks)", "oracle_clicks", None),
              ("DLA", "dla", None), ("Naive", "naive", None)]
    if args.multr:
        groups += [("MULTR randomized", "multr", None), ("MULTR paper-exact", "multr", "rerank_weight=paper"),
                   ("MULTR a = 0", "multr", "rerank_weight=0"),
                   ("MULTR true click model", "multr", "simulator_control=true_click_model"),
                   ("MULTR shuffled positions", "multr", "simulator_control=shuffled_positions"),
                   ("MULTR paper + rebalance (default)", "multr", "dr_weight_guard=rebalance"),
                   ("MULTR paper-exact, true click model", "multr", "dr_weight_guard=none"),
                   ("DLA (tuned)", "dla_tuned", None), ("PAL (tuned)", "pal_tuned", None),
                   ("Naive (tuned)", "naive_tuned", None)]
    runs_dir = os.path.join(out, "runs")
    pairs = None
    if args.multr:  # the headroom pairs are in the first pass's table: here MULTR's and the tuned baselines'
        labels = [label for label, _, _ in groups]
        pairs = [(a, b) for a, b in itertools.combinations(labels, 2) if "MULTR" in a + b]
        pairs += [("DLA", "DLA (tuned)"), ("Naive", "Naive (tuned)")]
    table = pairwise_table(runs_dir, groups, pairs=pairs, seeds=args.seeds if args.multr else None)
    atomic_write_text(os.path.join(out, "results", "pairwise.md"), table)
    # the evidence beside the tables: sessions per phase and pilot choices, learned propensities, simulator fit
    atomic_write_text(os.path.join(out, "results", "sessions.md"), budget.format_markdown(runs_dir))
    atomic_write_text(
        os.path.join(out, "results", "diagnostics.md"), diagnostics.format_markdown(diagnostics.collect(runs_dir))
    )
    atomic_write_text(
        os.path.join(out, "results", "cells.md"), cells_table(runs_dir, groups, args.datasets, args.seeds)
    )
    if args.multr:  # against the best equally tuned baseline, and against DLA at MULTR's own learning rate
        for name, reference in (("grid.md", "DLA (tuned)"), ("grid_vs_dla.md", "DLA")):
            atomic_write_text(os.path.join(out, "results", name),
                              grid_table(runs_dir, groups, args.datasets, args.seeds, reference=reference))
    print(table)
    return code


if __name__ == "__main__":
    sys.exit(main())
