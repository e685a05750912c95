"""What the runs learned besides their rankers: propensities and simulator fit.

For every finished run of a runner output folder (``done.json``), reads the
TensorBoard curves our algorithms write into ``<run>/model/train_log``
(:mod:`ultra_multr.tensorboard`):

* ``propensity/position_XX`` (DLA, MULTR, EIB-MULTR): the learned propensity
  per position relative to position 1, at its last logged step;
* ``simulator/heldout_log_likelihood`` (MULTR): the user simulator's best
  held-out click log-likelihood per session (the state MULTR keeps) and the
  step it was reached at.

Runs are grouped as the result tables group them (dataset, variant such as
``sessions_per_query=4``, method), and one Markdown table lists per group the
simulator's best held-out log-likelihood over runs and the inverse
propensities ``1/p`` per position as mean +- std over runs: how noisy the
inverse propensity weights that DLA and MULTR's correction multiply by are.

CLI::

    python -m ultra_multr.experiments.diagnostics OUT/runs --out OUT/results/diagnostics.md
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ultra_multr.files import atomic_write_text
from ultra_multr.experiments.aggregate import finished_run_dirs

PROPENSITY_TAG = re.compile(r"^propensity/position_(\d+)$")
SIMULATOR_LL_TAG = "simulator/heldout_log_likelihood"
TRAIN_LOG = os.path.join("model", "train_log")


@dataclass(frozen=True)
class RunDiagnostics:
    """One run's learned propensities and simulator fit (None: not logged)."""

    dataset: str
    variant: str
    method: str
    #: [N] learned propensity per position relative to position 1, last logged step
    propensities: Optional[np.ndarray]
    #: best held-out click log-likelihood per session and its simulator step
    simulator_best: Optional[Tuple[float, int]]


def read_scalars(log_dir: str) -> Dict[str, List[Tuple[int, float]]]:
    """tag -> [(step, value)] of every scalar in the event files of ``log_dir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(log_dir, size_guidance={"scalars": 0})
    accumulator.Reload()
    return {
        tag: [(event.step, float(event.value)) for event in accumulator.Scalars(tag)]
        for tag in accumulator.Tags()["scalars"]
    }


def run_diagnostics(run_dir: str) -> RunDiagnostics:
    """The diagnostics of the finished run in ``run_dir`` (its ``run.json`` names it).

    Raises:
        ValueError: the propensity curves skip a position.
    """
    with open(os.path.join(run_dir, "run.json")) as handle:
        info = json.load(handle)
    log_dir = os.path.join(run_dir, TRAIN_LOG)
    scalars = read_scalars(log_dir) if os.path.isdir(log_dir) else {}
    positions = {}
    for tag, points in scalars.items():
        match = PROPENSITY_TAG.match(tag)
        if match and points:
            positions[int(match.group(1))] = max(points)[1]  # the last logged step
    propensities = None
    if positions:
        if sorted(positions) != list(range(1, len(positions) + 1)):
            raise ValueError("%s: propensity curves for positions %s, not 1..N" % (log_dir, sorted(positions)))
        propensities = np.array([positions[i] for i in sorted(positions)])
    simulator_best = None
    points = scalars.get(SIMULATOR_LL_TAG)
    if points:
        step, value = max(points, key=lambda point: (point[1], -point[0]))  # earliest of equal bests
        simulator_best = (value, step)
    return RunDiagnostics(
        dataset=info["dataset"], variant=info.get("variant") or "", method=info["method"],
        propensities=propensities, simulator_best=simulator_best,
    )


def collect(runs_dir: str) -> List[RunDiagnostics]:
    """Every finished run under ``runs_dir`` (unfinished ones are ignored)."""
    return [run_diagnostics(run_dir) for run_dir in finished_run_dirs(runs_dir)]


def _mean_std(values: np.ndarray) -> str:
    return "%.2f +- %.2f" % (values.mean(), values.std(ddof=1)) if len(values) > 1 else "%.2f" % values[0]


def format_markdown(runs: Sequence[RunDiagnostics]) -> str:
    """One table per (dataset, variant): per method, the simulator's best held-out log-likelihood
    (mean, [min, max], steps) and ``1/p`` per position (mean +- std over runs)."""
    groups: Dict[Tuple[str, str], Dict[str, List[RunDiagnostics]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        groups[(run.dataset, run.variant)][run.method].append(run)
    sections = []
    for (dataset, variant), methods in sorted(groups.items()):
        n_positions = max(
            (len(r.propensities) for rs in methods.values() for r in rs if r.propensities is not None), default=0
        )
        lines = [
            "## %s%s" % (dataset, " (%s)" % variant if variant else ""),
            "",
            "Simulator: best held-out click log-likelihood per session over runs (the state MULTR keeps) and the "
            "steps it was reached at. 1/p: inverse learned propensity per position relative to position 1, "
            "mean +- std over runs.",
            "",
            "| method | runs | simulator LL mean [min, max] | best at steps | "
            + " | ".join("1/p @%d" % i for i in range(2, n_positions + 1)) + " |",
            "|---|---|---|---|" + "---|" * max(n_positions - 1, 0),
        ]
        for method, members in sorted(methods.items()):
            best = [r.simulator_best for r in members if r.simulator_best is not None]
            if best:
                values = np.array([b[0] for b in best])
                fit = "%.3f [%.3f, %.3f] (%d runs)" % (values.mean(), values.min(), values.max(), len(best))
                steps = ", ".join(str(b[1]) for b in sorted(best, key=lambda b: b[1]))
            else:
                fit, steps = "-", "-"
            learned = [r.propensities for r in members if r.propensities is not None]
            inverse = 1.0 / np.stack(learned) if learned else np.empty((0, 0))  # [runs, N]
            cells = [_mean_std(inverse[:, i]) if i < inverse.shape[1] else "-" for i in range(1, n_positions)]
            lines.append("| %s | %d | %s | %s | %s" % (method, len(members), fit, steps, " | ".join(cells) + " |"))
        sections.append("\n".join(lines) + "\n")
    return "\n".join(sections)


def main(argv: Sequence[str] = None) -> int:
    """Command-line entry point; returns the exit code (2 on bad input)."""
    parser = argparse.ArgumentParser(prog="python -m ultra_multr.experiments.diagnostics", description=__doc__.split("\n")[0])
    parser.add_argument("runs_dir", help="the runner's runs folder (OUT/runs)")
    parser.add_argument("--out", help="Markdown file to write (atomically); default: print only")
    args = parser.parse_args(argv)
    try:
        runs = collect(args.runs_dir)
        if not runs:
            raise ValueError("no finished run (done.json) under %s" % args.runs_dir)
        text = format_markdown(runs)
        if args.out:
            atomic_write_text(args.out, text)
    except (ValueError, OSError) as error:
        print("error: %s" % error, file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
