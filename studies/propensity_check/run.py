"""Propensities learned by DLA and MULTR beside intervention harvesting, on a generated log with a known PBM curve.

Usage::

    nice -n 10 python studies/propensity_check/run.py --out studies/propensity_check/results \\
        [--queries 100] [--sessions 50000] [--steps 300] [--simulator-steps 200] [--pilot-steps 50] [--seed 0]

1. Generates a click log (:func:`ultra_multr.generate.ultre_log.pbm_session_log`):
   each session shows its query's top 10 with randomised adjacent swaps, and
   a position-based model with examination 1/k at position k clicks.
2. Writes it as a ULTRE-layout data directory (``<work>/data``) and trains DLA
   and MULTR on it through ULTRA's main.py (``--click_model_dir pbm/``,
   ``settings/ultre/multr.json`` with a [64, 32] ranker; MULTR's
   ``rerank_weight=auto`` pilot shortened to ``--pilot-steps``), each run in
   ``<work>/<method>`` (``--work``, default ``<out>/work``).
3. Estimates the examination curve from the log alone with ultr-bias-toolkit's
   AdjacentChainEstimator and AllPairsEstimator (optional extra ``bias``).
4. Writes ``<out>/propensities.md``, ``.csv`` and ``.png``: per position the
   true curve, the two estimators' and what DLA and MULTR learned, all
   relative to position 1, with each curve's largest absolute error.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

from ultra_multr.click_logs.propensity_check import (
    ESTIMATORS, harvested_examination, learned_propensities, sessions_frame, write_table,
)
from ultra_multr.experiments.runner.runs import find_main_py
from ultra_multr.generate.ultre_log import pbm_session_log, write_ultre_dataset

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

METHODS = {
    "DLA": ("ultra_multr.DLA", ""),
    # logger_guard=none: the study compares what MULTR's simulator-trained ranker learns (the guard, MULTR's default
    # since, would leave DLA's losses where it fires)
    "MULTR": ("ultra_multr.MULTR",
              "simulator_steps={simulator_steps},rerank_pilot_steps={pilot_steps},logger_guard=none"),
}


def train(method: str, data_dir: str, out: str, args: argparse.Namespace) -> str:
    """Train one method through main.py on the ULTRE data; returns its model dir (rebuilt every time)."""
    algorithm, hparams = METHODS[method]
    run_dir = os.path.join(out, method)
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    with open(os.path.join(REPO, "settings", "ultre", "multr.json")) as handle:
        settings = json.load(handle)
    hparams = ",".join(filter(None, [hparams.format(simulator_steps=args.simulator_steps, pilot_steps=args.pilot_steps), "seed=%d" % args.seed,
                                     "log_every=100"]))
    settings.update(learning_algorithm=algorithm, learning_algorithm_hparams=hparams,
                    ranking_model_hparams="hidden_layer_sizes=[64,32]")
    settings_path = os.path.join(run_dir, "settings.json")
    with open(settings_path, "w") as handle:
        json.dump(settings, handle, indent=1)
    model_dir = os.path.join(run_dir, "model")
    command = [sys.executable, find_main_py(), "--setting_file", settings_path, "--data_dir", data_dir,
               "--click_model_dir", "pbm/", "--model_dir", model_dir, "--output_dir", model_dir + "/",
               "--batch_size", "256", "--selection_bias_cutoff", "10", "--max_train_iteration", str(args.steps),
               "--steps_per_checkpoint", "100"]
    with open(os.path.join(run_dir, "main.log"), "w") as log:
        print("training %s: %s" % (method, " ".join(command)), flush=True)
        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True,
                       env=dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", "")))
    return model_dir


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(REPO, "studies", "propensity_check", "results"))
    parser.add_argument("--work", help="generated data and the runs (default: <out>/work)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--sessions", type=int, default=50000)
    parser.add_argument("--steps", type=int, default=300, help="ranker steps of DLA and MULTR")
    parser.add_argument("--simulator-steps", type=int, default=200)
    parser.add_argument("--pilot-steps", type=int, default=50, help="MULTR's rerank_weight=auto pilot (default 200)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    log = pbm_session_log(args.queries, args.sessions, seed=args.seed)
    work = args.work or os.path.join(args.out, "work")
    data_dir = os.path.join(work, "data")
    shutil.rmtree(data_dir, ignore_errors=True)
    write_ultre_dataset(data_dir, log, click_model_dir="pbm/", eval_queries=50, seed=args.seed)
    frame = sessions_frame(log)
    curves = {name: harvested_examination(frame, name, log.n_positions) for name in ESTIMATORS}
    for method in METHODS:
        curves[method] = learned_propensities(train(method, os.path.join(data_dir, ""), work, args))
    note = ("Generated log: %d queries, %d sessions, top %d with randomised adjacent swaps, PBM clicks with "
            "examination 1/k and click probability %s by label 0-4 (seed %d). DLA and MULTR: %d ranker steps of "
            "256 sessions through main.py (MULTR: %d simulator steps, rerank_weight=auto with a %d-step pilot); their last "
            "logged propensity curve. "
            "All curves relative to position 1. Command: `nice -n 10 python studies/propensity_check/run.py --queries %d "
            "--sessions %d --steps %d --simulator-steps %d --pilot-steps %d --seed %d`."
            % (args.queries, args.sessions, log.n_positions, "[%s]" % ", ".join("%g" % p for p in log.click_prob), args.seed, args.steps,
               args.simulator_steps, args.pilot_steps, args.queries, args.sessions, args.steps, args.simulator_steps,
               args.pilot_steps, args.seed))
    paths = write_table(curves, log.exam_prob / log.exam_prob[0], args.out, note)
    shutil.rmtree(data_dir)  # regenerated from the seed; the runs' logs stay
    with open(paths["md"]) as handle:
        print(handle.read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
