"""Raw LETOR files -> ULTRA data directories, as the paper prepares its data.

The pipeline (section "Experimental setup" of the MULTR paper, and ULTRA's
offline pipeline it follows):

1. read the LETOR files (:mod:`.letor`);
2. optionally ``sign(x) * log1p(|x|)`` every feature (for heavy-tailed
   features such as Istella-S's);
3. min-max scale every feature to [-1, 1] with the minimum and maximum of the
   *training* split; valid/test values outside that range are clipped, and a
   feature constant on the training split becomes 0;
4. train the initial ranker, a linear Rank SVM, on a seeded sample of 1% of
   the training queries -- but at least ``svm_min_queries`` (20; the paper's
   1% of Yahoo is ~200 queries), capped at the queries that have a pair --
   with their labels (scikit-learn's ``LinearSVC`` in its primal form on at
   most 1,000 seeded within-query pairwise differences per query, so no
   SVMrank binary is needed and the fit takes seconds), score every document
   and order every query's list by that score.  The ranker's nDCG@10 on the
   training queries it did not train on is compared with a random ranking's;
   within 0.02 of it a warning says the initial ranking is near random;
5. optionally (``train_queries``) keep a seeded sample of that many training
   queries, drawn among those ULTRA's loader keeps, for small-data studies;
   the Rank SVM and the scaling still come from the whole training split, so
   the kept queries show the same lists as in the full data;
6. write ``settings.json``, ``{train,valid,test}/*`` and ``prepare_report.json``
   into a temporary sibling directory and rename it into place, so an
   interrupted run leaves no half-written data directory.

Queries whose documents are all irrelevant (or that have fewer than two
documents) are written unchanged: ULTRA's loader drops them
(``Raw_data.remove_invalid_data``).  They are counted per split in the report.

Command line (also installed as ``ultra-multr-prepare``)::

    python -m ultra_multr.data.prepare folds --partitions MQ2008/ --out out/mq2008 [--folds 1,2]
    python -m ultra_multr.data.prepare splits --train a.txt --valid b.txt --test c.txt --out out/data

Shared options: ``--log1p``, ``--svm-fraction 0.01``, ``--svm-min-queries 20``, ``--svm-c 200``, ``--seed 0``,
``--train-queries N``.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import secrets
import shutil
import sys
import time
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ultra_multr.config import require
from ultra_multr.data import checks
from ultra_multr.data.letor import LetorFile, LetorQuery, read_letor_files
from ultra_multr.data.ultra_format import RankedQuery, query_order, write_settings, write_split
from ultra_multr.files import atomic_write_text

logger = logging.getLogger(__name__)

PROG = "ultra-multr-prepare"
SPLITS = ("train", "valid", "test")
REPORT_FILE = "prepare_report.json"
N_PARTITIONS = 5
#: The Rank SVM trains on at least this many queries (fewer only if fewer have a pair).
DEFAULT_SVM_MIN_QUERIES = 20
#: Pairs drawn per query at most (seeded), so that long lists do not dominate nor slow the fit.
MAX_PAIRS_PER_QUERY = 1000
#: The initial ranker is "near random" when its held-out nDCG@10 is within this of a random ranking's.
NEAR_RANDOM_MARGIN = 0.02
#: Random permutations averaged for a random ranking's nDCG@10.
RANDOM_RANKINGS = 20


def fold_partitions(fold: int) -> Dict[str, List[int]]:
    """The standard LETOR 5-fold rotation of partitions S1..S5 (1-based).

    Fold k trains on S_k, S_k+1, S_k+2, validates on S_k+3 and tests on
    S_k+4 (cyclically): Fold1 is S1+S2+S3 / S4 / S5, Fold2 S2+S3+S4 / S5 / S1.
    """
    if not 1 <= fold <= N_PARTITIONS:
        raise ValueError("fold %d does not exist: folds are 1..%d" % (fold, N_PARTITIONS))
    parts = [(fold - 1 + k) % N_PARTITIONS + 1 for k in range(N_PARTITIONS)]
    return {"train": parts[:3], "valid": parts[3:4], "test": parts[4:5]}


def signed_log1p(features: np.ndarray) -> np.ndarray:
    """``sign(x) * log1p(|x|)``: compresses heavy tails, keeps sign and 0."""
    return np.sign(features) * np.log1p(np.abs(features))


@dataclass(frozen=True)
class MinMaxScaler:
    """Per-feature affine map of [low, high] onto [-1, 1].

    Attributes:
        low: [F] per-feature minimum on the training split.
        high: [F] per-feature maximum on the training split.
    """

    low: np.ndarray
    high: np.ndarray

    @classmethod
    def fit(cls, features: np.ndarray) -> "MinMaxScaler":
        """Fit on training features [N, F]."""
        return cls(low=features.min(axis=0), high=features.max(axis=0))

    def transform(self, features: np.ndarray) -> np.ndarray:
        """[n, F] -> [n, F] in [-1, 1]; features constant on training -> 0."""
        span = self.high - self.low
        varying = span > 0
        scaled = np.zeros_like(features, dtype=np.float64)
        scaled[:, varying] = 2.0 * (features[:, varying] - self.low[varying]) / span[varying] - 1.0
        return np.clip(scaled, -1.0, 1.0)


@dataclass(frozen=True)
class RankSvm:
    """A fitted linear Rank SVM.

    Attributes:
        weights: [F] the linear scoring function (no bias: it cancels in pairs).
        sampled_qids: the training queries it was fitted on.
        n_pairs: the number of document pairs it was fitted on.
    """

    weights: np.ndarray
    sampled_qids: List[str]
    n_pairs: int

    def score(self, features: np.ndarray) -> np.ndarray:
        """[n, F] -> [n] scores."""
        return features @ self.weights


def pairwise_examples(
    queries: Sequence[LetorQuery], max_pairs_per_query: int = 0, seed: int = 0
) -> Tuple[np.ndarray, np.ndarray]:
    """Rank SVM's pairwise transform: (differences [P, F], targets [P] in {-1, +1}).

    Each within-query pair with y_i > y_j gives x_i - x_j; with
    ``max_pairs_per_query`` > 0 a query contributes a seeded sample of at most
    that many of its pairs.  Every other difference is negated with target
    -1: a no-intercept linear SVM has the same loss on (d, +1) and (-d, -1),
    and LinearSVC needs both classes.
    """
    rng = np.random.default_rng(seed)
    differences = []
    for query in queries:
        better, worse = np.nonzero(query.labels[:, None] > query.labels[None, :])
        if 0 < max_pairs_per_query < len(better):
            keep = np.sort(rng.choice(len(better), size=max_pairs_per_query, replace=False))
            better, worse = better[keep], worse[keep]
        differences.append(query.features[better] - query.features[worse])
    diffs = np.concatenate(differences)
    targets = np.where(np.arange(len(diffs)) % 2 == 0, 1, -1)
    return diffs * targets[:, None], targets


def svm_sample_size(n_queries: int, n_eligible: int, fraction: float, min_queries: int) -> int:
    """Queries the Rank SVM trains on: ``max(floor(fraction * n_queries), min_queries)``, at most ``n_eligible``."""
    # The epsilon keeps e.g. 0.29 * 100 from flooring to 28.
    return min(n_eligible, max(1, min_queries, math.floor(fraction * n_queries + 1e-9)))


def train_rank_svm(
    queries: Sequence[LetorQuery], fraction: float, c: float, seed: int, min_queries: int = DEFAULT_SVM_MIN_QUERIES
) -> RankSvm:
    """Fit a linear Rank SVM on a seeded sample of the training queries.

    The sample holds :func:`svm_sample_size` queries, drawn among the queries
    with at least two different labels (the others give no pair, so drawing
    them would only shrink the sample); each gives at most
    :data:`MAX_PAIRS_PER_QUERY` seeded pairs.  ``c`` is on SVMrank's scale
    (ULTRA's pipeline uses ``svm_rank_learn -c 200``): SVMrank averages the
    summed pair losses over queries, LinearSVC sums them, hence LinearSVC's
    C = c / number of sampled queries.  The solver is liblinear's primal
    (``dual=False``, squared hinge loss): with P pairs >> F features it
    converges in seconds, where the dual hinge solver took minutes and did
    not converge on ~30k pairs with a large C.
    """
    from sklearn.svm import LinearSVC

    eligible = [q for q in queries if len(np.unique(q.labels)) > 1]
    if not eligible:
        raise ValueError("no training query has two different labels, so a Rank SVM has no pair to learn from")
    n_sample = svm_sample_size(len(queries), len(eligible), fraction, min_queries)
    rng = np.random.default_rng(seed)
    sample = [eligible[i] for i in sorted(rng.choice(len(eligible), size=n_sample, replace=False))]
    diffs, targets = pairwise_examples(sample, MAX_PAIRS_PER_QUERY, seed)
    model = LinearSVC(
        C=c / n_sample, loss="squared_hinge", dual=False, fit_intercept=False, tol=1e-4, max_iter=10000,
        random_state=seed,
    )
    model.fit(diffs, targets)
    return RankSvm(weights=model.coef_[0].copy(), sampled_qids=[q.qid for q in sample], n_pairs=len(diffs))


def heldout_quality(svm: RankSvm, queries: Sequence[LetorQuery], seed: int) -> Dict[str, float]:
    """Mean nDCG@10 of the Rank SVM and of random rankings on the queries it did not train on.

    Only queries with two different labels count (on the others every
    ranking scores the same).  Empty dict when there is no such query.
    """
    from ultra_multr.metrics import ndcg_at_k

    trained = set(svm.sampled_qids)
    heldout = [q for q in queries if q.qid not in trained and len(np.unique(q.labels)) > 1]
    if not heldout:
        return {}
    rng = np.random.default_rng(seed)
    svm_ndcg = np.mean([ndcg_at_k(q.labels, svm.score(q.features), 10) for q in heldout])
    random_ndcg = np.mean(
        [np.mean([ndcg_at_k(q.labels, rng.random(len(q.labels)), 10) for _ in range(RANDOM_RANKINGS)]) for q in heldout]
    )
    return {"queries": len(heldout), "ndcg_10": float(svm_ndcg), "random_ndcg_10": float(random_ndcg)}


def near_random_warning(quality: Dict[str, float]) -> str:
    """A warning when the held-out nDCG@10 is within :data:`NEAR_RANDOM_MARGIN` of random ('' otherwise)."""
    if not quality or quality["ndcg_10"] - quality["random_ndcg_10"] > NEAR_RANDOM_MARGIN:
        return ""
    return (
        "the initial ranking is near random: Rank SVM nDCG@10 %.3f vs random %.3f on %d held-out training queries "
        "(raise --svm-fraction or --svm-min-queries)" % (quality["ndcg_10"], quality["random_ndcg_10"], quality["queries"])
    )


@dataclass(frozen=True)
class PrepareOptions:
    """Options of the preparation (the command line's shared flags)."""

    log1p: bool = False
    svm_fraction: float = 0.01
    svm_min_queries: int = DEFAULT_SVM_MIN_QUERIES
    svm_c: float = 200.0
    seed: int = 0
    #: keep this many training queries (None: all of them)
    train_queries: Optional[int] = None

    def __post_init__(self):
        require(
            self.train_queries is None or self.train_queries >= 1,
            "train_queries must be a positive number of queries, got %r" % self.train_queries,
        )
        require(0.0 < self.svm_fraction <= 1.0, "svm_fraction must be in (0, 1], got %r" % self.svm_fraction)
        require(self.svm_min_queries >= 1, "svm_min_queries must be >= 1, got %r" % self.svm_min_queries)
        require(self.svm_c > 0.0, "svm_c must be positive, got %r" % self.svm_c)


def made_with(report: dict, options: PrepareOptions) -> bool:
    """Whether a ``prepare_report.json`` was written with these options (and this Rank SVM recipe)."""
    svm = report.get("rank_svm", {})
    same_subset = report.get("train_queries") == options.train_queries
    return same_subset and report.get("log1p") == options.log1p and (
        svm.get("fraction"), svm.get("min_queries"), svm.get("max_pairs_per_query"), svm.get("c"), svm.get("seed")
    ) == (options.svm_fraction, options.svm_min_queries, MAX_PAIRS_PER_QUERY, options.svm_c, options.seed)


@dataclass
class PreparedData:
    """Everything a ULTRA data directory holds.

    Attributes:
        ranked: split name -> queries in the Rank SVM's order.
        feature_size: F.
        max_label: the dataset's largest label.
        report: the JSON-serialisable ``prepare_report.json`` content.
    """

    ranked: Dict[str, List[RankedQuery]]
    feature_size: int
    max_label: int
    report: dict


def kept_by_ultra(query: LetorQuery) -> bool:
    """Whether ULTRA's loader keeps the query (``remove_invalid_data``): two documents and a relevant one."""
    return len(query.labels) >= 2 and query.labels.max() > 0


def split_counts(queries: Sequence[LetorQuery]) -> Dict[str, int]:
    """Queries, documents, and the queries ULTRA's loader will drop.

    ULTRA (``remove_invalid_data``) drops a list with fewer than two
    documents or without any relevant one.
    """
    return {
        "queries": len(queries),
        "documents": int(sum(len(q.labels) for q in queries)),
        "no_relevant": int(sum(q.labels.max() <= 0 for q in queries)),
        "fewer_than_2_documents": int(sum(len(q.labels) < 2 for q in queries)),
        "dropped_by_ultra": int(sum(not kept_by_ultra(q) for q in queries)),
    }


def _split_queries(files: Sequence[LetorFile], split: str) -> List[LetorQuery]:
    queries: List[LetorQuery] = []
    source: Dict[str, str] = {}
    for letor_file in files:
        for query in letor_file.queries:
            if query.qid in source:
                raise ValueError(
                    "qid %s of the %s split is in both %s and %s" % (query.qid, split, source[query.qid], letor_file.path)
                )
            source[query.qid] = letor_file.path
            queries.append(query)
    return queries


def sample_train_queries(queries: Sequence[LetorQuery], n: int, seed: int) -> List[LetorQuery]:
    """A seeded sample of ``n`` of the queries ULTRA keeps, in their original order.

    The draw uses its own stream (``[seed, 1]``), so it does not move the
    Rank SVM's sample.  Fewer than ``n`` such queries is an error.
    """
    eligible = [q for q in queries if kept_by_ultra(q)]
    if n > len(eligible):
        raise ValueError(
            "train_queries=%d, but the training split has only %d queries that ULTRA keeps" % (n, len(eligible))
        )
    picked = np.random.default_rng([seed, 1]).choice(len(eligible), size=n, replace=False)
    return [eligible[i] for i in sorted(picked)]


def _rank(query: LetorQuery, svm: RankSvm) -> RankedQuery:
    scores = svm.score(query.features)
    order = query_order(scores)
    return RankedQuery(
        qid=query.qid,
        doc_ids=[query.doc_ids[i] for i in order],
        features=query.features[order],
        labels=query.labels[order].astype(np.float64),
        initial_scores=scores[order],
    )


def prepare_dataset(split_files: Dict[str, Sequence[LetorFile]], options: PrepareOptions) -> PreparedData:
    """Normalise, fit the Rank SVM on the training split, rank every split.

    Args:
        split_files: 'train', 'valid', 'test' -> the LETOR files of that split
            (read together by :func:`read_letor_files`, so one feature size).
        options: the preparation options.
    """
    all_files = [f for split in SPLITS for f in split_files[split]]
    feature_size = all_files[0].feature_size
    splits = {split: _split_queries(split_files[split], split) for split in SPLITS}
    preprocess: Callable[[np.ndarray], np.ndarray] = signed_log1p if options.log1p else np.asarray
    scaler = MinMaxScaler.fit(np.concatenate([preprocess(q.features) for q in splits["train"]]))
    normalised = {
        split: [replace(q, features=scaler.transform(preprocess(q.features))) for q in queries]
        for split, queries in splits.items()
    }
    fit_start = time.time()
    svm = train_rank_svm(normalised["train"], options.svm_fraction, options.svm_c, options.seed, options.svm_min_queries)
    fit_seconds = time.time() - fit_start
    logger.info("Rank SVM fitted on %d queries, %d pairs in %.1f s", len(svm.sampled_qids), svm.n_pairs, fit_seconds)
    quality = heldout_quality(svm, normalised["train"], options.seed)
    warning = near_random_warning(quality)
    if warning:
        logger.warning(warning)
    max_label = max(f.max_label for f in all_files)
    if options.train_queries is not None:
        normalised["train"] = sample_train_queries(normalised["train"], options.train_queries, options.seed)
    report = {
        "feature_size": feature_size,
        "max_label": max_label,
        "sources": {split: [os.path.abspath(f.path) for f in split_files[split]] for split in SPLITS},
        "log1p": options.log1p,
        "train_queries": options.train_queries,
        "normalisation": {"train_min": scaler.low.tolist(), "train_max": scaler.high.tolist()},
        "rank_svm": {
            "fraction": options.svm_fraction,
            "min_queries": options.svm_min_queries,
            "max_pairs_per_query": MAX_PAIRS_PER_QUERY,
            "c": options.svm_c,
            "seed": options.seed,
            "training_queries": len(splits["train"]),
            "sampled_qids": svm.sampled_qids,
            "pairs": svm.n_pairs,
            "weights": svm.weights.tolist(),
            "fit_seconds": round(fit_seconds, 3),
            "heldout_training_queries": quality,
            "warning": warning,
        },
        "splits": {split: split_counts(queries) for split, queries in normalised.items()},
    }
    ranked = {split: [_rank(q, svm) for q in queries] for split, queries in normalised.items()}
    return PreparedData(ranked=ranked, feature_size=feature_size, max_label=max_label, report=report)


def _replace_directory(target: str, build: Callable[[str], None]) -> None:
    """Run ``build(tmp)`` on a fresh sibling directory, then rename it to ``target``.

    An existing ``target`` is replaced only if an earlier run wrote it (it
    holds ``prepare_report.json``): anything else there is not ours to delete.
    """
    target = os.path.abspath(target)
    if os.path.exists(target) and not os.path.isfile(os.path.join(target, REPORT_FILE)):
        raise ValueError(
            "%s exists and is not a data directory written by %s (no %s); remove it or choose another --out"
            % (target, PROG, REPORT_FILE)
        )
    parent, name = os.path.split(target)
    os.makedirs(parent, exist_ok=True)
    # os.mkdir rather than tempfile.mkdtemp: mkdtemp's mode 0700 would stay on the result.
    tmp = os.path.join(parent, ".%s.tmp-%d-%s" % (name, os.getpid(), secrets.token_hex(4)))
    os.mkdir(tmp)
    try:
        build(tmp)
        if os.path.exists(target):
            old = tmp + ".old"
            os.rename(target, old)
            try:
                os.rename(tmp, target)
            except BaseException:
                os.rename(old, target)
                raise
            shutil.rmtree(old)
        else:
            os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_data_dir(directory: str, prepared: PreparedData) -> None:
    """Write a complete ULTRA data directory (with ``prepare_report.json``) atomically."""

    def build(tmp: str) -> None:
        for split in SPLITS:
            write_split(tmp, split, prepared.ranked[split])
        write_settings(tmp, prepared.feature_size, prepared.max_label)
        atomic_write_text(os.path.join(tmp, REPORT_FILE), json.dumps(prepared.report, indent=1) + "\n")
        checks.check_data_dir(tmp, SPLITS)

    _replace_directory(directory, build)


def prepare_folds(
    partitions_dir: str, out_dir: str, folds: Sequence[int] = (1, 2, 3, 4, 5), options: PrepareOptions = PrepareOptions()
) -> Dict[str, dict]:
    """Write ``out_dir/Fold<k>`` for each requested fold; returns name -> report.

    ``partitions_dir`` holds ``S1.txt`` .. ``S5.txt``.  All five are read
    first (every fold uses all of them), so a malformed partition fails the
    run before any fold is written.
    """
    for fold in folds:
        fold_partitions(fold)  # rejects a bad fold number before the slow reading
    paths = [os.path.join(partitions_dir, "S%d.txt" % k) for k in range(1, N_PARTITIONS + 1)]
    missing = [os.path.basename(p) for p in paths if not os.path.isfile(p)]
    if missing:
        raise ValueError("%s: partition file(s) %s missing (expected S1.txt..S5.txt)" % (partitions_dir, ", ".join(missing)))
    for path in paths:
        checks.check_ends_in_newline(path)
    partitions = read_letor_files(paths)
    reports = {}
    for fold in folds:
        name = "Fold%d" % fold
        split_files = {split: [partitions[k - 1] for k in parts] for split, parts in fold_partitions(fold).items()}
        prepared = prepare_dataset(split_files, options)
        write_data_dir(os.path.join(out_dir, name), prepared)
        reports[name] = prepared.report
    return reports


def prepare_split_files(
    train: str, valid: str, test: str, out_dir: str, options: PrepareOptions = PrepareOptions()
) -> dict:
    """Write one ULTRA data directory from a dataset shipped as train/valid/test files."""
    for path in (train, valid, test):
        checks.check_ends_in_newline(path)
    train_file, valid_file, test_file = read_letor_files([train, valid, test])
    prepared = prepare_dataset({"train": [train_file], "valid": [valid_file], "test": [test_file]}, options)
    write_data_dir(out_dir, prepared)
    return prepared.report


def format_report(name: str, directory: str, report: dict) -> str:
    """The human-readable summary the command prints for one data directory."""
    svm = report["rank_svm"]
    lines = [
        "%s -> %s" % (name, directory),
        "  %d features, max label %d; Rank SVM on %d of %d training queries (%d pairs)"
        % (report["feature_size"], report["max_label"], len(svm["sampled_qids"]), svm["training_queries"], svm["pairs"]),
    ]
    quality = svm.get("heldout_training_queries")
    if quality:
        lines.append(
            "  Rank SVM nDCG@10 on %d held-out training queries: %.3f (random ranking: %.3f)"
            % (quality["queries"], quality["ndcg_10"], quality["random_ndcg_10"])
        )
    if svm.get("warning"):
        lines.append("  WARNING: " + svm["warning"])
    lines.append("  %-6s %8s %10s %12s %17s" % ("split", "queries", "documents", "no relevant", "dropped by ULTRA"))
    for split in SPLITS:
        counts = report["splits"][split]
        lines.append(
            "  %-6s %8d %10d %12d %17d"
            % (split, counts["queries"], counts["documents"], counts["no_relevant"], counts["dropped_by_ultra"])
        )
    return "\n".join(lines)


class _UsageError(Exception):
    pass


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        # One line and exit code 2 through main's return value instead of SystemExit.
        raise _UsageError(message)


def _fold_list(text: str) -> List[int]:
    try:
        folds = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a comma-separated list of fold numbers" % text) from None
    bad = [f for f in folds if not 1 <= f <= N_PARTITIONS]
    if bad or len(set(folds)) != len(folds):
        raise argparse.ArgumentTypeError("%r: folds are distinct numbers in 1..%d" % (text, N_PARTITIONS))
    return folds


def _build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog=PROG, description="Raw LETOR files -> ULTRA data directories (see module docstring).")
    modes = parser.add_subparsers(dest="mode", required=True)
    folds = modes.add_parser("folds", help="a dataset distributed as partitions S1..S5 (5-fold rotation)")
    folds.add_argument("--partitions", required=True, help="directory holding S1.txt .. S5.txt")
    folds.add_argument("--folds", type=_fold_list, default=[1, 2, 3, 4, 5], help="e.g. 1,2 (default: all five)")
    splits = modes.add_parser("splits", help="a dataset shipped as train / valid / test files")
    splits.add_argument("--train", required=True)
    splits.add_argument("--valid", required=True)
    splits.add_argument("--test", required=True)
    for mode in (folds, splits):
        mode.add_argument("--out", required=True, help="output directory (folds mode: parent of Fold<k>/)")
        mode.add_argument("--log1p", action="store_true", help="sign(x)*log1p(|x|) before min-max scaling")
        mode.add_argument("--svm-fraction", type=float, default=0.01, help="share of training queries for the Rank SVM")
        mode.add_argument(
            "--svm-min-queries", type=int, default=DEFAULT_SVM_MIN_QUERIES,
            help="the Rank SVM trains on at least this many queries (default %d)" % DEFAULT_SVM_MIN_QUERIES,
        )
        mode.add_argument("--svm-c", type=float, default=200.0, help="Rank SVM C on SVMrank's scale (default 200)")
        mode.add_argument("--seed", type=int, default=0, help="seed of the Rank SVM's query sample and solver")
        mode.add_argument(
            "--train-queries", type=int, default=None,
            help="keep a seeded sample of this many training queries (among those ULTRA keeps; default: all)",
        )
    return parser


def main(argv: Sequence[str] = None) -> int:
    """Command-line entry point; returns the exit code (2 on bad input)."""
    start = time.time()
    try:
        args = _build_parser().parse_args(argv)
        options = PrepareOptions(
            log1p=args.log1p, svm_fraction=args.svm_fraction, svm_min_queries=args.svm_min_queries,
            svm_c=args.svm_c, seed=args.seed, train_queries=args.train_queries,
        )
        if args.mode == "folds":
            reports = prepare_folds(args.partitions, args.out, args.folds, options)
            outputs = [(name, os.path.join(args.out, name), report) for name, report in reports.items()]
        else:
            report = prepare_split_files(args.train, args.valid, args.test, args.out, options)
            outputs = [("data", args.out, report)]
    except (_UsageError, ValueError, OSError) as error:
        print("%s: error: %s" % (PROG, error), file=sys.stderr)
        return 2
    for name, directory, report in outputs:
        print(format_report(name, directory, report))
    print("done in %.1f s" % (time.time() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
