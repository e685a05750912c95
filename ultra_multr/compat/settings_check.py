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

It also refuses ``objective_metric`` = :data:`CLICK_LOSS_OBJECTIVE` for an
algorithm that does not report it (:func:`check_objective_metric`).
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import logging
import textwrap
from typing import Any, Dict, FrozenSet, List, Optional

from ultra_multr.config import parse_hparams, split_assignments, unknown_name_error

LOGGER = logging.getLogger("ultra_multr")

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
    """
    if any(exp_settings == done for done in _CHECKED):
        return
    import ultra  # here: the module imports without ULTRA

    for class_key, hparams_key in HPARAM_KEYS:
        path, text = exp_settings.get(class_key), exp_settings.get(hparams_key)
        if not isinstance(path, str) or not isinstance(text, str) or not text.strip():
            continue
        try:
            cls = ultra.utils.find_class(path)
        except Exception:  # noqa: BLE001 - main.py fails on it itself, naming the class
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
    check_objective_metric(exp_settings, source)
    _CHECKED.append(dict(exp_settings))


def check_objective_metric(exp_settings: Dict[str, Any], source: str) -> None:
    """Refuse :data:`CLICK_LOSS_OBJECTIVE` for a learning algorithm that does not report it (ULTRA's): main.py
    would never find it in the validation summary and would keep the last checkpoint instead, silently.

    Raises:
        ValueError: naming the settings, the algorithm and the objective.
    """
    import ultra

    if exp_settings.get("objective_metric") != CLICK_LOSS_OBJECTIVE:
        return
    path = exp_settings.get("learning_algorithm")
    try:
        cls = ultra.utils.find_class(path)
    except Exception:  # noqa: BLE001 - main.py fails on it itself, naming the class
        return
    if not callable(getattr(cls, "click_loss_summary", None)):
        raise ValueError(
            "objective_metric %s of %s: learning_algorithm %s does not report its click loss on the validation "
            "lists (only ultra_multr's algorithms do); main.py would keep the last checkpoint, not the best"
            % (CLICK_LOSS_OBJECTIVE, source, path)
        )
