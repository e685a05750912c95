"""Run methods x datasets x folds x seeds (and sweeps) from one JSON config.

Each run lives in ``<output_dir>/runs/<dataset>/<fold>/<method>[/<variant>]/seed<k>/``:

* ``settings.json`` (the ULTRA settings, from the method registry) and
  ``run.json`` (what the run is: dataset, fold, method, role, sweep, seed);
* ``train.stdout`` / ``train.stderr``: ULTRA's ``main.py`` (through
  :mod:`.seeded_main`), training into ``model/``;
* ``evaluate.stdout`` / ``evaluate.stderr`` and the files of
  :mod:`.evaluate` (per-query metrics, TREC run, qrels, metrics.json);
* ``done.json``, written last and atomically: its presence (with the same
  configuration fingerprint, and the same data: a hash of the data folder's
  ``prepare_report.json`` when it has one) marks the run finished, so a
  second invocation skips it; finished under another configuration or on
  re-prepared data, it is refused ("stale"), never silently reused.  An unfinished run's folder is wiped and the run started again;
  a failed run leaves ``failed.json`` and the other runs go on.

Runs execute in parallel up to ``--workers``; every subprocess gets
``OMP/MKL/OPENBLAS_NUM_THREADS`` = ``--threads N`` if given, else the
runner's own ``OMP_NUM_THREADS`` if set, else ``max(1, cores // workers)``.
Afterwards the results are aggregated into ``<output_dir>/results`` (see
:mod:`.aggregate`).

One runner per output folder: ``<output_dir>/runner.lock`` names the
holder's pid and host; a second runner refuses, and a lock whose pid is dead
on this host is taken over (with a warning).  Every step runs in its own
process group; SIGINT / SIGTERM to the runner kill those groups, on Linux a
child also gets SIGKILL when the runner dies (``PR_SET_PDEATHSIG``), and a
restarted runner kills a step still running in a run folder (recorded in
``step.json``) before it wipes that folder.  Progress goes to tqdm and to
``<output_dir>/runner.log``.

Config (JSON; relative paths are relative to the config file)::

    {
      "output_dir": "out/mq2008",
      "datasets": {"mq2008": {"Fold1": "data/mq2008/Fold1", "Fold2": "data/mq2008/Fold2"}},
      "methods": ["oracle", "naive", "dla", "multr"],
      "seeds": [0, 1],
      "settings": {"train_input_hparams": {"click_model_json": "cascade.json"},
                   "learning_algorithm_hparams": {"learning_rate": 0.05}},
      "method_overrides": {"multr": {"learning_algorithm_hparams": {"sample_num": 8}}},
      "main_args": {"batch_size": 256, "max_train_iteration": 2000},
      "sweeps": [{"name": "sample_num", "methods": ["multr"],
                  "section": "learning_algorithm_hparams", "parameter": "sample_num",
                  "values": [0, 2, 4, 8]}]
    }

Other keys: ``main_py`` (default: ``$ULTRA_MAIN``, else next to the ``ultra``
package), ``python``
(default: this interpreter), ``eval_split`` (default "test"),
``extra_methods`` ({name: {label, role, learning_algorithm,
learning_algorithm_hparams, train_input_hparams}}), ``significance``
({alpha, n_permutations, seed}).  A dataset given as a string is one fold
named "all".  Each run's seed is also passed as ``seed=`` in
``learning_algorithm_hparams`` and ``train_input_hparams`` unless the config
sets one there (e.g. to keep one click log across seeds).  A sweep may add ``folds`` (run only on those folds) and ``overrides`` (sections applied to all its
values); its ``section`` may be ``main_args``.  Hparam values whose name ends
in ``_json``, ``_path``, ``_file`` or ``_dir`` are paths.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..data.prepare import REPORT_FILE as PREPARE_REPORT
from ..data.ultra_format import atomic_write_text, ultra_data_dir
from ..session_budget import read_summary as read_session_budget
from . import methods as registry
from .evaluate import PER_QUERY_CSV
from .jsonfile import JsonFileError, read_json

logger = logging.getLogger(__name__)

DONE_FILE = "done.json"
LOCK_FILE = "runner.lock"
LOG_FILE = "runner.log"
#: The running step of a run folder: its process group, host and cwd.
STEP_FILE = "step.json"
#: Seconds between SIGTERM and SIGKILL when stopping a step's process group.
KILL_GRACE_S = 5.0
FAILED_FILE = "failed.json"
RUN_FILE = "run.json"
SETTINGS_FILE = "settings.json"

#: main.py flags a config may set, with their types.  The boolean flags
#: (--test_only, --test_while_train) are left out: main.py parses them with
#: type=bool, and the runner evaluates with :mod:`.evaluate` instead.
MAIN_ARGS = {
    "batch_size": int,
    "max_train_iteration": int,
    "steps_per_checkpoint": int,
    "start_saving_iteration": int,
    "selection_bias_cutoff": int,
    "max_list_cutoff": int,
}
#: Hparam sections that get ``seed=<run seed>`` unless the config sets one
#: (ultra_multr's algorithms and feeds take a seed; ULTRA's ignore unknown names).
SEEDED_SECTIONS = ("learning_algorithm_hparams", "train_input_hparams")
DEFAULT_MAIN_ARGS = {"batch_size": 256, "max_train_iteration": 10000, "steps_per_checkpoint": 50}
_CONFIG_KEYS = {
    "output_dir", "datasets", "methods", "seeds", "settings", "method_overrides", "main_args", "sweeps",
    "main_py", "python", "eval_split", "extra_methods", "significance",
}
_SWEEP_KEYS = {"name", "methods", "section", "parameter", "values", "overrides", "folds"}
_PATH_SUFFIXES = ("_json", "_path", "_file", "_dir")


class ConfigError(ValueError):
    """The experiment config is invalid; the message names the entry."""


@dataclass(frozen=True)
class Sweep:
    name: str
    methods: Tuple[str, ...]
    section: str
    parameter: str
    values: Tuple[Any, ...]
    overrides: Mapping[str, Any]
    #: folds the sweep runs on (empty: every fold of every dataset)
    folds: Tuple[str, ...] = ()


@dataclass
class ExperimentConfig:
    """A validated config (see the module docstring); paths are absolute."""

    path: str
    output_dir: str
    datasets: Dict[str, Dict[str, str]]
    methods: List[str]
    seeds: List[int]
    settings: Dict[str, Any]
    method_overrides: Dict[str, Dict[str, Any]]
    main_args: Dict[str, int]
    sweeps: List[Sweep]
    main_py: Optional[str]
    python: str
    eval_split: str
    significance: Dict[str, Any]

    @property
    def runs_dir(self) -> str:
        return os.path.join(self.output_dir, "runs")

    @property
    def results_dir(self) -> str:
        return os.path.join(self.output_dir, "results")


@dataclass
class RunSpec:
    """One training + evaluation run.

    Attributes:
        settings: the ULTRA settings dict written to ``settings.json``.
        main_args: main.py flags (name -> value).
        info: what goes into ``run.json`` (dataset, fold, method, label, role,
            order, variant, sweep, seed, data_dir).
    """

    run_dir: str
    data_dir: str
    seed: int
    method: str
    settings: Dict[str, Any]
    main_args: Dict[str, int]
    info: Dict[str, Any]
    main_py: Optional[str] = None
    python: str = sys.executable
    eval_split: str = "test"
    fingerprint: str = field(init=False)
    #: hash of the data folder's prepare_report.json ("" without one); kept out of
    #: the fingerprint so that runs finished before it existed stay valid
    data_id: str = field(init=False)

    def __post_init__(self) -> None:
        payload = json.dumps(
            [self.data_dir, self.seed, self.settings, self.main_args, self.eval_split], sort_keys=True
        )
        self.fingerprint = hashlib.sha256(payload.encode()).hexdigest()[:16]
        self.data_id = data_identity(self.data_dir)

    @property
    def tag(self) -> str:
        parts = [self.info["method"], self.info.get("variant") or "", "seed%d" % self.seed]
        return _safe_name("_".join(p for p in parts if p))


#: (step name, argv) pairs a run executes in order, in its folder.
Steps = List[Tuple[str, List[str]]]
CommandFactory = Callable[[RunSpec], Steps]


# ----------------------------------------------------------------------------- config


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=+-]", "_", str(text))


def _require(condition: bool, path: str, message: str) -> None:
    if not condition:
        raise ConfigError("%s: %s" % (path, message))


def _resolve(base_dir: str, path: str) -> str:
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(base_dir, path))


def _resolve_hparam_paths(sections: Mapping[str, Any], base_dir: str) -> Dict[str, Any]:
    sections = copy.deepcopy(dict(sections))
    for key in registry.HPARAM_SECTIONS:
        for name, value in list(sections.get(key, {}).items()):
            if isinstance(value, str) and name.endswith(_PATH_SUFFIXES):
                sections[key][name] = _resolve(base_dir, value)
    return sections


def _check_sections(sections: Any, where: str, allow_main_args: bool = False) -> None:
    allowed = set(registry.DEFAULT_SECTIONS) | ({"main_args"} if allow_main_args else set())
    _require(isinstance(sections, dict), where, "expected an object, got %r" % (sections,))
    for key, value in sections.items():
        _require(key in allowed, where, "unknown section %r; known: %s" % (key, ", ".join(sorted(allowed))))
        if key in registry.HPARAM_SECTIONS or key == "main_args":
            _require(isinstance(value, dict), "%s.%s" % (where, key), "expected an object of name: value")
        if key == "main_args":
            _check_main_args(value, "%s.main_args" % where)


def _check_main_args(values: Mapping[str, Any], where: str) -> None:
    for name, value in values.items():
        _require(name in MAIN_ARGS, where, "unsupported main.py flag %r; supported: %s" % (name, ", ".join(MAIN_ARGS)))
        _require(isinstance(value, int) and not isinstance(value, bool), "%s.%s" % (where, name), "expected an integer")


def merge_sections(base: Mapping[str, Any], override: Mapping[str, Any]) -> Dict[str, Any]:
    """``override`` on top of ``base``; dictionary sections merge key by key."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **copy.deepcopy(value)}
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _register_extra_methods(extra: Any, where: str) -> None:
    _require(isinstance(extra, dict), where, "expected an object of name: method")
    for name, spec in extra.items():
        at = "%s.%s" % (where, name)
        _require(isinstance(spec, dict), at, "expected an object")
        unknown = set(spec) - {"label", "role", "learning_algorithm", "learning_algorithm_hparams", "train_input_hparams"}
        _require(not unknown, at, "unknown keys %s" % sorted(unknown))
        _require(isinstance(spec.get("learning_algorithm"), str), at, "needs learning_algorithm (a class path)")
        try:
            registry.register_algorithm_method(
                name,
                spec.get("label", name),
                spec.get("role", registry.BASELINE),
                spec["learning_algorithm"],
                spec.get("learning_algorithm_hparams", {}),
                spec.get("train_input_hparams", {}),
                replace=True,
            )
        except ValueError as error:
            raise ConfigError("%s: %s" % (at, error)) from None


def _parse_sweep(raw: Any, where: str, base_dir: str) -> Sweep:
    _require(isinstance(raw, dict), where, "expected an object")
    unknown = set(raw) - _SWEEP_KEYS
    _require(not unknown, where, "unknown keys %s; known: %s" % (sorted(unknown), sorted(_SWEEP_KEYS)))
    for key in ("name", "methods", "section", "parameter", "values"):
        _require(key in raw, where, "missing %r" % key)
    section = raw["section"]
    _require(
        section in registry.HPARAM_SECTIONS or section == "main_args",
        where + ".section",
        "%r is not an hparam section or main_args; choose from %s"
        % (section, ", ".join(registry.HPARAM_SECTIONS + ("main_args",))),
    )
    _require(isinstance(raw["values"], list) and raw["values"], where + ".values", "expected a non-empty list")
    _require(isinstance(raw["methods"], list) and raw["methods"], where + ".methods", "expected a non-empty list")
    overrides = raw.get("overrides", {})
    _check_sections(overrides, where + ".overrides", allow_main_args=True)
    if section == "main_args":
        for value in raw["values"]:
            _check_main_args({raw["parameter"]: value}, where + ".values")
    return Sweep(
        name=_safe_name(raw["name"]),
        methods=tuple(raw["methods"]),
        section=section,
        parameter=raw["parameter"],
        values=tuple(raw["values"]),
        overrides=_resolve_hparam_paths(overrides, base_dir),
        folds=tuple(_safe_name(f) for f in raw.get("folds", ())),
    )


def load_config(path: str) -> ExperimentConfig:
    """Read and validate an experiment config.

    Raises:
        ConfigError: naming the file and the offending entry.
        UnknownMethodError: a method is not registered (lists the known ones).
    """
    path = os.path.abspath(path)
    base_dir = os.path.dirname(path)
    try:
        raw = read_json(path, "experiment config")
    except JsonFileError as error:
        raise ConfigError(str(error)) from None
    _require(isinstance(raw, dict), path, "the config must be a JSON object")
    unknown = set(raw) - _CONFIG_KEYS
    _require(not unknown, path, "unknown keys %s; known: %s" % (sorted(unknown), ", ".join(sorted(_CONFIG_KEYS))))
    for key in ("output_dir", "datasets", "methods"):
        _require(key in raw, path, "missing %r" % key)
    if "extra_methods" in raw:
        _register_extra_methods(raw["extra_methods"], path + ": extra_methods")

    datasets: Dict[str, Dict[str, str]] = {}
    _require(isinstance(raw["datasets"], dict) and raw["datasets"], path + ": datasets", "expected a non-empty object")
    for name, folds in raw["datasets"].items():
        folds = {"all": folds} if isinstance(folds, str) else folds
        _require(isinstance(folds, dict) and folds, "%s: datasets.%s" % (path, name), "expected a path or {fold: path}")
        datasets[_safe_name(name)] = {_safe_name(f): _resolve(base_dir, d) for f, d in folds.items()}

    methods = raw["methods"]
    _require(isinstance(methods, list), path + ": methods", "expected a list of names")
    sweeps = [_parse_sweep(s, "%s: sweeps[%d]" % (path, i), base_dir) for i, s in enumerate(raw.get("sweeps", []))]
    overrides = raw.get("method_overrides", {})
    _require(isinstance(overrides, dict), path + ": method_overrides", "expected an object")
    for name in list(methods) + [m for s in sweeps for m in s.methods] + list(overrides):
        registry.get_method(name)
    for name, sections in overrides.items():
        _check_sections(sections, "%s: method_overrides.%s" % (path, name), allow_main_args=True)

    settings = raw.get("settings", {})
    _check_sections(settings, path + ": settings")
    main_args = {**DEFAULT_MAIN_ARGS, **raw.get("main_args", {})}
    _check_main_args(main_args, path + ": main_args")
    seeds = raw.get("seeds", [0])
    _require(
        isinstance(seeds, list) and seeds and all(isinstance(s, int) and not isinstance(s, bool) for s in seeds),
        path + ": seeds",
        "expected a non-empty list of integers",
    )
    significance = raw.get("significance", {})
    _require(isinstance(significance, dict), path + ": significance", "expected an object")
    unknown = set(significance) - {"alpha", "n_permutations", "seed"}
    _require(not unknown, path + ": significance", "unknown keys %s; known: alpha, n_permutations, seed" % sorted(unknown))
    main_py = raw.get("main_py")
    return ExperimentConfig(
        path=path,
        output_dir=_resolve(base_dir, raw["output_dir"]),
        datasets=datasets,
        methods=list(methods),
        seeds=list(seeds),
        settings=_resolve_hparam_paths(merge_sections(registry.DEFAULT_SECTIONS, settings), base_dir),
        method_overrides={m: _resolve_hparam_paths(s, base_dir) for m, s in overrides.items()},
        main_args=main_args,
        sweeps=sweeps,
        main_py=_resolve(base_dir, main_py) if main_py else None,
        python=raw.get("python", sys.executable),
        eval_split=raw.get("eval_split", "test"),
        significance=dict(significance),
    )


# ----------------------------------------------------------------------------- runs


def _format_value(value: Any) -> str:
    return ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)


def _make_run(
    config: ExperimentConfig, dataset: str, fold: str, data_dir: str, method_name: str, seed: int,
    sweep: Optional[Sweep] = None, value: Any = None,
) -> RunSpec:
    method = registry.get_method(method_name)
    sections = merge_sections(config.settings, config.method_overrides.get(method_name, {}))
    main_args = {**config.main_args, **sections.pop("main_args", {})}
    variant = None
    if sweep is not None:
        sections = merge_sections(sections, sweep.overrides)
        main_args.update(sections.pop("main_args", {}))
        if sweep.section == "main_args":
            main_args[sweep.parameter] = value
        else:
            setting = value
            if isinstance(value, str) and sweep.parameter.endswith(_PATH_SUFFIXES):
                setting = _resolve(os.path.dirname(config.path), value)
            sections = merge_sections(sections, {sweep.section: {sweep.parameter: setting}})
        variant = _safe_name("%s=%s" % (sweep.parameter, _format_value(value)))
    for key in SEEDED_SECTIONS:  # unless the config pins a seed there
        sections[key] = {"seed": seed, **sections.get(key, {})}
    params = registry.RunParameters(dataset=dataset, fold=fold, seed=seed, sections=sections)
    run_dir = os.path.join(config.runs_dir, dataset, fold, method_name, *([variant] if variant else []), "seed%d" % seed)
    info = {
        "dataset": dataset,
        "fold": fold,
        "method": method_name,
        "label": method.label,
        "role": method.role,
        "order": registry.table_order(method_name),
        "variant": variant,
        "sweep": None if sweep is None else {"name": sweep.name, "parameter": sweep.parameter, "value": value},
        "seed": seed,
        "data_dir": data_dir,
    }
    return RunSpec(
        run_dir=run_dir,
        data_dir=data_dir,
        seed=seed,
        method=method_name,
        settings=method.make_settings(params),
        main_args=main_args,
        info=info,
        main_py=config.main_py,
        python=config.python,
        eval_split=config.eval_split,
    )


def expand_runs(config: ExperimentConfig) -> List[RunSpec]:
    """Every run of the config: methods x datasets x folds x seeds, then the sweeps."""
    runs = []
    for dataset, folds in config.datasets.items():
        for fold, data_dir in folds.items():
            for seed in config.seeds:
                for method in config.methods:
                    runs.append(_make_run(config, dataset, fold, data_dir, method, seed))
                for sweep in config.sweeps:
                    if sweep.folds and fold not in sweep.folds:
                        continue
                    for method in sweep.methods:
                        for value in sweep.values:
                            runs.append(_make_run(config, dataset, fold, data_dir, method, seed, sweep, value))
    seen: Dict[str, RunSpec] = {}
    for run in runs:
        if run.run_dir in seen:
            raise ConfigError("%s: two runs share the folder %s" % (config.path, run.run_dir))
        seen[run.run_dir] = run
    return runs


def find_main_py(configured: Optional[str] = None) -> str:
    """ULTRA's main.py: the configured path, else ``$ULTRA_MAIN``, else next to the ``ultra`` package."""
    configured = configured or os.environ.get("ULTRA_MAIN")
    if configured:
        if not os.path.isfile(configured):
            raise FileNotFoundError("ULTRA's main.py %s does not exist" % configured)
        return configured
    import ultra

    candidate = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(ultra.__file__))), "main.py")
    if not os.path.isfile(candidate):
        raise FileNotFoundError("ULTRA's main.py is not next to the ultra package (%s); set main_py" % candidate)
    return candidate


def default_commands(run: RunSpec) -> Steps:
    """Train with ULTRA's main.py (seeded), then evaluate on the eval split."""
    train = [
        run.python, "-m", "ultra_multr.experiments.seeded_main", "--seed", str(run.seed), find_main_py(run.main_py),
        "--data_dir", ultra_data_dir(run.data_dir),
        "--setting_file", os.path.join(run.run_dir, SETTINGS_FILE),
        "--model_dir", os.path.join(run.run_dir, "model", ""),
        "--output_dir", os.path.join(run.run_dir, "output", ""),
    ]
    for name, value in run.main_args.items():
        train += ["--%s" % name, str(value)]
    evaluate = [
        run.python, "-m", "ultra_multr.experiments.evaluate",
        "--data_dir", run.data_dir, "--split", run.eval_split,
        "--setting_file", os.path.join(run.run_dir, SETTINGS_FILE),
        "--model_dir", os.path.join(run.run_dir, "model"),
        "--out", run.run_dir, "--tag", run.tag,
    ]
    return [("train", train), ("evaluate", evaluate)]


def data_identity(data_dir: str) -> str:
    """A hash of ``<data_dir>/prepare_report.json`` (what the data was prepared from and how), "" without one."""
    try:
        with open(os.path.join(data_dir, PREPARE_REPORT), "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()[:16]
    except OSError:
        return ""


def run_status(run: RunSpec) -> str:
    """"done", "pending", or "stale" (finished under a different configuration or on other data)."""
    path = os.path.join(run.run_dir, DONE_FILE)
    if not os.path.isfile(path):
        return "pending"
    try:
        with open(path) as handle:
            done = json.load(handle)
    except (OSError, json.JSONDecodeError):
        return "pending"
    # done.json of runs finished before data_id was recorded has no "data": their data is not checked.
    same_data = done.get("data", run.data_id) == run.data_id
    return "done" if done.get("fingerprint") == run.fingerprint and same_data else "stale"


def resolve_threads(workers: int, threads: Optional[int] = None, environ: Mapping[str, str] = os.environ) -> int:
    """Threads per subprocess: ``threads`` if given, else ``$OMP_NUM_THREADS``, else cores // workers."""
    if threads is not None:
        if threads < 1:
            raise ValueError("--threads must be >= 1, got %d" % threads)
        return threads
    configured = environ.get("OMP_NUM_THREADS", "").strip()
    if configured:
        try:
            value = int(configured)
        except ValueError:
            raise ValueError("OMP_NUM_THREADS=%r is not an integer" % configured) from None
        if value < 1:
            raise ValueError("OMP_NUM_THREADS=%r must be >= 1" % configured)
        return value
    return max(1, (os.cpu_count() or 1) // workers)


def _thread_env(threads: int, seed: int) -> Dict[str, str]:
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = str(threads)
    env["PYTHONHASHSEED"] = str(seed)
    return env


def _tail(path: str, lines: int = 20) -> str:
    with open(path, errors="replace") as handle:
        return "".join(handle.readlines()[-lines:])


# ----------------------------------------------------------------------------- processes


class RunnerLockError(RuntimeError):
    """Another runner holds the output folder; the message names its pid and host."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class RunnerLock:
    """``<folder>/runner.lock``: one runner per output folder (a context manager).

    The file (created exclusively) holds ``{"pid", "host", "started"}``.  A
    lock held by a live pid, or by a pid on another host (which this host
    cannot check), is refused; a lock of a dead pid on this host is stale and
    is taken over with a warning.
    """

    def __init__(self, folder: str) -> None:
        self.path = os.path.join(folder, LOCK_FILE)
        self.me = {"pid": os.getpid(), "host": socket.gethostname()}

    def __enter__(self) -> "RunnerLock":
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder.get("host") == self.me["host"] and isinstance(holder.get("pid"), int) \
                        and not _pid_alive(holder["pid"]):
                    logger.warning(
                        "%s: taking over the stale lock of pid %d on %s (no longer running)",
                        self.path, holder["pid"], holder["host"],
                    )
                    os.remove(self.path)
                    continue
                raise RunnerLockError(
                    "%s is in use by another runner: pid %s on host %s since %s (remove %s only if that runner is gone)"
                    % (os.path.dirname(self.path), holder.get("pid"), holder.get("host"), holder.get("started"), self.path)
                ) from None
            with os.fdopen(fd, "w") as handle:
                json.dump({**self.me, "started": time.strftime("%Y-%m-%d %H:%M:%S")}, handle)
            return self
        raise RunnerLockError("%s: could not take the lock (another runner raced for it)" % self.path)

    def _holder(self) -> Dict[str, Any]:
        try:
            with open(self.path) as handle:
                holder = json.load(handle)
            return holder if isinstance(holder, dict) else {}
        except (OSError, json.JSONDecodeError):  # being written, or garbage
            return {}

    def __exit__(self, *exc: Any) -> None:
        holder = self._holder()
        if holder.get("pid") == self.me["pid"] and holder.get("host") == self.me["host"]:
            os.remove(self.path)


def _load_prctl() -> Optional[Callable[..., int]]:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl


#: Resolved in the parent, so that the forked child only makes one C call.
_PRCTL = _load_prctl()
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """preexec_fn: on Linux, SIGKILL this child when the runner thread that started it dies."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, int(signal.SIGKILL))


def kill_group(pgid: int, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM the process group, then SIGKILL it if it is still there after ``grace_s``."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + wait
        while time.time() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


class _Children:
    """The process groups of the running steps, so that a signal can end them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set = set()
        self.stopping = False

    def start(self, argv: List[str], **kwargs: Any) -> subprocess.Popen:
        with self._lock:
            if self.stopping:
                raise KeyboardInterrupt("the runner is stopping")
            process = subprocess.Popen(argv, start_new_session=True, preexec_fn=_die_with_parent, **kwargs)
            self._groups.add(process.pid)
        return process

    def finished(self, process: subprocess.Popen) -> None:
        with self._lock:
            self._groups.discard(process.pid)

    def kill_all(self) -> None:
        with self._lock:
            self.stopping = True
            groups = list(self._groups)
        for pgid in groups:
            kill_group(pgid)


_CHILDREN = _Children()


def _kill_leftover_step(run_dir: str) -> None:
    """Kill a step an earlier runner left running in ``run_dir`` (same host, cwd still ``run_dir``)."""
    try:
        with open(os.path.join(run_dir, STEP_FILE)) as handle:
            step = json.load(handle)
    except (OSError, json.JSONDecodeError):
        return
    pgid = step.get("pgid")
    if step.get("host") != socket.gethostname() or not isinstance(pgid, int) or not _pid_alive(pgid):
        return
    try:  # the pid may have been reused: only kill a process working in this run folder
        if os.path.realpath(os.readlink("/proc/%d/cwd" % pgid)) != os.path.realpath(run_dir):
            return
    except OSError:
        return
    logger.warning("%s: killing process group %d left running by an earlier runner", run_dir, pgid)
    kill_group(pgid)


def execute_run(run: RunSpec, commands: CommandFactory, threads: int) -> Optional[str]:
    """Run one pending run; returns None on success, else a one-line reason."""
    if os.path.isdir(run.run_dir):  # left over from an interrupted or failed attempt
        _kill_leftover_step(run.run_dir)
        shutil.rmtree(run.run_dir)
    os.makedirs(run.run_dir)
    atomic_write_text(os.path.join(run.run_dir, SETTINGS_FILE), json.dumps(run.settings, indent=1) + "\n")
    atomic_write_text(
        os.path.join(run.run_dir, RUN_FILE),
        json.dumps({**run.info, "fingerprint": run.fingerprint, "main_args": run.main_args}, indent=1) + "\n",
    )
    started = time.time()
    timings = {}
    for step, argv in commands(run):
        step_start = time.time()
        out_path = os.path.join(run.run_dir, step + ".stdout")
        err_path = os.path.join(run.run_dir, step + ".stderr")
        with open(out_path, "w") as out, open(err_path, "w") as err:
            process = _CHILDREN.start(
                argv, cwd=run.run_dir, env=_thread_env(threads, run.seed), stdout=out, stderr=err, stdin=subprocess.DEVNULL
            )
            try:
                atomic_write_text(
                    os.path.join(run.run_dir, STEP_FILE),
                    json.dumps({"step": step, "pgid": process.pid, "host": socket.gethostname()}) + "\n",
                )
                code = process.wait()
            finally:
                if process.poll() is None:
                    kill_group(process.pid)
                _CHILDREN.finished(process)
        os.remove(os.path.join(run.run_dir, STEP_FILE))
        timings[step] = round(time.time() - step_start, 2)
        if code != 0:
            reason = "step %r exited with code %d (see %s)" % (step, code, err_path)
            atomic_write_text(
                os.path.join(run.run_dir, FAILED_FILE),
                json.dumps({"reason": reason, "argv": argv, "stderr_tail": _tail(err_path)}, indent=1) + "\n",
            )
            return reason
    if not os.path.isfile(os.path.join(run.run_dir, PER_QUERY_CSV)):
        return "the steps finished but wrote no %s" % PER_QUERY_CSV
    done = {"fingerprint": run.fingerprint, "data": run.data_id, "seconds": round(time.time() - started, 2), "step_seconds": timings,
            "sessions": read_session_budget(run.run_dir)}
    atomic_write_text(os.path.join(run.run_dir, DONE_FILE), json.dumps(done, indent=1) + "\n")
    return None


@dataclass
class RunReport:
    skipped: int
    finished: int
    failed: Dict[str, str]  # run_dir -> reason


def _progress_logger(output_dir: str) -> Tuple[logging.Logger, logging.Handler]:
    """A logger that appends to ``<output_dir>/runner.log`` (and propagates to the root logger)."""
    handler = logging.FileHandler(os.path.join(output_dir, LOG_FILE))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    progress = logging.getLogger(__name__ + ".progress")
    progress.setLevel(logging.INFO)
    progress.addHandler(handler)
    return progress, handler


def _on_signal(signum: int, frame: Any) -> None:
    logger.warning("signal %d: stopping the running steps", signum)
    _CHILDREN.kill_all()
    raise KeyboardInterrupt("signal %d" % signum)


def run_all(
    runs: Sequence[RunSpec],
    output_dir: str,
    workers: int = 1,
    commands: CommandFactory = default_commands,
    progress: bool = True,
    threads: Optional[int] = None,
) -> RunReport:
    """Execute the pending runs, ``workers`` at a time, skipping finished ones.

    Holds ``<output_dir>/runner.lock`` throughout and logs progress to
    ``<output_dir>/runner.log``.  SIGINT / SIGTERM (when called from the main
    thread) kill the running steps' process groups and raise KeyboardInterrupt.

    Args:
        threads: OMP/MKL/OpenBLAS threads per step (see :func:`resolve_threads`).

    Raises:
        ConfigError: some run folders were finished under a different
            configuration (nothing is started then).
        RunnerLockError: another runner works in ``output_dir``.
    """
    if workers < 1:
        raise ValueError("workers must be >= 1, got %d" % workers)
    threads = resolve_threads(workers, threads)
    with RunnerLock(output_dir):
        statuses = [run_status(run) for run in runs]
        stale = [run.run_dir for run, status in zip(runs, statuses) if status == "stale"]
        if stale:
            raise ConfigError(
                "%d run folder(s) were finished with a different configuration or on other data (re-prepared); "
                "delete them or change output_dir: %s"
                % (len(stale), ", ".join(stale))
            )
        pending = [run for run, status in zip(runs, statuses) if status == "pending"]
        in_main = threading.current_thread() is threading.main_thread()
        previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)} if in_main else {}
        _CHILDREN.stopping = False
        log, handler = _progress_logger(output_dir)
        try:
            failed = _run_pending(pending, workers, commands, threads, progress, log, len(runs))
        finally:
            for sig, handler_before in previous.items():
                signal.signal(sig, handler_before)
            log.removeHandler(handler)
            handler.close()
    return RunReport(skipped=len(runs) - len(pending), finished=len(pending) - len(failed), failed=failed)


def _run_pending(
    pending: Sequence[RunSpec], workers: int, commands: CommandFactory, threads: int, progress: bool,
    log: logging.Logger, total: int,
) -> Dict[str, str]:
    from tqdm import tqdm

    log.info("%d of %d run(s) to do, %d worker(s), %d thread(s) each", len(pending), total, workers, threads)
    failed: Dict[str, str] = {}
    started = time.time()
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        with tqdm(total=len(pending), desc="runs", unit="run", disable=None if progress else True) as bar:
            futures = {pool.submit(execute_run, run, commands, threads): run for run in pending}
            for count, future in enumerate(as_completed(futures), 1):
                run = futures[future]
                try:
                    reason = future.result()
                except Exception as error:  # a bug or I/O error in one run must not stop the others
                    reason = "%s: %s" % (type(error).__name__, error)
                if reason is not None:
                    failed[run.run_dir] = reason
                    log.error("[%d/%d] FAILED %s: %s", count, len(pending), run.run_dir, reason)
                else:
                    log.info("[%d/%d] done %s (%.0f s elapsed)", count, len(pending), run.run_dir, time.time() - started)
                bar.update(1)
    except BaseException:
        _CHILDREN.kill_all()
        pool.shutdown(wait=True, cancel_futures=True)
        log.error("stopped; the unfinished runs start again on the next invocation")
        raise
    pool.shutdown(wait=True)
    log.info("finished: %d failed, %.0f s", len(failed), time.time() - started)
    return failed


# ----------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ultra-multr-run", description="Run an experiment config, or aggregate finished runs."
    )
    parser.add_argument("config", nargs="?", help="experiment config JSON")
    parser.add_argument("--workers", type=int, default=1, help="runs in parallel (default 1)")
    parser.add_argument(
        "--threads", type=int, default=None,
        help="OMP/MKL/OpenBLAS threads per run (default: $OMP_NUM_THREADS if set, else cores // workers)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list the runs and their status; run nothing")
    parser.add_argument("--aggregate", metavar="RUNS_DIR", help="only aggregate the finished runs under RUNS_DIR")
    parser.add_argument("--out", help="output directory of --aggregate")
    parser.add_argument("--alpha", type=float, default=None, help="significance level (default 0.05)")
    parser.add_argument("--permutations", type=int, default=None, help="Monte-Carlo permutations (default 10000)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from .aggregate import aggregate

    options = {k: v for k, v in (("alpha", args.alpha), ("n_permutations", args.permutations)) if v is not None}
    if args.aggregate:
        if not args.out:
            parser.error("--aggregate needs --out")
        try:
            paths = aggregate(args.aggregate, args.out, **options)
        except ValueError as error:  # no finished run, a malformed per-query file: named in the message
            print("error: %s" % error, file=sys.stderr)
            return 2
        for path in paths:
            print(path)
        return 0
    if not args.config:
        parser.error("give a CONFIG (or --aggregate RUNS_DIR --out DIR)")
    try:
        config = load_config(args.config)
        runs = expand_runs(config)
    except (ConfigError, registry.UnknownMethodError) as error:
        print("error: %s" % error, file=sys.stderr)
        return 2
    if args.dry_run:
        for run in runs:
            print("%-8s %s" % (run_status(run), run.run_dir))
            for step, command in default_commands(run):
                print("    %s: %s" % (step, " ".join(command)))
        return 0
    try:
        report = run_all(runs, config.output_dir, workers=args.workers, threads=args.threads)
    except (ConfigError, RunnerLockError, ValueError) as error:
        print("error: %s" % error, file=sys.stderr)
        return 2
    print("%d run(s) finished, %d skipped (already done), %d failed" % (report.finished, report.skipped, len(report.failed)))
    for run_dir, reason in sorted(report.failed.items()):
        print("  FAILED %s: %s" % (run_dir, reason))
    if report.finished + report.skipped > 0:
        for path in aggregate(config.runs_dir, config.results_dir, **{**config.significance, **options}):
            print(path)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
