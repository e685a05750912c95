"""ultra_multr.experiments.evaluate: a ranker checkpoint's per-query metrics and TREC run."""
import numpy as np
import pytest
from conftest import require_ultra

from ultra_multr.metrics import metric_names, query_metrics

METRICS = metric_names()


def test_evaluate_checkpoint_writes_consistent_outputs(tmp_path):
    require_ultra()
    import torch

    from ultra_multr.compat.runtime import create_ranking_model, score_documents
    from ultra_multr.generate.ultra_dataset import iter_synthetic_queries
    from ultra_multr.data.ultra_format import write_settings, write_split
    from ultra_multr.experiments.evaluate import evaluate_run, read_per_query_csv

    queries = list(iter_synthetic_queries(8, n_features=6, seed=5))
    queries[3].labels[:] = 0.0  # ULTRA's reader drops it
    write_split(str(tmp_path / "data"), "test", queries)
    write_settings(str(tmp_path / "data"), 6, 4)
    settings = {"ranking_model": "ultra.ranking_model.DNN", "ranking_model_hparams": "hidden_layer_sizes=[8]",
                "learning_algorithm": "ultra_multr.DLA"}
    torch.manual_seed(0)
    model = create_ranking_model(settings, 6, torch.device("cpu"))
    (tmp_path / "model").mkdir()
    torch.save(model.state_dict(), str(tmp_path / "model" / "ultra_multr.DLA.ckpt"))

    summary = evaluate_run(str(tmp_path / "data"), "test", settings, str(tmp_path / "model"), str(tmp_path / "out"),
                           tag="dla_seed0")
    assert summary["n_queries"] == 7 and summary["n_dropped_queries"] == 1
    per_query = read_per_query_csv(str(tmp_path / "out" / "per_query_metrics.csv"))
    assert list(per_query) == [q.qid for q in queries if q.labels.max() > 0]
    model.eval()
    with torch.no_grad():
        for query in queries[:3]:
            scores = score_documents(model, torch.tensor(query.features, dtype=torch.float32)).numpy()
            expected = query_metrics(query.labels, scores, max_label=4)
            for name in METRICS:
                assert per_query[query.qid][name] == pytest.approx(expected[name], abs=1e-8)
    assert summary["ndcg_10"] == pytest.approx(np.mean([v["ndcg_10"] for v in per_query.values()]))
    run_lines = (tmp_path / "out" / "run.trec").read_text().splitlines()
    assert len(run_lines) == sum(len(q.doc_ids) for q in queries if q.labels.max() > 0)
    first = [line.split() for line in run_lines if line.startswith(queries[0].qid + " ")]
    assert [int(f[3]) for f in first] == list(range(1, len(first) + 1))
    assert [float(f[4]) for f in first] == sorted((float(f[4]) for f in first), reverse=True)
    assert all(f[5] == "dla_seed0" for f in first)
