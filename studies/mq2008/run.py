"""The paper's study (Table 2 methods, click-log budgets, Figure 3) on MQ2008.

Usage::

    python example/reproduce_mq2008.py --data ../shared/data/MQ2008 --out out/mq2008
        [--folds 1] [--steps 1000] [--seeds 0] [--workers 2] [--threads N] [--budgets 1 4 16]
        [--methods oracle naive dla multr rand_multr eib_multr] [--sweep 0 2 4 8 16 32]
        [--click-model settings/click_models/cascade_eps0.1_ymax2.json] [--no-fresh] [--dry-run]
        [--train-queries 30] [--rerank-weights paper 0]

The paper's tables, one script each (``DATA_DIR OUT_DIR [flags]``; environment
SEEDS, STEPS, WORKERS, FOLDS): ``example/reproduce_table2.sh`` (fresh cascade
clicks, the nine Table-2 methods, five folds), ``example/reproduce_budgets.sh``
(fixed logs of K = 1, 4, 16 sessions per query) and
``example/reproduce_pbm.sh`` (position-based clicks, eta = 2) and
``example/reproduce_small.sh`` (30 training queries: when the re-ranked term
helps and when it hurts).

1. prepares the LETOR partitions into ULTRA data directories (five-fold
   rotation, Rank SVM on 1% of the training queries, at least 20; skipped
   when present and prepared with the same recipe; ``--train-queries N``
   keeps a seeded sample of N training queries);
2. writes a runner config: cascade clicks with noise 0.1 for MQ2008's labels
   0..2 (or ``--click-model``), batch 256, N = 10, DNN [512, 256, 128], ``--steps`` ranker steps and
   as many simulator steps (the paper trains 10,000 of each); fresh clicks
   every step (the paper's protocol) plus fixed logs of K sessions per query
   (``--budgets``, for every method but Oracle and Rand-MULTR; with
   ``--no-fresh`` only those); a ``sample_num`` sweep for MULTR on the first
   fold; with ``--rerank-weights``, MULTR again at each fixed weight of the
   re-ranked term (``rerank_weight``) on every fold;
3. runs it with ``--workers`` parallel processes (resumable: re-running skips
   finished runs) and aggregates Table-2 style tables, significance markers,
   the DLA-to-Oracle gap closed and the Figure-3 plot into ``<out>/results``,
   with ``diagnostics.md`` beside them (the propensities DLA and MULTR learned
   and the simulator's held-out fit, :mod:`ultra_multr.experiments.diagnostics`),
   and prints ``<out>/results/summary.md``.  ``--dry-run`` prepares nothing
   and trains nothing: it prints the preparation command and the runs.

Defaults (Fold1, one seed, 1000 steps: 24 runs) take about an hour and a
half on 2 CPU cores; add folds and seeds for tighter tests.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys

from ultra_multr.data import prepare
from ultra_multr.files import atomic_write_text
from ultra_multr.experiments import diagnostics
from ultra_multr.experiments.runner import cli as runner
from ultra_multr.files import JsonFileError, read_json

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASCADE = os.path.join(REPO, "settings", "click_models", "cascade_eps0.1_ymax2.json")


def study_config(args, data_root: str) -> dict:
    folds = {"Fold%d" % k: os.path.join(data_root, "Fold%d" % k) for k in args.folds}
    if args.no_fresh and not args.budgets:
        raise SystemExit("--no-fresh runs only the fixed logs: give --budgets K ...")
    # Oracle ignores clicks and Rand-MULTR is an ablation: budgets run the rest.
    budget_methods = [m for m in args.methods if m not in ("oracle", "rand_multr")]
    sweeps = []
    if args.budgets:
        sweeps.append(
            {
                "name": "K",
                "methods": budget_methods,
                "section": "train_input_hparams",
                "parameter": "sessions_per_query",
                "values": list(args.budgets),
                "overrides": {"train_input_feed": "ultra_multr.feeds.ClickLogFeed"},
            }
        )
    if args.rerank_weights:
        sweeps.append(
            {
                "name": "rerank_weight",
                "methods": ["multr"],
                "section": "learning_algorithm_hparams",
                "parameter": "rerank_weight",
                "values": list(args.rerank_weights),
            }
        )
    if args.sweep:
        sweeps.append(
            {
                "name": "sample_num",
                "methods": ["multr"],
                "section": "learning_algorithm_hparams",
                "parameter": "sample_num",
                "values": list(args.sweep),
                "folds": ["Fold%d" % args.folds[0]],
            }
        )
    return {
        "output_dir": os.path.abspath(args.out),
        "datasets": {"mq2008": folds},
        "methods": [] if args.no_fresh else list(args.methods),
        "seeds": list(args.seeds),
        "settings": {
            "train_input_hparams": {"click_model_json": os.path.abspath(args.click_model)},
            "ranking_model_hparams": {"hidden_layer_sizes": [512, 256, 128]},
            "learning_algorithm_hparams": {"learning_rate": 0.05, "log_every": 500},
        },
        "method_overrides": {
            name: {
                "learning_algorithm_hparams": dict(
                    {"simulator_steps": args.steps, "simulator_log_every": 500}, **args.multr_hparams
                )
            }
            for name in ("multr", "eib_multr")
            if name in args.methods
        },
        "main_args": {
            "batch_size": 256,
            "max_train_iteration": args.steps,
            "steps_per_checkpoint": 100,
            "selection_bias_cutoff": 10,
        },
        "sweeps": sweeps,
    }


def needs_preparation(data_root: str, folds, options: prepare.PrepareOptions) -> list:
    """The folds whose data directory is missing or was prepared with another recipe."""
    missing = []
    for k in folds:
        path = os.path.join(data_root, "Fold%d" % k, prepare.REPORT_FILE)
        try:
            report = read_json(path, "preparation report")
        except JsonFileError:
            missing.append(k)
            continue
        if not prepare.made_with(report, options):
            missing.append(k)
    return missing


def _rerank_weight(text: str) -> str:
    """``paper`` or a number in [0, 1], kept as text (MULTR's ``rerank_weight`` hparam is a string)."""
    if text == "paper":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is neither 'paper' nor a number" % text) from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError("%r is outside [0, 1]" % text)
    return text


def _multr_hparams(text: str) -> dict:
    """``name=value,...`` checked against MULTR's hyper-parameters (unknown names get a "did you mean")."""
    from ultra_multr.algorithms.multr import MULTRConfig
    from ultra_multr.config import parse_hparams, split_assignments

    try:
        parse_hparams(MULTRConfig, text, source="--multr-hparams")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return dict((part.strip() for part in assignment.split("=", 1)) for assignment in split_assignments(text))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="folder with MQ2008's S1.txt ... S5.txt")
    parser.add_argument("--out", required=True)
    parser.add_argument("--folds", type=int, nargs="+", default=[1])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="threads per run (the runner's --threads)")
    parser.add_argument("--budgets", type=int, nargs="*", default=[1, 4, 16])
    parser.add_argument("--methods", nargs="+", default=["oracle", "naive", "dla", "multr", "rand_multr", "eib_multr"])
    parser.add_argument("--sweep", type=int, nargs="*", default=[0, 2, 4, 8, 16, 32])
    parser.add_argument("--click-model", default=CASCADE, help="click model JSON (default: cascade, noise 0.1, y_max 2)")
    parser.add_argument("--no-fresh", action="store_true", help="only the fixed click logs of --budgets")
    parser.add_argument("--dry-run", action="store_true", help="prepare nothing, train nothing: list the runs")
    parser.add_argument(
        "--train-queries", type=int, default=None,
        help="keep a seeded sample of this many training queries per fold (default: all)",
    )
    parser.add_argument(
        "--rerank-weights", type=_rerank_weight, nargs="*", default=[],
        help="also run MULTR at these fixed rerank_weight values on every fold (e.g. paper 0)",
    )
    parser.add_argument(
        "--multr-hparams", type=_multr_hparams, default={},
        help="MULTR's (and EIB-MULTR's) hyper-parameters besides the defaults, e.g. 'dr_weight_guard=none' "
        "(an ablation: give it its own --out)",
    )
    args = parser.parse_args(argv)
    if not os.path.isfile(args.click_model):
        parser.error("--click-model %s does not exist" % args.click_model)
    try:
        read_json(args.click_model, "click model")
    except JsonFileError as error:
        parser.error(str(error))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    out = os.path.abspath(args.out)
    data_root = os.path.join(out, "data")
    options = prepare.PrepareOptions(train_queries=args.train_queries)
    missing = needs_preparation(data_root, args.folds, options)
    if missing:
        prepare_argv = ["folds", "--partitions", args.data, "--out", data_root, "--folds", ",".join(map(str, missing))]
        if args.train_queries is not None:
            prepare_argv += ["--train-queries", str(args.train_queries)]
        if args.dry_run:
            print("would run: python -m ultra_multr.data.prepare %s" % " ".join(shlex.quote(a) for a in prepare_argv))
        else:
            code = prepare.main(prepare_argv)
            if code:
                return code
    config_path = os.path.join(out, "study.json")
    atomic_write_text(config_path, json.dumps(study_config(args, data_root), indent=2) + "\n")
    runner_argv = [config_path, "--workers", str(args.workers)] + (["--threads", str(args.threads)] if args.threads else [])
    code = runner.main(runner_argv + (["--dry-run"] if args.dry_run else []))
    runs = [] if args.dry_run else diagnostics.collect(os.path.join(out, "runs"))
    if runs:  # learned propensities and simulator fit per group, beside the tables
        atomic_write_text(os.path.join(out, "results", "diagnostics.md"), diagnostics.format_markdown(runs))
    summary = os.path.join(out, "results", "summary.md")
    if not args.dry_run and os.path.isfile(summary):
        with open(summary) as handle:
            print("\n" + handle.read())
    return code


if __name__ == "__main__":
    sys.exit(main())
