"""Small synthetic learning-to-rank datasets for tests and demos.

Features are Gaussian noise plus a label-dependent signal on a few directions,
so a ranker can learn something in a handful of steps; the initial ranking is
a noisy version of the true relevance, as a weak production ranker would give.
"""
from __future__ import annotations

import json
import os
from typing import Dict, Iterator, Tuple

import numpy as np

from ultra_multr.data.ultra_format import RankedQuery, query_order, write_libsvm_split, write_settings, write_split
from ultra_multr.files import atomic_write_text

#: The file beside a directory of :func:`write_recipe_dataset` that holds its recipe.
RECIPE_FILE = "generated.json"


def iter_synthetic_queries(
    n_queries: int,
    docs_per_query: Tuple[int, int] = (6, 15),
    n_features: int = 20,
    max_label: int = 4,
    seed: int = 0,
    qid_prefix: str = "q",
    initial_noise: float = 1.0,
    signal_seed: int = 0,
    signal: float = 2.0,
    ranker_feature: bool = False,
) -> Iterator[RankedQuery]:
    """Random queries whose features carry their labels' signal, one at a time
    (memory of one query, so splits of Yahoo's size stream to disk).

    Args:
        n_queries: number of queries.
        docs_per_query: inclusive range of list lengths.
        n_features: feature dimension F.
        max_label: labels are drawn from 0..max_label, skewed towards 0.
        seed: seed of the generator (the output is a pure function of it).
        qid_prefix: prefix of query and document ids.
        initial_noise: std of the noise the initial ranker adds to relevance.
        signal_seed: seed of the feature direction that carries relevance;
            splits of one dataset must share it to be learnable across splits.
        signal: how far the label moves the features along that direction
            (smaller: relevance is harder to learn).
        ranker_feature: write the initial ranker's noise (divided by
            ``initial_noise``, clipped to [-1, 1]) into the last feature: a
            feature the logging ranker used that carries no relevance; clicks,
            more frequent at the top, make it look relevant (position bias a
            ranker can learn, the case unbiased learning must undo).
    """
    rng = np.random.default_rng(seed)
    direction = np.random.default_rng(signal_seed).normal(size=n_features)
    direction /= np.linalg.norm(direction)
    label_probs = np.array([2.0 ** (max_label - y) for y in range(max_label + 1)])
    label_probs /= label_probs.sum()
    for q in range(n_queries):
        n_docs = int(rng.integers(docs_per_query[0], docs_per_query[1] + 1))
        labels = rng.choice(max_label + 1, size=n_docs, p=label_probs).astype(np.float64)
        if labels.max() == 0:  # keep every query useful for ULTRA, which drops all-zero lists
            labels[rng.integers(n_docs)] = 1.0
        features = rng.normal(scale=0.5, size=(n_docs, n_features))
        features += np.outer(labels / max_label, direction) * signal
        features = np.clip(features, -1.0, 1.0)
        noise = rng.normal(scale=initial_noise, size=n_docs)
        scores = labels + noise
        if ranker_feature:
            features[:, -1] = np.clip(noise / initial_noise, -1.0, 1.0)
        order = query_order(scores)
        qid = "%s%d" % (qid_prefix, q)
        yield RankedQuery(
            qid=qid,
            doc_ids=["%s_d%d" % (qid, i) for i in order],
            features=features[order],
            labels=labels[order],
            initial_scores=scores[order],
        )


#: The stress group's sets (studies/headroom/run.py's defaults): a logger that orders each list by the label plus
#: noise, so a document's logged position carries relevance no feature carries.  Pass with ``seed=k``.
STRESS_SET = dict(split_sizes={"train": 1000, "valid": 100, "test": 1000}, docs_per_query=(6, 10), n_features=46,
                  initial_noise=2.0, signal=1.0, ranker_feature=True)


def write_synthetic_ultra_dataset(
    directory: str,
    split_sizes: Dict[str, int] = None,
    docs_per_query: Tuple[int, int] = (6, 15),
    n_features: int = 20,
    max_label: int = 4,
    seed: int = 0,
    layout: str = "ultra",
    initial_noise: float = 1.0,
    signal: float = 2.0,
    ranker_feature: bool = False,
) -> str:
    """Write a synthetic data directory and return its path (with '/').

    ``layout``: "ultra" (``S/S.feature``, ``.init_list``, ``.labels``, ``.initial_scores``)
    or "libsvm" (``S/S.txt``); ULTRA's main.py reads both.  ``initial_noise`` is
    the std of the initial ranker's noise (see :func:`iter_synthetic_queries`):
    larger values give a weaker initial ranking; ``signal`` and
    ``ranker_feature`` are passed on too.
    """
    writers = {"ultra": write_split, "libsvm": write_libsvm_split}
    if layout not in writers:
        raise ValueError("layout must be one of %s, got %r" % (sorted(writers), layout))
    split_sizes = split_sizes or {"train": 60, "valid": 12, "test": 12}
    for offset, (split, n_queries) in enumerate(sorted(split_sizes.items())):
        queries = iter_synthetic_queries(
            n_queries, docs_per_query, n_features, max_label, seed + 1000 * offset, qid_prefix=split,
            initial_noise=initial_noise, signal=signal, ranker_feature=ranker_feature,
        )
        writers[layout](directory, split, queries)
    write_settings(directory, n_features, max_label)
    return os.path.join(os.path.abspath(directory), "")


def write_stress_set(directory: str, seed: int) -> None:
    """The stress set (:data:`STRESS_SET`) of ``seed`` into ``directory``, unless it holds one made from the same
    description (``stress_set.json``)."""
    stamp = os.path.join(directory, "stress_set.json")
    description = json.dumps(dict(STRESS_SET, seed=seed), sort_keys=True)
    if os.path.isfile(stamp) and open(stamp).read() == description:
        return
    write_synthetic_ultra_dataset(directory, seed=seed, **STRESS_SET)
    atomic_write_text(stamp, description)


def write_recipe_dataset(directory: str, recipe: dict) -> None:
    """Write the generated data directory of ``recipe`` unless it is there already.

    ``recipe``: seed, train_queries, features and optionally valid_queries (30),
    test_queries (200), docs_per_query ([15, 30]), initial_noise (1.0, the initial ranker's noise), signal (2.0)
    and ranker_feature (False) of :func:`iter_synthetic_queries`; it is kept in ``<directory>/generated.json``.

    Raises:
        ValueError: ``directory`` holds data generated with another recipe.
    """
    recipe_path = os.path.join(directory, RECIPE_FILE)
    if os.path.isfile(recipe_path):
        with open(recipe_path) as handle:
            found = json.load(handle)
        if found != recipe:
            raise ValueError("%s was generated with %s, not %s: use another --out" % (directory, found, recipe))
        return
    write_synthetic_ultra_dataset(
        directory,
        {"train": recipe["train_queries"], "valid": recipe.get("valid_queries", 30), "test": recipe.get("test_queries", 200)},
        docs_per_query=tuple(recipe.get("docs_per_query", (15, 30))),
        n_features=recipe["features"],
        max_label=4,
        seed=recipe["seed"],
        initial_noise=recipe.get("initial_noise", 1.0),
        signal=recipe.get("signal", 2.0),
        ranker_feature=recipe.get("ranker_feature", False),
    )
    atomic_write_text(recipe_path, json.dumps(recipe, sort_keys=True) + "\n")
