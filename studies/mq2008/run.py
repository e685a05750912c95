"""The paper's study (Table 2 methods, click-log budgets, Figure 3) on MQ2008.

Usage::

    python studies/mq2008/run.py --data ../shared/data/MQ2008 --out out/mq2008
        [--table table2|budgets|pbm|small|ablations]
        [--folds 1] [--steps 1000] [--seeds 0] [--workers 2] [--threads N] [--budgets 1 4 16]
        [--methods oracle naive dla multr rand_multr eib_multr] [--sweep 0 2 4 8 16 32]
        [--click-model settings/click_models/cascade_eps0.1_ymax2.json] [--no-fresh] [--dry-run]
        [--train-queries 30] [--rerank-weights paper 0] [--multr-hparams NAME=VALUE,...]

``--table NAME`` runs one table of the study's page (``studies/mq2008/README.md``): five folds and three
seeds, and that table's methods, clicks and variants (flags given beside it win over the table's):
``table2`` (fresh cascade clicks, the nine Table-2 methods), ``budgets`` (fixed logs of K = 1, 4, 16
sessions per query), ``pbm`` (position-based clicks, eta = 2), ``small`` (30 training queries: DLA, MULTR
with ``rerank_weight=auto`` and at the fixed weights paper and 0, then the paired tables
``<out>/results/rerank_weight_<a>.md``) and ``ablations`` (``dr_weight_guard=none`` and
``simulator_eval_every=25`` each beside the default, in ``<out>/default``, ``<out>/guard_none`` and
``<out>/eval_every_25``, paired per test query in ``<out>/guard.md`` and
``<out>/k4_simulator_eval_every.md``).

1. prepares the LETOR partitions into ULTRA data directories (five-fold
   rotation, Rank SVM on 1% of the training queries, at least 20; skipped
   when present and prepared with the same recipe; ``--train-queries N``
   keeps a seeded sample of N training queries);
2. writes a runner config: cascade clicks with noise 0.1 for MQ2008's labels
   0..2 (or ``--click-model``), batch 256, N = 10, DNN [512, 256, 128], ``--steps`` ranker steps and
   as many simulator steps (the paper trains 10,000 of each); fresh clicks
   every step (the paper's protocol) plus fixed logs of K sessions per query
   (``--budgets``, for every method but Oracle and Rand-MULTR; with
   ``--no-fresh`` only those); a ``sample_num`` sweep for MULTR on the first
   fold; with ``--rerank-weights``, MULTR again at each fixed weight of the
   re-ranked term (``rerank_weight``) on every fold;
3. runs it with ``--workers`` parallel processes (resumable: re-running skips
   finished runs) and aggregates Table-2 style tables, significance markers,
   the DLA-to-Oracle gap closed and the Figure-3 plot into ``<out>/results``,
   with ``diagnostics.md`` beside them (the propensities DLA and MULTR learned
   and the simulator's held-out fit, :mod:`ultra_multr.experiments.diagnostics`),
   and prints ``<out>/results/summary.md``.  ``--dry-run`` prepares nothing
   and trains nothing: it prints the preparation command and the runs.

Defaults (Fold1, one seed, 1000 steps: 24 runs) take about an hour and a
half on 2 CPU cores; add folds and seeds for tighter tests.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys

from ultra_multr.data import prepare
from ultra_multr.files import atomic_write_text
from ultra_multr.experiments import compare, diagnostics
from ultra_multr.experiments.fold_study import rerank_weight_tables, study_config
from ultra_multr.experiments.runner import cli as runner
from ultra_multr.files import JsonFileError, read_json

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASCADE = os.path.join(REPO, "settings", "click_models", "cascade_eps0.1_ymax2.json")

#: The tables of the study's page: flag defaults over the script's own (the flags given win over them).
TABLES = {
    "table2": {"methods": ["oracle", "multr", "dla", "rem", "paird", "pal", "naive", "rand_multr", "eib_multr"],
               "budgets": [], "sweep": []},
    "budgets": {"methods": ["naive", "dla", "multr", "eib_multr"], "budgets": [1, 4, 16], "no_fresh": True,
                "sweep": []},
    "pbm": {"click_model": os.path.join(REPO, "settings", "click_models", "pbm_eta2_eps0.1_ymax2.json"),
            "methods": ["naive", "dla", "multr"], "budgets": [], "sweep": []},
    "small": {"train_queries": 30, "methods": ["dla", "multr"], "budgets": [], "sweep": [],
              "rerank_weights": ["paper", "0"], "multr_hparams": {"rerank_weight": "auto"}},
    "ablations": {"sweep": []},
}
#: Every table: five folds, three seeds.
TABLE_DEFAULTS = {"folds": [1, 2, 3, 4, 5], "seeds": [0, 1, 2]}
#: ``--table ablations``: (sub-folder of --out, flags) of its three studies; the flags given win over these.
ABLATIONS = [
    ("default", ["--methods", "dla", "multr", "--budgets", "4"]),
    ("guard_none", ["--methods", "multr", "--budgets", "--multr-hparams", "dr_weight_guard=none"]),
    ("eval_every_25", ["--methods", "multr", "--budgets", "4", "--no-fresh",
                       "--multr-hparams", "simulator_eval_every=25"]),
]


def needs_preparation(data_root: str, folds, options: prepare.PrepareOptions) -> list:
    """The folds whose data directory is missing or was prepared with another recipe."""
    missing = []
    for k in folds:
        path = os.path.join(data_root, "Fold%d" % k, prepare.REPORT_FILE)
        try:
            report = read_json(path, "preparation report")
        except JsonFileError:
            missing.append(k)
            continue
        if not prepare.made_with(report, options):
            missing.append(k)
    return missing


def _rerank_weight(text: str) -> str:
    """``paper`` or a number in [0, 1], kept as text (MULTR's ``rerank_weight`` hparam is a string)."""
    if text == "paper":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is neither 'paper' nor a number" % text) from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError("%r is outside [0, 1]" % text)
    return text


def _multr_hparams(text: str) -> dict:
    """``name=value,...`` checked against MULTR's hyper-parameters (unknown names get a "did you mean")."""
    from ultra_multr import MULTRConfig
    from ultra_multr.config import parse_hparams, split_assignments

    try:
        parse_hparams(MULTRConfig, text, source="--multr-hparams")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return dict((part.strip() for part in assignment.split("=", 1)) for assignment in split_assignments(text))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="folder with MQ2008's S1.txt ... S5.txt")
    parser.add_argument("--out", required=True)
    parser.add_argument("--table", choices=sorted(TABLES), help="one table of the study's page (see above)")
    parser.add_argument("--folds", type=int, nargs="+", default=[1])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="threads per run (the runner's --threads)")
    parser.add_argument("--budgets", type=int, nargs="*", default=[1, 4, 16])
    parser.add_argument("--methods", nargs="+", default=["oracle", "naive", "dla", "multr", "rand_multr", "eib_multr"])
    parser.add_argument("--sweep", type=int, nargs="*", default=[0, 2, 4, 8, 16, 32])
    parser.add_argument("--click-model", default=CASCADE, help="click model JSON (default: cascade, noise 0.1, y_max 2)")
    parser.add_argument("--no-fresh", action="store_true", help="only the fixed click logs of --budgets")
    parser.add_argument("--dry-run", action="store_true", help="prepare nothing, train nothing: list the runs")
    parser.add_argument(
        "--train-queries", type=int, default=None,
        help="keep a seeded sample of this many training queries per fold (default: all)",
    )
    parser.add_argument(
        "--rerank-weights", type=_rerank_weight, nargs="*", default=[],
        help="also run MULTR at these fixed rerank_weight values on every fold (e.g. paper 0)",
    )
    parser.add_argument(
        "--multr-hparams", type=_multr_hparams, default={},
        help="MULTR's (and EIB-MULTR's) hyper-parameters besides the defaults, e.g. 'dr_weight_guard=none' "
        "(an ablation: give it its own --out)",
    )
    table = parser.parse_known_args(argv)[0].table
    if table:
        parser.set_defaults(**TABLE_DEFAULTS, **TABLES[table])
    args = parser.parse_args(argv)
    if not os.path.isfile(args.click_model):
        parser.error("--click-model %s does not exist" % args.click_model)
    try:
        read_json(args.click_model, "click model")
    except JsonFileError as error:
        parser.error(str(error))
    return args


def run_study(args: argparse.Namespace) -> int:
    """Prepare, run and tabulate one study (one --out)."""
    out = os.path.abspath(args.out)
    data_root = os.path.join(out, "data")
    options = prepare.PrepareOptions(train_queries=args.train_queries)
    missing = needs_preparation(data_root, args.folds, options)
    if missing:
        prepare_argv = ["folds", "--partitions", args.data, "--out", data_root, "--folds", ",".join(map(str, missing))]
        if args.train_queries is not None:
            prepare_argv += ["--train-queries", str(args.train_queries)]
        if args.dry_run:
            print("would run: python -m ultra_multr.data.prepare %s" % " ".join(shlex.quote(a) for a in prepare_argv))
        else:
            code = prepare.main(prepare_argv)
            if code:
                return code
    config_path = os.path.join(out, "study.json")
    atomic_write_text(config_path, json.dumps(study_config(args, data_root), indent=2) + "\n")
    runner_argv = [config_path, "--workers", str(args.workers)] + (["--threads", str(args.threads)] if args.threads else [])
    code = runner.main(runner_argv + (["--dry-run"] if args.dry_run else []))
    runs = [] if args.dry_run else diagnostics.collect(os.path.join(out, "runs"))
    if runs:  # learned propensities and simulator fit per group, beside the tables
        atomic_write_text(os.path.join(out, "results", "diagnostics.md"), diagnostics.format_markdown(runs))
    summary = os.path.join(out, "results", "summary.md")
    if not args.dry_run and os.path.isfile(summary):
        with open(summary) as handle:
            print("\n" + handle.read())
    return code


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.table != "ablations":
        code = run_study(args)
        if args.table == "small" and not args.dry_run and not code:
            code = rerank_weight_tables(os.path.abspath(args.out))
        return code
    out = os.path.abspath(args.out)
    for name, flags in ABLATIONS:
        code = run_study(parse_args(flags + argv + ["--out", os.path.join(out, name)]))
        if code:
            return code
    if args.dry_run:
        return 0
    runs = {name: os.path.join(out, name, "runs") for name, _ in ABLATIONS}
    return compare.main([
        runs["guard_none"], runs["default"], "--method", "multr", "--against", "dla",
        "--label-before", "guard none", "--label-after", "guard clip", "--out", os.path.join(out, "guard.md"),
    ]) or compare.main([
        runs["eval_every_25"], runs["default"], "--method", "multr", "--against", "dla",
        "--variant-before", "sessions_per_query=4", "--variant-after", "sessions_per_query=4",
        "--label-before", "MULTR simulator_eval_every=25", "--label-after", "MULTR default (250)",
        "--out", os.path.join(out, "k4_simulator_eval_every.md"),
    ])


if __name__ == "__main__":
    sys.exit(main())
