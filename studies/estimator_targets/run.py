"""What each MULTR estimator setting's per-document weight estimates: closed form vs Monte Carlo.

Usage (CPU, about 15 minutes on 2 busy cores):
    PYTHONPATH=. python studies/estimator_targets/run.py [--batches 20] [--out studies/estimator_targets/results]

One query of 10 documents in a fixed logged order, position-based clicks
(examination 1/rank, click-if-examined from the graded labels), lists without
a click dropped as main.py's feed drops them.  For each setting (rows) and
case (columns) MULTR is built as main.py builds it, a known click model is
plugged into its simulator interface and DLA's propensities are set
(:mod:`ultra_multr.experiments.estimator_targets`), batches come from its own training
feed and the weights are read from ``MULTR.training_loss``.  Written:
``targets.csv`` (per position: target, closed form, Monte Carlo mean and
standard error) and ``targets.md`` (per setting and case: the largest
deviation over positions from proportional to the randomisation target, in
closed form and by Monte Carlo, and the weights' spread).
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import sys
import tempfile

import numpy as np

from ultra_multr.files import atomic_write_text
from ultra_multr.experiments.estimator_targets import (
    Case,
    Setting,
    build_multr,
    deviation,
    expected_weights,
    install,
    monte_carlo_weights,
    pbm_json,
    stream_terms,
    write_one_query_data,
)

CLICK_PROB = np.array([0.1, 0.16, 0.28, 0.52, 1.0])  # settings/click_models/pbm_eta1_eps0.1_ymax4.json
LABELS = [3, 2, 0, 1, 3, 0, 2, 0, 1, 0]
SAMPLE_NUM = 8
BATCH_SIZE = 4096
IMPUTATION_SAMPLES = 1 << 16
EXAM = 1.0 / np.arange(1, len(LABELS) + 1)
RELEVANCE = CLICK_PROB[LABELS]
PAPER_A = SAMPLE_NUM / (SAMPLE_NUM + 1.0)

SETTINGS = [
    Setting("paper (a = S/(S+1), guard none)", "mixture", PAPER_A, "dr", "none", "sampled"),
    Setting("paper, expected imputation", "mixture", PAPER_A, "dr", "none", "expected"),
    Setting("paper a, clip", "mixture", PAPER_A, "dr", "clip", "sampled"),
    Setting("a = 0.5, clip", "mixture", 0.5, "dr", "clip", "sampled"),
    Setting("a = 0, clip", "mixture", 0.0, "dr", "clip", "sampled"),
    Setting("a = 0, none", "mixture", 0.0, "dr", "none", "sampled"),
    Setting("eib (a = S/(S+1))", "mixture", PAPER_A, "eib", "none", "sampled"),
    Setting("randomized, none", "randomized", 1.0, "dr", "none", "sampled"),
    Setting("randomized, clip", "randomized", 1.0, "dr", "clip", "sampled"),
    Setting("randomized, expected, none", "randomized", 1.0, "dr", "none", "expected"),
    Setting("randomized, expected, clip", "randomized", 1.0, "dr", "clip", "expected"),
    Setting("randomized, expected, rebalance", "randomized", 1.0, "dr", "rebalance", "expected"),
    Setting("paper a, expected, rebalance (default)", "mixture", PAPER_A, "dr", "rebalance", "expected"),
]

CASES = [
    # (i) the simulator is exact, DLA's propensities too flat (1/sqrt(rank)).
    Case("(i) exact simulator, wrong propensities", EXAM, RELEVANCE, EXAM, RELEVANCE, EXAM ** 0.5),
    # (ii) exact propensities, the simulator's relevance x0.5 / x1.5 at alternate positions.
    Case("(ii) wrong relevance, exact propensities", EXAM, RELEVANCE, EXAM,
         np.clip(RELEVANCE * np.tile([0.5, 1.5], len(LABELS) // 2), 0.0, 1.0), EXAM),
    # (iii) the simulator reproduces the logged order's clicks but puts the position effect into
    # relevance (flat examination), as a simulator fitted on one logged order may; exact propensities.
    Case("(iii) flat simulator examination, exact propensities", EXAM, RELEVANCE,
         np.ones_like(EXAM), EXAM * RELEVANCE, EXAM),
]

FIELDS = ["setting", "case", "position", "label", "target", "closed_form", "mc_mean", "mc_se",
          "closed_deviation", "mc_deviation", "mc_deviation_se", "weight_cv"]


def run(batches: int, work: str):
    data_dir = write_one_query_data(os.path.join(work, "data"), LABELS)
    click_model = pbm_json(os.path.join(work, "pbm.json"), CLICK_PROB, EXAM)
    rows, summary = [], []
    for setting in SETTINGS:
        for case in CASES:
            model, feed, data = build_multr(
                data_dir, click_model, setting.hparams(SAMPLE_NUM, IMPUTATION_SAMPLES), BATCH_SIZE
            )
            install(model, case, data)
            mean, se = monte_carlo_weights(model, feed, data, batches)
            target = stream_terms(case)["target"]
            closed = expected_weights(setting, case, SAMPLE_NUM)
            closed_dev, mc_dev = deviation(closed, target), deviation(mean, target)
            scale = (mean / target).mean()
            dev_se = se / target / scale
            cv = se * np.sqrt(batches * BATCH_SIZE) / np.abs(mean).clip(min=1e-12)
            for k in range(len(LABELS)):
                rows.append([setting.name, case.name, k + 1, LABELS[k], target[k], closed[k], mean[k], se[k],
                             closed_dev[k], mc_dev[k], dev_se[k], cv[k]])
            summary.append((setting.name, case.name, np.abs(closed_dev).max(), np.abs(mc_dev).max(),
                            dev_se.max(), float(np.max(np.abs(mean - closed) / se)), float(np.mean(cv))))
            print("%-36s %-52s closed %.3f mc %.3f (se %.3f) |z| %.1f cv %.2f" % summary[-1], flush=True)
    return rows, summary


def markdown(summary, batches: int) -> str:
    lines = [
        "# Expected per-document weight vs the randomisation target",
        "",
        "Generated by `studies/estimator_targets/run.py` (%d batches of %d lists from MULTR's own training feed per "
        "cell, clickless lists dropped; S = %d; labels %s; click-if-examined %s; examination 1/rank). "
        "Deviation: the largest over the 10 positions of |(W_d / T_d) / mean_d(W_d / T_d) - 1|, "
        "T_d = mean_k(e_k) r_d. se: the largest Monte Carlo standard error of a position's deviation; "
        "|z|: the largest |Monte Carlo - closed form| in standard errors; cv: mean over positions of a "
        "weight's standard deviation / its mean (per list)." % (batches, BATCH_SIZE, SAMPLE_NUM, LABELS,
                                                                CLICK_PROB.tolist()),
        "",
        "| setting | case | closed form | Monte Carlo | se | abs z | cv |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, case, closed, mc, se, z, cv in summary:
        lines.append("| %s | %s | %.3f | %.3f | %.3f | %.1f | %.2f |" % (name, case, closed, mc, se, z, cv))
    return "\n".join(lines) + "\n"


def cascade_table(permutations: int = 200_000, seed: int = 0) -> str:
    """Cascade clicks (the first click ends the session; click-if-reached r_d): each form's
    expected weight against T_d = E_pi P(c_d | pi), computed exactly per order and averaged
    over ``permutations`` uniform orders (not through MULTR: the known-model simulator is
    position-based).  P(at least one click) = 1 - prod(1 - r) does not depend on the order, so
    the stream divides every order's click probabilities by the same number and a simulator
    exact for the stream is the cascade's click probabilities over it on every order.
    Propensities: the logged order's probabilities of being reached (the best position-only
    propensities for this list); the wrong simulator's relevance is x0.5 / x1.5 at alternate
    positions, as in case (ii)."""
    import torch

    from ultra_multr.click_models import CascadeModel

    generator = torch.Generator().manual_seed(seed)

    def terms(relevance_scale):
        model = CascadeModel(CLICK_PROB.tolist())
        relevance = torch.as_tensor(RELEVANCE * relevance_scale)
        orders = torch.argsort(torch.rand(permutations, len(LABELS), generator=generator), dim=1)
        attraction = relevance[orders]
        reach = model._reached(attraction)
        by_position = reach * attraction
        by_document = torch.zeros_like(by_position).scatter_(1, orders, by_position)
        logged_reach = model._reached(relevance.unsqueeze(0))[0]
        any_click = 1.0 - torch.prod(1.0 - relevance)
        return (logged_reach * relevance / any_click).numpy(), (by_document.mean(0) / any_click).numpy(), \
            logged_reach.numpy()

    click, target, reach = terms(np.ones(len(LABELS)))
    wrong_observed, wrong_randomized, _ = terms(np.tile([0.5, 1.5], len(LABELS) // 2))
    w = reach[0] / reach
    rho = reach.mean() / reach
    rows = []
    for case, observed, randomized in (("exact simulator", click, target),
                                       ("wrong relevance", wrong_observed, wrong_randomized)):
        forms = {
            "paper (a = S/(S+1))": (1 - PAPER_A) * (observed + (click - observed) * w) + PAPER_A * randomized,
            "a = 0": observed + (click - observed) * w,
            "eib (a = S/(S+1))": (1 - PAPER_A) * click + PAPER_A * randomized,
            "randomized": randomized + (click - observed) * rho,
            "IPW (no simulator)": click * w,
        }
        for name, weights in forms.items():
            rows.append("| %s | %s | %.3f |" % (name, case, np.abs(deviation(weights, target)).max()))
    return "\n".join([
        "# Cascade clicks: expected weight vs the randomisation target",
        "",
        "Generated by `studies/estimator_targets/run.py` (exact per order, averaged over %d uniform orders; "
        "labels %s; click-if-reached %s; expected pseudo clicks, no guard). T_d = E_pi P(c_d | pi); "
        "deviation: the largest over positions of |(W_d / T_d) / mean_d(W_d / T_d) - 1|. "
        "The reach-probability propensities are exact for the logged order only: under cascade no "
        "position-only propensity is exact for every order." % (permutations, LABELS, CLICK_PROB.tolist()),
        "",
        "| form | case | deviation |",
        "|---|---|---|",
    ] + rows) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--out", default=os.path.join("studies", "estimator_targets", "results"))
    parser.add_argument("--cascade-only", action="store_true", help="only the cascade table (seconds)")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    atomic_write_text(os.path.join(args.out, "cascade.md"), cascade_table())
    if args.cascade_only:
        return 0
    with tempfile.TemporaryDirectory() as work:
        rows, summary = run(args.batches, work)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(FIELDS)
    writer.writerows([r[:4] + ["%.6g" % v for v in r[4:]] for r in rows])
    atomic_write_text(os.path.join(args.out, "targets.csv"), buffer.getvalue())
    atomic_write_text(os.path.join(args.out, "targets.md"), markdown(summary, args.batches))
    return 0


if __name__ == "__main__":
    sys.exit(main())
