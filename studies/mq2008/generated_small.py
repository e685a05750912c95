"""Small data on generated lists: when does MULTR's imputed re-ranked term help, and when does it hurt?

The MQ2008 small-data table (``run.py --table small``) cuts real folds to 30
training queries.  This script asks the same question on lists anyone can
generate, with many features and graded labels, as the small LETOR set of
issue 8 had::

    python studies/mq2008/generated_small.py --out out/generated [--datasets 1 2] [--seeds 0 1 2]
        [--train-queries 30] [--features 136] [--steps 1000] [--workers 2] [--dry-run]

1. Per ``--datasets`` value k, a generated ULTRA data directory
   ``<out>/data/Fold<k>`` (:func:`ultra_multr.generate.ultra_dataset.write_synthetic_ultra_dataset`,
   seeded by k): ``--features`` Gaussian features carrying the label on one
   direction, graded labels 0-4, 15-30 documents per query, the initial
   ranking a noisy version of the relevance; ``--train-queries`` training,
   30 validation and 200 test queries.  A directory already written with the
   same recipe is kept; one written with another is an error.
2. The MQ2008 study's runner config (:mod:`ultra_multr.experiments.fold_study`) on those
   directories: cascade clicks with noise 0.1 for labels 0..4, DLA, MULTR
   (``rerank_weight=auto``) and MULTR at the fixed weights ``paper`` and ``0``.
3. The runner (resumable) and, per fixed weight, the per-query paired table
   against the default and DLA: ``<out>/results/rerank_weight_<a>.md``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from ultra_multr.generate.ultra_dataset import RECIPE_FILE, write_recipe_dataset  # noqa: F401 (RECIPE_FILE: re-exported)
from ultra_multr.files import atomic_write_text
from ultra_multr.experiments.fold_study import rerank_weight_tables, study_config
from ultra_multr.experiments.runner import cli as runner

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASCADE_4 = os.path.join(REPO, "settings", "click_models", "cascade_eps0.1_ymax4.json")


#: The data directory of a recipe (moved to the package, where studies/ can reuse it).
write_dataset = write_recipe_dataset


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--datasets", type=int, nargs="+", default=[1], help="seeds of the generated datasets")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--train-queries", type=int, default=30)
    parser.add_argument("--features", type=int, default=136)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="threads per run (the runner's --threads)")
    parser.add_argument("--dry-run", action="store_true", help="generate nothing, train nothing: list the runs")
    args = parser.parse_args(argv)
    if args.train_queries < 2 or args.features < 2:
        parser.error("--train-queries and --features must be >= 2")
    out = os.path.abspath(args.out)
    data_root = os.path.join(out, "data")
    config_args = argparse.Namespace(
        out=out, folds=args.datasets, seeds=args.seeds, steps=args.steps, click_model=CASCADE_4,
        methods=["dla", "multr"], budgets=[], no_fresh=False, rerank_weights=["paper", "0"], sweep=[],
        multr_hparams={"rerank_weight": "auto"},  # the base row is the pilot's choice (no longer the default)
    )
    config = study_config(config_args, data_root)
    config["datasets"] = {"generated": config["datasets"]["mq2008"]}
    if not args.dry_run:
        for k in args.datasets:
            recipe = {"seed": k, "train_queries": args.train_queries, "features": args.features}
            write_dataset(os.path.join(data_root, "Fold%d" % k), recipe)
    config_path = os.path.join(out, "study.json")
    atomic_write_text(config_path, json.dumps(config, indent=2) + "\n")
    runner_argv = [config_path, "--workers", str(args.workers)] + (["--threads", str(args.threads)] if args.threads else [])
    code = runner.main(runner_argv + (["--dry-run"] if args.dry_run else []))
    if args.dry_run or code:
        return code
    return rerank_weight_tables(out)


if __name__ == "__main__":
    sys.exit(main())
