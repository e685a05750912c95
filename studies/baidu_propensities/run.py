"""Position bias you can look at: examination curves from a log in the Baidu-ULTR release's layout (issue 27, item 4).

    python studies/baidu_propensities/run.py --log-dir LOG --out WORK [--generate 4000] [--steps 300]
        [--simulator-steps 300] [--batch-size 64] [--published studies/baidu_propensities/published_global_all_pairs.csv]
        [--model-dirs DLA=DIR MULTR=DIR] [--results studies/baidu_propensities/results]

One figure and one table, every curve relative to position 1, positions 1-N (N = 10):

* ``AllPairs`` and ``AdjacentChain``: ultr-bias-toolkit's intervention-harvesting estimators
  (``AllPairsEstimator``, ``AdjacentChainEstimator``, the toolkit's defaults) on the training click files
  ``LOG/parts/part-[123]_split-*.feather``, one row per logged document (``query_md5`` as the query,
  ``url_md5`` as the document, as ultr-reproducibility's ``propensity_estimation.py`` calls them; logged
  ``position``, ``click``), positions up to N;
* ``DLA`` and ``MULTR``: the propensity curve each last logged (``propensity/position_XX`` in
  ``<model_dir>/train_log``) after a short main.py run on the log converted by ``ultra-multr-baidu-convert``
  (ULTRA's DNN [64, 32] with its default layer normalisation, ``learning_rate=0.05``, ``--steps`` updates of
  ``--batch-size`` sessions; MULTR's simulator at most ``--simulator-steps``), or the model directories of
  earlier runs (``--model-dirs``);
* ``published AllPairs (Baidu-ULTR)``: the global AllPairs curve that philipphager/ultr-reproducibility
  published for the real release (``--published``, a CSV ``position,<value>``: the committed copy holds the
  numbers of ``propensities/global_all_pairs.csv`` at commit 78d8060f05512047939ab30cb54213c5553f9fad);
* ``true``: on a generated log, the examination probabilities the clicks were drawn with
  (``LOG/generated_recipe.json``, written by ``--generate``).

``--generate S`` first writes a generated log of S training sessions into ``--log-dir`` (PBM clicks,
examination 1/rank, :func:`ultra_multr.generate.baidu_log.write_baidu_log`), unless one of the same recipe is there.
Writes ``propensities.csv`` and ``propensities.png`` into ``--results``.
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import sys
from typing import Dict, Optional

import numpy as np

from ultra_multr.files import atomic_write_file, atomic_write_text
from ultra_multr.click_logs import baidu_convert
from ultra_multr.experiments.runner.runs import find_main_py
from ultra_multr.click_logs.propensity_check import ESTIMATORS, harvested_examination, learned_propensities

HERE = os.path.dirname(os.path.abspath(__file__))
N_POSITIONS = 10
RECIPE_JSON = "generated_recipe.json"
PUBLISHED_SOURCE = ("philipphager/ultr-reproducibility @ 78d8060f05512047939ab30cb54213c5553f9fad, "
                    "propensities/global_all_pairs.csv")
ESTIMATOR_LABELS = {"all_pairs": "AllPairs", "adjacent_chain": "AdjacentChain"}
METHODS = {"DLA": "ultra_multr.DLA", "MULTR": "ultra_multr.MULTR"}
PUBLISHED = "published AllPairs (Baidu-ULTR)"


def train_files(log_dir: str):
    files = sorted(glob.glob(os.path.join(log_dir, "parts", "part-[123]_split-*.feather")))
    if not files:
        raise SystemExit("%s/parts holds no part-[123]_split-*.feather click file" % log_dir)
    return files


def generate(log_dir: str, sessions: int, seed: int) -> None:
    """A generated log of ``sessions`` training sessions with PBM clicks (examination 1/rank) in ``log_dir``."""
    from ultra_multr.click_models import PositionBasedModel, graded_click_prob, reciprocal_rank_exam_prob
    from ultra_multr.generate.baidu_log import MAX_LABEL, write_baidu_log

    exam = [float(p) for p in reciprocal_rank_exam_prob(1.0, N_POSITIONS)]
    recipe = {"sessions": sessions, "queries": max(sessions // 20, 20), "annotated": 100, "seed": seed,
              "click_model": "pbm", "exam_prob": exam}
    path = os.path.join(log_dir, RECIPE_JSON)
    if os.path.isfile(path):
        with open(path) as handle:
            if json.load(handle) == recipe:
                return
        raise SystemExit("%s holds a log of another recipe; choose another --log-dir" % log_dir)
    write_baidu_log(log_dir, n_queries=recipe["queries"], n_sessions=sessions, n_test_sessions=500,
                    n_annotated=recipe["annotated"], n_positions=N_POSITIONS, sessions_per_file=max(sessions // 2, 1),
                    click_model=PositionBasedModel(graded_click_prob(0.1, MAX_LABEL), np.array(exam)), seed=seed)
    atomic_write_text(path, json.dumps(recipe, indent=1) + "\n")


def click_frame(paths, n_positions: int = N_POSITIONS):
    """One row per logged document at positions 1..n of the click files: query_id (query_md5), doc_id
    (url_md5), position, click (the frame ultr-bias-toolkit's estimators read)."""
    import pandas as pd
    from pyarrow import feather

    frames = []
    for path in paths:
        table = feather.read_table(path, columns=["query_md5", "url_md5", "position", "click"]).to_pandas()
        frames.append(table[table.position <= n_positions])
    frame = pd.concat(frames, ignore_index=True)
    return frame.rename(columns={"query_md5": "query_id", "url_md5": "doc_id"}).astype(
        {"position": "int64", "click": "int64"})


def read_curve(path: str, n_positions: int = N_POSITIONS) -> np.ndarray:
    """[n] the second column of a ``position,<value>`` CSV at positions 1..n, relative to position 1."""
    values = {}
    with open(path) as handle:
        for row in csv.DictReader(handle):
            values[int(row["position"])] = float(row[[k for k in row if k != "position"][0]])
    curve = np.array([values[k] for k in range(1, n_positions + 1)])
    return curve / curve[0]


def train(main_py: str, data_dir: str, model_dir: str, method: str, args) -> str:
    """Train ``method`` through main.py; its model dir (main.py's output in ``main_py.log`` there).

    Raises:
        RuntimeError: main.py failed.
    """
    hparams = "learning_rate=0.05,seed=%d,log_every=50" % args.seed
    if method == "MULTR":  # logger_guard=none: the committed curves were made before the guard was MULTR's default
        hparams += ",simulator_steps=%d,simulator_batch_size=%d,logger_guard=none" % (args.simulator_steps,
                                                                                       args.batch_size)
    _, done = baidu_convert.train_through_main_py(
        main_py, data_dir, model_dir, METHODS[method], hparams, "hidden_layer_sizes=[64,32]", args.batch_size,
        args.steps, 100, N_POSITIONS,
    )
    if done.returncode != 0:
        raise RuntimeError("main.py training %s failed (exit %d): see %s"
                           % (method, done.returncode, os.path.join(model_dir, "main_py.log")))
    return model_dir


def curves_table(curves: Dict[str, np.ndarray], truth: Optional[np.ndarray]) -> list:
    """Rows ``[position, true?, curve...]`` then, with a truth, each curve's largest absolute error."""
    names = list(curves)
    n = len(next(iter(curves.values())))
    rows = [["position"] + (["true"] if truth is not None else []) + names]
    for k in range(n):
        rows.append([k + 1] + ([truth[k]] if truth is not None else []) + [curves[name][k] for name in names])
    if truth is not None:
        rows.append(["max abs error vs true", 0.0] + [float(np.max(np.abs(curves[name] - truth))) for name in names])
    return rows


def write_results(rows: list, results: str, note: str) -> Dict[str, str]:
    os.makedirs(results, exist_ok=True)
    paths = {kind: os.path.join(results, "propensities." + kind) for kind in ("csv", "png")}

    def write_csv(tmp: str) -> None:
        with open(tmp, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(rows[0])
            writer.writerows([[row[0]] + ["%.4f" % v for v in row[1:]] for row in rows[1:]])

    atomic_write_file(paths["csv"], write_csv)
    atomic_write_file(paths["png"], lambda tmp: plot(rows, tmp, note))
    return paths


def plot(rows: list, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    header, body = rows[0], [row for row in rows[1:] if isinstance(row[0], int)]
    positions = [row[0] for row in body]
    figure, axis = plt.subplots(figsize=(7, 4.5))
    styles = {"true": dict(color="k", linewidth=2.5), PUBLISHED: dict(color="tab:gray", linestyle=":", marker="x")}
    for column, name in enumerate(header[1:], 1):
        style = styles.get(name, dict(linestyle="--", marker="osd^v"[column % 5]))
        axis.plot(positions, [row[column] for row in body], label=name, **style)
    axis.set_xlabel("position")
    axis.set_ylabel("examination relative to position 1")
    axis.set_xticks(positions)
    axis.set_title(title, fontsize=8)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=120)
    plt.close(figure)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--log-dir", required=True, help="a log in the release's layout (LOG/parts/...)")
    parser.add_argument("--out", required=True, help="working directory (data directory, runs)")
    parser.add_argument("--results", default=os.path.join(HERE, "results"))
    parser.add_argument("--generate", type=int, default=0, help="first write a generated log of this many sessions")
    parser.add_argument("--published", default=os.path.join(HERE, "published_global_all_pairs.csv"))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--simulator-steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0, help="the generated log's and the methods' seed")
    parser.add_argument("--model-dirs", nargs="*", default=None,
                        help="METHOD=DIR of earlier runs to read instead of training (none: no learned curves)")
    parser.add_argument("--main-py", default=None, help="ULTRA's main.py ($ULTRA_MAIN, else beside ultra)")
    args = parser.parse_args(argv)
    if args.generate:
        generate(args.log_dir, args.generate, args.seed)
    files = train_files(args.log_dir)
    frame = click_frame(files)
    curves = {ESTIMATOR_LABELS[name]: harvested_examination(frame, name, N_POSITIONS) for name in ESTIMATORS}
    if args.model_dirs is None:
        main_py = find_main_py(args.main_py)
        data_dir = os.path.join(os.path.abspath(args.out), "data")
        annotations = os.path.join(args.log_dir, "parts", "validation.feather")
        if baidu_convert.main(["--annotations", annotations, "--log_files", ";".join(files), "--out", data_dir,
                               "--stub_lists", "20"]) != 0:
            raise SystemExit("conversion failed")
        model_dirs = {m: train(main_py, data_dir, os.path.join(os.path.abspath(args.out), "runs", m), m, args)
                      for m in METHODS}
    else:
        model_dirs = dict(item.split("=", 1) for item in args.model_dirs)
    for method, model_dir in model_dirs.items():
        curves[method] = learned_propensities(model_dir)[:N_POSITIONS]
    if args.published:
        curves[PUBLISHED] = read_curve(args.published)
    truth = None
    recipe_path = os.path.join(args.log_dir, RECIPE_JSON)
    if os.path.isfile(recipe_path):
        with open(recipe_path) as handle:
            exam = np.array(json.load(handle)["exam_prob"][:N_POSITIONS])
        truth = exam / exam[0]
    rows = curves_table(curves, truth)
    note = "%s: %d documents logged at positions 1-%d%s" % (
        "generated log (PBM, examination 1/rank)" if truth is not None else os.path.basename(os.path.abspath(args.log_dir)),
        len(frame), N_POSITIONS, "" if not model_dirs else "; DLA/MULTR: %d updates" % args.steps)
    paths = write_results(rows, args.results, note)
    atomic_write_text(os.path.join(args.results, "propensities.json"), json.dumps({
        "log_dir": os.path.abspath(args.log_dir), "click_files": files, "documents": len(frame),
        "args": vars(args), "published_source": PUBLISHED_SOURCE if args.published else None,
        "curves": {name: list(map(float, curve)) for name, curve in curves.items()},
        "true": None if truth is None else list(map(float, truth))}, indent=1) + "\n")
    with open(paths["csv"]) as handle:
        print(handle.read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
