"""Naive, IPS, DLA, PAL and MULTR under ultr-reproducibility's protocol, in the Baidu-ULTR benchmark's table (issue 41).

One command, on the release a user downloaded:

    python studies/baidu_reproducibility/run.py --out out/baidu_repro --log-dir baidu-ultr_baidu-mlm-ctr \\
        [--dataset ltr] [--preset upstream] [--seeds 0 1 2] [--steps 7000] [--workers 1]

or on a generated log in the release's layout (``--generate features`` or ``--generate noisy``, :data:`RECIPES`;
positions up to ``--positions`` 30, about half of the sessions without a click):

    python studies/baidu_reproducibility/run.py --out out/repro_features --generate features [--steps 100]

1. The log: ``--log-dir`` (``parts/part-{1,2,3}_split-*.feather`` train, ``parts/part-0_split-*.feather`` held out,
   ``parts/validation.feather`` annotated; every part-0 file held out), or generated once into ``<out>/log``.
2. ``ultra-multr-baidu-convert --protocol reproducibility`` into ``<out>/data``: the held-out sessions split 50/50
   with seed 381 (validation: main.py's model selection by each model's click loss; test: the click metrics),
   every annotated query for the ranking metrics, positions to the log's deepest (at most 50), ``--dataset``'s
   features (ultr-reproducibility's ``data=`` names), no standardisation under ``--preset upstream``.
3. The study runner: every method on the same logged sessions through ULTRA's main.py, ``--steps`` updates of
   ``--batch-size`` sessions, validated every ``--checkpoint-every``; the preset's ranker and optimiser
   (:data:`PRESETS`); PAL and MULTR are fed the sessions without a click too (``clickless=keep``: their losses
   learn from them), Naive, IPS and DLA the sessions with one (their listwise losses give the others no weight);
   ``--clickless skip|keep`` sets it for every method instead.  IPS: the log's true examination (generated) or
   the global AllPairs curve ultr-reproducibility published (the release), clipped as upstream clips (0.1).
4. Per run: DCG@1/3/5/10, nDCG@10, MRR@10 on every annotated query (:mod:`ultra_multr.click_logs.baidu_evaluate`),
   click NLL and per-rank perplexity on the test half of the held-out sessions for the ranker with its
   examination and, for MULTR, its user simulator (:mod:`ultra_multr.click_logs.baidu_click_ll`), and the share
   of training sessions each run's ranker left out (no click).
5. ``<out>/results/table.md``: the published layout (rows Naive, IPS, DLA, PAL, MULTR; mean and 95 % t-interval over
   the runs), MULTR's paired differences over runs, and the published real-data figures quoted beside it from
   their public file (:data:`PUBLISHED`), labelled as such; ``table.json`` holds every number.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import Dict, List, Optional

import numpy as np

from ultra_multr.click_logs import baidu, baidu_click_ll, baidu_convert, baidu_evaluate
from ultra_multr.click_models import graded_click_prob
from ultra_multr.compat.model_dir import checkpoint_path
from ultra_multr.compat.progress import PROGRESS_SUFFIX
from ultra_multr.experiments import budget
from ultra_multr.experiments.aggregate import finished_run_dirs
from ultra_multr.experiments.runner import cli as runner
from ultra_multr.experiments.significance import over_runs, t_interval
from ultra_multr.files import atomic_write_text, read_json
from ultra_multr.generate.baidu_log import MAX_LABEL, write_baidu_log
from ultra_multr.session_budget import trained_as_host

HERE = os.path.dirname(os.path.abspath(__file__))
#: The published real-data figures, quoted with their source.
PUBLISHED = os.path.join(HERE, "published_baidu_bert_model.json")
#: The global AllPairs examination curve ultr-reproducibility published (positions 1-22; its IPS model's propensities).
PUBLISHED_PROPENSITIES = os.path.join(os.path.dirname(HERE), "baidu_propensities", "published_global_all_pairs.csv")
#: The rows, in the published layout's order: method -> (label, learning algorithm).
METHODS = {"naive": ("Naive", "ultra_multr.Naive"), "ipw": ("IPS", "ultra_multr.IPW"),
           "dla": ("DLA", "ultra_multr.DLA"), "pal": ("PAL", "ultra_multr.PAL"),
           "multr": ("MULTR", "ultra_multr.MULTR")}
#: The methods whose loss learns from a session without a click (fed them under the protocol's default).
LEARN_FROM_CLICKLESS = ("pal", "multr")
RANKING_METRICS = ("ndcg_10", "mrr_10", "dcg_1", "dcg_3", "dcg_5", "dcg_10")
CLICK_METRICS = ("click_nll", "perplexity")
HEADERS = {"ndcg_10": "nDCG@10", "mrr_10": "MRR@10", "dcg_1": "DCG@1", "dcg_3": "DCG@3", "dcg_5": "DCG@5",
           "dcg_10": "DCG@10", "click_nll": "click NLL", "perplexity": "perplexity"}
#: upstream's clip of the inverse propensity weights (config/model/{dla,ips-*}.yaml ``clip: 0.1``): weights <= 10
MAX_PROPENSITY_WEIGHT = 10.0
#: The ranker and optimiser of each preset.  upstream: ultr-reproducibility's LTR MLP (config/hyperparameter/ltr_*.yaml
#: at 78d8060: 5 layers of 512 ReLU units, lr 1e-4, its main.py: optax.adamw), no gradient clipping, the features
#: as read (sign(x) log(1 + |x|), no standardisation).  ultra: ULTRA's DNN [512, 256, 128] (layer normalisation),
#: Adagrad 0.05 with gradient-norm clipping 5 (ULTRA's and this project's defaults), standardised features.
PRESETS = {
    "upstream": {"ranking_model_hparams": {"hidden_layer_sizes": [512] * 5, "activation_func": "relu", "norm": "none"},
                 "learning_algorithm_hparams": {"learning_rate": 0.0001, "grad_strategy": "adamw",
                                                "max_gradient_norm": 0.0},
                 "standardize": False},
    "ultra": {"ranking_model_hparams": {"hidden_layer_sizes": [512, 256, 128]},
              "learning_algorithm_hparams": {"learning_rate": 0.05},
              "standardize": True},
}
#: Generated logs: PBM clicks with examination ``examination_scale`` / rank to ``--positions``, click probability per
#: grade graded_click_prob(0.1, 4), features noisy (4), a popularity the logger favours (2), 10 % of the shown
#: documents missing (gaps).  features: the logger scores the lexical features only (blind to the grades); noisy: it
#: scores the grade (plus the popularity and noise), as studies/baidu's pbm_noisy log.  The scales are chosen so that
#: about half of the sessions have no click (the release: 53 %); each run's table gives the share its rankers left out.
RECIPES = {
    "features": {"logger": "features", "logger_bias": 2.0, "feature_noise": 4.0, "examination_scale": 0.75},
    "noisy": {"logger": "grade", "logger_bias": 2.0, "feature_noise": 4.0, "examination_scale": 0.55},
}
MISSING_DOC_PROB = 0.1
#: A generated log's sizes (command-line options): queries, training sessions (in files of sessions-per-file),
#: held-out sessions (part 0), annotated queries, positions, the generator's seed.
GENERATED_SIZES = {"queries": 300, "sessions": 4000, "sessions-per-file": 2000, "heldout": 1000, "annotated": 200,
                   "positions": 30, "log-seed": 0}


def examination(recipe: Dict, positions: int) -> List[float]:
    """[N] a generated log's examination per rank."""
    return [recipe["examination_scale"] / rank for rank in range(1, positions + 1)]


def generate(out: str, args) -> str:
    """The generated log of ``args`` in ``<out>/log`` (written once); returns its directory.

    Raises:
        SystemExit: ``<out>/log`` holds a log of another recipe.
    """
    recipe = dict(RECIPES[args.generate], name=args.generate, queries=args.queries, sessions=args.sessions,
                  heldout=args.heldout, annotated=args.annotated, positions=args.positions, seed=args.log_seed,
                  missing_doc_prob=MISSING_DOC_PROB)
    log_dir = os.path.join(out, "log")
    recipe_path = os.path.join(log_dir, "recipe.json")
    if os.path.exists(recipe_path):
        if read_json(recipe_path, "log recipe") != recipe:
            raise SystemExit("%s holds another recipe; remove %s or choose another --out" % (recipe_path, log_dir))
        return log_dir
    write_baidu_log(log_dir, n_queries=args.queries, n_sessions=args.sessions, n_test_sessions=args.heldout,
                    n_annotated=args.annotated, n_positions=args.positions, sessions_per_file=args.sessions_per_file,
                    exam_prob=examination(recipe, args.positions), click_prob=graded_click_prob(0.1, MAX_LABEL),
                    seed=args.log_seed, logger=recipe["logger"], logger_bias=recipe["logger_bias"],
                    feature_noise=recipe["feature_noise"], missing_doc_prob=MISSING_DOC_PROB)
    atomic_write_text(recipe_path, json.dumps(recipe, indent=1, sort_keys=True) + "\n")
    return log_dir


def log_patterns(log_dir: str) -> Dict[str, str]:
    """The release's files of a log directory: train (parts 1..), held out (part 0), annotations.

    Raises:
        SystemExit: a kind of file is missing.
    """
    parts = os.path.join(log_dir, "parts")
    patterns = {"train": os.path.join(parts, "part-[1-9]_split-*.feather"),
                "heldout": os.path.join(parts, "part-0_split-*.feather"),
                "annotations": os.path.join(parts, "validation.feather")}
    for name, pattern in patterns.items():
        if not glob.glob(pattern):
            raise SystemExit("%s: no %s file (%s)" % (log_dir, name, pattern))
    return patterns


def ips_propensities(generated: Optional[Dict], positions: int) -> List[float]:
    """[N] IPS's propensities: a generated log's examination, else the published curve (ranks past its 22 at its
    last value; any below 0.1 weighs the clipped maximum, as upstream's zeros do)."""
    if generated is not None:
        return examination(generated, positions)
    curve = np.loadtxt(PUBLISHED_PROPENSITIES, delimiter=",", skiprows=1)[:, 1]
    return [float(curve[min(rank, len(curve) - 1)]) for rank in range(positions)]


def study_config(args, data_dir: str, patterns: Dict[str, str], positions: int, generated: Optional[Dict]) -> Dict:
    """The study runner's config: every method of ``args.methods`` on the converted data, the preset's ranker and
    optimiser, the feed's ``clickless`` per method, main.py showing ``positions`` positions."""
    preset = PRESETS[args.preset]
    conversion = read_json(os.path.join(data_dir, baidu_convert.CONVERSION_JSON), "conversion record")
    # the files by name: ULTRA's hparam strings cannot hold the pattern's brackets
    feed = {"log_files": ";".join(baidu.log_files([patterns["train"]])), "features": conversion["features"],
            "log1p_lexical": True,
            "standardize": conversion.get("standardization", "none")}
    overrides = {}
    for method, (label, algorithm) in METHODS.items():
        keep = args.clickless == "keep" or (args.clickless == "protocol" and method in LEARN_FROM_CLICKLESS)
        hparams = {"max_propensity_weight": MAX_PROPENSITY_WEIGHT} if method in ("ipw", "dla", "multr") else {}
        if method == "ipw":
            hparams["propensities"] = ips_propensities(generated, positions)
        if method == "multr":
            hparams.update(simulator_steps=args.simulator_steps, imputation_samples=args.imputation_samples)
            hparams.update(item.split("=", 1) for item in args.multr_hparams.split(",") if item.strip())
        overrides[method] = {"label": label, "role": "multr" if method == "multr" else "baseline",
                             "learning_algorithm": algorithm, "learning_algorithm_hparams": hparams,
                             "train_input_hparams": {"clickless": "keep" if keep else "skip"}}
    return {
        "output_dir": os.path.abspath(args.out),
        "datasets": {"baidu_ultr": {args.generate or args.dataset: data_dir}},
        "methods": ["repro_%s" % method for method in args.methods],
        "seeds": list(args.seeds),
        "settings": {"train_input_feed": "ultra_multr.feeds.baidu.BaiduSessionFeed", "train_input_hparams": feed,
                     "ranking_model_hparams": preset["ranking_model_hparams"],
                     "learning_algorithm_hparams": dict(preset["learning_algorithm_hparams"], log_every=0),
                     "objective_metric": "click_loss_neg"},
        "extra_methods": {"repro_%s" % method: spec for method, spec in overrides.items()},
        "main_args": {"batch_size": args.batch_size, "max_train_iteration": args.steps,
                      "steps_per_checkpoint": args.checkpoint_every, "selection_bias_cutoff": positions},
    }


def run_metrics(run_dir: str, data_dir: str, patterns: Dict[str, str]) -> Dict:
    """The benchmark's numbers of one finished run (computed once, kept in ``<run>/baidu_repro/metrics.json``)."""
    out = os.path.join(run_dir, "baidu_repro")
    path = os.path.join(out, "metrics.json")
    if os.path.isfile(path) and os.path.getmtime(path) >= os.path.getmtime(os.path.join(run_dir, "done.json")):
        return read_json(path, "run metrics")
    settings = read_json(os.path.join(run_dir, "settings.json"))
    model_dir = os.path.join(run_dir, "model")
    ranking = baidu_evaluate.evaluate(data_dir, settings, model_dir, out, "test")
    simulator = os.path.join(model_dir, "ultra_multr.MULTR.simulator.ckpt")
    train, heldout = baidu.log_files([patterns["train"]]), baidu.log_files([patterns["heldout"]])
    conversion = read_json(os.path.join(data_dir, baidu_convert.CONVERSION_JSON), "conversion record")
    clicks = baidu_click_ll.evaluate(simulator if os.path.isfile(simulator) else None, train, heldout, out,
                                     conversion["features"], conversion["top_n"], data_dir=data_dir,
                                     ranker=(settings, model_dir))
    done = read_json(os.path.join(run_dir, "done.json"), "run record")
    ranker = ((done.get("sessions") or {}).get("phases") or {}).get("ranker", {})
    progress = read_json(checkpoint_path(model_dir, settings["learning_algorithm"]) + PROGRESS_SUFFIX, "progress")
    record = {"ranking": {m: ranking[m] for m in RANKING_METRICS},
              "clicks": {name: {m: values[m] for m in CLICK_METRICS + ("sessions",)}
                         for name, values in clicks.items()},
              "ranker_sessions_read": ranker.get("sessions"), "ranker_sessions_fed": ranker.get("lists"),
              "trained_as_host": trained_as_host(((done.get("sessions") or {}).get("decisions")) or {}),
              "seed": read_json(os.path.join(run_dir, "run.json"), "run record")["seed"],
              "step_seconds": done.get("step_seconds", {}),
              "selected_step": progress["checkpoint_step"], "steps_done": progress["steps_done"]}
    atomic_write_text(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def log_summary(patterns: Dict[str, str]) -> Dict:
    """The training files' sessions, the share without a click, the deepest position and the share of the document
    rows beyond position 10 (what a top-10 protocol cuts); one file at a time."""
    sessions = clickless = rows = beyond_10 = deepest = 0
    for logged in baidu.iter_sessions(baidu.log_files([patterns["train"]]), top_n=None, kind="clicks"):
        sessions += len(logged)
        clickless += int((logged.clicks.sum(1) == 0).sum())
        rows += int(logged.mask.sum())
        beyond_10 += int(logged.mask[:, 10:].sum())
        deepest = max(deepest, int(logged.positions.max(initial=0)))
    return {"sessions": sessions, "clickless_share": clickless / sessions, "deepest_position": deepest,
            "rows": rows, "rows_beyond_10_share": beyond_10 / rows}


def _cell(values: List[float], digits: int = 3) -> str:
    """``mean [low, high]`` over the runs (the t-interval; the mean alone for one run)."""
    mean, low, high = t_interval(values)
    if np.isnan(low):
        return "%.*f" % (digits, mean)
    return "%.*f [%.*f, %.*f]" % (digits, mean, digits, low, digits, high)


def collect(runs_dir: str, data_dir: str, patterns: Dict[str, str]) -> Dict[str, List[Dict]]:
    """method -> the :func:`run_metrics` of its finished runs (seed order)."""
    by_method: Dict[str, List[Dict]] = {}
    for run_dir in finished_run_dirs(runs_dir):
        method = read_json(os.path.join(run_dir, "run.json"), "run record")["method"][len("repro_"):]
        by_method.setdefault(method, []).append(run_metrics(run_dir, data_dir, patterns))
    return {m: sorted(by_method[m], key=lambda r: r["seed"]) for m in METHODS if m in by_method}


def left_out(runs: List[Dict]) -> str:
    """The share of the training sessions each ranker read that it was not fed (no click), over the runs."""
    shares = [1.0 - r["ranker_sessions_fed"] / r["ranker_sessions_read"] for r in runs if r["ranker_sessions_read"]]
    return "%.1f %%" % (100 * np.mean(shares)) if shares else "n/a"


def published_table() -> List[str]:
    """The published real-data figures, quoted from their file with its source."""
    published = read_json(PUBLISHED, "published figures")
    source = published["source"]
    columns = published["columns"]
    lines = ["**Published, real Baidu-ULTR: not comparable with a generated log.** %s Source: `%s`, `%s` at commit "
             "`%s` (%s), quoted from `studies/baidu_reproducibility/%s`." % (
                 published["what"], source["repository"], source["path"], source["commit"], source["section"],
                 os.path.basename(PUBLISHED)), "",
             "| model | " + " | ".join(HEADERS[c] for c in RANKING_METRICS + ("click_nll",)) + " |",
             "|---" * (len(RANKING_METRICS) + 2) + "|"]
    for row in published["rows"]:
        values = dict(zip(columns, row))
        lines.append("| %s | %s |" % (values["model"], " | ".join(
            "-" if values[c] is None else "%g" % values[c] for c in RANKING_METRICS + ("click_nll",))))
    return lines


def report(by_method: Dict[str, List[Dict]], title: str, log: Dict) -> Dict:
    """``{"markdown", "summary"}``: the published layout's table, MULTR's paired differences over runs and the
    published figures; the numbers per method."""
    lines = ["# %s" % title, "",
             "The training log: %d sessions, %.1f %% of them without a click; the deepest position %d; %.1f %% of "
             "its %d document rows lie beyond position 10 (a top-10 protocol cuts them)." % (
                 log["sessions"], 100 * log["clickless_share"], log["deepest_position"],
                 100 * log["rows_beyond_10_share"], log["rows"]), "",
             "Mean and 95 % t-interval over the runs (seeds). Ranking metrics on every annotated query; click NLL "
             "(nats, lower is better) and perplexity (mean over ranks of CLAX's per-rank perplexity) on the test half "
             "of the held-out sessions, for the ranker with its examination; `MULTR simulator`: MULTR's user "
             "simulator (clicks given the earlier clicks of the session); `position CTR`: the training click rate per "
             "rank. Left out: the share of the training sessions a ranker read and was not fed (no click). Selected "
             "step: the checkpoint main.py kept by the validation click loss, of the steps it trained, per run.", "",
             "| method | runs | " + " | ".join(HEADERS[m] for m in RANKING_METRICS + CLICK_METRICS)
             + " | left out | selected step | trained as |",
             "|---" * (len(RANKING_METRICS) + len(CLICK_METRICS) + 5) + "|"]
    summary: Dict = {}
    for method, runs in by_method.items():
        label = METHODS[method][0]
        algorithm = METHODS[method][1]
        cells = [_cell([r["ranking"][m] for r in runs]) for m in RANKING_METRICS]
        cells += [_cell([r["clicks"][algorithm][m] for r in runs]) for m in CLICK_METRICS]
        hosts = sorted({"%s (%s)" % (r["trained_as_host"]["host"], r["trained_as_host"]["why"])
                        for r in runs if r["trained_as_host"]})
        selected = ", ".join("%d/%d" % (r["selected_step"], r["steps_done"]) for r in runs)
        lines.append("| %s | %d | %s | %s | %s | %s |" % (label, len(runs), " | ".join(cells), left_out(runs), selected,
                                                           "; ".join(hosts) or "itself"))
        summary[method] = {"runs": runs, "left_out": left_out(runs)}
    for name in ("MULTR simulator", "position CTR"):
        runs = [r for method_runs in by_method.values() for r in method_runs if name in r["clicks"]]
        if name == "position CTR":
            runs = runs[:1]  # the same floor in every run
        if runs:
            lines.append("| %s | %d | %s | %s | | | |" % (name, len(runs), " | ".join([""] * len(RANKING_METRICS)),
                                                          " | ".join(_cell([r["clicks"][name][m] for r in runs])
                                                                     for m in CLICK_METRICS)))
    if "multr" in by_method:
        lines += ["", "MULTR minus each method, paired over runs of the same seed: mean [95 % t-interval]:", "",
                  "| MULTR vs | pairs | nDCG@10 | click NLL |", "|---|---|---|---|"]
        mine = {r["seed"]: r for r in by_method["multr"]}
        for method, runs in by_method.items():
            theirs = {r["seed"]: r for r in runs}
            seeds = sorted(set(mine) & set(theirs))
            if method == "multr" or not seeds:
                continue
            ndcg = over_runs([mine[s]["ranking"]["ndcg_10"] for s in seeds],
                             [theirs[s]["ranking"]["ndcg_10"] for s in seeds])
            nll = over_runs([mine[s]["clicks"]["ultra_multr.MULTR"]["click_nll"] for s in seeds],
                            [theirs[s]["clicks"][METHODS[method][1]]["click_nll"] for s in seeds])
            lines.append("| %s | %d | %s | %s |" % (METHODS[method][0], len(seeds), ndcg.interval_text(),
                                                    nll.interval_text()))
    lines += [""] + published_table()
    return {"markdown": "\n".join(lines) + "\n", "summary": summary}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--log-dir", help="the release (DIR/parts/...)")
    source.add_argument("--generate", choices=sorted(RECIPES), help="a generated log of this recipe instead")
    parser.add_argument("--dataset", choices=sorted(baidu_convert.UPSTREAM_DATASETS), default="ltr",
                        help="ultr-reproducibility's data= name: ltr (the lexical features; its config reads "
                             "baidu-mlm-ctr), baidu or uva (the embedding of baidu-mlm-ctr / uva-mlm-ctr)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="upstream")
    parser.add_argument("--clickless", choices=["protocol", "skip", "keep"], default="protocol",
                        help="sessions without a click: protocol (kept for PAL and MULTR only), or skip / keep for all")
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS),
                        help="the rows to run (default: all, in the published layout's order)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=7000, help="ranker updates (main.py's --max_train_iteration)")
    parser.add_argument("--checkpoint-every", type=int, default=500, help="main.py's --steps_per_checkpoint")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--simulator-steps", type=int, default=10000, help="MULTR's simulator_steps (its cap)")
    parser.add_argument("--imputation-samples", type=int, default=32, help="MULTR's imputation_samples")
    parser.add_argument("--multr-hparams", default="",
                        help="MULTR's hyper-parameters besides its defaults, e.g. logger_guard=none")
    parser.add_argument("--top-n", default=baidu_convert.AUTO,
                        help="positions kept (default: the log's deepest, <= 50)")
    for name, default in GENERATED_SIZES.items():
        parser.add_argument("--" + name, type=int, default=default, help="generated log: %s" % name)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    log_dir = generate(out, args) if args.generate else os.path.abspath(args.log_dir)
    patterns = log_patterns(log_dir)
    data_dir = os.path.join(out, "data")
    if not os.path.isfile(os.path.join(data_dir, baidu_convert.CONVERSION_JSON)):
        code = baidu_convert.main(["--annotations", patterns["annotations"], "--log_files", patterns["train"],
                                   "--heldout_files", patterns["heldout"], "--out", data_dir, "--protocol",
                                   "reproducibility", "--dataset", args.dataset, "--top_n", str(args.top_n)]
                                  + ([] if PRESETS[args.preset]["standardize"] else ["--no_standardize"]))
        if code:
            return code
    positions = read_json(os.path.join(data_dir, baidu_convert.CONVERSION_JSON), "conversion record")["top_n"]
    generated = read_json(os.path.join(log_dir, "recipe.json"), "log recipe") if args.generate else None
    config_path = os.path.join(out, "study.json")
    atomic_write_text(config_path, json.dumps(study_config(args, data_dir, patterns, positions, generated),
                                              indent=1) + "\n")
    code = runner.main([config_path, "--workers", str(args.workers)] + (["--dry-run"] if args.dry_run else []))
    if args.dry_run:
        return code
    results = os.path.join(out, "results")
    atomic_write_text(os.path.join(results, "sessions.md"), budget.format_markdown(os.path.join(out, "runs")))
    title = "Baidu-ULTR benchmark table, %s: %s preset, %d positions" % (
        "generated log `%s`" % args.generate if args.generate else "the release (%s)" % args.dataset, args.preset,
        positions)
    log = log_summary(patterns)
    table = report(collect(os.path.join(out, "runs"), data_dir, patterns), title, log)
    atomic_write_text(os.path.join(results, "table.md"), table["markdown"])
    atomic_write_text(os.path.join(results, "table.json"), json.dumps(
        dict(table["summary"], recipe=generated, preset=args.preset, clickless=args.clickless, positions=positions,
             log=log),
        indent=1, sort_keys=True) + "\n")
    print(table["markdown"])
    return code


if __name__ == "__main__":
    sys.exit(main())
