"""Typed hyper-parameters, parsed once at the edge.

ULTRA passes hyper-parameters as strings such as
``"learning_rate=0.05,sample_num=8,hidden_layer_sizes=[512,256,128]"`` and
only *prints* names it does not know.  Here every algorithm, model and feed
declares a frozen dataclass; :func:`parse_hparams` turns the string into that
dataclass and rejects unknown names (suggesting the closest known one),
values of the wrong type, and values that fail the dataclass's own checks.

Groups.  A field declared with :func:`group` holds a group of knobs, itself
such a dataclass: its fields join the one flat namespace of
the string (``simulator_steps=100`` sets ``config.simulator.simulator_steps``),
so a settings file never names a group.  A knob name is unique across the
groups of a class (:func:`knobs` refuses a class where it is not).

Values.  Besides bool, int, float, str, Optional and tuples, a knob may be a
:class:`Choice` (a fixed set of strings) or any class with a ``parse(text)``
classmethod (e.g. :class:`ultra_multr.losses.dr.RerankWeight`); its ``str`` is
what the string said.

Identity.  What a run or a checkpoint *is* follows from its knobs, and each
knob declares, once, how it enters (:func:`knob`, :class:`Identity`):

* every knob is part of a run's identity (the study runner's fingerprint:
  :func:`identity` with ``"run"``) unless it is inert: an option added after
  runs had finished, left out while it holds the value that changes nothing
  (:class:`Off`, :class:`SameAs`), so those runs stay valid;
* a knob with ``checkpoint=True`` is part of the user simulator checkpoint's
  identity (:func:`identity` with ``"checkpoint"``; inert ones likewise);
* ``old_default``: the value before the knob's default changed; a settings
  string that names it keeps the fingerprint of runs finished under the old
  default (:func:`old_defaults`);
* ``added_after_runs``: an inert knob added after studies that name every
  knob had finished runs; a settings string that names it while it is inert
  fingerprints as one that does not (:func:`added_after_runs`), so such a
  study keeps its runs.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import enum
import functools
import json
import typing
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type, TypeVar, Union

T = TypeVar("T")
#: Field metadata keys: a knob's :class:`Identity`; a field that holds a group (:func:`group`).
IDENTITY, GROUP = "ultra_multr.identity", "ultra_multr.group"
_UNSET = object()


class Choice(str, enum.Enum):
    """A knob with a fixed set of string values: equal to its value (``WeightGuard.CLIP == "clip"``), printed as it."""

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def parse(cls, text: str) -> "Choice":
        """The member whose value is ``text``.

        Raises:
            ValueError: naming the known values (and the closest one).
        """
        for member in cls:
            if member.value == text:
                return member
        known = [str(member.value) for member in cls]
        close = difflib.get_close_matches(text, known, n=1)
        hint = " (did you mean %r?)" % close[0] if close else ""
        raise ValueError("expected one of %s, got %r%s" % (", ".join(known), text, hint))


@dataclasses.dataclass(frozen=True)
class Off:
    """Inert while the knob ``switch`` holds ``value`` (the option's off state, which changes nothing)."""

    switch: str
    value: Any

    def holds(self, values: Mapping[str, Any], name: str) -> bool:
        return values.get(self.switch) == self.value


@dataclasses.dataclass(frozen=True)
class SameAs:
    """Inert while the knob equals the knob ``other`` (it split off from ``other``, which set both before)."""

    other: str

    def holds(self, values: Mapping[str, Any], name: str) -> bool:
        return values.get(name) == values.get(self.other)


@dataclasses.dataclass(frozen=True)
class Identity:
    """How a knob enters the identity of what it makes (see the module docstring).

    Attributes:
        checkpoint: part of the user simulator checkpoint's identity (its metadata key is the knob's name).
        inert_when: left out of both identities while this holds.
        old_default: the default before it changed (unset: it never changed).
        added_after_runs: naming it while ``inert_when`` holds leaves a run's fingerprint as it was without it.
    """

    checkpoint: bool = False
    inert_when: Optional[Union[Off, SameAs]] = None
    old_default: Any = _UNSET
    added_after_runs: bool = False


def knob(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING, checkpoint: bool = False,
         inert_when: Optional[Union[Off, SameAs]] = None, old_default: Any = _UNSET,
         added_after_runs: bool = False) -> Any:
    """A dataclass field with its :class:`Identity` declared."""
    if added_after_runs and inert_when is None:
        raise ValueError("added_after_runs needs inert_when: only an inert knob can leave a fingerprint as it was")
    identity = Identity(checkpoint=checkpoint, inert_when=inert_when, old_default=old_default,
                        added_after_runs=added_after_runs)
    return dataclasses.field(default=default, default_factory=default_factory, metadata={IDENTITY: identity})


def group(cls: Type[T]) -> Any:
    """A field holding the group of knobs ``cls`` (a frozen dataclass), at its defaults unless the string sets them."""
    return dataclasses.field(default_factory=cls, metadata={GROUP: True})


@dataclasses.dataclass(frozen=True)
class Knob:
    """One name of a class's flat namespace: where it sits (the groups' field names), its field and its type."""

    path: Tuple[str, ...]
    field: dataclasses.Field
    annotation: Any

    @property
    def identity(self) -> Identity:
        return self.field.metadata.get(IDENTITY, Identity())


@functools.lru_cache(maxsize=None)
def knobs(cls: type) -> Dict[str, Knob]:
    """The flat namespace of the frozen dataclass ``cls``: name -> :class:`Knob`, its own fields first, then each
    group's (recursively), in declaration order.

    Raises:
        TypeError: two knobs of ``cls`` share a name.
    """
    hints = typing.get_type_hints(cls)
    found: Dict[str, Knob] = {}
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        annotation = hints[field.name]
        inner = ({name: Knob((field.name,) + k.path, k.field, k.annotation) for name, k in knobs(annotation).items()}
                 if field.metadata.get(GROUP) else {field.name: Knob((), field, annotation)})
        for name, entry in inner.items():
            if name in found:
                raise TypeError("%s: the knob %r is declared twice (%s and %s)" % (
                    cls.__name__, name, ".".join(found[name].path + (name,)), ".".join(entry.path + (name,))))
            found[name] = entry
    return found


def flat_values(config: Any) -> Dict[str, Any]:
    """Every knob of ``config`` (a frozen dataclass, groups included) by its name, in :func:`knobs`' order."""
    values = {}
    for name, entry in knobs(type(config)).items():
        holder = config
        for step in entry.path:
            holder = getattr(holder, step)
        values[name] = getattr(holder, name)
    return values


def _jsonable(value: Any) -> Any:
    """``value`` as JSON holds it: tuples as lists, a :class:`Choice` or a parsed value as its string."""
    return json.loads(json.dumps(value, default=str))


def identity(config: Any, kind: str) -> Dict[str, Any]:
    """The knobs of ``config`` that make up its identity, name -> JSON value, inert ones left out.

    Args:
        kind: "run" (every knob: the study runner's fingerprint) or "checkpoint" (those declared
            ``checkpoint=True``: the user simulator checkpoint's).
    """
    if kind not in ("run", "checkpoint"):
        raise ValueError("kind must be 'run' or 'checkpoint', got %r" % kind)
    values = flat_values(config)
    entries = knobs(type(config))
    kept = {}
    for name, value in values.items():
        declared = entries[name].identity
        if kind == "checkpoint" and not declared.checkpoint:
            continue
        if declared.inert_when is not None and declared.inert_when.holds(values, name):
            continue
        kept[name] = _jsonable(value)
    return kept


def old_defaults(cls: type) -> Dict[str, Any]:
    """Knob name -> its default before the default changed, for the knobs of ``cls`` that declare one."""
    return {name: entry.identity.old_default for name, entry in knobs(cls).items()
            if entry.identity.old_default is not _UNSET}


def added_after_runs(cls: type) -> Dict[str, Union[Off, SameAs]]:
    """Knob name -> when it is inert, for the knobs of ``cls`` declared ``added_after_runs``."""
    return {name: entry.identity.inert_when for name, entry in knobs(cls).items()
            if entry.identity.added_after_runs}


class HParamError(ValueError):
    """A hyper-parameter string names an unknown field or a bad value."""


def split_assignments(text: str) -> List[str]:
    """Split ``a=1,b=[1,2],c=x`` on the commas that are outside brackets."""
    parts, depth, current = [], 0, []
    for char in text:
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _convert(raw: str, annotation: Any, where: str) -> Any:
    raw = raw.strip()
    origin = typing.get_origin(annotation)
    if origin is typing.Union:  # Optional[X]
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if raw.lower() in ("none", "null", ""):
            return None
        return _convert(raw, args[0], where)
    if origin in (list, tuple, List):
        (item_type,) = typing.get_args(annotation)[:1] or (str,)
        inner = raw.strip("[]() ")
        items = [_convert(v, item_type, where) for v in inner.split(",") if v.strip()]
        return tuple(items) if origin is tuple else items
    if annotation is bool:
        lowered = raw.lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise HParamError("%s: expected true or false, got %r" % (where, raw))
    if annotation is int:
        try:
            return int(raw)
        except ValueError:
            raise HParamError("%s: expected an integer, got %r" % (where, raw)) from None
    if annotation is float:
        try:
            return float(raw)
        except ValueError:
            raise HParamError("%s: expected a number, got %r" % (where, raw)) from None
    text = raw.strip("'\"")
    if isinstance(annotation, type) and callable(getattr(annotation, "parse", None)):  # a Choice or a parsed value
        try:
            return annotation.parse(text)
        except ValueError as error:
            raise HParamError("%s: %s" % (where, error)) from None
    return text


def _build(cls: Type[T], values: Dict[Tuple[str, ...], Dict[str, Any]], path: Tuple[str, ...] = ()) -> T:
    """``cls`` from the parsed values of each group (keyed by its path), groups built first."""
    own = dict(values.get(path, {}))
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if field.init and field.metadata.get(GROUP):
            inner = path + (field.name,)
            if any(key[: len(inner)] == inner for key in values):
                own[field.name] = _build(hints[field.name], values, inner)
    return cls(**own)


def parse_hparams(cls: Type[T], text: str, source: str = "hparams") -> T:
    """Parse a ULTRA hyper-parameter string into the frozen dataclass ``cls``.

    Args:
        cls: a dataclass whose fields (with defaults) are the accepted names,
            its groups' fields included (:func:`knobs`).
        text: ``"name=value,name=value"``; empty means all defaults.
        source: where the string came from, used in error messages
            (e.g. ``"learning_algorithm_hparams of settings/multr_dla.json"``).

    Raises:
        HParamError: unknown or repeated name, unparsable value, or a value the
            dataclass's (or a group's) ``__post_init__`` rejects.
    """
    fields = knobs(cls)
    values: Dict[Tuple[str, ...], Dict[str, Any]] = {}
    seen = set()
    for assignment in split_assignments(text or ""):
        if "=" not in assignment:
            raise HParamError("%s: %r is not of the form name=value" % (source, assignment))
        name, raw = (s.strip() for s in assignment.split("=", 1))
        if name not in fields:
            raise unknown_name_error(source, "hyper-parameter", name, fields)
        if name in seen:
            raise HParamError("%s: %r is set twice" % (source, name))
        seen.add(name)
        entry = fields[name]
        values.setdefault(entry.path, {})[name] = _convert(raw, entry.annotation, "%s: %s" % (source, name))
    try:
        return _build(cls, values)
    except (ValueError, TypeError) as error:
        raise HParamError("%s: %s" % (source, error)) from None


def unknown_name_error(source: str, what: str, name: str, known: typing.Iterable[str]) -> HParamError:
    """``source: unknown <what> 'name' (did you mean 'closest'?); known: ...``."""
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=1)
    hint = " (did you mean %r?)" % close[0] if close else ""
    return HParamError("%s: unknown %s %r%s; known: %s" % (source, what, name, hint, ", ".join(known)))


def _check_json(value: Any, annotation: Any, where: str) -> Any:
    """``value`` (parsed JSON) as ``annotation`` wants it: Optional, int, float, bool, str, Tuple[X, ...], Dict."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union:  # Optional[X]
        return None if value is None else _check_json(value, [a for a in args if a is not type(None)][0], where)
    if origin is tuple:
        if not isinstance(value, list):
            raise HParamError("%s: expected a list, got %r" % (where, value))
        return tuple(_check_json(v, args[0], "%s[%d]" % (where, i)) for i, v in enumerate(value))
    if origin in (dict, typing.Mapping, collections.abc.Mapping):
        if not isinstance(value, dict):
            raise HParamError("%s: expected an object, got %r" % (where, value))
        return dict(value)
    numeric = annotation is float and isinstance(value, int)
    if isinstance(value, bool) is not (annotation is bool) or not (numeric or isinstance(value, annotation)):
        raise HParamError("%s: expected %s, got %r" % (where, getattr(annotation, "__name__", annotation), value))
    return float(value) if numeric else value


def parse_json_fields(cls: Type[T], values: Any, source: str) -> T:
    """A JSON object (already parsed) as the frozen dataclass ``cls``.

    Raises:
        HParamError: ``values`` is not an object, names an unknown field
            (suggesting the closest), holds a value of the wrong JSON type, or
            fails ``cls.__post_init__``; the message starts with ``source``.
    """
    if not isinstance(values, dict):
        raise HParamError("%s: expected an object, got %r" % (source, values))
    hints = typing.get_type_hints(cls)
    fields = {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}
    checked = {}
    for name, value in values.items():
        if name not in fields:
            raise unknown_name_error(source, "key", name, fields)
        checked[name] = _check_json(value, fields[name], "%s: %s" % (source, name))
    try:
        return cls(**checked)
    except (ValueError, TypeError) as error:
        raise HParamError("%s: %s" % (source, error)) from None


def format_hparams(config: Any) -> str:
    """The inverse of :func:`parse_hparams` for a dataclass instance (its groups' knobs flat)."""
    parts = []
    for name, value in flat_values(config).items():
        if isinstance(value, (list, tuple)):
            value = "[%s]" % ",".join(str(v) for v in value)
        parts.append("%s=%s" % (name, value))
    return ",".join(parts)


def require(condition: bool, message: str) -> None:
    """Raise ``ValueError(message)`` unless ``condition``; for ``__post_init__``."""
    if not condition:
        raise ValueError(message)
