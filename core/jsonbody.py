"""Compact JSON bytes for the hot paths (RPC bodies, fork-server requests): orjson, about a tenth of the json
module's time (a busy master encodes every task it dispatches, a worker every result and every start it asks
its spawner for), with the json module for what orjson refuses, so every value the json module could write
is still written: an integer past 64 bits, a string with a lone surrogate, nesting deeper than 254.

NaN and the infinities, which JSON has not, are written as null (the json module wrote ``NaN``, which other
readers refuse; PostgreSQL's jsonb cannot hold them, so no task parameter has one). Only writing: orjson
reads an integer past 64 bits as a float, so bodies are read with the json module."""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS  # {1: ...} -> {"1": ...}, as the json module writes it


@functools.cache
def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]


def fields(obj: Any) -> dict[str, Any]:
    """A dataclass's fields by name, one level (nested dataclasses are left to the writer): a message's body
    (rpc.codec), and the json module's ``default`` (orjson writes dataclasses itself, the same way)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {name: getattr(obj, name) for name in _names(type(obj))}
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def dumps(value: Any) -> bytes:
    """``value`` (dicts, lists, tuples, str, int, float, bool, None, dataclasses) as compact JSON bytes."""
    try:
        return orjson.dumps(value, option=_OPTIONS)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":"), default=fields).encode()
