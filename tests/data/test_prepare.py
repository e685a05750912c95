"""Data preparation: LETOR reader, normalisation, Rank SVM initial lists, folds, atomic output."""
import json
import os

import numpy as np
import pytest
from conftest import require_ultra

from ultra_multr.data import prepare
from ultra_multr.data.letor import LetorFormatError, LetorQuery, read_letor, read_letor_files
from ultra_multr.data.prepare import PrepareOptions, fold_partitions, main, signed_log1p, train_rank_svm

N_FEATURES = 5


def toy_queries(seed, qids, no_relevant_every=4, shift=0.0):
    """{qid: (labels [n], features [n, F])} with a clear relevance signal in feature 1.

    Feature 1 is label + small noise (separable), 2 uniform noise (shifted by
    ``shift`` to push valid/test outside the training range), 3 constant, 4
    mostly absent (sparse), 5 negative.  Every ``no_relevant_every``-th query
    has only irrelevant documents.
    """
    rng = np.random.default_rng(seed)
    queries = {}
    for k, qid in enumerate(qids):
        n = int(rng.integers(3, 9))
        labels = rng.integers(0, 3, size=n)
        if k % no_relevant_every == 0:
            labels[:] = 0
        elif labels.max() == 0:
            labels[0] = 2
        features = np.column_stack(
            [
                labels + rng.normal(scale=0.05, size=n),
                rng.uniform(0, 10, size=n) + shift,
                np.full(n, 0.5),
                np.where(rng.random(n) < 0.7, 0.0, rng.uniform(1, 100, size=n)),
                -rng.uniform(0, 3, size=n),
            ]
        )
        queries[qid] = (labels, features)
    return queries


def write_letor(path, queries, with_comments=True):
    """Write queries as LETOR lines (zeros omitted, docid in the '#' comment)."""
    lines = []
    for qid, (labels, features) in queries.items():
        for i, (label, row) in enumerate(zip(labels, features)):
            feats = " ".join("%d:%r" % (j + 1, float(v)) for j, v in enumerate(row) if v != 0.0)
            comment = " #docid = D%s-%d inc = 1 prob = 0.5" % (qid, i) if with_comments else ""
            lines.append("%d qid:%s %s%s" % (label, qid, feats, comment))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def read_written_split(directory, split):
    """qid -> (doc ids, features [n, F], labels [n], initial scores [n]) from a ULTRA directory."""
    base = os.path.join(directory, split, split)
    feature_size = json.load(open(os.path.join(directory, "settings.json")))["feature_size"]
    rows = []
    for line in open(base + ".feature"):
        parts = line.split()
        vector = np.zeros(feature_size)
        for token in parts[1:]:
            index, value = token.split(":")
            vector[int(index) - 1] = float(value)
        rows.append((parts[0], vector))

    def by_qid(suffix, convert):
        return {p[0]: [convert(x) for x in p[1:]] for p in (line.split() for line in open(base + suffix))}

    lists, labels, scores = by_qid(".init_list", int), by_qid(".labels", float), by_qid(".initial_scores", float)
    return {
        qid: (
            [rows[i][0] for i in indices],
            np.array([rows[i][1] for i in indices]),
            np.array(labels[qid]),
            np.array(scores[qid]),
        )
        for qid, indices in lists.items()
    }


@pytest.fixture
def split_files(tmp_path):
    """train / valid / test LETOR files; valid and test reach outside train's feature range."""
    data = {
        "train": toy_queries(1, ["t%d" % i for i in range(40)]),
        "valid": toy_queries(2, ["v%d" % i for i in range(10)], shift=3.0),
        "test": toy_queries(3, ["s%d" % i for i in range(10)], shift=-3.0),
    }
    paths = {split: write_letor(tmp_path / ("%s.txt" % split), queries) for split, queries in data.items()}
    return data, paths


def run_splits(paths, out, *extra):
    return main(["splits", "--train", paths["train"], "--valid", paths["valid"], "--test", paths["test"], "--out", str(out)] + list(extra))


# --------------------------------------------------------------------------- reader


def test_reader_strips_comments_keeps_docids_order_and_sparse_indices(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text(
        "# a header comment\n"
        "2 qid:30 1:0.5 4:2.0 #docid = GX1 inc = 1 prob = 0.3\n"
        "\n"
        "0 qid:30 2:1.5 #docid = GX2\n"
        "1 qid:5 3:-1\n"
        "3 qid:12 1:1 #no id here\n"
    )
    letor = read_letor(str(path))
    assert [q.qid for q in letor.queries] == ["30", "5", "12"]
    assert letor.feature_size == 4 and letor.max_label == 3
    first = letor.queries[0]
    assert first.doc_ids == ["GX1", "GX2"]
    np.testing.assert_array_equal(first.features, [[0.5, 0, 0, 2.0], [0, 1.5, 0, 0]])
    np.testing.assert_array_equal(first.labels, [2, 0])
    assert letor.queries[1].doc_ids == ["5-d0"] and letor.queries[2].doc_ids == ["12-d0"]


def test_files_read_together_share_the_widest_feature_space(tmp_path):
    narrow = tmp_path / "narrow.txt"
    wide = tmp_path / "wide.txt"
    narrow.write_text("1 qid:1 1:1 2:1\n")
    wide.write_text("1 qid:2 7:1\n")
    files = read_letor_files([str(narrow), str(wide)])
    assert [f.queries[0].features.shape for f in files] == [(1, 7), (1, 7)]


@pytest.mark.parametrize(
    "bad_line, problem",
    [
        ("x qid:1 1:0.5", "label 'x' is not a number"),
        ("-1 qid:1 1:0.5", "not a non-negative integer"),
        ("1.5 qid:1 1:0.5", "not a non-negative integer"),
        ("1 1:0.5 2:0.1", "is not 'qid:<id>'"),
        ("1", "expected 'label qid:<id>"),
        ("1 qid:1 0:0.5", "below 1"),
        ("1 qid:1 a:0.5", "index 'a' is not an integer"),
        ("1 qid:1 2:abc", "value 'abc' of feature 2"),
        ("1 qid:1 2", "is not 'index:value'"),
        ("1 qid:1 2:nan", "not finite"),
        ("1 qid:1 1:0.1 2:0.3 1:0.2", "feature index 1 appears twice"),
        ("1 qid:1 1:0.3 #docid = GX1", "docid GX1 appears twice in query 1"),
    ],
)
def test_malformed_line_names_file_line_and_problem(tmp_path, bad_line, problem):
    path = tmp_path / "bad.txt"
    path.write_text("0 qid:1 1:0.1 #docid = GX1\n2 qid:1 1:0.9 #docid = GX2\n%s\n" % bad_line)
    with pytest.raises(LetorFormatError) as caught:
        read_letor(str(path))
    assert str(caught.value).startswith("%s:3: " % path)
    assert problem in str(caught.value)


def test_file_without_data_is_refused(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("# only a comment\n\n")
    with pytest.raises(LetorFormatError, match="no data lines"):
        read_letor(str(path))


# --------------------------------------------------------------------------- normalisation round trip


@pytest.mark.parametrize("log1p", [False, True])
def test_round_trip_scales_with_train_min_max_and_clips_other_splits(tmp_path, split_files, log1p):
    data, paths = split_files
    out = tmp_path / "out"
    assert run_splits(paths, out, *(["--log1p"] if log1p else [])) == 0
    transform = signed_log1p if log1p else (lambda x: x)
    train_raw = transform(np.concatenate([f for _, f in data["train"].values()]))
    low, high = train_raw.min(axis=0), train_raw.max(axis=0)
    assert high[2] == low[2]  # feature 3 is constant: it must become 0
    clipped = {"valid": False, "test": False}
    for split in ("train", "valid", "test"):
        written = read_written_split(str(out), split)
        assert list(written) == list(data[split])  # every query, in file order
        for qid, (labels, features) in data[split].items():
            doc_ids, got, got_labels, _ = written[qid]
            raw_rows = [int(d.rsplit("-", 1)[1]) for d in doc_ids]
            x = transform(features[raw_rows])
            with np.errstate(divide="ignore", invalid="ignore"):
                expected = np.where(high > low, 2 * (x - low) / (high - low) - 1, 0.0)
            if split != "train":
                clipped[split] |= bool((np.abs(expected) > 1).any())
            np.testing.assert_allclose(got, np.clip(expected, -1, 1), atol=1e-5)
            np.testing.assert_array_equal(got_labels, labels[raw_rows])
    assert clipped == {"valid": True, "test": True}  # the fixture really exercised clipping
    settings = json.load(open(out / "settings.json"))
    assert settings == {"feature_size": N_FEATURES, "max_label": 2.0}


# --------------------------------------------------------------------------- Rank SVM initial ranking


def test_written_lists_follow_the_fitted_rank_svm(tmp_path, split_files):
    data, paths = split_files
    out = tmp_path / "out"
    assert run_splits(paths, out, "--svm-fraction", "0.1") == 0
    report = json.load(open(out / prepare.REPORT_FILE))
    weights = np.array(report["rank_svm"]["weights"])
    assert len(report["rank_svm"]["sampled_qids"]) == 20  # max(floor(0.1 * 40), the minimum of 20)
    quality = report["rank_svm"]["heldout_training_queries"]
    assert quality["queries"] == 10  # the 30 with a pair, less the 20 trained on
    assert quality["ndcg_10"] > quality["random_ndcg_10"] + 0.1
    assert report["rank_svm"]["warning"] == ""
    correct = total = 0
    for split in ("train", "valid", "test"):
        for _, features, labels, scores in read_written_split(str(out), split).values():
            # written features are rounded to 6 digits, hence the tolerance
            np.testing.assert_allclose(features @ weights, scores, rtol=1e-4, atol=1e-4 * np.abs(weights).sum())
            assert (np.diff(scores) <= 0).all()
            if split == "test":
                better, worse = np.nonzero(labels[:, None] > labels[None, :])
                correct += int((better < worse).sum())
                total += len(better)
    # feature 1 separates the labels, so the SVM orders test pairs far better than chance (0.5)
    assert total > 50 and correct / total > 0.9


def test_rank_svm_sample_is_seeded_and_skips_queries_without_pairs(tmp_path):
    path = write_letor(tmp_path / "t.txt", toy_queries(5, ["q%d" % i for i in range(50)], no_relevant_every=2))
    queries = read_letor(path).queries
    first = train_rank_svm(queries, fraction=0.1, c=200.0, seed=3, min_queries=1)
    again = train_rank_svm(queries, fraction=0.1, c=200.0, seed=3, min_queries=1)
    other = train_rank_svm(queries, fraction=0.1, c=200.0, seed=4, min_queries=1)
    assert first.sampled_qids == again.sampled_qids and np.array_equal(first.weights, again.weights)
    assert first.sampled_qids != other.sampled_qids
    by_qid = {q.qid: q for q in queries}
    assert len(first.sampled_qids) == 5
    assert all(len(set(by_qid[qid].labels)) > 1 for qid in first.sampled_qids)
    assert len(train_rank_svm(queries, fraction=0.001, c=200.0, seed=3, min_queries=1).sampled_qids) == 1


def test_rank_svm_never_trains_on_fewer_than_the_minimum_of_queries(tmp_path):
    path = write_letor(tmp_path / "t.txt", toy_queries(5, ["q%d" % i for i in range(60)], no_relevant_every=4))
    queries = read_letor(path).queries  # 45 queries with a pair
    assert prepare.DEFAULT_SVM_MIN_QUERIES == 20
    for fraction in (0.001, 0.01, 0.2):  # 1% of 60 queries would be 0 queries, floored to 1 before
        svm = train_rank_svm(queries, fraction=fraction, c=200.0, seed=0)
        assert len(svm.sampled_qids) == 20
    assert len(train_rank_svm(queries, fraction=0.5, c=200.0, seed=0).sampled_qids) == 30  # 1% rule above the minimum
    assert len(train_rank_svm(queries[:12], fraction=0.01, c=200.0, seed=0).sampled_qids) == 9  # capped at those with pairs


def test_rank_svm_caps_pairs_per_query_and_warns_when_near_random(tmp_path):
    rng = np.random.default_rng(0)
    long_query = LetorQuery("long", ["d%d" % i for i in range(80)], rng.normal(size=(80, 3)), rng.integers(0, 3, size=80))
    diffs, targets = prepare.pairwise_examples([long_query], max_pairs_per_query=100, seed=0)
    assert diffs.shape == (100, 3) and set(targets) == {-1, 1}
    assert prepare.pairwise_examples([long_query])[0].shape[0] > 1000
    # Labels independent of the features: the held-out ranking is as good as random, and the report says so.
    noise = [LetorQuery("q%d" % i, ["d%d" % j for j in range(10)], rng.normal(size=(10, 3)), rng.integers(0, 3, size=10))
             for i in range(400)]
    svm = train_rank_svm(noise, fraction=0.01, c=200.0, seed=0)
    warning = prepare.near_random_warning(prepare.heldout_quality(svm, noise, seed=0))
    assert "near random" in warning and "held-out training queries" in warning


# --------------------------------------------------------------------------- folds


def write_partitions(directory, n_queries=8):
    """S1..S5 with qids 'p<k>q<i>' so every written query tells its partition."""
    directory.mkdir()
    for k in range(1, 6):
        write_letor(directory / ("S%d.txt" % k), toy_queries(k, ["p%dq%d" % (k, i) for i in range(n_queries)]))
    return directory


def test_fold_rotation_matches_letor_convention():
    # The README's table: Fold1: S1+S2+S3 / S4 / S5 ... Fold5: S5+S1+S2 / S3 / S4.
    table = {
        1: ([1, 2, 3], 4, 5),
        2: ([2, 3, 4], 5, 1),
        3: ([3, 4, 5], 1, 2),
        4: ([4, 5, 1], 2, 3),
        5: ([5, 1, 2], 3, 4),
    }
    for fold, (train, valid, test) in table.items():
        assert fold_partitions(fold) == {"train": train, "valid": [valid], "test": [test]}
    with pytest.raises(ValueError, match="fold 6"):
        fold_partitions(6)


def test_folds_command_writes_each_fold_from_its_partitions(tmp_path, capsys):
    parts = write_partitions(tmp_path / "parts")
    out = tmp_path / "out"
    assert main(["folds", "--partitions", str(parts), "--out", str(out), "--folds", "2,5"]) == 0
    assert sorted(os.listdir(out)) == ["Fold2", "Fold5"]
    for fold in (2, 5):
        for split, partitions in fold_partitions(fold).items():
            qids = list(read_written_split(str(out / ("Fold%d" % fold)), split))
            assert qids == ["p%dq%d" % (k, i) for k in partitions for i in range(8)]
    printed = capsys.readouterr().out
    assert "Fold2 -> " in printed and "Fold5 -> " in printed


# --------------------------------------------------------------------------- queries ULTRA drops


def test_queries_without_relevant_documents_are_written_and_counted(tmp_path, split_files, capsys):
    data, paths = split_files
    single = tmp_path / "test_single.txt"
    # one valid-looking test query with a single (relevant) document: ULTRA drops it too
    single.write_text(open(paths["test"]).read() + "2 qid:lonely 1:1 #docid = L\n")
    paths = dict(paths, test=str(single))
    out = tmp_path / "out"
    assert run_splits(paths, out) == 0
    report = json.load(open(out / prepare.REPORT_FILE))
    for split in ("train", "valid", "test"):
        expected_none = sum(1 for labels, _ in data[split].values() if labels.max() == 0)
        counts = report["splits"][split]
        assert counts["no_relevant"] == expected_none > 0
        assert counts["dropped_by_ultra"] == expected_none + (split == "test")
        assert counts["queries"] == len(read_written_split(str(out), split))  # written anyway
    assert report["splits"]["test"]["fewer_than_2_documents"] == 1
    table_row = [line.split() for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["train"]]
    train_counts = report["splits"]["train"]
    assert table_row == [["train"] + [str(train_counts[k]) for k in ("queries", "documents", "no_relevant", "dropped_by_ultra")]]


def test_ultra_loads_the_written_directory(tmp_path, split_files):
    ultra = require_ultra()
    data, paths = split_files
    out = tmp_path / "out"
    assert run_splits(paths, out) == 0
    report = json.load(open(out / prepare.REPORT_FILE))
    for split in ("train", "valid", "test"):
        loaded = ultra.utils.read_data(os.path.join(str(out), ""), split, None)
        counts = report["splits"][split]
        assert len(loaded.qids) == counts["queries"] - counts["dropped_by_ultra"]
        assert loaded.feature_size == N_FEATURES and len(loaded.features) == counts["documents"]


# --------------------------------------------------------------------------- failures leave nothing half-written


def test_malformed_partition_fails_with_location_and_writes_no_fold(tmp_path, capsys):
    parts = write_partitions(tmp_path / "parts")
    with open(parts / "S3.txt", "a") as handle:
        handle.write("1 qid:p3q99 1:oops #docid = X\n")
    line = len(open(parts / "S3.txt").readlines())
    out = tmp_path / "out"
    assert main(["folds", "--partitions", str(parts), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1
    assert "%s:%d:" % (parts / "S3.txt", line) in error and "'oops'" in error
    assert not out.exists() or os.listdir(out) == []


def test_two_letor_files_concatenated_whose_qids_collide_are_refused_naming_both_blocks(tmp_path, split_files, capsys):
    """Before: prepare merged each colliding qid's two blocks into one query (35 query blocks became 30 queries,
    each with the other file's documents), no warning."""
    _, paths = split_files
    first = open(paths["train"]).read()
    second = write_letor(tmp_path / "other.txt", toy_queries(7, ["t%d" % i for i in range(5)]))  # t0..t4 again
    with open(paths["train"], "a") as handle:
        handle.write(open(second).read())
    lines = first.count("\n")
    t0_lines = sum(1 for line in first.splitlines() if line.split(" ")[1] == "qid:t0")
    out = tmp_path / "out"
    assert run_splits(paths, out) == 2
    error = capsys.readouterr().err
    assert ("%s:1-%d and %s:%d: query t0 appears in two separate blocks of lines (lines 1-%d, then from line %d on); "
            "ultra-multr-prepare would silently merge them into one query. Keep each query's lines together, and give "
            "different queries different qids" % (paths["train"], t0_lines, paths["train"], lines + 1, t0_lines,
                                                  lines + 1)) in error
    assert not out.exists() or os.listdir(out) == []


def test_failure_while_writing_keeps_the_previous_fold_and_no_temporary(tmp_path, monkeypatch):
    parts = write_partitions(tmp_path / "parts")
    out = tmp_path / "out"
    assert main(["folds", "--partitions", str(parts), "--out", str(out), "--folds", "1"]) == 0
    before = {name: open(out / "Fold1" / "train" / name).read() for name in os.listdir(out / "Fold1" / "train")}

    def broken_settings(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(prepare, "write_settings", broken_settings)
    assert main(["folds", "--partitions", str(parts), "--out", str(out), "--folds", "1", "--seed", "7"]) == 2
    assert os.listdir(out) == ["Fold1"]  # no temporary sibling left
    after = {name: open(out / "Fold1" / "train" / name).read() for name in os.listdir(out / "Fold1" / "train")}
    assert after == before
    assert json.load(open(out / "Fold1" / prepare.REPORT_FILE))["rank_svm"]["seed"] == 0


def test_rerun_replaces_a_previous_output(tmp_path, split_files):
    _, paths = split_files
    out = tmp_path / "out"
    assert run_splits(paths, out, "--seed", "1") == 0
    assert run_splits(paths, out, "--seed", "2") == 0
    assert json.load(open(out / prepare.REPORT_FILE))["rank_svm"]["seed"] == 2
    assert sorted(os.listdir(tmp_path)) == ["out", "test.txt", "train.txt", "valid.txt"]  # no temporary left


def test_foreign_output_directory_is_not_replaced(tmp_path, split_files, capsys):
    _, paths = split_files
    out = tmp_path / "precious"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert run_splits(paths, out) == 2
    assert "precious" in capsys.readouterr().err
    assert os.listdir(out) == ["keep.txt"]


@pytest.mark.parametrize(
    "argv, culprit",
    [
        (["folds", "--partitions", "P", "--out", "O", "--folds", "1,7"], "--folds"),
        (["folds", "--partitions", "P", "--out", "O", "--svm-fraction", "0"], "svm_fraction"),
        (["folds", "--partitions", "does-not-exist", "--out", "O"], "does-not-exist"),
        (["splits", "--train", "a.txt", "--valid", "b.txt", "--out", "O"], "--test"),
    ],
)
def test_bad_command_line_prints_one_line_naming_the_culprit(tmp_path, monkeypatch, capsys, argv, culprit):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and culprit in error
    assert os.listdir(tmp_path) == []


def test_options_reject_bad_values():
    with pytest.raises(ValueError, match="svm_c"):
        PrepareOptions(svm_c=0.0)
    with pytest.raises(ValueError, match="train_queries"):
        PrepareOptions(train_queries=0)


# --------------------------------------------------------------------------- small-data subsets


def test_train_queries_keeps_a_seeded_sample_of_ultra_queries_with_their_full_data_lists(tmp_path, split_files):
    data, paths = split_files
    assert run_splits(paths, tmp_path / "full") == 0
    assert run_splits(paths, tmp_path / "cut", "--train-queries", "12") == 0
    assert run_splits(paths, tmp_path / "again", "--train-queries", "12") == 0
    full, cut = read_written_split(str(tmp_path / "full"), "train"), read_written_split(str(tmp_path / "cut"), "train")
    assert len(cut) == 12
    for qid, (docs, features, labels, scores) in cut.items():
        assert labels.max() > 0 and len(labels) >= 2  # ULTRA would not drop it
        # Same Rank SVM and scaling as the full data: the kept query shows the same list.
        assert docs == full[qid][0]
        np.testing.assert_allclose(features, full[qid][1])
        np.testing.assert_allclose(scores, full[qid][3])
    assert cut.keys() == read_written_split(str(tmp_path / "again"), "train").keys()  # seeded
    for split in ("valid", "test"):  # only the training split is cut
        assert read_written_split(str(tmp_path / "cut"), split).keys() == read_written_split(str(tmp_path / "full"), split).keys()
    report = json.load(open(tmp_path / "cut" / prepare.REPORT_FILE))
    assert report["train_queries"] == 12 and report["splits"]["train"]["queries"] == 12
    assert report["rank_svm"]["training_queries"] == len(data["train"])
    assert prepare.made_with(report, PrepareOptions(train_queries=12))
    assert not prepare.made_with(report, PrepareOptions())  # the full-data recipe does not reuse a cut fold
    assert not prepare.made_with(json.load(open(tmp_path / "full" / prepare.REPORT_FILE)), PrepareOptions(train_queries=12))


def test_more_train_queries_than_ultra_keeps_is_refused_naming_the_count(tmp_path, split_files, capsys):
    _, paths = split_files
    assert run_splits(paths, tmp_path / "out", "--train-queries", "31") == 2  # 40 queries, every 4th without relevant
    error = capsys.readouterr().err
    assert "train_queries=31" in error and "only 30 queries" in error
    assert not os.path.exists(tmp_path / "out")
