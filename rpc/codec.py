"""Typed message decoding: a JSON object -> a frozen dataclass, or BadRequest naming the bad field."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from functools import cache
from typing import Any, TypeVar, Union

from rpc.errors import BadRequest

T = TypeVar("T")

#: the message version this code speaks; bodies carry it as "v"
VERSION = 1


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@cache
def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]


def _shallow(obj: Any) -> dict[str, Any]:
    """A dataclass met inside a message, for the JSON encoder (which walks what it returns)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {name: getattr(obj, name) for name in _names(type(obj))}
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def encode(msg: Any) -> dict[str, Any]:
    """A message dataclass -> JSON-ready dict with the version. Shallow: nested dataclasses are left
    to ``dumps`` (dataclasses.asdict deep-copies every value, a fifth of a busy master's time)."""
    data = _shallow(msg)
    data["v"] = VERSION
    return data


def dumps(msg: Any) -> bytes:
    """A message dataclass -> its JSON body."""
    return json.dumps(encode(msg), separators=(",", ":"), default=_shallow).encode()


def dumps_reply(reply: Any) -> bytes:
    """A reply dataclass (no version field) or plain value -> JSON."""
    return json.dumps(reply, separators=(",", ":"), default=_shallow).encode()


def decode(cls: type[T], data: Any) -> T:
    """Build ``cls`` from a JSON value; raises BadRequest with the field path on any mismatch."""
    if not isinstance(data, dict):
        raise BadRequest(f"{cls.__name__}: body must be a JSON object", 400)
    version = data.get("v", VERSION)
    if version != VERSION:
        raise BadRequest(f"{cls.__name__}: unsupported message version {version!r} (this node speaks {VERSION})", 400)
    return _decode_obj(cls, data, cls.__name__)


def _decode_obj(cls: type[T], data: dict[str, Any], path: str) -> T:
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    known = set()
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        known.add(f.name)
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise BadRequest(f"{path}.{f.name}: required field missing", 400)
            continue
        kwargs[f.name] = _value(hints[f.name], data[f.name], f"{path}.{f.name}")
    unknown = set(data) - known - {"v"} - getattr(cls, "RETIRED", frozenset())
    if unknown:
        raise BadRequest(f"{path}: unknown fields {sorted(unknown)}", 400)
    return cls(**kwargs)


def _value(hint: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _value(arg, value, path)
            except BadRequest as exc:
                errors.append(str(exc))
        raise BadRequest(errors[0] if errors else f"{path}: bad value", 400)
    if hint is Any:
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise BadRequest(f"{path}: expected true/false, got {type(value).__name__}", 400)
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadRequest(f"{path}: expected an integer, got {type(value).__name__}", 400)
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BadRequest(f"{path}: expected a number, got {type(value).__name__}", 400)
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise BadRequest(f"{path}: expected a string, got {type(value).__name__}", 400)
        return value
    if origin is list:
        if not isinstance(value, list):
            raise BadRequest(f"{path}: expected a list, got {type(value).__name__}", 400)
        (item,) = typing.get_args(hint) or (Any,)
        return [_value(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise BadRequest(f"{path}: expected an object, got {type(value).__name__}", 400)
        _, item = typing.get_args(hint) or (str, Any)
        return {str(k): _value(item, v, f"{path}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise BadRequest(f"{path}: expected an object, got {type(value).__name__}", 400)
        return _decode_obj(hint, value, path)  # type: ignore[arg-type]
    raise BadRequest(f"{path}: unsupported field type {hint!r}", 500)  # pragma: no cover
