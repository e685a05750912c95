"""A smaller examination ranker for ``propensity_ranker=dla``: MULTR's nDCG@10 with it against MULTR's default on
the same sets and seeds (issue 40, item 1's "also worth measuring").

    # the runs: MULTR's defaults and the same with examination_ranker_layers=[64], 3 seeds on one recipe set
    python studies/examination_ranker/run.py run --designs_out out/designs --out out/examination_ranker \\
        --seeds 2 3 4 [--layers 64] [--set quadratic_1_f46] [--workers 2]
    # the table of the finished runs
    python studies/examination_ranker/run.py table --designs_out out/designs --out out/examination_ranker

The protocol is the simulator_designs grid's (``studies/simulator_designs/run.py``): its recipe sets (generated in
``--designs_out`` when missing), cascade clicks, 2,000 ranker updates at learning rate 0.05, every knob pinned.  A
run of the default arm that the grid's cascade stage (``--designs_out``/cascade) finished under the same run
fingerprint is copied from there instead of trained again; any other is trained here.  The table: each arm's mean
nDCG@10, the mean paired difference from the default over runs (same set and seed) with its 95 % t-interval and
sign-flip p, and the paired randomisation test over the pooled test queries beside it.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import shutil
import sys
from typing import Dict, List, Sequence

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "studies", "paper_setting"))

import screen  # noqa: E402  (the paper_setting study's runner config)

#: The simulator_designs study (its protocol, methods and tables), under a name no other ``run.py`` takes.
_SPEC = importlib.util.spec_from_file_location("simulator_designs_run",
                                               os.path.join(REPO, "studies", "simulator_designs", "run.py"))
designs = sys.modules.get(_SPEC.name) or importlib.util.module_from_spec(_SPEC)
if _SPEC.name not in sys.modules:
    sys.modules[_SPEC.name] = designs
    _SPEC.loader.exec_module(designs)

from ultra_multr.experiments.aggregate import as_host_counts, marked_label  # noqa: E402
from ultra_multr.experiments.runner import cli as runner  # noqa: E402
from ultra_multr.experiments.runner.runs import expand_runs, run_status  # noqa: E402
from ultra_multr.experiments.study_config import load_config  # noqa: E402
from ultra_multr.files import atomic_write_text  # noqa: E402

RESULTS = os.path.join(REPO, "studies", "examination_ranker", "results")
COLUMNS = ("arm", "runs", "ndcg10", "delta_vs_default", "ci_low", "ci_high", "p_runs", "p_queries")
#: The margin issue 40 sets for a cheaper default: the mean difference from today's default at least this.
MARGIN = -0.002


def arms(layers: Sequence[int]) -> Dict[str, dict]:
    """The runner's methods: MULTR's defaults (the grid's name for them) and the smaller examination ranker."""
    design = designs.default_design()
    if design is None:
        raise SystemExit("error: no design of studies/simulator_designs equals MULTR's defaults; add it there first")
    overrides = designs.DESIGNS[design]
    sizes = ",".join(str(size) for size in layers)
    return {"multr_" + design: designs.method("MULTR (defaults)", overrides),
            "multr_%s_examination_%s" % (design, "_".join(str(size) for size in layers)):
                designs.method("MULTR, examination_ranker_layers=[%s]" % sizes,
                               dict(overrides, examination_ranker_layers=list(layers)))}


def study_config(out: str, designs_out: str, fold: str, seeds: Sequence[int], layers: Sequence[int]) -> dict:
    definitions = arms(layers)
    data = designs.data_dirs(designs_out, "cascade")
    if fold not in data:
        raise SystemExit("error: --set %s is not one of the grid's sets %s" % (fold, sorted(data)))
    return screen.study_config(out, {fold: data[fold]}, list(seeds), 2000, list(definitions),
                               os.path.abspath(screen.CASCADE), definitions=definitions)


def reuse_grid_runs(config_path: str, grid_stage: str) -> List[str]:
    """Copy each run of ``config_path`` that is not done here and whose results hold in ``grid_stage`` (finished
    there under the same fingerprint, on the same data: the runner's own test), under a temporary name, then renamed.
    Returns the copied run folders."""
    copied = []
    for run in expand_runs(load_config(config_path)):
        if run_status(run) == "done":
            continue
        source = os.path.join(grid_stage, "runs", run.info["dataset"], run.info["fold"], run.method,
                              "seed%d" % run.seed)
        if run_status(dataclasses.replace(run, run_dir=source)) != "done":  # absent, unfinished or stale there
            continue
        if os.path.isdir(run.run_dir):
            shutil.rmtree(run.run_dir)  # an unfinished attempt of this study's own
        temporary = run.run_dir + ".copying"
        shutil.rmtree(temporary, ignore_errors=True)
        shutil.copytree(source, temporary, symlinks=True)
        os.rename(temporary, run.run_dir)
        copied.append(run.run_dir)
    return copied


def table(out: str, results: str) -> str:
    """Write ``results``/examination_ranker.{csv,md} from the finished runs; returns the markdown's path.

    Raises:
        SystemExit: a run folder that does not hold for ``out``/study.json (simulator_designs' :func:`finished`).
    """
    out = os.path.abspath(out)
    records = designs.finished(os.path.dirname(out), os.path.basename(out))
    with open(os.path.join(out, "study.json")) as handle:
        config = json.load(handle)
    methods = list(config["methods"])
    default = [r for r in records if r.info["method"] == methods[0]]
    rows = []
    for name in methods:
        mine = [r for r in records if r.info["method"] == name]
        if not mine:
            continue
        label = config["extra_methods"][name]["label"]
        row = {"arm": marked_label(label, as_host_counts(mine), len(mine)), "runs": len(mine),
               "ndcg10": designs.fmt(float(np.mean([r.mean("ndcg_10") for r in mine])))}
        if name != methods[0] and default:
            columns = designs.against(mine, default)
            row.update(delta_vs_default=columns.pop("delta"), **columns)
        rows.append(row)
    os.makedirs(results, exist_ok=True)
    path = os.path.join(results, "examination_ranker")
    designs.write_table(rows, COLUMNS, path, (
        "MULTR's defaults (propensity_ranker=dla: the examination ranker a copy of the ranker) against a one-hidden-"
        "layer examination ranker (studies/examination_ranker/run.py): the simulator_designs grid's protocol on the "
        "recipe set %s, seeds %s, cascade clicks, 2,000 ranker updates at learning rate 0.05; delta_vs_default, "
        "ci_low, ci_high: the mean paired difference over runs (same set and seed) and its 95 %% t-interval; p_runs "
        "its sign-flip p; p_queries the paired randomisation test over the pooled test queries. Issue 40's margin "
        "for a cheaper default: a mean difference of at least %+.3f."
        % (", ".join(sorted(config["datasets"]["recipe"])), ", ".join(str(s) for s in config["seeds"]), MARGIN)))
    return path + ".md"


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=("run", "table"))
    parser.add_argument("--designs_out", required=True, help="the simulator_designs study's work folder")
    parser.add_argument("--out", required=True, help="this study's work folder (runs)")
    parser.add_argument("--set", default=designs.SETS[0], help="the recipe set (one of the grid's)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[2, 3, 4])
    parser.add_argument("--layers", type=int, nargs="+", default=[64], help="examination_ranker_layers")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--results", default=RESULTS)
    args = parser.parse_args(argv)
    if args.stage == "table":
        print(open(table(args.out, args.results)).read(), end="")
        return 0
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "study.json")
    atomic_write_text(path, json.dumps(study_config(args.out, args.designs_out, args.set, args.seeds, args.layers),
                                       indent=1) + "\n")
    for copied in reuse_grid_runs(path, os.path.join(args.designs_out, "cascade")):
        print("copied the grid's finished run %s" % copied)
    return runner.main([path, "--workers", str(args.workers), "--threads", "1"])


if __name__ == "__main__":
    sys.exit(main())
