"""The paper's Table 2, Figure 3 and Table 3 on the datasets it used.

Usage::

    # Table 2: simulated cascade clicks (epsilon 0.1, y_max 4), all nine methods
    python example/reproduce_paper.py --experiment table2 --dataset yahoo --data ltrc_yahoo/ --out out/paper
    python example/reproduce_paper.py --experiment table2 --dataset istella --data istella-s-letor/sample/ \
        --out out/paper
    # Figure 3: MULTR with sample_num 0, 2, 4, 8, 16, 24, 32
    python example/reproduce_paper.py --experiment figure3 --dataset yahoo --data ltrc_yahoo/ --out out/paper
    # Table 3: real Sogou clicks of Tiangong-ULTR
    python example/reproduce_paper.py --experiment table3 --data tiangong-ultr/ --out out/paper

    common options: [--steps 10000] [--simulator-steps 10000] [--seeds 0 1 2] [--workers 1]
                    [--learning-rate 0.05] [--steps-per-checkpoint 100] [--methods ...] [--dry-run]

What it does:

1. Data.  Yahoo! LETOR set 1 (``set1.train.txt``, ``set1.valid.txt``,
   ``set1.test.txt``) and Istella-S (``train.txt``, ``vali.txt``,
   ``test.txt``) are prepared with ``python -m ultra_multr.data.prepare
   splits`` into ``<out>/data/<dataset>``: min-max scaling to [-1, 1] (after
   ``sign(x) log1p|x|`` for Istella-S, as ULTRA's Istella-S pipeline does) and
   the initial ranking of a Rank SVM trained on 1% of the training queries.
   Skipped when ``<out>/data/<dataset>`` was prepared from the same files.
   Tiangong-ULTR is used as it comes (see below).
2. A runner config ``<out>/<experiment>_<dataset>.json`` with the paper's
   protocol: batch 256, N = 10 shown documents, DNN [512, 256, 128], Adagrad
   with learning rate 0.05 for every method, ``--steps`` ranker steps and
   ``--simulator-steps`` user-simulator steps (the paper: 10,000 each), fresh
   clicks every step, model selection on the validation split's nDCG@10.
   MULTR and EIB-MULTR of one dataset share one simulator checkpoint
   (``<out>/simulators/<dataset>.ckpt``): MULTR trains it once and reuses it
   whenever the simulator's settings and seed match (MULTR checks that),
   which saves a simulator training in every sweep value of Figure 3.
3. ``python -m ultra_multr.experiments.runner`` on that config with
   ``--workers`` processes: resumable, results (Markdown and CSV tables with
   the randomisation test against the best baseline, the DLA-to-Oracle gap
   closed, the Figure-3 PNG) in ``<out>/<experiment>/<dataset>/results``.
   ``--dry-run`` prepares nothing and trains nothing: it prints the
   preparation command and the runner's list of runs with their commands.

ULTRA's main.py stops at the first checkpoint *after* ``max_train_iteration``,
so each ranker trains ``--steps`` + ``--steps-per-checkpoint`` updates
(10,100 with the defaults).

Tiangong-ULTR (Table 3) is a real click log, so nothing is simulated: the
training feed is :class:`ultra_multr.feeds.ultre.UltreSessionFeed`,
which replays each logged list with its clicks on the displayed top 10
(``use_max_candidate_num=False``; MULTR's user simulator holds a seeded share
of these sessions out to score itself); the test split carries the human 0-4
labels.  The script expects a ULTRA data directory (``settings.json``,
``train/``, ``test/`` and optionally ``valid/``, each with
``<split>.feature``, ``<split>.init_list`` and ``<split>.labels``) in which
every ``train.init_list`` line is one logged list in displayed order and the
matching ``train.labels`` line its clicks (values in [0, 1]).  We could not
obtain the distributed files to confirm that this is how they come; the
script checks the layout and the label ranges and names the file and line of
anything else.  Without ``valid/``, the validation split is carved out of
the training queries (``--valid-fraction`` 0.1 of them, drawn with
``--valid-seed`` 0, all their logged lists; the training split keeps the
rest), never the test split: model selection (nDCG@10) and MULTR's
``rerank_weight=auto`` pilot then score on held-out queries' logged clicks,
a click-based proxy (clicks carry the logged ranker's position bias), and the
test labels choose nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set

import numpy as np

from ultra_multr.data.prepare import REPORT_FILE, PrepareOptions, made_with
from ultra_multr.files import atomic_write_text
from ultra_multr.experiments.runner import cli as runner

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASCADE = os.path.join(REPO, "settings", "click_models", "cascade_eps0.1_ymax4.json")

EXPERIMENTS = ("table2", "figure3", "table3")
TABLE2_METHODS = ["oracle", "multr", "dla", "rem", "paird", "pal", "naive", "rand_multr", "eib_multr"]
TABLE3_METHODS = ["multr", "dla", "rem", "paird", "pal", "naive"]
FIGURE3_SAMPLE_NUMS = [0, 2, 4, 8, 16, 24, 32]
#: Methods that need simulated clicks, refused on a real click log.
NEEDS_SIMULATED_CLICKS = {
    "oracle": "it trains on relevance labels, and Tiangong-ULTR's training split has only clicks",
    "ipw": "it takes its propensities from the click model that simulates the clicks",
    "multr_ipw": "it takes its propensities from the click model that simulates the clicks",
}
#: Methods that train the user simulator (they share its checkpoint).
SIMULATOR_METHODS = ("multr", "eib_multr")
#: Tiangong-ULTR without a valid/ split: the share of training queries held out
#: as validation, and its seed (--valid-fraction, --valid-seed).
VALID_FRACTION = 0.1
VALID_SEED = 0
#: What a data view of Tiangong-ULTR was built from (see :func:`tiangong_view`).
VIEW_MANIFEST = "view.json"
#: Table 3's training feed: every logged list replayed with its clicks.
SESSION_FEED = "ultra_multr.feeds.ultre.UltreSessionFeed"
SPLITS = ("train", "valid", "test")
#: The files of one split of a ULTRA data directory that main.py reads.
ULTRA_SUFFIXES = (".feature", ".init_list", ".labels")


@dataclass(frozen=True)
class LetorDataset:
    """A LETOR dataset distributed as train / valid / test files."""

    name: str  # dataset name in run folders and tables
    files: Dict[str, str]  # split -> file name inside --data
    log1p: bool  # sign(x) log1p|x| before scaling


LETOR_DATASETS = {
    "yahoo": LetorDataset(
        "Yahoo", {"train": "set1.train.txt", "valid": "set1.valid.txt", "test": "set1.test.txt"}, log1p=False
    ),
    "istella": LetorDataset("Istella-S", {"train": "train.txt", "valid": "vali.txt", "test": "test.txt"}, log1p=True),
}
TIANGONG = "Tiangong-ULTR"


class DataLayoutError(ValueError):
    """A dataset directory is not laid out as expected; the message names the path."""


# ----------------------------------------------------------------------------- LETOR data


def letor_files(dataset: LetorDataset, data: str) -> Dict[str, str]:
    """split -> absolute path of the raw file; refuses missing files."""
    paths = {split: os.path.abspath(os.path.join(data, name)) for split, name in dataset.files.items()}
    missing = [p for p in paths.values() if not os.path.isfile(p)]
    if missing:
        raise DataLayoutError(
            "%s: missing %s (expected %s in --data)"
            % (dataset.name, ", ".join(missing), ", ".join(dataset.files.values()))
        )
    return paths


def prepare_argv(dataset: LetorDataset, files: Dict[str, str], data_dir: str) -> List[str]:
    """The ``ultra_multr.data.prepare splits`` command that writes ``data_dir``."""
    argv = [sys.executable, "-m", "ultra_multr.data.prepare", "splits"]
    for split in SPLITS:
        argv += ["--%s" % split, files[split]]
    return argv + ["--out", data_dir] + (["--log1p"] if dataset.log1p else [])


def is_prepared(dataset: LetorDataset, files: Dict[str, str], data_dir: str) -> bool:
    """Whether ``data_dir`` was prepared from exactly these files and options."""
    try:
        with open(os.path.join(data_dir, REPORT_FILE)) as handle:
            report = json.load(handle)
    except (OSError, json.JSONDecodeError):
        return False
    sources = {split: [files[split]] for split in SPLITS}
    return report.get("sources") == sources and made_with(report, PrepareOptions(log1p=dataset.log1p))


# ----------------------------------------------------------------------------- Tiangong-ULTR


@dataclass(frozen=True)
class TiangongData:
    """A checked Tiangong-ULTR directory in ULTRA's format.

    Attributes:
        path: the directory (absolute).
        has_valid: whether it has a ``valid/`` split.
        feature_size, max_label: from its ``settings.json``.
        train_lists: logged lists in ``train/train.labels``.
        clicks_per_list: mean of the training labels' row sums.
    """

    path: str
    has_valid: bool
    feature_size: int
    max_label: float
    train_lists: int
    clicks_per_list: float


def _label_rows(path: str, low: float, high: float, what: str) -> List[float]:
    """Row sums of a ULTRA ``.labels`` file, refusing labels outside [low, high]."""
    sums = []
    with open(path) as handle:
        for number, line in enumerate(handle, 1):
            tokens = line.split()
            if not tokens:
                continue
            try:
                values = [float(t) for t in tokens[1:]]
            except ValueError:
                raise DataLayoutError("%s:%d: a label is not a number: %r" % (path, number, line.strip())) from None
            bad = [v for v in values if not low <= v <= high]
            if bad:
                raise DataLayoutError(
                    "%s:%d: label %g is outside [%g, %g]: %s" % (path, number, bad[0], low, high, what)
                )
            sums.append(sum(values))
    if not sums:
        raise DataLayoutError("%s: no list" % path)
    return sums


def check_tiangong(path: str, scan_labels: bool = True) -> TiangongData:
    """Check a Tiangong-ULTR directory in ULTRA's format (see the module doc).

    ``scan_labels`` reads every label file to check the ranges (training
    labels are clicks in [0, 1]; valid and test labels in [0, max_label]).
    """
    path = os.path.abspath(path)
    settings_path = os.path.join(path, "settings.json")
    if not os.path.isfile(settings_path):
        raise DataLayoutError(
            '%s is missing: ULTRA needs it; for Tiangong-ULTR (33 features, labels 0-4) it is '
            '{"feature_size": 33, "max_label": 4}' % settings_path
        )
    try:
        with open(settings_path) as handle:
            settings = json.load(handle)
    except json.JSONDecodeError as error:
        raise DataLayoutError("%s is not valid JSON: %s" % (settings_path, error)) from None
    for key in ("feature_size", "max_label"):
        if not isinstance(settings, dict) or key not in settings:
            raise DataLayoutError("%s has no %r" % (settings_path, key))
    has_valid = os.path.isdir(os.path.join(path, "valid"))
    splits = [s for s in SPLITS if s != "valid" or has_valid]
    for split in splits:
        for suffix in ULTRA_SUFFIXES:
            file_path = os.path.join(path, split, split + suffix)
            if not os.path.isfile(file_path):
                raise DataLayoutError(
                    "%s is missing (a ULTRA data directory has %s/%s%s)" % (file_path, split, split, suffix)
                )
    train_sums: List[float] = []
    if scan_labels:
        train_sums = _label_rows(
            os.path.join(path, "train", "train.labels"), 0.0, 1.0,
            "the training labels must be the logged clicks of each list (0/1, or click rates)",
        )
        for split in splits[1:]:
            _label_rows(
                os.path.join(path, split, split + ".labels"), 0.0, float(settings["max_label"]),
                "%s labels are human relevance grades up to settings.json's max_label" % split,
            )
    return TiangongData(
        path=path,
        has_valid=has_valid,
        feature_size=int(settings["feature_size"]),
        max_label=float(settings["max_label"]),
        train_lists=len(train_sums),
        clicks_per_list=sum(train_sums) / len(train_sums) if train_sums else float("nan"),
    )


def carve_validation(qids: Sequence[str], fraction: float, seed: int) -> Set[str]:
    """The training queries held out as the validation split: a seeded ``max(1, round(fraction * Q))``
    of the Q distinct qids (all of a held-out query's logged lists go to validation)."""
    distinct = sorted(set(qids))
    if len(distinct) < 2:
        raise DataLayoutError("cannot carve a validation split out of %d training query" % len(distinct))
    count = min(len(distinct) - 1, max(1, int(round(fraction * len(distinct)))))
    order = np.random.default_rng(seed).permutation(len(distinct))
    return {distinct[i] for i in order[:count]}


def _view_manifest(data: TiangongData, fraction: float, seed: int) -> dict:
    """What a view is built from: the source directory, how validation was made, the source files' sizes and times."""
    files = {}
    for split in ("train", "test") + (("valid",) if data.has_valid else ()):
        for suffix in ULTRA_SUFFIXES:
            stat = os.stat(os.path.join(data.path, split, split + suffix))
            files[split + "/" + split + suffix] = [stat.st_size, stat.st_mtime_ns]
    carve = None if data.has_valid else {"fraction": fraction, "seed": seed}
    return {"source": data.path, "carved_validation": carve, "files": files}


def tiangong_view(data: TiangongData, view: str, fraction: float = VALID_FRACTION, seed: int = VALID_SEED) -> int:
    """Make ``view`` the ULTRA data directory the runs read; returns the number of validation queries carved (0: none).

    With a ``valid/`` split in ``data.path`` every split is a symlink.
    Without one, validation must not be the test split (that would tune on
    it): :func:`carve_validation` holds a seeded share of the *training*
    queries out, their logged lists and clicks become ``valid/`` and the rest
    ``train/`` (``.init_list`` and ``.labels`` written, ``.feature`` a symlink to
    the training features: the indices stay valid); ``test/`` and
    ``settings.json`` are symlinks.  ``view/view.json`` records what the view
    was built from; a view built from the same files and share is reused,
    another one of ours rebuilt, anything else refused.
    """
    manifest = _view_manifest(data, fraction, seed)
    manifest_path = os.path.join(view, VIEW_MANIFEST)
    if os.path.lexists(view):
        try:
            with open(manifest_path) as handle:
                existing = json.load(handle)
        except (OSError, ValueError):
            raise DataLayoutError("%s exists and is not a data view written by this script (no %s)"
                                  % (view, VIEW_MANIFEST)) from None
        if {k: v for k, v in existing.items() if k != "valid_queries"} == manifest:
            return len(existing.get("valid_queries", []))
        shutil.rmtree(view)  # ours: symlinks and the carved lists, the source data is untouched
    tmp = view + ".tmp-%d" % os.getpid()
    os.makedirs(tmp)
    os.symlink(os.path.join(data.path, "settings.json"), os.path.join(tmp, "settings.json"))
    os.symlink(os.path.join(data.path, "test"), os.path.join(tmp, "test"))
    if data.has_valid:
        for split in ("train", "valid"):
            os.symlink(os.path.join(data.path, split), os.path.join(tmp, split))
    else:
        train = os.path.join(data.path, "train", "train")
        with open(train + ".init_list") as lists, open(train + ".labels") as labels:
            rows = [(lst, lab) for lst, lab in zip(lists, labels) if lst.strip()]
        held_out = carve_validation([lst.split()[0] for lst, _ in rows], fraction, seed)
        for split in ("train", "valid"):
            keep = [(lst, lab) for lst, lab in rows if (lst.split()[0] in held_out) == (split == "valid")]
            os.makedirs(os.path.join(tmp, split))
            os.symlink(train + ".feature", os.path.join(tmp, split, split + ".feature"))
            for suffix, column in ((".init_list", 0), (".labels", 1)):
                with open(os.path.join(tmp, split, split + suffix), "w") as handle:
                    handle.writelines(row[column] for row in keep)
        manifest["valid_queries"] = sorted(held_out)
    with open(os.path.join(tmp, VIEW_MANIFEST), "w") as handle:
        json.dump(manifest, handle, indent=1)
    os.rename(tmp, view)
    return len(manifest.get("valid_queries", []))


# ----------------------------------------------------------------------------- configs


def dataset_name(args: argparse.Namespace) -> str:
    return TIANGONG if args.experiment == "table3" else LETOR_DATASETS[args.dataset].name


def default_methods(experiment: str) -> List[str]:
    return {"table2": TABLE2_METHODS, "figure3": [], "table3": TABLE3_METHODS}[experiment]


def experiment_config(args: argparse.Namespace, data_dir: str) -> dict:
    """The runner config of ``args.experiment`` on the ULTRA data directory ``data_dir``."""
    name = dataset_name(args)
    out = os.path.abspath(args.out)
    methods = default_methods(args.experiment) if args.methods is None else list(args.methods)
    settings: Dict[str, object] = {
        "ranking_model_hparams": {"hidden_layer_sizes": [512, 256, 128]},
        "learning_algorithm_hparams": {"learning_rate": args.learning_rate, "log_every": 500},
    }
    if args.experiment == "table3":
        # Real clicks: each logged list replayed with its clicks, shown on the top N only.
        settings["train_input_feed"] = SESSION_FEED
        settings["train_input_hparams"] = {"use_max_candidate_num": False, "seed": 0}
    else:
        settings["train_input_hparams"] = {"click_model_json": CASCADE}
    sweeps = []
    if args.experiment == "figure3":
        sweeps.append(
            {
                "name": "sample_num",
                "methods": ["multr"],
                "section": "learning_algorithm_hparams",
                "parameter": "sample_num",
                "values": list(args.sample_nums),
            }
        )
    simulator = {
        "simulator_steps": args.simulator_steps,
        "simulator_log_every": 500,
        "simulator_checkpoint": os.path.join(out, "simulators", name + ".ckpt"),
    }
    trained = set(methods) | {m for sweep in sweeps for m in sweep["methods"]}
    return {
        "output_dir": os.path.join(out, args.experiment, name),
        "datasets": {name: os.path.abspath(data_dir)},
        "methods": methods,
        "seeds": list(args.seeds),
        "settings": settings,
        "method_overrides": {
            m: {"learning_algorithm_hparams": dict(simulator)} for m in SIMULATOR_METHODS if m in trained
        },
        "main_args": {
            "batch_size": 256,
            "max_train_iteration": args.steps,
            "steps_per_checkpoint": args.steps_per_checkpoint,
            "selection_bias_cutoff": 10,
        },
        "sweeps": sweeps,
    }


def config_path(args: argparse.Namespace) -> str:
    return os.path.join(os.path.abspath(args.out), "%s_%s.json" % (args.experiment, dataset_name(args)))


# ----------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiment", required=True, choices=EXPERIMENTS)
    parser.add_argument("--dataset", choices=sorted(LETOR_DATASETS), help="table2 / figure3: yahoo or istella")
    parser.add_argument(
        "--data", required=True,
        help="yahoo: folder of set1.{train,valid,test}.txt; istella: folder of {train,vali,test}.txt; "
        "table3: the Tiangong-ULTR ULTRA data directory",
    )
    parser.add_argument("--out", required=True, help="output root (data, simulators, configs, runs, results)")
    parser.add_argument("--steps", type=int, default=10000, help="ranker steps (paper: 10000)")
    parser.add_argument("--simulator-steps", type=int, default=10000, help="MULTR simulator steps (paper: 10000)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--workers", type=int, default=1, help="parallel runs (each holds its dataset in memory)")
    parser.add_argument("--learning-rate", type=float, default=0.05, help="every method's (paper: tuned in 0.01-0.05)")
    parser.add_argument("--steps-per-checkpoint", type=int, default=100, help="validation and model-selection interval")
    parser.add_argument("--methods", nargs="+", help="default: the paper's methods of the experiment")
    parser.add_argument("--sample-nums", type=int, nargs="+", default=FIGURE3_SAMPLE_NUMS, help="figure3 values")
    parser.add_argument("--valid-fraction", type=float, default=VALID_FRACTION,
                        help="table3 without valid/: share of training queries held out for validation")
    parser.add_argument("--valid-seed", type=int, default=VALID_SEED, help="table3: seed of that draw")
    parser.add_argument("--dry-run", action="store_true", help="print the preparation and the runs; run nothing")
    return parser


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.experiment == "table3":
        if args.dataset is not None:
            parser.error("table3 runs on Tiangong-ULTR: drop --dataset")
        refused = [m for m in args.methods or () if m in NEEDS_SIMULATED_CLICKS]
        if refused:
            parser.error(
                "; ".join("%s cannot run on real clicks: %s" % (m, NEEDS_SIMULATED_CLICKS[m]) for m in refused)
            )
    elif args.dataset is None:
        parser.error("%s needs --dataset (%s)" % (args.experiment, " or ".join(sorted(LETOR_DATASETS))))
    if not 0.0 < args.valid_fraction < 1.0:
        parser.error("--valid-fraction must be in (0, 1), got %g" % args.valid_fraction)
    for flag in ("steps", "simulator_steps", "steps_per_checkpoint", "workers"):
        if getattr(args, flag) < 1:
            parser.error("--%s must be >= 1" % flag.replace("_", "-"))
    return args


def prepare_data(args: argparse.Namespace) -> str:
    """Prepare or check the dataset; returns the data directory the runs read."""
    data_root = os.path.join(os.path.abspath(args.out), "data")
    if args.experiment == "table3":
        data = check_tiangong(args.data)
        carve = "" if data.has_valid else "; no valid/: %g of the training queries (seed %d) become validation" % (
            args.valid_fraction, args.valid_seed)
        print("%s: %d logged training lists, %.2f clicks per list, %d features, max label %g%s"
              % (data.path, data.train_lists, data.clicks_per_list, data.feature_size, data.max_label, carve))
        view = os.path.join(data_root, TIANGONG)
        if not args.dry_run:
            os.makedirs(data_root, exist_ok=True)
            carved = tiangong_view(data, view, args.valid_fraction, args.valid_seed)
            if carved:
                print("%s: validation = %d training queries held out" % (view, carved))
        return view
    dataset = LETOR_DATASETS[args.dataset]
    files = letor_files(dataset, args.data)
    data_dir = os.path.join(data_root, dataset.name)
    argv = prepare_argv(dataset, files, data_dir)
    if is_prepared(dataset, files, data_dir):
        print("%s: already prepared from these files" % data_dir)
    elif args.dry_run:
        print("would prepare: %s" % shlex.join(argv))
    else:
        print("preparing: %s" % shlex.join(argv), flush=True)
        if subprocess.run(argv).returncode != 0:
            raise DataLayoutError("data preparation failed (see its error above)")
    return data_dir


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        data_dir = prepare_data(args)
    except (ValueError, OSError) as error:  # DataLayoutError names the file
        print("error: %s" % error, file=sys.stderr)
        return 2
    path = config_path(args)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write_text(path, json.dumps(experiment_config(args, data_dir), indent=2) + "\n")
    print("runner config: %s" % path, flush=True)
    return runner.main([path, "--workers", str(args.workers)] + (["--dry-run"] if args.dry_run else []))


if __name__ == "__main__":
    sys.exit(main())
