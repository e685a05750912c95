"""MULTR's simulator phase: its click stream, held-out queries, early stopping, resume, fingerprints."""
from __future__ import annotations

import logging
import os

import numpy as np
import pytest
import torch

from conftest import REPO_ROOT, require_ultra
from algorithm_setup import build as build_with_feed

ultra = require_ultra()

from ultra_multr.simulator import trainer  # noqa: E402
from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset  # noqa: E402
from ultra_multr.feeds.simulation import ClickLogFeed, ClickSimulationFeed  # noqa: E402
from ultra_multr.feeds.arrays import query_subset  # noqa: E402
from ultra_multr.session_budget import LEDGER  # noqa: E402

CASCADE = os.path.join(REPO_ROOT, "settings", "click_models", "cascade_eps0.1_ymax4.json")
FRESH = "ultra_multr.feeds.ClickSimulationFeed"
LOG = "ultra_multr.feeds.ClickLogFeed"


def build(data_dir, hparams, feed=FRESH, feed_hparams="click_model_json=%s,seed=3" % CASCADE):
    """MULTR wired as main.py wires it, and its (padded) training set."""
    model, _, data = build_with_feed(data_dir, hparams, feed=feed, feed_hparams=feed_hparams)
    return model, data


@pytest.fixture
def drawn(monkeypatch):
    """Every get_batch of our feeds: (feed, data set, check_validation, query ids in the full set [B], clicks [B, N])."""
    calls = []
    original = ClickSimulationFeed.get_batch

    def spy(self, data_set, check_validation=False, data_format="ULTRA"):
        input_feed, info = original(self, data_set, check_validation, data_format)
        rows = np.asarray(info["rank_list_idxs"])
        queries = data_set.subset_queries[rows] if hasattr(data_set, "subset_queries") else rows
        calls.append((self, data_set, check_validation, queries, np.asarray(info["click_list"])))
        return input_feed, info

    monkeypatch.setattr(ClickSimulationFeed, "get_batch", spy)
    return calls


def heldout(model, sessions_per_query):
    """[Q, K] the logged sessions MULTR's simulator phase holds out of a log of K sessions per training query."""
    return model.hparams.simulator.heldout_sessions(model.simulator_phase.clicks.n_queries, sessions_per_query,
                                                    model.hparams.seed)


def heldout_and_training_calls(calls):
    """The simulator draws its held-out batches first, from their own feed."""
    heldout_feed = calls[0][0]
    return [c for c in calls if c[0] is heldout_feed], [c for c in calls if c[0] is not heldout_feed]


HPARAMS = "seed=1,sample_num=1,simulator_steps=6,simulator_batch_size=16,simulator_heldout_batches=2"


def test_simulator_learns_from_the_rankers_fresh_clicks_and_is_measured_on_another_stream(synthetic_data_dir, drawn):
    model, data = build(synthetic_data_dir, HPARAMS)
    model.prepare()
    heldout, training = heldout_and_training_calls(drawn)
    assert len(heldout) == 2 and len(training) == 6
    for _, data_set, check_validation, _, clicks in drawn:
        assert data_set is data  # main.py's training set, every query
        assert check_validation and (clicks.sum(axis=1) > 0).all()  # the ranker's rule: no click-less session
    main_feed = ClickSimulationFeed(model, 16, model.exp_settings["train_input_hparams"])
    main_queries = [main_feed.get_batch(data, check_validation=True)[1]["rank_list_idxs"] for _ in range(2)]
    assert [list(c[3]) for c in training[:2]] == main_queries  # main.py's feed and seed
    assert [list(c[3]) for c in heldout] != main_queries  # held-out sessions: another seed stream


def test_simulator_never_trains_on_heldout_sessions_of_a_fixed_log(synthetic_data_dir, drawn):
    hparams = "click_model_json=%s,seed=3,sessions_per_query=3" % CASCADE
    model, data = build(synthetic_data_dir, HPARAMS + ",simulator_heldout_fraction=0.3", LOG, hparams)
    model.prepare()
    held = heldout(model, 3)
    assert held.sum() == 54  # 30 % of the 60 x 3 logged sessions
    main_feed = ClickLogFeed(model, 16, hparams)
    log = main_feed.click_log(main_feed.arrays_for(data)).astype(np.float32)  # main.py's log
    heldout_calls, training_calls = heldout_and_training_calls(drawn)
    for calls, allowed in ((heldout_calls, held), (training_calls, ~held)):
        for _, _, check_validation, queries, clicks in calls:
            assert check_validation and (clicks.sum(axis=1) > 0).all()
            n = clicks.shape[1]
            assert all((log[q][allowed[q]][:, :n] == c).all(axis=1).any() for q, c in zip(queries, clicks))


def test_a_views_log_feed_draws_only_its_sessions_and_all_of_them(synthetic_data_dir):
    model, data = build(synthetic_data_dir, "seed=1")
    feed = ClickLogFeed(model, 64, "click_model_json=%s,seed=3,sessions_per_query=4" % CASCADE)
    arrays = feed.arrays_for(data)
    arrays.click_log = np.zeros((60, 4, arrays.mask.shape[1]), dtype=bool)
    arrays.click_log[:, np.arange(4), np.arange(4)] = True  # session k clicks position k
    allowed = np.zeros((60, 4), dtype=bool)
    allowed[::2, 1] = allowed[::2, 3] = allowed[1::2, 0] = True
    view = query_subset(data, np.arange(60), allowed)
    seen = np.zeros((60, 4), dtype=bool)
    for _ in range(20):
        _, info = feed.get_batch(view)
        for q, clicks in zip(info["rank_list_idxs"], info["click_list"]):
            seen[q, int(np.argmax(clicks))] = True
    assert not (seen & ~allowed).any() and seen[allowed].mean() > 0.9


def test_heldout_sessions_are_seeded_and_a_too_small_log_is_refused(synthetic_data_dir):
    model, data = build(synthetic_data_dir, "seed=1,simulator_heldout_fraction=0.1")
    again, _ = build(synthetic_data_dir, "seed=1,simulator_heldout_fraction=0.1")
    other, _ = build(synthetic_data_dir, "seed=2,simulator_heldout_fraction=0.1")
    assert np.array_equal(heldout(model, 2), heldout(again, 2))
    assert not np.array_equal(heldout(model, 2), heldout(other, 2))
    with pytest.raises(ValueError, match="simulator_heldout_fraction=0.1 of a click log of 1 sessions"):
        model.hparams.simulator.heldout_sessions(1, 1, model.hparams.seed)


@pytest.mark.parametrize("share, minimum, held, judged", [(0.25, 40, 40, True), (0.25, 46, 18, False),
                                                          (0.0, 40, 18, False), (0.25, 10, 18, True)])
def test_a_fixed_log_holds_out_the_minimum_where_the_max_share_allows(synthetic_data_dir, caplog, fresh_ledger,
                                                                        share, minimum, held, judged):
    # 60 queries x 3 sessions = 180, of which 10 % is 18.  With simulator_heldout_max_share=0.25 a minimum of 40 (at
    # most 45) is held out and the simulator is judged; 46 is more than a quarter, and 10 % stays (too few to judge
    # it), as it does with the share at its default 0; a minimum of 10 is below the 10 % already.
    hparams = "click_model_json=%s,seed=3,sessions_per_query=3" % CASCADE
    model, _ = build(synthetic_data_dir, HPARAMS + ",simulator_heldout_fraction=0.1,simulator_min_heldout_sessions=%d,"
                     "simulator_heldout_max_share=%g" % (minimum, share), LOG, hparams)
    with caplog.at_level(logging.INFO, logger="ultra_multr"):
        model.prepare()
    assert heldout(model, 3).sum() == held
    training, judgement = LEDGER.decisions["simulator_training"], LEDGER.decisions["user_simulator"]
    assert training["heldout_sessions"] == held
    assert (judgement["decision"] != "not_validated") == judged
    raised = ("user simulator: 40 of the click log's 180 sessions held out (simulator_min_heldout_sessions, at most "
              "simulator_heldout_max_share=0.25 of the log), where simulator_heldout_fraction=0.1 would hold out 18")
    assert (raised in caplog.text) == (held == 40)


def test_query_subset_views_keep_the_full_logs_sessions(synthetic_data_dir):
    model, data = build(synthetic_data_dir, "seed=1")
    hparams = "click_model_json=%s,seed=3,sessions_per_query=3" % CASCADE
    feed = ClickLogFeed(model, 8, hparams)
    view = query_subset(data, [7, 2, 30])
    assert [view.qids[i] for i in range(3)] == [data.qids[7], data.qids[2], data.qids[30]]
    full_log = feed.click_log(feed.arrays_for(data))
    view_log = ClickLogFeed(model, 8, hparams).click_log(feed.arrays_for(view))
    assert np.array_equal(view_log, full_log[[7, 2, 30]])
    with pytest.raises(ValueError, match="query_subset: need 1 or more query indices in \\[0, 60\\)"):
        query_subset(data, [60])


# -- early stopping, resume, fingerprints ----------------------------------

SMALL = "seed=1,sample_num=1,simulator_batch_size=8,simulator_heldout_batches=1,simulator_input_mlp=[8],simulator_hidden_size=8"


def parameters(model):
    return {k: v.clone() for k, v in model.simulator_phase.network.state_dict().items()}


def test_early_stopping_stops_on_a_plateau_and_keeps_the_best_state(synthetic_data_dir, monkeypatch):
    # cuda_graphs=off: the spy below wraps the eager update (a CUDA run would otherwise replay graphs).
    model, _ = build(
        synthetic_data_dir, SMALL + ",simulator_steps=100,simulator_eval_every=2,simulator_patience=2,cuda_graphs=off"
    )
    scores = iter([-3.0, -2.0, -2.5, -2.1])  # best at the 2nd evaluation (step 4), then a plateau
    states, steps = [], []
    real = trainer.heldout_log_likelihood

    def scripted(simulator, batches):
        states.append(parameters(model))
        value = next(scores, None)
        return (value, []) if value is not None else real(simulator, batches)

    original_update = trainer.simulator_update

    def counting_update(*args, **kwargs):
        steps.append(kwargs["step"])
        return original_update(*args, **kwargs)

    monkeypatch.setattr(trainer, "heldout_log_likelihood", scripted)
    monkeypatch.setattr(trainer, "simulator_update", counting_update)
    model.prepare()
    assert steps == list(range(1, 9))  # evaluations at 2, 4, 6, 8; patience 2 ends it at 8
    final = parameters(model)
    assert all(torch.equal(final[k], states[1][k]) for k in final)
    assert not all(torch.equal(final[k], states[3][k]) for k in final)


def test_killed_pretraining_resumes_and_ends_like_an_uninterrupted_run(synthetic_data_dir, tmp_path, monkeypatch, caplog):
    # cuda_graphs=off: the update that dies below is the eager one (a CUDA run would otherwise replay graphs).
    hparams = SMALL + ",simulator_steps=9,simulator_eval_every=3,simulator_patience=2,cuda_graphs=off,simulator_checkpoint=%s"
    whole, _ = build(synthetic_data_dir, hparams % (tmp_path / "whole.ckpt"))
    whole.prepare()

    killed, _ = build(synthetic_data_dir, hparams % (tmp_path / "killed.ckpt"))
    original_update = trainer.simulator_update

    def dies_at_step_8(*args, **kwargs):
        if kwargs["step"] == 8:
            raise KeyboardInterrupt
        return original_update(*args, **kwargs)

    monkeypatch.setattr(trainer, "simulator_update", dies_at_step_8)
    with pytest.raises(KeyboardInterrupt):
        killed.prepare()
    assert os.path.exists(tmp_path / "killed.ckpt.partial") and not os.path.exists(tmp_path / "killed.ckpt")
    monkeypatch.setattr(trainer, "simulator_update", original_update)

    resumed, _ = build(synthetic_data_dir, hparams % (tmp_path / "killed.ckpt"))
    with caplog.at_level("INFO"):
        resumed.prepare()
    assert "resuming from %s at step 6" % (tmp_path / "killed.ckpt.partial") in caplog.text
    expected, got = parameters(whole), parameters(resumed)
    assert all(torch.equal(expected[k], got[k]) for k in expected)
    assert torch.equal(whole.generator.get_state(), resumed.generator.get_state())
    assert not os.path.exists(tmp_path / "killed.ckpt.partial")


def test_a_checkpoint_of_other_data_or_click_model_is_retrained_or_refused_when_pinned(
    synthetic_data_dir, tmp_path, caplog
):
    click_model = tmp_path / "cascade.json"
    with open(CASCADE) as handle:
        click_model.write_text(handle.read())
    feed_hparams = "click_model_json=%s,seed=3" % click_model
    pinned = SMALL + ",simulator_steps=2,simulator_checkpoint=%s" % (tmp_path / "sim.ckpt")
    build(synthetic_data_dir, pinned, feed_hparams=feed_hparams)[0].prepare()
    with caplog.at_level("INFO"):
        build(synthetic_data_dir, pinned, feed_hparams=feed_hparams)[0].prepare()
    assert "reusing" in caplog.text

    click_model.write_text(click_model.read_text().replace("0.1", "0.2", 1))  # same path, other content
    with pytest.raises(ValueError, match="learned from other data or another click model \\(click_model_fingerprint"):
        build(synthetic_data_dir, pinned, feed_hparams=feed_hparams)[0].prepare()

    other_data = write_synthetic_ultra_dataset(str(tmp_path / "other"), seed=9)
    unpinned, _ = build(other_data, SMALL + ",simulator_steps=2", feed_hparams=feed_hparams)
    unpinned.simulator_phase.checkpoint_path = str(tmp_path / "sim.ckpt")  # where main.py's --model_dir would put it
    caplog.clear()
    with caplog.at_level("INFO"):
        unpinned.prepare()
    assert "differs in" in caplog.text and "data_fingerprint" in caplog.text and "training a new one" in caplog.text


def test_progress_is_logged_by_time_as_well_as_by_steps(synthetic_data_dir, monkeypatch, caplog):
    model, _ = build(synthetic_data_dir, SMALL + ",simulator_steps=3,simulator_eval_every=10,simulator_log_every=0")
    monkeypatch.setattr(trainer, "LOG_SECONDS", 0.0)
    with caplog.at_level("INFO"):
        model.prepare()
    assert "step 1/3 loss" in caplog.text and "step 2/3 loss" in caplog.text
    assert "step 3/3 loss" in caplog.text and "held-out click log-likelihood" in caplog.text


def test_ranker_log_parts_count_real_and_pseudo_clicks_per_list(synthetic_data_dir):
    model, feed, data = build_with_feed(synthetic_data_dir, "seed=1,sample_num=1,simulator_steps=0")
    model.prepare()
    batch = model.batch(feed.get_batch(data, check_validation=True)[0], model.rank_list_size)
    _, parts = model.training_loss(batch)
    assert parts["clicks_per_list"] == pytest.approx(float(batch.labels.sum(-1).mean()))
    assert parts["clicks_per_list"] >= 1.0 and "pseudo_clicks_per_list" in parts


def test_a_checkpoint_saved_before_the_clip_split_and_the_new_network_fields_is_reused_not_retrained(
    synthetic_data_dir, tmp_path, caplog, monkeypatch
):
    """Checkpoints (and training states) saved when one max_gradient_norm clipped ranker and simulator name the
    simulator's clip so, and their network lacks the fields added since (design, dropout, actions, position
    dropout): read back with today's name and those fields at the values every earlier network had (no dropout,
    three actions: not today's defaults), they match a run that asks for those values and are reused."""
    from ultra_multr.components import simulator_phase
    from ultra_multr.simulator import load_training_state, save_training_state

    path = tmp_path / "sim.ckpt"
    hparams = SMALL + ",simulator_dropout=0.0,simulator_actions=3,simulator_steps=2,simulator_checkpoint=%s" % path
    build(synthetic_data_dir, hparams)[0].prepare()
    payload = torch.load(path, weights_only=True)
    metadata = payload["metadata"]
    metadata["max_gradient_norm"] = metadata.pop("simulator_max_gradient_norm")  # the key as it was saved before
    for added in ("design", "dropout", "actions", "position_dropout"):  # the network's fields added since
        del metadata["simulator_config"][added], payload["config"][added]
    torch.save(payload, path)
    trained = []
    monkeypatch.setattr(simulator_phase, "train_simulator", lambda *args: trained.append(args))
    with caplog.at_level("INFO"):
        reused, _ = build(synthetic_data_dir, hparams)
        reused.prepare()
    assert "user simulator: reusing %s" % path in caplog.text and not trained
    assert reused.doubly_robust.simulator is reused.simulator_phase.network
    save_training_state(str(tmp_path / "state"), {"metadata": {"max_gradient_norm": 5.0}, "step": 3})
    assert load_training_state(str(tmp_path / "state"))["metadata"] == {"simulator_max_gradient_norm": 5.0}


def test_held_out_queries_are_never_trained_on_and_measure_the_simulator(synthetic_data_dir, drawn):
    """simulator_heldout_unit=queries: the simulator's training batches come from the other queries only, its
    held-out batches from the held-out ones only (fresh clicks, main.py's rule)."""
    model, data = build(synthetic_data_dir, HPARAMS + ",simulator_heldout_unit=queries,simulator_heldout_fraction=0.25")
    model.prepare()
    held = np.flatnonzero(model.hparams.simulator.heldout_queries(len(data.initial_list), model.hparams.seed))
    assert len(held) == 15
    heldout_calls, training_calls = heldout_and_training_calls(drawn)
    assert len(heldout_calls) == 2 and len(training_calls) == 6
    assert all(set(c[3]) <= set(held) for c in heldout_calls)
    assert all(not set(c[3]) & set(held) for c in training_calls)
