"""The simulator report: sessions from a known cascade model, click logs, bad input,
held-out sessions on random re-rankings."""
import itertools
import json
import os

import pytest
from conftest import REPO_ROOT as REPO, require_ultra
import torch

require_ultra()

from ultra_multr.experiments import simulator_report  # noqa: E402
from ultra_multr.simulator import SimulatorTrainingConfig  # noqa: E402
from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset  # noqa: E402
from ultra_multr.simulator import ContextAwareUserSimulator, SimulatorConfig, save_simulator  # noqa: E402
from ultra_multr.click_models.ultra import load_click_model_file  # noqa: E402

CASCADE = os.path.join(REPO, "settings", "click_models", "cascade_eps0.1_ymax2.json")
N, F = 6, 8


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_synthetic_ultra_dataset(
        str(tmp_path_factory.mktemp("data")), {"train": 30}, docs_per_query=(3, 9), n_features=F, max_label=2, seed=2
    )


@pytest.fixture(scope="module")
def cascade_report(data_dir, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("report"))
    report = simulator_report.build_report(
        data_dir, out, list_size=N, click_model_json=CASCADE, train_sessions=1500, heldout_sessions=6000, seed=1,
        training=SimulatorTrainingConfig(simulator_steps=40, simulator_batch_size=128, simulator_learning_rate=0.01),
        ctr_samples=50,
    )
    return report, out


def by_name(report):
    return {m["name"]: m for m in report["models"]}


def test_the_true_model_beats_every_fitted_model(cascade_report):
    report, _ = cascade_report
    models = by_name(report)
    assert set(models) == {"true click model", "MULTR simulator", "PBM (fitted)", "cascade (fitted)"}
    true = models.pop("true click model")
    for name, model in models.items():
        assert true["log_likelihood"] > model["log_likelihood"], name
        assert true["perplexity"] < model["perplexity"], name
        assert simulator_report.perplexity_gap(report, model) > 0


def test_tables_have_one_column_per_position(cascade_report):
    report, out = cascade_report
    assert len(report["observed_ctr_per_position"]) == N
    for model in report["models"]:
        for key in ("ctr_per_position", "perplexity_per_position", "log_likelihood_per_position"):
            assert len(model[key]) == N, (model["name"], key)
        assert sum(b["count"] for b in model["reliability"]) > 0
    markdown = open(os.path.join(out, simulator_report.REPORT_MD)).read()
    header = "| model | 1 | 2 | 3 | 4 | 5 | 6 |"
    assert markdown.count(header) == 3
    ctr_table = markdown.split("### Click-through rate per position")[1]
    rows = [line for line in ctr_table.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 1 + 4  # header, observed, four models
    assert json.load(open(os.path.join(out, simulator_report.REPORT_JSON))) == json.loads(json.dumps(report))
    with open(os.path.join(out, simulator_report.CALIBRATION_PNG), "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    assert not [name for name in os.listdir(out) if name.startswith(".tmp")]


def test_known_model_predicts_the_observed_click_rates(cascade_report):
    report, _ = cascade_report
    true = by_name(report)["true click model"]
    assert sum(report["heldout_sessions_per_position"]) < N * report["sessions"]["heldout"]  # lists are short
    for observed, predicted, sessions in zip(
        report["observed_ctr_per_position"], true["ctr_per_position"], report["heldout_sessions_per_position"]
    ):
        # The prediction averages exact rates over the same sessions' queries.
        assert abs(observed - predicted) <= 4.5 * (predicted * (1 - predicted) / sessions) ** 0.5 + 1e-9


def write_log(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def test_click_logs_and_a_saved_simulator(cascade_report, data_dir, tmp_path, capsys):
    _, out = cascade_report
    lists, qids = simulator_report.read_query_lists(data_dir, "train", N)
    shown = lists.mask.sum(1).tolist()
    lines = ["%s %s" % (qid, " ".join("1" if t == q % k else "0" for t in range(k))) for q, (qid, k) in
             enumerate(zip(qids, shown))]
    train = write_log(tmp_path / "train.clicks", lines * 3)
    heldout = write_log(tmp_path / "heldout.clicks", [qids[0] + " 0 1", ""] + lines)
    code = simulator_report.main([
        "--data_dir", data_dir, "--list_size", str(N), "--train_clicks", train, "--heldout_clicks", heldout,
        "--simulator_checkpoint", os.path.join(out, simulator_report.SIMULATOR_CKPT), "--ctr_samples", "10",
        "--out", str(tmp_path / "logs"),
    ])
    assert code == 0, capsys.readouterr().err
    report = json.load(open(tmp_path / "logs" / simulator_report.REPORT_JSON))
    assert [m["name"] for m in report["models"]] == ["MULTR simulator", "PBM (fitted)", "cascade (fitted)"]
    assert report["sessions"]["train"] == 3 * len(qids) and report["sessions"]["heldout"] == 1 + len(qids)
    assert report["observed_ctr_per_position"][1] == pytest.approx(
        (1 + sum(1 for q, k in enumerate(shown) if q % k == 1)) / (1 + sum(1 for k in shown if k > 1))
    )


def run_main(capsys, *args):
    code = simulator_report.main(list(args))
    return code, capsys.readouterr().err


def test_bad_inputs_give_clear_errors(data_dir, tmp_path, capsys):
    out = str(tmp_path / "out")
    missing = str(tmp_path / "nowhere")
    code, err = run_main(capsys, "--data_dir", missing, "--click_model", CASCADE, "--out", out)
    assert code == 2 and os.path.join(missing, "settings.json") + ": no such file" in err

    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"model_name": "my_click_model", "click_prob": [0.1, 1.0]}))
    code, err = run_main(capsys, "--data_dir", data_dir, "--click_model", str(unknown), "--out", out)
    assert code == 2 and "'my_click_model' is unknown; available:" in err and "cascade_model" in err

    code, err = run_main(capsys, "--data_dir", data_dir, "--click_model", str(tmp_path / "none.json"), "--out", out)
    assert code == 2 and "none.json" in err and "not found" in err

    checkpoint = str(tmp_path / "small.ckpt")
    small = ContextAwareUserSimulator(SimulatorConfig(feature_size=5, list_size=N, hidden_size=4))
    save_simulator(checkpoint, small, {})
    code, err = run_main(
        capsys, "--data_dir", data_dir, "--list_size", str(N), "--click_model", CASCADE, "--train_sessions", "10",
        "--heldout_sessions", "10", "--simulator_checkpoint", checkpoint, "--out", out,
    )
    assert code == 2 and "small.ckpt: simulator feature size 5 does not match the data's %d" % F in err

    code, err = run_main(capsys, "--data_dir", data_dir, "--click_model", CASCADE, "--simulator_hparams",
                         "simulator_step=3", "--out", out)
    assert code == 2 and "unknown hyper-parameter 'simulator_step' (did you mean 'simulator_steps'?)" in err

    lists, qids = simulator_report.read_query_lists(data_dir, "train", N)
    short = int(torch.argmin(lists.mask.sum(1)))
    assert not lists.mask[short].all()
    good = write_log(tmp_path / "good.clicks", [qids[0] + " 1"])
    for lines, message in (
        ([qids[0] + " 1", "nope 0 1"], "bad.clicks:2: query 'nope' is not among the 30 queries"),
        ([qids[0] + " 1 2"], "bad.clicks:1: clicks must be 0 or 1"),
        ([qids[0] + " 0" * (N + 1)], "bad.clicks:1: 7 clicks for a list of 6 positions"),
        (["%s%s 1" % (qids[short], " 0" * (N - 1))], "bad.clicks:1: click at position 6, but query %s shows only"
         % qids[short]),
    ):
        bad = write_log(tmp_path / "bad.clicks", lines)
        code, err = run_main(capsys, "--data_dir", data_dir, "--list_size", str(N), "--train_clicks", good,
                             "--heldout_clicks", bad, "--out", out)
        assert code == 2 and message in err, err

    code, err = run_main(capsys, "--data_dir", data_dir, "--click_model", CASCADE, "--train_clicks", good,
                         "--heldout_clicks", good, "--out", out)
    assert code == 2 and "either a click model JSON or both a training and a held-out click log" in err
    assert not os.path.exists(out)  # nothing written on bad input


# -- held-out sessions on random re-rankings ---------------------------------------

HELDOUT = 6000


def random_order_report(data_dir, cascade_report, out, seed=1):
    """The cascade report's setting (its simulator loaded) on randomly re-ordered held-out sessions."""
    return simulator_report.build_report(
        data_dir, out, list_size=N, click_model_json=CASCADE, train_sessions=1500, heldout_sessions=HELDOUT,
        seed=seed, simulator_checkpoint=os.path.join(cascade_report[1], simulator_report.SIMULATOR_CKPT),
        ctr_samples=50, heldout_order="random",
    )


@pytest.fixture(scope="module")
def random_report(data_dir, cascade_report, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("random"))
    return random_order_report(data_dir, cascade_report, out), out


def session_log_likelihood_moments(data_dir, reorder):
    """E and E[x^2] of ln P(session) under the true cascade, over uniform queries, every order of each
    query's shown documents (reorder) or its logged order only, and every click vector (exact)."""
    model = load_click_model_file(CASCADE).model
    lists, _ = simulator_report.read_query_lists(data_dir, "train", N)
    first, second = 0.0, 0.0
    for labels, mask in zip(lists.labels, lists.mask):
        shown = int(mask.sum())
        orders = list(itertools.permutations(range(shown))) if reorder else [tuple(range(shown))]
        clicks = torch.tensor(list(itertools.product([0.0, 1.0], repeat=shown)), dtype=torch.float64)
        ordered = labels[:shown][torch.tensor(orders)]  # [P, k]
        rows_labels = ordered.repeat_interleave(len(clicks), 0)
        rows_clicks = clicks.repeat(len(orders), 1)
        log_p = model.log_likelihood(rows_labels, rows_clicks, torch.ones_like(rows_clicks, dtype=torch.bool))
        p = torch.exp(log_p)
        possible = p > 0
        first += float((p * log_p)[possible].sum()) / len(orders)
        second += float((p * log_p**2)[possible].sum()) / len(orders)
    return first / lists.n_queries, second / lists.n_queries


def test_random_order_true_model_scores_what_it_gives_on_reordered_lists(random_report, cascade_report, data_dir):
    report, out = random_report
    assert report["sessions"]["heldout_order"] == "random"
    assert cascade_report[0]["sessions"]["heldout_order"] == "logged"
    assert "uniformly random order drawn per session" in open(os.path.join(out, simulator_report.REPORT_MD)).read()
    mean, square = session_log_likelihood_moments(data_dir, reorder=True)
    logged, _ = session_log_likelihood_moments(data_dir, reorder=False)
    error = ((square - mean**2) / HELDOUT) ** 0.5
    true = by_name(report)["true click model"]["log_likelihood"]
    # Clicks drawn on each session's order and scored on it: the true model's exact expectation there;
    # 2 * PROB_FLOOR per position covers the clipping.
    assert abs(true - mean) < 4 * error + 2e-6 * N, (true, mean, error)
    assert abs(logged - mean) > 10 * error  # the logged order would be told apart
    assert abs(by_name(cascade_report[0])["true click model"]["log_likelihood"] - logged) < 4 * error


def test_random_order_models_see_the_reordered_documents(random_report, cascade_report):
    logged, random = cascade_report[0], random_report[0]
    gaps = {
        (order, name): simulator_report.perplexity_gap(report, by_name(report)[name])
        for order, report in (("logged", logged), ("random", random))
        for name in ("PBM (fitted)", "cascade (fitted)", "MULTR simulator")
    }
    # The PBM split each pair's click rate between its logged position and its document: off that
    # position the split is wrong.
    assert gaps["random", "PBM (fitted)"] > 2 * gaps["logged", "PBM (fitted)"]
    # The fitted cascade is the true model's family with one parameter per document: it stays close
    # only if each position reads the parameter of the document now shown there.
    assert gaps["random", "cascade (fitted)"] < 0.1
    assert gaps["random", "cascade (fitted)"] < gaps["random", "PBM (fitted)"] / 3
    for order in ("logged", "random"):
        assert gaps[order, "MULTR simulator"] > 0


def test_random_orders_are_seeded_and_differ_across_sessions(random_report, cascade_report, data_dir, tmp_path):
    again = random_order_report(data_dir, cascade_report, str(tmp_path / "again"))
    report = random_report[0]
    for key in ("models", "observed_ctr_per_position", "heldout_sessions_per_position"):
        assert again[key] == report[key], key
    other = random_order_report(data_dir, cascade_report, str(tmp_path / "other"), seed=2)
    assert other["observed_ctr_per_position"] != report["observed_ctr_per_position"]

    lists, _ = simulator_report.read_query_lists(data_dir, "train", N)
    click_model = load_click_model_file(CASCADE)
    sessions, order = simulator_report.sample_sessions(click_model, lists, 2000, torch.Generator().manual_seed(3),
                                                       reorder=True)
    same, same_order = simulator_report.sample_sessions(click_model, lists, 2000, torch.Generator().manual_seed(3),
                                                        reorder=True)
    assert torch.equal(order, same_order) and torch.equal(sessions.clicks, same.clicks)
    shown = lists.mask[sessions.query].sum(1)
    slots = torch.arange(N)
    for s in range(len(sessions)):
        k = int(shown[s])
        assert sorted(order[s, :k].tolist()) == list(range(k)) and order[s, k:].tolist() == list(range(k, N))
    longest = sessions.query == int(torch.argmax(lists.mask.sum(1)))
    assert len({tuple(row) for row in order[longest].tolist()}) > 0.8 * int(longest.sum())
    # A document of label 2 is always clicked when reached (click_prob 1): every session clicks at or
    # above the first position whose *re-ordered* document has label 2.
    labels = lists.rows(sessions.query, order).labels
    top = torch.where(labels == 2, slots, N).min(1).values
    first_click = torch.where(sessions.clicks > 0, slots, N).min(1).values
    assert bool((top < N).any()) and bool((first_click <= top).all())
    assert not bool((first_click <= torch.where(lists.labels[sessions.query] == 2, slots, N).min(1).values).all())


def test_random_order_needs_a_click_model(data_dir, tmp_path, capsys):
    lists, qids = simulator_report.read_query_lists(data_dir, "train", N)
    log = write_log(tmp_path / "log.clicks", [qids[0] + " 1"])
    code, err = run_main(capsys, "--data_dir", data_dir, "--list_size", str(N), "--train_clicks", log,
                         "--heldout_clicks", log, "--heldout_order", "random", "--out", str(tmp_path / "out"))
    assert code == 2
    assert err.strip().splitlines() == [
        "%s: error: --heldout_order random needs sessions sampled from --click_model: a click log has no "
        "clicks on orders it did not show" % simulator_report.PROG
    ]
    assert not os.path.exists(tmp_path / "out")
