"""Every hyper-parameter string of main.py's settings checked by name before anything trains.

ULTRA's classes parse their hyper-parameter strings with
``ultra.utils.hparams.HParams.parse``, which *prints* "Unknown hyperparameter
type for NAME" and goes on: a misspelt ``ranking_model_hparams`` name (say
``hidden_layer_size=[16]`` for the DNN, whose name is ``hidden_layer_sizes``)
trains ULTRA's default network of [512, 256, 128] and exits 0.  Our own
classes refuse unknown names (:func:`ultra_multr.config.parse_hparams`), but
only when they are constructed, the feeds after the algorithm has locked the
model dir and written its identity file.

:func:`check_settings_hparams` checks the five strings of a settings dict
(:data:`HPARAM_KEYS`) against the class each belongs to:

- our classes (a typed config: an algorithm's ``config_class``, a feed's
  ``HPARAMS``): parsed in full (names, types, values) as they will be;
- ULTRA's classes: the names, against the keyword arguments of the
  ``HParams(...)`` call in the class's ``__init__`` (its defaults), read from
  the source (:func:`ultra_hparam_names`), so nothing is constructed, no file
  is opened and no network is built.  A class whose ``__init__`` (or a parent's)
  builds no ``HParams`` this way is not checked.

The error names the settings key, the class, the unknown name and the
closest known one ("did you mean"), and lists the known names.  Called by our
algorithms' constructor (first thing under main.py, before the data checks and
the model dir) and by our feeds' constructors (for one of ULTRA's algorithms
trained with our feed).

It also checks what main.py and the algorithms read from the settings only
later (:func:`check_settings_names`): every class path imports, ``metrics``
names metrics ULTRA computes and ``metrics_topn`` holds positive integers,
and ``objective_metric`` is a value the validation summary reports (else
main.py keeps the last checkpoint instead of the best, without a word;
:func:`check_objective_metric`).  Under main.py,
:func:`check_settings_file` also refuses a settings file without a key
main.py or the algorithm reads; it runs before main.py reads any data
(:func:`ultra_multr.compat.main_py_start.check_main_py_start`).
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import logging
import textwrap
from typing import Any, Dict, FrozenSet, List, Optional

from ultra_multr.config import parse_hparams, split_assignments, unknown_name_error

LOGGER = logging.getLogger("ultra_multr")


class SettingsError(ValueError):
    """A settings file lacks a key, or names a class, metric or objective that main.py would fail on or ignore."""


#: (class key, its hyper-parameter string's key) of main.py's settings.
HPARAM_KEYS = (
    ("learning_algorithm", "learning_algorithm_hparams"),
    ("ranking_model", "ranking_model_hparams"),
    ("train_input_feed", "train_input_hparams"),
    ("valid_input_feed", "valid_input_hparams"),
    ("test_input_feed", "test_input_hparams"),
)
#: ``objective_metric`` naming the negated mean of the algorithm's own training loss on the validation lists'
#: clicks (largest = smallest loss, as main.py keeps the largest): reported by our algorithms
#: (:meth:`ultra_multr.algorithms.base.PluginAlgorithm.click_loss_summary`), never by ULTRA's.
CLICK_LOSS_OBJECTIVE = "click_loss_neg"
#: The class keys of main.py's settings (each names a class by its dotted path).
CLASS_KEYS = tuple(class_key for class_key, _ in HPARAM_KEYS)
#: The keys main.py reads with ``exp_settings[key]`` (training or ``--test_only``) and our algorithms' ranker.
REQUIRED_KEYS = CLASS_KEYS + ("train_input_hparams", "valid_input_hparams", "test_input_hparams")
#: The keys ULTRA's own algorithms read with ``exp_settings[key]`` besides :data:`REQUIRED_KEYS`.
ULTRA_ALGORITHM_KEYS = ("learning_algorithm_hparams", "ranking_model_hparams", "metrics", "metrics_topn")
#: The validation metrics of our algorithms when the settings name none (``metrics``, ``metrics_topn``).
DEFAULT_METRICS, DEFAULT_TOPN = ["ndcg"], [10]
#: Settings dicts checked in this process (a feed built after our algorithm need not check them again).
_CHECKED: List[Dict[str, Any]] = []


def typed_config(cls: type) -> Optional[type]:
    """The dataclass our class parses its hyper-parameters into (``config_class`` or ``HPARAMS``), or None."""
    for attribute in ("config_class", "HPARAMS"):
        config = getattr(cls, attribute, None)
        if isinstance(config, type) and dataclasses.is_dataclass(config):
            return config
    return None


def _is_hparams_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name == "HParams"


@functools.lru_cache(maxsize=None)
def ultra_hparam_names(cls: type) -> Optional[FrozenSet[str]]:
    """The hyper-parameter names a ULTRA class knows: the keywords of ``HParams(...)`` in its ``__init__``.

    ULTRA's classes build ``self.hparams = ultra.utils.hparams.HParams(name=default, ...)``
    and then parse the settings string into it.  The first class of the MRO
    whose own ``__init__`` makes such a call gives the names (a subclass
    without one inherits its parent's).  None when none does, or the source
    cannot be read (then the string is not checked).
    """
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
        except (OSError, TypeError, SyntaxError):
            return None
        calls = [node for node in ast.walk(tree) if _is_hparams_call(node)]
        if calls:
            return frozenset(keyword.arg for call in calls for keyword in call.keywords if keyword.arg)
    return None


def assigned_names(text: str) -> List[str]:
    """The names a hyper-parameter string assigns (``a=1,b=[1,2],c[0]=x`` -> a, b, c).

    A part without ``=`` is left out: ULTRA refuses it itself ("Malformed
    hyperparameter value"), naming it.
    """
    names = []
    for part in split_assignments(text):
        name, equals, _ = part.partition("=")
        if equals:
            names.append(name.split("[", 1)[0].strip())
    return names


def check_main_py_settings(model: Any) -> None:
    """Under main.py, :func:`check_settings_hparams` of the settings main.py handed the algorithm ``model``
    (for our feeds: the algorithm may be one of ULTRA's, which checks nothing).  Elsewhere nothing."""
    from ultra_multr.compat.runtime import main_args

    args = main_args()
    settings = getattr(model, "exp_settings", None)
    if args is not None and isinstance(settings, dict):
        check_settings_hparams(settings, "settings file %s" % args.setting_file)


def check_settings_hparams(exp_settings: Dict[str, Any], source: str = "the settings") -> None:
    """Check the hyper-parameter strings of :data:`HPARAM_KEYS` against their classes (see the module docstring).

    Args:
        exp_settings: main.py's settings dict.
        source: where it came from, for messages (e.g. ``"settings file s.json"``).

    Raises:
        HParamError: ``<key> of <source> (<class>): unknown hyper-parameter 'x' (did you mean 'y'?); known: ...``,
            or (our classes) a value of the wrong type or out of range.
        SettingsError: what :func:`check_settings_names` refuses.
    """
    if any(exp_settings == done for done in _CHECKED):
        return
    classes = check_settings_names(exp_settings, source)
    for class_key, hparams_key in HPARAM_KEYS:
        cls, path, text = classes.get(class_key), exp_settings.get(class_key), exp_settings.get(hparams_key)
        if cls is None or not isinstance(text, str) or not text.strip():
            continue
        where = "%s of %s (%s)" % (hparams_key, source, path)
        config = typed_config(cls)
        if config is not None:
            parse_hparams(config, text, where)
            continue
        known = ultra_hparam_names(cls)
        if known is None:
            LOGGER.debug("%s: %s builds no HParams in its __init__; its names are not checked", where, path)
            continue
        for name in assigned_names(text):
            if name not in known:
                raise unknown_name_error(where, "hyper-parameter", name, known)
    _CHECKED.append(dict(exp_settings))


def check_settings_file(exp_settings: Any, setting_file: str) -> None:
    """main.py's settings file, whole: every key main.py and the algorithm read is there
    (:data:`REQUIRED_KEYS`; for an algorithm outside ultra_multr also :data:`ULTRA_ALGORITHM_KEYS`), then
    :func:`check_settings_hparams`.

    Raises:
        SettingsError: naming the file and the first missing key (main.py would fail with a bare ``KeyError``,
            the ``test_input_*`` keys only at ``--test_only``, after the whole training).
    """
    source = "settings file %s" % setting_file
    if not isinstance(exp_settings, dict):
        raise SettingsError("%s: expected a JSON object of settings, got %s" % (source, type(exp_settings).__name__))
    algorithm = exp_settings.get("learning_algorithm")
    ours = isinstance(algorithm, str) and algorithm.startswith("ultra_multr.")
    for key in REQUIRED_KEYS + (() if ours else ULTRA_ALGORITHM_KEYS):
        if key not in exp_settings:
            raise SettingsError(
                "%s has no key %r; ULTRA's main.py (or the learning algorithm %s) reads it and would stop with a "
                "bare KeyError (the test_input_* keys at --test_only, after the training)" % (source, key, algorithm)
            )
    check_settings_hparams(exp_settings, source)


def check_settings_names(exp_settings: Dict[str, Any], source: str) -> Dict[str, type]:
    """The names of a settings dict that main.py or the algorithm use only later, checked now; class key -> class.

    Every class key present must name a class ULTRA's ``find_class`` imports
    (main.py builds the test feed only at ``--test_only``, after the whole
    training); ``metrics`` must be metrics ULTRA computes (else the first
    validation fails, after MULTR's simulator training); ``metrics_topn``
    positive integers (else ULTRA's metrics raise TypeError); and
    ``objective_metric`` one the validation reports
    (:func:`check_objective_metric`).

    Raises:
        SettingsError: naming the key, its value and ``source``.
    """
    import ultra  # here: the module imports without ULTRA

    classes = {key: settings_class(exp_settings[key], "%s of %s" % (key, source))
               for key in CLASS_KEYS if key in exp_settings}
    metrics = exp_settings.get("metrics", DEFAULT_METRICS)
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) for m in metrics):
        raise SettingsError("metrics of %s: expected a list of metric names, got %r" % (source, metrics))
    for metric in metrics:
        try:
            ultra.utils.metrics.make_ranking_metric_fn(metric, [1])
        except AssertionError:  # ULTRA's own refusal: "metric_key X not supported."
            known = [getattr(ultra.utils.metrics.RankingMetricKey, name) for name in
                     vars(ultra.utils.metrics.RankingMetricKey) if name.isupper() and name != "MAX_LABEL"]
            raise SettingsError("%s; ULTRA's metrics would refuse it at main.py's first validation"
                                % unknown_name_error("metrics of %s" % source, "metric", metric, known)) from None
    topn = exp_settings.get("metrics_topn", DEFAULT_TOPN)
    if not isinstance(topn, list) or not topn or not all(type(n) is int and n >= 1 for n in topn):
        raise SettingsError("metrics_topn of %s: expected a list of positive integers (cutoffs), got %r; ULTRA's "
                            "metrics would fail on it at main.py's first validation" % (source, topn))
    check_objective_metric(exp_settings, source)
    return classes


def settings_class(path: Any, where: str) -> type:
    """The class a settings value names by its dotted path, as ULTRA's ``find_class`` finds it (the module
    imported, the class its attribute).

    Raises:
        SettingsError: ``where``: not a dotted path, a module that does not import (with its error), or a name
            the module lacks (with the closest of its classes).
    """
    if not isinstance(path, str) or "." not in path:
        raise SettingsError("%s: expected the dotted path of a class (module.Class), got %r" % (where, path))
    module_name, _, class_name = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - the module's own error, whatever it is
        raise SettingsError("%s: the module %s of %r does not import (%s: %s)"
                            % (where, module_name, path, type(error).__name__, error)) from None
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        known = [name for name, value in vars(module).items()
                 if isinstance(value, type) and value.__module__.startswith(module_name) and not name.startswith("_")]
        raise SettingsError("%s; main.py would fail on %r with ImportError"
                            % (unknown_name_error(where, "class of %s" % module_name, class_name, known), path))
    return cls


def check_objective_metric(exp_settings: Dict[str, Any], source: str) -> None:
    """Refuse an ``objective_metric`` the validation summary does not report: main.py would never find it and
    would keep the last checkpoint instead of the best, silently.

    The summary reports ``<metric>_<cutoff>`` for each of ``metrics`` and
    ``metrics_topn`` (our algorithms' defaults: ndcg, 10), and our algorithms
    also :data:`CLICK_LOSS_OBJECTIVE`, never ULTRA's.  No ``objective_metric``,
    or ``""`` (as ULTRA's own example settings ask for none): main.py keeps the
    last checkpoint, as asked.

    Raises:
        SettingsError: naming the settings, the objective and the closest reported value.
    """
    import ultra

    objective = exp_settings.get("objective_metric")
    if objective is None or objective == "":
        return
    path = exp_settings.get("learning_algorithm")
    try:
        cls = ultra.utils.find_class(path)
    except Exception:  # noqa: BLE001 - check_settings_names names it
        return
    if objective == CLICK_LOSS_OBJECTIVE and not callable(getattr(cls, "click_loss_summary", None)):
        raise SettingsError(
            "objective_metric %s of %s: learning_algorithm %s does not report its click loss on the validation "
            "lists (only ultra_multr's algorithms do); main.py would keep the last checkpoint, not the best"
            % (CLICK_LOSS_OBJECTIVE, source, path)
        )
    reported = ["%s_%s" % (metric, cutoff) for metric in exp_settings.get("metrics", DEFAULT_METRICS)
                for cutoff in exp_settings.get("metrics_topn", DEFAULT_TOPN)]
    if callable(getattr(cls, "click_loss_summary", None)):
        reported.append(CLICK_LOSS_OBJECTIVE)
    if objective not in reported:
        raise SettingsError(
            "%s (the validation reports each of metrics x metrics_topn as <metric>_<cutoff>); main.py would never "
            "find it and would keep the last checkpoint, not the best" % unknown_name_error(
                "objective_metric of %s" % source, "objective", str(objective), reported))
