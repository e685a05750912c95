"""Training from a generated Baidu-ULTR log through ULTRA's main.py: the session-replay feed and the converter."""
from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest

from conftest import require, require_ultra, run_ultra_main

require("pyarrow")
ultra = require_ultra()

from ultra_multr.click_logs import baidu  # noqa: E402
from ultra_multr.click_logs.baidu_convert import main as convert_main  # noqa: E402
from ultra_multr.feeds.baidu import BUCKET_FILE_STRIDE, BaiduSessionFeed  # noqa: E402
from ultra_multr.generate.baidu_log import write_baidu_log  # noqa: E402


@pytest.fixture(scope="module")
def baidu_data(tmp_path_factory):
    """(generated log, converted data directory): 200 logged sessions (less those the writer's filter drops:
    documents are dropped with probability 0.1, leaving gaps in the positions), 20 annotated queries,
    10 stub lists."""
    root = tmp_path_factory.mktemp("baidu_training")
    log = write_baidu_log(str(root / "log"), n_sessions=200, seed=5, missing_doc_prob=0.1)
    out = str(root / "data")
    patterns = os.path.join(str(root / "log"), "parts", "part-1_split-*.feather")
    assert convert_main(["--annotations", log.validation_file, "--log_files", patterns, "--out", out,
                         "--stub_lists", "10"]) == 0
    return log, out + "/", patterns


class _Model:
    """What a feed reads of the algorithm."""

    feature_size, rank_list_size = 12, 10
    letor_features_name = "letor_features"
    docid_inputs_name = ["docid_input%d" % i for i in range(10)]
    labels_name = ["label%d" % i for i in range(10)]


def test_feed_replays_every_logged_session_at_its_logged_positions(baidu_data):
    log, data_dir, patterns = baidu_data
    stub = ultra.utils.read_data(data_dir, "train", None, 0)
    feed = BaiduSessionFeed(_Model(), 1, "log_files=%s,seed=1,standardize=none" % patterns)
    sessions = [baidu.read_sessions(path) for path in log.train_files]
    counts = [len(s) for s in sessions]
    assert 150 < sum(counts) < 200 and any((~s.mask[:, :6]).any() for s in sessions)  # gaps, dropped sessions
    seen = []
    for _ in range(sum(counts)):  # batches of 1: one pass over the sessions
        input_feed, info = feed.get_batch(stub, check_validation=False)
        features = input_feed["letor_features"]
        for session_id, docids, clicks in zip(info["rank_list_idxs"], info["input_list"], info["click_list"]):
            file_index, row = divmod(session_id, BUCKET_FILE_STRIDE)
            logged = sessions[file_index]
            # each document at its logged position: a gap is a padded slot, later documents keep their rank
            real = [slot for slot, d in enumerate(docids) if d < len(features)]
            assert real == np.flatnonzero(logged.mask[row]).tolist()
            np.testing.assert_array_equal(features[[docids[slot] for slot in real]],
                                          logged.features[row, logged.mask[row]])
            assert clicks == logged.clicks[row].tolist()
            seen.append(session_id)
    assert sorted(seen) == [f * BUCKET_FILE_STRIDE + r for f in range(2) for r in range(counts[f])]  # each once


def test_clickless_keep_feeds_the_sessions_without_a_click_that_main_py_skips(baidu_data):
    """One pass over the log in one batch: the default leaves out every session without a click in the first N
    positions (main.py's check_validation), clickless=keep feeds them all; only keep enters the run's identity."""
    from ultra_multr.config import identity, parse_hparams
    from ultra_multr.feeds.baidu import BaiduSessionFeedHParams

    log, data_dir, patterns = baidu_data
    stub = ultra.utils.read_data(data_dir, "train", None, 0)
    sessions = [baidu.read_sessions(path) for path in log.train_files]
    total = sum(len(s) for s in sessions)
    clicked = sum(int((s.clicks.sum(1) > 0).sum()) for s in sessions)
    assert 0 < clicked < total
    for choice, size in (("skip", clicked), ("keep", total)):
        feed = BaiduSessionFeed(_Model(), size, "log_files=%s,seed=1,standardize=none,clickless=%s" % (patterns, choice))
        _, info = feed.get_batch(stub, check_validation=True)
        assert len(set(info["rank_list_idxs"])) == size  # every session of the pass once
        assert sum(sum(clicks) == 0 for clicks in info["click_list"]) == size - clicked
    assert "clickless" not in identity(parse_hparams(BaiduSessionFeedHParams, "log_files=x"), "run")
    assert identity(parse_hparams(BaiduSessionFeedHParams, "log_files=x,clickless=keep"), "run")["clickless"] == "keep"


def test_stub_views_split_the_sessions_into_disjoint_buckets(baidu_data):
    from ultra_multr.feeds.arrays import query_subset

    _, data_dir, patterns = baidu_data
    stub = ultra.utils.read_data(data_dir, "train", None, 0)
    assert len(stub.initial_list) == 10
    rest = query_subset(stub, list(range(2, 10)))
    counts = {}
    for buckets, view in (([0, 1], query_subset(stub, [0, 1])), (list(range(2, 10)), rest),
                          ([3, 5], query_subset(rest, [1, 3]))):  # a view of a view: buckets of the stub
        feed = BaiduSessionFeed(_Model(), 20, "log_files=%s" % patterns)
        for _ in range(5):
            input_feed, info = feed.get_batch(view, check_validation=True)
            assert all(sum(clicks) > 0 for clicks in info["click_list"])
            assert {session_id % 10 for session_id in info["rank_list_idxs"]} <= set(buckets)
        # the sessions MULTR holds out with such a view: those of its buckets, not its lists
        counts[tuple(buckets)] = feed.distinct_sessions(view)
        ids = [f * BUCKET_FILE_STRIDE + r for f, path in enumerate(sorted(glob.glob(patterns)))
               for r in range(baidu.session_count(path))]
        assert counts[tuple(buckets)] == sum(1 for i in ids if i % 10 in buckets)
    assert counts[(0, 1)] + counts[tuple(range(2, 10))] == feed.distinct_sessions(stub) == len(ids)


def _settings(tmp_path, data_dir, algorithm, hparams):
    """The converter's main_settings.json with a small ranker and test-sized hparams."""
    from ultra_multr.click_logs.baidu_convert import MAIN_SETTINGS_JSON

    with open(os.path.join(data_dir, MAIN_SETTINGS_JSON)) as handle:
        settings = json.load(handle)
    assert settings["train_input_hparams"].startswith("log_files=/")  # absolute: main.py may run anywhere
    settings.update(learning_algorithm=algorithm, learning_algorithm_hparams=hparams,
                    ranking_model_hparams="hidden_layer_sizes=[16]")
    path = tmp_path / ("%s.json" % algorithm.rsplit(".", 1)[-1])
    path.write_text(json.dumps(settings))
    return str(path)


#: MULTR's logger_guard=none: the generated Baidu log (its logger orders by the grade plus noise, on few queries)
#: would fire the guard (MULTR's default) and no simulator phase would run; simulator_min_heldout_sessions=1: its few
#: held-out sessions could not judge a simulator, which MULTR then does not train.
@pytest.mark.parametrize("algorithm, hparams", [
    ("ultra_multr.MULTR", "sample_num=2,simulator_steps=4,simulator_batch_size=16,simulator_log_every=2,"
                          "rerank_weight=paper,logger_guard=none,simulator_min_heldout_sessions=1,seed=0"),
    ("ultra_multr.DLA", "learning_rate=0.05,seed=0"),
])
@pytest.mark.slow
def test_main_py_trains_on_the_logged_sessions(ultra_main, baidu_data, tmp_path, algorithm, hparams):
    generated, data_dir, _ = baidu_data
    model_dir = str(tmp_path / "model")
    args = ["--setting_file", _settings(tmp_path, data_dir, algorithm, hparams), "--data_dir", data_dir,
            "--model_dir", model_dir, "--output_dir", model_dir + "/out/", "--batch_size", "16",
            "--selection_bias_cutoff", "10", "--max_train_iteration", "3", "--steps_per_checkpoint", "3"]
    run = run_ultra_main(ultra_main, args, cwd=str(tmp_path))
    log = run.stdout + run.stderr
    assert "ndcg_10" in log
    assert os.path.isfile(os.path.join(model_dir, "%s.ckpt" % algorithm))
    # every logged session a phase read is counted (the fair protocol's same sessions), click-less ones too
    with open(os.path.join(model_dir, "session_budget.json")) as handle:
        phases = json.load(handle)["phases"]
    ranker = phases["ranker"]  # main.py runs on to the checkpoint after --max_train_iteration
    assert ranker["lists"] % 16 == 0 and ranker["lists"] >= 3 * 16 and ranker["sessions"] >= ranker["lists"]
    # the feed stored the training log's standardisation with the model: the converter's, unchanged
    from ultra_multr.click_logs.standardize import STATS_JSON, Standardizer

    assert Standardizer.load(os.path.join(model_dir, STATS_JSON)).same_as(
        Standardizer.load(os.path.join(data_dir, STATS_JSON)))
    # the examination the ranker clicks with, recorded for each validated step (the last by the exit handler)
    checkpoint = os.path.join(model_dir, "%s.ckpt" % algorithm)
    steps = json.load(open(checkpoint + ".examination.json"))["by_step"]
    assert sorted(steps, key=int) == ["3", "6"] and all(len(e) == 10 and max(e) <= 1 for e in steps.values())
    assert str(json.load(open(checkpoint + ".progress.json"))["checkpoint_step"]) in steps
    if algorithm.endswith("MULTR"):
        assert phases["simulator_train"]["lists"] == 4 * 16
        assert "user simulator: step 4/4" in log
        _check_heldout_click_log_likelihood(log_files=(generated.train_files, generated.test_files), model_dir=model_dir,
                                            out=str(tmp_path / "click_ll"))
        from ultra_multr.click_logs.baidu_click_ll import evaluate as click_metrics

        settings = json.load(open(os.path.join(str(tmp_path), "MULTR.json")))
        ranker = click_metrics(None, generated.train_files, generated.test_files, str(tmp_path / "ranker_ll"),
                               ranker=(settings, model_dir))
        assert set(ranker) == {"ultra_multr.MULTR", "position CTR"}
        assert np.isfinite(ranker["ultra_multr.MULTR"]["click_nll"]) and ranker["ultra_multr.MULTR"]["click_nll"] > 0
        return
    # The benchmark's metrics on the annotated test queries, from the feather file ...
    from ultra_multr.experiments.evaluate import evaluate_run
    from ultra_multr.click_logs.baidu_evaluate import BAIDU_METRICS, evaluate

    settings = json.loads(open(args[1]).read())
    summary = evaluate(data_dir, settings, model_dir, str(tmp_path / "baidu_eval"), "test")
    assert summary["n_queries"] == 10 and set(BAIDU_METRICS) <= set(summary)
    assert 0 < summary["ndcg_10"] <= 1 and 0 < summary["mrr_10"] <= 1
    assert summary["dcg_1"] <= summary["dcg_3"] <= summary["dcg_5"] <= summary["dcg_10"]
    # ... agree with the ULTRA-format split the converter wrote, scored through ULTRA's reader.
    ultra_path = evaluate_run(data_dir, "test", settings, model_dir, str(tmp_path / "ultra_eval"))
    assert ultra_path["n_dropped_queries"] == 0
    assert summary["ndcg_10"] == pytest.approx(ultra_path["ndcg_10"], abs=1e-4)
    # ultr-reproducibility's protocol: the ranking metrics on every annotated query, no annotated valid split
    repro = str(tmp_path / "repro_data")
    assert convert_main(["--annotations", generated.validation_file, "--log_files", ";".join(generated.train_files),
                         "--out", repro, "--stub_lists", "10", "--protocol", "reproducibility",
                         "--heldout_files", ";".join(generated.test_files)]) == 0
    everything = evaluate(repro, settings, model_dir, str(tmp_path / "repro_eval"), "test")
    assert everything["n_queries"] == 20 and everything["protocol"] == "reproducibility" and everything["standardized"]
    with pytest.raises(ValueError, match="reproducibility"):
        evaluate(repro, settings, model_dir, str(tmp_path / "repro_eval"), "valid")


def _check_heldout_click_log_likelihood(log_files, model_dir, out):
    """The simulator and the position-CTR floor scored on the held-out part; the floor checked by hand."""
    from ultra_multr.click_logs.baidu_click_ll import evaluate

    pa_feather = require("pyarrow.feather")
    train_files, heldout_files = log_files
    results = evaluate(os.path.join(model_dir, "ultra_multr.MULTR.simulator.ckpt"), train_files, heldout_files, out)
    assert set(results) == {"MULTR simulator", "position CTR"}
    n_heldout = baidu.session_count(heldout_files[0])
    assert all(r["sessions"] == n_heldout and np.isfinite(r["log_likelihood"]) and r["log_likelihood"] < 0
               for r in results.values())
    clicked = evaluate(os.path.join(model_dir, "ultra_multr.MULTR.simulator.ckpt"), train_files, heldout_files, out,
                       population="clicked")
    def logged(path):
        """query_no -> {position: click} of the documents of each session (one row per document)."""
        sessions = {}
        for row in pa_feather.read_table(path, columns=["query_no", "position", "click"]).to_pylist():
            sessions.setdefault(row["query_no"], {})[row["position"]] = row["click"]
        return list(sessions.values())

    heldout = logged(heldout_files[0])
    assert len(heldout) == n_heldout and any(max(s) > len(s) for s in heldout)  # the held-out part has gaps
    for population, found in (("all", results), ("clicked", clicked)):
        keep = (lambda s: True) if population == "all" else (lambda s: sum(c for p, c in s.items() if p <= 10) > 0)
        clicks, shown = np.zeros(11), np.zeros(11)  # by logged position 1..10
        for path in train_files:
            for session in filter(keep, logged(path)):
                for position, click in session.items():
                    clicks[position] += click
                    shown[position] += 1
        ctr = (clicks + 1) / (shown + 2)
        rows = list(filter(keep, heldout))
        expected = np.mean([sum(np.log(ctr[p]) if c else np.log(1 - ctr[p]) for p, c in s.items()) for s in rows])
        assert found["position CTR"]["log_likelihood"] == pytest.approx(expected, rel=1e-6)
        # the benchmark's click NLL: each session's mean cross-entropy over its documents, then the mean
        nll = np.mean([-np.mean([np.log(ctr[p]) if c else np.log(1 - ctr[p]) for p, c in s.items()]) for s in rows])
        assert found["position CTR"]["click_nll"] == pytest.approx(nll, rel=1e-6)
        assert found["MULTR simulator"]["sessions"] == len(rows)
    assert 0 < clicked["position CTR"]["sessions"] < n_heldout  # the log has click-less sessions: the populations differ
    assert os.path.isfile(os.path.join(out, "click_log_likelihood.json"))
    assert os.path.isfile(os.path.join(out, "click_log_likelihood_clicked.json"))
    record = json.load(open(os.path.join(out, "click_log_likelihood.json")))
    assert record["standardization"] == os.path.join(model_dir, "feature_standardization.json")  # beside the simulator
    # ultr-reproducibility's protocol: the click log-likelihood of the test half of the held-out sessions only
    from ultra_multr.click_logs.baidu_convert import heldout_rows

    repro = out + "_repro_data"
    assert convert_main(["--annotations", os.path.join(os.path.dirname(heldout_files[0]), "validation.feather"),
                         "--log_files", ";".join(train_files), "--out", repro, "--stub_lists", "10",
                         "--protocol", "reproducibility", "--heldout_files", ";".join(heldout_files)]) == 0
    half = evaluate(os.path.join(model_dir, "ultra_multr.MULTR.simulator.ckpt"), train_files, heldout_files,
                    out + "_repro", data_dir=repro)
    n_test = sum(len(rows) for rows in heldout_rows(list(heldout_files), 381, "test").values())
    assert all(r["sessions"] == n_test for r in half.values()) and n_test == -(-n_heldout // 2)


# --- issue 27, item 5: per-feature standardisation fitted on the training log ---------------------------------------

def _assert_rows_among(written, expected, tol=1e-4):
    """Every row of ``written`` equals (within ``tol``, ULTRA's text format rounds) some row of ``expected``."""
    distance = np.abs(written[:, None, :] - expected[None, :, :]).max(axis=2).min(axis=1)
    assert distance.max() < tol, distance.max()


@pytest.mark.slow
def test_main_py_trains_multr_on_the_768_d_embeddings(ultra_main, baidu_data, tmp_path):
    """The release's layout converted with --features embedding trains MULTR (and with it DLA's propensity model)
    through main.py with no hand step: the ranker reads 768 features a document."""
    log, _, patterns = baidu_data
    out = str(tmp_path / "embedding")
    assert convert_main(["--annotations", log.validation_file, "--log_files", patterns, "--out", out,
                         "--stub_lists", "10", "--features", "embedding"]) == 0
    hparams = ("sample_num=2,simulator_steps=4,simulator_batch_size=16,simulator_log_every=2,rerank_weight=paper,"
               "logger_guard=none,simulator_min_heldout_sessions=1,seed=0")
    model_dir = str(tmp_path / "model")
    args = ["--setting_file", _settings(tmp_path, out + "/", "ultra_multr.MULTR", hparams), "--data_dir", out + "/",
            "--model_dir", model_dir, "--output_dir", model_dir + "/out/", "--batch_size", "16",
            "--selection_bias_cutoff", "10", "--max_train_iteration", "3", "--steps_per_checkpoint", "3"]
    run = run_ultra_main(ultra_main, args, cwd=str(tmp_path))
    log_text = run.stdout + run.stderr
    assert "ndcg_10" in log_text and "user simulator: step 4/4" in log_text
    import torch

    state = torch.load(os.path.join(model_dir, "ultra_multr.MULTR.ckpt"), map_location="cpu", weights_only=False)
    first_layers = [v for k, v in _flatten(state) if k.endswith("weight") and getattr(v, "dim", lambda: 0)() == 2]
    assert first_layers and any(w.shape[1] == 768 for w in first_layers)


def _flatten(state, prefix=""):
    """(name, value) of every tensor in a nested checkpoint dictionary."""
    for key, value in (state.items() if isinstance(state, dict) else []):
        if isinstance(value, dict):
            yield from _flatten(value, prefix + str(key) + ".")
        else:
            yield prefix + str(key), value


def test_standardisation_is_fitted_on_the_training_log_and_applied_alike_to_every_split(baidu_data):
    from ultra_multr.click_logs.baidu_convert import MAIN_SETTINGS_JSON
    from ultra_multr.click_logs.standardize import STATS_JSON, Standardizer

    log, data_dir, patterns = baidu_data
    stats = Standardizer.load(os.path.join(data_dir, STATS_JSON))  # on by default
    # fitted on the shown documents (first 10 positions) of the training files, nothing else
    shown = np.concatenate([s.features[s.mask] for s in baidu.iter_sessions(sorted(glob.glob(patterns)))]).astype(float)
    np.testing.assert_allclose(stats.mean, shown.mean(0), rtol=1e-9)
    np.testing.assert_allclose(stats.std, shown.std(0), rtol=1e-9)
    assert stats.n_documents == len(shown) and list(stats.fitted_on) == sorted(glob.glob(patterns))
    # the converter's test split holds the annotations standardised with those statistics
    graded = baidu.read_sessions(log.validation_file, top_n=None)
    test = ultra.utils.read_data(data_dir, "test", None, 0)
    assert len(test.features) > 20
    _assert_rows_among(np.array(test.features), stats.apply(graded.features[graded.mask]))
    # the feed: its default (fit) gives the same statistics; the converter's settings name its file
    settings = json.load(open(os.path.join(data_dir, MAIN_SETTINGS_JSON)))
    assert settings["train_input_hparams"].endswith("standardize=%s" % os.path.abspath(os.path.join(data_dir, STATS_JSON)))
    stub = ultra.utils.read_data(data_dir, "train", None, 0)
    fitted = BaiduSessionFeed(_Model(), 8, "log_files=%s,seed=1" % patterns)
    named = BaiduSessionFeed(_Model(), 8, settings["train_input_hparams"])
    raw = BaiduSessionFeed(_Model(), 8, "log_files=%s,seed=0,standardize=none" % patterns)
    assert fitted.standardizer.same_as(stats) and named.standardizer.same_as(stats) and raw.standardizer is None
    a, info = named.get_batch(stub)
    b, _ = raw.get_batch(stub)
    real = np.array([d for docs in info["input_list"] for d in docs if d < len(a["letor_features"])])
    np.testing.assert_allclose(a["letor_features"][real], stats.apply(b["letor_features"][real]), rtol=1e-5, atol=1e-6)


def test_no_standardize_leaves_the_features_as_read(baidu_data, tmp_path):
    from ultra_multr.click_logs.baidu_convert import MAIN_SETTINGS_JSON
    from ultra_multr.click_logs.standardize import STATS_JSON

    log, _, patterns = baidu_data
    out = str(tmp_path / "raw")
    assert convert_main(["--annotations", log.validation_file, "--log_files", patterns, "--out", out,
                         "--stub_lists", "10", "--no_standardize"]) == 0
    assert not os.path.exists(os.path.join(out, STATS_JSON))
    settings = json.load(open(os.path.join(out, MAIN_SETTINGS_JSON)))
    assert settings["train_input_hparams"].endswith("standardize=none")
    graded = baidu.read_sessions(log.validation_file, top_n=None)
    test = ultra.utils.read_data(out + "/", "test", None, 0)
    _assert_rows_among(np.array(test.features), graded.features[graded.mask])


def test_the_statistics_refuse_other_reader_settings(baidu_data, tmp_path):
    from ultra_multr.click_logs.standardize import STATS_JSON, Standardizer, stored_with_model

    _, data_dir, patterns = baidu_data
    with pytest.raises(ValueError, match="log1p_lexical"):
        BaiduSessionFeed(_Model(), 8, "log_files=%s,log1p_lexical=false,standardize=%s"
                         % (patterns, os.path.join(data_dir, STATS_JSON)))
    stats = Standardizer.load(os.path.join(data_dir, STATS_JSON))
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    Standardizer(stats.mean + 1, stats.std, stats.features, stats.log1p_lexical, (), 1).save(str(model_dir / STATS_JSON))
    with pytest.raises(ValueError, match="differ"):
        stored_with_model(str(model_dir), data_dir)
    assert stored_with_model(None, data_dir).same_as(stats) and stored_with_model(None, str(tmp_path)) is None


# --- issue 27, item 3: ultr-reproducibility's protocol -------------------------------------------------------------

def test_heldout_split_is_ultr_reproducibility_split():
    from ultra_multr.click_logs.baidu_convert import heldout_split

    sklearn = pytest.importorskip("sklearn.model_selection")
    for n in (2, 9, 10, 1001):
        validation, test = heldout_split(n, 381)
        assert len(set(validation) & set(test)) == 0 and sorted(np.concatenate([validation, test])) == list(range(n))
        assert len(test) == -(-n // 2)  # ceil(n / 2) in the test half
        # their main.py: val_clicks, test_clicks = random_split(test_clicks, shuffle=True, random_state=381,
        # test_size=0.5), i.e. train_test_split's first part is validation
        val_sk, test_sk = sklearn.train_test_split(np.arange(n), shuffle=True, random_state=381, test_size=0.5)
        np.testing.assert_array_equal(validation, val_sk)
        np.testing.assert_array_equal(test, test_sk)
        np.testing.assert_array_equal(heldout_split(n, 381)[0], validation)  # deterministic by seed
    assert not np.array_equal(heldout_split(1001, 0)[1], heldout_split(1001, 381)[1])
    with pytest.raises(ValueError):
        heldout_split(1)


def test_reproducibility_protocol_converts_validation_clicks_and_all_annotations(baidu_data, tmp_path, capsys):
    from ultra_multr.click_logs.baidu_convert import CONVERSION_JSON, heldout_rows

    log, _, patterns = baidu_data
    out = str(tmp_path / "repro")
    heldout = ";".join(log.test_files)
    assert convert_main(["--annotations", log.validation_file, "--log_files", patterns, "--out", out,
                         "--stub_lists", "10", "--protocol", "reproducibility", "--heldout_files", heldout]) == 0
    said = capsys.readouterr().out
    record = json.load(open(os.path.join(out, CONVERSION_JSON)))
    assert record["protocol"] == "reproducibility" and record["seed"] == 381
    validation = heldout_rows(list(log.test_files), 381, "validation")
    test = heldout_rows(list(log.test_files), 381, "test")
    for path in log.test_files:
        assert not set(validation[path]) & set(test[path])
        assert len(validation[path]) + len(test[path]) == baidu.session_count(path)
    clicked = sum(int((baidu.read_sessions(p).clicks[validation[p]].sum(1) > 0).sum()) for p in log.test_files)
    valid = ultra.utils.read_data(out + "/", "valid", None, 0)
    assert len(valid.initial_list) == clicked  # ULTRA keeps the sessions with a click
    written = sum(len(validation[p]) for p in log.test_files)
    assert written > clicked and "valid %d held-out sessions (%d with a click;" % (written, clicked) in said
    graded = baidu.read_sessions(log.validation_file, top_n=None)
    assert len(ultra.utils.read_data(out + "/", "test", None, 0).initial_list) == len(graded) - int(
        (graded.clicks.max(1) == 0).sum())  # every annotated query (ULTRA's reader drops those without a label)
    with pytest.raises(SystemExit):
        convert_main(["--annotations", log.validation_file, "--log_files", patterns, "--out", out,
                      "--protocol", "reproducibility", "--heldout_files", "x", "--valid_share", "x"])
    assert convert_main(["--annotations", log.validation_file, "--log_files", patterns, "--out", out,
                         "--protocol", "reproducibility"]) == 2  # held-out files required


def test_reproducibility_protocol_keeps_every_position_up_to_50(tmp_path, capsys):
    """--top_n auto: the click files' deepest position, at most ultr-reproducibility's 50; the stub's first list is
    extended by placeholder documents so that main.py's lists have that many positions (gaps close up in ULTRA's
    lists, so no written list need reach it)."""
    import pyarrow.feather as feather

    from ultra_multr.click_logs.baidu_convert import CONVERSION_JSON, MAX_POSITIONS, PLACEHOLDER

    log = write_baidu_log(str(tmp_path / "log"), n_queries=10, n_sessions=40, n_test_sessions=12, n_annotated=6,
                          n_positions=56, seed=4, missing_doc_prob=0.3)
    deepest = max(int(feather.read_table(p, columns=["position"]).column("position").to_numpy().max())
                  for p in log.train_files + log.test_files)
    assert deepest > MAX_POSITIONS
    out = str(tmp_path / "data")
    assert convert_main(["--annotations", log.validation_file, "--log_files", ";".join(log.train_files), "--out",
                         out, "--protocol", "reproducibility", "--heldout_files", ";".join(log.test_files)]) == 0
    assert "50 positions (the click files' deepest position: %d)" % deepest in capsys.readouterr().out
    record = json.load(open(os.path.join(out, CONVERSION_JSON)))
    assert record["top_n"] == MAX_POSITIONS and record["deepest_position"] == deepest
    stub = ultra.utils.read_data(out + "/", "train", None, 0)
    assert stub.rank_list_size == MAX_POSITIONS
    first = [stub.dids[i] for i in stub.initial_list[0]]
    assert first[-1].startswith(PLACEHOLDER) and not any(d.startswith(PLACEHOLDER) for d in sum(
        ([stub.dids[i] for i in docs] for docs in stub.initial_list[1:]), []))


@pytest.mark.slow
def test_reproducibility_protocol_selects_the_checkpoint_by_the_models_click_loss(ultra_main, baidu_data, tmp_path):
    """main.py keeps the checkpoint of the largest click_loss_neg (the smallest DLA loss on the validation clicks):
    each validation prints it, and each "Save model" line (main.py prints one when a validation does not improve)
    names it with the best value so far."""
    import re
    from ultra_multr.compat.settings_check import CLICK_LOSS_OBJECTIVE

    log, _, patterns = baidu_data
    out = str(tmp_path / "repro")
    assert convert_main(["--annotations", log.validation_file, "--log_files", patterns, "--out", out, "--stub_lists",
                         "10", "--protocol", "reproducibility", "--heldout_files", ";".join(log.test_files)]) == 0
    assert json.load(open(os.path.join(out, "main_settings.json")))["objective_metric"] == CLICK_LOSS_OBJECTIVE
    model_dir = str(tmp_path / "model")
    args = ["--setting_file", _settings(tmp_path, out + "/", "ultra_multr.DLA", "learning_rate=0.5,seed=0"),
            "--data_dir", out + "/", "--model_dir", model_dir, "--output_dir", model_dir + "/out/", "--batch_size",
            "16", "--selection_bias_cutoff", "10", "--max_train_iteration", "10", "--steps_per_checkpoint", "2"]
    stdout = run_ultra_main(ultra_main, args, cwd=str(tmp_path)).stdout
    values, saves = [], []
    for line in stdout.splitlines():
        if line.startswith(CLICK_LOSS_OBJECTIVE + " "):
            values.append(float(line.split()[1]))
        saved = re.match(r"Save model, valid (\w+):(\S+)$", line)
        if saved:
            assert saved.group(1) == CLICK_LOSS_OBJECTIVE
            saves.append((len(values), float(saved.group(2))))
    assert len(values) >= 5 and all(value < 0 for value in values) and "ndcg_10" in stdout
    assert saves, "every validation improved: no Save model line to check"
    for seen, best in saves:
        assert best == pytest.approx(max(values[:seen]), abs=5e-4) and best > values[seen - 1]
    assert os.path.isfile(os.path.join(model_dir, "ultra_multr.DLA.ckpt"))


def test_every_log_file_is_checked_before_anything_trains_or_is_written(baidu_data, tmp_path, capsys):
    """A bad second file was found at about the tenth update, and an empty first file converted to 0 stub lists
    with exit 0: both are named at once now, by the feed (before its first batch) and by the converter."""
    import shutil

    import pandas as pd
    import pyarrow.feather as feather

    log, _, _ = baidu_data
    first, second = log.train_files[:2]
    broken = tmp_path / "parts"
    broken.mkdir()
    shutil.copy(first, broken / os.path.basename(first))
    table = feather.read_table(second).to_pandas()
    feather.write_feather(table.drop(columns=["click"]), str(broken / os.path.basename(second)))
    pattern = str(broken / "part-1_split-*.feather")
    with pytest.raises(baidu.BaiduSchemaError, match=r"%s: column 'click' is missing" % os.path.basename(second)):
        BaiduSessionFeed(_Model(), 4, "log_files=%s,seed=1,standardize=none" % pattern)

    empty = tmp_path / "empty_parts"
    empty.mkdir()
    feather.write_feather(pd.DataFrame(columns=table.columns), str(empty / os.path.basename(first)))
    out = tmp_path / "converted"
    assert convert_main(["--annotations", log.validation_file, "--log_files", str(empty / "*.feather"),
                         "--out", str(out), "--stub_lists", "10"]) == 2
    assert "%s: the file holds no row (no session to read)" % (empty / os.path.basename(first)) in capsys.readouterr().err
    assert not out.exists()  # nothing written
