"""example/reproduce_paper.py: the configs of Table 2, Figure 3 and Table 3 load in the runner as the paper's protocol.

No training: configs are built from fake paths and expanded with the runner's own loader.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys

import numpy as np
import pytest

from conftest import REPO_ROOT
from ultra_multr.config import split_assignments
from ultra_multr.experiments.runner.cli import expand_runs, load_config

_SCRIPT = os.path.join(REPO_ROOT, "example", "reproduce_paper.py")
_SPEC = importlib.util.spec_from_file_location("reproduce_paper", _SCRIPT)
paper = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = paper  # dataclasses look their module up there
_SPEC.loader.exec_module(paper)

CASCADE_YMAX4 = os.path.join(REPO_ROOT, "settings", "click_models", "cascade_eps0.1_ymax4.json")
MQ2008 = os.path.join(REPO_ROOT, "studies", "mq2008", "run.py")


def hparams(text: str) -> dict:
    return dict(item.split("=", 1) for item in split_assignments(text))


def runs_of(tmp_path, argv):
    """Parse ``argv``, write the experiment's config as main() does, load and expand it with the runner."""
    args = paper.parse_args(argv + ["--out", str(tmp_path / "out")])
    path = tmp_path / "config.json"
    path.write_text(json.dumps(paper.experiment_config(args, str(tmp_path / "data"))))
    return expand_runs(load_config(str(path)))


def test_table2_runs_every_method_per_seed_on_simulated_cascade_clicks(tmp_path):
    runs = runs_of(tmp_path, ["--experiment", "table2", "--dataset", "yahoo", "--data", "raw", "--seeds", "0", "1",
                              "--steps", "300", "--simulator-steps", "200"])
    assert len(runs) == 9 * 2
    assert [r.method for r in runs if r.seed == 0] == paper.TABLE2_METHODS
    assert {r.info["dataset"] for r in runs} == {"Yahoo"}
    for run in runs:
        assert run.main_args == {"batch_size": 256, "max_train_iteration": 300, "steps_per_checkpoint": 100,
                                 "selection_bias_cutoff": 10}
        assert run.settings["train_input_feed"] == "ultra_multr.feeds.ClickSimulationFeed"
        assert hparams(run.settings["train_input_hparams"])["click_model_json"] == CASCADE_YMAX4
        assert run.settings["ranking_model_hparams"] == "hidden_layer_sizes=[512,256,128]"
        assert hparams(run.settings["learning_algorithm_hparams"])["learning_rate"] == "0.05"
        assert run.settings["objective_metric"] == "ndcg_10"
    algorithm = {r.method: hparams(r.settings["learning_algorithm_hparams"]) for r in runs if r.seed == 1}
    # MULTR and EIB-MULTR train (and share) the simulator; Rand-MULTR keeps it random.
    assert algorithm["multr"]["simulator_steps"] == algorithm["eib_multr"]["simulator_steps"] == "200"
    assert algorithm["multr"]["simulator_checkpoint"] == algorithm["eib_multr"]["simulator_checkpoint"]
    assert algorithm["multr"]["simulator_checkpoint"].endswith(os.path.join("simulators", "Yahoo.ckpt"))
    assert algorithm["rand_multr"]["simulator_steps"] == "0"
    assert algorithm["eib_multr"]["variant"] == "eib"
    assert "simulator_steps" not in algorithm["dla"]
    with open(CASCADE_YMAX4) as handle:
        click_model = json.load(handle)
    assert click_model["model_name"] == "cascade_model"
    # epsilon + (1 - epsilon) (2^y - 1) / (2^4 - 1) with epsilon = 0.1
    assert click_model["click_prob"] == pytest.approx([0.1 + 0.9 * (2**y - 1) / 15 for y in range(5)])


def test_figure3_sweeps_multr_sample_num_only(tmp_path):
    runs = runs_of(tmp_path, ["--experiment", "figure3", "--dataset", "istella", "--data", "raw", "--seeds", "3"])
    assert len(runs) == len(paper.FIGURE3_SAMPLE_NUMS)
    assert {r.method for r in runs} == {"multr"} and {r.info["dataset"] for r in runs} == {"Istella-S"}
    assert [r.info["sweep"]["value"] for r in runs] == [0, 2, 4, 8, 16, 24, 32]
    assert [hparams(r.settings["learning_algorithm_hparams"])["sample_num"] for r in runs] == [
        "0", "2", "4", "8", "16", "24", "32"]
    assert all(r.main_args["max_train_iteration"] == 10000 and r.seed == 3 for r in runs)
    assert all(hparams(r.settings["learning_algorithm_hparams"])["simulator_steps"] == "10000" for r in runs)


def test_table3_trains_on_logged_clicks_without_simulation(tmp_path):
    runs = runs_of(tmp_path, ["--experiment", "table3", "--data", "tiangong"])
    assert [r.method for r in runs] == paper.TABLE3_METHODS
    assert {r.info["dataset"] for r in runs} == {"Tiangong-ULTR"}
    for run in runs:
        # Each logged list replayed with its clicks (MULTR's simulator holds sessions out of them).
        assert run.settings["train_input_feed"] == "ultra_multr.feeds.ultre.UltreSessionFeed"
        feed = hparams(run.settings["train_input_hparams"])
        assert feed["use_max_candidate_num"] == "False" and "click_model_json" not in feed
        # Model selection on the validation split, which is never the test split (see the view tests).
        assert run.settings["objective_metric"] == "ndcg_10"
    multr = hparams(runs[0].settings["learning_algorithm_hparams"])
    assert "rerank_weight" not in multr  # MULTR's default estimator (rerank_weight=paper)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--experiment", "table3", "--data", "d", "--methods", "multr", "oracle"], "oracle cannot run on real clicks"),
        (["--experiment", "table3", "--dataset", "yahoo", "--data", "d"], "drop --dataset"),
        (["--experiment", "table2", "--data", "d"], "needs --dataset"),
        (["--experiment", "figure3", "--dataset", "yahoo", "--data", "d", "--steps", "0"], "--steps must be >= 1"),
    ],
)
def test_bad_arguments_are_refused_with_the_reason(argv, message, capsys):
    with pytest.raises(SystemExit):
        paper.parse_args(argv + ["--out", "o"])
    assert message in capsys.readouterr().err


def test_letor_preparation_command_per_dataset(tmp_path):
    for name in ("set1.train.txt", "set1.valid.txt", "set1.test.txt", "train.txt", "vali.txt", "test.txt"):
        (tmp_path / name).write_text("1 qid:1 1:0.5\n")
    yahoo = paper.LETOR_DATASETS["yahoo"]
    files = paper.letor_files(yahoo, str(tmp_path))
    argv = paper.prepare_argv(yahoo, files, "out")
    assert argv[argv.index("--valid") + 1] == str(tmp_path / "set1.valid.txt") and "--log1p" not in argv
    istella = paper.LETOR_DATASETS["istella"]
    argv = paper.prepare_argv(istella, paper.letor_files(istella, str(tmp_path)), "out")
    assert argv[argv.index("--valid") + 1] == str(tmp_path / "vali.txt") and "--log1p" in argv
    os.remove(tmp_path / "vali.txt")
    with pytest.raises(paper.DataLayoutError, match="vali.txt"):
        paper.letor_files(istella, str(tmp_path))
    # A data directory prepared from other files, or with another Rank SVM recipe, is not reused.
    from ultra_multr.data import prepare

    data_dir = tmp_path / "prepared"
    data_dir.mkdir()
    svm = {"fraction": 0.01, "min_queries": prepare.DEFAULT_SVM_MIN_QUERIES, "c": 200.0, "seed": 0,
           "max_pairs_per_query": prepare.MAX_PAIRS_PER_QUERY}
    report = {"sources": {split: [files[split]] for split in paper.SPLITS}, "log1p": False, "rank_svm": svm}
    (data_dir / "prepare_report.json").write_text(json.dumps(report))
    assert paper.is_prepared(yahoo, files, str(data_dir))
    assert not paper.is_prepared(yahoo, dict(files, test=str(tmp_path / "test.txt")), str(data_dir))
    del svm["min_queries"]  # prepared before the minimum of queries existed (1% could be one query)
    (data_dir / "prepare_report.json").write_text(json.dumps(report))
    assert not paper.is_prepared(yahoo, files, str(data_dir))


TRAIN_LISTS = "".join("q%d %d %d %d\n" % (q % 10, 3 * q, 3 * q + 1, 3 * q + 2) for q in range(30))
TRAIN_CLICKS = "".join("q%d %d 0 %d\n" % (q % 10, q % 2, 1 - q % 2) for q in range(30))


def write_tiangong(root, train_labels=TRAIN_CLICKS, test_labels="t1 4 0 2\n", splits=("train", "test")):
    """A small ULTRA-format directory: 30 logged lists of 10 training queries (features only as far as the
    script reads them)."""
    root.mkdir()
    (root / "settings.json").write_text(json.dumps({"feature_size": 33, "max_label": 4}))
    for split in splits:
        (root / split).mkdir(parents=True)
        (root / split / (split + ".feature")).write_text("")
        (root / split / (split + ".init_list")).write_text(TRAIN_LISTS if split == "train" else "t1 0 1 2\n")
        (root / split / (split + ".labels")).write_text(train_labels if split == "train" else test_labels)
    return str(root)


def read_lines(path):
    with open(path) as handle:
        return handle.read().splitlines()


def test_tiangong_validation_is_carved_out_of_training_queries_never_the_test_split(tmp_path):
    data = paper.check_tiangong(write_tiangong(tmp_path / "tg"))
    assert (data.has_valid, data.train_lists, data.feature_size) == (False, 30, 33)
    assert data.clicks_per_list == pytest.approx(1.0)
    view = str(tmp_path / "view")
    assert paper.tiangong_view(data, view, fraction=0.2, seed=4) == 2  # 0.2 of 10 queries
    train, valid = (read_lines(os.path.join(view, s, s + ".init_list")) for s in ("train", "valid"))
    valid_qids = {line.split()[0] for line in valid}
    assert len(valid_qids) == 2 and len(valid) == 6  # every logged list of a held-out query
    assert not valid_qids & {line.split()[0] for line in train} and len(train) == 24
    assert sorted(train + valid) == sorted(TRAIN_LISTS.splitlines())
    # Each list keeps its own clicks, and both splits index the training features.
    clicks = dict(zip(TRAIN_LISTS.splitlines(), TRAIN_CLICKS.splitlines()))
    for split, lists in (("train", train), ("valid", valid)):
        assert read_lines(os.path.join(view, split, split + ".labels")) == [clicks[line] for line in lists]
        assert os.readlink(os.path.join(view, split, split + ".feature")) == os.path.join(data.path, "train", "train.feature")
    assert os.readlink(os.path.join(view, "test")) == os.path.join(data.path, "test")
    assert not any("t1" in line for line in valid)
    # Seeded: the same share and seed give the same queries (the view is reused); another seed others.
    inode = os.stat(view).st_ino
    assert paper.tiangong_view(data, view, fraction=0.2, seed=4) == 2 and os.stat(view).st_ino == inode
    paper.tiangong_view(data, view, fraction=0.2, seed=7)
    assert {line.split()[0] for line in read_lines(os.path.join(view, "valid", "valid.init_list"))} != valid_qids
    (tmp_path / "stranger").mkdir()
    with pytest.raises(paper.DataLayoutError, match="not a data view written by this script"):
        paper.tiangong_view(data, str(tmp_path / "stranger"))

    with_valid = paper.check_tiangong(write_tiangong(tmp_path / "tg2", splits=("train", "valid", "test")))
    assert with_valid.has_valid and paper.tiangong_view(with_valid, str(tmp_path / "view2")) == 0
    assert os.readlink(str(tmp_path / "view2" / "valid")) == os.path.join(with_valid.path, "valid")


def test_table3_dry_run_lists_multr_default_and_says_how_validation_is_made(tmp_path, capsys):
    data = write_tiangong(tmp_path / "tg")
    assert paper.main(["--experiment", "table3", "--data", data, "--out", str(tmp_path / "out"), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "no valid/: 0.1 of the training queries (seed 0) become validation" in printed
    assert not (tmp_path / "out" / "data").exists()  # a dry run writes no data view
    config = load_config(str(tmp_path / "out" / "table3_Tiangong-ULTR.json"))
    assert config.datasets["Tiangong-ULTR"] == {"all": os.path.join(str(tmp_path / "out" / "data"), "Tiangong-ULTR")}


@pytest.mark.slow
def test_multr_default_trains_on_a_tiangong_view_through_main_py(tmp_path):
    """Table 3's MULTR (its default estimator) trains through main.py on a Tiangong view.  The failure this
    guarded against: rerank_weight=auto (the default then) stopped on the old view's 'none_keep_last_checkpoint'
    objective; now it scores its pilot on the carved validation queries."""
    from conftest import find_ultra_main, run_ultra_main
    from ultra_multr.data.ultra_format import RankedQuery, write_settings, write_split
    from ultra_multr.generate.ultre_log import pbm_session_log

    log = pbm_session_log(n_queries=10, n_sessions=120, n_features=8, seed=2)
    sessions = [
        RankedQuery(log.queries[q].qid, [log.queries[q].doc_ids[i] for i in shown], log.queries[q].features[shown],
                    clicks.astype(float), -np.arange(10.0))
        for q, shown, clicks in zip(log.query, log.shown, log.clicks)
    ]
    root = tmp_path / "tg"
    write_split(str(root), "train", sessions)
    write_split(str(root), "test", log.queries[:4])
    write_settings(str(root), 8, 4)
    view = str(tmp_path / "view")
    assert paper.tiangong_view(paper.check_tiangong(str(root)), view, fraction=0.2, seed=0) == 2
    args = paper.parse_args(["--experiment", "table3", "--data", str(root), "--out", str(tmp_path / "out")])
    settings = paper.experiment_config(args, view)["settings"]
    settings = {key: value if isinstance(value, str) else ",".join("%s=%s" % kv for kv in value.items())
                for key, value in settings.items()}
    with open(os.path.join(REPO_ROOT, "settings", "multr_dla.json")) as handle:
        base = json.load(handle)
    # logger_guard=none: 10 training queries are too few for the logger guard (MULTR's default), which would fire and
    # leave DLA's losses, the estimator untested; simulator_min_heldout_sessions=1: so are their held-out sessions to
    # judge a simulator, which MULTR would then not train
    base.update(settings, ranking_model_hparams="hidden_layer_sizes=[8]",
                learning_algorithm_hparams="simulator_steps=2,simulator_batch_size=8,sample_num=1,rerank_pilot_steps=1,"
                                           "logger_guard=none,simulator_min_heldout_sessions=1,seed=0")
    (tmp_path / "multr.json").write_text(json.dumps(base))
    model_dir = str(tmp_path / "model")
    result = run_ultra_main(find_ultra_main(), [
        "--setting_file", str(tmp_path / "multr.json"), "--data_dir", view + "/", "--model_dir", model_dir,
        "--output_dir", model_dir + "/", "--batch_size", "8", "--selection_bias_cutoff", "10",
        "--max_train_iteration", "1", "--steps_per_checkpoint", "1"], cwd=str(tmp_path))
    log_text = result.stdout + result.stderr
    assert "ranker: first update starts" in log_text  # the default estimator (rerank_weight=paper: a fixed a, no pilot)
    assert "(a share of the click log held out)" in log_text
    assert os.path.isfile(os.path.join(model_dir, "ultra_multr.MULTR.ckpt"))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"train_labels": "q1 1 0 0\nq2 0 3 0\n"}, r"train\.labels:2: label 3 is outside \[0, 1\]"),
        ({"test_labels": "t1 5 0\n"}, r"test\.labels:1: label 5 is outside \[0, 4\]"),
        ({"splits": ("train",)}, r"test\.feature is missing"),
    ],
)
def test_tiangong_layout_errors_name_the_file(tmp_path, kwargs, message):
    with pytest.raises(paper.DataLayoutError, match=message):
        paper.check_tiangong(write_tiangong(tmp_path / "tg", **kwargs))


def test_tiangong_without_settings_says_what_to_write(tmp_path):
    (tmp_path / "train").mkdir()
    with pytest.raises(paper.DataLayoutError, match='"feature_size": 33, "max_label": 4'):
        paper.check_tiangong(str(tmp_path))


# ----------------------------------------------------------------------------- MQ2008 study (studies/mq2008)


def _dry_run(tmp_path, argv, **env):
    """Run an example script with ``argv`` (``--dry-run`` appended) and ``env`` added; main.py is an empty stand-in
    (a dry run only names it, and importing ultra is slow).  Returns the completed process."""
    import subprocess

    (tmp_path / "main.py").write_text("")
    result = subprocess.run(
        argv + ["--dry-run"], env={**os.environ, "ULTRA_MAIN": str(tmp_path / "main.py"), **env},
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result


@pytest.mark.parametrize(
    "table, methods, variants, click_model",
    [
        ("table2", ["oracle", "multr", "dla", "rem", "paird", "pal", "naive", "rand_multr", "eib_multr"],
         [None], "cascade_eps0.1_ymax2.json"),
        ("budgets", ["naive", "dla", "multr", "eib_multr"],
         ["sessions_per_query=1", "sessions_per_query=4", "sessions_per_query=16"], "cascade_eps0.1_ymax2.json"),
        ("pbm", ["naive", "dla", "multr"], [None], "pbm_eta2_eps0.1_ymax2.json"),
    ],
)
@pytest.mark.slow
def test_mq2008_table_scripts_dry_run_list_their_runs(tmp_path, table, methods, variants, click_model):
    out = tmp_path / "out"
    result = _dry_run(tmp_path, [sys.executable, MQ2008, "--table", table, "--data", str(tmp_path / "MQ2008"),
                                 "--out", str(out), "--seeds", "0", "1", "2", "--folds", "1", "2", "3", "4", "5",
                                 "--steps", "20"])
    assert "would run: python -m ultra_multr.data.prepare folds" in result.stdout
    assert not (out / "data").exists() and not (out / "runs").exists()  # a dry run prepares and trains nothing
    runs = expand_runs(load_config(str(out / "study.json")))
    got = sorted((r.info["method"], r.info["variant"], r.info["fold"], r.seed) for r in runs)
    assert got == sorted(
        (m, v, "Fold%d" % f, s) for m in methods for v in variants for f in range(1, 6) for s in (0, 1, 2)
    )
    assert result.stdout.count("\npending  ") + result.stdout.startswith("pending") == len(runs)
    model = os.path.join(REPO_ROOT, "settings", "click_models", click_model)
    assert all(hparams(r.settings["train_input_hparams"])["click_model_json"] == model for r in runs)
    assert all(r.main_args["max_train_iteration"] == 20 for r in runs)


def test_mq2008_study_config_of_the_readme_loads():
    config = load_config(os.path.join(REPO_ROOT, "studies", "mq2008", "study.json"))
    runs = expand_runs(config)
    assert {r.info["method"] for r in runs} == {"oracle", "naive", "dla", "multr"}
    click_model = hparams(runs[0].settings["train_input_hparams"])["click_model_json"]
    assert os.path.isfile(click_model)
    assert config.datasets["mq2008"]["Fold1"] == os.path.join(REPO_ROOT, "data", "mq2008", "Fold1")


@pytest.mark.slow
def test_small_data_script_cuts_training_queries_and_runs_multr_at_each_fixed_weight(tmp_path):
    out = tmp_path / "out"
    result = _dry_run(tmp_path, [sys.executable, MQ2008, "--table", "small", "--data", str(tmp_path / "MQ2008"),
                                 "--out", str(out), "--seeds", "0", "--folds", "1", "2", "--steps", "20"])
    assert "--train-queries 30" in result.stdout
    runs = expand_runs(load_config(str(out / "study.json")))
    got = sorted((r.info["method"], r.info["variant"] or "", r.info["fold"]) for r in runs)
    variants = ["", "rerank_weight=0", "rerank_weight=paper"]
    folds = ("Fold1", "Fold2")
    assert got == sorted([("dla", "", f) for f in folds] + [("multr", v, f) for v in variants for f in folds])
    weights = {
        r.info["variant"]: hparams(r.settings["learning_algorithm_hparams"]).get("rerank_weight")
        for r in runs if r.info["method"] == "multr"
    }
    # the base row is the pilot's choice, named (the default is the paper's mixture); the hparam is text
    assert weights == {None: "auto", "rerank_weight=0": "0", "rerank_weight=paper": "paper"}


@pytest.mark.slow
def test_ablation_script_runs_each_ablation_beside_the_default_it_is_paired_with(tmp_path):
    out = tmp_path / "out"
    _dry_run(tmp_path, [sys.executable, MQ2008, "--table", "ablations", "--data", str(tmp_path / "MQ2008"),
                        "--out", str(out), "--seeds", "0", "--folds", "1", "--steps", "20"])

    def runs(name):
        found = expand_runs(load_config(str(out / name / "study.json")))
        return {
            (r.info["method"], r.info["variant"] or ""): hparams(r.settings["learning_algorithm_hparams"]) for r in found
        }

    default = runs("default")
    assert sorted(default) == [("dla", ""), ("dla", "sessions_per_query=4"), ("multr", ""),
                               ("multr", "sessions_per_query=4")]
    assert "dr_weight_guard" not in default[("multr", "")] and "simulator_eval_every" not in default[("multr", "")]
    guard = runs("guard_none")
    assert sorted(guard) == [("multr", "")] and guard[("multr", "")]["dr_weight_guard"] == "none"
    eval_every = runs("eval_every_25")
    assert sorted(eval_every) == [("multr", "sessions_per_query=4")]
    assert eval_every[("multr", "sessions_per_query=4")]["simulator_eval_every"] == "25"


@pytest.mark.slow
def test_multr_hparams_of_the_study_script_are_checked_at_the_edge(tmp_path):
    import subprocess

    result = subprocess.run(
        [sys.executable, MQ2008, "--data", str(tmp_path),
         "--out", str(tmp_path / "out"), "--multr-hparams", "dr_weight_gaurd=none", "--dry-run"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    assert "unknown hyper-parameter 'dr_weight_gaurd' (did you mean 'dr_weight_guard'?)" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_generated_small_data_script_lists_its_runs_and_never_mixes_recipes(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _dry_run(tmp_path, [sys.executable, os.path.join(REPO_ROOT, "studies", "mq2008", "generated_small.py"), "--out",
                        str(out), "--datasets", "1", "2", "--seeds", "0"])
    assert not (out / "data").exists()  # a dry run generates nothing
    runs = expand_runs(load_config(str(out / "study.json")))
    got = sorted((r.info["dataset"], r.info["method"], r.info["variant"] or "", r.info["fold"]) for r in runs)
    variants = ["", "rerank_weight=0", "rerank_weight=paper"]
    assert got == sorted([("generated", "dla", "", f) for f in ("Fold1", "Fold2")]
                         + [("generated", "multr", v, f) for v in variants for f in ("Fold1", "Fold2")])
    click_model = hparams(runs[0].settings["train_input_hparams"])["click_model_json"]
    assert click_model.endswith("cascade_eps0.1_ymax4.json")  # graded labels 0..4
    # The data: written once per recipe, kept when asked again, refused for another recipe.
    monkeypatch.syspath_prepend(os.path.join(REPO_ROOT, "studies", "mq2008"))
    generated = importlib.import_module("generated_small")
    directory = str(tmp_path / "data" / "Fold1")
    recipe = {"seed": 1, "train_queries": 5, "features": 7}
    generated.write_dataset(directory, recipe)
    with open(os.path.join(directory, "settings.json")) as handle:
        assert json.load(handle)["feature_size"] == 7
    with open(os.path.join(directory, "train", "train.init_list")) as handle:
        assert len(handle.read().splitlines()) == 5
    before = os.path.getmtime(os.path.join(directory, "train", "train.feature"))
    generated.write_dataset(directory, recipe)
    assert os.path.getmtime(os.path.join(directory, "train", "train.feature")) == before
    with pytest.raises(ValueError, match="generated with .*'train_queries': 5.*use another --out"):
        generated.write_dataset(directory, dict(recipe, train_queries=30))


def test_simulator_rerank_table_reads_each_report_and_summarises_the_gap_per_order(tmp_path):
    spec = importlib.util.spec_from_file_location("srt", os.path.join(REPO_ROOT, "studies", "simulator", "rerank_table.py"))
    table_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table_module)

    def write(name, true_ppl, sim_ppl):
        models = [{"name": n, "log_likelihood": -1.0, "perplexity": p} for n, p in
                  (("true click model", true_ppl), ("MULTR simulator", sim_ppl), ("PBM (fitted)", 2.0),
                   ("cascade (fitted)", true_ppl))]
        (tmp_path / name).mkdir()
        (tmp_path / name / "simulator_report.json").write_text(json.dumps({"models": models}))

    write("small_Fold1_logged", 1.0, 1.1)
    write("small_Fold2_logged", 1.0, 1.3)
    write("small_Fold1_random", 1.0, 1.5)
    (tmp_path / "unrelated").mkdir()
    table = table_module.rerank_table(str(tmp_path))
    assert table.count("| small |") == 3
    assert "small, logged orders: simulator perplexity gap mean +20.0 % (folds +10.0 to +30.0 %)" in table
    assert "small, random orders: simulator perplexity gap mean +50.0 % (folds +50.0 to +50.0 %)" in table
    write("full_Fold1_logged", 1.0, 1.1)
    (tmp_path / "full_Fold1_logged" / "simulator_report.json").write_text(json.dumps({"models": []}))
    with pytest.raises(ValueError, match="full_Fold1_logged.*true click model"):
        table_module.rerank_table(str(tmp_path))
