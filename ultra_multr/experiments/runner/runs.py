"""The runs of a study: their folders, settings, commands, and whether they are finished.

Each run lives in ``<output_dir>/runs/<dataset>/<fold>/<method>[/<variant>]/seed<k>/``:

* ``settings.json`` (the ULTRA settings, from the method registry) and
  ``run.json`` (what the run is: dataset, fold, method, role, sweep, seed);
* ``train.stdout`` / ``train.stderr``: ULTRA's ``main.py`` (through
  :mod:`.seeded_main`), training into ``model/``;
* ``evaluate.stdout`` / ``evaluate.stderr`` and the files of
  :mod:`.evaluate` (per-query metrics, TREC run, qrels, metrics.json);
* ``done.json``, written last and atomically: its presence (with the same
  configuration fingerprint, which includes our algorithm's and feed's
  hyper-parameters with their defaults filled in (:func:`resolved_hparams`),
  and the same data: a hash of the data folder's
  ``prepare_report.json`` when it has one, and the SHA-256 of every file the
  run read (:func:`data_content`), whatever made them) marks the run
  finished, so a second invocation skips it; finished under another
  configuration or on other data, it is refused ("stale", :func:`why_stale`
  names the changed file), never silently reused.  An unfinished run's folder is wiped and the run started again;
  a failed run leaves ``failed.json`` and the other runs go on.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ultra_multr.config import (HParamError, added_after_runs, flat_values, identity, old_defaults, parse_hparams,
                                split_assignments)
from ultra_multr.data.check_cache import file_sha256
from ultra_multr.data.checks import DataCheckError, split_files
from ultra_multr.data.prepare import REPORT_FILE as PREPARE_REPORT
from ultra_multr.data.ultra_format import ultra_data_dir
from ultra_multr.experiments import methods as registry
from ultra_multr.experiments.study_config import (
    PATH_SUFFIXES, SEEDED_SECTIONS, ConfigError, ExperimentConfig, Sweep, merge_sections, resolve_path, safe_name,
)

DONE_FILE = "done.json"
FAILED_FILE = "failed.json"
RUN_FILE = "run.json"
SETTINGS_FILE = "settings.json"


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
            [self.data_dir, self.seed, fingerprint_settings(self.settings), resolved_hparams(self.settings),
             self.main_args, self.eval_split],
            sort_keys=True,
        )
        self.fingerprint = hashlib.sha256(payload.encode()).hexdigest()[:16]
        self.data_id = data_identity(self.data_dir)

    @property
    def tag(self) -> str:
        parts = [self.info["method"], self.info.get("variant") or "", "seed%d" % self.seed]
        return safe_name("_".join(p for p in parts if p))


#: (step name, argv) pairs a run executes in order, in its folder.
Steps = List[Tuple[str, List[str]]]
CommandFactory = Callable[[RunSpec], Steps]


#: (class key, hyper-parameter key, attribute of the class holding its typed config) of the settings.
_TYPED_HPARAMS = (
    ("learning_algorithm", "learning_algorithm_hparams", "config_class"),
    ("train_input_feed", "train_input_hparams", "HPARAMS"),
)


def _typed_config_class(settings: Dict[str, Any], class_key: str, attribute: str) -> Optional[type]:
    """The typed config of ``settings[class_key]`` when it is one of our classes (None for ULTRA's own)."""
    path = settings.get(class_key, "")
    if not isinstance(path, str) or not path.startswith("ultra_multr."):
        return None
    module, name = path.rsplit(".", 1)
    return getattr(getattr(importlib.import_module(module), name), attribute, None)


def fingerprint_settings(settings: Dict[str, Any]) -> Dict[str, Any]:
    """``settings`` as the fingerprint hashes them: our classes' hyper-parameter strings less the namings of an
    old default (a knob's ``old_default``, :func:`ultra_multr.config.old_defaults`).

    A study keeps the runs it finished before a default changed by naming the old default in its method's
    hyper-parameters: the fingerprint leaves that naming out (the resolved hyper-parameters, also in the
    fingerprint, hold the value either way), so the run fingerprints as it did when the value was the default;
    left unnamed, the new default makes it another run.  Likewise a knob declared ``added_after_runs`` is left out
    where the string names it while it is inert (:func:`without_inert_namings`): a study that names every knob
    keeps the runs it finished before the knob existed.
    """
    settings = dict(settings)
    for class_key, hparams_key, attribute in _TYPED_HPARAMS:
        config_class, hparams = _typed_config_class(settings, class_key, attribute), settings.get(hparams_key)
        if config_class is None or not isinstance(hparams, str):
            continue
        for name, old in old_defaults(config_class).items():
            naming = re.escape("%s=%s" % (name, old))
            hparams = re.sub(r"^%s(,|$)" % naming, "", re.sub(r",%s(?=,|$)" % naming, "", hparams))
        settings[hparams_key] = without_inert_namings(config_class, hparams)
    return settings


def without_inert_namings(config_class: type, hparams: str) -> str:
    """``hparams`` less the namings of knobs declared ``added_after_runs`` while they are inert (the string as it
    was before those knobs existed); unchanged when it names none, or when the class refuses it."""
    late = added_after_runs(config_class)
    if not late:
        return hparams
    parts = split_assignments(hparams)
    named = [part.split("=", 1)[0].strip() for part in parts]
    if not set(named) & set(late):
        return hparams
    try:
        values = flat_values(parse_hparams(config_class, hparams))
    except HParamError:
        return hparams
    return ",".join(part for part, name in zip(parts, named) if not (name in late and late[name].holds(values, name)))


def resolved_hparams(settings: Dict[str, Any]) -> Dict[str, Any]:
    """The hyper-parameters our algorithm and training feed run with, every default filled in: the run identity
    of their typed configs (:func:`ultra_multr.config.identity`).

    Part of a run's fingerprint: when a default changes (say MULTR's
    ``rerank_weight``), a run finished under the old one is stale, not
    reused as if it had run the new one (but for knobs declared inert while
    off, added after runs had finished; a study keeps such runs by naming the
    old default, :func:`fingerprint_settings`).  Classes outside ``ultra_multr``
    (ULTRA's own) are left out.  A string the class refuses is kept as its error
    (main.py then refuses the run, naming it).
    """
    resolved: Dict[str, Any] = {}
    for class_key, hparams_key, attribute in _TYPED_HPARAMS:
        config_class = _typed_config_class(settings, class_key, attribute)
        if config_class is None:
            continue
        try:
            config = parse_hparams(config_class, settings.get(hparams_key, ""),
                                   "%s of %s" % (hparams_key, settings[class_key]))
        except HParamError as error:  # main.py refuses it too, naming it in the run's train.stderr
            resolved[class_key] = {"refused": str(error)}
            continue
        resolved[class_key] = identity(config, "run")
    return resolved


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
            if isinstance(value, str) and sweep.parameter.endswith(PATH_SUFFIXES):
                setting = resolve_path(os.path.dirname(config.path), value)
            sections = merge_sections(sections, {sweep.section: {sweep.parameter: setting}})
        variant = safe_name("%s=%s" % (sweep.parameter, _format_value(value)))
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


def _describe(run: RunSpec) -> str:
    sweep = run.info["sweep"]
    where = "sweep %r value %r" % (sweep["name"], sweep["value"]) if sweep else "the methods list"
    return "%s seed %d from %s" % (run.method, run.seed, where)


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
            raise ConfigError("%s: two runs share the folder %s: %s and %s"
                              % (config.path, run.run_dir, _describe(seen[run.run_dir]), _describe(run)))
        seen[run.run_dir] = run
    return runs


def find_main_py(configured: Optional[str] = None) -> str:
    """ULTRA's main.py: the configured path, else ``$ULTRA_MAIN``, else next to the ``ultra`` package.

    The package is located, not imported: importing ULTRA without ultra_multr's start-up hook fails on current
    torch (its TensorFlow import), and where main.py lies does not need it.
    """
    configured = configured or os.environ.get("ULTRA_MAIN")
    if configured:
        if not os.path.isfile(configured):
            raise FileNotFoundError("ULTRA's main.py %s does not exist" % configured)
        return configured
    spec = importlib.util.find_spec("ultra")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("ULTRA's package 'ultra' is not importable; install it or set main_py / $ULTRA_MAIN")
    candidate = os.path.join(os.path.dirname(os.path.abspath(list(spec.submodule_search_locations)[0])), "main.py")
    if not os.path.isfile(candidate):
        raise FileNotFoundError("ULTRA's main.py is not next to the ultra package (%s); set main_py" % candidate)
    return candidate


def default_commands(run: RunSpec) -> Steps:
    """Train with ULTRA's main.py (seeded), then evaluate on the eval split."""
    train = [
        run.python, "-m", "ultra_multr.experiments.runner.seeded_main", "--seed", str(run.seed), find_main_py(run.main_py),
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


#: main.py's splits a run trains and validates on (the runner leaves main.py's prefixes at their defaults).
MAIN_PY_SPLITS = ("train", "valid")
#: Files hashed in this process: (path, size, mtime, inode) -> SHA-256 (a study's runs share their data).
_HASHED: Dict[Tuple[str, int, int, int], str] = {}


def read_files(run: RunSpec) -> List[str]:
    """The files a run reads outside its folder: ``settings.json`` and the files ULTRA's reader takes for the
    train, valid and eval splits of its data dir (a split with neither layout: its folder, which
    :func:`data_content` records as missing), and every existing file its settings name in a path
    hyper-parameter (``*_json``, ``*_path``, ``*_file``: click models, click logs)."""
    paths = [os.path.join(run.data_dir, "settings.json")]
    for split in dict.fromkeys(MAIN_PY_SPLITS + (run.eval_split,)):
        try:
            paths += split_files(run.data_dir, split)[1]
        except DataCheckError:
            paths.append(os.path.join(run.data_dir, split, ""))
    for key, value in run.settings.items():
        if not key.endswith("_hparams") or not isinstance(value, str):
            continue
        for part in split_assignments(value):
            name, _, path = (text.strip() for text in part.partition("="))
            if name.endswith(PATH_SUFFIXES) and os.path.isabs(path) and os.path.isfile(path):
                paths.append(path)
    return list(dict.fromkeys(paths))


def data_content(run: RunSpec) -> Dict[str, str]:
    """Path -> SHA-256 of each of :func:`read_files` ("missing" for one that is not there): what a run's results
    are keyed by besides its configuration, recorded in its ``done.json`` (``data_files``)."""
    content = {}
    for path in read_files(run):
        try:
            info = os.stat(path)
            key = (os.path.abspath(path), info.st_size, info.st_mtime_ns, info.st_ino)
            if key not in _HASHED:
                _HASHED[key] = file_sha256(path)
            content[path] = _HASHED[key]
        except (FileNotFoundError, IsADirectoryError):
            content[path] = "missing"
    return content


def data_change(recorded: Dict[str, str], now: Dict[str, str]) -> Optional[str]:
    """What differs between two :func:`data_content` records (None: nothing), the files named."""
    changed = sorted(path for path in set(recorded) | set(now) if recorded.get(path) != now.get(path))
    if not changed:
        return None

    def how(path: str) -> str:
        if now.get(path, "missing") == "missing":
            return "is gone"
        return "is new" if recorded.get(path, "missing") == "missing" else "changed"

    listed = "; ".join("%s %s" % (path, how(path)) for path in changed[:5])
    return listed + ("; and %d more file(s)" % (len(changed) - 5) if len(changed) > 5 else "")


def data_identity(data_dir: str) -> str:
    """A hash of ``<data_dir>/prepare_report.json`` (what the data was prepared from and how), "" without one."""
    try:
        with open(os.path.join(data_dir, PREPARE_REPORT), "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()[:16]
    except OSError:
        return ""


def _read_done(run: RunSpec) -> Optional[Dict[str, Any]]:
    """The run's ``done.json``, None without a readable one."""
    try:
        with open(os.path.join(run.run_dir, DONE_FILE)) as handle:
            done = json.load(handle)
    except (OSError, json.JSONDecodeError):
        return None
    return done if isinstance(done, dict) else None


def why_stale(run: RunSpec) -> Optional[str]:
    """Why a finished run's results do not hold for ``run`` (None: they do, or it is not finished).

    Another configuration fingerprint; re-prepared data (another
    ``prepare_report.json``; a ``done.json`` from before that record has no
    "data" and is not checked for it); or a file the run read that changed
    since (:func:`data_content` against its ``data_files``; a ``done.json``
    from before that record is not checked: :func:`records_data`).
    """
    done = _read_done(run)
    if done is None:
        return None
    if done.get("fingerprint") != run.fingerprint:
        return "finished with a different configuration"
    if done.get("data", run.data_id) != run.data_id:
        return "finished on other data (re-prepared: another %s)" % PREPARE_REPORT
    if isinstance(done.get("data_files"), dict):
        changed = data_change(done["data_files"], data_content(run))
        if changed:
            return "finished on other data: since it was trained, %s" % changed
    return None


def records_data(run: RunSpec) -> bool:
    """Whether a finished run's ``done.json`` records the content of the data it read (runs finished before
    that record do not: their data cannot be checked)."""
    done = _read_done(run)
    return done is not None and isinstance(done.get("data_files"), dict)


def run_status(run: RunSpec) -> str:
    """"done", "pending", or "stale" (finished under a different configuration or on other data: :func:`why_stale`)."""
    if _read_done(run) is None:
        return "pending"
    return "stale" if why_stale(run) else "done"
