"""The paper's study (Table 2 methods, click-log budgets, Figure 3) on MQ2008.

Usage::

    python example/reproduce_mq2008.py --data ../shared/data/MQ2008 --out out/mq2008
        [--folds 1] [--steps 1000] [--seeds 0] [--workers 2] [--budgets 1 4 16]
        [--methods oracle naive dla multr rand_multr eib_multr] [--sweep 0 2 4 8 16 32]

1. prepares the LETOR partitions into ULTRA data directories (five-fold
   rotation, Rank SVM on 1% of the training queries; skipped when present);
2. writes a runner config: cascade clicks with noise 0.1 for MQ2008's labels
   0..2, batch 256, N = 10, DNN [512, 256, 128], ``--steps`` ranker steps and
   as many simulator steps (the paper trains 10,000 of each); fresh clicks
   every step (the paper's protocol) plus fixed logs of K sessions per query
   (``--budgets``, for every method but Oracle and Rand-MULTR); a
   ``sample_num`` sweep for MULTR on the first fold;
3. runs it with ``--workers`` parallel processes (resumable: re-running skips
   finished runs) and aggregates Table-2 style tables, significance markers,
   the DLA-to-Oracle gap closed and the Figure-3 plot into ``<out>/results``.

Defaults (Fold1, one seed, 1000 steps: 24 runs) take about an hour and a
half on 2 CPU cores; add folds and seeds for tighter tests.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from ultra_multr.data import prepare
from ultra_multr.data.ultra_format import atomic_write_text
from ultra_multr.experiments import runner

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASCADE = os.path.join(REPO, "settings", "click_models", "cascade_eps0.1_ymax2.json")


def study_config(args, data_root: str) -> dict:
    folds = {"Fold%d" % k: os.path.join(data_root, "Fold%d" % k) for k in args.folds}
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
        "methods": list(args.methods),
        "seeds": list(args.seeds),
        "settings": {
            "train_input_hparams": {"click_model_json": CASCADE},
            "ranking_model_hparams": {"hidden_layer_sizes": [512, 256, 128]},
            "learning_algorithm_hparams": {"learning_rate": 0.05, "log_every": 500},
        },
        "method_overrides": {
            name: {"learning_algorithm_hparams": {"simulator_steps": args.steps, "simulator_log_every": 500}}
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="folder with MQ2008's S1.txt ... S5.txt")
    parser.add_argument("--out", required=True)
    parser.add_argument("--folds", type=int, nargs="+", default=[1])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--budgets", type=int, nargs="*", default=[1, 4, 16])
    parser.add_argument("--methods", nargs="+", default=["oracle", "naive", "dla", "multr", "rand_multr", "eib_multr"])
    parser.add_argument("--sweep", type=int, nargs="*", default=[0, 2, 4, 8, 16, 32])
    args = parser.parse_args()

    data_root = os.path.join(os.path.abspath(args.out), "data")
    missing = [k for k in args.folds if not os.path.isfile(os.path.join(data_root, "Fold%d" % k, "settings.json"))]
    if missing:
        code = prepare.main(
            ["folds", "--partitions", args.data, "--out", data_root, "--folds", ",".join(map(str, missing))]
        )
        if code:
            return code
    config_path = os.path.join(os.path.abspath(args.out), "study.json")
    atomic_write_text(config_path, json.dumps(study_config(args, data_root), indent=2) + "\n")
    return runner.main([config_path, "--workers", str(args.workers)])


if __name__ == "__main__":
    sys.exit(main())
