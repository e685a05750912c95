"""ultra_multr.experiments.methods: the registry of the runner's methods."""
import pytest

from ultra_multr.experiments import methods as registry


def test_method_registry_settings_and_unknown_method():
    params = registry.RunParameters("d", "f", 0, registry.DEFAULT_SECTIONS)
    oracle = registry.get_method("oracle").make_settings(params)
    assert oracle["train_input_hparams"] == "oracle_mode=True"
    assert oracle["ranking_model_hparams"] == "hidden_layer_sizes=[512,256,128]"
    rand = registry.get_method("rand_multr").make_settings(params)
    assert rand["learning_algorithm"] == "ultra_multr.MULTR"
    assert "simulator_steps=0" in rand["learning_algorithm_hparams"].split(",")
    assert registry.known_methods()[:9] == [
        "oracle", "multr", "dla", "rem", "paird", "pal", "naive", "rand_multr", "eib_multr",
    ]
    with pytest.raises(registry.UnknownMethodError, match="known methods: oracle, multr, dla"):
        registry.get_method("mulrt")
    with pytest.raises(ValueError, match="cannot hold"):
        registry.format_hparams({"path": "a,b"})


def test_every_registered_method_gives_hyper_parameters_its_algorithm_accepts():
    """A registry row with a misspelt or refused hyper-parameter would fail only when its runs start."""
    from conftest import require_ultra

    ultra = require_ultra()
    from ultra_multr.config import parse_hparams

    params = registry.RunParameters("d", "f", 0, registry.DEFAULT_SECTIONS)
    for name in registry.known_methods():
        settings = registry.get_method(name).make_settings(params)
        algorithm = ultra.utils.find_class(settings["learning_algorithm"])
        parse_hparams(algorithm.config_class, settings["learning_algorithm_hparams"])
    # the logger guard is MULTR's default ("multr" names none); "multr_unguarded" switches it off
    multr = registry.get_method("multr").make_settings(params)["learning_algorithm_hparams"]
    assert parse_hparams(ultra.utils.find_class("ultra_multr.MULTR").config_class, multr).guards.logger_guard == "order_fit"
    unguarded = registry.get_method("multr_unguarded").make_settings(params)
    assert "logger_guard=none" in unguarded["learning_algorithm_hparams"].split(",")
