"""Learned propensities checked against an estimator that needs no ranker: intervention harvesting.

On a log whose rankings vary, a document shown at positions k and k' gives a
click-rate ratio that, under a position-based model, is the ratio of the two
positions' examination probabilities whatever the document's relevance
(Agarwal et al., WSDM 2019).  ``ultr-bias-toolkit`` (optional extra
``bias``, imported only here and only when called) implements two such
estimators on a pandas DataFrame of one row per (session, position):
``AdjacentChainEstimator`` (click ratios of neighbouring positions, chained)
and ``AllPairsEstimator`` (a PBM fitted to every position pair).  This module
turns a :class:`~ultra_multr.generate.ultre_log.SessionLog` into that frame, runs
the estimators, reads what DLA and MULTR learned (their
``propensity/position_XX`` curves, :mod:`ultra_multr.experiments.diagnostics`)
and writes one table (Markdown and CSV) and one plot.  Every curve is
relative to position 1.
"""
from __future__ import annotations

import csv
import os
from typing import Dict, Sequence

import numpy as np

from ultra_multr.files import atomic_write_file, atomic_write_text
from ultra_multr.experiments.diagnostics import PROPENSITY_TAG, read_scalars
from ultra_multr.generate.ultre_log import SessionLog

#: Estimator name -> ultr-bias-toolkit class name.
ESTIMATORS = {"adjacent_chain": "AdjacentChainEstimator", "all_pairs": "AllPairsEstimator"}


def sessions_frame(log: SessionLog):
    """One row per shown document: ``query_id``, ``doc_id`` (unique over the log), ``position`` (1-based), ``click``."""
    import pandas as pd

    n_sessions, n_positions = log.shown.shape
    return pd.DataFrame({
        "query_id": np.repeat(log.query, n_positions),
        "doc_id": (log.query[:, None] * n_positions + log.shown).reshape(-1),
        "position": np.tile(np.arange(1, n_positions + 1), n_sessions),
        "click": log.clicks.reshape(-1).astype(np.int64),
    })


def harvested_examination(frame, estimator: str, n_positions: int) -> np.ndarray:
    """[n_positions] examination per position relative to position 1, by an ultr-bias-toolkit estimator.

    Raises:
        ValueError: an unknown estimator, or a position the log never swapped.
        ImportError: ultr-bias-toolkit is not installed (``pip install .[bias]``).
    """
    if estimator not in ESTIMATORS:
        raise ValueError("unknown estimator %r; expected one of %s" % (estimator, sorted(ESTIMATORS)))
    try:
        from ultr_bias_toolkit.bias import intervention_harvesting
    except ImportError as error:
        raise ImportError("%s needs ultr-bias-toolkit: pip install '.[bias]' (%s)" % (estimator, error)) from None
    result = getattr(intervention_harvesting, ESTIMATORS[estimator])()(frame)
    curve = dict(zip(result["position"].astype(int), result["examination"].astype(float)))
    missing = [k for k in range(1, n_positions + 1) if k not in curve]
    if missing:
        raise ValueError("%s: no intervention reaches position(s) %s; the log's rankings must vary there"
                         % (estimator, missing))
    values = np.array([curve[k] for k in range(1, n_positions + 1)])
    return values / values[0]


def learned_propensities(model_dir: str) -> np.ndarray:
    """[N] the propensity per position relative to position 1 that DLA or MULTR logged last in
    ``<model_dir>/train_log``.

    Raises:
        ValueError: the run logged no propensity curve.
    """
    scalars = read_scalars(os.path.join(model_dir, "train_log"))
    positions = {int(m.group(1)): values[-1][1] for tag, values in scalars.items() for m in [PROPENSITY_TAG.match(tag)]
                 if m}
    if not positions:
        raise ValueError("%s/train_log has no propensity/position_XX curve (a DLA or MULTR run logs one)" % model_dir)
    return np.array([positions[k] for k in sorted(positions)])


def write_table(curves: Dict[str, np.ndarray], truth: np.ndarray, out_dir: str, note: str = "") -> Dict[str, str]:
    """``propensities.md`` / ``.csv`` (one row per position: the truth and each curve, plus each curve's largest
    absolute error) and ``propensities.png``; returns name -> path."""
    names = list(curves)
    n = len(truth)
    header = ["position", "true"] + names
    rows = [[k + 1, truth[k]] + [curves[name][k] for name in names] for k in range(n)]
    errors = ["max abs error", 0.0] + list(max_errors(curves, truth).values())
    paths = {kind: os.path.join(out_dir, "propensities." + kind) for kind in ("md", "csv", "png")}

    def write_csv(tmp: str) -> None:
        with open(tmp, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            writer.writerows([[row[0]] + ["%.4f" % v for v in row[1:]] for row in rows + [errors]])

    atomic_write_file(paths["csv"], write_csv)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| %s | " % row[0] + " | ".join("%.3f" % v for v in row[1:]) + " |" for row in rows + [errors]]
    atomic_write_text(paths["md"], (note + "\n\n" if note else "") + "\n".join(lines) + "\n")
    atomic_write_file(paths["png"], lambda tmp: _plot(curves, truth, tmp))
    return paths


def _plot(curves: Dict[str, np.ndarray], truth: np.ndarray, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    positions = np.arange(1, len(truth) + 1)
    figure, axis = plt.subplots(figsize=(6, 4))
    axis.plot(positions, truth, "k-", linewidth=2, label="true (PBM)")
    for (name, curve), marker in zip(curves.items(), "osd^v<>"):
        axis.plot(positions, curve, marker=marker, linestyle="--", label=name)
    axis.set_xlabel("position")
    axis.set_ylabel("examination relative to position 1")
    axis.set_xticks(positions)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=120)
    plt.close(figure)


def max_errors(curves: Dict[str, np.ndarray], truth: Sequence[float]) -> Dict[str, float]:
    """Each curve's largest absolute difference from ``truth``."""
    return {name: float(np.max(np.abs(np.asarray(curve) - np.asarray(truth)))) for name, curve in curves.items()}
