"""Evaluate a ranker trained by ULTRA's main.py on one split of a ULTRA data directory.

The split is read with ``ultra.utils.read_data``, which drops queries with
fewer than two documents or no relevant document; metrics are over the
remaining queries, as in ULTRA's own evaluation, and the number dropped is
reported.  Every document of every remaining query is scored (no cutoff).

Writes into the output directory:

* ``per_query_metrics.csv``: ``qid, ndcg_1, ndcg_3, ndcg_5, ndcg_10, err_1, ..., err_10``
* ``run.trec``: the TREC run file; ``qrels.txt``: the split's labels as qrels
* ``metrics.json``: mean of each metric, number of queries evaluated and dropped

CLI::

    python -m ultra_multr.experiments.evaluate --data_dir DATA --split test \\
        --setting_file settings.json --model_dir MODEL --out OUT [--tag NAME]
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
from dataclasses import dataclass
from typing import Dict, List, Sequence

import numpy as np

from ultra_multr.compat.model_dir import checkpoint_path
from ultra_multr.data.ultra_format import ultra_data_dir
from ultra_multr.files import atomic_write_text
from ultra_multr.files import JsonFileError, read_json
from ultra_multr.metrics import CUTOFFS, metric_names, per_query_metrics
from ultra_multr.experiments.trec import write_qrels, write_run

PER_QUERY_CSV = "per_query_metrics.csv"
RUN_FILE = "run.trec"
QRELS_FILE = "qrels.txt"
METRICS_JSON = "metrics.json"
#: Documents scored per forward pass (bounds memory on large splits).
_SCORE_CHUNK = 32768


@dataclass
class SplitRanking:
    """Scores of every document of the evaluated queries.

    Attributes:
        qids: Q query ids.
        doc_ids: per query, [n_q] document ids in the initial list's order.
        labels: per query, [n_q] graded labels.
        scores: per query, [n_q] model scores.
        n_dropped: queries in the split that ULTRA's reader dropped.
    """

    qids: List[str]
    doc_ids: List[List[str]]
    labels: List[np.ndarray]
    scores: List[np.ndarray]
    n_dropped: int


def load_ranker(settings: dict, model_dir: str, feature_size: int):
    """Build ``settings['ranking_model']`` and load the checkpoint main.py saved.

    Returns:
        The ranking model (a ``torch.nn.Module``) on the CPU, in eval mode.
    """
    import torch

    from ultra_multr.compat.runtime import create_ranking_model

    path = checkpoint_path(model_dir, settings["learning_algorithm"])
    if not os.path.isfile(path):
        raise FileNotFoundError("no checkpoint %s (did training save one?)" % path)
    model = create_ranking_model(settings, feature_size, torch.device("cpu"))
    model.load_state_dict(torch.load(path, map_location="cpu"))
    model.eval()
    return model


def _count_lines(path: str) -> int:
    with open(path) as handle:
        return sum(1 for line in handle if line.strip())


def read_split(data_dir: str, split: str):
    """``ultra.utils.read_data`` of one split (a ULTRA ``Raw_data``)."""
    import ultra

    return ultra.utils.read_data(ultra_data_dir(data_dir), split, None)


def score_split(model, data) -> SplitRanking:
    """Score every document of every query in ``data`` (from :func:`read_split`)."""
    import torch

    from ultra_multr.compat.runtime import score_documents

    features = np.asarray(data.features, dtype=np.float32)
    # Without pad() the lists hold no -1 entries; labels may be shorter only
    # if the label file is, which ULTRA would not notice: we do.
    lists = [np.asarray(indices, dtype=np.int64) for indices in data.initial_list]
    for qid, indices, labels in zip(data.qids, lists, data.labels):
        if len(labels) != indices.size:
            raise ValueError(
                "%s%s: query %s has %d documents but %d labels"
                % (data.data_path, data.file_prefix, qid, indices.size, len(labels))
            )
    flat = np.concatenate(lists) if lists else np.zeros(0, dtype=np.int64)
    flat_scores = np.zeros(flat.size, dtype=np.float64)
    with torch.no_grad():
        for start in range(0, flat.size, _SCORE_CHUNK):
            batch = torch.from_numpy(features[flat[start : start + _SCORE_CHUNK]])
            flat_scores[start : start + batch.shape[0]] = score_documents(model, batch).double().numpy()
    bounds = np.cumsum([0] + [indices.size for indices in lists])
    init_list_file = os.path.join(data.data_path, data.file_prefix, data.file_prefix + ".init_list")
    return SplitRanking(
        qids=list(data.qids),
        doc_ids=[[data.dids[i] for i in indices] for indices in lists],
        labels=[np.asarray(labels, dtype=np.float64) for labels in data.labels],
        scores=[flat_scores[bounds[q] : bounds[q + 1]] for q in range(len(lists))],
        n_dropped=_count_lines(init_list_file) - len(data.qids),
    )


def write_per_query_csv(path: str, qids: Sequence[str], metrics: Dict[str, np.ndarray]) -> None:
    """``qid`` then one column per metric, one row per query, atomically."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    names = list(metrics)
    writer.writerow(["qid"] + names)
    for q, qid in enumerate(qids):
        writer.writerow([qid] + ["%.10g" % metrics[name][q] for name in names])
    atomic_write_text(path, buffer.getvalue())


def read_per_query_csv(path: str) -> Dict[str, Dict[str, float]]:
    """qid -> {metric: value} from a file written by :func:`write_per_query_csv`."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    result: Dict[str, Dict[str, float]] = {}
    for line, row in enumerate(rows, start=2):
        qid = row.pop("qid")
        try:
            result[qid] = {name: float(value) for name, value in row.items()}
        except (TypeError, ValueError):
            raise ValueError("%s line %d: malformed row %r" % (path, line, row)) from None
    return result


def read_max_label(data_dir: str) -> float:
    path = os.path.join(data_dir, "settings.json")
    settings = read_json(path, "data settings")
    if not isinstance(settings, dict) or "max_label" not in settings:
        raise ValueError("%s has no max_label (needed for ERR)" % path)
    return float(settings["max_label"])


def evaluate_run(
    data_dir: str,
    split: str,
    settings: dict,
    model_dir: str,
    out_dir: str,
    tag: str = "ultra_multr",
    cutoffs: Sequence[int] = CUTOFFS,
) -> Dict[str, float]:
    """Score ``split`` with the trained ranker and write the evaluation files.

    Args:
        data_dir: ULTRA data directory (with settings.json).
        split: split prefix, e.g. "test".
        settings: the run's ULTRA settings (as given to main.py).
        model_dir: main.py's ``--model_dir``.
        out_dir: where the files listed in the module docstring go.
        tag: run name for the TREC file.

    Returns:
        The contents of metrics.json.
    """
    max_label = read_max_label(data_dir)
    data = read_split(data_dir, split)
    # data.feature_size already excludes settings.json's removed_feature_ids.
    ranking = score_split(load_ranker(settings, model_dir, data.feature_size), data)
    values = per_query_metrics(ranking.labels, ranking.scores, max_label, cutoffs)
    write_per_query_csv(os.path.join(out_dir, PER_QUERY_CSV), ranking.qids, values)
    write_run(os.path.join(out_dir, RUN_FILE), zip(ranking.qids, ranking.doc_ids, ranking.scores), tag)
    write_qrels(os.path.join(out_dir, QRELS_FILE), zip(ranking.qids, ranking.doc_ids, ranking.labels))
    summary = {name: float(np.mean(values[name])) if ranking.qids else 0.0 for name in metric_names(cutoffs)}
    summary.update(split=split, n_queries=len(ranking.qids), n_dropped_queries=ranking.n_dropped)
    atomic_write_text(os.path.join(out_dir, METRICS_JSON), json.dumps(summary, indent=1) + "\n")
    return summary


def main(argv: Sequence[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", required=True, help="ULTRA data directory")
    parser.add_argument("--split", default="test", help="split prefix (default: test)")
    parser.add_argument("--setting_file", required=True, help="the settings JSON given to main.py")
    parser.add_argument("--model_dir", required=True, help="main.py's --model_dir")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--tag", default="ultra_multr", help="run name in the TREC file")
    args = parser.parse_args(argv)
    try:
        settings = read_json(args.setting_file)
    except JsonFileError as error:
        raise SystemExit("error: %s" % error) from None
    summary = evaluate_run(args.data_dir, args.split, settings, args.model_dir, args.out, args.tag)
    print(" ".join("%s=%s" % (k, ("%.4f" % v) if isinstance(v, float) else v) for k, v in summary.items()))


if __name__ == "__main__":
    main()
