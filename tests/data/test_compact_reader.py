"""The compact reader (ultra_multr.data.compact_reader) against ULTRA's own reader, on data the tests write.

Every attribute of ULTRA's ``Raw_data`` must come out equal, ``features`` as
ULTRA's floats rounded to float32 (bit for bit), before and after ``pad``; a
line ULTRA fails on fails with ULTRA's error; ULTRA's four input feeds and
its ranking path build the same batches and scores from either.
"""
from __future__ import annotations

import json
import logging
import os
import random
import re
import subprocess
import sys
import types

import numpy as np
import pytest
import torch
from conftest import REPO_ROOT, require_ultra

ultra = require_ultra()

from ultra.learning_algorithm.base_algorithm import BaseAlgorithm  # noqa: E402
from ultra.utils.data_utils import Raw_data  # noqa: E402

from ultra_multr.data import compact_reader, feature_cache  # noqa: E402
from ultra_multr.data.compact_reader import CompactRawData  # noqa: E402
from ultra_multr.data.feature_text import PAD, parse_block  # noqa: E402
from ultra_multr.feeds.arrays import feature_matrix  # noqa: E402
from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset  # noqa: E402

ATTRIBUTES = ("data_path", "file_prefix", "click_model_dir", "feature_size", "rank_list_size", "removed_feature_ids",
              "features_dict", "dids", "initial_list", "qids", "labels", "initial_scores", "initial_list_lengths")
ULTRA_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(ultra.__file__)))

#: Feature lines ULTRA reads in its own way: few fields or none, index 0 (the last slot), an index beyond
#: feature_size (dropped), a repeated index (the last wins), every number form Python's float takes, a value
#: beyond float32, CRLF, a tab (one doc id), spaces around the line, non-ASCII, an empty line.
ODD_FIELDS = [
    "3:0.5", "", "0:0.25 2:1", "999:1.5 1:2", "3:1 3:2 1:7", "1:-.5 2:5. 3:1e-05 4:-0 5:1E+2 6:+3 7:-0.0",
    "1:0.12345678901234567890123 2:123456789012345678 3:00000000000000000001.5 4:1.00000000000000000001",
    "1:nan 2:inf 3:-inf 4:1e300 5:1e-300 6:0.1 7:1_0", "000000002:0.5 10:3.25", "1:2:3 2:0.5",
]


def odd_feature_lines(prefix: str) -> str:
    lines = ["%s_odd%d %s" % (prefix, i, fields) for i, fields in enumerate(ODD_FIELDS)]
    lines += ["%s_crlf 1:0.5 2:0.25\r" % prefix, "%s_tab\t1:0.5" % prefix, "  %s_spaces 1:0.75 2:-1  " % prefix,
              "%s_\u00e9 1:0.125" % prefix, "", "%s_last 2:0.5" % prefix]
    return "\n".join(lines)


def assert_same(ultra_set, compact_set) -> None:
    """Every attribute equal; features equal to ULTRA's floats rounded to float32 (NaN where ULTRA has NaN)."""
    for name in ATTRIBUTES:
        assert getattr(compact_set, name) == getattr(ultra_set, name), name
    assert isinstance(compact_set.features, np.ndarray) and compact_set.features.dtype == np.float32
    with np.errstate(over="ignore"):
        expected = np.asarray(ultra_set.features, dtype=np.float64).reshape(len(ultra_set.features), -1)
        expected = expected.astype(np.float32)
    assert compact_set.features.shape == expected.shape
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(compact_set.features), nan)
    assert np.array_equal(compact_set.features.view(np.uint32)[~nan], expected.view(np.uint32)[~nan])  # -0.0 too


def read_both(data_dir: str, split: str, rank_cut=None, pad=None):
    ultra_set = Raw_data(data_dir, split, None, rank_cut)
    compact_set = CompactRawData(data_dir, split, None, rank_cut)
    assert_same(ultra_set, compact_set)
    if pad:
        ultra_set.pad(pad)
        compact_set.pad(pad)
        assert_same(ultra_set, compact_set)
    return ultra_set, compact_set


@pytest.fixture(params=[1 << 20, 512], ids=["blocks_1MiB", "blocks_512B"])
def block_bytes(request, monkeypatch):
    """Blocks as read, and blocks of a few lines (many blocks, lines across them, the matrix grown)."""
    monkeypatch.setattr(compact_reader, "BLOCK_BYTES", request.param)
    return request.param


def add_odd_lines(data_dir: str, split: str, layout: str) -> None:
    """Append the odd lines to a split (a query over some of them in ULTRA's layout)."""
    if layout == "ultra":
        base = os.path.join(data_dir, split, split)
        with open(base + ".feature") as handle:
            documents = sum(1 for _ in handle)
        with open(base + ".feature", "a", newline="") as handle:
            handle.write(odd_feature_lines(split))  # the last line without its newline
        docs = [str(documents + i) for i in (0, 1, 2, 3, 5, 9)]
        with open(base + ".init_list", "a") as handle:
            handle.write("odd %s\n" % " ".join(docs))
        for suffix, values in ((".labels", "2 0 1 0 3 1"), (".initial_scores", "6 5 4 3 2 1")):
            with open(base + suffix, "a") as handle:
                handle.write("odd %s\n" % values)
    else:
        lines = ["%d qid:odd %s" % (i % 3, fields) for i, fields in enumerate(ODD_FIELDS)]
        lines += ["1 qid:odd 1:0.5\r", "  2 qid:odd2 1:0.5 3:0.25  ", "0 qid:odd2 4:1", "1 qid:odd2"]
        with open(os.path.join(data_dir, split, split + ".txt"), "a", newline="") as handle:
            handle.write("\n".join(lines))


@pytest.mark.parametrize("layout", ["ultra", "libsvm"])
def test_generated_data_with_odd_lines_reads_as_ultra_reads_it(tmp_path, layout, block_bytes, capsys):
    data_dir = write_synthetic_ultra_dataset(str(tmp_path), {"train": 30, "valid": 6}, n_features=30, layout=layout)
    add_odd_lines(data_dir, "train", layout)
    _, compact = read_both(data_dir, "train", pad=40)
    assert "not plain, read with ULTRA's statements" in capsys.readouterr().out
    read_both(data_dir, "valid", pad=15)
    out = capsys.readouterr().out
    assert "Compact reader: " in out and "not plain" not in out  # generated lines: all in numpy
    assert compact.features.shape[0] == len(compact.dids) + 1  # ULTRA's padding row
    assert not compact.features[-1].any()


@pytest.mark.parametrize("layout", ["ultra", "libsvm"])
def test_rank_cut_and_removed_features_as_ultra_applies_them(tmp_path, layout, block_bytes):
    data_dir = write_synthetic_ultra_dataset(str(tmp_path), {"train": 20}, n_features=12, layout=layout)
    add_odd_lines(data_dir, "train", layout)
    with open(os.path.join(data_dir, "settings.json")) as handle:
        settings = json.load(handle)
    settings["removed_feature_ids"] = [2, 7, 12, 40]  # 40 > feature_size: ULTRA drops it from the list
    with open(os.path.join(data_dir, "settings.json"), "w") as handle:
        json.dump(settings, handle)
    _, compact = read_both(data_dir, "train", rank_cut=4, pad=6)
    assert compact.feature_size == 9


def test_numbers_python_reads_in_its_own_way_stay_in_the_numpy_path(tmp_path, capsys):
    """Plain lines whose fields need Python's int / float (exponents, nan, underscores, long digits, index 0,
    dropped or repeated indices) are read field by field, not line by line."""
    data_dir = write_synthetic_ultra_dataset(str(tmp_path), {"train": 6}, n_features=10)
    with open(os.path.join(data_dir, "train", "train.feature"), "a") as handle:
        handle.write("".join("plain%d %s\n" % (i, fields) for i, fields in enumerate(ODD_FIELDS[2:9])))
    read_both(data_dir, "train")
    out = capsys.readouterr().out
    assert "Compact reader: " in out and "not plain" not in out


def test_ultra_own_toy_data_both_layouts_read_as_ultra_reads_them():
    """The data ULTRA's checkout ships: tests/data (ULTRA's layout, index 0 used) and example/toy (libsvm)."""
    found = 0
    for data_dir, splits in ((os.path.join(ULTRA_CHECKOUT, "tests", "data", ""), ("train", "valid", "test")),
                             (os.path.join(ULTRA_CHECKOUT, "example", "toy", "data", ""), ("train", "valid", "test"))):
        if not os.path.isfile(os.path.join(data_dir, "settings.json")):
            continue
        for split in splits:
            read_both(data_dir, split, pad=12)
            found += 1
    if not found:
        pytest.skip("ULTRA's checkout ships no toy data here")


def test_toy_like_sparse_libsvm_data_reads_as_ultra_reads_it(tmp_path, block_bytes):
    """ULTRA's toy data's shape: 136 features, about 18 per line, six decimals, labels 0-2, libsvm."""
    rng = np.random.default_rng(3)
    lines = []
    for q in range(25):
        for _ in range(int(rng.integers(2, 12))):
            slots = np.sort(rng.choice(136, size=18, replace=False)) + 1
            fields = " ".join("%d:%.6f" % (k, v) for k, v in zip(slots, rng.uniform(-1, 1, size=18)))
            lines.append("%d qid:%d %s" % (rng.integers(0, 3), q + 1, fields))
    os.makedirs(str(tmp_path / "train"))
    (tmp_path / "train" / "train.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "settings.json").write_text(json.dumps({"feature_size": 136, "max_label": 2.0}))
    read_both(str(tmp_path) + "/", "train", pad=12)


@pytest.mark.parametrize("layout, bad", [
    ("ultra", "d 1:0.5  2:0.5"), ("ultra", "d 1:abc"), ("ultra", "d 1.5:2"), ("ultra", "d -900:1"),
    ("ultra", "d 1:0.5 :3"), ("libsvm", "x qid:1 1:0.5"), ("libsvm", "1 qid1 1:0.5"), ("libsvm", "1 qid:1 1:0.5 x"),
])
def test_a_line_ultra_fails_on_fails_with_ultra_error(tmp_path, layout, bad):
    data_dir = write_synthetic_ultra_dataset(str(tmp_path), {"train": 8}, n_features=10, layout=layout)
    path = os.path.join(data_dir, "train", "train.feature" if layout == "ultra" else "train.txt")
    with open(path) as handle:
        lines = handle.read().splitlines()
    lines.insert(5, bad)
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    with pytest.raises(Exception) as ultra_error:
        Raw_data(data_dir, "train", None, None)
    with pytest.raises(type(ultra_error.value)) as compact_error:
        CompactRawData(data_dir, "train", None, None)
    assert str(compact_error.value) == str(ultra_error.value)


def test_the_feature_cache_maps_the_parse_and_never_serves_a_changed_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ULTRA_MULTR_CACHE", str(tmp_path / "cache"))
    data_dir = write_synthetic_ultra_dataset(str(tmp_path / "data"), {"train": 12}, n_features=10)
    first = CompactRawData(data_dir, "train", None, None)
    assert "parsed in" in capsys.readouterr().out
    stored = os.listdir(feature_cache.cache_dir())
    assert sorted(name.rsplit(".", 1)[1] for name in stored) == ["json", "npy"]
    ultra_set, again = read_both(data_dir, "train", pad=16)
    assert "mapped from the feature cache" in capsys.readouterr().out
    assert np.array_equal(first.features, again.features[:-1])
    again.features[0, 0] += 1.0  # writable like ULTRA's lists; the stored matrix does not change
    assert np.array_equal(CompactRawData(data_dir, "train", None, None).features, first.features)
    # other bytes, same size and time: parsed again, and the entry replaced
    path = os.path.join(data_dir, "train", "train.feature")
    info = os.stat(path)
    text = open(path).read()
    digit = text.index(".", text.index(" 1:")) + 1  # the first decimal of feature 1 of the first document
    changed = text[:digit] + str((int(text[digit]) + 1) % 10) + text[digit + 1:]
    assert len(changed) == len(text) and changed != text
    with open(path, "w") as handle:
        handle.write(changed)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    read_both(data_dir, "train")
    assert "parsed in" in capsys.readouterr().out
    assert len(os.listdir(feature_cache.cache_dir())) == 2
    # switched off: nothing read or written
    monkeypatch.setenv("ULTRA_MULTR_CACHE", str(tmp_path / "cache2"))
    monkeypatch.setenv(feature_cache.ENV, "0")
    read_both(data_dir, "train")
    read_both(data_dir, "train")
    assert not os.path.exists(feature_cache.cache_dir())


def test_a_feature_cache_entry_whose_matrix_changed_is_parsed_again_with_a_warning(tmp_path, monkeypatch, capsys,
                                                                                 caplog):
    """Before: bytes of the cached matrix flipped (size and name kept) were mapped and used: --test_only scored the
    ranker on other features (nDCG@10 0.771 for 0.805), no warning.  Now each entry carries its matrix's SHA-256."""
    monkeypatch.setenv("ULTRA_MULTR_CACHE", str(tmp_path / "cache"))
    data_dir = write_synthetic_ultra_dataset(str(tmp_path / "data"), {"test": 12}, n_features=10)
    first = compact_reader.read_data(data_dir, "test", None)  # parsed, and kept
    (matrix,) = [os.path.join(feature_cache.cache_dir(), name) for name in os.listdir(feature_cache.cache_dir())
                 if name.endswith(".npy")]
    with open(matrix, "r+b") as handle:  # flip the bytes of the last rows, keeping the file's size
        handle.seek(-400, os.SEEK_END)
        flipped = bytes(byte ^ 0x55 for byte in handle.read())
        handle.seek(-400, os.SEEK_END)
        handle.write(flipped)
    capsys.readouterr()
    with caplog.at_level(logging.WARNING, logger="ultra_multr"):
        again = compact_reader.read_data(data_dir, "test", None)
    assert ("feature cache: %s, the parsed features of %s, is not the matrix that was stored (its SHA-256 differs: the "
            "file was damaged or changed); parsing %s again" % (matrix, os.path.join(data_dir, "test", "test.feature"),
                                                                os.path.join(data_dir, "test", "test.feature"))
            ) in caplog.text
    assert "parsed in" in capsys.readouterr().out and np.array_equal(again.features, first.features)
    mapped = compact_reader.read_data(data_dir, "test", None)  # the entry rewritten: mapped again, the right numbers
    assert "mapped from the feature cache" in capsys.readouterr().out
    assert np.array_equal(mapped.features, first.features)


def test_a_cache_that_cannot_be_written_is_skipped_with_a_line(tmp_path, monkeypatch, capsys):
    blocked = tmp_path / "not_a_folder"
    blocked.write_text("")
    monkeypatch.setenv("ULTRA_MULTR_CACHE", str(blocked))
    data_dir = write_synthetic_ultra_dataset(str(tmp_path / "data"), {"train": 6}, n_features=8)
    read_both(data_dir, "train")
    assert "not kept for later starts" in capsys.readouterr().out


def test_the_matrix_grows_in_place_past_a_short_estimate():
    rows = compact_reader._Rows(3)
    first = rows.take(2, estimate=1)
    rows.array[first:first + 2] = [[1, 2, 3], [4, 5, 6]]
    for k in range(50):
        rows.array[rows.take(1)] = k
    matrix = rows.finish()
    assert matrix.shape == (53, 3) and not matrix[-1].any()
    assert matrix[:2].tolist() == [[1, 2, 3], [4, 5, 6]] and matrix[51].tolist() == [49, 49, 49]


def test_installed_as_ultra_read_data_with_an_off_switch(synthetic_data_dir, monkeypatch):
    assert ultra.utils.read_data is compact_reader.read_data
    assert ultra.utils.data_utils.read_data is compact_reader.read_data
    compact = ultra.utils.read_data(synthetic_data_dir, "train", None)
    assert type(compact) is CompactRawData and isinstance(compact, Raw_data)
    assert np.shares_memory(feature_matrix(compact), compact.features)  # our feeds take the matrix, no copy
    monkeypatch.setenv(compact_reader.ENV, "0")
    own = ultra.utils.read_data(synthetic_data_dir, "train", None)
    assert type(own) is Raw_data and isinstance(own.features, list)
    assert_same(own, compact)


def test_the_ultre_layout_is_left_to_ultra_code(tmp_path):
    from ultra_multr.generate.ultre_log import pbm_session_log, write_ultre_dataset

    data_dir = write_ultre_dataset(str(tmp_path), pbm_session_log(n_queries=6, n_sessions=40, seed=3),
                                   click_model_dir="pbm/", eval_queries=3)
    compact = ultra.utils.read_data(data_dir, "train", "pbm/")
    own = Raw_data(data_dir, "train", "pbm/")
    assert compact.features_dict and compact.features_dict == own.features_dict and compact.features == []


class Ranker:
    """What ULTRA's feeds see of a learning algorithm, scoring with ULTRA's own path (``get_ranking_scores``
    over ``np.take`` of the feed's ``letor_features`` with its float32 padding row, into ULTRA's DNN)."""

    letor_features_name = "letor_features"
    is_cuda_avail = False

    def __init__(self, n: int, feature_size: int) -> None:
        self.rank_list_size = self.max_candidate_num = n
        self.feature_size = feature_size
        self.docid_inputs_name = ["docid_input%d" % i for i in range(n)]
        self.labels_name = ["label%d" % i for i in range(n)]
        self.hparams = types.SimpleNamespace()
        torch.manual_seed(0)
        # ULTRA's DNN moves its input to CUDA whenever CUDA is available (ranking_model/DNN.py), so its weights go there too
        self.model = ultra.ranking_model.DNN("hidden_layer_sizes=[8]", feature_size).to(
            "cuda" if torch.cuda.is_available() else "cpu")
        self.scored = []

    def validation(self, input_feed, is_online=False):
        self.letor_features = input_feed[self.letor_features_name]
        ids = [torch.as_tensor(np.asarray(input_feed[name]), dtype=torch.int64) for name in self.docid_inputs_name]
        with torch.no_grad():
            scores = torch.cat(BaseAlgorithm.get_ranking_scores(self, model=self.model, input_id_list=ids), 1)
        scores = scores.cpu()  # as our algorithms return them: ULTRA's online feeds call .cpu() only if is_cuda_avail
        self.scored.append(scores)
        return None, scores


FEEDS = ("ClickSimulationFeed", "DirectLabelFeed", "DeterministicOnlineSimulationFeed",
         "StochasticOnlineSimulationFeed")


@pytest.mark.parametrize("feed_name", FEEDS)
def test_ultra_feeds_and_ranking_path_give_the_same_batches_and_scores(synthetic_data_dir, feed_name):
    click_model = os.path.join(REPO_ROOT, "settings", "click_models", "cascade_eps0.1_ymax4.json")
    outputs = []
    for reader in (Raw_data, CompactRawData):
        data = reader(synthetic_data_dir, "train", None, None)
        data.pad(data.rank_list_size)
        ranker = Ranker(data.rank_list_size, data.feature_size)
        hparams = "" if feed_name == "DirectLabelFeed" else "click_model_json=%s" % click_model
        feed = getattr(ultra.input_layer, feed_name)(ranker, 8, hparams)
        random.seed(1)
        np.random.seed(1)
        feeds = [feed.get_batch(data, check_validation=True)[0]]
        if feed_name != "StochasticOnlineSimulationFeed":  # its get_next_batch reads model.letor_features.name
            feeds.append(feed.get_next_batch(0, data)[0])
        for input_feed in feeds:
            ranker.validation(input_feed)
        outputs.append((feeds, ranker.scored))
    (ultra_feeds, ultra_scores), (compact_feeds, compact_scores) = outputs
    for ultra_feed, compact_feed in zip(ultra_feeds, compact_feeds):
        assert sorted(ultra_feed) == sorted(compact_feed)
        for name, value in ultra_feed.items():
            if name == Ranker.letor_features_name:
                assert compact_feed[name].dtype == np.float32
                assert np.array_equal(np.asarray(value).astype(np.float32), compact_feed[name])
            else:
                assert np.array_equal(np.asarray(value), np.asarray(compact_feed[name])), name
    assert len(ultra_scores) == len(compact_scores) > 0
    for expected, got in zip(ultra_scores, compact_scores):
        assert torch.equal(expected, got)


def parse_lines(text: bytes, feature_size: int):
    """parse_block's fields of lines without heads (None: refused)."""
    block = parse_block(b"x" * PAD + text, PAD, PAD + len(text), feature_size, 0)
    return None if block is None else block.fields


@pytest.mark.parametrize("fmt", ["%.6g", "%.17g", "%.3f", "%.9e", "%r"])
def test_parse_block_gives_python_float_for_every_number_form(fmt):
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.normal(scale=10.0 ** rng.integers(-8, 9, size=300)), [0.0, -0.0, 1.0, 123456.0]])
    lines, expected = [], []
    for start in range(0, values.size, 7):
        chunk = values[start:start + 7]
        texts = [fmt % v if fmt != "%r" else repr(float(v)) for v in chunk]
        lines.append(" ".join("%d:%s" % (k + 1, text) for k, text in enumerate(texts)))
        expected += [float(text) for text in texts]
    fields = parse_lines(("\n".join(lines) + "\n").encode(), 10)
    assert np.array_equal(fields.value.view(np.uint64), np.asarray(expected).view(np.uint64))
    assert fields.slot.tolist() == [k for start in range(0, values.size, 7) for k in range(min(7, values.size - start))]


@pytest.mark.parametrize("text", [b"1:2  3:4\n", b" 1:2\n", b"1:2\n\n3:4\n", b"1:2:3\n", b"12\n", b"1.5:2\n",
                                  b"1:2.3.4\n", b"1:2 \n", b"1:2"])
def test_parse_block_leaves_what_is_not_plain_to_ultra_statements(text):
    assert parse_lines(text, 10) is None


def seeded_main_py(ultra_main: str, args, cwd: str, reader: str) -> str:
    """ULTRA's main.py under the runner's seeded_main (ULTRA's ClickSimulationFeed draws from ``random``) with the
    compact reader on ("1") or off ("0"); its output."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", ULTRA_MULTR_COMPACT_READER=reader)
    command = [sys.executable, "-m", "ultra_multr.experiments.runner.seeded_main", "--seed", "0", ultra_main] + args
    completed = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return completed.stdout


@pytest.mark.slow
def test_main_py_trains_and_tests_the_same_with_the_compact_reader_on_and_off(ultra_main, tmp_path):
    """Our DLA fed by ULTRA's own ClickSimulationFeed (training) and DirectLabelFeed (validation, test): the
    validation metrics, the test metrics and the test ranklist (every score) are identical with either reader.
    Exact, not to a tolerance: ULTRA's rankers cast their input to float32 first, so they see the same numbers."""
    data_dir = write_synthetic_ultra_dataset(str(tmp_path / "data"), {"train": 24, "valid": 6, "test": 8},
                                             n_features=12)
    settings = {
        "train_input_feed": "ultra.input_layer.ClickSimulationFeed",
        "train_input_hparams": "click_model_json=%s" % os.path.join(REPO_ROOT, "settings", "click_models",
                                                                   "cascade_eps0.1_ymax4.json"),
        "valid_input_feed": "ultra.input_layer.DirectLabelFeed", "valid_input_hparams": "",
        "test_input_feed": "ultra.input_layer.DirectLabelFeed", "test_input_hparams": "",
        "ranking_model": "ultra.ranking_model.DNN", "ranking_model_hparams": "hidden_layer_sizes=[8]",
        "learning_algorithm": "ultra_multr.DLA", "learning_algorithm_hparams": "learning_rate=0.05,seed=0",
        "metrics": ["ndcg", "err"], "metrics_topn": [1, 3, 5, 10], "objective_metric": "ndcg_10",
    }
    (tmp_path / "settings.json").write_text(json.dumps(settings))
    results = {}
    for reader in ("1", "0"):
        model_dir = str(tmp_path / ("model" + reader))
        args = ["--data_dir", data_dir, "--model_dir", model_dir, "--output_dir", os.path.join(model_dir, "out", ""),
                "--setting_file", str(tmp_path / "settings.json"), "--batch_size", "8"]
        trained = seeded_main_py(ultra_main, args + ["--max_train_iteration", "6", "--steps_per_checkpoint", "3"],
                                 str(tmp_path), reader)
        tested = seeded_main_py(ultra_main, args + ["--test_only", "True"], str(tmp_path), reader)
        assert ("Compact reader: " in trained + tested) == (reader == "1")
        validation = [line for line in trained.splitlines() if re.match(r"^(ndcg|err)_\d+ [0-9.]+$", line)]
        test = [line for line in tested.splitlines() if "eval: ndcg_1:" in line]
        assert len(validation) >= 8 and len(test) == 1, trained[-2000:] + tested[-2000:]
        with open(os.path.join(model_dir, "out", "test.ranklist")) as handle:
            results[reader] = (validation, test, handle.read())
    assert results["1"] == results["0"]
