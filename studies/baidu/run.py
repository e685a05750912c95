"""MULTR against Naive, IPS, DLA and PAL on a generated log in the Baidu-ULTR schema (issue 18, item 6).

    python studies/baidu/run.py --out out/baidu_pbm --click-model pbm [--sessions 100000] [--queries 2000]
        [--annotated 1000] [--logger-bias 0] [--feature-noise 1] [--logger-noise 1] [--logger grade]
        [--missing-doc-prob 0] [--seeds 0 1 2]
        [--steps 500] [--ranker-norm layer] [--standardize on] [--workers 2] [--dry-run]

On the release's real files, ultr-reproducibility's protocol (every held-out file, its split, every position, its
preset): ``studies/baidu_reproducibility/run.py --log-dir``.  This study generates its logs and uses the project's own
protocol (annotated queries split 50/50 for model selection and test, the top 10 positions).

1. A log in the release's layout (:func:`ultra_multr.generate.baidu_log.write_baidu_log`: one row per document, as
   the release's writer writes it): ``--queries``
   queries of 6-10 documents with a latent grade 0-4 that the 12 lexical features carry with noise, each
   session showing its query in the order of a noisy logging ranker (so a query is logged in several
   orders; with ``--logger-bias`` B it also favours a per-document popularity z, unrelated to relevance, by
   B * z, and the lexical feature ``abstract_length`` carries z: the confound that lets position bias
   mislead a ranker; ``--feature-noise`` sets how noisily the features carry the grade, ``--logger-noise``
   the logger's per-session noise: 0 logs each query in one order; ``--logger features`` scores by a linear
   function of the lexical features instead of the grade, so the logged position carries no relevance the
   features lack; ``--missing-doc-prob`` drops shown documents from the file, leaving gaps in the positions,
   as the release's writer does), clicks from a
   known model: ``pbm`` (examination 1/rank, click probability per grade
   ``graded_click_prob(0.1, 4)``) or ``cascade`` (the same click probabilities, the first click ends the
   session); ``--sessions`` training sessions in files of 25,000, 10,000 held-out sessions (part 0) and
   ``--annotated`` annotated queries (half valid, half test).  Written once into ``<out>/log`` with its
   recipe; another recipe in the same ``--out`` is refused.
2. ``python -m ultra_multr.click_logs.baidu_convert`` into ``<out>/data`` (lexical features; with ``--standardize on``,
   the default since issue 27, standardised per feature with statistics fitted on the training files, which the
   feed applies too; the committed tables of studies/baidu/README.md were computed before, without it).
3. The study runner on that directory, every method on the same logged sessions (the fair protocol's
   same clicks: the log is fixed) with the session-replay feed
   (:class:`ultra_multr.feeds.baidu.BaiduSessionFeed`) and the same ranker, steps and batch size:
   Naive, DLA and PAL under equal tuning (a 3-candidate learning-rate pilot on the validation split,
   docs/fair_protocol.md), IPS with the true examination as propensities, tuned the same way (PBM
   only: under the cascade no position-only propensity is exact), and MULTR at its defaults (no
   tuning: it chooses nothing on labels) except ``--imputation-samples`` (32: most logged lists are new
   to its expected-click cache, which then samples every step).  The runner's tables (nDCG@1-10 and ERR with paired
   p-values against the best baseline) go to ``<out>/results``.
4. The Baidu-ULTR benchmark's metrics per run (:mod:`ultra_multr.click_logs.baidu_evaluate`: DCG@1/3/5/10,
   nDCG@10, MRR@10 on the test queries), MULTR's simulator's held-out click log-likelihood beside a
   position click-rate floor (:mod:`ultra_multr.click_logs.baidu_click_ll`, on part 0), paired p-values of
   MULTR against each method on the pooled test queries (each averaged over seeds), and the time per
   pass over the log: ``<out>/results/baidu_metrics.md``, ``baidu_metrics.json``.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import Dict, List

import numpy as np

from ultra_multr.click_models import CascadeModel, PositionBasedModel, graded_click_prob, reciprocal_rank_exam_prob
from ultra_multr.files import atomic_write_text
from ultra_multr.experiments import budget, diagnostics
from ultra_multr.experiments.runner import cli as runner
from ultra_multr.experiments.aggregate import finished_run_dirs
from ultra_multr.experiments.evaluate import read_per_query_csv
from ultra_multr.experiments.methods import EQUAL_TUNING
from ultra_multr.experiments.significance import randomization_test
from ultra_multr.click_logs import baidu, baidu_click_ll, baidu_convert, baidu_evaluate
from ultra_multr.generate.baidu_log import MAX_LABEL, write_baidu_log
from ultra_multr.click_logs.standardize import STATS_JSON

N_POSITIONS = 10
HELDOUT_FILE = "part-0_split-0.feather"
SESSIONS_PER_FILE = 25000
HELDOUT_SESSIONS = 10000
CLICK_MODELS = {
    "pbm": lambda: PositionBasedModel(graded_click_prob(0.1, MAX_LABEL), reciprocal_rank_exam_prob(1.0, N_POSITIONS)),
    "cascade": lambda: CascadeModel(graded_click_prob(0.1, MAX_LABEL)),
}
LABELS = {"naive_tuned": "Naive (tuned)", "ipw_tuned": "IPS (tuned, true propensities)", "dla_tuned": "DLA (tuned)",
          "pal_tuned": "PAL (tuned)", "multr": "MULTR"}


def train_pattern(log_dir: str) -> str:
    """The training files of a generated log: part 1."""
    return os.path.join(log_dir, "parts", "part-1_split-*.feather")


def write_log(out: str, recipe: Dict) -> None:
    """The generated log of ``recipe`` in ``<out>/log`` (written once).

    Raises:
        SystemExit: ``<out>/log`` holds a log of another recipe.
    """
    log_dir = os.path.join(out, "log")
    recipe_path = os.path.join(log_dir, "recipe.json")
    if os.path.exists(recipe_path):
        with open(recipe_path) as handle:
            found = json.load(handle)
        if found != recipe:
            raise SystemExit("%s holds a log of another recipe (%s); remove %s or choose another --out"
                             % (recipe_path, found, log_dir))
    else:
        write_baidu_log(
            log_dir, n_queries=recipe["queries"], n_sessions=recipe["sessions"], n_test_sessions=HELDOUT_SESSIONS,
            n_annotated=recipe["annotated"], n_positions=N_POSITIONS, sessions_per_file=SESSIONS_PER_FILE,
            click_model=CLICK_MODELS[recipe["click_model"]](), seed=recipe["seed"],
            logger_bias=recipe.get("logger_bias", 0.0), feature_noise=recipe.get("feature_noise", 1.0),
            logger_noise=recipe.get("logger_noise", 1.0), logger=recipe.get("logger", "grade"),
            missing_doc_prob=recipe.get("missing_doc_prob", 0.0),
        )
        atomic_write_text(recipe_path, json.dumps(recipe, indent=1, sort_keys=True) + "\n")


def study_config(args, data_dir: str, log_pattern: str) -> Dict:
    methods = ["naive_tuned", "dla_tuned", "pal_tuned", "multr"]
    extra = {}
    if args.click_model == "pbm":
        exam = reciprocal_rank_exam_prob(1.0, N_POSITIONS)
        extra["ipw_tuned"] = {
            "label": LABELS["ipw_tuned"], "role": "baseline", "learning_algorithm": "ultra_multr.IPW",
            "learning_algorithm_hparams": dict(EQUAL_TUNING, propensities=exam),
        }
        methods.insert(1, "ipw_tuned")
    return {
        "output_dir": os.path.abspath(args.out),
        "datasets": {"baidu_generated": {args.click_model: data_dir}},
        "methods": methods,
        "seeds": list(args.seeds),
        "settings": {
            "train_input_feed": "ultra_multr.feeds.baidu.BaiduSessionFeed",
            "train_input_hparams": {"log_files": log_pattern, "features": "lexical", "log1p_lexical": True,
                                    "standardize": os.path.join(data_dir, STATS_JSON)
                                    if args.standardize == "on" else "none"},
            "ranking_model_hparams": dict({"hidden_layer_sizes": [512, 256, 128]},
                                          **({} if args.ranker_norm == "layer" else {"norm": args.ranker_norm})),
            "learning_algorithm_hparams": {"learning_rate": 0.05, "log_every": 500},
        },
        # logger_guard=none: the committed results were made before the logger guard was MULTR's default
        "method_overrides": {"multr": {"learning_algorithm_hparams": {
            "simulator_steps": args.steps, "imputation_samples": args.imputation_samples, "logger_guard": "none"}}},
        "extra_methods": extra,
        "main_args": {"batch_size": 256, "max_train_iteration": args.steps, "steps_per_checkpoint": 100,
                      "selection_bias_cutoff": N_POSITIONS},
    }


def benchmark_metrics(run_dir: str, data_dir: str, log_dir: str) -> Dict:
    """DCG@k, nDCG@10, MRR@10 of one finished run on the test queries (and, for MULTR, held-out click LL)."""
    out = os.path.join(run_dir, "baidu")
    metrics_path = os.path.join(out, baidu_evaluate.METRICS_JSON)
    if not os.path.exists(metrics_path) or os.path.getmtime(metrics_path) < os.path.getmtime(
        os.path.join(run_dir, "done.json")
    ):
        with open(os.path.join(run_dir, "settings.json")) as handle:
            settings = json.load(handle)
        baidu_evaluate.evaluate(data_dir, settings, os.path.join(run_dir, "model"), out)
    with open(metrics_path) as handle:
        result = {"metrics": json.load(handle), "per_query": read_per_query_csv(os.path.join(out, "per_query_metrics.csv"))}
    simulator = os.path.join(run_dir, "model", "ultra_multr.MULTR.simulator.ckpt")
    if os.path.exists(simulator):
        result["click_ll"] = {population: baidu_click_ll.evaluate(
            simulator, sorted(glob.glob(train_pattern(log_dir))), [os.path.join(log_dir, "parts", HELDOUT_FILE)],
            out, "lexical", N_POSITIONS, True, population,
        ) for population in baidu_click_ll.RESULT_FILES}
    return result


def _mean_sd(values: List[float]) -> str:
    return "%.3f ± %.3f" % (np.mean(values), np.std(values, ddof=1)) if len(values) > 1 else "%.3f" % values[0]


def report(out: str, data_dir: str, log_dir: str, n_sessions: int) -> str:
    """Markdown of the benchmark's metrics per method (mean ± sd over seeds), paired p of MULTR against each
    method (test queries, each averaged over seeds), MULTR's held-out click log-likelihood and the time per pass."""
    by_method: Dict[str, List] = {}
    for run_dir in finished_run_dirs(os.path.join(out, "runs")):
        with open(os.path.join(run_dir, "run.json")) as handle:
            method = json.load(handle)["method"]
        by_method.setdefault(method, []).append((run_dir, benchmark_metrics(run_dir, data_dir, log_dir)))
    names = baidu_evaluate.BAIDU_METRICS
    lines = ["| method | runs | " + " | ".join(names) + " | seconds per pass over the log | peak MiB (training) |",
             "|---" * (len(names) + 4) + "|"]
    summary = {}
    for method, results in by_method.items():
        per_pass, peak = [], []
        for run_dir, _ in results:
            with open(os.path.join(run_dir, "done.json")) as handle:
                done = json.load(handle)
            if (done.get("step_peak_rss_mib") or {}).get("train"):  # runs of a runner that measured it
                peak.append(done["step_peak_rss_mib"]["train"])
            ranker = ((done.get("sessions") or {}).get("phases") or {}).get("ranker", {}).get("sessions")
            if ranker:  # runs of a feed that counted its sessions
                per_pass.append(done["step_seconds"]["train"] * n_sessions / ranker)
        means = {m: [r["metrics"][m] for _, r in results] for m in names}
        summary[method] = {"runs": len(results), "metrics": means, "seconds_per_pass": per_pass, "peak_rss_mib": peak}
        lines.append("| %s | %d | %s | %s | %s |" % (LABELS.get(method, method), len(results),
                                                     " | ".join(_mean_sd(means[m]) for m in names),
                                                     "%.0f" % np.mean(per_pass) if per_pass else "n/a",
                                                     "%d" % max(peak) if peak else "n/a"))
    text = ["Benchmark metrics on the test queries (mean ± sample sd over seeds); seconds per pass: the run's "
            "training wall time (start-up, simulator and pilots included) scaled to one pass over the log; peak "
            "MiB: the largest training process's peak resident memory over the runs.", ""]
    text += lines
    def per_query(method: str, metric: str) -> Dict[str, float]:
        tables = [r["per_query"] for _, r in by_method[method]]
        return {q: float(np.mean([t[q][metric] for t in tables])) for q in tables[0]}

    def paired(method: str, other: str, metric: str) -> tuple:
        """(mean difference method - other, two-sided p) over the test queries."""
        a, b = per_query(method, metric), per_query(other, metric)
        queries = sorted(a)
        x, y = np.array([a[q] for q in queries]), np.array([b[q] for q in queries])
        return float(np.mean(x - y)), randomization_test(x, y)

    if "naive_tuned" in by_method:  # room for debiasing: does any method beat the one that ignores the bias?
        text += ["", "Against Naive (tuned), nDCG@10 on the test queries (room for debiasing%s):" % (
                     ": IPS with the true propensities is unbiased under the PBM" if "ipw_tuned" in by_method else ""),
                 "", "| method | difference | p |", "|---|---|---|"]
        for method in by_method:
            if method != "naive_tuned":
                diff, p = paired(method, "naive_tuned", "ndcg_10")
                summary[method]["vs_naive_ndcg_10"] = {"difference": diff, "p": p}
                text.append("| %s | %+.4f | %.4f |" % (LABELS.get(method, method), diff, p))
    if "multr" in by_method:
        text += ["", "Paired p of MULTR against each method (two-sided Fisher randomisation test, 10,000 "
                 "permutations, test queries with each query's metric averaged over seeds):", "",
                 "| MULTR vs | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]

        for method in by_method:
            if method == "multr":
                continue
            cells = []
            for metric in names:
                diff, p = paired("multr", method, metric)
                cells.append("%.4f (%s)" % (p, "better" if diff > 0 else "worse" if diff < 0 else "level"))
            summary[method]["multr_p"] = dict(zip(names, cells))
            text.append("| %s | %s |" % (LABELS.get(method, method), " | ".join(cells)))
        text += ["", "MULTR's simulator on the held-out sessions (part 0), per run: click log-likelihood per "
                 "session (higher is better) and mean perplexity per position, beside the position click-rate "
                 "floor, on all sessions (the benchmark's) and on the sessions with a click (the only ones the "
                 "simulator is trained on; the floor fitted on those too):", "",
                 "| run | sessions | simulator LL | floor LL | simulator perplexity | floor perplexity |",
                 "|---|---|---|---|---|---|"]
        for run_dir, result in by_method["multr"]:
            for population, ll in result["click_ll"].items():
                sim, floor = ll["MULTR simulator"], ll["position CTR"]
                text.append("| %s | %s: %d | %.4f | %.4f | %.4f | %.4f |" % (
                    os.path.basename(run_dir), population, sim["sessions"], sim["log_likelihood"],
                    floor["log_likelihood"], sim["perplexity"], floor["perplexity"]))
            summary["multr"].setdefault("click_ll", []).append({"run": os.path.basename(run_dir), **result["click_ll"]})
    atomic_write_text(os.path.join(out, "results", "baidu_metrics.json"), json.dumps(summary, indent=1) + "\n")
    return "\n".join(text) + "\n"


def failed_runs(runs_dir: str) -> str:
    """Markdown: every run that failed (its ``failed.json``), with the last line of its stderr."""
    lines = ["| run | last line of its stderr |", "|---|---|"]
    for path in sorted(glob.glob(os.path.join(runs_dir, "**", "failed.json"), recursive=True)):
        with open(path) as handle:
            failure = json.load(handle)
        tail = (failure.get("stderr_tail") or failure["reason"]).strip().splitlines()[-1]
        lines.append("| %s | %s |" % (os.path.relpath(os.path.dirname(path), runs_dir), tail.replace("|", "/")))
    return "\n".join(lines) + "\n" if len(lines) > 2 else "No run failed.\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--click-model", choices=sorted(CLICK_MODELS), default="pbm")
    parser.add_argument("--sessions", type=int, default=100000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--annotated", type=int, default=1000)
    parser.add_argument("--log-seed", type=int, default=0, help="seed of the generated log")
    parser.add_argument("--logger-bias", type=float, default=0.0,
                        help="weight of the logging ranker's popularity z (carried by abstract_length, unrelated to "
                             "relevance); 0: the logger follows relevance plus noise only")
    parser.add_argument("--feature-noise", type=float, default=1.0,
                        help="sd of the noise on each lexical feature's grade signal (1: the features nearly "
                             "determine the grade)")
    parser.add_argument("--logger-noise", type=float, default=1.0,
                        help="sd of the logging ranker's per-session noise (0: one logged order per query)")
    parser.add_argument("--logger", choices=["grade", "features"], default="grade",
                        help="the logging ranker: the grade plus noise, or a linear function of the lexical features "
                             "plus noise (blind to the grades)")
    parser.add_argument("--missing-doc-prob", type=float, default=0.0,
                        help="probability that a shown document is missing from the file (a gap in the positions)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=500, help="ranker updates (and MULTR's simulator cap)")
    parser.add_argument(
        "--imputation-samples", type=int, default=32,
        help="MULTR's imputation_samples: a logged session is a list the expected pass has not seen, so each step "
             "computes its pseudo clicks afresh; 32 instead of the default 256 keeps a step about as cheap as DLA's",
    )
    parser.add_argument("--ranker-norm", choices=["layer", "none"], default="layer",
                        help="the DNN's normalisation (ULTRA's norm hparam): layer (ULTRA's default) normalises each "
                             "document's features across them; none leaves them as they are")
    parser.add_argument("--standardize", choices=["on", "off"], default="on",
                        help="per-feature standardisation fitted on the training log (issue 27; the committed "
                             "tables of studies/baidu/README.md were computed before it existed, i.e. off)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    if min(args.sessions, args.queries, args.annotated) < 2:
        parser.error("--sessions, --queries and --annotated must be >= 2")
    out = os.path.abspath(args.out)
    # "layout": logs written before the release's row-per-document layout are no longer readable
    recipe = {"click_model": args.click_model, "sessions": args.sessions, "queries": args.queries,
              "annotated": args.annotated, "seed": args.log_seed, "layout": "document_rows"}
    if args.logger_bias:  # only then: recipes of logs written without them stay valid
        recipe["logger_bias"] = args.logger_bias
    if args.feature_noise != 1.0:
        recipe["feature_noise"] = args.feature_noise
    if args.logger_noise != 1.0:
        recipe["logger_noise"] = args.logger_noise
    if args.logger != "grade":
        recipe["logger"] = args.logger
    if args.missing_doc_prob:
        recipe["missing_doc_prob"] = args.missing_doc_prob
    data_dir = os.path.join(out, "data")
    log_dir = os.path.join(out, "log")
    if not args.dry_run:
        write_log(out, recipe)
    log_pattern = train_pattern(log_dir)  # named even before a --dry-run has written the log
    record_path = os.path.join(data_dir, baidu_convert.CONVERSION_JSON)
    if not args.dry_run and not os.path.exists(record_path):
        baidu_convert.main(["--annotations", os.path.join(log_dir, "parts", "validation.feather"),
                            "--log_files", log_pattern, "--out", data_dir, "--features", "lexical"]
                           + (["--no_standardize"] if args.standardize == "off" else []))
    if os.path.exists(record_path):
        with open(record_path) as handle:
            standardized = "standardization" in json.load(handle)
        if standardized != (args.standardize == "on"):
            parser.error("%s was converted %s per-feature standardisation; pass --standardize %s or remove it"
                         % (data_dir, "with" if standardized else "without", "on" if standardized else "off"))
    config_path = os.path.join(out, "study.json")
    os.makedirs(out, exist_ok=True)
    atomic_write_text(config_path, json.dumps(study_config(args, data_dir, log_pattern), indent=2) + "\n")
    code = runner.main([config_path, "--workers", str(args.workers)] + (["--dry-run"] if args.dry_run else []))
    if args.dry_run:
        return code
    runs_dir = os.path.join(out, "runs")
    results = os.path.join(out, "results")
    atomic_write_text(os.path.join(results, "sessions.md"), budget.format_markdown(runs_dir))
    atomic_write_text(os.path.join(results, "failed.md"), failed_runs(runs_dir))
    atomic_write_text(os.path.join(results, "diagnostics.md"), diagnostics.format_markdown(diagnostics.collect(runs_dir)))
    n_sessions = sum(map(baidu.session_count, glob.glob(log_pattern)))  # a generated log drops short sessions too
    table = report(out, data_dir, log_dir, n_sessions)
    atomic_write_text(os.path.join(results, "baidu_metrics.md"), table)
    print(table)
    return code


if __name__ == "__main__":
    sys.exit(main())
