"""ultra_multr.compat.settings_check: every hyper-parameter string of a settings file is checked by name."""
import re

import pytest
from conftest import require_ultra

from ultra_multr.config import HParamError


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


def test_ultras_own_example_settings_pass_but_those_naming_classes_it_lacks():
    """main.py's start checks every algorithm's settings file, ULTRA's too: its examples pass (``objective_metric``
    "" asks for none), but for those naming a class this ULTRA does not have (DLCM, SetRank, DBGDInterleave: main.py
    fails on them with ImportError)."""
    import glob
    import json
    import os

    ultra = require_ultra()
    from ultra_multr.compat.settings_check import SettingsError, check_settings_file

    examples = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(ultra.__file__))), "example")
    refused = {}
    for path in sorted(glob.glob(os.path.join(examples, "*_setting", "*.json"))):
        with open(path) as handle:
            settings = json.load(handle)
        try:
            check_settings_file(settings, path)
        except SettingsError as error:
            refused[os.path.relpath(path, examples)] = str(error)
    assert len(glob.glob(os.path.join(examples, "*_setting", "*.json"))) > len(refused) >= 1
    assert all(re.search(r"unknown class of ultra\.\w+ '(DLCM|SetRank|DBGDInterleave)'", why)
               for why in refused.values()), refused
