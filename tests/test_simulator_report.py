"""The simulator report: sessions from a known cascade model, click logs, bad input."""
import json
import os

import pytest
import torch

pytest.importorskip("ultra", reason="ULTRA_pytorch is not importable")

from ultra_multr import simulator_report  # noqa: E402
from ultra_multr.click_model_evaluation import SimulatorTrainingConfig  # noqa: E402
from ultra_multr.data.synthetic import write_synthetic_ultra_dataset  # noqa: E402
from ultra_multr.simulator import ContextAwareUserSimulator, SimulatorConfig, save_simulator  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
        training=SimulatorTrainingConfig(steps=40, batch_size=128, learning_rate=0.01), ctr_samples=50,
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

    code, err = run_main(capsys, "--data_dir", data_dir, "--click_model", CASCADE, "--simulator_hparams", "step=3",
                         "--out", out)
    assert code == 2 and "unknown hyper-parameter 'step' (did you mean 'steps'?)" in err

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
