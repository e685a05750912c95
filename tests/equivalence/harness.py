"""Equivalence harness: what a restructuring must leave unchanged, recorded before and compared after.

    python tests/equivalence/harness.py record [--parts P,...]   # writes tests/equivalence/baseline/<part>.json
    python tests/equivalence/harness.py check  [--parts P,...]   # recomputes and compares; exit 1 on a difference

Parts (each a JSON file of the baseline):

* ``algorithms``: every algorithm and MULTR configuration built as main.py builds it, in-process, on a
  generated recipe set (and a stress set for the logger guard): the loss and its named parts at each of a few
  updates, a digest of every parameter afterwards (ranker, propensity model, examination ranker, simulator),
  the validation click loss and the run ledger's decisions and session counts.
* ``fingerprints``: the runner's fingerprint and resolved hyper-parameters of every settings file and every
  method of the registry (what decides whether a finished run is stale).
* ``main_py``: ULTRA's main.py runs (MULTR at its defaults with a simulator checkpoint, rerank_weight=auto's
  pilot, DLA): the ledger file, the simulator checkpoint's metadata and the test metrics of ``--test_only``.
* ``tables``: a small study through the runner (DLA, MULTR, MULTR with the guard firing) and every table
  its writers produce (summary, per-data-set, sessions, compare), timing columns blanked.

Floats are compared exactly (``repr``) on the machine that recorded them; ``--rtol`` relaxes the comparison
for another machine.  Times, paths and thread counts are left out.  A difference a change intends is named
in its commit and the baseline re-recorded with ``record``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Callable, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BASELINE = os.path.join(HERE, "baseline")
CASCADE = os.path.join(REPO, "settings", "click_models", "cascade_eps0.1_ymax4.json")
PBM = os.path.join(REPO, "settings", "click_models", "pbm_eta1_eps0.1_ymax4.json")

#: Test-sized MULTR: a short simulator, judged on few sessions, its guard quiet (the logger guard at its default).
SMALL = ("simulator_steps=30,simulator_batch_size=16,simulator_heldout_batches=2,simulator_eval_every=10,"
         "simulator_min_heldout_sessions=1,pilot_min_queries=1,imputation_samples=16,seed=3,device=cpu,log_every=0")
PAPER = ("sample_num=8,simulator_optimizer=adagrad,simulator_learning_rate=0.05,simulator_input_mlp=[],"
         "simulator_patience=0,dr_weight_guard=none,dr_normalization=none,propensity_ranker=multr,rerank_weight=paper,"
         "imputation=sampled,logger_guard=none")
AUTHORS = ("sample_num=8,simulator_optimizer=adagrad,simulator_learning_rate=0.05,simulator_input_mlp=[],"
           "simulator_patience=0,dr_weight_guard=none,propensity_ranker=multr,rerank_weight=authors_code,"
           "imputation=sampled,logger_guard=none")
BASE = "seed=3,device=cpu,log_every=0"

#: (name, algorithm, hparams, data set, feed hparams or None for fresh cascade clicks)
CONFIGS = [
    ("dla", "ultra_multr.DLA", BASE, "recipe", None),
    ("naive", "ultra_multr.Naive", BASE, "recipe", None),
    ("ipw", "ultra_multr.IPW", BASE + ",propensity_json=%s" % PBM, "recipe", "pbm"),
    ("rem", "ultra_multr.REM", BASE, "recipe", None),
    ("paird", "ultra_multr.PairD", BASE, "recipe", None),
    ("pal", "ultra_multr.PAL", BASE, "recipe", None),
    ("multr_default", "ultra_multr.MULTR", SMALL, "recipe", None),
    ("multr_paper", "ultra_multr.MULTR", SMALL + "," + PAPER, "recipe", None),
    ("multr_authors_code", "ultra_multr.MULTR", SMALL + "," + AUTHORS, "recipe", None),
    ("multr_randomized", "ultra_multr.MULTR", SMALL + ",rerank_weight=randomized", "recipe", None),
    ("multr_eib", "ultra_multr.MULTR", SMALL + ",variant=eib,rerank_weight=0.5", "recipe", None),
    ("multr_sampled_clip", "ultra_multr.MULTR", SMALL + ",imputation=sampled,dr_weight_guard=clip", "recipe", None),
    ("multr_a0", "ultra_multr.MULTR", SMALL + ",rerank_weight=0", "recipe", None),
    ("multr_coupled", "ultra_multr.MULTR", SMALL + ",propensity_ranker=multr", "recipe", None),
    ("multr_every2", "ultra_multr.MULTR", SMALL + ",propensity_update_every=2", "recipe", None),
    ("multr_gru_tf", "ultra_multr.MULTR", SMALL + ",simulator_cell=gru,teacher_forcing_ratio=0.5", "recipe", None),
    ("multr_clip2", "ultra_multr.MULTR", SMALL + ",max_gradient_norm=2", "recipe", None),
    ("multr_true_click_model", "ultra_multr.MULTR", SMALL + ",simulator_control=true_click_model", "recipe", None),
    ("multr_shuffled", "ultra_multr.MULTR", SMALL + ",simulator_control=shuffled_positions", "recipe", None),
    ("rand_multr", "ultra_multr.MULTR", SMALL.replace("simulator_steps=30", "simulator_steps=0"), "recipe", None),
    ("multr_rejected", "ultra_multr.MULTR", SMALL.replace("simulator_steps=30", "simulator_steps=2"), "recipe", None),
    ("multr_not_validated", "ultra_multr.MULTR", SMALL.replace("min_heldout_sessions=1", "min_heldout_sessions=5000"),
     "recipe", None),
    ("multr_logger_guard_fires", "ultra_multr.MULTR", SMALL, "stress", None),
    ("multr_log", "ultra_multr.MULTR", SMALL + ",simulator_heldout_fraction=0.2", "recipe", "log"),
    ("multr_log_max_share", "ultra_multr.MULTR",
     SMALL.replace("min_heldout_sessions=1", "min_heldout_sessions=30") + ",simulator_heldout_max_share=0.25",
     "recipe", "log"),
    ("multr_ipw", "ultra_multr.MULTR_IPW", SMALL + ",propensity_json=%s" % PBM, "recipe", "pbm"),
    ("multr_tune", "ultra_multr.MULTR", SMALL + ",tune=learning_rate,tune_grid=[0.01,0.05],tune_pilot_steps=2",
     "recipe", None),
]
UPDATES = 4
BATCH = 16


# -- helpers -----------------------------------------------------------------------------------------------------

def digest(tensors: Dict[str, Any]) -> Dict[str, str]:
    """name -> sha256 of the tensor's bytes (first 16 hex digits) and its float sum."""
    out = {}
    for name, tensor in sorted(tensors.items()):
        data = tensor.detach().cpu().contiguous()
        out[name] = "%s %r" % (hashlib.sha256(data.numpy().tobytes()).hexdigest()[:16], float(data.double().sum()))
    return out


def without(record: Any, keys=("torch_threads",)) -> Any:
    if isinstance(record, dict):
        return {k: without(v, keys) for k, v in record.items() if k not in keys}
    if isinstance(record, list):
        return [without(v, keys) for v in record]
    return record


def write_datasets(root: str) -> Dict[str, str]:
    from ultra_multr.generate.ultra_dataset import write_synthetic_ultra_dataset
    from ultra_multr.generate.ultra_recipe import Recipe, write_recipe_dataset

    recipe = os.path.join(root, "recipe")
    write_recipe_dataset(recipe, Recipe(train_queries=80, valid_queries=30, test_queries=20, features=10, seed=5))
    stress = write_synthetic_ultra_dataset(os.path.join(root, "stress"), {"train": 80, "valid": 20, "test": 20},
                                           docs_per_query=(6, 10), n_features=10, initial_noise=2.0, signal=1.0,
                                           ranker_feature=True, seed=7)
    return {"recipe": os.path.join(recipe, ""), "stress": stress}


def feed_for(kind) -> tuple:
    if kind == "pbm":
        return "ultra_multr.feeds.ClickSimulationFeed", "click_model_json=%s,seed=0" % PBM
    if kind == "log":
        return "ultra_multr.feeds.ClickLogFeed", "click_model_json=%s,seed=0,sessions_per_query=3" % CASCADE
    return "ultra_multr.feeds.ClickSimulationFeed", "click_model_json=%s,seed=0" % CASCADE


# -- parts -------------------------------------------------------------------------------------------------------

def part_algorithms(work: str) -> Dict[str, Any]:
    import torch
    import ultra

    from ultra_multr.session_budget import LEDGER

    torch.set_num_threads(1)
    data_dirs = write_datasets(work)
    results = {}
    for name, algorithm, hparams, data_name, feed_kind in CONFIGS:
        LEDGER.reset()
        data = ultra.utils.read_data(data_dirs[data_name], "train", None, 0)
        valid = ultra.utils.read_data(data_dirs[data_name], "valid", None, 0)
        size = max(data.rank_list_size, valid.rank_list_size)
        feed_class, feed_hparams = feed_for(feed_kind)
        settings = {
            "train_input_feed": feed_class, "train_input_hparams": feed_hparams,
            "ranking_model": "ultra.ranking_model.DNN", "ranking_model_hparams": "hidden_layer_sizes=[16,8]",
            "learning_algorithm": algorithm, "learning_algorithm_hparams": hparams,
            "metrics": ["ndcg"], "metrics_topn": [10], "objective_metric": "ndcg_10",
            "max_candidate_num": size, "selection_bias_cutoff": 10,
        }
        data.pad(size)
        valid.pad(size)
        model = ultra.utils.find_class(algorithm)(data, settings)
        feed = ultra.utils.find_class(feed_class)(model, BATCH, feed_hparams)
        steps = []
        for _ in range(UPDATES):
            loss, _, _ = model.train(feed.get_batch(data, check_validation=True)[0])
            steps.append(repr(loss))
        # the named parts of one more batch, without updating (the loss the train step would take)
        batch = model.batch(feed.get_batch(data, check_validation=True)[0], model.rank_list_size)
        with torch.no_grad():
            model.set_training_mode(True)
            _, parts = model.training_loss(batch)
        # the validation click loss (labels as clicks), the objective click_loss_neg reports
        valid_feed = ultra.utils.find_class("ultra.input_layer.DirectLabelFeed")(model, BATCH, "")
        valid_input, _ = valid_feed.get_next_batch(0, valid, check_validation=False)
        try:
            click_loss = repr(model.click_loss_summary(valid_input)["click_loss_neg"])
        except ValueError as error:  # e.g. the true click model knows no validation document
            click_loss = "ValueError: %s" % error
        tensors = {}
        phase = getattr(model, "simulator_phase", None)  # since issue 36 the simulator is the phase's network
        modules = {"model": model.model, "propensity_model": getattr(model, "propensity_model", None),
                   "examination_ranker": getattr(model, "examination_ranker", None),
                   "simulator": phase.network if phase is not None else getattr(model, "simulator", None)}
        for attribute, module in modules.items():
            if isinstance(module, torch.nn.Module):
                tensors.update({"%s.%s" % (attribute, k): v for k, v in module.state_dict().items()})
        results[name] = {
            "losses": steps,
            "parts": {k: repr(v) for k, v in sorted(parts.items())},
            "click_loss_neg": click_loss,
            "parameters": digest(tensors),
            "ledger": without(LEDGER.summary()),
        }
        print("algorithms: %s done" % name, flush=True)
    return results


def part_fingerprints(work: str) -> Dict[str, Any]:
    """Runs of three configs, data folders fixed (a fingerprint holds the data folder's path): every registered
    method, studies/paper_setting's grid methods, studies/mq2008's study.json; plus every settings file."""
    sys.path.insert(0, os.path.join(REPO, "studies", "paper_setting"))
    import screen

    from ultra_multr.experiments import methods as registry
    from ultra_multr.experiments.runner.runs import RunSpec, expand_runs, fingerprint_settings, resolved_hparams
    from ultra_multr.experiments.study_config import load_config

    data = "/nonexistent/DATA"
    every = {"output_dir": "/nonexistent/every", "datasets": {"d": data}, "methods": registry.known_methods(),
             "seeds": [0, 1], "settings": {"train_input_hparams": {"click_model_json": CASCADE}},
             "sweeps": [{"name": "knobs", "methods": ["multr"], "section": "learning_algorithm_hparams",
                         "parameter": parameter, "values": values}
                        for parameter, values in (("rerank_weight", ["0", "0.5", "paper", "auto", "randomized"]),
                                                  ("max_gradient_norm", [2.0]),
                                                  ("simulator_heldout_max_share", [0.0, 0.25]),
                                                  ("propensity_update_every", [1, 2]),
                                                  ("logger_guard", ["none", "order_fit"]))]}
    grid = screen.study_config("/nonexistent/grid", {"set0": data}, [0], 2000, methods=list(screen.METHODS),
                               stress_dirs={"set0": data + "_stress"}, sessions_per_query=1)
    with open(os.path.join(REPO, "studies", "mq2008", "study.json")) as handle:
        mq2008 = dict(json.load(handle), output_dir="/nonexistent/mq2008", datasets={"mq2008": {"Fold1": data}})
    out = {}
    for name, config in (("every", every), ("grid", grid), ("mq2008", mq2008)):
        path = os.path.join(work, name + ".json")
        with open(path, "w") as handle:
            json.dump(config, handle)
        for run in expand_runs(load_config(path)):
            key = "%s/%s" % (name, os.path.relpath(run.run_dir, config["output_dir"]))
            out[key] = {"fingerprint": run.fingerprint, "resolved": resolved_hparams(run.settings)}
    settings_dir = os.path.join(REPO, "settings")
    for name in sorted(os.listdir(settings_dir)):
        if name.endswith(".json"):
            with open(os.path.join(settings_dir, name)) as handle:
                settings = json.load(handle)
            run = RunSpec(run_dir="RUN", data_dir=data, seed=0, method=name, settings=settings, main_args={},
                          info={"method": name})
            out["settings/" + name] = {"fingerprint": run.fingerprint, "resolved": resolved_hparams(settings),
                                       "fingerprint_settings": fingerprint_settings(settings)}
    return out


def main_py() -> str:
    from ultra_multr.experiments.runner.runs import find_main_py

    return find_main_py(None)


def run_main(args: List[str], cwd: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run([sys.executable, main_py()] + args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)
    if done.returncode:
        raise SystemExit("main.py %s failed:\n%s\n%s" % (" ".join(args), done.stdout[-3000:], done.stderr[-3000:]))
    return done


def checkpoint_metadata(path: str) -> Dict[str, Any]:
    import torch

    metadata = torch.load(path, map_location="cpu", weights_only=True)["metadata"]
    return without(metadata, ("train_seconds", "seconds", "curve", "train_input_hparams"))


def part_main_py(work: str) -> Dict[str, Any]:
    data_dirs = write_datasets(work)
    with open(os.path.join(REPO, "settings", "multr_dla.json")) as handle:
        base = json.load(handle)
    out = {}
    runs = [
        ("multr_default", "ultra_multr.MULTR", SMALL.replace("seed=3", "seed=0")),
        ("multr_auto", "ultra_multr.MULTR", SMALL.replace("seed=3", "seed=0") + ",rerank_weight=auto,rerank_pilot_steps=3"),
        ("dla", "ultra_multr.DLA", "seed=0,device=cpu,log_every=0"),
    ]
    for name, algorithm, hparams in runs:
        settings = dict(base, learning_algorithm=algorithm, learning_algorithm_hparams=hparams,
                        ranking_model_hparams="hidden_layer_sizes=[16,8]",
                        train_input_hparams="click_model_json=%s,seed=0" % CASCADE)
        path = os.path.join(work, name + ".json")
        with open(path, "w") as handle:
            json.dump(settings, handle)
        model_dir = os.path.join(work, name + "_model")
        common = ["--setting_file", path, "--data_dir", data_dirs["recipe"], "--model_dir", model_dir,
                  "--output_dir", os.path.join(work, name + "_out"), "--batch_size", "16",
                  "--selection_bias_cutoff", "10"]
        run_main(common + ["--max_train_iteration", "6", "--steps_per_checkpoint", "3"], work)
        tested = run_main(common + ["--test_only", "True"], work)
        metrics = [line for line in tested.stdout.splitlines() if "ndcg" in line or "err" in line][-1:]
        with open(os.path.join(model_dir, "session_budget.json")) as handle:
            ledger = without(json.load(handle))
        record = {"ledger": ledger, "test_metrics": metrics}
        ckpt = os.path.join(model_dir, "%s.simulator.ckpt" % algorithm)
        if os.path.exists(ckpt):
            record["simulator_checkpoint"] = checkpoint_metadata(ckpt)
        out[name] = record
        print("main_py: %s done" % name, flush=True)
    return out


def part_tables(work: str) -> Dict[str, Any]:
    data_dirs = write_datasets(work)
    study = os.path.join(work, "study")
    config = {
        "output_dir": study,
        "datasets": {"recipe": {"data_dir": data_dirs["recipe"]}, "stress": {"data_dir": data_dirs["stress"]}},
        "methods": ["dla", "multr", "multr_unguarded"],
        "seeds": [0],
        "settings": {"train_input_hparams": {"click_model_json": CASCADE},
                     "ranking_model_hparams": {"hidden_layer_sizes": [8]}},
        "method_overrides": {
            "multr": {"learning_algorithm_hparams": {"simulator_steps": 20, "simulator_batch_size": 16,
                                                     "simulator_min_heldout_sessions": 1, "simulator_eval_every": 10}},
            "multr_unguarded": {"learning_algorithm_hparams": {"simulator_steps": 20, "simulator_batch_size": 16,
                                                               "simulator_min_heldout_sessions": 1,
                                                               "simulator_guard": "none", "simulator_eval_every": 10}},
        },
        "main_args": {"batch_size": 16, "max_train_iteration": 4, "steps_per_checkpoint": 2},
    }
    path = os.path.join(work, "study.json")
    with open(path, "w") as handle:
        json.dump(config, handle)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "ultra_multr.experiments.runner", path, "--workers", "1"], cwd=work,
                          env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise SystemExit("runner failed:\n%s\n%s" % (done.stdout[-4000:], done.stderr[-4000:]))
    # with --kept-study, the runner's statuses of a study the baseline's code finished: the same runs, all done
    out = {"dry_run": dry_run(os.path.join(OPTIONS["kept_study"] or work, "study.json"), work, env)}
    budget = subprocess.run([sys.executable, "-m", "ultra_multr.experiments.budget", os.path.join(study, "runs"),
                             "--out", os.path.join(study, "sessions.md")], cwd=work, env=env, capture_output=True,
                            text=True, timeout=600)
    out["budget_exit"] = budget.returncode
    compared = subprocess.run([sys.executable, "-m", "ultra_multr.experiments.compare", os.path.join(study, "runs"),
                               os.path.join(study, "runs"), "--method", "multr", "--against", "dla",
                               "--out", os.path.join(study, "compare.md")], cwd=work, env=env, capture_output=True,
                              text=True, timeout=600)
    out["compare_exit"] = compared.returncode
    for folder, dirs, files in os.walk(study):
        dirs[:] = [d for d in dirs if d != "runs"]
        for name in sorted(files):
            if name.endswith((".md", ".csv")):
                full = os.path.join(folder, name)
                with open(full) as handle:
                    out[os.path.relpath(full, study)] = [blank(line, study) for line in handle.read().splitlines()]
    print("tables: %d files" % (len(out) - 1), flush=True)
    return out


def dry_run(config: str, work: str, env: Dict[str, str]) -> List[str]:
    """The runner's status of every run of ``config`` (done, pending, stale), folders relative to its study."""
    done = subprocess.run([sys.executable, "-m", "ultra_multr.experiments.runner", config, "--dry-run"], cwd=work,
                          env=env, capture_output=True, text=True, timeout=600)
    study = os.path.join(os.path.dirname(config), "study")
    return sorted(blank(line, study) for line in done.stdout.splitlines() if not line.startswith(" "))


#: Options of the parts, from the command line.
OPTIONS: Dict[str, Any] = {}
TIME = re.compile(r"\b\d+(\.\d+)? ?(s|ms|min)\b|\b\d{4}-\d\d-\d\d[ T][\d:.]+")


def blank(line: str, root: str) -> str:
    """A table line without times and the work folder's path."""
    return TIME.sub("<t>", line.replace(root, "<study>"))


PARTS: Dict[str, Callable[[str], Dict[str, Any]]] = {
    "algorithms": part_algorithms, "fingerprints": part_fingerprints, "main_py": part_main_py, "tables": part_tables,
}


# -- comparison --------------------------------------------------------------------------------------------------

def differences(before: Any, after: Any, rtol: float, where: str = "") -> List[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        found = []
        for key in sorted(set(before) | set(after)):
            if key not in after:
                found.append("%s/%s: only before" % (where, key))
            elif key not in before:
                found.append("%s/%s: only after" % (where, key))
            else:
                found += differences(before[key], after[key], rtol, "%s/%s" % (where, key))
        return found
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (b, a) in enumerate(zip(before, after)) for d in differences(b, a, rtol, "%s[%d]" % (where, i))]
    if before == after:
        return []
    if rtol and isinstance(before, str) and isinstance(after, str):
        nb, na = numbers(before), numbers(after)
        if len(nb) == len(na) and nb and all(close(b, a, rtol) for b, a in zip(nb, na)):
            if re.sub(NUMBER, "#", before) == re.sub(NUMBER, "#", after):
                return []
    if rtol and isinstance(before, (int, float)) and isinstance(after, (int, float)) and close(before, after, rtol):
        return []
    return ["%s: %r -> %r" % (where, before, after)]


NUMBER = r"-?\d+\.\d+(e[-+]?\d+)?|-?\d+e[-+]?\d+"


def numbers(text: str) -> List[float]:
    return [float(m.group(0)) for m in re.finditer(NUMBER, text)]


def close(a: float, b: float, rtol: float) -> bool:
    return math.isclose(a, b, rel_tol=rtol, abs_tol=rtol)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("record", "check"))
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated, of: %s" % ", ".join(PARTS))
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--rtol", type=float, default=0.0, help="relative tolerance of numbers (default: exact)")
    parser.add_argument("--keep", help="record: keep the tables part's study folder here (for a later --kept-study)")
    parser.add_argument("--kept-study", help="check: a study folder recorded with --keep, by the baseline's code: "
                        "the runner's dry run must show its runs done, none stale")
    args = parser.parse_args(argv)
    OPTIONS["kept_study"] = os.path.abspath(args.kept_study) if args.kept_study else None
    failed = False
    for part in args.parts.split(","):
        keep = args.keep if part == "tables" and args.action == "record" else None
        work = os.path.abspath(keep) if keep else tempfile.mkdtemp(prefix="equivalence-%s-" % part)
        os.makedirs(work, exist_ok=True)
        try:
            result = json.loads(json.dumps(PARTS[part](work), sort_keys=True, default=str))
        finally:
            if not keep:
                shutil.rmtree(work, ignore_errors=True)
        path = os.path.join(args.baseline, part + ".json")
        if args.action == "record":
            os.makedirs(args.baseline, exist_ok=True)
            with open(path + ".tmp", "w") as handle:
                json.dump(result, handle, indent=1, sort_keys=True)
                handle.write("\n")
            os.replace(path + ".tmp", path)
            print("recorded %s" % path)
            continue
        with open(path) as handle:
            found = differences(json.load(handle), result, args.rtol, part)
        print("%s: %s" % (part, "identical" if not found else "%d difference(s)" % len(found)))
        for line in found:
            print("  " + line)
        failed |= bool(found)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
