"""main.py's --model_dir rules (compat/model_dir.py) and device-free ranker checkpoints.

Runs of ULTRA's main.py are in tests/algorithms/test_multr.py; here the checks are called
with main.py's arguments directly.
"""
from __future__ import annotations

import argparse
import os
import re

import pytest
from conftest import require_ultra
import torch

require_ultra()

from ultra_multr.compat.model_dir import ModelDirError, check_model_dir, checkpoint_path  # noqa: E402
from ultra_multr.compat.runtime import create_ranking_model, score_documents  # noqa: E402
from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset  # noqa: E402

SETTINGS = {
    "learning_algorithm": "ultra_multr.Naive",
    "learning_algorithm_hparams": "seed=0",
    "ranking_model": "ultra.ranking_model.DNN",
    "ranking_model_hparams": "hidden_layer_sizes=[8]",
}


def args_for(model_dir, data_dir, test_only=False):
    """main.py's parsed arguments, as far as the checks read them."""
    return argparse.Namespace(
        model_dir=str(model_dir), data_dir=data_dir, train_data_prefix="train", valid_data_prefix="valid",
        click_model_dir=None, batch_size=16, max_list_cutoff=0, test_only=test_only, max_train_iteration=10,
    )


@pytest.fixture
def trained_dir(tmp_path):
    """A model dir after a training: identity written at start, checkpoint saved by main.py."""
    data_dir = write_synthetic_ultra_dataset(str(tmp_path / "data"), {"train": 4, "valid": 2}, n_features=5)
    model_dir = tmp_path / "model"
    check_model_dir(args_for(model_dir, data_dir), dict(SETTINGS), 5)
    torch.save(create_ranking_model(SETTINGS, 5, torch.device("cpu")).state_dict(),
               checkpoint_path(str(model_dir), SETTINGS["learning_algorithm"]))
    return model_dir, data_dir


def test_a_restarted_training_is_refused_with_the_restart_hint(trained_dir):
    model_dir, data_dir = trained_dir
    with pytest.raises(ModelDirError, match="same data and settings.*cannot resume.*delete .*ultra_multr.Naive.ckpt"):
        check_model_dir(args_for(model_dir, data_dir), dict(SETTINGS), 5)


def test_a_checkpoint_of_other_data_or_settings_is_refused_naming_what_differs(trained_dir, tmp_path):
    model_dir, data_dir = trained_dir
    other = write_synthetic_ultra_dataset(str(tmp_path / "other"), {"train": 4, "valid": 2}, n_features=5, seed=1)
    with pytest.raises(ModelDirError, match=r"other data or settings \(differ: data_dir, data_sha256\)"):
        check_model_dir(args_for(model_dir, other), dict(SETTINGS), 5)
    changed = dict(SETTINGS, learning_algorithm_hparams="seed=1")
    with pytest.raises(ModelDirError, match=r"differ: settings.learning_algorithm_hparams\)"):
        check_model_dir(args_for(model_dir, data_dir), changed, 5)


def test_a_checkpoint_without_identity_is_refused_as_of_unknown_origin(trained_dir):
    model_dir, data_dir = trained_dir
    os.remove(checkpoint_path(str(model_dir), SETTINGS["learning_algorithm"]) + ".identity.json")
    with pytest.raises(ModelDirError, match="of unknown origin"):
        check_model_dir(args_for(model_dir, data_dir), dict(SETTINGS), 5)


def test_an_identity_file_of_invalid_json_is_reported_as_unreadable_not_missing(trained_dir, caplog):
    model_dir, data_dir = trained_dir
    identity = checkpoint_path(str(model_dir), SETTINGS["learning_algorithm"]) + ".identity.json"
    with open(identity, "w") as handle:
        handle.write('{"settings": \n')
    unreadable = r"its identity file %s is unreadable \(JSONDecodeError: Expecting value: line 2 column 1" % identity
    with pytest.raises(ModelDirError, match="of unknown origin \\(" + unreadable):
        check_model_dir(args_for(model_dir, data_dir), dict(SETTINGS), 5)
    check_model_dir(args_for(model_dir, data_dir, test_only=True), dict(SETTINGS), 5)
    assert re.search(unreadable + ".*so which settings trained it cannot be checked", caplog.text)


def test_test_only_refuses_an_empty_checkpoint_by_name(trained_dir):
    """main.py's own torch.load would raise a bare EOFError (a truncated one: tests/compat/test_failures.py)."""
    model_dir, data_dir = trained_dir
    checkpoint = checkpoint_path(str(model_dir), SETTINGS["learning_algorithm"])
    open(checkpoint, "w").close()
    with pytest.raises(ModelDirError, match=r"the ranker checkpoint %s cannot be loaded: an empty file \(0 bytes\); "
                       r"torch.load said EOFError" % re.escape(checkpoint)):
        check_model_dir(args_for(model_dir, data_dir, test_only=True), dict(SETTINGS), 5)


def test_test_only_needs_the_checkpoint_of_the_same_ranking_model(trained_dir, tmp_path):
    model_dir, data_dir = trained_dir
    check_model_dir(args_for(model_dir, data_dir, test_only=True), dict(SETTINGS), 5)  # other test data is fine
    other_ranker = dict(SETTINGS, ranking_model_hparams="hidden_layer_sizes=[4]")
    with pytest.raises(ModelDirError, match=r"with ranking_model_hparams='hidden_layer_sizes=\[8\]'; these .*\[4\]'"):
        check_model_dir(args_for(model_dir, data_dir, test_only=True), other_ranker, 5)
    empty = tmp_path / "empty"
    with pytest.raises(ModelDirError, match="--model_dir %s holds no ranker checkpoint" % empty):
        check_model_dir(args_for(empty, data_dir, test_only=True), dict(SETTINGS), 5)


def test_another_algorithm_is_refused_naming_the_training_the_dir_holds(trained_dir):
    model_dir, data_dir = trained_dir
    dla = dict(SETTINGS, learning_algorithm="ultra_multr.DLA")
    identity = checkpoint_path(str(model_dir), SETTINGS["learning_algorithm"]) + ".identity.json"
    with pytest.raises(ModelDirError, match=r"--model_dir %s already holds the training of ultra_multr.Naive recorded in "
                       r"%s \(learning_algorithm_hparams='seed=0', ranking_model='ultra.ranking_model.DNN', "
                       r"ranking_model_hparams='hidden_layer_sizes=\[8\]'; data_dir=.*\): an UNFINISHED training .*"
                       r"this training of ultra_multr.DLA would exit 0 .*Pass another --model_dir, or delete %s"
                       % (re.escape(str(model_dir)), re.escape(identity), re.escape(str(model_dir)))):
        check_model_dir(args_for(model_dir, data_dir), dla, 5)
    assert not os.path.exists(checkpoint_path(str(model_dir), "ultra_multr.DLA") + ".identity.json")
    with pytest.raises(ModelDirError, match=r"holds no ranker checkpoint ultra_multr.DLA.ckpt, so .* randomly initialised "
                       r"ranker; it holds the training of ultra_multr.Naive recorded in .*--test_only needs the settings"):
        check_model_dir(args_for(model_dir, data_dir, test_only=True), dla, 5)


def test_a_checkpoint_no_identity_accounts_for_is_refused_as_of_unknown_origin(tmp_path):
    data_dir = write_synthetic_ultra_dataset(str(tmp_path / "data"), {"train": 4, "valid": 2}, n_features=5)
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "ultra.learning_algorithm.DLA.ckpt").write_bytes(b"ULTRA's own DLA")
    with pytest.raises(ModelDirError, match=r"already holds a ranker checkpoint %s of unknown origin \(no "
                       r"ultra.learning_algorithm.DLA.ckpt.identity.json beside it; e.g. a training of one of ULTRA's"
                       % re.escape(str(model_dir / "ultra.learning_algorithm.DLA.ckpt"))):
        check_model_dir(args_for(model_dir, data_dir), dict(SETTINGS), 5)


def test_files_of_the_recorded_training_are_not_taken_for_another(trained_dir):
    """MULTR saves its simulator beside the ranker (<algorithm>.simulator.ckpt): part of the same training."""
    model_dir, data_dir = trained_dir
    (model_dir / "ultra_multr.Naive.simulator.ckpt").write_bytes(b"simulator")
    with pytest.raises(ModelDirError, match="same data and settings"):  # the restart refusal, not another training
        check_model_dir(args_for(model_dir, data_dir), dict(SETTINGS), 5)
    os.remove(checkpoint_path(str(model_dir), SETTINGS["learning_algorithm"]))
    check_model_dir(args_for(model_dir, data_dir), dict(SETTINGS), 5)  # a training killed before its first save


def saved_locations(path):
    """The device tags torch.save recorded for every storage of a checkpoint."""
    tags = []
    torch.load(path, map_location=lambda storage, location: tags.append(location) or storage)
    return tags


def test_ranker_checkpoints_hold_cpu_tensors_and_load_without_map_location(device, tmp_path):
    model = create_ranking_model(SETTINGS, 5, torch.device(device))
    path = str(tmp_path / "ranker.ckpt")
    torch.save(model.state_dict(), path)  # what main.py does
    assert set(saved_locations(path)) == {"cpu"}
    restored = create_ranking_model(SETTINGS, 5, torch.device("cpu"))
    restored.load_state_dict(torch.load(path))  # what main.py --test_only does, on a CPU-only machine
    features = torch.randn(7, 5)
    expected = score_documents(model, features.to(device)).cpu()
    assert torch.allclose(score_documents(restored, features), expected, atol=1e-6)
    assert next(model.parameters()).device.type == device  # the live model stays where it was


def test_saved_locations_sees_a_checkpoint_written_on_another_device(tmp_path, monkeypatch):
    """The check above can fail: a tensor tagged as CUDA's (simulated) is reported as such."""
    monkeypatch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
    path = str(tmp_path / "cuda.ckpt")
    torch.save({"weight": torch.ones(2)}, path)
    monkeypatch.undo()
    assert saved_locations(path) == ["cuda:0"]
