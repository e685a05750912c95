"""ULTRA click-model adapters and a loader that accepts dotted class paths.

ULTRA's ``loadModelFromJson`` knows three hard-coded names.  Here a
click-model JSON's ``model_name`` is one of those names *or* the dotted path
of any :class:`UltraClickModel` subclass, e.g.::

    {"model_name": "ultra_multr.click_models.ultra.DependentClickModel",
     "click_prob": [0.1, 0.4, 1.0], "continuation_prob": [0.6]}

Every adapter subclasses ``ultra.utils.click_models.ClickModel``, so ULTRA code
calling ``sampleClicksForOneList`` / ``getModelJson`` / ``setExamProb`` works,
and adds :meth:`UltraClickModel.sample_clicks`, a vectorised batch sampler.

Plugging in a new click model (e.g. a learned simulator):

1. subclass :class:`UltraClickModel`; implement ``from_json(desc, generator)``
   (extra JSON keys such as ``"checkpoint"`` are yours to read),
   ``sample_clicks`` and ``getModelJson``; set ``needs_features = True`` if
   ``sample_clicks`` reads the documents' features;
2. name its dotted path in the JSON's ``model_name``; calling
   :func:`register_click_model` with that path (a string, imported lazily)
   additionally lists it in the "available" part of error messages.

:class:`SimulatorClickModel` is such a plug-in: a trained MULTR user
simulator (a checkpoint) sampling clicks from the documents' features.
"""
from __future__ import annotations

import importlib
import json
import os
import pickle
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type, Union

import torch
from ultra.utils import click_models as ultra_cm

from ultra_multr import click_models
from ultra_multr.compat.runtime import resolve_data_path
from ultra_multr.simulator import check_compatible, load_simulator


def _fresh_generator() -> torch.Generator:
    generator = torch.Generator()
    generator.seed()  # non-deterministic, like ULTRA's use of the global `random`
    return generator


class UltraClickModel(ultra_cm.ClickModel):
    """Base of every click model the loader can build.

    ULTRA's ``ClickModel.__init__`` builds click and examination tables from
    (neg_click_prob, pos_click_prob, grades, eta); subclasses here are built
    from a JSON description instead and do not call it.

    Attributes:
        needs_features: whether :meth:`sample_clicks` reads ``features``
            (the feed gathers them only then).
        generator: randomness of ``sampleClicksForOneList`` and the default
            of ``sample_clicks``.
    """

    needs_features = False

    def __init__(self, generator: Optional[torch.Generator] = None) -> None:
        self.generator = generator if generator is not None else _fresh_generator()

    @classmethod
    def from_json(cls, desc: Mapping[str, Any], generator: Optional[torch.Generator] = None) -> "UltraClickModel":
        """Build from a click-model JSON dict (its ``model_name`` named this class)."""
        raise NotImplementedError("%s does not implement from_json" % cls.__name__)

    def sample_clicks(
        self,
        labels: torch.Tensor,
        mask: torch.Tensor,
        features: Optional[torch.Tensor] = None,
        generator: Optional[torch.Generator] = None,
    ) -> torch.Tensor:
        """Sample one session per list, vectorised over the batch.

        Args:
            labels: [B, N] float relevance labels (0 at padded slots).
            mask: [B, N] bool, True for real documents.
            features: [B, N, F] document features, or None unless
                ``needs_features``.
            generator: overrides ``self.generator``.

        Returns:
            [B, N] 0/1 clicks in ``labels.dtype``, 0 at padded slots.
        """
        raise NotImplementedError("%s does not implement sample_clicks" % type(self).__name__)

    def check_max_label(self, max_label: float, source: str) -> None:
        """Refuse data with labels this model cannot map; by default any."""


class LabelClickModel(UltraClickModel):
    """An adapter around a pure :class:`ultra_multr.click_models.ClickModel`.

    Subclasses set ``pure_class``; ``json_name`` is the ``model_name`` that
    ``getModelJson`` writes (ULTRA's name where ULTRA has the model, so
    ULTRA's own loader reads the JSON back; else the dotted path).
    """

    pure_class: Type[click_models.ClickModel] = click_models.ClickModel
    json_name: str = ""

    def __init__(self, model: click_models.ClickModel, generator: Optional[torch.Generator] = None) -> None:
        super().__init__(generator)
        if not isinstance(model, self.pure_class):
            raise TypeError(
                "%s wraps a %s, got %s" % (type(self).__name__, self.pure_class.__name__, type(model).__name__)
            )
        self.model = model

    @classmethod
    def from_json(cls, desc, generator=None):
        return cls(cls.pure_class.from_description(desc), generator)

    # ULTRA's public attributes, read from the wrapped model.
    @property
    def model_name(self) -> str:
        return self.json_name

    @property
    def eta(self) -> float:
        return self.model.eta

    @eta.setter
    def eta(self, value: float) -> None:
        # ULTRA's feeds do `click_model.eta += change; click_model.setExamProb(click_model.eta)`.
        self.setExamProb(value)

    @property
    def click_prob(self) -> List[float]:
        return self.model.click_prob.tolist()

    @property
    def exam_prob(self) -> Any:
        return self.model.describe()["exam_prob"]

    def setExamProb(self, eta: float) -> None:
        if eta != self.model.eta:
            self.model = self.model.with_eta(eta)

    def getModelJson(self) -> Dict[str, Any]:
        desc = self.model.describe()
        desc["model_name"] = self.json_name
        return desc

    def check_max_label(self, max_label, source):
        self.model.check_max_label(max_label, source)

    def sample_clicks(self, labels, mask, features=None, generator=None):
        return self.model.sample(labels, mask, generator if generator is not None else self.generator)

    def sampleClicksForOneList(self, label_list: List[float]) -> Tuple[List[float], List[float], List[float]]:
        """ULTRA's per-list API: (click_list, exam_p_list, click_p_list).

        Every slot is taken as shown (ULTRA's feeds pass label 0 for padding);
        labels outside the model's range raise LabelRangeError.
        """
        labels = torch.tensor([label_list], dtype=torch.float64)
        mask = torch.ones_like(labels, dtype=torch.bool)
        clicks, exam_p, click_p = self.model.sample_with_probabilities(labels, mask, self.generator)
        return clicks[0].tolist(), exam_p[0].tolist(), click_p[0].tolist()


class PositionBiasedModel(LabelClickModel):
    """ULTRA's ``position_biased_model`` JSON semantics, any list length."""

    pure_class = click_models.PositionBasedModel
    json_name = "position_biased_model"


class CascadeModel(LabelClickModel):
    """ULTRA's ``cascade_model`` JSON semantics: the first click ends the session."""

    pure_class = click_models.CascadeModel
    json_name = "cascade_model"


class UserBrowsingModel(LabelClickModel):
    """ULTRA's ``user_browsing_model`` JSON semantics (triangular exam_prob table)."""

    pure_class = click_models.UserBrowsingModel
    json_name = "user_browsing_model"


class DependentClickModel(LabelClickModel):
    """The dependent click model (keys: click_prob, continuation_prob, optional exam_prob, eta)."""

    pure_class = click_models.DependentClickModel
    json_name = "ultra_multr.click_models.ultra.DependentClickModel"


class SimulatorClickModel(UltraClickModel):
    """A trained MULTR user simulator as a click model.

    JSON keys: ``checkpoint``, a file written by
    :func:`ultra_multr.simulator.save_simulator` (MULTR saves
    ``<model_dir>/ultra_multr.MULTR.simulator.ckpt``), found as
    :func:`resolve_data_path` does::

        {"model_name": "ultra_multr.click_models.ultra.SimulatorClickModel",
         "checkpoint": "model/ultra_multr.MULTR.simulator.ckpt"}

    Clicks are sampled position by position on the displayed list, each
    conditioned on the clicks sampled before it.  The simulator reads the
    documents' features, never their labels, so any label range is accepted;
    a data set whose feature size differs from the simulator's, or whose
    lists are longer than its position embedding, is refused when sampling.

    Attributes:
        checkpoint: absolute path of the checkpoint.
        simulator: the loaded :class:`ContextAwareUserSimulator`, in eval mode.
        metadata: the checkpoint's metadata (training settings, held-out
            log-likelihood).
    """

    needs_features = True
    model_name = "ultra_multr.click_models.ultra.SimulatorClickModel"

    def __init__(self, checkpoint: str, generator: Optional[torch.Generator] = None) -> None:
        super().__init__(generator)
        self.checkpoint = os.path.abspath(checkpoint)
        try:
            self.simulator, self.metadata = load_simulator(self.checkpoint)
        except (KeyError, EOFError, RuntimeError, pickle.UnpicklingError) as error:
            # torch.load's errors on a file that is no checkpoint at all say nothing useful.
            raise ValueError(
                "%s is not a readable simulator checkpoint (%s: %s)" % (self.checkpoint, type(error).__name__, error)
            ) from None
        self.simulator.eval()

    @classmethod
    def from_json(cls, desc, generator=None):
        click_models.check_description_keys(desc, ["checkpoint"], [], cls.__name__)
        return cls(resolve_data_path(desc["checkpoint"], "checkpoint of %s" % cls.__name__), generator)

    def _no_eta(self) -> AttributeError:
        return AttributeError(
            "SimulatorClickModel (%s) has no position-bias parameter eta; "
            "use dynamic_bias_eta_change=0 with a learned simulator" % self.checkpoint
        )

    @property
    def eta(self) -> float:
        # ULTRA's feeds read eta only to change the position bias dynamically.
        raise self._no_eta()

    def setExamProb(self, eta: float) -> None:
        raise self._no_eta()

    def getModelJson(self) -> Dict[str, Any]:
        return {"model_name": self.model_name, "checkpoint": self.checkpoint}

    def sample_clicks(self, labels, mask, features=None, generator=None):
        """See :meth:`UltraClickModel.sample_clicks`; ``labels`` only give the dtype.

        Raises:
            ValueError: no features, or features / lists the simulator does not fit.
        """
        if features is None:
            raise ValueError(
                "SimulatorClickModel (%s) samples clicks from document features; got none" % self.checkpoint
            )
        batch, positions, feature_size = features.shape
        check_compatible(self.simulator.config, feature_size, positions, "simulator checkpoint %s" % self.checkpoint)
        orders = torch.arange(positions, device=mask.device).expand(batch, 1, positions)
        with torch.no_grad():
            clicks = self.simulator.sample_clicks(
                features.float(), mask, orders, generator if generator is not None else self.generator
            )
        return clicks[:, 0].to(labels.dtype)

    def sampleClicksForOneList(self, label_list):
        raise NotImplementedError(
            "SimulatorClickModel (%s) samples clicks from document features, which ULTRA's per-list API "
            "(labels only) does not pass; use sample_clicks or ultra_multr.feeds.ClickSimulationFeed" % self.checkpoint
        )


def _dotted(cls: type) -> str:
    return "%s.%s" % (cls.__module__, cls.__qualname__)


#: model_name -> class, or a dotted path imported when first used.
_REGISTRY: Dict[str, Union[Type[UltraClickModel], str]] = {}


def register_click_model(name: str, target: Union[Type[UltraClickModel], str, None] = None) -> None:
    """Make ``name`` a known ``model_name``.

    Args:
        name: a short alias or a dotted path.
        target: the class, or its dotted path (imported lazily, so a module
            may register a class whose module has not been imported yet);
            defaults to ``name`` itself, for dotted paths.
    """
    _REGISTRY[name] = target if target is not None else name


for _cls in (PositionBiasedModel, CascadeModel, UserBrowsingModel, DependentClickModel):
    register_click_model(_dotted(_cls), _cls)
    register_click_model(_cls.json_name, _cls)
register_click_model(_dotted(SimulatorClickModel), SimulatorClickModel)


def available_click_models() -> List[str]:
    """Every registered ``model_name``, sorted."""
    return sorted(_REGISTRY)


def _import_class(path: str) -> Optional[type]:
    module_name, _, attribute = path.rpartition(".")
    if not module_name:
        return None
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    return getattr(module, attribute, None)


def click_model_class(name: Any, source: str = "click model description") -> Type[UltraClickModel]:
    """The class a ``model_name`` stands for.

    Raises:
        ValueError: the name is neither registered nor an importable
            :class:`UltraClickModel` subclass; the message lists the available ones.
    """
    target = _REGISTRY.get(name, name) if isinstance(name, str) else None
    cls = _import_class(target) if isinstance(target, str) else target
    if not (isinstance(cls, type) and issubclass(cls, UltraClickModel)):
        reason = "is not a subclass of %s" % _dotted(UltraClickModel) if isinstance(cls, type) else "is unknown"
        raise ValueError(
            "%s: model_name %r %s; available: %s" % (source, name, reason, ", ".join(available_click_models()))
        )
    return cls


def load_click_model(
    desc: Mapping[str, Any], generator: Optional[torch.Generator] = None, source: str = "click model description"
) -> UltraClickModel:
    """Build the click model a JSON dict describes (see the module docstring)."""
    if not isinstance(desc, Mapping) or "model_name" not in desc:
        raise ValueError("%s: expected a JSON object with a 'model_name', got %r" % (source, desc))
    cls = click_model_class(desc["model_name"], source)
    try:
        return cls.from_json(desc, generator)
    except ValueError as error:
        raise ValueError("%s: %s" % (source, error)) from None


def load_click_model_file(
    path: str, generator: Optional[torch.Generator] = None, what: str = "click model JSON"
) -> UltraClickModel:
    """Load a click-model JSON file, found as :func:`resolve_data_path` does.

    Args:
        what: names the setting the path came from, for error messages
            (e.g. ``"click_model_json hparam"``).
    """
    resolved = resolve_data_path(path, what)
    with open(resolved) as handle:
        try:
            desc = json.load(handle)
        except json.JSONDecodeError as error:
            raise ValueError("%s %s is not valid JSON: %s" % (what, resolved, error)) from None
    return load_click_model(desc, generator, source="%s %s" % (what, resolved))
