"""Generated data in ULTRA's recipe: the logging ranker knows only the features the learner sees.

The MULTR paper's setting (and ULTRA's offline pipeline) logs clicks on the
lists of a Rank SVM trained on 1 % of the labelled training queries, on the
same features the learner sees.  A document's logged position is then a
function of its observed features: it carries no relevance the features do
not.  (The generator of :mod:`.ultra_dataset` orders each list by the true label
plus noise, a logger that knows more than the features: the stress case.)

Here the data are drawn, written as LETOR files and then prepared exactly as
real LETOR data are (:func:`ultra_multr.data.prepare.prepare_split_files`:
min-max scaling on the training split, the Rank SVM fitted on a seeded 1 %
of the training queries, at least 20, every list ordered by its score):

* features: F independent standard normals per document;
* latent relevance: ``z = x . u + nonlinear * ((x . v)^2 - 1) + label_noise * e``
  with unit directions u, v and e ~ N(0, 1): the linear part a linear logger
  can learn, a quadratic part it cannot (a neural ranker can), and relevance
  that no feature carries;
* graded labels 0-4: z cut at fixed quantiles of its distribution
  (``GRADE_QUANTILES``: half the documents 0, about 4 % graded 4);
* lists of ``docs_per_query`` documents (at most 10: every document is shown
  in training, as in evaluation).

The LETOR files stay beside the data directory (``<directory>.letor/``, the
sources ``prepare_report.json`` names).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Iterator, Tuple

import numpy as np

from ultra_multr.config import require
from ultra_multr.data.prepare import PrepareOptions, prepare_split_files
from ultra_multr.data.ultra_format import RankedQuery, write_libsvm_split
from ultra_multr.files import atomic_write_text

#: Quantiles of the latent relevance at which grades 1, 2, 3 and 4 start.
GRADE_QUANTILES = (0.5, 0.75, 0.9, 0.96)
#: Documents drawn (from the recipe's own stream) to place the grade thresholds.
THRESHOLD_SAMPLE = 200_000
SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class Recipe:
    """What a generated data set in ULTRA's recipe is made of.

    Attributes:
        train_queries, valid_queries, test_queries: queries per split.
        features: F.
        docs_per_query: inclusive range of list lengths (at most 10).
        nonlinear: weight of the quadratic relevance a linear logger cannot rank by.
        label_noise: std of the relevance no feature carries (the linear part has std 1).
        seed: the data's seed (directions, documents, the Rank SVM's sample).
    """

    train_queries: int = 1000
    valid_queries: int = 100
    test_queries: int = 1000
    features: int = 20
    docs_per_query: Tuple[int, int] = (6, 10)
    nonlinear: float = 0.0
    label_noise: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        check_sizes(self)
        require(self.features >= 2, "features must be >= 2, got %r" % self.features)
        require(self.nonlinear >= 0 and self.label_noise >= 0, "nonlinear and label_noise must be >= 0")


def check_sizes(spec: Any) -> None:
    """What every generated set's description checks: a query in each split (``train_queries``,
    ``valid_queries``, ``test_queries``) and ``docs_per_query`` an inclusive range of list lengths within 2..10
    (every document is shown in training), kept as a tuple of ints.

    Raises:
        ValueError: naming the knob.
    """
    object.__setattr__(spec, "docs_per_query", tuple(int(v) for v in spec.docs_per_query))
    low, high = spec.docs_per_query
    require(2 <= low <= high <= 10, "docs_per_query must be 2 <= low <= high <= 10, got %r" % (spec.docs_per_query,))
    require(min(spec.train_queries, spec.valid_queries, spec.test_queries) >= 1, "every split needs a query")


#: The recipes studies/paper_setting screens (at most eight): the quadratic relevance a linear logger cannot rank by, the relevance no
#: feature carries, the number of features and of training queries.
SCREENED_RECIPES: Dict[str, Recipe] = {
    "linear": Recipe(nonlinear=0.0, label_noise=0.5),
    "linear_noisy": Recipe(nonlinear=0.0, label_noise=1.0),
    "quadratic_0.5": Recipe(nonlinear=0.5, label_noise=0.5),
    "quadratic_1": Recipe(nonlinear=1.0, label_noise=0.5),
    "quadratic_1_noisy": Recipe(nonlinear=1.0, label_noise=1.0),
    "quadratic_2": Recipe(nonlinear=2.0, label_noise=0.5),
    "quadratic_1_f46": Recipe(nonlinear=1.0, label_noise=0.5, features=46),
    "quadratic_1_3000q": Recipe(nonlinear=1.0, label_noise=0.5, train_queries=3000),
}


def _directions(recipe: Recipe) -> Tuple[np.ndarray, np.ndarray]:
    """(u, v): unit [F] directions of the linear and the quadratic relevance."""
    rng = np.random.default_rng(np.random.SeedSequence([recipe.seed, 1]))
    u, v = rng.normal(size=(2, recipe.features))
    return u / np.linalg.norm(u), v / np.linalg.norm(v)


def latent_relevance(features: np.ndarray, noise: np.ndarray, recipe: Recipe) -> np.ndarray:
    """z [n] of documents' features [n, F] and standard normal noise [n]."""
    u, v = _directions(recipe)
    return features @ u + recipe.nonlinear * ((features @ v) ** 2 - 1.0) + recipe.label_noise * noise


def grade_thresholds(recipe: Recipe) -> np.ndarray:
    """[4] the latent relevance at which grades 1-4 start (:data:`GRADE_QUANTILES` of its distribution)."""
    return quantile_thresholds(recipe.seed, lambda rng, n: latent_relevance(
        rng.normal(size=(n, recipe.features)), rng.normal(size=n), recipe))


def quantile_thresholds(seed: int, draw: Callable[[np.random.Generator, int], np.ndarray]) -> np.ndarray:
    """[4] :data:`GRADE_QUANTILES` of the latent relevance of :data:`THRESHOLD_SAMPLE` documents ``draw(rng, n)``
    gives, from the data's own stream ``[seed, 2]``."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 2]))
    return np.quantile(draw(rng, THRESHOLD_SAMPLE), GRADE_QUANTILES)


def iter_recipe_queries(recipe: Recipe, split: str) -> Iterator[RankedQuery]:
    """The queries of ``split`` in draw order (``initial_scores`` 0: the Rank SVM orders them later)."""
    stream = SPLITS.index(split) + 3
    rng = np.random.default_rng(np.random.SeedSequence([recipe.seed, stream]))
    thresholds = grade_thresholds(recipe)
    n_queries = getattr(recipe, "%s_queries" % split)
    for q in range(n_queries):
        n_docs = int(rng.integers(recipe.docs_per_query[0], recipe.docs_per_query[1] + 1))
        features = rng.normal(size=(n_docs, recipe.features))
        labels = np.searchsorted(thresholds, latent_relevance(features, rng.normal(size=n_docs), recipe))
        qid = "%s%d" % (split, q)
        yield RankedQuery(
            qid=qid, doc_ids=["%s_d%d" % (qid, i) for i in range(n_docs)], features=features,
            labels=labels.astype(np.float64), initial_scores=np.zeros(n_docs),
        )


def letor_dir(directory: str) -> str:
    """Where the LETOR files of the data directory ``directory`` are kept."""
    return os.path.abspath(directory).rstrip(os.sep) + ".letor"


def write_recipe_letor(directory: str, recipe: Recipe) -> Dict[str, str]:
    """Write the recipe's LETOR files (``<directory>.letor/<split>/<split>.txt``); split -> path."""
    source = letor_dir(directory)
    paths = {}
    for split in SPLITS:
        write_libsvm_split(source, split, iter_recipe_queries(recipe, split))
        paths[split] = os.path.join(source, split, split + ".txt")
    atomic_write_text(os.path.join(source, "recipe.json"), json.dumps(asdict(recipe), sort_keys=True) + "\n")
    return paths


def write_recipe_dataset(directory: str, recipe: Recipe) -> dict:
    """Draw the data, write its LETOR files and prepare the ULTRA data directory; returns prepare's report.

    The data directory is written as :func:`~ultra_multr.data.prepare.prepare_split_files`
    writes real data (atomically); its logging ranker is the Rank SVM fitted
    on 1 % of the labelled training queries (at least 20) with the recipe's seed.
    """
    paths = write_recipe_letor(directory, recipe)
    options = PrepareOptions(seed=recipe.seed)
    return prepare_split_files(paths["train"], paths["valid"], paths["test"], directory, options)


__all__ = ["GRADE_QUANTILES", "Recipe", "SCREENED_RECIPES", "check_sizes", "grade_thresholds", "iter_recipe_queries",
           "latent_relevance", "letor_dir", "quantile_thresholds", "write_recipe_dataset", "write_recipe_letor"]
