"""A ranker trained by main.py on a Baidu-ULTR log, evaluated as the Baidu-ULTR benchmark reports it.

DCG@1/3/5/10, nDCG@10 and MRR@10 (:mod:`ultra_multr.metrics`:
gain ``2^y - 1``, discount ``1 / log2(rank + 1)``; MRR: first document with
label >= 1) on the annotated queries of one split, every document of a query
scored, no query dropped (a query without a relevant document scores 0 on
nDCG and MRR).  The annotations are read from the feather file the
converter recorded (``baidu_conversion.json`` of the data directory), with
the same features, scaling and valid/test split (protocol ``reproducibility``:
test is every annotated query, and there is no annotated valid split), and
standardised with the statistics stored with the model
(``<model_dir>/feature_standardization.json``, else the data directory's:
:func:`ultra_multr.click_logs.standardize.stored_with_model`).

``python -m ultra_multr.click_logs.baidu_evaluate --data_dir D --setting_file S --model_dir M --out O [--split test]``
writes ``O/per_query_metrics.csv`` and ``O/metrics.json``.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Dict, Sequence

import numpy as np

from ultra_multr.files import atomic_write_text
from ultra_multr.experiments.evaluate import METRICS_JSON, PER_QUERY_CSV, load_ranker, write_per_query_csv
from ultra_multr.files import read_json
from ultra_multr.metrics import dcg_at_k, mrr_at_k, ndcg_at_k
from ultra_multr.click_logs import baidu, standardize
from ultra_multr.click_logs.baidu_convert import CONVERSION_JSON, valid_queries

#: The benchmark's metrics (Hager et al., SIGIR 2024), in report order.
BAIDU_METRICS = ("dcg_1", "dcg_3", "dcg_5", "dcg_10", "ndcg_10", "mrr_10")
SCORE_CHUNK = 32768


def baidu_metrics(labels: np.ndarray, scores: np.ndarray) -> Dict[str, float]:
    """:data:`BAIDU_METRICS` of one query. labels, scores: [n]."""
    values = {"dcg_%d" % k: dcg_at_k(labels, scores, k) for k in (1, 3, 5, 10)}
    values.update(ndcg_10=ndcg_at_k(labels, scores, 10), mrr_10=mrr_at_k(labels, scores, 10))
    return values


def score_annotations(model, sessions: baidu.Sessions) -> np.ndarray:
    """[S, N] scores of every annotated document (0 at padding) by a ULTRA ranking model."""
    import torch

    from ultra_multr.compat.runtime import score_documents

    documents = sessions.features[sessions.mask]
    flat = np.zeros(len(documents), dtype=np.float64)
    with torch.no_grad():
        for start in range(0, len(documents), SCORE_CHUNK):
            flat[start:start + SCORE_CHUNK] = score_documents(
                model, torch.from_numpy(documents[start:start + SCORE_CHUNK])).double().numpy()
    scores = np.zeros(sessions.mask.shape, dtype=np.float64)
    scores[sessions.mask] = flat
    return scores


def evaluate(data_dir: str, settings: dict, model_dir: str, out_dir: str, split: str = "test") -> Dict:
    """Score the annotated queries of ``split`` ("valid" or "test") and write the files; returns metrics.json.

    Raises:
        ValueError: ``split`` is neither valid nor test, or the data directory has no ``baidu_conversion.json``.
    """
    if split not in ("valid", "test"):
        raise ValueError("split must be valid or test, got %r" % split)
    record_path = os.path.join(data_dir, CONVERSION_JSON)
    if not os.path.isfile(record_path):
        raise ValueError("%s is missing: convert the annotations with `python -m ultra_multr.click_logs.baidu_convert`"
                         % record_path)
    record = read_json(record_path, "Baidu-ULTR conversion record")
    sessions = baidu.read_sessions(record["annotations"], record["features"], None, record["log1p_lexical"],
                                   "annotations")
    stats = standardize.stored_with_model(model_dir, data_dir)
    if stats is not None:
        sessions = stats.apply_sessions(sessions)
    if record.get("protocol", "annotations") == "reproducibility":
        if split == "valid":
            raise ValueError("%s was converted with --protocol reproducibility: valid/ holds held-out click sessions, "
                             "and every annotated query is in test" % data_dir)
        rows = np.arange(len(sessions))
    else:
        rows = np.flatnonzero(valid_queries(sessions.query_md5, record["valid_share"], record["seed"]) == (split == "valid"))
    scores = score_annotations(load_ranker(settings, model_dir, baidu.feature_size(record["features"])), sessions)
    per_query = [baidu_metrics(sessions.clicks[r, sessions.mask[r]], scores[r, sessions.mask[r]]) for r in rows]
    table = {name: np.array([values[name] for values in per_query]) for name in BAIDU_METRICS}
    write_per_query_csv(os.path.join(out_dir, PER_QUERY_CSV), [str(q) for q in sessions.query_md5[rows]], table)
    summary = {name: float(np.mean(table[name])) if len(rows) else 0.0 for name in BAIDU_METRICS}
    summary.update(split=split, n_queries=int(len(rows)), annotations=record["annotations"],
                   protocol=record.get("protocol", "annotations"), standardized=stats is not None)
    atomic_write_text(os.path.join(out_dir, METRICS_JSON), json.dumps(summary, indent=1) + "\n")
    return summary


def main(argv: Sequence[str] = None) -> None:
    """Console script ``ultra-multr-baidu-evaluate``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", required=True, help="the directory baidu_convert wrote")
    parser.add_argument("--setting_file", required=True, help="the settings JSON given to main.py")
    parser.add_argument("--model_dir", required=True, help="main.py's --model_dir")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--split", default="test", choices=("valid", "test"))
    args = parser.parse_args(argv)
    summary = evaluate(args.data_dir, read_json(args.setting_file), args.model_dir, args.out, args.split)
    print(" ".join("%s=%s" % (k, ("%.4f" % v) if isinstance(v, float) else v) for k, v in summary.items()))


if __name__ == "__main__":
    main()
