"""ultra_multr.click_models.ultra: our click models as ULTRA's (its JSON, its samplers' API, its feeds' eta
changes), the loader and the registration hook."""
import json
import math
import random

import pytest
import torch
from conftest import require_ultra

from click_model_tables import CLICK_PROB, UBM_TABLE, Z
from ultra_multr import click_models as cm


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
