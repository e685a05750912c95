"""Does a trained user simulator hold off the logged order?  Measured against the click model behind its clicks.

MULTR's re-ranked term rests on the simulator's clicks on orders it never saw
logged.  Where the logged position carries something the features do not (a
logging ranker that knows more than the learner), a simulator fitted on one
logged order per query learns that as an effect of the features the logger
favoured, and imputes clicks by the logger's score on re-ranked lists.  On
generated data the true click model is known, so this is measured directly:

* **the decile statistic**: on uniformly random orders, the simulator's
  expected click minus the truth's, averaged over the documents in the top
  decile of the logging ranker's score (ULTRA's ``.initial_scores``), minus
  the same over the bottom decile, divided by the truth's mean click under
  random orders.  0 when the simulator's error does not depend on what the
  logger thought; positive when it imputes more clicks to what the logger
  ranked high;
* **by position**: on the logged order, the simulator's mean expected click
  per position divided by the truth's (1: its examination curve is right).

CLI (a finished run's simulator is ``<run>/model/ultra_multr.MULTR.simulator.ckpt``)::

    python -m ultra_multr.experiments.simulator_validity --data_dir DIR --click_model JSON \\
        --out validity.csv RUN_DIR [RUN_DIR ...] [--samples 256] [--list_size 10]

Shapes: B lists, N slots, in the data set's logged order; ``mask`` [B, N] is
True for real documents.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, Sequence

import numpy as np
import torch

from ultra_multr.compat import startup  # noqa: F401  (ULTRA's fixes before it is imported)
from ultra_multr.files import atomic_write_text
from ultra_multr.feeds.arrays import query_arrays
from ultra_multr.imputation import expected_pseudo_clicks
from ultra_multr.simulator import UserSimulator, load_simulator
from ultra_multr.simulator.controls import TrueClickModelSimulator
from ultra_multr.click_models.ultra import load_click_model_file

#: The share of documents in the top (and the bottom) group of the logging ranker's score.
DECILE = 0.1
SIMULATOR_FILE = os.path.join("model", "ultra_multr.MULTR.simulator.ckpt")


def decile_statistic(
    simulator_random: np.ndarray, true_random: np.ndarray, logger_scores: np.ndarray, mask: np.ndarray
) -> float:
    """(mean error in the logger's top decile - mean error in its bottom decile) / the truth's mean click.

    Args:
        simulator_random, true_random: [B, N] expected clicks under uniformly random orders.
        logger_scores: [B, N] the logging ranker's score of each document.
        mask: [B, N] bool.

    Returns:
        The statistic (deciles over every real document of the data set).
    """
    error = (simulator_random - true_random)[mask]
    scores = logger_scores[mask]
    low, high = np.quantile(scores, [DECILE, 1.0 - DECILE])
    top, bottom = scores >= high, scores <= low
    return float((error[top].mean() - error[bottom].mean()) / true_random[mask].mean())


def position_ratio(simulator_observed: np.ndarray, true_observed: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """[N] the simulator's mean expected click per position on the logged order over the truth's."""
    shown = mask.sum(0).clip(min=1)
    return (simulator_observed * mask).sum(0) / shown / ((true_observed * mask).sum(0) / shown)


def logger_score_matrix(data_dir: str, split: str, data_set, list_size: int) -> np.ndarray:
    """[B, N] the logging ranker's score of each slot of ``data_set`` (ULTRA's Raw_data of ``split``), 0 at padding.

    Read from ``<data_dir>/<split>/<split>.initial_scores`` by qid: ULTRA's reader
    looks for ``.intial_scores`` (sic) and so never loads them, and it drops
    queries without a relevant document.

    Raises:
        ValueError: the file is missing or lacks a query of the data set.
    """
    path = os.path.join(data_dir, split, split + ".initial_scores")
    if not os.path.isfile(path):
        raise ValueError("%s does not exist: the logging ranker's scores are needed" % path)
    with open(path) as handle:
        by_qid = {parts[0]: [float(v) for v in parts[1:]] for parts in (line.split() for line in handle) if parts}
    scores = np.zeros((len(data_set.qids), list_size), dtype=np.float64)
    for q, qid in enumerate(data_set.qids):
        if qid not in by_qid:
            raise ValueError("%s has no line for query %s" % (path, qid))
        values = by_qid[qid][:list_size]
        scores[q, : len(values)] = values
    return scores


def simulator_validity(simulator: UserSimulator, truth: UserSimulator, features: torch.Tensor, mask: torch.Tensor,
                       logger_scores: np.ndarray, samples: int = 256, seed: int = 0) -> Dict[str, object]:
    """The decile statistic and the per-position ratio of ``simulator`` (any user simulator: a trained one, a
    design under study) against ``truth`` (the click model behind the clicks) on lists ``features`` [B, N, F]
    (``samples`` Monte-Carlo sessions per list and order type)."""
    sim_observed, sim_random = expected_pseudo_clicks(simulator, features, mask, samples,
                                                      torch.Generator().manual_seed(seed))
    true_observed, true_random = expected_pseudo_clicks(truth, features, mask, samples,
                                                        torch.Generator().manual_seed(seed))
    as_numpy = lambda t: t.double().numpy()  # noqa: E731
    valid = mask.numpy()
    return {
        "decile_statistic": decile_statistic(as_numpy(sim_random), as_numpy(true_random), logger_scores, valid),
        "position_ratio": position_ratio(as_numpy(sim_observed), as_numpy(true_observed), valid),
    }


def main(argv: Sequence[str] = None) -> int:
    import ultra

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", help="finished MULTR runs (their model/ holds the simulator)")
    parser.add_argument("--data_dir", required=True, help="the runs' ULTRA data directory (its train split)")
    parser.add_argument("--click_model", required=True, help="the click-model JSON the runs' clicks came from")
    parser.add_argument("--out", required=True, help="CSV to write: run, decile_statistic, ratio@1..N")
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--list_size", type=int, default=10)
    args = parser.parse_args(argv)
    data = ultra.utils.read_data(os.path.join(args.data_dir, ""), "train", None, 0)
    arrays = query_arrays(data, args.list_size)
    truth = TrueClickModelSimulator(load_click_model_file(args.click_model).model,
                                    arrays.features[arrays.doc_ids[arrays.mask]], arrays.labels[arrays.mask],
                                    args.list_size)
    features = torch.from_numpy(arrays.list_features(np.arange(arrays.n_queries)))
    mask = torch.from_numpy(arrays.mask)
    scores = logger_score_matrix(args.data_dir, "train", data, args.list_size)
    lines = ["run,decile_statistic," + ",".join("ratio_%d" % (k + 1) for k in range(args.list_size))]
    for run_dir in args.run_dirs:
        simulator, _ = load_simulator(os.path.join(run_dir, SIMULATOR_FILE), torch.device("cpu"))
        result = simulator_validity(simulator, truth, features, mask, scores, args.samples)
        lines.append("%s,%.4f,%s" % (run_dir, result["decile_statistic"],
                                     ",".join("%.4f" % v for v in result["position_ratio"])))
    atomic_write_text(args.out, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
