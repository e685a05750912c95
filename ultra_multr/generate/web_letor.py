"""Generated data with the marks of real web LETOR features, prepared in ULTRA's recipe.

The features of :mod:`.ultra_recipe` are independent standard normals; those
of the web sets (Yahoo, MSLR-WEB, Istella) are not, and a check calibrated on
Gaussian features can misjudge them (issue 38: the logger guard).  Here a
document has ``features`` (300-700) features that are:

* in **groups of correlated features** (4-16 each: one signal measured several
  ways, as BM25 of the body, the title and the anchors): feature f of group g
  is ``exp(mu_f + sigma_f * (l_f * a_g + sqrt(1 - l_f^2) * e_f) + s_qg)`` with
  the document's group factor a_g ~ N(0, 1), a loading l_f in [0.5, 0.95] and
  its own noise e_f ~ N(0, 1);
* **heavy-tailed**: log-normal, with scales sigma_f in [0.3, 2.0] and
  locations mu_f in [-2, 4] that differ by feature;
* **zero about half the time** (``zero_share``): a group is missing from a
  document (no anchor text) with a probability drawn per group, and a feature of
  a present group with a probability drawn per feature;
* **shifted per query**: s_qg ~ N(0, ``query_shift``) per query and group (a
  long query has larger term scores on every document).

Relevance: ``z = (b . a[:relevant_groups]) / |b| + nonlinear * (a_0 * a_1) +
label_noise * e`` (b drawn once; e ~ N(0, 1): relevance no feature carries),
cut into grades 0-4 at :data:`~.ultra_recipe.GRADE_QUANTILES` of its
distribution.  Lists hold ``docs_per_query`` documents (at most 10: every
document is shown in training).

The data are prepared as real LETOR data are
(:func:`ultra_multr.data.prepare.prepare_dataset`: min-max scaling on the
training split, the Rank SVM of ULTRA's recipe on a seeded 1 % of the labelled
training queries, at least 20), and the lists are in the order of the logging
ranker ``logger``:

* ``"rank_svm"``: that Rank SVM's order, a function of the features the
  learner sees (the paper's setting);
* ``"labels"``: every list ordered by its labels + N(0, ``logger_noise``)
  (ties in file order): a logger that knows relevance the features lack (the
  stress case).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Dict, List, Tuple

import numpy as np

from ultra_multr.config import require
from ultra_multr.data.letor import LetorFile, LetorQuery
from ultra_multr.data.prepare import SPLITS, PrepareOptions, PreparedData, prepare_dataset, write_data_dir
from ultra_multr.data.ultra_format import RankedQuery, query_order
from ultra_multr.generate.ultra_recipe import check_sizes, quantile_thresholds

#: The logging rankers: the Rank SVM of ULTRA's recipe (features only), or the labels plus noise.
WEB_LOGGERS = ("rank_svm", "labels")
#: Sizes of the groups of correlated features (inclusive).
GROUP_SIZES = (4, 16)
MAX_LABEL = 4


@dataclass(frozen=True)
class WebLetor:
    """What a generated web-LETOR-like data set is made of (see the module docstring).

    Attributes:
        train_queries, valid_queries, test_queries: queries per split.
        features: F (at least 32; 300-700 in studies/logger_guard).
        docs_per_query: inclusive range of list lengths (at most 10).
        zero_share: the mean share of a document's features that are 0.
        query_shift: std of the per-query, per-group shift of the features' logarithms.
        relevant_groups: the groups whose factors make relevance.
        nonlinear: weight of a_0 * a_1 in the relevance (a linear ranker cannot rank by it).
        label_noise: std of the relevance no feature carries (the features' part has std 1).
        logger: one of :data:`WEB_LOGGERS`.
        logger_noise: std of the noise the ``"labels"`` logger adds to the labels.
        seed: the data's seed (the feature structure, the documents, the Rank SVM's sample, the labels logger's noise).
    """

    train_queries: int = 150
    valid_queries: int = 50
    test_queries: int = 100
    features: int = 500
    docs_per_query: Tuple[int, int] = (6, 10)
    zero_share: float = 0.5
    query_shift: float = 0.5
    relevant_groups: int = 8
    nonlinear: float = 0.5
    label_noise: float = 0.5
    logger: str = "rank_svm"
    logger_noise: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        check_sizes(self)
        require(self.features >= 2 * GROUP_SIZES[1], "features must be >= %d, got %r" % (2 * GROUP_SIZES[1], self.features))
        require(0.0 <= self.zero_share < 1.0, "zero_share must be in [0, 1), got %r" % self.zero_share)
        require(min(self.query_shift, self.nonlinear, self.label_noise, self.logger_noise) >= 0,
                "query_shift, nonlinear, label_noise and logger_noise must be >= 0")
        require(self.logger in WEB_LOGGERS, "logger must be one of %s, got %r" % (WEB_LOGGERS, self.logger))


@dataclass(frozen=True)
class Structure:
    """The features' structure, drawn once per seed and shared by the splits.

    Attributes:
        group: [F] int64 each feature's group.
        mu, sigma, loading: [F] float64 each feature's log-normal location, scale and loading on its group factor.
        group_presence: [G] float64 probability that a group is present in a document.
        feature_presence: [F] float64 probability that a feature of a present group is non-zero.
        relevance_weights: [relevant_groups] float64 unit weights of the relevant groups' factors.
    """

    group: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray
    loading: np.ndarray
    group_presence: np.ndarray
    feature_presence: np.ndarray
    relevance_weights: np.ndarray

    @property
    def n_groups(self) -> int:
        return len(self.group_presence)


def draw_structure(spec: WebLetor) -> Structure:
    """The feature groups, scales, loadings and presence probabilities of ``spec``'s seed."""
    rng = np.random.default_rng(np.random.SeedSequence([spec.seed, 1]))
    sizes: List[int] = []
    while sum(sizes) < spec.features:
        sizes.append(int(rng.integers(GROUP_SIZES[0], GROUP_SIZES[1] + 1)))
    sizes[-1] -= sum(sizes) - spec.features
    if sizes[-1] < GROUP_SIZES[0]:  # too small a remainder joins the group before it
        sizes[-2] += sizes.pop()
    group = np.repeat(np.arange(len(sizes)), sizes)
    # presence = group presence * feature presence, with a mean of 1 - zero_share
    present = 1.0 - spec.zero_share
    group_presence = np.clip(rng.uniform(present ** 0.5 - 0.2, present ** 0.5 + 0.2, size=len(sizes)), 0.05, 1.0)
    feature_presence = np.clip(rng.uniform(present ** 0.5 - 0.2, present ** 0.5 + 0.2, size=spec.features), 0.05, 1.0)
    weights = rng.normal(size=min(spec.relevant_groups, len(sizes)))
    return Structure(
        group=group, mu=rng.uniform(-2.0, 4.0, size=spec.features), sigma=rng.uniform(0.3, 2.0, size=spec.features),
        loading=rng.uniform(0.5, 0.95, size=spec.features), group_presence=group_presence,
        feature_presence=feature_presence, relevance_weights=weights / np.linalg.norm(weights),
    )


def latent_relevance(factors: np.ndarray, noise: np.ndarray, spec: WebLetor, structure: Structure) -> np.ndarray:
    """z [n] of documents' group factors [n, G] and standard normal noise [n]."""
    k = len(structure.relevance_weights)
    return (factors[:, :k] @ structure.relevance_weights + spec.nonlinear * factors[:, 0] * factors[:, 1]
            + spec.label_noise * noise)


def grade_thresholds(spec: WebLetor, structure: Structure) -> np.ndarray:
    """[4] the latent relevance at which grades 1-4 start (:data:`~.ultra_recipe.GRADE_QUANTILES` of its
    distribution)."""
    return quantile_thresholds(spec.seed, lambda rng, n: latent_relevance(
        rng.normal(size=(n, structure.n_groups)), rng.normal(size=n), spec, structure))


def draw_split(spec: WebLetor, structure: Structure, split: str) -> LetorFile:
    """The queries of ``split`` (features [n, F] float64, grades 0-4), in draw order, as a LETOR file would hold
    them (its ``path`` names the generator)."""
    rng = np.random.default_rng(np.random.SeedSequence([spec.seed, 3 + SPLITS.index(split)]))
    thresholds = grade_thresholds(spec, structure)
    spread = np.sqrt(1.0 - structure.loading ** 2)
    queries = []
    for q in range(getattr(spec, "%s_queries" % split)):
        n_docs = int(rng.integers(spec.docs_per_query[0], spec.docs_per_query[1] + 1))
        factors = rng.normal(size=(n_docs, structure.n_groups))
        shift = rng.normal(scale=spec.query_shift, size=structure.n_groups)
        logs = (structure.mu + structure.sigma * (structure.loading * factors[:, structure.group]
                                                  + spread * rng.normal(size=(n_docs, spec.features)))
                + shift[structure.group])
        present = ((rng.random((n_docs, structure.n_groups)) < structure.group_presence)[:, structure.group]
                   & (rng.random((n_docs, spec.features)) < structure.feature_presence))
        labels = np.searchsorted(thresholds, latent_relevance(factors, rng.normal(size=n_docs), spec, structure))
        qid = "%s%d" % (split, q)
        queries.append(LetorQuery(qid=qid, doc_ids=["%s_d%d" % (qid, i) for i in range(n_docs)],
                                  features=np.where(present, np.exp(logs), 0.0), labels=labels.astype(np.int64)))
    return LetorFile(path="<generated web_letor %s>" % split, queries=queries, feature_size=spec.features,
                     max_label=MAX_LABEL)


def _by_labels(query: RankedQuery, noise: np.ndarray) -> RankedQuery:
    """``query`` ordered by its labels + ``noise`` [n] (stable for ties)."""
    scores = query.labels + noise
    order = query_order(scores)
    return RankedQuery(qid=query.qid, doc_ids=[query.doc_ids[i] for i in order], features=query.features[order],
                       labels=query.labels[order], initial_scores=scores[order])


def prepare_web_letor(spec: WebLetor) -> PreparedData:
    """Draw the data and prepare them in ULTRA's recipe (in memory), the lists in the order of ``spec.logger``;
    the report records ``spec`` under ``web_letor``."""
    structure = draw_structure(spec)
    prepared = prepare_dataset({split: [draw_split(spec, structure, split)] for split in SPLITS},
                               PrepareOptions(seed=spec.seed))
    if spec.logger == "labels":
        rng = np.random.default_rng(np.random.SeedSequence([spec.seed, 6]))
        prepared = replace(prepared, ranked={split: [_by_labels(q, rng.normal(scale=spec.logger_noise, size=len(q.labels)))
                                                     for q in queries] for split, queries in prepared.ranked.items()})
    prepared.report["web_letor"] = json.loads(json.dumps(asdict(spec)))
    return prepared


def write_web_letor_dataset(directory: str, spec: WebLetor) -> dict:
    """Draw, prepare and write (atomically) the ULTRA data directory of ``spec``; returns its prepare report."""
    prepared = prepare_web_letor(spec)
    write_data_dir(directory, prepared)
    return prepared.report


__all__ = ["WEB_LOGGERS", "Structure", "WebLetor", "draw_split", "draw_structure", "grade_thresholds",
           "latent_relevance", "prepare_web_letor", "write_web_letor_dataset"]
