"""Typed hparam parsing and the ULTRA compatibility layer."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from typing import Optional, Tuple

import numpy as np
import pytest
from conftest import require_ultra, require
import torch

from ultra_multr.config import HParamError, format_hparams, parse_hparams, require


@dataclass(frozen=True)
class Example:
    rate: float = 0.1
    steps: int = 3
    flag: bool = False
    name: str = "a"
    sizes: Tuple[int, ...] = field(default_factory=tuple)
    seed: Optional[int] = None

    def __post_init__(self):
        require(self.steps >= 0, "steps must be >= 0, got %d" % self.steps)


def test_parse_types_lists_and_round_trip():
    config = parse_hparams(Example, "rate=0.5, steps=7,flag=True,name=b,sizes=[512, 256],seed=4")
    assert config == Example(0.5, 7, True, "b", (512, 256), 4)
    assert parse_hparams(Example, format_hparams(config)) == config
    assert parse_hparams(Example, "") == Example()


@pytest.mark.parametrize(
    "text, message",
    [
        ("rte=1", "unknown hyper-parameter 'rte' \\(did you mean 'rate'\\?\\)"),
        ("steps=2,steps=3", "'steps' is set twice"),
        ("flag=maybe", "flag: expected true or false"),
        ("steps=-2", "steps must be >= 0, got -2"),
        ("rate", "not of the form name=value"),
    ],
)
def test_parse_errors_name_the_culprit(text, message):
    with pytest.raises(HParamError, match=message):
        parse_hparams(Example, text, source="my_settings.json")


@pytest.mark.slow
def test_startup_hook_lets_ultra_import_without_tensorflow_and_removes_the_placeholder():
    require_ultra()
    code = (
        "import sys, ultra; "
        "from torch.utils.tensorboard import SummaryWriter; "
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


def test_boolean_main_flags_with_false_values_are_refused():
    require_ultra()
    from ultra_multr.compat.runtime import check_main_flags

    check_main_flags(["main.py", "--test_only", "True"])
    check_main_flags(["main.py", "--data_dir", "x"])
    for argv in (["main.py", "--test_only", "False"], ["main.py", "--test_while_train=0"]):
        with pytest.raises(ValueError, match="type=bool"):
            check_main_flags(argv)


def test_batch_from_input_feed_casts_ids_and_masks_padding():
    require_ultra()
    from ultra_multr.batch import batch_from_input_feed

    feed = {
        "letor_features": np.arange(6, dtype=np.float32).reshape(3, 2),
        "docid_input0": np.array([0, 2], dtype=np.float32),
        "docid_input1": np.array([1, 3], dtype=np.float32),  # 3 == number of docs: padding
        "label0": np.array([1, 0], dtype=np.float32),
        "label1": np.array([0, 1], dtype=np.float32),
    }
    batch = batch_from_input_feed(feed, ["docid_input0", "docid_input1"], ["label0", "label1"], torch.device("cpu"))
    assert batch.mask.tolist() == [[True, True], [True, False]]
    assert batch.features[1, 0].tolist() == [4.0, 5.0]
    assert batch.features[1, 1].tolist() == [0.0, 0.0]
    assert batch.labels.tolist() == [[1.0, 0.0], [0.0, 0.0]]  # no click on padding


# -- every hyper-parameter string of a settings file (ultra_multr.compat.settings_check) ---------------------------

SETTINGS_OF_ALL_KINDS = {
    "learning_algorithm": "ultra_multr.DLA", "learning_algorithm_hparams": "learning_rate=0.05,seed=0",
    "ranking_model": "ultra.ranking_model.DNN", "ranking_model_hparams": "hidden_layer_sizes=[16],activation_func=elu",
    "train_input_feed": "ultra_multr.feeds.ClickSimulationFeed", "train_input_hparams": "click_model_json=c.json,seed=0",
    "valid_input_feed": "ultra.input_layer.DirectLabelFeed", "valid_input_hparams": "use_max_candidate_num=True",
    "test_input_feed": "ultra.input_layer.DirectLabelFeed", "test_input_hparams": "",
}


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("ranking_model_hparams", "hidden_layer_size=[16]",
         r"ranking_model_hparams of s\.json \(ultra\.ranking_model\.DNN\): unknown hyper-parameter 'hidden_layer_size' "
         r"\(did you mean 'hidden_layer_sizes'\?\); known: activation_func, hidden_layer_sizes, norm"),
        ("valid_input_hparams", "use_max_candidates=True",
         r"valid_input_hparams of s\.json \(ultra\.input_layer\.DirectLabelFeed\): unknown hyper-parameter "
         r"'use_max_candidates' \(did you mean 'use_max_candidate_num'\?\)"),
        ("test_input_hparams", "use_max_candidate_num=True,lsit_size=10", r"test_input_hparams .*'lsit_size'"),
        ("train_input_hparams", "click_model_json=c.json,sed=0",
         r"train_input_hparams of s\.json \(ultra_multr\.feeds\.ClickSimulationFeed\): unknown hyper-parameter 'sed' "
         r"\(did you mean 'seed'\?\)"),
        ("train_input_hparams", "click_model_json=c.json,seed=x", r"train_input_hparams .*: seed: expected an integer"),
        ("learning_algorithm_hparams", "learning_rate=0.05,max_propensity_wieght=5",
         r"learning_algorithm_hparams of s\.json \(ultra_multr\.DLA\): unknown hyper-parameter 'max_propensity_wieght' "
         r"\(did you mean 'max_propensity_weight'\?\)"),
    ],
)
def test_every_hparam_string_of_a_settings_file_is_checked_by_name(key, value, message):
    require_ultra()
    from ultra_multr.compat.settings_check import check_settings_hparams

    check_settings_hparams(dict(SETTINGS_OF_ALL_KINDS), "s.json")
    with pytest.raises(HParamError, match=message):
        check_settings_hparams(dict(SETTINGS_OF_ALL_KINDS, **{key: value}), "s.json")


def test_ultra_algorithms_hparam_names_come_from_their_defaults():
    """ULTRA's own algorithms (trained with one of our feeds) are checked too, by the HParams of their __init__."""
    require_ultra()
    from ultra_multr.compat.settings_check import check_settings_hparams, ultra_hparam_names
    import ultra

    assert {"learning_rate", "max_propensity_weight", "loss_func"} <= ultra_hparam_names(ultra.learning_algorithm.DLA)
    settings = dict(SETTINGS_OF_ALL_KINDS, learning_algorithm="ultra.learning_algorithm.DLA",
                    learning_algorithm_hparams="learning_rate=0.05,max_propensity_weigth=10")
    with pytest.raises(HParamError, match=r"\(ultra\.learning_algorithm\.DLA\): unknown hyper-parameter "
                       r"'max_propensity_weigth' \(did you mean 'max_propensity_weight'\?\)"):
        check_settings_hparams(settings, "s.json")
