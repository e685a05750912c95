"""The logger guard's calibration table: its statistic and decision on every set the studies use (issue 38).

Usage::

    python studies/logger_guard/run.py --mq2008 ../shared/data/MQ2008 --work WORK_DIR \\
        --out studies/logger_guard/results/calibration

For each set it measures what MULTR's logger guard measures on the training split main.py reads (every list's
first 10 positions, the queries ULTRA keeps): :func:`ultra_multr.components.guards.fit_to_logged_order` at the
guard's seeds ``--seeds`` (MULTR's ``seed``; 0 by default), and applies the guard's rule at MULTR's defaults
(:class:`ultra_multr.components.guards.GuardSettings`).  The sets, written into ``WORK_DIR`` when missing there (a
set is reused only when it was made from the same description):

* MQ2008 folds 1-5 (``--mq2008``: the partitions S1.txt..S5.txt), prepared with the project's recipe at its
  defaults (``ultra-multr-prepare folds``: a Rank SVM on 1 % of the training labels, at least 20 queries);
* the recipe sets of studies/paper_setting: the screen's eight (``SCREENED_RECIPES``) and the grid's sets 1 and
  2 (``quadratic_1_f46`` with seeds 1 and 2);
* the stress sets of studies/headroom (a logger that orders by the label plus noise), seeds 1-3;
* the Baidu-layout logs of studies/baidu with the features-only logger (``pbm_noisy_nonorm_features``) and the
  noisy grade logger (``pbm_noisy_nonorm``), converted with the documentation's arguments: the guard reads the
  converter's train stub, the first 100 sessions with a click of the first click file, so only that file is
  generated (25,000 sessions, drawn exactly as the first file of the study's 100,000);
* web-LETOR-like generated features (:mod:`ultra_multr.generate.web_letor`, 500 features) with the features-only
  Rank SVM logger and the label-aware logger, at 150 training queries (written and read as main.py reads them)
  and 20,000 (prepared in memory: the same lists in the same order, checked against the reader on the 150-query
  sets);
* few queries: seeded samples of 20 and 50 training queries of MQ2008 Fold1, stress_1 and both 150-query web sets
  (below and at ``logger_guard_min_queries``).

Writes ``OUT.csv`` (one row per set and seed) and ``OUT.md`` (one row per set: seed 0's numbers and the decision at
every seed).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import time
from dataclasses import asdict, replace
from typing import Callable, Dict, List, Tuple

import numpy as np
import torch
import ultra

from ultra_multr.click_logs import baidu_convert
from ultra_multr.click_models import PositionBasedModel, graded_click_prob, reciprocal_rank_exam_prob
from ultra_multr.components.guards import GuardSettings, logger_guard_fires
from ultra_multr.data.prepare import REPORT_FILE, PrepareOptions, kept_by_ultra, made_with, prepare_folds
from ultra_multr.feeds.arrays import QueryArrays, query_arrays
from ultra_multr.files import atomic_write_text
from ultra_multr.generate.baidu_log import MAX_LABEL, write_baidu_log
from ultra_multr.generate.ultra_dataset import write_stress_set
from ultra_multr.generate.ultra_recipe import SCREENED_RECIPES, write_recipe_dataset
from ultra_multr.generate.web_letor import WebLetor, prepare_web_letor, write_web_letor_dataset
from ultra_multr.session_budget import SessionLedger

#: The positions the guard reads: main.py's selection_bias_cutoff in every study.
POSITIONS = 10
#: The recipe sets: the screen's eight and the grid's sets 1 and 2 (studies/paper_setting/screen.py --sets 3).
RECIPE_SETS = dict(SCREENED_RECIPES, **{"quadratic_1_f46_set%d" % k: replace(SCREENED_RECIPES["quadratic_1_f46"], seed=k)
                                        for k in (1, 2)})
#: studies/baidu's logs (their results/<name>/recipe.json) less the sessions: the guard reads the first file only.
BAIDU_LOGS = {
    "pbm_noisy_nonorm_features": dict(logger="features"),
    "pbm_noisy_nonorm": dict(logger="grade"),
}
BAIDU_RECIPE = dict(queries=2000, annotated=1000, feature_noise=4.0, logger_bias=2.0, seed=0)
#: studies/baidu/run.py's sessions per click file: the first file is the same in the study's log and here.
BAIDU_SESSIONS_PER_FILE = 25000
WEB_SIZES = (150, 20000)
#: Training queries of the subsamples (below and at logger_guard_min_queries), and the sets they are drawn from.
SUBSAMPLE_SIZES = (20, 50)
LOGGERS = {"rank_svm": "Rank SVM (features only)", "labels": "labels + noise"}


def generated(work: str, name: str, description: Dict, write: Callable[[str], object]) -> str:
    """``work/name``, written by ``write(path)`` unless it holds a set made from the same description
    (``logger_guard_set.json`` beside it)."""
    path = os.path.join(work, name)
    stamp = path.rstrip(os.sep) + ".logger_guard_set.json"
    text = json.dumps(description, sort_keys=True)
    if not (os.path.exists(stamp) and open(stamp).read() == text):
        write(path)
        atomic_write_text(stamp, text)
    return path


def read_training_split(data_dir: str) -> QueryArrays:
    """The training split as MULTR's guard reads it under main.py (``--max_list_cutoff`` 0: the queries ULTRA keeps,
    then the first :data:`POSITIONS` of each list)."""
    return query_arrays(ultra.utils.read_data(data_dir.rstrip("/") + "/", "train", None, 0), POSITIONS)


def six_digits(values: np.ndarray) -> np.ndarray:
    """``values`` rounded to the 6 significant digits a data directory's feature file holds (``%.6g``)."""
    rounded = np.zeros_like(values, dtype=np.float64)
    nonzero = values != 0
    scale = 10.0 ** (np.floor(np.log10(np.abs(values[nonzero]))) - 5)
    rounded[nonzero] = np.round(values[nonzero] / scale) * scale
    return rounded


def lists_in_memory(ranked) -> Tuple[np.ndarray, np.ndarray]:
    """(features [Q, N, F] float32, mask [Q, N] bool) of prepared training lists as :func:`read_training_split`
    would read them written: the queries ULTRA keeps, in order, their first :data:`POSITIONS` documents, the
    features at the files' precision."""
    kept = [query for query in ranked if kept_by_ultra(query)]
    features = np.zeros((len(kept), POSITIONS, kept[0].features.shape[1]), dtype=np.float32)
    mask = np.zeros((len(kept), POSITIONS), dtype=bool)
    for q, query in enumerate(kept):
        shown = min(POSITIONS, len(query.labels))
        features[q, :shown], mask[q, :shown] = six_digits(query.features[:shown]), True
    return features, mask


def in_memory_arrays(features: np.ndarray, mask: np.ndarray) -> QueryArrays:
    """The :class:`QueryArrays` of lists held as arrays (features [Q, N, F], mask [Q, N]), as the guard reads them."""
    n_queries, slots, width = features.shape
    doc_ids = np.where(mask, np.arange(n_queries * slots).reshape(n_queries, slots), -1)
    return QueryArrays(data_set=None, doc_ids=doc_ids, labels=np.zeros(mask.shape, dtype=np.float32), mask=mask,
                       features=features.reshape(n_queries * slots, width))


def subsample(arrays: QueryArrays, size: int) -> QueryArrays:
    """A seeded sample (seed 0) of ``size`` of ``arrays``' queries, in their order."""
    queries = np.sort(np.random.default_rng(0).choice(arrays.n_queries, size=size, replace=False))
    return in_memory_arrays(arrays.list_features(queries), arrays.mask[queries])


def measure(group: str, name: str, arrays: QueryArrays, seeds: List[int], settings: GuardSettings) -> List[Dict]:
    """One row per seed: the guard's numbers and decision at MULTR's defaults, as its ledger records them."""
    rows = []
    for seed in seeds:
        started = time.time()
        ledger = SessionLedger()
        logger_guard_fires(arrays, settings, seed, ledger, "(MULTR would train as DLA.)")
        record = ledger.decisions["logger_guard"]
        gap = record["null_agreement"] - record["agreement"]
        rows.append({"group": group, "set": name, "seed": seed, "training_queries": record["training_queries"],
                     "heldout_pairs": record["heldout_pairs"], "agreement": round(record["agreement"], 4),
                     "null_agreement": round(record["null_agreement"], 4), "null_minus_agreement": round(gap, 4),
                     "null_agreements": " ".join("%.4f" % v for v in record["null_agreements"]),
                     "decision": record["decision"], "seconds": round(time.time() - started, 1)})
        print("%(group)s %(set)s seed %(seed)d: %(training_queries)d queries, agreement %(agreement).3f, null "
              "%(null_agreement).3f: %(decision)s (%(seconds).0f s)" % rows[-1], flush=True)
    return rows


def mq2008_folds(partitions: str, work: str) -> List[Tuple[str, str]]:
    """(name, data dir) of MQ2008 folds 1-5 prepared at the recipe's defaults in ``work/mq2008``."""
    out, options = os.path.join(work, "mq2008"), PrepareOptions()
    folds = [os.path.join(out, "Fold%d" % k) for k in range(1, 6)]
    reports = [os.path.join(fold, REPORT_FILE) for fold in folds]
    def prepared(path: str) -> bool:
        if not os.path.exists(path):
            return False
        with open(path) as handle:
            return made_with(json.load(handle), options)

    if not all(prepared(path) for path in reports):
        prepare_folds(partitions, out, options=options)
    return [("MQ2008 Fold%d" % k, fold) for k, fold in enumerate(folds, 1)]


def baidu_stub(work: str, name: str, logger: Dict) -> str:
    """The converted data directory of the first click file of studies/baidu's log ``name``."""
    recipe = dict(BAIDU_RECIPE, **logger)

    def write(path: str) -> None:
        write_baidu_log(os.path.join(path, "log"), n_queries=recipe["queries"], n_sessions=BAIDU_SESSIONS_PER_FILE,
                        n_test_sessions=0, n_annotated=recipe["annotated"], n_positions=POSITIONS,
                        sessions_per_file=BAIDU_SESSIONS_PER_FILE,
                        click_model=PositionBasedModel(graded_click_prob(0.1, MAX_LABEL),
                                                       reciprocal_rank_exam_prob(1.0, POSITIONS)),
                        seed=recipe["seed"], logger_bias=recipe["logger_bias"], feature_noise=recipe["feature_noise"],
                        logger=recipe["logger"])
        parts = os.path.join(path, "log", "parts")
        baidu_convert.convert(os.path.join(parts, "validation.feather"), [os.path.join(parts, "part-1_split-*.feather")],
                              os.path.join(path, "data"), features="lexical")

    return os.path.join(generated(work, "baidu_" + name, recipe, write), "data")


def table(rows: List[Dict], seeds: List[int]) -> str:
    """Markdown: one row per set, seed 0's (the first seed's) numbers and the decision at every seed."""
    by_set: Dict[Tuple[str, str], List[Dict]] = {}
    for row in rows:
        by_set.setdefault((row["group"], row["set"]), []).append(row)
    lines = ["| group | set | training queries | agreement | null agreement | null - agreement | decision | "
             "decisions at seeds %s | null - agreement over seeds |" % ", ".join(map(str, seeds)),
             "|---|---|---|---|---|---|---|---|---|"]
    for (group, name), runs in by_set.items():
        first, gaps = runs[0], [run["null_minus_agreement"] for run in runs]
        lines.append("| %s | %s | %d | %.3f | %.3f | %+.3f | %s | %s | %+.3f to %+.3f |" % (
            group, name, first["training_queries"], first["agreement"], first["null_agreement"],
            first["null_minus_agreement"], first["decision"], ", ".join(run["decision"] for run in runs),
            min(gaps), max(gaps)))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mq2008", required=True, help="the MQ2008 partitions S1.txt..S5.txt (LETOR 4.0)")
    parser.add_argument("--work", required=True, help="where the data sets are prepared and generated")
    parser.add_argument("--out", required=True, help="output path without extension (.csv and .md are written)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="the guard's seeds (MULTR's seed)")
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(args.mq2008, "S1.txt")):
        parser.error("--mq2008 %s holds no S1.txt: give the folder of MQ2008's partitions S1.txt..S5.txt" % args.mq2008)
    torch.set_num_threads(1)  # main.py's guard as the runner runs it (OMP_NUM_THREADS=1)
    settings = GuardSettings()
    rows: List[Dict] = []
    few: Dict[str, QueryArrays] = {}
    for name, data_dir in mq2008_folds(args.mq2008, args.work):
        arrays = read_training_split(data_dir)
        rows += measure("MQ2008 (prepare folds, defaults)", name, arrays, args.seeds, settings)
        if name.endswith("Fold1"):
            few[name] = arrays
    for name, recipe in RECIPE_SETS.items():
        path = generated(args.work, "recipe_" + name, asdict(recipe), lambda p, r=recipe: write_recipe_dataset(p, r))
        rows += measure("recipe (studies/paper_setting)", name, read_training_split(path), args.seeds, settings)
    for seed in (1, 2, 3):
        path = os.path.join(args.work, "stress_%d" % seed)
        write_stress_set(path, seed)
        arrays = read_training_split(path)
        rows += measure("stress (studies/headroom)", "stress_%d" % seed, arrays, args.seeds, settings)
        if seed == 1:
            few["stress_1"] = arrays
    for name, logger in BAIDU_LOGS.items():
        rows += measure("Baidu layout (studies/baidu)", "%s (%s logger)" % (name, logger["logger"]),
                        read_training_split(baidu_stub(args.work, name, logger)), args.seeds, settings)
    for size in WEB_SIZES:
        for logger, label in LOGGERS.items():
            spec = WebLetor(train_queries=size, logger=logger)
            name = "web_letor %d queries, %s" % (size, label)
            arrays = in_memory_arrays(*lists_in_memory(prepare_web_letor(spec).ranked["train"]))
            if size == WEB_SIZES[0]:  # written too: the lists in memory are those main.py reads
                path = generated(args.work, "web_letor_%d_%s" % (size, logger), asdict(spec),
                                 lambda p, s=spec: write_web_letor_dataset(p, s))
                read, queries = read_training_split(path), np.arange(arrays.n_queries)
                if not (np.array_equal(read.mask, arrays.mask)
                        and np.array_equal(read.list_features(queries), arrays.list_features(queries))):
                    raise SystemExit("%s: the lists prepared in memory differ from those main.py reads" % path)
            rows += measure("web_letor (generated)", name, arrays, args.seeds, settings)
            if size == WEB_SIZES[0]:
                few[name] = arrays
    for size in SUBSAMPLE_SIZES:
        for name, arrays in few.items():
            rows += measure("few queries (a seeded sample)", "%s, %d of its queries" % (name, size),
                            subsample(arrays, size), args.seeds, settings)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(args.out + ".csv", buffer.getvalue())
    note = ("The logger guard's statistic on the training split MULTR reads, and its decision at MULTR's defaults "
            "(logger_guard_margin=%g, logger_guard_min_queries=%d); written by `studies/logger_guard/run.py`."
            % (settings.logger_guard_margin, settings.logger_guard_min_queries))
    atomic_write_text(args.out + ".md", note + "\n\n" + table(rows, args.seeds) + "\n")
    print(table(rows, args.seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
