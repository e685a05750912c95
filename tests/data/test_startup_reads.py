"""Start-up reads of the data under main.py: the data checks read each data file once (ULTRA's own
layout and the ULTRE layout), and the model dir's identity and MULTR's simulator fingerprint reuse
that read (issue 19); feeds share one feature matrix per data set."""
from __future__ import annotations

import argparse
import builtins
import collections
import logging
import os

import pytest

from conftest import require_ultra

require_ultra()

import ultra  # noqa: E402

from ultra_multr.compat.model_dir import check_model_dir  # noqa: E402
from ultra_multr.data import checks  # noqa: E402
from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset  # noqa: E402
from ultra_multr.feeds.simulation import ClickSimulationFeed  # noqa: E402
from ultra_multr.feeds.arrays import data_fingerprint, feature_matrix, query_subset
from ultra_multr.generate.ultre_log import pbm_session_log, write_ultre_dataset  # noqa: E402

SETTINGS = {
    "learning_algorithm": "ultra_multr.MULTR",
    "learning_algorithm_hparams": "seed=0",
    "ranking_model": "ultra.ranking_model.DNN",
    "ranking_model_hparams": "hidden_layer_sizes=[8]",
}


def read_counts(monkeypatch, data_dir):
    """Counts of ``open`` calls per file under ``data_dir`` from now on."""
    counts = collections.Counter()
    real_open = builtins.open

    def spy(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.path.abspath(file).startswith(data_dir):
            counts[os.path.relpath(os.path.abspath(file), data_dir)] += 1
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy)
    return counts


def write_layout(directory, layout):
    """A small data directory in ULTRA's own layout or in the ULTRE layout (clicks in ``pbm/``, grades in valid),
    5 features; returns (data dir, click_model_dir, the files main.py's train and valid read)."""
    if layout == "ultra":
        data_dir = write_synthetic_ultra_dataset(directory, {"train": 6, "valid": 3, "test": 3}, n_features=5)
        return data_dir, None, ["settings.json"] + [
            os.path.join(split, split + suffix) for split in ("train", "valid") for suffix in (".feature", ".init_list", ".labels")
        ]
    log = pbm_session_log(n_queries=4, n_sessions=20, n_features=5, seed=3)
    data_dir = write_ultre_dataset(directory, log, click_model_dir="pbm/", eval_queries=3)
    return data_dir, "pbm/", ["settings.json", "train/train.feature", "train/train.init_list", "train/pbm/train.labels",
                              "valid/valid.feature", "valid/valid.init_list", "valid/valid.labels"]


@pytest.mark.parametrize("layout", ["ultra", "ultre"])
def test_checks_identity_and_simulator_fingerprint_read_each_data_file_once(tmp_path, monkeypatch, layout):
    data_dir, click_model_dir, files = write_layout(str(tmp_path / "data"), layout)
    train_set = ultra.utils.read_data(data_dir, "train", click_model_dir)  # ULTRA's own read, before main.py calls us
    ClickSimulationFeed.preprocess_data(train_set, "", {})  # main.py's hook: ULTRE data in ULTRA's layout
    counts = read_counts(monkeypatch, os.path.abspath(data_dir))
    args = argparse.Namespace(
        model_dir=str(tmp_path / "model"), data_dir=data_dir, train_data_prefix="train", valid_data_prefix="valid",
        test_data_prefix="test", click_model_dir=click_model_dir, batch_size=16, max_list_cutoff=0, test_only=False,
        test_while_train=False, max_train_iteration=10,
    )
    checks.check_main_py_data(args)  # PluginAlgorithm.__init__
    check_model_dir(args, dict(SETTINGS), 5)  # the identity file
    fingerprint = data_fingerprint(train_set)  # MULTR's simulator checkpoint metadata
    assert dict(counts) == {name: 1 for name in files}
    assert os.path.isfile(os.path.join(args.model_dir, "ultra_multr.MULTR.ckpt.identity.json"))
    assert checks.checked_fingerprint(data_dir, ["train"], click_model_dir) is not None  # not from the features
    assert fingerprint == data_fingerprint(train_set) and sum(counts.values()) == len(files)
    # The hashes stand for the files as they were: a file changed since is read (and hashed) again.
    labels = files[3]
    os.utime(os.path.join(data_dir, labels), ns=(1, 1))
    checks.data_fingerprint(data_dir, ["train"], click_model_dir)
    assert counts[labels] == counts["train/train.feature"] == 2

def test_feeds_views_and_passes_share_one_feature_matrix(synthetic_data_dir):
    train_set = ultra.utils.read_data(synthetic_data_dir, "train", None)
    model = argparse.Namespace(rank_list_size=10, letor_features_name="letor_features",
                               docid_inputs_name=["d%d" % i for i in range(10)], labels_name=["l%d" % i for i in range(10)])
    feeds = [ClickSimulationFeed(model, 4, "oracle_mode=true,seed=%d" % seed) for seed in (0, 1)]
    view = query_subset(train_set, [2, 0])
    matrices = [feed.arrays_for(data).features for feed in feeds for data in (train_set, view)]
    assert all(matrix is matrices[0] for matrix in matrices)
    assert matrices[0].shape == (len(train_set.features), train_set.feature_size)
    train_set.pad(20)  # ULTRA appends a zero row: the matrix follows
    assert feature_matrix(train_set).shape[0] == len(train_set.features) == matrices[0].shape[0] + 1


def test_a_split_that_passed_before_is_hashed_not_parsed_and_its_warnings_repeat(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("ULTRA_MULTR_CACHE", str(tmp_path / "cache"))
    data_dir = write_synthetic_ultra_dataset(str(tmp_path / "data"), {"train": 6, "valid": 3, "test": 3}, n_features=5)
    feature = os.path.join(data_dir, "train", "train.feature")
    with builtins.open(feature) as handle:  # index 0 on the first line: a warning at every check
        lines = handle.read().split("\n")
    lines[0] = lines[0].replace(" 5:", " 0:")
    with builtins.open(feature, "w") as handle:
        handle.write("\n".join(lines))
    first = checks.check_data_dir(data_dir, ["train"])
    parsed = []
    monkeypatch.setattr(checks, "check_feature_block", lambda *args: parsed.append(args))
    counts = read_counts(monkeypatch, os.path.abspath(data_dir))
    caplog.clear()
    caplog.set_level(logging.INFO, logger="ultra_multr")
    assert checks.check_data_dir(data_dir, ["train"]) == first
    assert parsed == [] and set(counts.values()) == {1}
    assert "use feature index 0" in caplog.text and "not parsed again" in caplog.text
    # Other bytes under the same size and time: parsed again, and the bad value is found.
    stat = os.stat(feature)
    with builtins.open(feature, "r+b") as handle:
        handle.seek(len(lines[0]) - 1)
        handle.write(b"x")
    os.utime(feature, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    monkeypatch.undo()
    monkeypatch.setenv("ULTRA_MULTR_CACHE", str(tmp_path / "cache"))
    with pytest.raises(checks.DataCheckError, match="train.feature:1: "):
        checks.check_data_dir(data_dir, ["train"])
