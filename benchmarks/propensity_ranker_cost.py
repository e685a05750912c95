"""What ``propensity_ranker=dla`` (MULTR's default: a second ranker taking DLA's loss) costs per MULTR update.

    python benchmarks/propensity_ranker_cost.py [--queries 300] [--features 46] [--batch-size 256] [--rounds 12]
        [--out benchmarks/results/propensity_ranker_cost.md]

Both configurations are built as main.py builds MULTR (ULTRA's DNN [512, 256, 128], cascade clicks from our feed,
``imputation=expected``, ``simulator_steps=0`` so that no simulator training is timed) on one generated data set,
and their updates are interleaved round by round on one thread; the ratio is the median of the per-round ratios.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import torch

from ultra_multr.compat import startup  # noqa: F401  (ULTRA's fixes before it is imported)
import ultra  # noqa: E402

from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset  # noqa: E402
from ultra_multr.files import atomic_write_text  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASCADE = os.path.join(REPO, "settings", "click_models", "cascade_eps0.1_ymax4.json")


def build(data_dir: str, propensity_ranker: str, batch_size: int):
    data = ultra.utils.read_data(data_dir, "train", None, 0)
    settings = {
        "train_input_feed": "ultra_multr.feeds.ClickSimulationFeed",
        "train_input_hparams": "click_model_json=%s,seed=0" % CASCADE,
        "ranking_model": "ultra.ranking_model.DNN", "ranking_model_hparams": "hidden_layer_sizes=[512,256,128]",
        "learning_algorithm": "ultra_multr.MULTR",
        "learning_algorithm_hparams": "seed=0,device=cpu,log_every=0,simulator_steps=0,propensity_ranker=%s"
        % propensity_ranker,
        "metrics": ["ndcg"], "metrics_topn": [10], "objective_metric": "ndcg_10",
        "max_candidate_num": data.rank_list_size, "selection_bias_cutoff": 10,
    }
    data.pad(data.rank_list_size)
    model = ultra.utils.find_class(settings["learning_algorithm"])(data, settings)
    feed = ultra.utils.find_class(settings["train_input_feed"])(model, batch_size, settings["train_input_hparams"])
    model.prepare_simulator()
    return model, feed, data


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--features", type=int, default=46)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=12, help="interleaved updates per configuration (2 warm-up)")
    parser.add_argument("--out", default=None, help="also write the table here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = write_synthetic_ultra_dataset(tmp, {"train": args.queries, "valid": 5, "test": 5},
                                                 docs_per_query=(8, 10), n_features=args.features)
        built = {name: build(data_dir, name, args.batch_size) for name in ("dla", "multr")}
        times = {name: [] for name in built}
        for _ in range(args.rounds):
            for name, (model, feed, data) in built.items():
                input_feed = feed.get_batch(data, check_validation=True)[0]
                started = time.perf_counter()
                model.train(input_feed)
                times[name].append(time.perf_counter() - started)
    dla, multr = (np.array(times[name][2:]) for name in ("dla", "multr"))
    table = (
        "MULTR updates, %d generated training queries, %d features, batch %d, ULTRA's DNN [512, 256, 128], "
        "imputation=expected, 1 thread, %d interleaved rounds after 2 warm-up.\n\n"
        "| propensity_ranker | ms / update (median) | x propensity_ranker=multr (median of per-round ratios) |\n"
        "|---|---|---|\n| multr (the paper's coupling) | %.1f | 1.00 |\n| dla (default) | %.1f | %.2f |\n"
        % (args.queries, args.features, args.batch_size, args.rounds - 2, 1000 * np.median(multr),
           1000 * np.median(dla), float(np.median(dla / multr)))
    )
    print(table, end="")
    if args.out:
        atomic_write_text(args.out, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
