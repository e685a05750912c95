"""What ``propensity_ranker=dla`` (MULTR's default: a second ranker taking DLA's loss) costs per MULTR update,
what its cheaper forms (``propensity_update_every=k``, a smaller ``examination_ranker_layers``) save, and how far
each moves the propensities from DLA's on the same batches.

    python benchmarks/propensity_ranker_cost.py [--source synthetic|recipe|baidu | --data-dir DIR]
        [--queries 300] [--features 46] [--batch-size 256] [--steps 48] [--every 1 2 4] [--layers 64 ...]
        [--device cpu] [--out benchmarks/results/propensity_ranker_cost.md]

Every configuration is built as main.py builds it (ULTRA's DNN [512, 256, 128]; MULTR with ``imputation=expected``
and ``simulator_steps=0``, so that no simulator training is timed and the simulator never reaches the examination
side, which it does not under ``propensity_ranker=dla`` anyway):

* DLA, and DLA from another seed (its initial ranker and propensity model; the same batches): the spread of DLA's
  own propensities, against which the other rows' statistic reads;
* MULTR with ``propensity_ranker=multr`` (the paper's coupling, which the simulator's bias reaches);
* MULTR with ``propensity_ranker=dla`` and each k of ``--every``; with each ``--layers`` (k = 1), hidden sizes
  ``a,b,...`` of the examination ranker.

A round is one block of L updates per configuration on the same L batches, L the least common multiple of the k (a
block holds every phase of each cycle), the configurations interleaved round by round on one thread; a ratio is
the median of the per-round ratios of block times (two warm-up rounds left out).  Each update ends by reading its
loss (a device sync on CUDA).  The statistic, at every quarter of ``--steps`` and at the end: the largest over
positions 2..10 of |1/p / 1/p(DLA) - 1|, 1/p each configuration's learned inverse propensity relative to position 1
(what DLA's and MULTR's ``propensity/position_XX`` curves log).

Data (``--source``): ``synthetic`` (default; 8-10 documents per query, ``--features``, cascade clicks), ``recipe``
(the paper_setting grid's ``quadratic_1_f46`` recipe: 46 features, a Rank SVM logger on 1 % of the labels, cascade
clicks) or ``baidu`` (a generated log in the Baidu-ULTR release's layout, PBM clicks with examination 1/rank,
converted as ``ultra-multr-baidu-convert`` does, replayed by ``BaiduSessionFeed``); ``--data-dir`` an existing ULTRA
data directory (its ``main_settings.json``, when the converter wrote one, gives the training feed).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import replace
from functools import reduce
from typing import List, Tuple

import numpy as np
import torch

from ultra_multr.compat import startup  # noqa: F401  (ULTRA's fixes before it is imported)
import ultra  # noqa: E402

from ultra_multr.files import atomic_write_text  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASCADE = os.path.join(REPO, "settings", "click_models", "cascade_eps0.1_ymax4.json")
COMMON = "log_every=0"
#: MULTR's hyper-parameters besides COMMON and the configuration's: no simulator training timed.
MULTR = "simulator_steps=0"
#: Positions the statistic reads (DLA's propensities are relative to position 1).
POSITIONS = 10
SIMULATED_FEED = {"train_input_feed": "ultra_multr.feeds.ClickSimulationFeed",
                  "train_input_hparams": "click_model_json=%s,seed=0" % CASCADE}


def configurations(every: List[int], layers: List[str], device: str) -> List[Tuple[str, str, str]]:
    """(row label, learning algorithm, hyper-parameters) of every configuration; DLA first."""
    common = "%s,device=%s" % (COMMON, device)
    multr = ",".join([common, MULTR])
    rows = [("DLA", "ultra_multr.DLA", common + ",seed=0"),
            ("DLA, another seed (DLA's own spread)", "ultra_multr.DLA", common + ",seed=1"),
            ("MULTR propensity_ranker=multr (the paper's coupling)", "ultra_multr.MULTR",
             multr + ",seed=0,propensity_ranker=multr")]
    for k in every:
        label = "MULTR propensity_ranker=dla, propensity_update_every=%d%s" % (k, " (default)" if k == 1 else "")
        rows.append((label, "ultra_multr.MULTR", multr + ",seed=0,propensity_update_every=%d" % k))
    for sizes in layers:
        rows.append(("MULTR propensity_ranker=dla, examination_ranker_layers=[%s]" % sizes, "ultra_multr.MULTR",
                     multr + ",seed=0,examination_ranker_layers=[%s]" % sizes))
    return rows


def write_data(source: str, directory: str, queries: int, features: int) -> str:
    """A data directory of ``source`` in ``directory`` (see the module docstring)."""
    if source == "synthetic":
        from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset

        return write_synthetic_ultra_dataset(directory, {"train": queries, "valid": 5, "test": 5},
                                             docs_per_query=(8, 10), n_features=features)
    if source == "recipe":
        from ultra_multr.generate.ultra_recipe import SCREENED_RECIPES, write_recipe_dataset

        data_dir = os.path.join(directory, "data")
        write_recipe_dataset(data_dir, replace(SCREENED_RECIPES["quadratic_1_f46"], valid_queries=20))
        return data_dir
    from ultra_multr.click_logs import baidu_convert
    from ultra_multr.generate.baidu_log import write_baidu_log

    log = write_baidu_log(os.path.join(directory, "log"), n_queries=max(queries // 10, 20), n_sessions=queries * 10,
                          n_test_sessions=0, n_annotated=40, sessions_per_file=queries * 5, seed=0)
    data_dir = os.path.join(directory, "data")
    baidu_convert.convert(log.validation_file, log.train_files, data_dir)
    return data_dir


def base_settings(data_dir: str) -> dict:
    """The run settings of ``data_dir``: the converter's ``main_settings.json`` (its feed) or simulated clicks."""
    path = os.path.join(data_dir, "main_settings.json")
    if not os.path.isfile(path):
        return dict(SIMULATED_FEED)
    with open(path) as handle:
        found = json.load(handle)
    return {key: found[key] for key in ("train_input_feed", "train_input_hparams")}


def build(data_dir: str, algorithm: str, hparams: str, batch_size: int):
    """(algorithm, its training feed, the training split) as main.py builds them."""
    data = ultra.utils.read_data(os.path.join(data_dir, ""), "train", None, 0)
    settings = dict(
        base_settings(data_dir),
        ranking_model="ultra.ranking_model.DNN", ranking_model_hparams="hidden_layer_sizes=[512,256,128]",
        learning_algorithm=algorithm, learning_algorithm_hparams=hparams,
        metrics=["ndcg"], metrics_topn=[10], objective_metric="ndcg_10",
        max_candidate_num=data.rank_list_size, selection_bias_cutoff=POSITIONS,
    )
    data.pad(data.rank_list_size)
    model = ultra.utils.find_class(algorithm)(data, settings)
    feed = ultra.utils.find_class(settings["train_input_feed"])(model, batch_size, settings["train_input_hparams"])
    model.prepare()
    return model, feed, data


def inverse_propensities(model) -> np.ndarray:
    """[POSITIONS] the model's learned 1/p relative to position 1 (its ``propensity/position_XX`` curves)."""
    curves = model.training_curves()
    return np.array([1.0 / curves["propensity/position_%02d" % (i + 1)] for i in range(POSITIONS)])


def statistic(inverse: np.ndarray, reference: np.ndarray) -> float:
    """max over positions 2..N of |1/p / 1/p(reference) - 1|."""
    return float(np.max(np.abs(inverse[1:] / reference[1:] - 1.0)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", choices=("synthetic", "recipe", "baidu"), default="synthetic")
    parser.add_argument("--data-dir", default=None, help="an existing ULTRA data directory instead of --source")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--features", type=int, default=46)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=48, help="updates per configuration (rounded up to blocks)")
    parser.add_argument("--every", type=int, nargs="+", default=[1, 2, 4],
                        help="values of propensity_update_every to measure (each >= 1)")
    parser.add_argument("--layers", nargs="*", default=[],
                        help="examination_ranker_layers to measure, each as comma-separated sizes (e.g. 64)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:K")
    parser.add_argument("--out", default=None, help="also write the table here")
    args = parser.parse_args(argv)
    if min(args.every) < 1:
        parser.error("every --every must be >= 1")
    block = reduce(lambda a, b: a * b // math.gcd(a, b), args.every)
    rounds = max(-(-args.steps // block), 4)
    torch.set_num_threads(1)
    rows = configurations(args.every, args.layers, args.device)
    checkpoints = sorted({max(rounds * q // 4, 1) for q in (1, 2, 3, 4)})
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data_dir or write_data(args.source, tmp, args.queries, args.features)
        built = [build(data_dir, algorithm, hparams, args.batch_size) for _, algorithm, hparams in rows]
        feed, data = built[0][1], built[0][2]
        times = [[] for _ in rows]
        stats = [[] for _ in rows]
        for done in range(1, rounds + 1):
            batches = [feed.get_batch(data, check_validation=True)[0] for _ in range(block)]
            for (model, _, _), spent in zip(built, times):
                started = time.perf_counter()
                for input_feed in batches:
                    model.train(input_feed)
                spent.append(time.perf_counter() - started)
            if done in checkpoints:
                curves = [inverse_propensities(model) for model, _, _ in built]
                for row, curve in zip(stats, curves):
                    row.append(statistic(curve, curves[0]))
        dla_curve = inverse_propensities(built[0][0])
    blocks = [np.array(spent[2:]) for spent in times]
    where = ("%s set in %s" % (args.source, args.data_dir) if args.data_dir else
             "%s set (%d training queries, %d features)" % (args.source, args.queries, args.features)
             if args.source == "synthetic" else "%s set" % args.source)
    table = (
        "Updates on the %s, batch %d, ULTRA's DNN [512, 256, 128], MULTR with imputation=expected and "
        "simulator_steps=0, device %s, 1 thread; %d updates per configuration in %d interleaved rounds of %d "
        "(ratios over the rounds after 2 warm-up). Statistic: max over positions 2-%d of |1/p / 1/p(DLA) - 1| after "
        "%s updates. DLA's 1/p after the last: %s.\n\n"
        "| configuration | ms / update (median) | x DLA (median of per-round ratios) | statistic |\n|---|---|---|---|\n"
        % (where, args.batch_size, args.device, rounds * block, rounds, block, POSITIONS,
           ", ".join(str(done * block) for done in checkpoints), ", ".join("%.3f" % v for v in dla_curve))
    )
    dla = blocks[0]
    for (label, _, _), spent, row in zip(rows, blocks, stats):
        table += "| %s | %.1f | %.2f | %s |\n" % (label, 1000 * np.median(spent) / block,
                                                 float(np.median(spent / dla)), " / ".join("%.3f" % v for v in row))
    print(table, end="")
    if args.out:
        atomic_write_text(args.out, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
