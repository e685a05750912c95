"""studies/propensity_drift/run.py: variants become runner methods, and the tables are written from run folders.

No training: fake run folders (run.json, done.json, TensorBoard propensity curves, a tiny untrained ranker checkpoint)
on a tiny generated data set.
"""
from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import sys

import numpy as np
import pytest
import torch
from conftest import REPO_ROOT, require

require("tensorboard")
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

from ultra_multr.compat.runtime import create_ranking_model  # noqa: E402
from ultra_multr.generate.ultra_dataset import write_recipe_dataset  # noqa: E402
from ultra_multr.experiments.aggregate import METRICS  # noqa: E402
from ultra_multr.experiments.methods import ultra_settings  # noqa: E402
from ultra_multr.experiments.runner.cli import expand_runs, load_config  # noqa: E402

_SPEC = importlib.util.spec_from_file_location(
    "propensity_drift_run", os.path.join(REPO_ROOT, "studies", "propensity_drift", "run.py"))
study = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = study  # dataclasses look their module up there
_SPEC.loader.exec_module(study)

CASCADE = os.path.join(REPO_ROOT, "settings", "click_models", "cascade_eps0.1_ymax4.json")


def _data(tmp_path) -> str:
    directory = str(tmp_path / "data" / "Fold1")
    write_recipe_dataset(directory, {"seed": 1, "train_queries": 12, "valid_queries": 3, "test_queries": 3,
                                     "features": 5, "docs_per_query": [6, 10], "initial_noise": 2.0,
                                     "signal": 1.0, "ranker_feature": True})
    return directory


def _run(root, name, seed, last, data_dir, checkpoint=True):
    """A finished run folder: run.json, done.json, settings.json, metrics.json, curves (propensity per position:
    1 at step 100, ``last`` at step 200; losses) and, with ``checkpoint``, an untrained ranker as main.py saves it."""
    run_dir = os.path.join(root, "runs", "generated", "Fold1", name, "seed%d" % seed)
    os.makedirs(os.path.join(run_dir, "model"))
    info = {"dataset": "generated", "fold": "Fold1", "method": name, "label": name, "variant": None, "seed": seed,
            "data_dir": data_dir}
    settings = ultra_settings({"train_input_hparams": {"click_model_json": CASCADE, "seed": seed},
                               "ranking_model": "ultra.ranking_model.DNN",
                               "ranking_model_hparams": {"hidden_layer_sizes": [4]}}, "ultra_multr.DLA")
    for file_name, payload in (("run.json", info), ("done.json", {}), ("settings.json", settings),
                               ("metrics.json", {"ndcg_10": 0.5})):
        with open(os.path.join(run_dir, file_name), "w") as handle:
            json.dump(payload, handle)
    # per-query test metrics: every metric 0.5 on q0, and on q1 0.5 plus the run's propensity at position 2
    with open(os.path.join(run_dir, "per_query_metrics.csv"), "w") as handle:
        handle.write("qid," + ",".join(METRICS) + "\n")
        for qid, value in (("q0", 0.5), ("q1", 0.5 + last[1])):
            handle.write(qid + "," + ",".join([str(value)] * len(METRICS)) + "\n")
    writer = SummaryWriter(os.path.join(run_dir, "model", "train_log"))
    for i, value in enumerate(last):
        writer.add_scalar("propensity/position_%02d" % (i + 1), 1.0, 100)
        writer.add_scalar("propensity/position_%02d" % (i + 1), value, 200)
    for step in (100, 200):
        writer.add_scalar("train/exam_loss", 2.0, step)
        writer.add_scalar("train/rank_loss", 1.0, step)
    writer.close()
    if checkpoint:
        torch.manual_seed(seed)
        model = create_ranking_model(settings, 5, torch.device("cpu"))
        torch.save(model.state_dict(), os.path.join(run_dir, "model", "ultra_multr.DLA.ckpt"))
    return run_dir


def test_variants_are_runner_methods_whose_hparams_win_over_the_studys(tmp_path):
    variants = [study.make_variant("dla", "default"), study.make_variant("multr", "lr0.01", "learning_rate=0.01"),
                study.make_variant("multr", "norm", "dr_normalization=batch,rerank_weight=0")]
    config = study.study_config(str(tmp_path / "out"), str(tmp_path / "data"), variants, [1], [0, 1], 300, 50)
    path = tmp_path / "study.json"
    path.write_text(json.dumps(config))
    runs = {(r.method, r.seed): r for r in expand_runs(load_config(str(path)))}
    assert sorted(runs) == sorted((m, s) for m in ("dla__default", "multr__lr0.01", "multr__norm") for s in (0, 1))
    hparams = {m: dict(p.split("=", 1) for p in r.settings["learning_algorithm_hparams"].split(","))
               for (m, s), r in runs.items() if s == 0}
    assert hparams["dla__default"]["learning_rate"] == "0.05" and "simulator_steps" not in hparams["dla__default"]
    assert hparams["multr__lr0.01"]["learning_rate"] == "0.01"  # the variant's, not the shared 0.05
    assert hparams["multr__lr0.01"]["simulator_steps"] == "50"
    assert (hparams["multr__norm"]["dr_normalization"], hparams["multr__norm"]["rerank_weight"]) == ("batch", "0")
    assert runs[("multr__norm", 0)].settings["learning_algorithm"] == "ultra_multr.MULTR"
    # main.py saves one checkpoint, the final ranker: it validates, saves and stops at step 300
    assert runs[("dla__default", 0)].main_args["max_train_iteration"] == 299
    assert runs[("dla__default", 0)].main_args["steps_per_checkpoint"] == 300
    assert study.split_name("multr__lr0.01") == ("multr", "lr0.01")
    with pytest.raises(ValueError, match="label"):
        study.make_variant("multr", "a b")
    with pytest.raises(ValueError, match="unknown method"):
        study.make_variant("nope", "x")
    assert study.parse_hparams("a=1, b=[1,2]") == {"a": "1", "b": ["1", "2"]}


def test_curves_csv_and_markdown_give_inverse_propensity_mean_and_sd_per_variant(tmp_path):
    root, data_dir = str(tmp_path), _data(tmp_path)
    _run(root, "dla__default", 0, (1.0, 0.5, 0.25), data_dir, checkpoint=False)
    _run(root, "dla__default", 1, (1.0, 0.25, 0.2), data_dir, checkpoint=False)
    _run(root, "multr__a0", 0, (1.0, 0.8, 0.5), data_dir, checkpoint=False)
    texts = study.write_tables(os.path.join(root, "runs"), os.path.join(root, "results"), evidence=False, figure=False)
    with open(os.path.join(root, "results", "curves.csv")) as handle:
        assert handle.read() == texts["curves.csv"]
    rows = list(csv.DictReader(io.StringIO(texts["curves.csv"])))
    assert list(rows[0]) == study.CURVE_COLUMNS
    dla = {int(r["position"]): r for r in rows if (r["method"], r["variant"]) == ("dla", "default")}
    assert dla[2]["runs"] == "2"
    assert float(dla[2]["inverse_propensity_mean"]) == pytest.approx(3.0)  # 1/0.5, 1/0.25
    assert float(dla[2]["inverse_propensity_sd"]) == pytest.approx(np.std([2.0, 4.0], ddof=1), abs=1e-4)
    multr = [r for r in rows if r["method"] == "multr"]
    assert [r["variant"] for r in multr] == ["a0"] * 3 and multr[2]["inverse_propensity_sd"] == ""
    lines = texts["curves.md"].splitlines()
    assert "| method | variant | runs | 1/p @2 | 1/p @3 |" in lines
    assert "| dla | default | 2 | 3.00 ± 1.41 | 4.50 ± 0.71 |" in lines
    assert "| multr | a0 | 1 | 1.25 | 2.00 |" in lines
    assert not os.path.exists(os.path.join(root, "results", "evidence.csv"))


def test_evidence_reads_the_final_ranker_on_the_training_lists_and_adds_the_data_references(tmp_path):
    root, data_dir = str(tmp_path), _data(tmp_path)
    _run(root, "dla__default", 0, (1.0, 0.5, 0.25) + (0.2,) * 7, data_dir)  # the study's 10 positions
    _run(root, "multr__default", 0, (1.0, 0.4) + (0.3,) * 7 + (0.2,), data_dir)
    texts = study.write_tables(os.path.join(root, "runs"), os.path.join(root, "results"))
    rows = list(csv.DictReader(io.StringIO(texts["evidence.csv"])))
    assert [(r["method"], r["variant"]) for r in rows] == [("dla", "default"), ("multr", "default")]
    assert list(rows[0]) == study.EVIDENCE_COLUMNS
    assert float(rows[1]["inverse_propensity_10"]) == pytest.approx(1 / 0.2, rel=1e-4)  # the last position logged
    assert rows[1]["inverse_propensity_10_by_step"] == "100:1.00 200:5.00"
    assert float(rows[0]["exam_loss"]) == pytest.approx(2.0) and float(rows[0]["ndcg_10"]) == pytest.approx(0.5)
    for key in ("score_spread", "score_position_corr", "score_ranker_feature_corr", "implied_inverse_propensity_10"):
        assert np.isfinite(float(rows[0][key])), key
    assert "| dla | default | Fold1 | 0 |" in texts["evidence.md"]
    references = [r for r in csv.DictReader(io.StringIO(texts["curves.csv"])) if r["method"] == "reference"]
    assert {r["variant"] for r in references} == {"cascade_examination", "exact_relevance_ranker"}
    assert texts["curves.md"].splitlines()[-1].startswith("| reference |")  # after the trained rows
    assert "corr(logging feature, label)" in texts["data.md"]
    assert os.path.getsize(os.path.join(root, "results", "curves.png")) > 0
    # q1: dla 0.5 + 0.5, multr 0.5 + 0.4; q0 equal: a mean difference of 0.05, and p = 1 with one differing query
    assert "| dla__default | multr__default | 1, 1 | +0.0500 (-; 1 pairs) | +0.0500 | 1 |" in texts["pairs.md"].splitlines()


def test_score_evidence_and_implied_propensity_on_hand_made_lists():
    scores = [np.array([2.0, 1.0, 0.0]), np.array([0.0, 1.0, 2.0])]
    labels = [np.array([2.0, 1.0, 0.0]), np.array([0.0, 1.0, 2.0])]
    feature = [np.array([1.0, 0.0, -1.0]), np.array([1.0, 0.0, -1.0])]
    got = study.score_evidence(scores, labels, feature, position=3)
    assert got["score_spread"] == pytest.approx(np.std([2.0, 1.0, 0.0]))
    assert got["score_position_corr"] == pytest.approx(0.0)  # -1 and +1
    assert got["score_label_corr"] == pytest.approx(1.0)
    assert got["relevance_weight_3_median"] == pytest.approx(np.median([np.exp(2.0), np.exp(-2.0)]))
    # equal scores: the examination loss's target is the click rate per position itself
    rates = [np.array([0.5, 0.25, 0.125])]
    np.testing.assert_allclose(study.implied_inverse_propensity([np.zeros(3)], rates, 3), [1.0, 2.0, 4.0])
    # a ranker scoring position 3 one unit above position 1 weighs its clicks by 1/e: its 1/p grows by e
    np.testing.assert_allclose(study.implied_inverse_propensity([np.array([0.0, 0.0, 1.0])], rates, 3),
                               [1.0, 2.0, 4.0 * np.e])
    np.testing.assert_allclose(study.cascade_click_rates([np.array([4.0, 0.0])], [0.1, 1.0, 1.0, 1.0, 1.0]),
                               [[1.0, 0.0]])
