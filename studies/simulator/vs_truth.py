"""A trained MULTR simulator against the click model that made its clicks (issue 17: case iii measured).

    python studies/simulator/vs_truth.py --data_dir DIR --click_model JSON --out OUT.md \\
        RUN_DIR [RUN_DIR ...] [--samples 256] [--list_size 10]

For each run folder (a finished MULTR run of the study runner, its simulator at
``model/ultra_multr.MULTR.simulator.ckpt``) and every training list of ``--data_dir``:

* on the logged order, the simulator's expected click per position against the truth
  (:class:`ultra_multr.simulator.controls.TrueClickModelSimulator`: the click model, exact for main.py's
  stream); their ratio is the simulator's examination curve relative to the truth's;
* under uniformly random orders (what the re-ranked term of the estimator uses), each document's expected
  click minus the truth's, averaged over documents binned by the last feature (in the headroom sets the
  logging ranker's noise: it carries no relevance, but decided the logged order).  A simulator that
  learned the position effect as an effect of that feature imputes more clicks to documents the logging
  ranker favoured, the bias the estimator should remove.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch

from ultra_multr.compat import startup  # noqa: F401  (ULTRA's fixes before it is imported)
import ultra  # noqa: E402

from ultra_multr.files import atomic_write_text  # noqa: E402
from ultra_multr.feeds.arrays import query_arrays  # noqa: E402
from ultra_multr.imputation import expected_pseudo_clicks  # noqa: E402
from ultra_multr.simulator import load_simulator  # noqa: E402
from ultra_multr.simulator.controls import TrueClickModelSimulator  # noqa: E402
from ultra_multr.click_models.ultra import load_click_model_file  # noqa: E402

BINS = 5


def compare(run_dir: str, arrays, truth: TrueClickModelSimulator, samples: int) -> dict:
    """Per-position observed-list means (simulator, truth) [N] and random-order errors by feature bin [BINS]."""
    simulator, _ = load_simulator(os.path.join(run_dir, "model", "ultra_multr.MULTR.simulator.ckpt"), torch.device("cpu"))
    simulator.eval()
    generator = torch.Generator().manual_seed(0)
    features = torch.from_numpy(arrays.list_features(np.arange(arrays.n_queries)))
    mask = torch.from_numpy(arrays.mask)
    sim_observed, sim_random = expected_pseudo_clicks(simulator, features, mask, samples, generator)
    true_observed, true_random = expected_pseudo_clicks(truth, features, mask, samples, generator)
    shown = mask.double().sum(0)
    per_position = lambda x: (x.double() * mask).sum(0) / shown  # noqa: E731
    last = features[..., -1][mask].numpy()
    error = (sim_random - true_random)[mask].double().numpy()
    edges = np.quantile(last, np.linspace(0, 1, BINS + 1))
    which = np.clip(np.searchsorted(edges, last, side="right") - 1, 0, BINS - 1)
    return {
        "sim_observed": per_position(sim_observed).numpy(), "true_observed": per_position(true_observed).numpy(),
        "error_by_bin": np.array([error[which == b].mean() for b in range(BINS)]),
        "true_by_bin": np.array([true_random[mask].double().numpy()[which == b].mean() for b in range(BINS)]),
        "edges": edges,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+")
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--click_model", required=True, help="the click-model JSON the runs' clicks came from")
    parser.add_argument("--out", required=True, help="Markdown file to write")
    parser.add_argument("--samples", type=int, default=256, help="Monte-Carlo sessions per list and order type")
    parser.add_argument("--list_size", type=int, default=10)
    args = parser.parse_args(argv)
    data = ultra.utils.read_data(os.path.join(args.data_dir, ""), "train", None, 0)
    arrays = query_arrays(data, args.list_size)
    rows = arrays.doc_ids[arrays.mask]
    truth = TrueClickModelSimulator(load_click_model_file(args.click_model).model, arrays.features[rows],
                                    arrays.labels[arrays.mask], args.list_size)
    lines = ["Trained MULTR simulators against the click model that made their clicks, on the %d training lists of "
             "`%s` (`%s`, %d Monte-Carlo sessions per list and order type; made by `studies/simulator/vs_truth.py`)."
             % (arrays.n_queries, args.data_dir, os.path.basename(args.click_model), args.samples), "",
             "**Logged order**: the simulator's mean expected click per position divided by the truth's (1.000: "
             "its examination curve is right there).", "",
             "| run | " + " | ".join("@%d" % (k + 1) for k in range(args.list_size)) + " |",
             "|---" * (args.list_size + 1) + "|"]
    results = [(run_dir, compare(run_dir, arrays, truth, args.samples)) for run_dir in args.run_dirs]
    for run_dir, r in results:
        lines.append("| %s | %s |" % (run_dir, " | ".join("%.3f" % v for v in r["sim_observed"] / r["true_observed"])))
    lines += ["", "**Uniformly random orders** (the re-ranked term): mean over documents of the simulator's expected "
              "click minus the truth's, by quintile of the last feature (the logging ranker's noise); the truth's "
              "mean click in brackets.", "",
              "| run | " + " | ".join("Q%d" % (b + 1) for b in range(BINS)) + " |", "|---" * (BINS + 1) + "|"]
    for run_dir, r in results:
        lines.append("| %s | %s |" % (run_dir, " | ".join(
            "%+.4f (%.4f)" % (e, t) for e, t in zip(r["error_by_bin"], r["true_by_bin"]))))
    atomic_write_text(args.out, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
