"""ULTRA's ULTRE layout (main.py --click_model_dir) end to end: checks, conversion, the session feed, main.py."""
from __future__ import annotations

import json
import os
import re
import shutil

import numpy as np
import pytest
import torch

from conftest import REPO_ROOT, require_ultra, run_ultra_main

ultra = require_ultra()

from ultra_multr.data.checks import DataCheckError, check_split, read_settings  # noqa: E402
from ultra_multr.generate.ultre_log import pbm_session_log, write_ultre_dataset  # noqa: E402
from ultra_multr.feeds.ultre import UltreSessionFeed  # noqa: E402


@pytest.fixture(scope="module")
def ultre_log():
    return pbm_session_log(n_queries=12, n_sessions=240, seed=3)


@pytest.fixture(scope="module")
def ultre_dir(tmp_path_factory, ultre_log):
    return write_ultre_dataset(str(tmp_path_factory.mktemp("ultre")), ultre_log, click_model_dir="pbm/", eval_queries=6)


def read_split(data_dir, split):
    data = ultra.utils.read_data(data_dir, split, "pbm/", 0)
    UltreSessionFeed.preprocess_data(data, "", {})
    return data


def test_generated_ultre_dir_passes_the_checks(ultre_dir):
    settings = read_settings(ultre_dir)
    assert check_split(ultre_dir, "train", settings, "pbm/").queries == 240
    assert check_split(ultre_dir, "test", settings, "pbm/").queries == 6  # no click file: the grades


@pytest.mark.parametrize(
    "file, edit, message",
    [
        ("train/train.init_list", lambda t: t.replace(":q", ":zz", 1), r"train\.init_list:1: query q\d+ lists document zz"),
        ("train/pbm/train.labels", lambda t: t.split("\n", 1)[1], r"train\.labels has 239 lines but .*has 240"),
        ("train/pbm/train.labels", lambda t: t.replace(":0 ", ":2 ", 1), r"train\.labels:\d+: .* label '2'; expected a click"),
        ("test/test.labels", lambda t: t.replace(" ", " 0.5 ", 1), r"test\.labels:1: query test0 with 11 labels"),
        ("train/train.feature", lambda t: t + t.split("\n", 1)[0] + "\n", r"train\.feature:\d+: document q0_d\d+ already has line 1"),
        ("train/train.init_list", lambda t: t.replace(":", " ", 1), r"train\.init_list:1: .*expected 'qid:docid"),
    ],
)
def test_ultre_check_errors_name_file_and_line(ultre_dir, tmp_path, file, edit, message):
    broken = str(tmp_path / "broken") + "/"
    shutil.copytree(ultre_dir, broken)
    with open(broken + file) as handle:
        text = handle.read()
    with open(broken + file, "w") as handle:
        handle.write(edit(text))
    split = file.split("/")[0]
    with pytest.raises(DataCheckError, match=message):
        check_split(broken, split, read_settings(broken), "pbm/")


def test_checks_command_line_reads_the_ultre_layout_with_click_model_dir(ultre_dir, tmp_path, monkeypatch, capsys):
    """The command the start-up hook runs in a second process for main.py --click_model_dir."""
    from ultra_multr.data import checks

    monkeypatch.setenv("ULTRA_MULTR_CACHE", str(tmp_path / "cache"))
    assert checks.main([ultre_dir, "--splits", "train", "test", "--click_model_dir", "pbm/"]) == 0
    assert re.search(r"^train +\d+ documents, 240 queries", capsys.readouterr().out, re.M)
    broken = str(tmp_path / "broken") + "/"
    shutil.copytree(ultre_dir, broken)
    with open(broken + "train/pbm/train.labels", "a") as handle:
        handle.write("q0 9\n")
    assert checks.main([broken, "--splits", "train", "--click_model_dir", "pbm/"]) == 1
    assert "train.labels" in capsys.readouterr().err


def test_conversion_keeps_every_session_in_its_logged_order(ultre_dir, ultre_log):
    data = read_split(ultre_dir, "train")
    assert not data.features_dict and len(data.initial_list) == 240
    features = np.asarray(data.features, dtype=np.float32)
    for session in (0, 17, 239):
        query = ultre_log.queries[ultre_log.query[session]]
        shown = ultre_log.shown[session]
        assert [data.dids[row] for row in data.initial_list[session]] == [query.doc_ids[i] for i in shown]
        np.testing.assert_allclose(features[data.initial_list[session]], query.features[shown], atol=1e-5)
        assert data.labels[session] == [int(c) for c in ultre_log.clicks[session]]


class _Model:
    """What a feed reads of an algorithm."""

    def __init__(self, list_size, max_candidates):
        self.rank_list_size, self.max_candidate_num = list_size, max_candidates
        self.letor_features_name = "letor_features"
        self.docid_inputs_name = ["docid_input%d" % i for i in range(max_candidates)]
        self.labels_name = ["label%d" % i for i in range(max_candidates)]


def test_feed_replays_sessions_with_their_positions_and_clicks(ultre_dir, ultre_log):
    data = read_split(ultre_dir, "train")
    data.pad(10)
    feed = UltreSessionFeed(_Model(8, 10), 64, "use_max_candidate_num=false,seed=1")
    input_feed, info = feed.get_batch(data, check_validation=True)
    rows = np.array(info["rank_list_idxs"])
    clicks = np.stack([input_feed["label%d" % i] for i in range(8)], axis=1)
    assert "label8" not in input_feed  # the shown top 8 only
    np.testing.assert_array_equal(clicks, ultre_log.clicks[rows, :8])
    assert (clicks.sum(axis=1) > 0).all()  # main.py's check_validation: lists with a click
    # Position i of the batch is the document logged at position i of that session.
    features = input_feed["letor_features"]
    for b in (0, 5):
        query = ultre_log.queries[ultre_log.query[rows[b]]]
        docids = [int(input_feed["docid_input%d" % i][b]) for i in range(8)]
        np.testing.assert_allclose(features[docids], query.features[ultre_log.shown[rows[b], :8]], atol=1e-5)
    again = UltreSessionFeed(_Model(8, 10), 64, "use_max_candidate_num=false,seed=1").get_batch(data, True)[1]
    assert again["rank_list_idxs"] == info["rank_list_idxs"]  # seeded
    _, evaluation = UltreSessionFeed(_Model(8, 10), 100, "").get_next_batch(200, data)
    assert len(evaluation["input_list"]) == 40 and len(evaluation["input_list"][0]) == 10


def _settings(tmp_path, algorithm, hparams):
    with open(os.path.join(REPO_ROOT, "settings", "ultre", "multr.json")) as handle:
        settings = json.load(handle)
    settings.update(ranking_model_hparams="hidden_layer_sizes=[16]", learning_algorithm=algorithm,
                    learning_algorithm_hparams=hparams)
    path = tmp_path / ("%s.json" % algorithm.rsplit(".", 1)[-1])
    path.write_text(json.dumps(settings))
    return str(path)


def _args(settings, model_dir, data_dir, *extra):
    return ["--setting_file", settings, "--data_dir", data_dir, "--click_model_dir", "pbm/", "--model_dir", model_dir,
            "--output_dir", model_dir + "/", "--batch_size", "16", "--selection_bias_cutoff", "10"] + list(extra)


#: simulator_min_heldout_sessions=1: the 240 logged sessions hold out 24, too few to judge a simulator, which MULTR
#: then does not train; this run goes through its training.
@pytest.mark.parametrize(
    "algorithm, hparams",
    [
        ("ultra_multr.MULTR", "sample_num=2,simulator_steps=4,simulator_batch_size=16,simulator_log_every=2,"
                              "simulator_eval_every=2,simulator_min_heldout_sessions=1,seed=0,rerank_weight=0"),
        ("ultra_multr.DLA", "seed=0"),
    ],
)
@pytest.mark.slow
def test_main_py_trains_on_logged_sessions_and_test_only_evaluates(ultra_main, ultre_dir, tmp_path, algorithm, hparams):
    settings = _settings(tmp_path, algorithm, hparams)
    model_dir = str(tmp_path / "model")
    train = run_ultra_main(ultra_main, _args(settings, model_dir, ultre_dir, "--max_train_iteration", "2",
                                             "--steps_per_checkpoint", "2"), cwd=str(tmp_path))
    log = train.stdout + train.stderr
    assert "in ULTRE format" in log and "ndcg_10" in log
    if algorithm.endswith("MULTR"):
        # Every list is a logged session: the simulator is scored on sessions held out of its training.
        assert "user simulator: step 4/4" in log
        held = re.search(r"sessions of (\d+) queries, held-out sessions of (\d+) \(a share of the click log held out\)", log)
        assert held and int(held.group(1)) + int(held.group(2)) == 240 and int(held.group(2)) > 0
    test = run_ultra_main(ultra_main, _args(settings, model_dir, ultre_dir, "--test_only", "True"), cwd=str(tmp_path))
    assert "Reading model parameters from" in test.stdout and "ndcg_10:" in test.stdout
    with open(os.path.join(model_dir, "test.ranklist")) as handle:
        ranked = [line.split() for line in handle]
    assert len(ranked) == 6 * 10 and ranked[0][0] == "test0" and ranked[0][2].startswith("test0_d")


@pytest.mark.slow
def test_main_py_refuses_data_format_ultre_with_our_feeds(ultra_main, ultre_dir, tmp_path):
    settings = _settings(tmp_path, "ultra_multr.DLA", "seed=0")
    with pytest.raises(AssertionError, match="--data_format ULTRE: leave the flag out"):
        run_ultra_main(ultra_main, _args(settings, str(tmp_path / "m"), ultre_dir, "--data_format", "ULTRE",
                                         "--max_train_iteration", "1"), cwd=str(tmp_path))


PROPENSITIES = "propensities=[1.0,0.5,0.33,0.25,0.2,0.17,0.14,0.12,0.11,0.1]"


@pytest.mark.parametrize(
    "algorithm, hparams",
    [
        ("ultra_multr.Naive", ""),
        ("ultra_multr.DLA", ""),
        ("ultra_multr.REM", ""),
        ("ultra_multr.PairD", ""),
        ("ultra_multr.PAL", ""),
        ("ultra_multr.IPW", PROPENSITIES),
        ("ultra_multr.MULTR", "sample_num=2,simulator_steps=2,simulator_batch_size=8,rerank_weight=0"),
        ("ultra_multr.MULTR_IPW", "sample_num=2,simulator_steps=2,simulator_batch_size=8,rerank_weight=0," + PROPENSITIES),
    ],
)
def test_every_algorithm_takes_updates_from_logged_sessions(ultre_dir, algorithm, hparams):
    data = read_split(ultre_dir, "train")
    data.pad(data.rank_list_size)
    settings = {
        "train_input_feed": "ultra_multr.feeds.ultre.UltreSessionFeed",
        "train_input_hparams": "use_max_candidate_num=false,seed=0",
        "ranking_model": "ultra.ranking_model.DNN", "ranking_model_hparams": "hidden_layer_sizes=[8]",
        "learning_algorithm": algorithm, "learning_algorithm_hparams": ",".join(filter(None, [hparams, "seed=0"])),
        "max_candidate_num": data.rank_list_size, "selection_bias_cutoff": 10,
    }
    model = ultra.utils.find_class(algorithm)(data, settings)
    feed = UltreSessionFeed(model, 16, settings["train_input_hparams"])
    before = [p.detach().clone() for p in model.model.parameters()]
    for _ in range(2):
        loss, _, _ = model.train(feed.get_batch(data, check_validation=True)[0])
        assert np.isfinite(loss)
    assert any(not torch.allclose(b, p.detach()) for b, p in zip(before, model.model.parameters()))
