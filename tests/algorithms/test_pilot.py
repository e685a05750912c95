"""rerank_weight=auto: the validation pilot chooses a, sees no test split and leaves no trace."""
from __future__ import annotations

import argparse
import logging
import os
import re
import shutil

import pytest
from conftest import require_ultra
import torch

ultra = require_ultra()

from algorithm_setup import build, read_valid, train_losses  # noqa: E402

from ultra_multr.compat import runtime  # noqa: E402
from ultra_multr.config import HParamError  # noqa: E402
from ultra_multr.session_budget import LEDGER  # noqa: E402

PILOT = "rerank_weight=auto,sample_num=2,simulator_steps=2,simulator_batch_size=8,seed=3,device=cpu,rerank_pilot_steps=3,log_every=0"


def state_of(model):
    return [p.detach().clone() for p in list(model.model.parameters()) + list(model.propensity_model.parameters())]


def test_pilot_restores_the_initial_state_and_the_run_equals_a_fixed_weight(synthetic_data_dir):
    model, feed, data = build(synthetic_data_dir, PILOT)
    model.prepare(read_valid(synthetic_data_dir, model.max_candidate_num), batch_size=16)  # simulator, then pilot
    chosen = model.doubly_robust.loss.rerank_weight
    assert chosen in (0.0, 0.5, 2 / 3) and LEDGER.decisions["rerank_weight"]["by"] == "pilot"
    fixed, fixed_feed, _ = build(synthetic_data_dir, PILOT.replace("rerank_weight=auto", "rerank_weight=%r" % chosen))
    fixed.prepare()  # the same simulator, no pilot
    assert all(torch.equal(a, b) for a, b in zip(state_of(fixed), state_of(model)))
    assert torch.equal(fixed.generator.get_state(), model.generator.get_state())
    assert model.global_step == 0 and model._optimizers is None
    assert train_losses(fixed, fixed_feed, data, steps=3) == train_losses(model, feed, data, steps=3)


def test_the_choice_reads_only_the_validation_split(synthetic_data_dir, tmp_path, monkeypatch, caplog):
    """Two data directories that differ only in their test split give the same pilot
    scores and choice; the pilot reads no split but 'valid'; other validation labels
    do change the scores (so the comparison can fail)."""
    read = []
    real_read_data = ultra.utils.read_data

    def spy(data_dir, prefix, *args):
        read.append(prefix)
        return real_read_data(data_dir, prefix, *args)

    monkeypatch.setattr(ultra.utils, "read_data", spy)

    def pilot_log(data_dir):
        model, _, _ = build(synthetic_data_dir, PILOT)
        args = argparse.Namespace(
            data_dir=data_dir, valid_data_prefix="valid", test_data_prefix="test", click_model_dir=None,
            max_list_cutoff=0, batch_size=16, model_dir=str(tmp_path), setting_file="", selection_bias_cutoff=10,
        )
        monkeypatch.setattr(runtime, "main_args", lambda: args)
        read.clear()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="ultra_multr"):
            model.prepare()  # main.py's validation split (as read by the pilot under main.py)
        chosen = model.doubly_robust.loss.rerank_weight
        monkeypatch.setattr(runtime, "main_args", lambda: None)
        assert read == ["valid"]
        (line,) = [r.getMessage() for r in caplog.records if "rerank_weight=auto" in r.getMessage()]
        return chosen, re.sub(r"\(\d+(\.\d+)? s\)", "(time)", line)  # the pilot's duration differs between runs

    other_test = str(tmp_path / "other_test") + "/"  # ULTRA joins data_dir + prefix
    shutil.copytree(synthetic_data_dir, other_test)
    shutil.rmtree(os.path.join(other_test, "test"))  # no test split at all
    logged = pilot_log(synthetic_data_dir)
    assert logged == pilot_log(other_test)

    other_valid = str(tmp_path / "other_valid") + "/"
    shutil.copytree(synthetic_data_dir, other_valid)
    labels = os.path.join(other_valid, "valid", "valid.labels")
    with open(labels) as handle:
        rows = [line.split() for line in handle if line.strip()]
    with open(labels, "w") as handle:  # each query's labels in reverse order
        handle.write("".join("%s %s\n" % (row[0], " ".join(reversed(row[1:]))) for row in rows))
    assert pilot_log(other_valid)[1] != logged[1]


def test_without_a_validation_split_auto_falls_back_to_the_paper_weight(synthetic_data_dir, caplog):
    model, feed, data = build(synthetic_data_dir, PILOT)
    with caplog.at_level(logging.WARNING, logger="ultra_multr"):
        train_losses(model, feed, data, steps=1)
    assert model.doubly_robust.loss.rerank_weight == pytest.approx(2 / 3)
    assert "no validation split" in caplog.text


def test_weight_zero_computes_no_re_rankings(synthetic_data_dir, monkeypatch):
    model, feed, data = build(synthetic_data_dir, "sample_num=4,simulator_steps=0,rerank_weight=0,imputation=sampled,dr_weight_guard=clip")
    model.prepare()
    batch = model.batch(feed.get_batch(data, check_validation=True)[0], model.rank_list_size)
    observed, randomized = model.doubly_robust.pseudo_clicks(batch)
    assert randomized.shape[1] == 0 and observed.shape == batch.mask.shape
    assert model.hparams.dr.rerank_candidates() == (0.0, 0.5, 0.8)
    zero, _, _ = build(synthetic_data_dir, "sample_num=0,simulator_steps=0,rerank_weight=auto")
    assert zero.hparams.dr.rerank_candidates() == (0.0,) and zero.doubly_robust.loss is None


def test_ranking_loss_reports_the_share_of_clipped_weights(synthetic_data_dir):
    model, feed, data = build(
        synthetic_data_dir, "sample_num=2,simulator_steps=0,rerank_weight=paper,imputation=sampled,dr_weight_guard=clip,seed=2"
    )
    model.prepare()
    with torch.no_grad():  # steep propensities: large weights below the top
        model.propensity_model.linear_layer.weight.copy_(torch.linspace(0.0, -4.0, 10))
    batch = model.batch(feed.get_batch(data, check_validation=True)[0], model.rank_list_size)
    scores = model.scores(batch)
    logits = model.propensity_model(batch.labels.t())
    weights = model.propensity_weights(logits, batch.mask)
    _, parts = model.ranking_loss(batch, scores, weights)
    assert 0.0 < parts["negative_weight_share"] < 1.0 and "pseudo_clicks_per_list" in parts


@pytest.mark.parametrize(
    "hparams, message",
    [
        ("rerank_weight=1.5", "rerank_weight: expected \"randomized\", \"authors_code\", \"auto\", \"paper\" or a number in "
                              "\\[0, 1\\], got '1.5'"),
        ("rerank_weight=half", "rerank_weight: expected \"randomized\", \"authors_code\", \"auto\", \"paper\" or a number"),
        ("variant=eib,rerank_weight=randomized", "the randomized form \\(the randomised target's weights, corrected with "
                                                 "the propensities\\) has variant dr only, got variant=eib"),
        ("sample_num=0,rerank_weight=randomized", "rerank_weight=randomized needs re-ranked lists, but sample_num=0"),
        ("sample_num=0,rerank_weight=0.5", "needs re-ranked lists, but sample_num=0"),
        ("rerank_weight_grid=[0,auto]", "rerank_weight_grid: expected \"paper\" or a number in \\[0, 1\\], got 'auto'"),
        ("dr_weight_guard=abs", "dr_weight_guard: expected one of none, clip, rebalance, got 'abs'"),
        ("rerank_pilot_steps=0", "rerank_pilot_steps must be > 0"),
    ],
)
def test_bad_rerank_hparams_are_named(synthetic_data_dir, hparams, message):
    with pytest.raises(HParamError, match=message):
        build(synthetic_data_dir, hparams)



def test_the_pilot_chooses_the_clearly_best_candidate(synthetic_data_dir, caplog):
    """A simulator at its random initialisation (simulator_steps=0) imputes clicks that carry no
    relevance: a = 1 (imputed clicks only) learns nothing, a = 0 (real clicks) learns the synthetic
    labels.  Listed second, a = 0 must still win: the pilot takes the best score, not the first."""
    model, _, _ = build(
        synthetic_data_dir,
        "rerank_weight=auto,rerank_weight_grid=[1,0],sample_num=2,simulator_steps=0,seed=3,device=cpu,"
        "rerank_pilot_steps=10,log_every=0,imputation_samples=8",
    )
    with caplog.at_level(logging.INFO, logger="ultra_multr"):
        model.prepare(read_valid(synthetic_data_dir, model.max_candidate_num), batch_size=32)
    assert model.doubly_robust.loss.rerank_weight == 0.0
    (line,) = [r.getMessage() for r in caplog.records if "rerank_weight=auto" in r.getMessage()]
    scores = dict(pair.split(": ") for pair in line.split("by a: ")[1].split("; chosen")[0].split(", "))
    assert float(scores["0.0000"]) > float(scores["1.0000"]) + 0.1, line
