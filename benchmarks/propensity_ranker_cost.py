"""What ``propensity_ranker=dla`` (MULTR's default: a second ranker taking DLA's loss) costs per MULTR update,
and how much ``propensity_update_every=k`` (that ranker trained on every k-th update only) takes back.

    python benchmarks/propensity_ranker_cost.py [--queries 300] [--features 46] [--batch-size 256] [--rounds 12]
        [--every 1 2 4] [--device cpu] [--out benchmarks/results/propensity_ranker_cost.md]

Every configuration (DLA; MULTR with ``propensity_ranker=multr``, the paper's coupling; MULTR with
``propensity_ranker=dla`` and each k of ``--every``) is built as main.py builds it (ULTRA's DNN [512, 256, 128],
cascade clicks from our feed, MULTR with ``imputation=expected`` and ``simulator_steps=0`` so that no simulator
training is timed) on one generated data set.  A round is one block of L updates per configuration on the same L
batches, L the least common multiple of the k (a block holds every phase of each cycle: updates with and without
the examination ranker), the configurations interleaved round by round on one thread; each ratio is the median of
the per-round ratios of block times.  Each update ends by reading its loss (a device sync on CUDA), so a block's
time is its updates' on any device.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from functools import reduce

import numpy as np
import torch

from ultra_multr.compat import startup  # noqa: F401  (ULTRA's fixes before it is imported)
import ultra  # noqa: E402

from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset  # noqa: E402
from ultra_multr.files import atomic_write_text  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASCADE = os.path.join(REPO, "settings", "click_models", "cascade_eps0.1_ymax4.json")
COMMON = "seed=0,log_every=0"
#: MULTR's hyper-parameters besides COMMON and the configuration's: no simulator training timed.
MULTR = "simulator_steps=0"


def configurations(every, device):
    """(row label, learning algorithm, hyper-parameters) of DLA, the coupled MULTR and MULTR per k of ``every``."""
    common = "%s,device=%s" % (COMMON, device)
    rows = [("DLA", "ultra_multr.DLA", common),
            ("MULTR propensity_ranker=multr (the paper's coupling)", "ultra_multr.MULTR",
             ",".join([common, MULTR, "propensity_ranker=multr"]))]
    for k in every:
        label = "MULTR propensity_ranker=dla, propensity_update_every=%d%s" % (k, " (default)" if k == 1 else "")
        rows.append((label, "ultra_multr.MULTR", ",".join([common, MULTR, "propensity_update_every=%d" % k])))
    return rows


def build(data_dir: str, algorithm: str, hparams: str, batch_size: int):
    data = ultra.utils.read_data(data_dir, "train", None, 0)
    settings = {
        "train_input_feed": "ultra_multr.feeds.ClickSimulationFeed",
        "train_input_hparams": "click_model_json=%s,seed=0" % CASCADE,
        "ranking_model": "ultra.ranking_model.DNN", "ranking_model_hparams": "hidden_layer_sizes=[512,256,128]",
        "learning_algorithm": algorithm, "learning_algorithm_hparams": hparams,
        "metrics": ["ndcg"], "metrics_topn": [10], "objective_metric": "ndcg_10",
        "max_candidate_num": data.rank_list_size, "selection_bias_cutoff": 10,
    }
    data.pad(data.rank_list_size)
    model = ultra.utils.find_class(algorithm)(data, settings)
    feed = ultra.utils.find_class(settings["train_input_feed"])(model, batch_size, settings["train_input_hparams"])
    model.prepare()
    return model, feed, data


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--features", type=int, default=46)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=12, help="interleaved blocks per configuration (2 warm-up)")
    parser.add_argument("--every", type=int, nargs="+", default=[1, 2, 4],
                        help="values of propensity_update_every to measure (each >= 1)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:K")
    parser.add_argument("--out", default=None, help="also write the table here")
    args = parser.parse_args(argv)
    if args.rounds < 3 or min(args.every) < 1:
        parser.error("--rounds must be >= 3 (2 warm-up) and every --every >= 1")
    block = reduce(lambda a, b: a * b // math.gcd(a, b), args.every)
    torch.set_num_threads(1)
    rows = configurations(args.every, args.device)
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = write_synthetic_ultra_dataset(tmp, {"train": args.queries, "valid": 5, "test": 5},
                                                 docs_per_query=(8, 10), n_features=args.features)
        built = [build(data_dir, algorithm, hparams, args.batch_size) for _, algorithm, hparams in rows]
        feed, data = built[0][1], built[0][2]
        times = [[] for _ in rows]
        for _ in range(args.rounds):
            batches = [feed.get_batch(data, check_validation=True)[0] for _ in range(block)]
            for (model, _, _), spent in zip(built, times):
                started = time.perf_counter()
                for input_feed in batches:
                    model.train(input_feed)
                spent.append(time.perf_counter() - started)
    blocks = [np.array(spent[2:]) for spent in times]
    dla, coupled = blocks[0], blocks[1]
    table = (
        "Updates of %d generated training queries, %d features, batch %d, ULTRA's DNN [512, 256, 128], MULTR with "
        "imputation=expected, device %s, 1 thread; %d interleaved rounds after 2 warm-up, each a block of %d updates "
        "per configuration on the same batches.\n\n"
        "| configuration | ms / update (median) | x coupled MULTR (median of per-round ratios) "
        "| x DLA (median of per-round ratios) |\n|---|---|---|---|\n"
        % (args.queries, args.features, args.batch_size, args.device, args.rounds - 2, block)
    )
    for (label, _, _), spent in zip(rows, blocks):
        table += "| %s | %.1f | %.2f | %.2f |\n" % (label, 1000 * np.median(spent) / block,
                                                    float(np.median(spent / coupled)), float(np.median(spent / dla)))
    print(table, end="")
    if args.out:
        atomic_write_text(args.out, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
