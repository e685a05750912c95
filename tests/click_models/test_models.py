"""Click models: closed forms, exact likelihoods, ULTRA compatibility, loader."""
import glob
import itertools
import json
import math
import os
import random

import pytest
from conftest import REPO_ROOT as REPO, require_ultra
import torch

from ultra_multr import click_models as cm

# Monte-Carlo tolerance in binomial standard deviations; every test is
# seeded, so this only guards against an unlucky choice of seed.
Z = 4.5

# ULTRA's user-browsing table (example/ClickModel/ubm_0.1_1_4_1.0.json), the
# shape of real UBM parameters.
UBM_TABLE = [
    [1.0], [0.98, 1.0], [1.0, 0.62, 0.95], [1.0, 0.77, 0.42, 0.82], [1.0, 0.92, 0.55, 0.31, 0.69],
    [1.0, 0.96, 0.63, 0.4, 0.22, 0.54], [1.0, 0.99, 0.73, 0.46, 0.29, 0.17, 0.47],
    [1.0, 1.0, 0.89, 0.52, 0.35, 0.24, 0.14, 0.43], [1.0, 1.0, 0.95, 0.68, 0.4, 0.29, 0.19, 0.12, 0.41],
    [1.0, 1.0, 1.0, 0.96, 0.52, 0.36, 0.27, 0.18, 0.12, 0.43],
]
CLICK_PROB = [0.1, 0.16, 0.28, 0.52, 1.0]


def paper_relevance(y, y_max, eps=0.1):
    return eps + (1 - eps) * (2 ** y - 1) / (2 ** y_max - 1)


def all_models():
    return {
        "pbm": cm.PositionBasedModel(CLICK_PROB, cm.reciprocal_rank_exam_prob(1.0, 6)),
        "cascade": cm.CascadeModel(CLICK_PROB),
        "cascade_exam": cm.CascadeModel(CLICK_PROB, [1.0, 0.9, 0.7, 0.5]),
        "dcm": cm.DependentClickModel(CLICK_PROB, [0.8, 0.6, 0.4, 0.3], [1.0, 0.95, 0.9]),
        "ubm": cm.UserBrowsingModel(CLICK_PROB, UBM_TABLE),
    }


def random_lists(batch, n, seed, max_label=4):
    """Labels and a mask with padding at the tail *and* in the middle."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, max_label + 1, (batch, n), generator=generator).float()
    mask = torch.ones(batch, n, dtype=torch.bool)
    mask[0, n - 3 :] = False
    if batch > 1:
        mask[1, 2] = False
    labels = torch.where(mask, labels, torch.zeros_like(labels))
    return labels, mask


@pytest.mark.parametrize("name", sorted(all_models()))
def test_empirical_click_rates_match_closed_form(name):
    model = all_models()[name]
    labels, mask = random_lists(3, 12, seed=1)
    samples = 20000
    clicks = model.sample(labels.repeat(samples, 1), mask.repeat(samples, 1), torch.Generator().manual_seed(2))
    rates = clicks.view(samples, 3, 12).double().mean(dim=0)
    expected = model.click_probabilities(labels, mask)
    tolerance = Z * torch.sqrt(expected * (1 - expected) / samples) + 1e-12
    assert torch.all((rates - expected).abs() <= tolerance), (rates - expected)
    assert torch.all(rates[~mask] == 0) and torch.all(expected[~mask] == 0)


@pytest.mark.parametrize("y_max", [2, 4])
def test_cascade_is_the_paper_protocol(y_max):
    model = cm.CascadeModel(cm.graded_click_prob(0.1, y_max))
    labels = torch.tensor([[float(y_max), 0.0, 1.0, float(y_max - 1), 0.0]])
    mask = torch.ones_like(labels, dtype=torch.bool)
    r = [paper_relevance(int(y), y_max) for y in labels[0]]
    expected = [r[t] * math.prod(1 - r[s] for s in range(t)) for t in range(5)]
    assert model.click_probabilities(labels, mask)[0].tolist() == pytest.approx(expected, abs=1e-12)
    # The first click ends the session.
    clicks = model.sample(labels.repeat(5000, 1), mask.repeat(5000, 1), torch.Generator().manual_seed(0))
    assert clicks.sum(dim=1).max() == 1


@pytest.mark.parametrize("name", sorted(all_models()))
def test_log_likelihood_is_an_exact_distribution(name):
    model = all_models()[name]
    n = 5
    labels, mask = random_lists(3, n, seed=3)
    sessions = torch.tensor(list(itertools.product([0.0, 1.0], repeat=n)))
    for b in range(3):
        repeated_labels = labels[b : b + 1].expand(len(sessions), n)
        repeated_mask = mask[b : b + 1].expand(len(sessions), n)
        probs = model.log_likelihood(repeated_labels, sessions, repeated_mask).exp()
        assert float(probs.sum()) == pytest.approx(1.0, abs=1e-12)
        # The likelihood implies the closed-form marginals.
        marginals = (probs[:, None] * sessions.double()).sum(dim=0)
        assert marginals.tolist() == pytest.approx(model.click_probabilities(labels, mask)[b].tolist(), abs=1e-12)
        # Clicks on padded slots are impossible.
        assert torch.all(probs[(sessions.bool() & ~repeated_mask).any(dim=1)] == 0)


def test_dcm_spans_cascade_and_independent_clicks():
    labels, mask = random_lists(4, 6, seed=4)
    sessions = torch.bernoulli(torch.full((4, 6), 0.3), generator=torch.Generator().manual_seed(5)) * mask
    never_go_on = cm.DependentClickModel(CLICK_PROB, [0.0])
    always_go_on = cm.DependentClickModel(CLICK_PROB, [1.0])
    cascade = cm.CascadeModel(CLICK_PROB)
    independent = cm.PositionBasedModel(CLICK_PROB, [1.0])
    assert torch.equal(
        never_go_on.log_likelihood(labels, sessions, mask), cascade.log_likelihood(labels, sessions, mask)
    )
    assert always_go_on.log_likelihood(labels, sessions, mask).tolist() == pytest.approx(
        independent.log_likelihood(labels, sessions, mask).tolist(), abs=1e-12
    )


def test_labels_outside_the_range_are_refused():
    model = cm.CascadeModel(cm.graded_click_prob(0.1, 2))
    mask = torch.tensor([[True, True, False]])
    with pytest.raises(cm.LabelRangeError, match="label 3 .* 0..2"):
        model.relevance(torch.tensor([[1.0, 3.0, 0.0]]), mask)
    with pytest.raises(cm.LabelRangeError, match="label 1.5"):
        model.relevance(torch.tensor([[1.5, 0.0, 0.0]]), mask)
    # A padded slot's label is never read.
    assert model.relevance(torch.tensor([[2.0, 0.0, 99.0]]), mask)[0, 2] == 0
    with pytest.raises(cm.LabelRangeError, match="my data: labels reach 4 .* 0..2"):
        model.check_max_label(4.0, "my data")
    model.check_max_label(2.0, "my data")


def test_with_eta_rescales_position_bias():
    eta1 = cm.PositionBasedModel(CLICK_PROB, cm.reciprocal_rank_exam_prob(1.0, 10), eta=1.0)
    assert eta1.with_eta(2.0).exam_prob.tolist() == pytest.approx(cm.reciprocal_rank_exam_prob(2.0, 10))
    ubm = cm.UserBrowsingModel(CLICK_PROB, UBM_TABLE)
    assert ubm.with_eta(0.5).exam_table[3].tolist() == pytest.approx([x ** 0.5 for x in UBM_TABLE[3]])


@pytest.mark.parametrize("name", sorted(all_models()))
def test_description_round_trip(name):
    model = all_models()[name]
    desc = json.loads(json.dumps(model.describe()))
    assert cm.click_model_from_description(desc).describe() == model.describe()


def test_description_with_a_typo_is_refused():
    with pytest.raises(ValueError, match="unknown \\['continue_prob'\\].*continuation_prob"):
        cm.click_model_from_description(
            {"model_name": "dependent_click_model", "click_prob": [0.1, 1.0], "continue_prob": [0.5]}
        )
    with pytest.raises(ValueError, match="unknown click model_name 'pbm'; available: cascade_model"):
        cm.click_model_from_description({"model_name": "pbm"})


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(REPO, "settings", "click_models", "*.json"))))
def test_shipped_settings_follow_the_protocol(path):
    with open(path) as handle:
        desc = json.load(handle)
    model = cm.click_model_from_description(desc)
    y_max = model.max_label
    assert "ymax%d" % y_max in os.path.basename(path)
    assert model.click_prob.tolist() == pytest.approx([paper_relevance(y, y_max) for y in range(y_max + 1)])
    if desc["model_name"] == "cascade_model":
        assert model.exam_prob.tolist() == [1.0] * 10
    else:
        eta = desc["eta"]
        assert "eta%d" % eta in os.path.basename(path)
        assert model.exam_prob.tolist() == pytest.approx([(1.0 / r) ** eta for r in range(1, 11)])


# -- ULTRA adapters ------------------------------------------------------------


@pytest.fixture
def adapters():
    require_ultra()
    from ultra_multr.click_models import ultra as ultra_click_models

    return ultra_click_models


def ultra_descriptions():
    return {
        "pbm": {"model_name": "position_biased_model", "eta": 1.0, "click_prob": CLICK_PROB,
                "exam_prob": [0.68, 0.61, 0.48, 0.34, 0.28, 0.2, 0.11, 0.1, 0.08, 0.06]},
        "cascade": {"model_name": "cascade_model", "eta": 1.0, "click_prob": CLICK_PROB, "exam_prob": [1.0] * 10},
        "ubm": {"model_name": "user_browsing_model", "eta": 1.0, "click_prob": CLICK_PROB, "exam_prob": UBM_TABLE},
        "dcm": {"model_name": "ultra_multr.click_models.ultra.DependentClickModel", "click_prob": CLICK_PROB,
                "continuation_prob": [0.7, 0.5]},
    }


@pytest.mark.parametrize("name", ["pbm", "cascade", "ubm"])
def test_same_click_rates_as_ultras_own_models(adapters, name):
    """ULTRA's JSON semantics are kept: ULTRA's own sampler agrees with our closed form,
    on lists longer than ULTRA's tables."""
    from ultra.utils import click_models as ultra_cm

    desc = ultra_descriptions()[name]
    labels = [4, 0, 2, 1, 3, 0, 4, 1, 0, 2, 3, 1]
    random.seed(7)
    original = ultra_cm.loadModelFromJson(dict(desc))
    samples = 15000
    totals = [0] * len(labels)
    for _ in range(samples):
        for t, click in enumerate(original.sampleClicksForOneList(list(labels))[0]):
            totals[t] += click
    ours = adapters.load_click_model(dict(desc)).model
    as_tensor = torch.tensor([labels], dtype=torch.float32)
    expected = ours.click_probabilities(as_tensor, torch.ones_like(as_tensor, dtype=torch.bool))[0]
    for t, p in enumerate(expected.tolist()):
        assert abs(totals[t] / samples - p) <= Z * math.sqrt(p * (1 - p) / samples) + 1e-12, t


@pytest.mark.parametrize("name", sorted(ultra_descriptions()))
def test_per_list_and_batch_samplers_agree(adapters, name):
    model = adapters.load_click_model(ultra_descriptions()[name], torch.Generator().manual_seed(11))
    labels = [3.0, 0.0, 4.0, 1.0]
    samples = 3000
    per_list = torch.tensor([model.sampleClicksForOneList(labels)[0] for _ in range(samples)])
    batch = model.sample_clicks(torch.tensor([labels] * samples), torch.ones(samples, 4, dtype=torch.bool))
    # Compare the frequency of every one of the 16 possible sessions.
    codes = torch.tensor([8, 4, 2, 1], dtype=torch.float32)
    for pattern in range(16):
        p1 = float(((per_list @ codes) == pattern).double().mean())
        p2 = float(((batch @ codes) == pattern).double().mean())
        pooled = (p1 + p2) / 2
        assert abs(p1 - p2) <= Z * math.sqrt(2 * pooled * (1 - pooled) / samples) + 1e-12, pattern


def test_per_list_api_returns_ultras_triple(adapters):
    model = adapters.load_click_model(ultra_descriptions()["cascade"], torch.Generator().manual_seed(0))
    clicks, exam_p, click_p = model.sampleClicksForOneList([0, 4, 0])
    assert click_p == pytest.approx([0.1, 1.0, 0.1])
    # Label 4 is always clicked and ends the session unless label 0 was clicked first.
    first = clicks.index(1)
    assert exam_p == [1.0] * (first + 1) + [0.0] * (2 - first)
    with pytest.raises(cm.LabelRangeError):
        model.sampleClicksForOneList([5, 0, 0])


@pytest.mark.parametrize("name", ["pbm", "cascade", "ubm"])
def test_model_json_is_readable_by_ultra(adapters, name):
    from ultra.utils import click_models as ultra_cm

    model = adapters.load_click_model(ultra_descriptions()[name])
    assert isinstance(model, ultra_cm.ClickModel)
    again = ultra_cm.loadModelFromJson(model.getModelJson())
    assert again.model_name == model.model_name
    assert again.click_prob == pytest.approx(model.click_prob)
    assert json.dumps(again.exam_prob) == json.dumps(model.exam_prob)


def test_dynamic_eta_change_as_ultras_feeds_do_it(adapters):
    model = adapters.load_click_model(ultra_descriptions()["pbm"])
    model.eta += 1.0
    model.setExamProb(model.eta)
    assert model.eta == 2.0
    assert model.exam_prob == pytest.approx([x ** 2 for x in ultra_descriptions()["pbm"]["exam_prob"]])


def test_loader_accepts_dotted_paths_and_lists_available_ones(adapters):
    dcm = adapters.load_click_model(ultra_descriptions()["dcm"])
    assert isinstance(dcm, adapters.DependentClickModel)
    assert dcm.getModelJson()["model_name"] == "ultra_multr.click_models.ultra.DependentClickModel"
    with pytest.raises(ValueError, match="'my_model' is unknown; available: .*cascade_model.*DependentClickModel"):
        adapters.load_click_model({"model_name": "my_model"})
    with pytest.raises(ValueError, match="is not a subclass of ultra_multr.click_models.ultra.UltraClickModel"):
        adapters.load_click_model({"model_name": "ultra_multr.click_models.CascadeModel", "click_prob": [0.1, 1.0]})
    with pytest.raises(ValueError, match="unknown \\['exam'\\]"):
        adapters.load_click_model({"model_name": "cascade_model", "click_prob": [0.1, 1.0], "exam": [1.0]})


def test_registration_hook_takes_a_lazy_dotted_path(adapters):
    """How a learned simulator plugs in: a subclass reading its own JSON keys."""
    path = "ultra_multr.click_models.ultra.DependentClickModel"
    adapters.register_click_model("dcm_alias_for_test", path)
    assert "dcm_alias_for_test" in adapters.available_click_models()
    model = adapters.load_click_model(dict(ultra_descriptions()["dcm"], model_name="dcm_alias_for_test"))
    assert isinstance(model, adapters.DependentClickModel)
