"""MULTR inside the real ULTRA: main.py end to end, engineering guarantees, bad input."""
from __future__ import annotations

import os
import re

import pytest
import torch

from conftest import require_ultra, run_ultra_main

ultra = require_ultra()

from algorithm_setup import build, main_args, settings_for, train_losses  # noqa: E402
from ultra_multr.config import HParamError  # noqa: E402

@pytest.mark.slow
def test_main_py_trains_then_evaluates_multr(ultra_main, synthetic_data_dir, tmp_path):
    settings = settings_for(
        tmp_path, "sample_num=2,simulator_steps=6,simulator_batch_size=16,simulator_log_every=3,seed=0,rerank_weight=auto,rerank_pilot_steps=2"
    )
    model_dir = str(tmp_path / "model")
    train = run_ultra_main(
        ultra_main,
        main_args(settings, model_dir, synthetic_data_dir, "--max_train_iteration", "4", "--steps_per_checkpoint", "2"),
        cwd=str(tmp_path),
    )
    log = train.stdout + train.stderr
    assert "user simulator: step 6/6" in log and "held-out click log-likelihood" in log
    assert "rerank_weight=auto: pilot of 2 steps, ndcg_10 by a: 0.0000: " in log  # main.py's validation split
    assert os.path.isfile(os.path.join(model_dir, "ultra_multr.MULTR.ckpt"))
    assert os.path.isfile(os.path.join(model_dir, "ultra_multr.MULTR.simulator.ckpt"))
    assert "ndcg_10" in log
    trained_with = [line for line in log.splitlines() if re.match(r"^\[ultra_multr\] ranker trained with: ", line)]
    assert trained_with == ["[ultra_multr] ranker trained with: MULTR's doubly-robust loss (the mixture form (a = %s), "
                            "variant dr, rebalance weight guard) on the user simulator's pseudo clicks, with DLA's "
                            "propensities" % trained_with[0].split("a = ")[1][:6]]  # once, a the pilot's choice
    assert not os.path.exists(os.path.join(model_dir, "train_log", "Training at step 1"))  # no writer per step
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(os.path.join(model_dir, "train_log"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"simulator/loss", "simulator/heldout_log_likelihood", "train/clicks_per_list"} <= tags
    assert {"train/pseudo_clicks_per_list", "train/negative_weight_share"} <= tags
    steps = [e.step for e in events.Scalars("train/loss")]
    assert steps == list(range(1, len(steps) + 1))  # the rerank_weight pilot's updates are not logged

    restart = main_args(settings, model_dir, synthetic_data_dir, "--max_train_iteration", "2", "--steps_per_checkpoint", "2")
    # A restart would load the ranker's weights only and restart everything else: refused, saying how to start afresh.
    with pytest.raises(AssertionError, match="same data and settings.*cannot resume.*delete"):
        run_ultra_main(ultra_main, restart, cwd=str(tmp_path))
    from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset

    other_data = write_synthetic_ultra_dataset(str(tmp_path / "other"), seed=1)
    with pytest.raises(AssertionError, match=r"other data or settings \(differ: data_dir, data_sha256\)"):
        run_ultra_main(ultra_main, main_args(settings, model_dir, other_data, "--max_train_iteration", "2"), cwd=str(tmp_path))

    os.remove(os.path.join(model_dir, "ultra_multr.MULTR.ckpt"))  # a new ranker; the simulator is complete
    again = run_ultra_main(ultra_main, restart, cwd=str(tmp_path))
    assert "user simulator: reusing" in again.stdout + again.stderr

    test = run_ultra_main(ultra_main, main_args(settings, model_dir, synthetic_data_dir, "--test_only", "True"), cwd=str(tmp_path))
    assert "Reading model parameters from" in test.stdout
    assert "ndcg_10:" in test.stdout
    assert "--output_dir '%s/out' has no trailing '/'" % model_dir in test.stderr
    with open(model_dir + "/out/test.ranklist") as handle:  # the '/' main.py's string concatenation needs is added
        scores = [float(line.split()[4]) for line in handle]  # numbers, not "tensor(...)"
    assert len(scores) > 12


@pytest.mark.slow
def test_main_py_test_only_refuses_a_model_dir_without_ranker(ultra_main, synthetic_data_dir, tmp_path):
    settings = settings_for(tmp_path, "simulator_steps=0")
    empty = str(tmp_path / "never_trained")
    with pytest.raises(AssertionError, match="--model_dir %s holds no ranker checkpoint" % empty):
        run_ultra_main(ultra_main, main_args(settings, empty, synthetic_data_dir, "--test_only", "True"), cwd=str(tmp_path))


@pytest.mark.slow
def test_main_py_refuses_a_cutoff_longer_than_every_list(ultra_main, tmp_path):
    from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset

    data_dir = write_synthetic_ultra_dataset(str(tmp_path / "short"), docs_per_query=(3, 5))
    # a simulator of 10,000 steps: the refusal must come before it trains (it used to come after, ~30 s later)
    settings = settings_for(tmp_path, "sample_num=1,simulator_steps=10000,simulator_batch_size=4")
    completed = run_ultra_main(
        ultra_main, main_args(settings, str(tmp_path / "m"), data_dir, "--max_train_iteration", "1"),
        cwd=str(tmp_path), check=False,
    )
    assert completed.returncode != 0
    assert "selection_bias_cutoff 10 is longer than the longest list in the data (5 documents)" in completed.stderr
    assert "user simulator" not in completed.stdout + completed.stderr


@pytest.mark.slow
def test_main_py_refuses_test_only_false(ultra_main, synthetic_data_dir, tmp_path):
    settings = settings_for(tmp_path, "simulator_steps=0")
    with pytest.raises(AssertionError, match="--test_only 'False'.*type=bool"):
        run_ultra_main(ultra_main, main_args(settings, str(tmp_path / "m"), synthetic_data_dir, "--test_only", "False"), cwd=str(tmp_path))


@pytest.mark.slow
def test_missing_click_model_file_is_named(ultra_main, synthetic_data_dir, tmp_path):
    settings = settings_for(tmp_path, "simulator_steps=0", feed_hparams="click_model_json=click_models/nope.json,seed=0")
    with pytest.raises(AssertionError, match="nope.json"):
        run_ultra_main(ultra_main, main_args(settings, str(tmp_path / "m"), synthetic_data_dir, "--max_train_iteration", "1"), cwd=str(tmp_path))


# -- in-process checks ------------------------------------------------------


def test_seed_makes_a_cpu_run_repeat_exactly(synthetic_data_dir):
    hparams = "sample_num=3,simulator_steps=3,simulator_batch_size=8,seed=5,device=cpu"
    first = train_losses(*build(synthetic_data_dir, hparams), steps=3)
    second = train_losses(*build(synthetic_data_dir, hparams), steps=3)
    assert first == second
    other = train_losses(*build(synthetic_data_dir, hparams.replace("seed=5", "seed=6")), steps=3)
    assert other != first


def test_cuda_graphs_on_needs_a_cuda_device(synthetic_data_dir):
    with pytest.raises(ValueError, match="cuda_graphs=on needs a CUDA device, but the device is cpu"):
        build(synthetic_data_dir, "simulator_steps=0,device=cpu,cuda_graphs=on")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")
def test_cuda_graphs_train_like_eager_kernels(synthetic_data_dir):
    # Graphs on (auto): the simulator's updates and the ranker steps' sampling are replayed graphs.
    from ultra_multr.simulator import GraphedSampler

    runs = {}
    for graphs in ("auto", "off"):
        model, feed, data = build(
            synthetic_data_dir,
            "sample_num=3,simulator_steps=3,simulator_batch_size=8,seed=5,device=cuda,rerank_weight=paper,"
            "imputation=sampled,dr_weight_guard=clip,cuda_graphs=%s" % graphs,
        )
        runs[graphs] = train_losses(model, feed, data, steps=3)
        assert isinstance(model.sampler, GraphedSampler) == (graphs == "auto")
    assert runs["auto"] == pytest.approx(runs["off"], rel=1e-4)


def test_sample_num_zero_trains(synthetic_data_dir):
    model, feed, data = build(synthetic_data_dir, "sample_num=0,rerank_weight=0,simulator_steps=0,seed=1")
    losses_ = train_losses(model, feed, data, steps=2)
    assert all(torch.isfinite(torch.tensor(losses_)))


def test_optimizers_are_created_once_unless_parity_is_asked(synthetic_data_dir):
    model, feed, data = build(synthetic_data_dir, "sample_num=1,simulator_steps=0,seed=1")
    train_losses(model, feed, data, steps=1)
    optimizers = model._optimizers._optimizers
    train_losses(model, feed, data, steps=2)
    assert model._optimizers._optimizers is optimizers
    ranker_parameter = next(iter(model.model.parameters()))
    state = next(o.state[ranker_parameter] for o in optimizers if ranker_parameter in o.state)
    assert state["step"].item() == 3  # Adagrad's accumulator lives on

    parity, feed, data = build(
        synthetic_data_dir, "sample_num=1,simulator_steps=0,seed=1,rebuild_optimizer_each_step=true,max_gradient_norm=0"
    )
    before = [p.detach().clone() for p in parity.model.parameters()]
    train_losses(parity, feed, data, steps=1)
    steps = torch.cat([(p.detach() - b).abs().flatten() for p, b in zip(parity.model.parameters(), before)])
    moved = steps[steps > 0]
    # A fresh Adagrad every step moves each parameter by lr * |g| / (|g| + 1e-10),
    # i.e. lr * sign(grad) except for vanishing gradients.
    assert moved.max().item() <= 0.05 * (1 + 1e-5)
    assert (moved > 0.05 * 0.999).double().mean().item() > 0.95


def test_max_propensity_weight_clamps(synthetic_data_dir):
    model, feed, data = build(synthetic_data_dir, "simulator_steps=0,max_propensity_weight=1.5")
    with torch.no_grad():
        model.propensity_model.linear_layer.weight.copy_(torch.linspace(0.0, -5.0, 10))
    batch = model.batch(feed.get_batch(data, check_validation=True)[0], 10)
    logits = model.propensity_model(batch.labels.t())
    weights = model.propensity_weights(logits, batch.mask)
    assert weights.max().item() == pytest.approx(1.5)
    assert torch.all(weights[~batch.mask] == 0)


def test_non_finite_loss_stops_naming_the_step(synthetic_data_dir, monkeypatch, device):
    model, feed, data = build(synthetic_data_dir, "simulator_steps=0,sample_num=1,device=%s" % device)
    train_losses(model, feed, data, steps=1)
    monkeypatch.setattr(
        model, "scores", lambda batch, ranker=None: torch.full(batch.mask.shape, float("nan"), device=batch.mask.device)
    )
    with pytest.raises(FloatingPointError, match="non-finite training loss nan at step 1"):
        train_losses(model, feed, data, steps=1)


@pytest.mark.parametrize(
    "hparams, message",
    [
        ("sample_nums=4", "unknown hyper-parameter 'sample_nums' \\(did you mean 'sample_num'\\?\\)"),
        ("sample_num=-1", "sample_num must be >= 0, got -1"),
        ("simulator_cell=rnn", "simulator_cell must be one of"),
        ("variant=ips", "variant: expected one of dr, eib, got 'ips'"),
        ("learning_rate=fast", "learning_rate: expected a number, got 'fast'"),
        ("propensity_update_every=0", "propensity_update_every must be >= 1, got 0"),
        ("propensity_update_every=4,propensity_ranker=multr",
         "propensity_update_every=4 thins the updates of propensity_ranker=dla's examination ranker; "
         "propensity_ranker=multr has none .*: set propensity_update_every=1 or propensity_ranker=dla"),
        ("propensity_updates_every=4", "did you mean 'propensity_update_every'"),
    ],
)
def test_bad_hyper_parameters_are_named(synthetic_data_dir, hparams, message):
    with pytest.raises(HParamError, match=message):
        build(synthetic_data_dir, hparams)


def test_validation_scores_and_metrics(synthetic_data_dir, device):
    model, _, data = build(synthetic_data_dir, "simulator_steps=0,device=%s" % device)
    input_feed, _ = ultra.input_layer.DirectLabelFeed(model, 16, "").get_next_batch(0, data)
    _, scores, summary = model.validation(input_feed)
    assert set(summary) == {"ndcg_10"} and 0.0 <= summary["ndcg_10"] <= 1.0
    assert scores.shape[1] == data.rank_list_size


def test_simulator_refuses_a_feed_of_relevance_labels(synthetic_data_dir):
    model, _, data = build(synthetic_data_dir, "simulator_steps=1,simulator_batch_size=8",
                           feed="ultra.input_layer.DirectLabelFeed", feed_hparams="")
    with pytest.raises(ValueError, match="labels other than 0/1"):
        model.prepare()
