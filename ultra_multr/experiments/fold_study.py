"""The runner config of a study on folds: the paper's protocol scaled down (MQ2008's study and the generated sets).

One config for ``studies/mq2008/run.py`` (MQ2008's five folds), ``studies/mq2008/generated_small.py`` and
``studies/headroom/run.py`` (generated sets, one "fold" per set): the click model's fresh clicks every step for
``methods``, fixed click logs of K sessions per query (``budgets``), MULTR at fixed re-ranked weights
(``rerank_weights``) and a ``sample_num`` sweep on the first fold, batch 256, N = 10, DNN [512, 256, 128],
``steps`` ranker steps and as many simulator steps; and the paired tables of MULTR at each fixed re-ranked
weight.
"""
from __future__ import annotations

import os

from ultra_multr.experiments import compare


def study_config(args, data_root: str) -> dict:
    """The runner config of ``args`` (out, folds, seeds, steps, click_model, methods, budgets, no_fresh,
    rerank_weights, sweep, multr_hparams: the flags of ``studies/mq2008/run.py``) on ``data_root/Fold<k>``."""
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
                # logger_guard=none: these studies' committed results (studies/mq2008, studies/headroom) were made
                # before the logger guard was MULTR's default (--multr-hparams logger_guard=order_fit switches it on)
                "learning_algorithm_hparams": dict(
                    {"simulator_steps": args.steps, "simulator_log_every": 500, "logger_guard": "none"},
                    **args.multr_hparams
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


def rerank_weight_tables(out: str, weights=("paper", "0")) -> int:
    """Per fixed weight a, MULTR at a paired per test query with the base MULTR row ("MULTR auto") and with DLA,
    from the runs in ``<out>/runs``: ``<out>/results/rerank_weight_<a>.md``.  Returns compare's exit status
    (non-zero if any table failed)."""
    code = 0
    for weight in weights:
        code = compare.main([
            os.path.join(out, "runs"), os.path.join(out, "runs"), "--variant-before", "rerank_weight=%s" % weight,
            "--label-before", "MULTR a=%s" % weight, "--label-after", "MULTR auto",
            "--out", os.path.join(out, "results", "rerank_weight_%s.md" % weight),
        ]) or code
    return code
