"""Table 2's baselines and MULTR on IPW inside ULTRA: settings files, algorithm behaviour.

Their pure math is tested in tests/losses/test_baseline_losses.py; every settings file goes through main.py in
tests/test_settings_and_demo.py.
"""
from __future__ import annotations

import glob
import json
import math
import os

import pytest
import torch

from conftest import REPO_ROOT, require_ultra
from ultra_multr import losses

SETTINGS_DIR = os.path.join(REPO_ROOT, "settings")

ultra = require_ultra()

from ultra_multr.algorithms.ipw import IPW  # noqa: E402  (needs ULTRA)
from ultra_multr.algorithms.naive import Naive  # noqa: E402  (needs ULTRA)
from ultra_multr.batch import Batch  # noqa: E402
from ultra_multr.config import HParamError, split_assignments  # noqa: E402

PBM_ETA1 = os.path.join(SETTINGS_DIR, "click_models", "pbm_eta1_eps0.1_ymax4.json")
CASCADE = os.path.join(SETTINGS_DIR, "click_models", "cascade_eps0.1_ymax4.json")
SETTINGS_FILES = sorted(glob.glob(os.path.join(SETTINGS_DIR, "*.json")))


def test_table_2_settings_files_are_present():
    names = {os.path.basename(p)[: -len(".json")] for p in SETTINGS_FILES}
    for method in ("naive", "oracle", "dla", "rem", "paird", "pal", "ipw", "multr_ipw", "rand_multr", "eib_multr"):
        assert any(n.startswith(method + "_") for n in names), method


def override_hparams(text, **values):
    """An hparam string with some names set (replaced if present, appended if not)."""
    pairs = dict(assignment.split("=", 1) for assignment in split_assignments(text))
    pairs.update((name, str(value)) for name, value in values.items())
    return ",".join("%s=%s" % item for item in pairs.items())


def load_settings(path, **hparams):
    """A settings file with absolute click-model paths, a small ranker and ``hparams`` set."""
    with open(path) as handle:
        settings = json.load(handle)
    settings["train_input_hparams"] = settings["train_input_hparams"].replace(
        "click_model_json=", "click_model_json=%s/" % os.path.dirname(path)
    )
    settings["ranking_model_hparams"] = "hidden_layer_sizes=[16]"
    settings["learning_algorithm_hparams"] = override_hparams(settings["learning_algorithm_hparams"], **hparams)
    return settings


def quick_hparams(path):
    """Test-sized simulator hparams for MULTR-like settings (Rand-MULTR keeps its 0 steps), the logger guard off:
    the suite's log orders by the label plus noise on 60 training queries, so the guard (MULTR's default) would fire
    and each MULTR file would train as DLA."""
    with open(path) as handle:
        text = json.load(handle)["learning_algorithm_hparams"]
    if "simulator_steps=" not in text:
        return {}
    steps = 0 if "simulator_steps=0" in text else 3
    return {"simulator_steps": steps, "simulator_batch_size": 8, "sample_num": 2, "logger_guard": "none"}


def build(data_dir, settings, cutoff=10, batch_size=16):
    """The algorithm and training feed of a settings dict, wired as main.py wires them."""
    data = ultra.utils.read_data(data_dir, "train", None, 0)
    settings = dict(settings, max_candidate_num=data.rank_list_size, selection_bias_cutoff=cutoff)
    data.pad(data.rank_list_size)
    model = ultra.utils.find_class(settings["learning_algorithm"])(data, settings)
    feed = ultra.utils.find_class(settings["train_input_feed"])(model, batch_size, settings["train_input_hparams"])
    return model, feed, data


def validation_batch(model, data):
    """A batch of whole candidate lists with relevance labels, as main.py validates."""
    return ultra.input_layer.DirectLabelFeed(model, 16, "").get_next_batch(0, data)[0]


def algorithm_settings(algorithm, hparams, feed_hparams="click_model_json=%s,seed=0" % CASCADE):
    return dict(
        load_settings(os.path.join(SETTINGS_DIR, "naive_cascade.json")),
        learning_algorithm=algorithm,
        learning_algorithm_hparams=hparams,
        train_input_hparams=feed_hparams,
    )


@pytest.mark.parametrize("path", SETTINGS_FILES, ids=lambda p: os.path.basename(p))
def test_every_settings_file_builds_and_trains(synthetic_data_dir, path, device):
    model, feed, data = build(synthetic_data_dir, load_settings(path, device=device, **quick_hparams(path)))
    assert {p.device.type for p in model.model.parameters()} == {device}
    for _ in range(2):
        loss, _, _ = model.train(feed.get_batch(data, check_validation=True)[0])
        assert math.isfinite(loss)
    _, scores, summary = model.validation(validation_batch(model, data))
    assert 0.0 <= summary["ndcg_10"] <= 1.0


def test_oracle_settings_train_naive_on_graded_labels(synthetic_data_dir):
    model, feed, data = build(synthetic_data_dir, load_settings(os.path.join(SETTINGS_DIR, "oracle_labels.json")))
    assert isinstance(model, Naive)
    input_feed, _ = feed.get_batch(data, check_validation=True)
    batch = model.batch(input_feed, model.rank_list_size)
    assert batch.labels.max() > 1  # relevance grades, not clicks
    weights = batch.mask.float()
    expected = losses.dla_softmax_loss(model.scores(batch), batch.labels, weights, batch.mask)
    assert model.training_loss(batch)[0].item() == pytest.approx(expected.item())


def garbage_in_padding(batch: Batch) -> Batch:
    noise = torch.randn(batch.features.shape, generator=torch.Generator().manual_seed(3)).to(batch.features.device)
    noise = noise * 10
    features = torch.where(batch.mask[..., None], batch.features, noise)
    labels = torch.where(batch.mask, batch.labels, torch.ones_like(batch.labels))
    return Batch(features=features, labels=labels, mask=batch.mask)


@pytest.mark.parametrize(
    "algorithm, hparams",
    [
        ("ultra_multr.Naive", "seed=2"),
        ("ultra_multr.REM", "seed=2"),
        ("ultra_multr.PairD", "seed=2"),
        ("ultra_multr.PAL", "seed=2"),
        ("ultra_multr.IPW", "seed=2,propensities=[1,0.5,0.4,0.3,0.25,0.2,0.2,0.1,0.1,0.1]"),
    ],
)
def test_padding_never_reaches_the_loss(tmp_path, algorithm, hparams, device):
    from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset

    data_dir = write_synthetic_ultra_dataset(str(tmp_path), docs_per_query=(4, 12))  # many padded slots
    settings = algorithm_settings(algorithm, "%s,device=%s" % (hparams, device))
    model, feed, data = build(data_dir, settings)
    batch = model.batch(feed.get_batch(data, check_validation=True)[0], 10)
    assert not batch.mask.all()
    clean, _ = model.training_loss(batch)
    dirty, _ = build(data_dir, settings)[0].training_loss(garbage_in_padding(batch))  # same seed, fresh state
    assert dirty.item() == pytest.approx(clean.item(), rel=1e-6)


def test_rem_updates_examination_and_paird_its_biases(synthetic_data_dir):
    rem, feed, data = build(synthetic_data_dir, algorithm_settings("ultra_multr.REM", "seed=0,EM_step_size=0.5"))
    paird, _, _ = build(synthetic_data_dir, algorithm_settings("ultra_multr.PairD", "seed=0,EM_step_size=0.5"))
    for _ in range(3):
        input_feed = feed.get_batch(data, check_validation=True)[0]
        rem.train(input_feed)
        paird.train(input_feed)
    # cascade clicks: lower positions are clicked less, so they look less examined
    assert rem.examination[0] > rem.examination[-1]
    assert paird.t_plus[0] == 1.0 and paird.t_minus[0] == 1.0
    assert not torch.equal(paird.t_plus, torch.ones_like(paird.t_plus))


def test_pal_trains_both_towers_and_ranks_by_relevance_only(synthetic_data_dir, device):
    pal, feed, data = build(synthetic_data_dir, algorithm_settings("ultra_multr.PAL", "seed=0,device=%s" % device))
    pal.train(feed.get_batch(data, check_validation=True)[0])
    assert pal.position_model.logits.device.type == device
    assert not torch.equal(pal.position_model.logits.detach(), torch.zeros(10, device=device))
    input_feed = validation_batch(pal, data)
    _, scores, _ = pal.validation(input_feed)
    batch = pal.batch(input_feed, pal.max_candidate_num)
    assert torch.equal(torch.from_numpy(scores).to(device)[batch.mask], pal.scores(batch)[batch.mask])


def test_ipw_propensities_come_from_the_position_based_feed(synthetic_data_dir, device):
    ipw, _, _ = build(
        synthetic_data_dir,
        algorithm_settings("ultra_multr.IPW", "device=%s" % device, "click_model_json=%s,seed=0" % PBM_ETA1),
    )
    assert ipw.examination.device.type == device
    assert torch.allclose(ipw.examination.cpu(), torch.tensor([1.0 / r for r in range(1, 11)]))


@pytest.mark.parametrize(
    "hparams, feed, message",
    [
        ("", "click_model_json=%s,seed=0" % CASCADE, "cascade_model.*depends on more than the position.*propensities="),
        ("", "oracle_mode=true", "needs position propensities: set propensities"),
        ("propensities=[1,0.5]", "oracle_mode=true", "propensities has 2 values but the displayed list has 10"),
        ("propensities=[1,0.5],propensity_json=x.json", "oracle_mode=true", "not both"),
        ("propensities=[1,1.5]", "oracle_mode=true", "propensities must be in \\(0, 1\\]"),
    ],
)
def test_ipw_refuses_missing_or_mismatched_propensities(synthetic_data_dir, hparams, feed, message):
    with pytest.raises(ValueError, match=message):
        build(synthetic_data_dir, algorithm_settings("ultra_multr.IPW", hparams, feed))


def test_bad_baseline_hparams_are_named(synthetic_data_dir):
    with pytest.raises(HParamError, match="EM_step_size must be in"):
        build(synthetic_data_dir, algorithm_settings("ultra_multr.REM", "EM_step_size=0"))
    with pytest.raises(HParamError, match="unknown hyper-parameter 'regulation'.*regulation_p"):
        build(synthetic_data_dir, algorithm_settings("ultra_multr.PairD", "regulation=2"))


@pytest.mark.parametrize("normalization", ["batch_weight", "none"])
def test_multr_ipw_is_the_dr_loss_over_ipw_weights(synthetic_data_dir, monkeypatch, device, normalization):
    """With pseudo clicks all 0 and no re-rankings, Eq. dr_loss is the IPW-weighted listwise loss with IPW's own
    weights: divided by the batch's weight by default, as IPW's own loss (ULTRA's softmax_loss, up to its 1e-7 label
    smoothing), averaged over queries with dr_normalization=none."""
    settings = algorithm_settings(
        "ultra_multr.MULTR_IPW",
        "seed=0,sample_num=0,rerank_weight=0,simulator_steps=0,dr_normalization=%s,device=%s" % (normalization, device),
        "click_model_json=%s,seed=0" % PBM_ETA1,
    )
    model, feed, data = build(synthetic_data_dir, settings)
    assert isinstance(model, IPW) and not hasattr(model, "propensity_model")
    batch = model.batch(feed.get_batch(data, check_validation=True)[0], 10)
    model.prepare()
    monkeypatch.setattr(
        model.doubly_robust,
        "pseudo_clicks",
        lambda b: (torch.zeros_like(b.labels), b.labels.new_zeros(b.batch_size, 0, b.labels.shape[1])),
    )
    loss, parts = model.training_loss(batch)
    scores = model.scores(batch)
    weights = torch.where(batch.mask, torch.arange(1.0, 11.0, device=scores.device).expand_as(scores), torch.zeros_like(scores))
    if normalization == "none":
        expected = losses.ipw_loss(scores, batch.mask, batch.labels, weights)
    else:
        expected = IPW.ranking_loss(model, batch, scores, weights)[0]
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert "exam_loss" not in parts


def test_multr_ranking_loss_is_the_dr_loss_and_logs_the_share_of_negative_weights(
    synthetic_data_dir, monkeypatch, device
):
    """MULTR's ranking loss is losses.DoublyRobustLoss under the "clip" guard, with pseudo clicks on the
    observed and the re-ranked lists, on a batch where c^o = 1, c = 0 and a large w make the paper's weight
    W_d = [c^o_d + sum_s c^s_d + (c_d - c^o_d) w_d] / (S + 1) negative; the negative_weight_share it
    logs is the share of real documents with W_d < 0."""
    settings = algorithm_settings(
        "ultra_multr.MULTR",
        "seed=0,sample_num=2,rerank_weight=paper,imputation=sampled,dr_weight_guard=clip,simulator_steps=0,device=%s"
        % device,
    )
    model, feed, data = build(synthetic_data_dir, settings)
    assert model.hparams.dr.dr_weight_guard == "clip" and model.hparams.dr.imputation == "sampled"
    model.prepare()
    batch = model.batch(feed.get_batch(data, check_validation=True)[0], 10)
    mask = batch.mask
    generator = torch.Generator().manual_seed(4)
    shape, samples = tuple(mask.shape), 2
    clicks = (torch.rand(shape, generator=generator) < 0.3).float().to(mask.device) * mask
    observed = (torch.rand(shape, generator=generator) < 0.5).float().to(mask.device) * mask
    randomized = (torch.rand((shape[0], samples) + shape[1:], generator=generator) < 0.5).float().to(mask.device)
    randomized = randomized * mask.unsqueeze(1)
    weights = (1.0 + 9.0 * torch.rand(shape, generator=generator)).to(mask.device) * mask
    batch = Batch(features=batch.features, labels=clicks, mask=mask)
    monkeypatch.setattr(model.doubly_robust, "pseudo_clicks", lambda b: (observed, randomized))
    scores = model.scores(batch)

    loss, parts = model.ranking_loss(batch, scores, weights)

    expected, _ = losses.DoublyRobustLoss(guard="clip", rerank_weight=2 / 3)(scores, mask, clicks, observed, randomized,
                                                                           weights)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    negative = 0
    for b, d in mask.nonzero().tolist():
        paper_weight = (
            observed[b, d] + randomized[b, :, d].sum() + (clicks[b, d] - observed[b, d]) * weights[b, d]
        ) / (samples + 1)
        negative += int(paper_weight < 0)
    share = negative / int(mask.sum())
    assert 0 < share < 1  # the guard acts on some documents and not on all
    assert parts["negative_weight_share"] == pytest.approx(share)
    unguarded, _ = losses.DoublyRobustLoss(guard="none")(scores, mask, clicks, observed, randomized, weights)
    assert unguarded.item() != pytest.approx(expected.item(), rel=1e-3)  # ... so it matters which one is used
