"""Records read back from their dicts (a saved result's JSON, the engine's reply): every field
checked against the type its dataclass declares, so that a file of the wrong shape is said (which
field, what it should be), never met later as an AttributeError in a pane. The reading goes as deep
as the records do, whatever the depth of the JSON."""

from __future__ import annotations

import dataclasses
import functools
import numbers
import types
import typing
from typing import Any

from .config import SdpaConfig
from .fields import config_from_dict


class ResultError(ValueError):
    """A saved result of the wrong shape: which field, and what it should be."""


def kind_of(value: Any) -> str:
    """What a JSON value is, in words: "an object", "a list", "text", "a number"."""
    words = {dict: "an object", list: "a list", str: "text", bool: "true or false", type(None): "null"}
    return words.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)


def read_record(cls: type, value: Any, where: str) -> Any:
    """A record of class `cls` from its dict: each field of its declared type."""
    if not isinstance(value, dict):
        raise ResultError(f"{where or 'a result'} must be an object, not {kind_of(value)}")
    at = f"{where}: " if where else ""
    hints = _hints(cls)
    unknown = next((k for k in value if k not in hints), None)
    if unknown is not None:
        raise ResultError(f"{at}unknown field {str(unknown)[:60]!r}")
    missing = [
        f.name for f in dataclasses.fields(cls) if f.name not in value and f.default is f.default_factory
    ]
    if missing:  # a field with neither a default nor a default factory (both MISSING)
        raise ResultError(f"{at}{missing[0]} is missing")
    return cls(**{k: _typed(hints[k], v, f"{where}.{k}" if where else k) for k, v in value.items()})


def _typed(hint: Any, value: Any, where: str) -> Any:
    """`value` as the type `hint` declares: a record, a tuple, a dict, an optional or a scalar."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        if value is None or (not value and any(dataclasses.is_dataclass(a) for a in args)):
            return None  # an optional record left empty ({} as well as null) is none
        return _typed(next(a for a in args if a is not type(None)), value, where)
    if hint is SdpaConfig or dataclasses.is_dataclass(hint) or origin is dict:
        if not isinstance(value, dict):
            raise ResultError(f"{where} must be an object, not {kind_of(value)}")
        if hint is SdpaConfig:
            return config_from_dict(value)
        if origin is not dict:
            return read_record(hint, value, where)
        return {k: _typed(args[1], v, f"{where}[{str(k)[:60]!r}]") for k, v in value.items()}
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ResultError(f"{where} must be a list, not {kind_of(value)}")
        return tuple(_typed(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if not _is(hint, value):
        raise ResultError(f"{where} must be {_SCALAR_WORDS[hint]}, not {kind_of(value)}")
    return value


_SCALAR_WORDS = {str: "text", bool: "true or false", int: "a whole number", float: "a number"}


def _is(hint: Any, value: Any) -> bool:
    """Whether a scalar is of the declared type; true and false are never numbers."""
    if hint is bool or isinstance(value, bool):
        return hint is bool and isinstance(value, bool)
    if hint is float:
        return isinstance(value, numbers.Real)
    return isinstance(value, numbers.Integral if hint is int else hint)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)
