"""The method registry: method name -> function producing a run's ULTRA settings.

A ULTRA settings file (the JSON given to ``main.py --setting_file``) names the
input feeds, the ranking model and the learning algorithm, each with an
hyper-parameter string.  The runner keeps those strings as dictionaries
("sections") so that the config, a per-method override and a sweep can each
change single entries; :func:`ultra_settings` formats them at the end.

Most methods are one learning algorithm with a few fixed hyper-parameters:
they are rows of :data:`TABLE_2_METHODS` (edit a class path or an hparam
there).  A method needing more logic registers its own
:data:`SettingsFactory` with :func:`register`.

Precedence of hyper-parameters, lowest first: the method's own (here), the
config's shared ``settings``, the config's ``method_overrides`` for the method,
the sweep value.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping

#: Roles decide the place in the table and the significance test:
#: "multr" rows are tested against the best "baseline" row of each column;
#: "oracle" is the upper bound (never a baseline).
ORACLE, BASELINE, MULTR = "oracle", "baseline", "multr"
ROLES = (ORACLE, BASELINE, MULTR)

#: Sections whose value is a dictionary formatted into a ULTRA hparam string.
HPARAM_SECTIONS = (
    "train_input_hparams",
    "valid_input_hparams",
    "test_input_hparams",
    "ranking_model_hparams",
    "learning_algorithm_hparams",
)

#: Settings every run starts from (the paper's protocol; a config overrides).
#: The train feed is ours: ULTRA's drop-in, seeded and padding-safe.
DEFAULT_SECTIONS: Dict[str, Any] = {
    "train_input_feed": "ultra_multr.feeds.ClickSimulationFeed",
    "train_input_hparams": {},
    "valid_input_feed": "ultra.input_layer.DirectLabelFeed",
    "valid_input_hparams": {},
    "test_input_feed": "ultra.input_layer.DirectLabelFeed",
    "test_input_hparams": {},
    "ranking_model": "ultra.ranking_model.DNN",
    "ranking_model_hparams": {"hidden_layer_sizes": [512, 256, 128]},
    "learning_algorithm_hparams": {},
    "metrics": ["ndcg", "err"],
    "metrics_topn": [1, 3, 5, 10],
    "objective_metric": "ndcg_10",
}


class UnknownMethodError(ValueError):
    """A config names a method that is not registered."""


@dataclass(frozen=True)
class RunParameters:
    """What a settings factory gets for one run.

    Attributes:
        dataset, fold: where the run trains.
        seed: the run's seed.
        sections: settings sections after the config's shared settings,
            method overrides and sweep value are applied (see module doc);
            hparam sections are dictionaries.
    """

    dataset: str
    fold: str
    seed: int
    sections: Mapping[str, Any]


SettingsFactory = Callable[[RunParameters], Dict[str, Any]]


@dataclass(frozen=True)
class Method:
    """A registered method.

    Attributes:
        name: the key used in configs and run folders.
        label: the row name in tables ("Rand-MULTR").
        role: one of :data:`ROLES`.
        make_settings: the run's ULTRA settings dict from its parameters.
    """

    name: str
    label: str
    role: str
    make_settings: SettingsFactory


def format_hparams(values: Mapping[str, Any]) -> str:
    """``{"a": 1, "b": [1, 2], "c": True}`` -> ``"a=1,b=[1,2],c=True"`` (ULTRA's syntax).

    ULTRA's parser reads a scalar up to the next ``,`` or ``[`` and a list up
    to the next ``]``: values containing those characters are refused.
    """
    parts = []
    for name, value in values.items():
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if any(c in str(item) for c in ",[]"):
                raise ValueError("hparam %s=%r: ULTRA's hparam strings cannot hold ',', '[' or ']'" % (name, value))
        text = "[%s]" % ",".join(str(v) for v in items) if isinstance(value, (list, tuple)) else str(value)
        parts.append("%s=%s" % (name, text))
    return ",".join(parts)


def ultra_settings(sections: Mapping[str, Any], learning_algorithm: str) -> Dict[str, Any]:
    """The settings dict main.py reads, with hparam sections formatted as strings."""
    settings = {key: copy.deepcopy(value) for key, value in sections.items()}
    for key in HPARAM_SECTIONS:
        settings[key] = format_hparams(settings.get(key, {}))
    settings["learning_algorithm"] = learning_algorithm
    return settings


@dataclass(frozen=True)
class AlgorithmMethod:
    """A :data:`SettingsFactory` for "one learning algorithm with fixed hparams".

    The method's hparams sit under the run's: a config can still override them.
    """

    learning_algorithm: str
    learning_algorithm_hparams: Mapping[str, Any] = field(default_factory=dict)
    train_input_hparams: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, params: RunParameters) -> Dict[str, Any]:
        sections = dict(params.sections)
        for key in ("learning_algorithm_hparams", "train_input_hparams"):
            sections[key] = {**getattr(self, key), **sections.get(key, {})}
        return ultra_settings(sections, self.learning_algorithm)


#: The fair protocol's equal tuning (docs/fair_protocol.md): a validation pilot of the learning rate with the
#: budget of MULTR's rerank_weight=auto (3 candidates x 200 updates, the same validation split), for the
#: baselines and for MULTR alike (MULTR's simulator is trained once, before the pilot, and shared by the candidates).
EQUAL_TUNING = {"tune": "learning_rate", "tune_grid": [0.01, 0.05, 0.2], "tune_pilot_steps": 200}

#: The rows of the paper's Table 2 (in its order), then IPW and MULTR on IPW
#: (the paper's "MULTR plugs into any IPW method").  name, label, role, learning algorithm, its hparams, train-feed hparams.
TABLE_2_METHODS = (
    ("oracle", "Oracle", ORACLE, "ultra_multr.Naive", {}, {"oracle_mode": True}),
    ("multr", "MULTR", MULTR, "ultra_multr.MULTR", {"variant": "dr"}, {}),
    ("dla", "DLA", BASELINE, "ultra_multr.DLA", {}, {}),
    ("rem", "REM", BASELINE, "ultra_multr.REM", {}, {}),
    ("paird", "PairD", BASELINE, "ultra_multr.PairD", {}, {}),
    ("pal", "PAL", BASELINE, "ultra_multr.PAL", {}, {}),
    ("naive", "Naive", BASELINE, "ultra_multr.Naive", {}, {}),
    ("rand_multr", "Rand-MULTR", MULTR, "ultra_multr.MULTR", {"variant": "dr", "simulator_steps": 0}, {}),
    ("eib_multr", "EIB-MULTR", MULTR, "ultra_multr.MULTR", {"variant": "eib", "rerank_weight": "auto"}, {}),
    # MULTR's doubly robust loss on a second IPW framework: IPW with given
    # position propensities (from a position-based click model's JSON, e.g.
    # settings/click_models/pbm_eta1_eps0.1_ymax2.json, or `propensities`).
    ("ipw", "IPW", BASELINE, "ultra_multr.IPW", {}, {}),
    ("multr_ipw", "MULTR-IPW", MULTR, "ultra_multr.MULTR_IPW", {"variant": "dr"}, {}),
    # the baselines under the fair protocol's equal tuning
    ("dla_tuned", "DLA (tuned)", BASELINE, "ultra_multr.DLA", EQUAL_TUNING, {}),
    ("pal_tuned", "PAL (tuned)", BASELINE, "ultra_multr.PAL", EQUAL_TUNING, {}),
    ("naive_tuned", "Naive (tuned)", BASELINE, "ultra_multr.Naive", EQUAL_TUNING, {}),
    ("multr_tuned", "MULTR (tuned)", MULTR, "ultra_multr.MULTR", dict(EQUAL_TUNING, variant="dr"), {}),
    # MULTR without the label-free check of its log's logger (logger_guard=order_fit, MULTR's default and so the
    # "multr" row's: docs/estimator.md): the simulator trained on any log, as the paper's MULTR
    ("multr_unguarded", "MULTR unguarded", MULTR, "ultra_multr.MULTR", {"variant": "dr", "logger_guard": "none"}, {}),
)

_REGISTRY: Dict[str, Method] = {}


def register(method: Method, replace: bool = False) -> None:
    """Add ``method`` to the registry (``replace`` to redefine a name)."""
    if method.role not in ROLES:
        raise ValueError("method %r: role %r is not one of %s" % (method.name, method.role, ", ".join(ROLES)))
    if method.name in _REGISTRY and not replace:
        raise ValueError("method %r is already registered" % method.name)
    _REGISTRY[method.name] = method


def register_algorithm_method(
    name: str,
    label: str,
    role: str,
    learning_algorithm: str,
    learning_algorithm_hparams: Mapping[str, Any] = None,
    train_input_hparams: Mapping[str, Any] = None,
    replace: bool = False,
) -> Method:
    """Register a method that is one ULTRA learning algorithm with fixed hparams."""
    factory = AlgorithmMethod(learning_algorithm, dict(learning_algorithm_hparams or {}), dict(train_input_hparams or {}))
    method = Method(name=name, label=label, role=role, make_settings=factory)
    register(method, replace=replace)
    return method


def known_methods() -> List[str]:
    """Registered names, in registration (table) order."""
    return list(_REGISTRY)


def get_method(name: str) -> Method:
    """The registered method ``name``; the error lists the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownMethodError(
            "unknown method %r; known methods: %s" % (name, ", ".join(known_methods()))
        ) from None


def table_order(name: str) -> int:
    """Row position of a method in tables (registration order)."""
    names = known_methods()
    return names.index(name) if name in names else len(names)


for _row in TABLE_2_METHODS:
    register_algorithm_method(*_row)
