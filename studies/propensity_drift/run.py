"""Propensity drift (issue 24, item 3): why DLA's learned propensities drift inside MULTR.

DLA's examination model is trained on clicks weighted by the *ranker's*
inverse relevance (``relevance_weights = propensity_weights(scores)`` in
:meth:`ultra_multr.algorithms.dla.DLA.training_loss`: ``exp(s_1 - s_k)`` with
softmax probabilities), and MULTR reuses that loss, so the propensity curve
depends on the ranker that MULTR's doubly-robust loss trains.  This study trains
DLA and MULTR variants on the same generated "headroom" list set
(``studies/headroom/run.py``'s recipe and runner settings), with the same
seed and click budget, and writes the learned inverse propensities beside the
evidence for the cause, measured on the training lists from each run's final
ranker::

    python studies/propensity_drift/run.py --out /work/out-drift/study [--datasets 1] [--seeds 0]
        [--train-queries 500] [--steps 600] [--simulator-steps 300] [--threads 1]
        [--variant METHOD LABEL [HPARAMS]] ... [--tables-only] [--dry-run]

A variant is a method of the runner's registry (``dla``, ``multr``, ...), a
label (the ``variant`` column; letters, digits, ``.``, ``-``, ``_``) and a
``learning_algorithm_hparams`` string in ULTRA's syntax (``a=1,b=x``) applied
over the study's settings, e.g.
``--variant multr lr0.01 learning_rate=0.01`` or
``--variant multr batchnorm dr_normalization=batch``.  Without ``--variant``:
:data:`DEFAULT_VARIANTS`.

Each variant is registered as the runner method ``<method>__<label>`` and runs
through :mod:`ultra_multr.experiments.runner.cli` (resumable: finished runs are
kept).  ULTRA's main.py is driven so that its only checkpoint is the final
ranker (``steps_per_checkpoint = steps``, ``max_train_iteration = steps - 1``:
main.py validates, saves and stops at step ``steps``), the ranker whose scores
weighted the examination loss last.

Writes under ``<out>/results``:

* ``curves.csv``: method, variant, runs, position, inverse_propensity_mean,
  inverse_propensity_sd (1/p relative to position 1 at the last step, over runs;
  from :mod:`ultra_multr.experiments.diagnostics`);
* ``curves.md``: one row per method/variant, 1/p at positions 2..N; ``curves.png``: the same curves; rows
  ``reference`` (with the cascade click model) are computed from the training lists, not trained;
* ``data.md``: per position of the training lists, the cascade's examination, the 1/p DLA's examination loss
  targets under a ranker that knows the true relevance, and the correlation of the logging ranker's feature with
  the label at that position (negative: the logging ranker put a document there by its noise or by its label);
* ``evidence.csv`` / ``evidence.md``: per run, on the training lists in their
  logged order, the final ranker's within-list score spread (std of the scores
  of a list, mean over lists), its mean within-list correlation with the
  position and with the logging ranker's feature (the last feature), the
  relevance weights the examination loss multiplies clicks by
  (``exp(s_1 - s_10)``: median and 90th percentile at position 10 over lists
  of 10), the 1/p@10 the examination loss moves towards under that ranker (implied),
  the trained simulator's expected pseudo clicks on random re-rankings (MULTR's
  re-ranked term) correlated with the logging feature and the label, the
  examination and ranking losses (mean of the last ``TAIL`` logged steps),
  1/p@10 at every 100th step and the test nDCG@10.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ultra_multr.config import split_assignments
from ultra_multr.generate.ultra_dataset import write_recipe_dataset
from ultra_multr.files import atomic_write_text
from ultra_multr.experiments import diagnostics, methods as registry
from ultra_multr.experiments.runner import cli as runner
from ultra_multr.experiments.aggregate import finished_run_dirs
from ultra_multr.experiments.runner.runs import SETTINGS_FILE

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: studies/headroom/run.py's click model: cascade, noise 0.1, labels 0..4.
CASCADE_4 = os.path.join(REPO, "settings", "click_models", "cascade_eps0.1_ymax4.json")
#: (method, label, hparams) run without --variant: DLA; MULTR's default (the paper's mixture, rebalance guard), its
#: randomized form (the headroom grid's row), a = 0 and the click model that made the clicks as its simulator; DLA and MULTR with a 5x smaller ranker step (the
#: propensity model's learning rate kept at 0.05: by default it follows the ranker's); MULTR with its ranking
#: loss scaled by 1/4 (ranker_loss_weight: only the ranker's gradient is scaled, as a constant dr_normalization
#: would) and with DLA's inverse propensity (and relevance) weights clamped at 10.
DEFAULT_VARIANTS: Tuple[Tuple[str, str, str], ...] = (
    ("dla", "default", ""),
    ("dla", "ranker_lr0.01", "learning_rate=0.01,propensity_learning_rate=0.05"),
    ("multr", "default", ""),
    ("multr", "randomized", "rerank_weight=randomized"),
    ("multr", "a0", "rerank_weight=0"),
    ("multr", "true_simulator", "simulator_control=true_click_model"),
    ("multr", "ranker_lr0.01", "learning_rate=0.01,propensity_learning_rate=0.05"),
    ("multr", "loss_x0.25", "ranker_loss_weight=0.25"),
    ("multr", "maxw10", "max_propensity_weight=10"),
)
#: The study's settings (studies/headroom/run.py's, i.e. ultra_multr.experiments.fold_study's).
RANKING_MODEL = {"hidden_layer_sizes": [512, 256, 128]}
SHARED_HPARAMS = {"learning_rate": 0.05, "log_every": 100}
#: logger_guard=none: the committed results were made before the logger guard was MULTR's default.
MULTR_HPARAMS = {"simulator_log_every": 500, "logger_guard": "none"}
DATASET = "generated"
LABEL_PATTERN = re.compile(r"^[A-Za-z0-9._-]+$")
SEPARATOR = "__"
#: curves.csv's rows computed from the data, not trained (method "reference", runs 0)
REFERENCE = "reference"
#: steps of the train/* curves averaged for the losses of evidence.csv
TAIL = 50
CURVE_COLUMNS = ["method", "variant", "runs", "position", "inverse_propensity_mean", "inverse_propensity_sd"]
EVIDENCE_COLUMNS = [
    "method", "variant", "fold", "seed", "inverse_propensity_10", "implied_inverse_propensity_10", "score_spread", "score_position_corr",
    "score_ranker_feature_corr", "score_label_corr", "pseudo_click_feature_corr", "pseudo_click_label_corr",
    "relevance_weight_10_median", "relevance_weight_10_p90",
    "exam_loss", "rank_loss", "ndcg_10", "inverse_propensity_10_by_step",
]


@dataclass(frozen=True)
class Variant:
    method: str  # a registered runner method (dla, multr, ...)
    label: str
    hparams: Dict[str, object]

    @property
    def name(self) -> str:
        """The runner method name of this variant."""
        return self.method + SEPARATOR + self.label


def parse_hparams(text: str) -> Dict[str, object]:
    """``"a=1,b=[1,2]"`` -> ``{"a": "1", "b": ["1", "2"]}`` (values stay strings: the algorithm parses them)."""
    values: Dict[str, object] = {}
    for part in split_assignments(text or ""):
        if "=" not in part:
            raise ValueError("hparam %r: expected name=value" % part)
        name, value = (s.strip() for s in part.split("=", 1))
        if value.startswith("[") and value.endswith("]"):
            values[name] = [v.strip() for v in value[1:-1].split(",") if v.strip()]
        else:
            values[name] = value
    return values


def make_variant(method: str, label: str, hparams: str = "") -> Variant:
    registry.get_method(method)  # unknown: the error lists the known ones
    if not LABEL_PATTERN.match(label) or SEPARATOR in label:
        raise ValueError("variant label %r: use letters, digits, '.', '-', '_' (no %r)" % (label, SEPARATOR))
    return Variant(method, label, parse_hparams(hparams))


def split_name(name: str) -> Tuple[str, str]:
    """A runner method name -> (method, variant label); a plain method is its own "default"."""
    method, _, label = name.partition(SEPARATOR)
    return method, label or "default"


def headroom_recipe(seed: int, args) -> dict:
    """studies/headroom/run.py's recipe of generated set ``seed`` (same keys, so the same data for the same values)."""
    return {
        "seed": seed, "train_queries": args.train_queries, "features": args.features,
        "valid_queries": args.valid_queries, "test_queries": args.test_queries,
        "initial_noise": args.initial_noise, "signal": args.signal,
        "ranker_feature": True, "docs_per_query": list(args.docs_per_query),
    }


def study_config(out: str, data_root: str, variants: Sequence[Variant], datasets, seeds, steps: int,
                 simulator_steps: int, click_model: str = CASCADE_4) -> dict:
    """The runner config: every variant as an extra method over the headroom study's settings."""
    extra, overrides = {}, {}
    for v in variants:
        spec = registry.get_method(v.method).make_settings
        extra[v.name] = {
            "label": "%s (%s)" % (registry.get_method(v.method).label, v.label), "role": registry.BASELINE,
            "learning_algorithm": spec.learning_algorithm,
            "learning_algorithm_hparams": dict(getattr(spec, "learning_algorithm_hparams", {})),
            "train_input_hparams": dict(getattr(spec, "train_input_hparams", {})),
        }
        # above the shared settings (a variant's learning_rate wins over the study's)
        hparams = dict(MULTR_HPARAMS, simulator_steps=simulator_steps) if "MULTR" in spec.learning_algorithm else {}
        hparams.update(v.hparams)
        overrides[v.name] = {"learning_algorithm_hparams": hparams}
    return {
        "output_dir": out,
        "datasets": {DATASET: {"Fold%d" % k: os.path.join(data_root, "Fold%d" % k) for k in datasets}},
        "methods": [v.name for v in variants],
        "seeds": list(seeds),
        "settings": {
            "train_input_hparams": {"click_model_json": os.path.abspath(click_model)},
            "ranking_model_hparams": dict(RANKING_MODEL),
            "learning_algorithm_hparams": dict(SHARED_HPARAMS),
        },
        "extra_methods": extra,
        "method_overrides": overrides,
        # main.py validates, saves its one checkpoint (the final ranker) and stops at step `steps`
        "main_args": {"batch_size": 256, "max_train_iteration": steps - 1, "steps_per_checkpoint": steps,
                      "selection_bias_cutoff": 10},
        "sweeps": [],
    }


# -- evidence from a finished run ----------------------------------------------------------------------------------
def _mean_corr(xs: List[np.ndarray], ys: List[np.ndarray]) -> float:
    """Mean over lists of the within-list Pearson correlation (lists where either side is constant are skipped)."""
    values = []
    for x, y in zip(xs, ys):
        if len(x) > 1 and np.std(x) > 0 and np.std(y) > 0:
            values.append(np.corrcoef(x, y)[0, 1])
    return float(np.mean(values)) if values else float("nan")


def score_evidence(scores: List[np.ndarray], labels: List[np.ndarray], ranker_feature: List[np.ndarray],
                   position: int = 10) -> Dict[str, float]:
    """The ranker's scores on lists in logged order: spread, correlations, and DLA's relevance weights.

    ``relevance_weight_<position>_*``: ``exp(s_1 - s_position)`` (softmax p_1 / p_position, the weight of a
    click at ``position`` in the examination loss) over lists with at least ``position`` documents."""
    weights = np.array([np.exp(s[0] - s[position - 1]) for s in scores if len(s) >= position])
    return {
        "score_spread": float(np.mean([np.std(s) for s in scores])),
        "score_position_corr": _mean_corr(scores, [np.arange(1, len(s) + 1, dtype=float) for s in scores]),
        "score_ranker_feature_corr": _mean_corr(scores, ranker_feature),
        "score_label_corr": _mean_corr(scores, labels),
        "relevance_weight_%d_median" % position: float(np.median(weights)) if weights.size else float("nan"),
        "relevance_weight_%d_p90" % position: float(np.percentile(weights, 90)) if weights.size else float("nan"),
    }


def cascade_click_rates(labels: List[np.ndarray], click_prob: Sequence[float]) -> List[np.ndarray]:
    """Per list, the cascade model's marginal click probability per position: r_k prod_{j<k} (1 - r_j)."""
    table = np.asarray(click_prob, dtype=float)
    rates = []
    for y in labels:
        r = table[np.asarray(y, dtype=int)]
        rates.append(r * np.concatenate([[1.0], np.cumprod(1.0 - r)[:-1]]))
    return rates


def implied_inverse_propensity(scores: List[np.ndarray], click_rates: List[np.ndarray], n: int = 10) -> np.ndarray:
    """[n] the 1/p (relative to position 1) that DLA's examination loss moves towards, given these scores.

    Over the lists of length ``n``, whose softmax covers every position, the loss ``-sum_q sum_k c_qk w_qk log p_k``
    with the ranker's weights ``w_qk = exp(s_q1 - s_qk)`` is minimal at ``p_k`` proportional to
    ``sum_q E[c_qk] w_qk``; ``E[c]``: the click model's marginal click probabilities."""
    mass = np.zeros(n)
    for s, c in zip(scores, click_rates):
        if len(s) == n:
            mass += c * np.exp(s[0] - np.asarray(s))
    return mass[0] / mass if mass.any() else np.full(n, np.nan)


def click_model_json(settings: dict) -> Optional[dict]:
    """The click model description named by a run's settings (``click_model_json=`` of its training feed)."""
    for part in split_assignments(settings.get("train_input_hparams", "")):
        name, _, value = part.partition("=")
        if name.strip() == "click_model_json":
            with open(value.strip()) as handle:
                return json.load(handle)
    return None


def train_lists(data_dir: str):
    """Labels and the logging ranker's feature (the last one) per training list, in logged order."""
    from ultra_multr.experiments.evaluate import read_split

    data = read_split(data_dir, "train")
    features = np.asarray(data.features, dtype=np.float64)
    labels = [np.asarray(y, dtype=float) for y in data.labels]
    return labels, [features[np.asarray(indices), -1] for indices in data.initial_list]


def data_evidence(labels: List[np.ndarray], feature: List[np.ndarray], click_prob: Sequence[float],
                  n: int = 10) -> Dict[str, np.ndarray]:
    """Per position 1..n over the lists of length n: the cascade's examination as 1/p (relative to position 1),
    the 1/p DLA's examination loss moves towards under a ranker with the true relevance (scores log r), the
    correlation of the logging ranker's feature with the label across lists at that position, and the mean label."""
    full = [(y, f) for y, f in zip(labels, feature) if len(y) == n]
    table = np.asarray(click_prob, dtype=float)
    relevance = [table[y.astype(int)] for y, _ in full]
    examination = np.mean([np.concatenate([[1.0], np.cumprod(1.0 - r)[:-1]]) for r in relevance], axis=0)
    rates = cascade_click_rates([y for y, _ in full], click_prob)
    ys, fs = np.stack([y for y, _ in full]), np.stack([f for _, f in full])
    return {
        "lists": np.array([len(full)]),
        "cascade_examination": examination[0] / examination,
        "exact_relevance_ranker": implied_inverse_propensity([np.log(r) for r in relevance], rates, n),
        "corr_feature_label": np.array([_mean_corr([fs[:, k]], [ys[:, k]]) for k in range(n)]),
        "mean_label": ys.mean(axis=0),
    }


def random_order_click_corr(labels: List[np.ndarray], feature: List[np.ndarray], click_prob: Sequence[float],
                            samples: int = 200, seed: int = 0) -> Dict[str, float]:
    """What an exact simulator gives the re-ranked term: the cascade click probability per document averaged over
    random orders of its list, as mean within-list correlation with the logging ranker's feature and the label."""
    rng = np.random.default_rng(seed)
    table = np.asarray(click_prob, dtype=float)
    clicks = []
    for y in labels:
        r = table[np.asarray(y, dtype=int)]
        total = np.zeros(len(r))
        for _ in range(samples):
            order = rng.permutation(len(r))
            shown = r[order]
            total[order] += shown * np.concatenate([[1.0], np.cumprod(1.0 - shown)[:-1]])
        clicks.append(total / samples)
    return {"feature": _mean_corr(clicks, feature), "label": _mean_corr(clicks, [np.asarray(y, float) for y in labels])}


def data_markdown(evidence: Dict[str, np.ndarray], fold: str) -> str:
    n = len(evidence["mean_label"])
    rows = [("cascade examination 1/p", "cascade_examination"),
            ("1/p DLA's examination loss targets under a ranker with the true relevance", "exact_relevance_ranker"),
            ("corr(logging feature, label) across lists at this position", "corr_feature_label"),
            ("mean label", "mean_label")]
    lines = ["%s, the %d training lists of length %d, in logged order; clicks: the cascade click model." % (
        fold, int(evidence["lists"][0]), n), "",
        "| quantity | " + " | ".join("@%d" % k for k in range(1, n + 1)) + " |", "|---" * (n + 1) + "|"]
    for title, key in rows:
        lines.append("| %s | %s |" % (title, " | ".join("%.2f" % v for v in evidence[key])))
    if "random_order" in evidence:
        exact = evidence["random_order"]
        lines += ["", "An exact simulator's re-ranked term (the cascade click probability per document averaged over "
                  "random orders of its list, all training lists): mean within-list correlation %.3f with the logging "
                  "ranker's feature, %.3f with the label." % (exact["feature"], exact["label"])]
    return "\n".join(lines) + "\n"


def train_split_scores(run_dir: str, data_dir: str):
    """The final ranker's scores, labels and logging-ranker feature per training list (logged order)."""
    from ultra_multr.experiments.evaluate import load_ranker, read_split, score_split

    with open(os.path.join(run_dir, SETTINGS_FILE)) as handle:
        settings = json.load(handle)
    data = read_split(data_dir, "train")
    model = load_ranker(settings, os.path.join(run_dir, "model"), len(data.features[0]))
    ranking = score_split(model, data)
    features = np.asarray(data.features, dtype=np.float64)
    feature = [features[np.asarray(indices), -1] for indices in data.initial_list]
    return ranking.scores, ranking.labels, feature


#: random re-rankings per list that estimate the simulator's expected pseudo clicks
PSEUDO_CLICK_SAMPLES = 32


def padded(lists: List[np.ndarray], width: int) -> Tuple[np.ndarray, np.ndarray]:
    """Lists of [n, ...] arrays -> ([B, width, ...] zero-padded, [B, width] mask)."""
    shape = (len(lists), width) + lists[0].shape[1:]
    values, mask = np.zeros(shape), np.zeros((len(lists), width), dtype=bool)
    for i, x in enumerate(lists):
        values[i, : len(x)], mask[i, : len(x)] = x, True
    return values, mask


def simulator_evidence(run_dir: str, data_dir: str, seed: int = 0) -> Dict[str, float]:
    """The trained simulator's expected pseudo clicks on random re-rankings of the training lists (the re-ranked
    term of MULTR's loss), per document: mean within-list correlation with the logging ranker's feature and with
    the label; NaN without a simulator checkpoint (DLA; MULTR with simulator_control=true_click_model)."""
    import torch

    from ultra_multr.experiments.evaluate import read_split
    from ultra_multr.imputation import expected_pseudo_clicks
    from ultra_multr.simulator import load_simulator

    found = [name for name in os.listdir(os.path.join(run_dir, "model")) if name.endswith(".simulator.ckpt")]
    if not found:
        return {"pseudo_click_feature_corr": float("nan"), "pseudo_click_label_corr": float("nan")}
    simulator, _ = load_simulator(os.path.join(run_dir, "model", found[0]))
    simulator.eval()
    data = read_split(data_dir, "train")
    features = np.asarray(data.features, dtype=np.float32)
    lists = [features[np.asarray(indices)] for indices in data.initial_list]
    values, mask = padded(lists, max(len(x) for x in lists))
    generator = torch.Generator().manual_seed(seed)
    _, randomized = expected_pseudo_clicks(simulator, torch.from_numpy(values).float(), torch.from_numpy(mask),
                                           PSEUDO_CLICK_SAMPLES, generator)
    clicks = [randomized[i, : len(x)].double().numpy() for i, x in enumerate(lists)]
    return {"pseudo_click_feature_corr": _mean_corr(clicks, [x[:, -1].astype(float) for x in lists]),
            "pseudo_click_label_corr": _mean_corr(clicks, [np.asarray(y, dtype=float) for y in data.labels])}


def curve_tail(scalars: Dict[str, List[Tuple[int, float]]], tag: str, tail: int = TAIL) -> float:
    points = sorted(scalars.get(tag, []))
    return float(np.mean([v for _, v in points[-tail:]])) if points else float("nan")


def run_evidence(run_dir: str, checkpoint_every: int = 100) -> Dict[str, object]:
    """One finished run's row of evidence.csv."""
    with open(os.path.join(run_dir, "run.json")) as handle:
        info = json.load(handle)
    method, label = split_name(info["method"])
    row: Dict[str, object] = {"method": method, "variant": label, "fold": info["fold"], "seed": info["seed"]}
    log_dir = os.path.join(run_dir, diagnostics.TRAIN_LOG)
    scalars = diagnostics.read_scalars(log_dir) if os.path.isdir(log_dir) else {}
    p1, p10 = dict(scalars.get("propensity/position_01", [])), dict(scalars.get("propensity/position_10", []))
    steps = sorted(s for s in p10 if s % checkpoint_every == 0 or s == max(p10))
    row["inverse_propensity_10"] = 1.0 / p10[max(p10)] if p10 else float("nan")
    row["inverse_propensity_10_by_step"] = " ".join("%d:%.2f" % (s, p1.get(s, 1.0) / p10[s]) for s in steps)
    row["exam_loss"] = curve_tail(scalars, "train/exam_loss")
    row["rank_loss"] = curve_tail(scalars, "train/rank_loss")
    scores, labels, feature = train_split_scores(run_dir, info["data_dir"])
    row.update(score_evidence(scores, labels, feature))
    row.update(simulator_evidence(run_dir, info["data_dir"], int(info["seed"])))
    with open(os.path.join(run_dir, SETTINGS_FILE)) as handle:
        click_model = click_model_json(json.load(handle))
    if click_model is not None and click_model.get("model_name") == "cascade_model":
        row["implied_inverse_propensity_10"] = float(
            implied_inverse_propensity(scores, cascade_click_rates(labels, click_model["click_prob"]))[-1])
    else:
        row["implied_inverse_propensity_10"] = float("nan")
    try:
        with open(os.path.join(run_dir, "metrics.json")) as handle:
            row["ndcg_10"] = float(json.load(handle)["ndcg_10"])
    except (OSError, KeyError, ValueError):
        row["ndcg_10"] = float("nan")
    return row


# -- tables --------------------------------------------------------------------------------------------------------
def curve_rows(runs: Sequence[diagnostics.RunDiagnostics]) -> List[Dict[str, object]]:
    """curves.csv's rows: per (method, variant) and position, 1/p mean and sd over runs (sd empty with one run)."""
    groups: Dict[Tuple[str, str], List[np.ndarray]] = defaultdict(list)
    for run in runs:
        if run.propensities is not None:
            groups[split_name(run.method)].append(1.0 / np.asarray(run.propensities, dtype=float))
    rows = []
    for (method, variant), curves in sorted(groups.items()):
        n = min(len(c) for c in curves)
        stacked = np.stack([c[:n] for c in curves])
        for i in range(n):
            column = stacked[:, i]
            rows.append({
                "method": method, "variant": variant, "runs": len(curves), "position": i + 1,
                "inverse_propensity_mean": "%.4f" % column.mean(),
                "inverse_propensity_sd": "%.4f" % column.std(ddof=1) if len(column) > 1 else "",
            })
    return rows


def _csv(rows: Sequence[Dict[str, object]], columns: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: ("%.4f" % row[c] if isinstance(row.get(c), float) else row.get(c, "")) for c in columns})
    return buffer.getvalue()


def curves_markdown(rows: Sequence[Dict[str, object]]) -> str:
    """One row per method/variant: 1/p at positions 2..N (mean, +- sd over runs where there are several)."""
    table: Dict[Tuple[str, str], Dict[int, str]] = defaultdict(dict)
    runs: Dict[Tuple[str, str], int] = {}
    for row in rows:
        key = (row["method"], row["variant"])
        sd = row["inverse_propensity_sd"]
        table[key][int(row["position"])] = "%.2f" % float(row["inverse_propensity_mean"]) + (
            " ± %.2f" % float(sd) if sd != "" else "")
        runs[key] = int(row["runs"])
    n = max((max(cells) for cells in table.values()), default=1)
    lines = ["1/p: DLA's learned inverse propensity per position relative to position 1, at the last step "
             "(mean ± sd over runs). Rows \"reference\" are computed from the training lists, not trained (data.md): "
             "the cascade click model's examination, and the 1/p DLA's examination loss targets when the ranker knows "
             "the true relevance.", "",
             "| method | variant | runs | " + " | ".join("1/p @%d" % i for i in range(2, n + 1)) + " |",
             "|---|---|---|" + "---|" * (n - 1)]
    for key, cells in sorted(table.items(), key=lambda item: (item[0][0] == REFERENCE, item[0])):
        lines.append("| %s | %s | %s | %s |" % (key[0], key[1], runs[key] or "-",
                                                 " | ".join(cells.get(i, "-") for i in range(2, n + 1))))
    return "\n".join(lines) + "\n"


def evidence_markdown(rows: Sequence[Dict[str, object]]) -> str:
    columns = [("method", "method"), ("variant", "variant"), ("fold", "set"), ("seed", "seed"),
               ("inverse_propensity_10", "1/p @10"), ("implied_inverse_propensity_10", "implied 1/p @10"),
               ("score_spread", "score sd in list"),
               ("score_position_corr", "corr(score, position)"),
               ("score_ranker_feature_corr", "corr(score, logging feature)"),
               ("score_label_corr", "corr(score, label)"),
               ("pseudo_click_feature_corr", "corr(re-ranked pseudo click, logging feature)"),
               ("pseudo_click_label_corr", "corr(re-ranked pseudo click, label)"),
               ("relevance_weight_10_median", "exp(s1 - s10) median"), ("relevance_weight_10_p90", "exp(s1 - s10) p90"),
               ("exam_loss", "exam loss"), ("rank_loss", "rank loss"), ("ndcg_10", "test nDCG@10")]
    lines = ["Per run, on the training lists in logged order, the final ranker (main.py's one checkpoint): "
             "score sd in list and correlations are means over lists; exp(s1 - s10) is the weight DLA's examination "
             "loss gives a click at position 10 (softmax p1 / p10 of the ranker's scores), over lists of 10; implied 1/p @10: "
             "where the examination loss would put 1/p @10 given these scores (p_k proportional to sum over lists of 10 "
             "of E[click at k] exp(s1 - sk), E[click] from the cascade click model and the true labels); re-ranked pseudo "
             "click: the trained simulator's expected click per document over %d random re-rankings of its list (the "
             "re-ranked term of MULTR's loss; '-' without a trained simulator); losses: "
             "mean of the last %d logged steps." % (PSEUDO_CLICK_SAMPLES, TAIL), "",
             "| " + " | ".join(title for _, title in columns) + " |", "|---" * len(columns) + "|"]
    for row in rows:
        cells = [("-" if isinstance(row[key], float) and np.isnan(row[key]) else "%.3f" % row[key])
                 if isinstance(row[key], float) else str(row[key]) for key, _ in columns]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "1/p @10 at checkpoint steps (step:1/p):", ""]
    lines += ["- %s %s %s seed %s: %s" % (r["method"], r["variant"], r["fold"], r["seed"],
                                          r["inverse_propensity_10_by_step"]) for r in rows]
    return "\n".join(lines) + "\n"


def reference_data(run_dirs: Sequence[str]):
    """(data evidence pooled over the runs' distinct training sets, data.md's section per set), or None where
    the runs' click model is not the cascade model these references assume."""
    sets = {}
    for run_dir in run_dirs:
        with open(os.path.join(run_dir, "run.json")) as handle:
            info = json.load(handle)
        with open(os.path.join(run_dir, SETTINGS_FILE)) as handle:
            model = click_model_json(json.load(handle))
        if model is None or model.get("model_name") != "cascade_model":
            return None
        sets.setdefault((info["fold"], info["data_dir"]), model["click_prob"])
    labels, feature, sections = [], [], []
    for (fold, data_dir), click_prob in sorted(sets.items()):
        y, f = train_lists(data_dir)
        labels += y
        feature += f
        evidence = dict(data_evidence(y, f, click_prob), random_order=random_order_click_corr(y, f, click_prob))
        sections.append(data_markdown(evidence, fold))
    if len(set(tuple(p) for p in sets.values())) != 1:
        return None
    return data_evidence(labels, feature, next(iter(sets.values()))), sections


def reference_rows(evidence: Dict[str, np.ndarray]) -> List[Dict[str, object]]:
    rows = []
    for variant in ("cascade_examination", "exact_relevance_ranker"):
        for k, value in enumerate(evidence[variant]):
            rows.append({"method": REFERENCE, "variant": variant, "runs": 0, "position": k + 1,
                         "inverse_propensity_mean": "%.4f" % value, "inverse_propensity_sd": ""})
    return rows


def write_figure(rows: Sequence[Dict[str, object]], path: str) -> None:
    """curves.png: 1/p against the position per method/variant (error bars: sd over runs), references dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ultra_multr.files import atomic_write_file

    curves: Dict[Tuple[str, str], List[Tuple[int, float, float]]] = defaultdict(list)
    for row in rows:
        sd = row["inverse_propensity_sd"]
        curves[(row["method"], row["variant"])].append(
            (int(row["position"]), float(row["inverse_propensity_mean"]), float(sd) if sd != "" else 0.0))
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for (method, variant), points in sorted(curves.items()):
        x, y, e = zip(*sorted(points))
        style = {"linestyle": "--", "color": "grey" if variant == "cascade_examination" else "black"} \
            if method == REFERENCE else {"marker": "o", "markersize": 3, "capsize": 2}
        axis.errorbar(x, y, yerr=None if method == REFERENCE else e, label="%s %s" % (method, variant), **style)
    axis.set_xlabel("position")
    axis.set_ylabel("1/p relative to position 1")
    axis.legend(fontsize=7)
    figure.tight_layout()
    try:
        atomic_write_file(path, lambda tmp: figure.savefig(tmp, dpi=100, format="png"))
    finally:
        plt.close(figure)


def pairs_markdown(runs_dir: str, n_permutations: int = 10000) -> str:
    """Every pair of the runs' labels: nDCG@10 difference over runs (same seed: mean [95 % interval] (sign-flip p))
    and over the test queries pooled over seeds with its paired two-sided Fisher randomisation p."""
    from ultra_multr.experiments.aggregate import as_host_counts, collect_runs, marked_label
    from ultra_multr.experiments.compare import over_runs_row, paired
    from ultra_multr.experiments.significance import randomization_test

    groups: Dict[str, list] = {}
    for record in collect_runs(runs_dir):
        groups.setdefault(record.info["label"], []).append(record)
    lines = ["Test nDCG@10, a minus b: over runs (paired by seed; 95 %% t-interval, sign-flip p), and over the test "
             "queries (each averaged over seeds) with its paired two-sided Fisher randomisation p, %d permutations."
             % n_permutations, "",
             "| a | b | runs | nDCG@10 a - b over runs | nDCG@10 a - b | p |", "|---|---|---|---|---|---|"]
    labels = sorted(groups)
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            x, y = paired(groups[a], groups[b], "ndcg_10")
            lines.append("| %s | %s | %d, %d | %s | %+.4f | %.4g |" % (
                marked_label(a, as_host_counts(groups[a]), len(groups[a])),
                marked_label(b, as_host_counts(groups[b]), len(groups[b])),
                len(groups[a]), len(groups[b]), over_runs_row(groups[a], groups[b], n_permutations)["ndcg_10"],
                float(np.mean(x - y)), randomization_test(x, y, n_permutations)))
    return "\n".join(lines) + "\n"


def write_tables(runs_dir: str, results_dir: str, evidence: bool = True, figure: bool = True) -> Dict[str, str]:
    """curves.csv / .md (and evidence.csv / .md, data.md) of the finished runs under ``runs_dir``, and with
    ``figure`` curves.png; returns name -> text of the text files."""
    runs = diagnostics.collect(runs_dir)
    if not runs:
        raise ValueError("no finished run (done.json) under %s" % runs_dir)
    rows = curve_rows(runs)
    texts = {}
    if evidence:
        data = reference_data(finished_run_dirs(runs_dir))
        if data is not None:
            pooled, sections = data
            rows += reference_rows(pooled)
            texts["data.md"] = "\n".join(sections)
    texts.update({"curves.csv": _csv(rows, CURVE_COLUMNS), "curves.md": curves_markdown(rows)})
    if evidence:
        texts["pairs.md"] = pairs_markdown(runs_dir)
        found = [run_evidence(run_dir) for run_dir in finished_run_dirs(runs_dir)]
        found.sort(key=lambda r: (r["method"], r["variant"], r["fold"], r["seed"]))
        texts["evidence.csv"] = _csv(found, EVIDENCE_COLUMNS)
        texts["evidence.md"] = evidence_markdown(found)
    for name, text in texts.items():
        atomic_write_text(os.path.join(results_dir, name), text)
    if figure:
        write_figure(rows, os.path.join(results_dir, "curves.png"))
    return texts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--datasets", type=int, nargs="+", default=[1], help="seeds of the generated sets")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--train-queries", type=int, default=500)
    parser.add_argument("--valid-queries", type=int, default=100)
    parser.add_argument("--test-queries", type=int, default=300)
    parser.add_argument("--features", type=int, default=46)
    parser.add_argument("--initial-noise", type=float, default=2.0)
    parser.add_argument("--signal", type=float, default=1.0)
    parser.add_argument("--docs-per-query", type=int, nargs=2, default=[6, 10])
    parser.add_argument("--steps", type=int, default=600, help="ranker updates")
    parser.add_argument("--simulator-steps", type=int, default=300)
    parser.add_argument("--click-model", default=CASCADE_4)
    parser.add_argument("--variant", nargs="+", action="append", metavar="METHOD LABEL [HPARAMS]",
                        help="a variant: registered method, label, learning_algorithm_hparams string (repeatable)")
    parser.add_argument("--threads", type=int, default=1, help="threads per run (the runner's --threads)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--dry-run", action="store_true", help="generate nothing, train nothing: list the runs")
    parser.add_argument("--tables-only", action="store_true", help="train nothing: the tables of the finished runs")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be >= 2")
    try:
        variants = [make_variant(*v) for v in args.variant] if args.variant else [
            make_variant(*v) for v in DEFAULT_VARIANTS]
    except (TypeError, ValueError) as error:
        parser.error("--variant: %s" % error)
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        parser.error("--variant: two variants share a method and label")
    out = os.path.abspath(args.out)
    data_root = os.path.join(out, "data")
    config = study_config(out, data_root, variants, args.datasets, args.seeds, args.steps, args.simulator_steps,
                          args.click_model)
    code = 0
    if not args.tables_only:
        if not args.dry_run:
            for k in args.datasets:
                write_recipe_dataset(os.path.join(data_root, "Fold%d" % k), headroom_recipe(k, args))
        config_path = os.path.join(out, "study.json")
        atomic_write_text(config_path, json.dumps(config, indent=2) + "\n")
        code = runner.main([config_path, "--workers", str(args.workers), "--threads", str(args.threads)]
                           + (["--dry-run"] if args.dry_run else []))
        if args.dry_run:
            return code
    texts = write_tables(os.path.join(out, "runs"), os.path.join(out, "results"))
    print(texts["curves.md"])
    print(texts.get("evidence.md", ""))
    return code


if __name__ == "__main__":
    sys.exit(main())
