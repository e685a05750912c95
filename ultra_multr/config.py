"""Typed hyper-parameters, parsed once at the edge.

ULTRA passes hyper-parameters as strings such as
``"learning_rate=0.05,sample_num=8,hidden_layer_sizes=[512,256,128]"`` and
only *prints* names it does not know.  Here every algorithm, model and feed
declares a frozen dataclass; :func:`parse_hparams` turns the string into that
dataclass and rejects unknown names (suggesting the closest known one),
values of the wrong type, and values that fail the dataclass's own checks.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import typing
from typing import Any, Dict, List, Type, TypeVar

T = TypeVar("T")


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
    return raw.strip("'\"")


def parse_hparams(cls: Type[T], text: str, source: str = "hparams") -> T:
    """Parse a ULTRA hyper-parameter string into the frozen dataclass ``cls``.

    Args:
        cls: a dataclass whose fields (with defaults) are the accepted names.
        text: ``"name=value,name=value"``; empty means all defaults.
        source: where the string came from, used in error messages
            (e.g. ``"learning_algorithm_hparams of settings/multr_dla.json"``).

    Raises:
        HParamError: unknown or repeated name, unparsable value, or a value the
            dataclass's ``__post_init__`` rejects.
    """
    hints = typing.get_type_hints(cls)
    fields = {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}
    values: Dict[str, Any] = {}
    for assignment in split_assignments(text or ""):
        if "=" not in assignment:
            raise HParamError("%s: %r is not of the form name=value" % (source, assignment))
        name, raw = (s.strip() for s in assignment.split("=", 1))
        if name not in fields:
            raise unknown_name_error(source, "hyper-parameter", name, fields)
        if name in values:
            raise HParamError("%s: %r is set twice" % (source, name))
        values[name] = _convert(raw, fields[name], "%s: %s" % (source, name))
    try:
        return cls(**values)
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
    """The inverse of :func:`parse_hparams` for a dataclass instance."""
    parts = []
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if isinstance(value, (list, tuple)):
            value = "[%s]" % ",".join(str(v) for v in value)
        parts.append("%s=%s" % (field.name, value))
    return ",".join(parts)


def require(condition: bool, message: str) -> None:
    """Raise ``ValueError(message)`` unless ``condition``; for ``__post_init__``."""
    if not condition:
        raise ValueError(message)
