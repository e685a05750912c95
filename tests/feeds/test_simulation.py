"""The click-simulation feeds: padding, seeding, the click log, ULTRA's feed format."""
import copy
import json
import logging
import types

import numpy as np
import pytest
from conftest import require_ultra
import torch

ultra = require_ultra()

from ultra_multr import click_models as cm  # noqa: E402
from ultra_multr.click_models import ultra as ultra_click_models  # noqa: E402
from ultra_multr.batch import batch_from_input_feed  # noqa: E402
from ultra_multr.config import HParamError  # noqa: E402
from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset  # noqa: E402
from ultra_multr.feeds.simulation import ClickLogFeed, ClickSimulationFeed  # noqa: E402
from ultra_multr.feeds.arrays import DONE_ATTRIBUTE, query_subset

N = 10  # shown positions; the data's lists have 3..14 documents


@pytest.fixture(scope="module")
def data_set(tmp_path_factory):
    directory = write_synthetic_ultra_dataset(
        str(tmp_path_factory.mktemp("data")), {"train": 40}, docs_per_query=(3, 14), max_label=2, seed=5
    )
    data = ultra.utils.read_data(directory, "train", None)
    data.pad(data.rank_list_size)
    return data


def algorithm_stub(n=N):
    """The attributes ULTRA's learning algorithms give a feed."""
    return types.SimpleNamespace(
        rank_list_size=n,
        letor_features_name="letor_features",
        docid_inputs_name=["docid_input%d" % i for i in range(n)],
        labels_name=["label%d" % i for i in range(n)],
    )


@pytest.fixture
def write_model(tmp_path):
    def write(desc, name="click_model.json"):
        path = tmp_path / name
        path.write_text(json.dumps(desc))
        return str(path)

    return write


def cascade_json(y_max=2):
    return "settings/click_models/cascade_eps0.1_ymax%d.json" % y_max


def as_batch(input_feed, n=N):
    stub = algorithm_stub(n)
    return batch_from_input_feed(input_feed, stub.docid_inputs_name, stub.labels_name, torch.device("cpu"))


def shown_lists(data, query_idx, n=N):
    """[B, n] doc ids of the first n slots, -1 where nothing is shown."""
    return np.array([(list(data.initial_list[q][:n]) + [-1] * n)[:n] for q in query_idx])


def test_padded_slots_are_never_shown_nor_clicked(data_set, write_model):
    # Clicks on every shown document: any click on padding would show at once.
    always = write_model({"model_name": "position_biased_model", "click_prob": [1.0, 1.0, 1.0], "exam_prob": [1.0]})
    feed = ClickSimulationFeed(algorithm_stub(), 16, "click_model_json=%s" % always)
    for _ in range(20):
        input_feed, info = feed.get_batch(data_set)
        docs = shown_lists(data_set, info["rank_list_idxs"])
        batch = as_batch(input_feed)
        assert torch.equal(batch.mask, torch.from_numpy(docs >= 0))
        assert torch.equal(batch.labels, batch.mask.float())
        n_docs = input_feed["letor_features"].shape[0]
        assert n_docs == int((docs >= 0).sum())
        assert np.all(np.array(info["input_list"])[docs < 0] == n_docs)


def test_padding_in_the_middle_of_a_list(write_model):
    always = write_model({"model_name": "cascade_model", "click_prob": [1.0, 1.0], "exam_prob": [1.0]})
    data = types.SimpleNamespace(
        initial_list=[[0, -1, 1, 2], [-1, 3, -1, -1]],
        labels=[[1, 0, 0, 1], [0, 1, 0, 0]],
        features=[[float(i), 1.0] for i in range(4)],
    )
    feed = ClickSimulationFeed(algorithm_stub(4), 2, "click_model_json=%s" % always)
    input_feed, info = feed.get_next_batch(0, data)
    batch = as_batch(input_feed, 4)
    assert batch.mask.tolist() == [[True, False, True, True], [False, True, False, False]]
    # The cascade stops at the first *shown* document.
    assert batch.labels.tolist() == [[1, 0, 0, 0], [0, 1, 0, 0]]
    assert batch.features[0, 2].tolist() == [1.0, 1.0] and batch.features[1, 1].tolist() == [3.0, 1.0]


def test_feed_round_trips_through_batch_from_input_feed(data_set):
    feed = ClickSimulationFeed(algorithm_stub(), 8, "oracle_mode=true")
    input_feed, info = feed.get_next_batch(5, data_set)
    batch = as_batch(input_feed)
    assert info["rank_list_idxs"] == list(range(5, 13))
    docs = shown_lists(data_set, range(5, 13))
    features = np.asarray(data_set.features, dtype=np.float32)
    for b, q in enumerate(range(5, 13)):
        for i in range(N):
            if docs[b, i] >= 0:
                assert batch.features[b, i].tolist() == features[docs[b, i]].tolist()
                assert float(batch.labels[b, i]) == data_set.labels[q][i]
    for name in ["letor_features"] + algorithm_stub().docid_inputs_name + algorithm_stub().labels_name:
        assert input_feed[name].dtype == np.float32


def test_get_next_batch_visits_every_list_once_as_mains_validation_loop_does(data_set):
    feed = ClickSimulationFeed(algorithm_stub(), 16, "click_model_json=%s" % cascade_json())
    seen, index = [], 0
    while index < len(data_set.initial_list):
        _, info = feed.get_next_batch(index, data_set, check_validation=False)
        seen += info["rank_list_idxs"]
        index += len(info["input_list"])
    assert seen == list(range(len(data_set.initial_list)))


def test_empirical_click_rates_follow_the_click_model(data_set):
    feed = ClickSimulationFeed(algorithm_stub(), 400, "click_model_json=%s,seed=1" % cascade_json())
    query = np.full(400, 3)
    arrays = feed.arrays_for(data_set)
    clicks = np.concatenate([feed.clicks_for(arrays, query) for _ in range(25)])
    expected = cm.CascadeModel(cm.graded_click_prob(0.1, 2)).click_probabilities(
        torch.from_numpy(arrays.labels[3:4]), torch.from_numpy(arrays.mask[3:4])
    )[0].numpy()
    tolerance = 4.5 * np.sqrt(expected * (1 - expected) / len(clicks)) + 1e-12
    assert np.all(np.abs(clicks.mean(axis=0) - expected) <= tolerance)


def test_check_validation_keeps_only_lists_with_clicks(data_set):
    hparams = "click_model_json=settings/click_models/pbm_eta2_eps0.1_ymax2.json"
    feed = ClickSimulationFeed(algorithm_stub(), 32, hparams)
    input_feed, info = feed.get_batch(data_set, check_validation=True)
    assert len(info["rank_list_idxs"]) == 32
    assert all(sum(clicks) > 0 for clicks in info["click_list"])


def test_seed_makes_a_run_repeat_exactly(data_set):
    def run(seed):
        feed = ClickSimulationFeed(algorithm_stub(), 8, "click_model_json=%s,seed=%d" % (cascade_json(), seed))
        return [feed.get_batch(data_set, check_validation=True)[1]["click_list"] for _ in range(5)] + [
            feed.get_batch(data_set)[1]["rank_list_idxs"]
        ]

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_click_log_draws_only_logged_sessions(data_set):
    k = 3
    feed = ClickLogFeed(algorithm_stub(), 16, "click_model_json=%s,seed=2,sessions_per_query=%d" % (cascade_json(), k))
    distinct = {}
    for _ in range(60):
        _, info = feed.get_batch(data_set, check_validation=True)
        for q, clicks in zip(info["rank_list_idxs"], info["click_list"]):
            distinct.setdefault(q, set()).add(tuple(clicks))
    log = feed.click_log(feed.arrays_for(data_set))
    assert log.shape == (len(data_set.initial_list), k, N)
    for q, sessions in distinct.items():
        assert sessions <= {tuple(map(float, s)) for s in log[q]}
        assert len(sessions) <= k
    # Some query shows more than one of its sessions: the draw is not stuck on one.
    assert max(len(s) for s in distinct.values()) > 1


def test_click_log_depends_on_the_seed_only(data_set):
    hparams = "click_model_json=%s,seed=9,sessions_per_query=4" % cascade_json()
    first, second = ClickLogFeed(algorithm_stub(), 8, hparams), ClickLogFeed(algorithm_stub(), 8, hparams)
    other = copy.copy(data_set)  # the same data in another object: the log is sampled again, not shared
    other.__dict__.pop(DONE_ATTRIBUTE, None)
    for _ in range(3):  # draws made before the log exists must not change it
        second.get_next_batch(0, other)
    second.generator.manual_seed(123)
    first_log, second_log = first.click_log(first.arrays_for(data_set)), second.click_log(second.arrays_for(other))
    assert first_log is not second_log and np.array_equal(first_log, second_log)


def fresh_data_set(tmp_path, max_label, queries=40):
    directory = write_synthetic_ultra_dataset(str(tmp_path), {"train": queries}, max_label=max_label, seed=3)
    data = ultra.utils.read_data(directory, "train", None)
    data.pad(data.rank_list_size)
    return data


def test_feeds_of_one_process_sample_one_click_log_once(tmp_path, caplog):
    """main.py's feed, MULTR's simulator feeds and the pilot's each used to sample (and announce) the same log."""
    data = fresh_data_set(tmp_path, 4)
    hparams = "click_model_json=%s,seed=1,sessions_per_query=1" % cascade_json(4)
    feeds = [ClickLogFeed(algorithm_stub(), 8, hparams) for _ in range(3)]
    view = query_subset(data, [3, 1])
    with caplog.at_level(logging.INFO, logger="ultra_multr"):
        logs = [feed.click_log(feed.arrays_for(data)) for feed in feeds]
        feeds[0].get_next_batch(0, view)
    announced = [r.getMessage() for r in caplog.records if "sampled a click log" in r.getMessage()]
    assert announced == ["sampled a click log of 1 sessions for each of the 40 queries of data set %s" % (
        data.data_path + data.file_prefix)]
    assert logs[1] is logs[0] and logs[2] is logs[0]
    assert np.array_equal(feeds[0].click_log(feeds[0].arrays_for(view)), logs[0][[3, 1]])


def test_the_label_range_is_checked_on_the_whole_split_once_and_says_so(tmp_path, caplog):
    data = fresh_data_set(tmp_path / "full", 4)
    top = [max(g for d, g in zip(docs[:N], grades[:N]) if d >= 0) for docs, grades in zip(data.initial_list, data.labels)]
    short = [q for q, t in enumerate(top) if t < 4]
    assert short and max(top) == 4
    feed = ClickSimulationFeed(algorithm_stub(), 8, "click_model_json=%s" % cascade_json(4))
    with caplog.at_level(logging.WARNING, logger="ultra_multr"):
        feed.get_next_batch(0, query_subset(data, short))  # a view whose lists stop short of label 4
    assert "labels reach only" not in caplog.text  # the split's labels reach 4: nothing to say

    low = fresh_data_set(tmp_path / "low", 2, queries=12)
    with caplog.at_level(logging.WARNING, logger="ultra_multr"):
        for _ in range(2):  # two feeds, one warning
            ClickSimulationFeed(algorithm_stub(), 8, "click_model_json=%s" % cascade_json(4)).get_batch(low)
    warned = [r.getMessage() for r in caplog.records if "labels reach only" in r.getMessage()]
    assert len(warned) == 1
    assert warned[0].startswith("data set %s (the top %d positions of all its 12 queries) with click_model_json=%s: "
                                "labels reach only 2" % (low.data_path + low.file_prefix, N, cascade_json(4)))


def test_unlimited_click_log_is_the_fresh_click_feed(data_set):
    hparams = "click_model_json=%s,seed=4" % cascade_json()
    fresh = ClickSimulationFeed(algorithm_stub(), 8, hparams)
    unlimited = ClickLogFeed(algorithm_stub(), 8, hparams + ",sessions_per_query=0")
    for _ in range(3):
        assert fresh.get_batch(data_set)[1]["click_list"] == unlimited.get_batch(data_set)[1]["click_list"]


def test_labels_above_the_click_model_range_are_refused(tmp_path):
    directory = write_synthetic_ultra_dataset(str(tmp_path), {"train": 5}, max_label=4)
    data = ultra.utils.read_data(directory, "train", None)
    feed = ClickSimulationFeed(algorithm_stub(), 4, "click_model_json=%s" % cascade_json(2))
    with pytest.raises(cm.LabelRangeError, match=r"train \(the top 10 positions of all its 5 queries\) with click_model_json=.*ymax2.json: "
                       r"labels reach [34] .* 0..2"):
        feed.get_batch(data)


def test_bad_hparams_are_refused_with_the_culprit():
    with pytest.raises(FileNotFoundError, match="click_model_json hparam of ClickSimulationFeed 'missing.json'"):
        ClickSimulationFeed(algorithm_stub(), 4, "click_model_json=missing.json")
    with pytest.raises(HParamError, match="click_model_json is required"):
        ClickSimulationFeed(algorithm_stub(), 4, "seed=1")
    with pytest.raises(HParamError, match="unknown hyper-parameter 'sessions_per_query'"):
        ClickSimulationFeed(algorithm_stub(), 4, "oracle_mode=true,sessions_per_query=3")
    with pytest.raises(HParamError, match="cannot follow dynamic_bias_eta_change"):
        ClickLogFeed(algorithm_stub(), 4, "click_model_json=x,sessions_per_query=3,dynamic_bias_eta_change=0.5")


def test_dynamic_bias_changes_eta_every_interval(data_set):
    feed = ClickSimulationFeed(
        algorithm_stub(),
        4,
        "click_model_json=settings/click_models/pbm_eta1_eps0.1_ymax2.json,"
        "dynamic_bias_eta_change=0.5,dynamic_bias_step_interval=3",
    )
    for _ in range(7):
        feed.get_batch(data_set)
    assert feed.click_model.eta == 2.0
    assert feed.click_model.exam_prob[1] == pytest.approx(0.5 ** 2)


class FirstFeatureClickModel(ultra_click_models.UltraClickModel):
    """Clicks exactly the documents whose first feature is positive; stands in
    for a click model that reads features, like a learned simulator."""

    needs_features = True

    @classmethod
    def from_json(cls, desc, generator=None):
        return cls(generator)

    def sample_clicks(self, labels, mask, features=None, generator=None):
        return ((features[..., 0] > 0) & mask).to(labels.dtype)


def test_a_click_model_that_reads_features(data_set, write_model):
    ultra_click_models.register_click_model("first_feature_for_test", FirstFeatureClickModel)
    path = write_model({"model_name": "first_feature_for_test"})
    feed = ClickSimulationFeed(algorithm_stub(), 16, "click_model_json=%s" % path)
    input_feed, _ = feed.get_batch(data_set)
    batch = as_batch(input_feed)
    assert torch.equal(batch.labels, ((batch.features[..., 0] > 0) & batch.mask).float())


# -- intervention sessions (intervention_share, intervention) -------------------------------------------------


def padded_data(n_queries=60, n=6, seed=0):
    """Lists of n slots with padding anywhere (feature 0 of a document is its id), and two lists that
    cannot be swapped in (no two adjacent real documents) or shuffled (one real document)."""
    rng = np.random.default_rng(seed)
    lists = [[0, -1, 1, -1, 2, -1], [-1, -1, 3, -1, -1, -1]]
    while len(lists) < n_queries:
        real = rng.random(n) < 0.7
        lists.append([0 if r else -1 for r in real] if real.any() else [0] + [-1] * (n - 1))
    next_doc = 4
    for docs in lists[2:]:
        for i, doc in enumerate(docs):
            if doc >= 0:
                docs[i], next_doc = next_doc, next_doc + 1
    grades = rng.integers(0, 3, next_doc)
    return types.SimpleNamespace(
        initial_list=lists,
        labels=[[int(grades[d]) if d >= 0 else 0 for d in docs] for docs in lists],
        features=[[float(d), 1.0] for d in range(next_doc)],
    )


def logged_and_shown(data, info):
    """([B, N] logged doc ids, [B, N] the batch's doc ids by position; -1 at padding)."""
    n = len(info["input_list"][0])
    logged = shown_lists(data, info["rank_list_idxs"], n)
    docid, features = np.array(info["input_list"]), info["letor_features"]
    shown = np.where(docid < len(features), features[np.minimum(docid, len(features) - 1), 0], -1)
    return logged, shown.astype(np.int64)


def intervention_feed(click_model, batch_size, share, kind="swap", n=N, extra=""):
    hparams = "click_model_json=%s,seed=7,intervention_share=%g,intervention=%s%s" % (click_model, share, kind, extra)
    return ClickSimulationFeed(algorithm_stub(n), batch_size, hparams)


@pytest.mark.parametrize("kind", ["swap", "shuffle"])
@pytest.mark.parametrize("share", [0.1, 0.5])
def test_the_feed_shows_the_share_of_intervention_sessions_it_is_given(data_set, fresh_ledger, kind, share):
    from ultra_multr.session_budget import LEDGER

    feed = intervention_feed(cascade_json(), 250, share, kind)
    codes = []
    for _ in range(8):  # 2000 sessions; every list of the data has 3 or more documents, so each can be one
        feed.get_batch(data_set)
        codes.append(feed.last_interventions)
    codes = np.concatenate(codes)
    observed = float(np.mean(codes != -1))
    assert abs(observed - share) <= 4.5 * np.sqrt(share * (1 - share) / len(codes))
    assert set(codes[codes != -1]) <= (set(range(N - 1)) if kind == "swap" else {-2})
    summary = LEDGER.summary()
    assert summary["interventions"] == {"share": share, "kind": kind}
    assert summary["phases"]["ranker"]["interventions"] == int((codes != -1).sum())
    assert summary["phases"]["ranker"]["lists"] == len(codes)


@pytest.mark.parametrize("share", [0.5, 1.0])
def test_a_swap_exchanges_the_two_real_documents_at_the_positions_it_reports(write_model, share):
    data = padded_data()
    model = write_model({"model_name": "cascade_model", "click_prob": [0.3, 0.6, 0.9], "exam_prob": [1.0]})
    feed = intervention_feed(model, 64, share, n=6)
    seen = set()
    for _ in range(20):
        input_feed, info = feed.get_batch(data)
        logged, shown = logged_and_shown(data, info)
        for b, k in enumerate(feed.last_interventions):
            expected = logged[b].copy()
            if k >= 0:
                assert logged[b, k] >= 0 and logged[b, k + 1] >= 0  # never a padded slot
                expected[[k, k + 1]] = expected[[k + 1, k]]
                assert np.flatnonzero(shown[b] != logged[b]).tolist() == [k, k + 1]
                seen.add(int(k))
            elif share == 1.0:  # every session is drawn for a swap: only lists without an adjacent pair are not
                assert not np.any((logged[b, :-1] >= 0) & (logged[b, 1:] >= 0))
            assert shown[b].tolist() == expected.tolist()
        assert np.all(np.array(info["click_list"])[shown < 0] == 0)  # padding is never clicked
    assert seen == set(range(5))


@pytest.mark.parametrize("share", [0.5, 1.0])
def test_a_shuffle_shows_the_same_documents_and_keeps_padding_in_place(write_model, share):
    data = padded_data()
    model = write_model({"model_name": "cascade_model", "click_prob": [0.3, 0.6, 0.9], "exam_prob": [1.0]})
    feed = intervention_feed(model, 64, share, "shuffle", n=6)
    moved = 0
    for _ in range(20):
        _, info = feed.get_batch(data)
        logged, shown = logged_and_shown(data, info)
        codes = feed.last_interventions
        assert set(codes) <= {-1, -2}
        for b in range(len(codes)):
            assert np.array_equal(shown[b] < 0, logged[b] < 0)
            assert sorted(shown[b]) == sorted(logged[b])
            if codes[b] == -1:
                assert np.array_equal(shown[b], logged[b])
                assert share < 1.0 or (logged[b] >= 0).sum() < 2
            moved += int(not np.array_equal(shown[b], logged[b]))
    assert moved > 0


def test_clicks_are_drawn_on_the_order_shown(write_model):
    # Only position 0 is examined, and every examined document is clicked.
    first_only = write_model({"model_name": "position_biased_model", "click_prob": [1.0, 1.0, 1.0],
                              "exam_prob": [1.0, 0.0]})
    data = types.SimpleNamespace(initial_list=[[10 * q + i for i in range(4)] for q in range(8)],
                                 labels=[[0, 1, 2, 0]] * 8, features=[[float(d), 1.0] for d in range(80)])
    feed = intervention_feed(first_only, 120, 1.0, n=4)
    _, info = feed.get_batch(data)
    logged, shown = logged_and_shown(data, info)
    clicks, codes = np.array(info["click_list"]), feed.last_interventions
    assert set(codes) == {0, 1, 2}
    assert np.all(clicks[:, 0] == 1) and np.all(clicks[:, 1:] == 0)
    assert np.array_equal(shown[codes == 0, 0], logged[codes == 0, 1])  # swapped at 0: the logged second doc
    assert np.array_equal(shown[codes > 0, 0], logged[codes > 0, 0])


def test_a_click_model_that_reads_features_sees_the_order_shown(data_set, write_model):
    ultra_click_models.register_click_model("first_feature_for_test", FirstFeatureClickModel)
    feed = intervention_feed(write_model({"model_name": "first_feature_for_test"}), 64, 1.0, "shuffle")
    input_feed, _ = feed.get_batch(data_set)
    batch = as_batch(input_feed)
    assert np.all(feed.last_interventions == -2)
    assert torch.equal(batch.labels, ((batch.features[..., 0] > 0) & batch.mask).float())


def test_share_zero_draws_exactly_what_the_feed_drew_without_the_option(data_set):
    plain = ClickSimulationFeed(algorithm_stub(), 16, "click_model_json=%s,seed=7" % cascade_json())
    off = intervention_feed(cascade_json(), 16, 0.0, "shuffle")
    on = intervention_feed(cascade_json(), 16, 0.5)
    for check_validation in (False, True, False):
        batches = [feed.get_batch(data_set, check_validation=check_validation) for feed in (plain, off, on)]
        assert batches[1][1]["click_list"] == batches[0][1]["click_list"]
        assert batches[1][1]["input_list"] == batches[0][1]["input_list"]
        for name, values in batches[0][0].items():
            assert np.array_equal(batches[1][0][name], values)
        assert np.all(off.last_interventions == -1)
        if not check_validation:  # the interventions draw from their own stream: the same queries at any share
            assert batches[2][1]["rank_list_idxs"] == batches[0][1]["rank_list_idxs"]
    assert torch.equal(off.generator.get_state(), plain.generator.get_state())


def test_evaluation_batches_and_oracle_mode_show_the_logged_order(data_set, fresh_ledger):
    from ultra_multr.session_budget import LEDGER

    feed = intervention_feed(cascade_json(), 16, 1.0)
    _, info = feed.get_next_batch(0, data_set)
    arrays = feed.arrays_for(data_set)
    assert np.all(feed.last_interventions == -1) and info["rank_list_idxs"] == list(range(16))
    assert np.array_equal(info["letor_features"], arrays.features[arrays.doc_ids[:16][arrays.mask[:16]]])
    oracle = ClickSimulationFeed(algorithm_stub(), 16, "oracle_mode=true,intervention_share=1")
    _, info = oracle.get_batch(data_set)
    assert np.all(oracle.last_interventions == -1)
    assert np.array_equal(info["click_list"], oracle.arrays_for(data_set).labels[info["rank_list_idxs"]])
    assert LEDGER.summary()["interventions"] is None


def test_bad_intervention_hparams_are_refused_naming_the_value():
    with pytest.raises(HParamError, match=r"intervention_share must be in \[0, 1\], got 1.5"):
        ClickSimulationFeed(algorithm_stub(), 4, "click_model_json=x,intervention_share=1.5")
    with pytest.raises(HParamError, match=r"intervention must be one of swap, shuffle, got 'swapp' "
                                          r"\(did you mean 'swap'\?\)"):
        ClickSimulationFeed(algorithm_stub(), 4, "click_model_json=x,intervention=swapp")
    with pytest.raises(HParamError, match="unknown hyper-parameter 'intervention_shares' "
                                          r"\(did you mean 'intervention_share'\?\)"):
        ClickSimulationFeed(algorithm_stub(), 4, "click_model_json=x,intervention_shares=0.1")
    with pytest.raises(HParamError, match=r"intervention_share=0.1 needs fresh clicks: a fixed click log "
                                          r"\(sessions_per_query=3\)"):
        ClickLogFeed(algorithm_stub(), 4, "click_model_json=x,sessions_per_query=3,intervention_share=0.1")
