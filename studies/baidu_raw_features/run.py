"""Raw features that train: DLA and MULTR through main.py without the DNN's layer normalisation, on the raw
(signed-log1p) lexical features and on the same features standardised per feature (issue 27, item 5).

    python studies/baidu_raw_features/run.py --out out/raw_features [--sessions 4000] [--queries 200]
        [--annotated 100] [--steps 300] [--batch-size 64] [--seed 0] [--main-py PATH]
        [--results studies/baidu_raw_features/results]

1. A small generated log in the Baidu-ULTR release's layout (:func:`ultra_multr.generate.baidu_log.write_baidu_log`)
   with the recipe of the study's ``pbm_noisy_nonorm`` log, scaled down: PBM clicks (examination 1/rank),
   ``logger_bias`` 2, ``feature_noise`` 4 (studies/baidu/README.md).
2. Converted twice (``ultra-multr-baidu-convert``): ``--no_standardize`` (raw) and by default (standardised, the
   statistics fitted on the training files).
3. main.py trains DLA and MULTR at each of ``--learning-rates`` (0.05 is the study's) on each, the ranker ULTRA's DNN
   ``[512, 256, 128]`` with ``norm=none``, ``--steps`` updates of ``--batch-size`` sessions (MULTR's simulator:
   at most ``--steps`` steps); a run that meets a non-finite loss stops with a ``FloatingPointError``.
4. ``raw_features.md`` / ``.csv`` in ``--results``: per method and features, whether main.py finished, the update
   it stopped at, the non-finite loss named, and nDCG@10 on the annotated test queries
   (``ultra-multr-baidu-evaluate``) of the finished runs.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
from typing import Dict, List

from ultra_multr.click_models import PositionBasedModel, graded_click_prob, reciprocal_rank_exam_prob
from ultra_multr.files import atomic_write_text
from ultra_multr.click_logs import baidu_convert, baidu_evaluate
from ultra_multr.experiments.runner.runs import find_main_py
from ultra_multr.generate.baidu_log import MAX_LABEL, write_baidu_log

N_POSITIONS = 10
METHODS = {"DLA": "ultra_multr.DLA", "MULTR": "ultra_multr.MULTR"}
FEATURES = {"raw (signed log1p)": ["--no_standardize"], "standardised": []}
NONFINITE = re.compile(r"FloatingPointError: (non-finite training loss \S+ at step (\d+)[^\n]*)")


def make_log(log_dir: str, args) -> object:
    return write_baidu_log(
        log_dir, n_queries=args.queries, n_sessions=args.sessions, n_test_sessions=500, n_annotated=args.annotated,
        n_positions=N_POSITIONS, sessions_per_file=max(args.sessions // 2, 1),
        click_model=PositionBasedModel(graded_click_prob(0.1, MAX_LABEL), reciprocal_rank_exam_prob(1.0, N_POSITIONS)),
        seed=args.log_seed, logger_bias=2.0, feature_noise=4.0)


def train(main_py: str, data_dir: str, model_dir: str, method: str, learning_rate: float, args) -> Dict:
    """One main.py run; its outcome."""
    hparams = "learning_rate=%g,seed=%d,log_every=50" % (learning_rate, args.seed)
    if method == "MULTR":  # logger_guard=none: the committed results were made before the guard was MULTR's default
        hparams += ",simulator_steps=%d,simulator_batch_size=%d,logger_guard=none" % (args.steps, args.batch_size)
    settings, done = baidu_convert.train_through_main_py(
        main_py, data_dir, model_dir, METHODS[method], hparams, "hidden_layer_sizes=[512,256,128],norm=none",
        args.batch_size, args.steps, 50, N_POSITIONS,
    )
    found = NONFINITE.search(done.stderr)
    outcome = {"exit": done.returncode, "nonfinite": found.group(1) if found else "",
               "stopped_at": int(found.group(2)) if found else None}
    if done.returncode == 0:
        summary = baidu_evaluate.evaluate(data_dir, settings, model_dir, os.path.join(model_dir, "eval"), "test")
        outcome["ndcg_10"] = summary["ndcg_10"]
    elif not found:
        outcome["error"] = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "exit %d" % done.returncode
    return outcome


def write_table(rows: List[Dict], results: str, note: str) -> None:
    os.makedirs(results, exist_ok=True)
    header = ["method", "learning rate", "features", "main.py", "updates", "non-finite loss", "test nDCG@10"]
    table = []
    for row in rows:
        outcome = row["outcome"]
        finished = outcome["exit"] == 0
        table.append([row["method"], "%g" % row["learning_rate"], row["features"], "finished" if finished else "stopped (exit %d)" % outcome["exit"],
                      str(row["steps"]) if finished else str(outcome["stopped_at"] or "?"),
                      outcome["nonfinite"] or outcome.get("error", "none"),
                      "%.4f" % outcome["ndcg_10"] if "ndcg_10" in outcome else ""])
    with open(os.path.join(results, "raw_features.csv"), "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(table)
    lines = [note, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in table]
    atomic_write_text(os.path.join(results, "raw_features.md"), "\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="working directory (log, data directories, runs)")
    parser.add_argument("--results", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    parser.add_argument("--sessions", type=int, default=4000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--annotated", type=int, default=100)
    parser.add_argument("--steps", type=int, default=300, help="ranker updates (and MULTR's simulator cap)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0, help="the methods' seed")
    parser.add_argument("--learning-rates", type=float, nargs="+", default=[0.05, 0.01, 0.002],
                        help="the methods' learning rates (0.05: the study's)")
    parser.add_argument("--log-seed", type=int, default=0)
    parser.add_argument("--main-py", default=None, help="ULTRA's main.py ($ULTRA_MAIN, else beside ultra)")
    args = parser.parse_args(argv)
    main_py = find_main_py(args.main_py)
    log_dir = os.path.join(args.out, "log")
    log = make_log(log_dir, args)
    patterns = os.path.join(os.path.abspath(log_dir), "parts", "part-1_split-*.feather")
    rows, data_dirs = [], {}
    for features, flags in FEATURES.items():
        data_dir = os.path.join(os.path.abspath(args.out), "data_" + ("raw" if flags else "std"))
        assert baidu_convert.main(["--annotations", log.validation_file, "--log_files", patterns, "--out", data_dir,
                                   "--stub_lists", "20"] + flags) == 0
        data_dirs[features] = data_dir
    for method in METHODS:
        for learning_rate in args.learning_rates:
            for features, data_dir in data_dirs.items():
                model_dir = os.path.join(os.path.abspath(args.out), "runs", "%s_lr%g_%s" % (
                    method, learning_rate, "raw" if FEATURES[features] else "std"))
                print("training %s (learning rate %g) on %s features ..." % (method, learning_rate, features), flush=True)
                outcome = train(main_py, data_dir, model_dir, method, learning_rate, args)
                print("  %s" % outcome, flush=True)
                rows.append({"method": method, "learning_rate": learning_rate, "features": features,
                             "steps": args.steps, "outcome": outcome})
    note = ("Generated log (release layout): %d training sessions of %d queries, %d annotated queries (half test), "
            "PBM clicks (examination 1/rank), logger_bias 2, feature_noise 4, log seed %d. main.py, ULTRA's DNN "
            "[512, 256, 128] with norm=none (Adagrad, ULTRA's default optimizer), batch %d, %d updates (MULTR's simulator at most %d "
            "steps), seed %d." % (args.sessions, args.queries, args.annotated, args.log_seed, args.batch_size,
                                  args.steps, args.steps, args.seed))
    write_table(rows, args.results, note)
    atomic_write_text(os.path.join(args.results, "raw_features.json"), json.dumps(
        {"args": vars(args), "rows": rows}, indent=1, default=str) + "\n")
    print(open(os.path.join(args.results, "raw_features.md")).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
