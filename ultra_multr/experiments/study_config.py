"""The experiment (study) config of the runner: read, validate, resolve paths.

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
({alpha, n_permutations, seed}), ``slurm`` (the resources of
``--executor slurm``: :mod:`.slurm_config`).  A dataset given as a string is one fold
named "all".  Each run's seed is also passed as ``seed=`` in
``learning_algorithm_hparams`` and ``train_input_hparams`` unless the config
sets one there (e.g. to keep one click log across seeds).  A sweep may add ``folds`` (run only on those folds) and ``overrides`` (sections applied to all its
values); its ``section`` may be ``main_args``.  Hparam values whose name ends
in ``_json``, ``_path``, ``_file`` or ``_dir`` are paths.
"""
from __future__ import annotations

import copy
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ultra_multr.config import HParamError, parse_json_fields
from ultra_multr.experiments import methods as registry
from ultra_multr.files import JsonFileError, read_json
from ultra_multr.experiments.runner.slurm_config import SlurmConfig

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
    "main_py", "python", "eval_split", "extra_methods", "significance", "slurm",
}
_SWEEP_KEYS = {"name", "methods", "section", "parameter", "values", "overrides", "folds"}
PATH_SUFFIXES = ("_json", "_path", "_file", "_dir")


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
    slurm: SlurmConfig = field(default_factory=SlurmConfig)

    @property
    def runs_dir(self) -> str:
        return os.path.join(self.output_dir, "runs")

    @property
    def results_dir(self) -> str:
        return os.path.join(self.output_dir, "results")



def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=+-]", "_", str(text))


def _folder_names(names: Any, where: str, what: str) -> Dict[str, str]:
    """Each name's folder name (:func:`safe_name`); two names that share one folder are refused, naming both."""
    folders: Dict[str, str] = {}
    for name in names:
        folder = safe_name(name)
        other = next((o for o, f in folders.items() if f == folder), None)
        _require(
            other is None, where,
            "the %s names %r and %r both become the folder %r (characters other than letters, digits and ._=+- "
            "are replaced by _); rename one" % (what, other, name, folder),
        )
        folders[name] = folder
    return folders


def _require(condition: bool, path: str, message: str) -> None:
    if not condition:
        raise ConfigError("%s: %s" % (path, message))


def resolve_path(base_dir: str, path: str) -> str:
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(base_dir, path))


def _resolve_hparam_paths(sections: Mapping[str, Any], base_dir: str) -> Dict[str, Any]:
    sections = copy.deepcopy(dict(sections))
    for key in registry.HPARAM_SECTIONS:
        for name, value in list(sections.get(key, {}).items()):
            if isinstance(value, str) and name.endswith(PATH_SUFFIXES):
                sections[key][name] = resolve_path(base_dir, value)
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
        name=safe_name(raw["name"]),
        methods=tuple(raw["methods"]),
        section=section,
        parameter=raw["parameter"],
        values=tuple(raw["values"]),
        overrides=_resolve_hparam_paths(overrides, base_dir),
        folds=tuple(safe_name(f) for f in raw.get("folds", ())),
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
    dataset_names = _folder_names(raw["datasets"], path + ": datasets", "dataset")
    for name, folds in raw["datasets"].items():
        folds = {"all": folds} if isinstance(folds, str) else folds
        _require(isinstance(folds, dict) and folds, "%s: datasets.%s" % (path, name), "expected a path or {fold: path}")
        fold_names = _folder_names(folds, "%s: datasets.%s" % (path, name), "fold")
        datasets[dataset_names[name]] = {fold_names[f]: resolve_path(base_dir, d) for f, d in folds.items()}

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
    try:
        slurm = parse_json_fields(SlurmConfig, raw.get("slurm", {}), path + ": slurm")
    except HParamError as error:
        raise ConfigError(str(error)) from None
    main_py = raw.get("main_py")
    return ExperimentConfig(
        path=path,
        output_dir=resolve_path(base_dir, raw["output_dir"]),
        datasets=datasets,
        methods=list(methods),
        seeds=list(seeds),
        settings=_resolve_hparam_paths(merge_sections(registry.DEFAULT_SECTIONS, settings), base_dir),
        method_overrides={m: _resolve_hparam_paths(s, base_dir) for m, s in overrides.items()},
        main_args=main_args,
        sweeps=sweeps,
        main_py=resolve_path(base_dir, main_py) if main_py else None,
        python=raw.get("python", sys.executable),
        eval_split=raw.get("eval_split", "test"),
        significance=dict(significance),
        slurm=slurm,
    )

