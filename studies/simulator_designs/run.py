"""Simulator designs for MULTR's re-ranked clicks: screened by the decile statistic, then a grid over runs.

MULTR's doubly-robust loss puts S/(S+1) of its weight on its simulator's clicks for orders no user saw; whether
MULTR gains over DLA is decided there (issue 37).  Each design is a setting of the one trainer
(``ultra_multr.simulator``); every method's knobs are pinned here (every knob of MULTRConfig and DLAConfig named),
so that no later default change makes the runs stale.  The learning rate is fixed at 0.05 for every arm.

    # 1. screening, simulator only: every design on the 3 recipe sets x 2 seeds, cascade clicks
    python studies/simulator_designs/run.py screen --out out/designs [--workers 2]
    # 1b. the chosen design under position-based clicks (goal B1)
    python studies/simulator_designs/run.py screen --out out/designs --regime pbm --screen_designs authors_training
    # 2. the grid with the design the screening's rule chose (or --design NAME)
    python studies/simulator_designs/run.py grid --out out/designs --regime cascade --seeds 0 1 2 3 4 5
    python studies/simulator_designs/run.py grid --out out/designs --regime pbm --seeds 0 1
    python studies/simulator_designs/run.py grid --out out/designs --regime sparse --seeds 0 1 2
    python studies/simulator_designs/run.py grid --out out/designs --regime rand --seeds 0 1
    # 3. the table of everything finished
    python studies/simulator_designs/run.py table --out out/designs

Data: the paper_setting grid's recipe sets (``quadratic_1_f46`` drawn with recipe seeds 0, 1, 2: 46 features,
quadratic relevance, a Rank SVM logger on 1 % of the labels) with 1,000 validation queries; the sparse regime's
``quadratic_1_3000q`` (one fixed logged session per training query, 3,000 queries).  The decile statistic
(:mod:`ultra_multr.experiments.simulator_validity`): the simulator's error under uniformly random orders, in the
logger's top decile minus its bottom decile, over the truth's mean click; 0 when the error does not follow what
the logger favoured.  Written to ``--results``: ``simulator_designs.csv`` / ``.md`` (one row per design and cell:
the screening rows without nDCG), ``screening_runs.csv`` (every screening run), ``choice.md`` (the rule's choice).
"""
from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import os
import re
import sys
from dataclasses import replace
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "studies", "paper_setting"))

import screen  # noqa: E402  (the paper_setting study's runner config and tables)

from ultra_multr.compat import startup  # noqa: E402,F401  (ULTRA's fixes before it is imported)
from ultra_multr.config import flat_values  # noqa: E402
from ultra_multr.experiments import compare  # noqa: E402
from ultra_multr.experiments.aggregate import as_host_counts, collect_runs, marked_label, runs_over_runs  # noqa: E402
from ultra_multr.experiments.runner import cli as runner  # noqa: E402
from ultra_multr.experiments.runner.runs import expand_runs, run_status  # noqa: E402
from ultra_multr.experiments.study_config import load_config  # noqa: E402
from ultra_multr.experiments.significance import randomization_test  # noqa: E402
from ultra_multr.files import atomic_write_text  # noqa: E402
from ultra_multr.generate.ultra_recipe import SCREENED_RECIPES, write_recipe_dataset  # noqa: E402

RESULTS = os.path.join(REPO, "studies", "simulator_designs", "results")
PBM = os.path.join(REPO, "settings", "click_models", "pbm_eta1_eps0.1_ymax4.json")
CLICK_MODELS = {"cascade": screen.CASCADE, "pbm": PBM, "sparse": screen.CASCADE, "rand": screen.CASCADE,
                "screen": screen.CASCADE, "screen_pbm": PBM}
#: The screening stages and their clicks: the rule's (cascade), and position-based (goal B1 asks for both).
SCREENS = {"screen": "cascade", "screen_pbm": "pbm"}
#: Knobs left to the run: its seed (the runner's), its device and its log.
UNPINNED = ("seed", "device", "log_every", "simulator_log_every")
LEARNING_RATE = 0.05
#: The simulator's defaults when this study began; its screening made ``authors_training`` the default after, so
#: its designs (``default`` among them) are overrides of these, and no run of it goes stale with that change.
STUDY_BASE: Dict[str, object] = {"simulator_dropout": 0.0, "simulator_actions": 3, "teacher_forcing_ratio": 1.0,
                                 "teacher_forcing_unit": "click"}
#: The designs: overrides of MULTR's defaults (each a setting of the one trainer).
DESIGNS: Dict[str, Dict[str, object]] = {
    "default": {},
    # (b) factorised: relevance of the document's own features times examination by position and last click
    "factorised": {"simulator_design": "factorised"},
    # (c) dropout on the position input (Zhang et al., KDD 2023)
    "position_dropout": {"simulator_position_dropout": 0.5},
    # (d) model selection on held-out queries instead of held-out sessions of the training queries
    "heldout_queries": {"simulator_heldout_unit": "queries"},
    "factorised_heldout_queries": {"simulator_design": "factorised", "simulator_heldout_unit": "queries"},
    # added after the first screening, where the authors' design alone came near the goal: which part of it does?
    # their training (decoder dropout 0.4, two action embeddings, teacher forcing 0.5 per batch) on our network
    "authors_training": {"simulator_dropout": 0.4, "simulator_actions": 2, "teacher_forcing_ratio": 0.5,
                         "teacher_forcing_unit": "batch"},
    # their teacher forcing alone: the decoder learns from its own sampled clicks half the time
    "teacher_forcing_batch": {"teacher_forcing_ratio": 0.5, "teacher_forcing_unit": "batch"},
    # the upper bound: the click model behind the clicks stands in for the simulator
    "true_click_model": {"simulator_control": "true_click_model"},
    # (a) the authors' released simulator (rowedenny/MULTR): a bidirectional GRU encoder and a GRU decoder on an
    # input MLP [512, 256, 64], position embedding of the hidden size, dropout 0.4 on the decoder's output, two
    # action embeddings, teacher forcing 0.5 decided per batch, Adam 1e-3 with weight decay 1e-5 (an L2 term of
    # 5e-6), 10,050 steps without early stopping
    "authors": {"simulator_cell": "gru", "simulator_input_mlp": [512, 256, 64], "simulator_position_size": 64,
                "simulator_dropout": 0.4, "simulator_actions": 2, "teacher_forcing_ratio": 0.5,
                "teacher_forcing_unit": "batch", "simulator_learning_rate": 0.001, "simulator_l2": 5e-6,
                "simulator_steps": 10050, "simulator_patience": 0},
}
CONTROL = "true_click_model"
#: The tables' name of :data:`DESIGNS`' ``default``: the simulator's defaults when the study began (:data:`STUDY_BASE`).
OLD_DEFAULT = "old_default"


def shown(design: str) -> str:
    """A :data:`DESIGNS` name as the tables print it (``default`` is :data:`OLD_DEFAULT` there)."""
    return OLD_DEFAULT if design == "default" else design


#: The label's mark of a design whose screening runs an earlier tree trained (:func:`carried_rows`).
CARRIED_MARK = " (carried)"
SIMULATOR_CKPT = os.path.join("model", "ultra_multr.MULTR.simulator.ckpt")
#: A run's decile statistic, kept beside its results under the key of its inputs (:func:`decile_key`).
DECILE_FILE = "decile_statistic.json"
#: What a carried checkpoint must share with a current run on its set and seed.
FINGERPRINT_KEYS = ("data_fingerprint", "click_model_fingerprint", "train_input_feed", "train_input_hparams")
#: The screening's rule: among designs whose simulator trains in at most this many times the default's time.
TIME_FACTOR = 1.5
SETS = ("quadratic_1_f46", "quadratic_1_f46_set1", "quadratic_1_f46_set2")
COLUMNS = ("data", "regime", "design", "runs", "decile_stat", "simulator_s", "ndcg10", "delta_vs_dla", "ci_low",
           "ci_high", "p_runs", "p_queries")
SAVED = re.compile(r"user simulator: saved .* \(([0-9.]+) s\)")


def as_setting(value: object) -> object:
    """A knob's value as a runner config holds it: a list of values, a number or a string."""
    if isinstance(value, tuple):
        return [as_setting(item) for item in value]
    return value if isinstance(value, (int, float, bool)) else str(value)


def pinned_values(config) -> Dict[str, object]:
    """Every knob of ``config`` but :data:`UNPINNED` as a runner config holds it."""
    return {name: as_setting(value) for name, value in flat_values(config).items() if name not in UNPINNED}


def pinned(config_class, overrides: Dict[str, object]) -> Dict[str, object]:
    """Every knob of ``config_class`` at its default but :data:`UNPINNED` (MULTR's simulator at
    :data:`STUDY_BASE`), then ``overrides``; JSON values."""
    from ultra_multr.algorithms.multr import MULTRConfig

    base = STUDY_BASE if issubclass(config_class, MULTRConfig) else {}
    return dict(pinned_values(config_class()), learning_rate=LEARNING_RATE, **dict(base, **overrides))


def method(label: str, overrides: Dict[str, object], algorithm: str = "MULTR") -> dict:
    """A runner method of MULTR (or DLA) with every knob pinned."""
    from ultra_multr.algorithms.dla import DLAConfig
    from ultra_multr.algorithms.multr import MULTRConfig

    config_class = MULTRConfig if algorithm == "MULTR" else DLAConfig
    return {"label": label, "role": "multr" if algorithm == "MULTR" else "baseline",
            "learning_algorithm": "ultra_multr.%s" % algorithm,
            "learning_algorithm_hparams": pinned(config_class, overrides)}


def methods(regime: str, design: Optional[str]) -> Dict[str, dict]:
    """The runner's methods of a stage: the screening's designs, or a grid's arms."""
    if regime in SCREENS:
        return {"design_" + name: method(name, overrides) for name, overrides in DESIGNS.items()}
    sparse = {"simulator_heldout_max_share": 0.25} if regime == "sparse" else {}
    if regime == "rand":
        from ultra_multr.algorithms.multr import MULTRConfig
        from ultra_multr.config import parse_hparams

        with open(os.path.join(REPO, "settings", "multr_paper.json")) as handle:
            text = json.load(handle)["learning_algorithm_hparams"]
        defaults = pinned(MULTRConfig, {})
        paper = {name: value for name, value in pinned_values(parse_hparams(MULTRConfig, text)).items()
                 if name != "learning_rate" and value != defaults[name]}
        return {"dla": method("DLA", {}, "DLA"),
                "rand_default": method("Rand-MULTR", {"simulator_steps": 0}),
                "rand_paper": method("Rand-MULTR, the paper's form", dict(paper, simulator_steps=0))}
    return {"dla": method("DLA", {}, "DLA"),
            "multr_true": method("MULTR, true click model", dict(DESIGNS[CONTROL], **sparse)),
            "multr_" + design: method("MULTR, %s" % design, dict(DESIGNS[design], **sparse))}


def data_dirs(out: str, regime: str) -> Dict[str, str]:
    """Generate (once) and name the sets of a stage: the 3 recipe sets, or the sparse regime's one."""
    names = {"sparse": {"quadratic_1_3000q": ("quadratic_1_3000q", 0)}}.get(
        regime, {name: ("quadratic_1_f46", k) for k, name in enumerate(SETS)})
    dirs = {}
    for name, (recipe, seed) in names.items():
        dirs[name] = os.path.join(out, "data", name)
        if not os.path.isfile(os.path.join(dirs[name], "prepare_report.json")):
            write_recipe_dataset(dirs[name], replace(SCREENED_RECIPES[recipe], seed=seed, valid_queries=1000))
    return dirs


def run_stage(out: str, regime: str, seeds: Sequence[int], steps: int, design: Optional[str], workers: int,
              designs: Sequence[str] = tuple(DESIGNS)) -> int:
    """The runner over a stage's methods x sets x seeds (resumable: finished runs are kept); the screening runs
    ``designs`` only."""
    stage = os.path.join(out, regime)
    definitions = methods(regime, design)
    if regime in SCREENS:
        definitions = {"design_" + name: definitions["design_" + name] for name in designs}
    config = screen.study_config(stage, data_dirs(out, regime), list(seeds), steps, list(definitions),
                                 os.path.abspath(CLICK_MODELS.get(regime, screen.CASCADE)),
                                 sessions_per_query=1 if regime == "sparse" else 0, definitions=definitions)
    if regime in SCREENS:  # the simulator alone: two ranker updates (main.py checks at every checkpoint)
        config["main_args"].update(max_train_iteration=1, steps_per_checkpoint=1)
    path = os.path.join(stage, "study.json")
    os.makedirs(stage, exist_ok=True)
    atomic_write_text(path, json.dumps(config, indent=1) + "\n")
    return runner.main([path, "--workers", str(workers), "--threads", "1"])


def simulator_seconds(run_dir: str) -> float:
    """The simulator's training time in the run's log (0: none trained, e.g. a control)."""
    with open(os.path.join(run_dir, "train.stderr")) as handle:
        found = SAVED.findall(handle.read())
    return float(found[-1]) if found else 0.0


@functools.lru_cache(maxsize=None)
def code_digests() -> tuple:
    """SHA-256 of every source file of ``ultra_multr``, once per process (the code this process imported)."""
    import ultra_multr
    from ultra_multr.data.check_cache import file_sha256

    package = os.path.dirname(ultra_multr.__file__)
    return tuple(file_sha256(path) for path in sorted(os.path.join(folder, name)
                                                      for folder, _, names in os.walk(package)
                                                      for name in names if name.endswith(".py")))


def decile_key(checkpoint: Optional[str], data_dir: str, regime: str) -> str:
    """SHA-256 of what a run's decile statistic is a function of: its simulator checkpoint (none for the control),
    the truth's click model, its set's training split and the code that reads and runs them
    (:func:`code_digests`)."""
    import hashlib

    from ultra_multr.data.check_cache import file_sha256

    train = os.path.join(data_dir, "train")
    paths = [checkpoint] if checkpoint else []
    paths += [CLICK_MODELS[regime]] + [os.path.join(train, name) for name in sorted(os.listdir(train))]
    digests = [file_sha256(path) for path in paths] + list(code_digests())
    return hashlib.sha256(json.dumps(digests).encode()).hexdigest()


def decile_statistics(out: str, records, regime: str) -> Dict[str, float]:
    """run folder -> the decile statistic of its simulator against the truth on its set's training lists.

    Each is kept in the run folder (``decile_statistic.json``) under :func:`decile_key` and read from there while
    the key holds; a changed checkpoint, click model, training split or code computes it again."""
    import ultra

    from ultra_multr.click_models.ultra import load_click_model_file
    from ultra_multr.experiments.simulator_validity import logger_score_matrix, simulator_validity
    from ultra_multr.feeds.arrays import query_arrays
    from ultra_multr.simulator import load_simulator
    from ultra_multr.simulator.controls import TrueClickModelSimulator

    found, truths = {}, {}
    for record in records:
        run_dir = record.info["run_dir"]
        path = os.path.join(run_dir, SIMULATOR_CKPT)
        control = record.info["method"].endswith("true") or record.info["method"] == "design_" + CONTROL
        if not (control or os.path.isfile(path)):
            continue
        fold = record.info["fold"]
        data_dir = os.path.join(out, "data", fold, "")
        stored_path = os.path.join(run_dir, DECILE_FILE)
        key = decile_key(None if control else path, data_dir, regime)
        if os.path.isfile(stored_path):
            with open(stored_path) as handle:
                stored = json.load(handle)
            if stored.get("key") == key:
                found[run_dir] = float(stored["decile_statistic"])
                continue
        if fold not in truths:
            data = ultra.utils.read_data(data_dir, "train", None, 0)
            arrays = query_arrays(data, 10)
            truth = TrueClickModelSimulator(load_click_model_file(CLICK_MODELS[regime]).model,
                                            arrays.features[arrays.doc_ids[arrays.mask]], arrays.labels[arrays.mask], 10)
            truths[fold] = (truth, torch.from_numpy(arrays.list_features(np.arange(arrays.n_queries))),
                            torch.from_numpy(arrays.mask), logger_score_matrix(data_dir, "train", data, 10))
        truth, features, mask, scores = truths[fold]
        simulator = truth if control else load_simulator(path, torch.device("cpu"))[0]
        found[run_dir] = float(simulator_validity(simulator, truth, features, mask, scores, 256)["decile_statistic"])
        atomic_write_text(stored_path, json.dumps({"key": key, "decile_statistic": found[run_dir]}) + "\n")
    return found


def finished(out: str, regime: str) -> List:
    """The finished runs of a stage's config (its ``study.json``), each with its folder in ``info["run_dir"]``.

    Raises:
        SystemExit: a run folder finished under another configuration or on other data (its results do not hold),
            or one that the stage's config no longer holds: named, none is tabled.
    """
    runs_dir = os.path.join(out, regime, "runs")
    if not os.path.isdir(runs_dir):
        return []
    current = {run.run_dir: run_status(run) for run in expand_runs(load_config(os.path.join(out, regime, "study.json")))}
    records = collect_runs(runs_dir)
    for record in records:
        record.info["run_dir"] = os.path.join(runs_dir, record.info["dataset"], record.info["fold"],
                                              record.info["method"], "seed%d" % record.info["seed"])
    bad = ["%s: %s" % (r.info["run_dir"], current.get(r.info["run_dir"], "not a run of %s/study.json" % regime))
           for r in records if current.get(r.info["run_dir"]) != "done"]
    if bad:
        raise SystemExit("error: %d finished run folder(s) do not hold for the %s stage's config; move them away:\n  %s"
                         % (len(bad), regime, "\n  ".join(bad)))
    return records


def fmt(value: Optional[float], digits: int = 4, sign: bool = False) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return ("%+.*f" if sign else "%.*f") % (digits, value)


def screening_rows(out: str, stage: str = "screen") -> List[dict]:
    """One row per design of a screening stage: the median decile statistic over its runs, the median training
    time."""
    records = finished(out, stage)
    deciles = decile_statistics(out, records, stage)
    rows, per_run = [], []
    for name in DESIGNS:
        mine = [r for r in records if r.info["method"] == "design_" + name]
        if not mine:
            continue
        stats = [deciles[r.info["run_dir"]] for r in mine if r.info["run_dir"] in deciles]
        seconds = [simulator_seconds(r.info["run_dir"]) for r in mine]
        per_run += [{"design": shown(name), "clicks": SCREENS[stage], "set": r.info["fold"], "seed": r.info["seed"],
                     "decile_stat": fmt(deciles.get(r.info["run_dir"])), "simulator_s": fmt(s, 1)}
                    for r, s in zip(mine, seconds)]
        rows.append({"data": "ultra_recipe", "regime": "%s (screening)" % SCREENS[stage], "key": name,
                     "design": shown(name), "runs": len(mine),
                     "decile_stat": fmt(float(np.median(stats)) if stats else None),
                     "simulator_s": fmt(float(np.median(seconds)), 1)})
    return rows, per_run


def design_config(name: str):
    """MULTR's config of design ``name`` (its :data:`DESIGNS` overrides of the defaults and :data:`STUDY_BASE`)."""
    from ultra_multr.algorithms.multr import MULTRConfig
    from ultra_multr.config import parse_hparams

    text = ",".join("%s=%s" % (knob, json.dumps(value).replace(" ", ""))
                    for knob, value in dict(STUDY_BASE, **DESIGNS[name]).items())
    return parse_hparams(MULTRConfig, text, "design %s" % name)


def tensors_equal(path_a: str, path_b: str) -> bool:
    """Whether two simulator checkpoints hold the same weights, bit for bit."""
    from ultra_multr.simulator import load_simulator

    a, b = (load_simulator(p)[0].state_dict() for p in (path_a, path_b))
    return a.keys() == b.keys() and all(torch.equal(a[key], b[key]) for key in a)


class CarriedRun:
    """A screening run of an earlier tree, as :func:`decile_statistics` reads it."""

    def __init__(self, run_dir: str, fold: str, seed: int) -> None:
        self.seed = seed
        self.info = {"run_dir": run_dir, "fold": fold, "method": "design_carried"}


def checkpoint_metadata(run_dir: str) -> dict:
    """The simulator checkpoint's metadata of a run, as JSON holds it."""
    from ultra_multr.simulator import load_simulator

    return json.loads(json.dumps(load_simulator(os.path.join(run_dir, SIMULATOR_CKPT))[1]))


def carried_rows(out: str, carried: str, designs: Sequence[str]) -> tuple:
    """Screening rows of ``designs`` from the runs of an earlier tree's screening folder ``carried``, where they
    hold: every design run in both folders (same set and seed) trained bit-identical weights (the code that trains
    simulators unchanged), and each carried checkpoint's identity (the knobs declared ``checkpoint=True``, its seed)
    equals its design's current config, its feed and data fingerprints those of a current run on its set and seed.
    Returns (rows, per-run rows, the check's sentence).

    Raises:
        SystemExit: a check fails (named).
    """
    from ultra_multr.config import identity

    old_runs = os.path.join(carried, "runs", "recipe")
    twins, compared = {}, 0
    for record in finished(out, "screen"):
        fold, seed, run_dir = record.info["fold"], record.info["seed"], record.info["run_dir"]
        old = os.path.join(old_runs, fold, record.info["method"], "seed%d" % seed)
        if not os.path.isfile(os.path.join(run_dir, SIMULATOR_CKPT)):
            continue  # a control: no simulator trained
        twins[(fold, seed)] = checkpoint_metadata(run_dir)
        if os.path.isfile(os.path.join(old, SIMULATOR_CKPT)):
            if not tensors_equal(os.path.join(old, SIMULATOR_CKPT), os.path.join(run_dir, SIMULATOR_CKPT)):
                raise SystemExit("error: %s trained other weights than %s: the simulator's code changed since; "
                                 "rerun %s" % (old, run_dir, ", ".join(designs)))
            compared += 1
    if not compared:
        raise SystemExit("error: no run of %s has a current twin to check the simulator's code against" % carried)
    rows, per_run = [], []
    for name in designs:
        expected = json.loads(json.dumps(identity(design_config(name), "checkpoint")))
        runs = []
        for fold in SETS:
            design_dir = os.path.join(old_runs, fold, "design_" + name)
            for seed_dir in sorted(os.listdir(design_dir)) if os.path.isdir(design_dir) else []:
                if not os.path.isfile(os.path.join(design_dir, seed_dir, "done.json")):
                    continue  # unfinished there
                run = CarriedRun(os.path.join(design_dir, seed_dir), fold, int(seed_dir[len("seed"):]))
                meta, twin = checkpoint_metadata(run.info["run_dir"]), twins.get((fold, run.seed), {})
                wrong = [k for k, v in expected.items() if meta.get(k) != v]
                wrong += [k for k in FINGERPRINT_KEYS if k not in twin or meta.get(k) != twin[k]]
                wrong += ["seed"] if meta.get("seed") != run.seed else []
                if wrong:
                    raise SystemExit("error: %s does not hold for design %s now: %s differ(s) (or no current run "
                                     "on its set and seed)" % (run.info["run_dir"], name, ", ".join(wrong)))
                runs.append(run)
        deciles = decile_statistics(out, runs, "cascade")
        seconds = [simulator_seconds(run.info["run_dir"]) for run in runs]
        per_run += [{"design": name + CARRIED_MARK, "clicks": "cascade", "set": run.info["fold"], "seed": run.seed,
                     "decile_stat": fmt(deciles[run.info["run_dir"]]), "simulator_s": fmt(s, 1)}
                    for run, s in zip(runs, seconds)]
        rows.append({"data": "ultra_recipe", "regime": "cascade (screening)", "key": name,
                     "design": name + CARRIED_MARK,
                     "runs": len(runs), "decile_stat": fmt(float(np.median(list(deciles.values())))),
                     "simulator_s": fmt(float(np.median(seconds)), 1)})
    check = ("%s: simulators trained by an earlier tree (%s), taken where they hold: the %d runs of other designs "
             "that both trees trained on the same set and seed hold bit-identical weights, and each carried "
             "checkpoint's identity matches its design's current config and its set's data" % (
                 CARRIED_MARK.strip(), carried, compared))
    return rows, per_run, check




def choose(rows: List[dict]) -> tuple:
    """The screening's rule: among designs (not the control) whose median training time is at most
    :data:`TIME_FACTOR` times the default's when the study began, the smallest median |decile statistic|.
    ``rows``: screening rows (``key`` the :data:`DESIGNS` name).  Returns (the chosen design's key, why)."""
    base = next(row for row in rows if row["key"] == "default")
    limit = TIME_FACTOR * float(base["simulator_s"])
    eligible = [row for row in rows if row["key"] != CONTROL and row["decile_stat"]
                and float(row["simulator_s"]) <= limit]
    best = min(eligible, key=lambda row: abs(float(row["decile_stat"])))
    excluded = [row["design"] for row in rows if row["key"] != CONTROL and row not in eligible]
    return best["key"], ("smallest median |decile statistic| (%s) among designs whose simulator trains in at most "
                         "%.1fx the %s design's %s s (%.0f s)%s" % (
                             best["decile_stat"], TIME_FACTOR, base["design"], base["simulator_s"], limit,
                             "; over the time limit: %s" % ", ".join(excluded) if excluded else ""))


def arm_name(method: str) -> str:
    """A grid arm's name in the tables: ``true_click_model`` for the control, ``default`` for the design equal to
    MULTR's defaults now (:func:`default_design`), else the design's (:func:`shown`) or the method's name."""
    if method == "multr_true":
        return CONTROL
    design = method[len("multr_"):] if method.startswith("multr_") else None
    if design is not None and design == default_design():
        return "default"
    return shown(design) if design else method


def default_design() -> Optional[str]:
    """The :data:`DESIGNS` name whose config equals MULTR's defaults now (None: none does)."""
    from ultra_multr.algorithms.multr import MULTRConfig

    defaults = flat_values(MULTRConfig())
    return next((name for name in DESIGNS if flat_values(design_config(name)) == defaults), None)


def grid_rows(out: str, regime: str) -> List[dict]:
    """One row per arm of a grid stage against DLA: over runs (paired by set and seed) and over pooled queries."""
    records = finished(out, regime)
    deciles = decile_statistics(out, [r for r in records if r.info["method"] != "dla"], regime)
    dla = [r for r in records if r.info["method"] == "dla"]
    data = "ultra_recipe, sparse" if regime == "sparse" else "ultra_recipe"
    rows = []
    for name in sorted({r.info["method"] for r in records}, key=lambda m: (m != "dla", m)):
        mine = [r for r in records if r.info["method"] == name]
        label = marked_label(arm_name(name), as_host_counts(mine), len(mine))
        row = {"data": data, "regime": regime, "design": label, "runs": len(mine),
               "ndcg10": fmt(float(np.mean([r.mean("ndcg_10") for r in mine])))}
        stats = [deciles[r.info["run_dir"]] for r in mine if r.info["run_dir"] in deciles]
        row["decile_stat"] = fmt(float(np.median(stats)) if stats else None)
        row["simulator_s"] = fmt(float(np.median([simulator_seconds(r.info["run_dir"]) for r in mine])), 1)
        if name != "dla" and dla:
            columns = against(mine, dla)
            row.update(delta_vs_dla=columns.pop("delta"), **columns)
        rows.append(row)
    return rows


def against(mine: Sequence, reference: Sequence) -> Dict[str, str]:
    """nDCG@10 of runs ``mine`` against ``reference``, as table cells: the mean paired difference over runs (same
    set and seed, ``delta``) with its 95 % t-interval (``ci_low``, ``ci_high``) and sign-flip p (``p_runs``), and
    the paired randomisation test over the pooled test queries (``p_queries``)."""
    runs = runs_over_runs(mine, reference, "ndcg_10")
    a, b = compare.paired(mine, reference, "ndcg_10")
    return {"delta": fmt(runs.mean, sign=True), "ci_low": fmt(runs.ci_low, sign=True),
            "ci_high": fmt(runs.ci_high, sign=True), "p_runs": "%.2g" % runs.p if runs.p is not None else "",
            "p_queries": "%.4g" % randomization_test(a, b)}


def write_table(rows: Sequence[dict], columns: Sequence[str], path: str, caption: str) -> None:
    """``path`` .csv and .md, atomically."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([row.get(c, "") for c in columns] for row in rows)
    atomic_write_text(path + ".csv", buffer.getvalue())
    lines = [caption, "", "| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    lines += ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows]
    atomic_write_text(path + ".md", "\n".join(lines) + "\n")


def tables(out: str, results: str, carried: Optional[str] = None, carried_designs: Sequence[str] = ()) -> str:
    """Write every table of the finished runs (and of ``carried_designs`` from ``carried``: :func:`carried_rows`);
    returns the chosen design (None before the screening)."""
    os.makedirs(results, exist_ok=True)
    rows, per_run = screening_rows(out)
    chosen, check = None, ""
    if carried and carried_designs:
        more, more_runs, check = carried_rows(out, carried, carried_designs)
        rows, per_run = rows + more, per_run + more_runs
    chosen_from = list(rows)  # the rule reads the cascade screening alone
    more, more_runs = screening_rows(out, "screen_pbm")
    rows, per_run = rows + more, per_run + more_runs
    if chosen_from:
        write_table(per_run, ("design", "clicks", "set", "seed", "decile_stat", "simulator_s"),
                    os.path.join(results, "screening_runs"),
                    "Every screening run: its simulator's decile statistic and training time (s, on one core).")
        chosen, why = choose(chosen_from)
        atomic_write_text(os.path.join(results, "choice.md"), "Chosen design: **%s**: %s.\n%s" % (
            chosen, why, "\n" + check + ".\n" if check else ""))
    for regime in ("cascade", "pbm", "sparse", "rand"):
        rows += grid_rows(out, regime)
    write_table(rows, COLUMNS, os.path.join(results, "simulator_designs"), (
        "Simulator designs (studies/simulator_designs/run.py). Screening rows: the simulator alone, 3 recipe sets x 2 "
        "seeds, cascade clicks (the rule's) or position-based clicks (pbm); decile_stat the median over runs, "
        "simulator_s the median training time (one core); old_default: the simulator's defaults when the study "
        "began. Grid rows: MULTR with the true click model (true_click_model) and with the design that is MULTR's "
        "default now (default: the screening's choice, authors_training) beside DLA; 2,000 ranker updates at "
        "learning rate 0.05 for every arm; delta_vs_dla, ci_low, ci_high: the mean paired difference over runs (same "
        "set and seed) and its 95 % t-interval; p_runs its sign-flip p; p_queries the paired randomisation test over "
        "the pooled test queries." + (" " + check + "." if check else "")))
    return chosen


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=("screen", "grid", "table"))
    parser.add_argument("--out", required=True, help="the study's work folder (data, runs)")
    parser.add_argument("--regime", default="cascade", choices=("cascade", "pbm", "sparse", "rand"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--steps", type=int, default=2000, help="ranker updates of a grid run")
    parser.add_argument("--design", help="the grid's design (default: the screening's choice)")
    parser.add_argument("--screen_designs", nargs="+", choices=tuple(DESIGNS), default=list(DESIGNS),
                        help="the designs the screening runs (default: all)")
    parser.add_argument("--carried", metavar="SCREEN_DIR",
                        help="an earlier tree's screening folder whose runs of --carried_designs the tables take "
                             "where they hold (checked: see carried_rows)")
    parser.add_argument("--carried_designs", nargs="+", choices=tuple(DESIGNS), default=[])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--results", default=RESULTS)
    args = parser.parse_args(argv)
    out = os.path.abspath(args.out)
    if args.stage == "screen":
        stages = {clicks: stage for stage, clicks in SCREENS.items()}
        if args.regime not in stages:
            parser.error("--regime %s: the screening runs %s clicks" % (args.regime, " or ".join(stages)))
        stage = stages[args.regime]
        code = run_stage(out, stage, args.seeds, 1, None, args.workers, args.screen_designs)
    elif args.stage == "grid":
        design = args.design or tables(out, args.results, args.carried, args.carried_designs)
        if design is None or design not in DESIGNS:
            parser.error("no design: run the screening first, or name one of %s with --design" % ", ".join(DESIGNS))
        code = run_stage(out, args.regime, args.seeds, args.steps, design, args.workers)
    else:
        code = 0
    tables(out, args.results, args.carried, args.carried_designs)
    print(open(os.path.join(args.results, "simulator_designs.md")).read(), end="")
    return code


if __name__ == "__main__":
    sys.exit(main())
