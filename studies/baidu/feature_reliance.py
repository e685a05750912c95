"""How much the Baidu study's trained rankers rank by the logging ranker's popularity feature (studies/baidu/README.md).

    python studies/baidu/feature_reliance.py --study out/baidu_pbm_noisy [--study ...] --out studies/baidu/results

For every finished run of each study (``studies/baidu/run.py``), on the annotated test queries: the mean
within-query Pearson correlation of the ranker's scores with the popularity feature
(:data:`ultra_multr.generate.baidu_log.LOGGER_FEATURE`, unrelated to the grade there) and with the grade, and nDCG@10
with that feature as it is against with it set to its mean over the test documents (what ranking by it costs or
gains).  A ranker that learned position bias as relevance ranks by the popularity; one that did not, ignores it.
Per study also the correlation of the popularity feature with the grade over the annotated documents, raw and
after a per-document layer normalisation of the 12 features (what ULTRA's DNN does to its input with its default
``norm="layer"``: each feature relative to the document's others).
Writes ``feature_reliance.md`` and ``.csv`` (per method: mean over runs).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Dict, List

import numpy as np

from ultra_multr.experiments.row_tables import markdown_lines, write_csv
from ultra_multr.files import atomic_write_text
from ultra_multr.experiments.aggregate import finished_run_dirs
from ultra_multr.experiments.evaluate import load_ranker
from ultra_multr.files import read_json
from ultra_multr.click_logs import baidu
from ultra_multr.click_logs import baidu_schema as schema
from ultra_multr.click_logs.baidu_convert import CONVERSION_JSON, valid_queries
from ultra_multr.click_logs.baidu_evaluate import baidu_metrics, score_annotations
from ultra_multr.generate.baidu_log import LOGGER_FEATURE


def _within_query_correlation(scores: np.ndarray, values: np.ndarray, mask: np.ndarray) -> float:
    """Mean over queries of Pearson(scores, values) among the query's documents (queries where both vary)."""
    found = []
    for s, v in zip(scores, np.where(mask, values, np.nan)):
        keep = ~np.isnan(v)
        if keep.sum() > 2 and np.std(s[keep]) > 0 and np.std(v[keep]) > 0:
            found.append(np.corrcoef(s[keep], v[keep])[0, 1])
    return float(np.mean(found))


def grade_correlations(data_dir: str) -> Dict[str, float]:
    """Pearson correlation of the popularity feature with the grade over every annotated document: raw, and
    after standardising each document's features across its 12 features (a layer norm without its affine part)."""
    record = read_json(os.path.join(data_dir, CONVERSION_JSON), "Baidu-ULTR conversion record")
    sessions = baidu.read_sessions(record["annotations"], "lexical", None, record["log1p_lexical"], "annotations")
    features, grades = sessions.features[sessions.mask], sessions.clicks[sessions.mask]
    normalised = (features - features.mean(1, keepdims=True)) / features.std(1, keepdims=True)
    column = schema.LEXICAL_FEATURES.index(LOGGER_FEATURE)
    return {"raw": float(np.corrcoef(features[:, column], grades)[0, 1]),
            "layer_normalised": float(np.corrcoef(normalised[:, column], grades)[0, 1])}


def reliance(run_dir: str, data_dir: str) -> Dict[str, float]:
    """The numbers of the module docstring for one finished run."""
    record = read_json(os.path.join(data_dir, CONVERSION_JSON), "Baidu-ULTR conversion record")
    if record["features"] != "lexical":
        raise ValueError("%s: features=%s; the popularity feature is lexical" % (data_dir, record["features"]))
    sessions = baidu.read_sessions(record["annotations"], "lexical", None, record["log1p_lexical"], "annotations")
    test = ~valid_queries(sessions.query_md5, record["valid_share"], record["seed"])
    settings = read_json(os.path.join(run_dir, "settings.json"), "run settings")
    model = load_ranker(settings, os.path.join(run_dir, "model"), baidu.feature_size("lexical"))
    column = schema.LEXICAL_FEATURES.index(LOGGER_FEATURE)
    mask = sessions.mask[test]
    scores = score_annotations(model, sessions)[test]
    flattened = dataclasses.replace(sessions, features=sessions.features.copy())
    flattened.features[..., column] = sessions.features[..., column][sessions.mask].mean()
    flat_scores = score_annotations(model, flattened)[test]
    labels = sessions.clicks[test]

    def ndcg(values: np.ndarray) -> float:
        return float(np.mean([baidu_metrics(labels[q, mask[q]], values[q, mask[q]])["ndcg_10"] for q in range(len(mask))]))

    return {"corr_popularity": _within_query_correlation(scores, sessions.features[test][..., column], mask),
            "corr_grade": _within_query_correlation(scores, labels, mask),
            "ndcg_10": ndcg(scores), "ndcg_10_popularity_flattened": ndcg(flat_scores)}


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", action="append", required=True, help="a studies/baidu/run.py --out folder (repeatable)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    rows, data_rows = [], []
    for study in args.study:
        data_rows.append((os.path.basename(os.path.normpath(study)), grade_correlations(os.path.join(study, "data"))))
        per_method: Dict[str, List[Dict[str, float]]] = {}
        for run_dir in finished_run_dirs(os.path.join(study, "runs")):
            with open(os.path.join(run_dir, "run.json")) as handle:
                method = json.load(handle)["method"]
            per_method.setdefault(method, []).append(reliance(run_dir, os.path.join(study, "data")))
        for method, found in sorted(per_method.items()):
            rows.append({"study": os.path.basename(os.path.normpath(study)), "method": method, "runs": len(found),
                         **{k: round(float(np.mean([f[k] for f in found])), 4) for k in found[0]}})
    os.makedirs(args.out, exist_ok=True)
    write_csv(os.path.join(args.out, "feature_reliance.csv"), rows)
    lines = ["Annotated test queries; mean over runs of the within-query Pearson correlation of the ranker's scores "
             "with the popularity feature (%s) and with the grade, and nDCG@10 as trained and with the popularity "
             "feature set to its mean (`python studies/baidu/feature_reliance.py %s`)."
             % (LOGGER_FEATURE, " ".join(sys.argv[1:]) if argv is None else " ".join(argv)), ""]
    lines += markdown_lines(rows)
    lines += ["", "Correlation of the popularity feature with the grade over the annotated documents, raw and after a "
              "per-document layer normalisation of the 12 lexical features (as ULTRA's DNN normalises its input):", "",
              "| study | raw | layer-normalised |", "|---|---|---|"]
    lines += ["| %s | %.3f | %.3f |" % (name, c["raw"], c["layer_normalised"]) for name, c in data_rows]
    atomic_write_text(os.path.join(args.out, "feature_reliance.md"), "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
