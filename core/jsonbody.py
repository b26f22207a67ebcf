"""Compact JSON bytes for the hot paths (RPC bodies, fork-server requests): orjson, about a tenth of the json
module's time (a busy master encodes every task it dispatches, a worker every result and every start it asks
its spawner for), with the json module for what orjson refuses, so every value the json module could write
is still written: an integer past 64 bits, a string with a lone surrogate, nesting deeper than 254.

NaN and the infinities, which JSON has not, are written as null (the json module wrote ``NaN``, which other
readers refuse; PostgreSQL's jsonb cannot hold them, so no task parameter has one). Only writing: orjson
reads an integer past 64 bits as a float, so bodies are read with the json module."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS  # {1: ...} -> {"1": ...}, as the json module writes it


def _fields(obj: Any) -> dict[str, Any]:
    """A dataclass inside a value, for the json module (orjson writes dataclasses itself, the same way)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def dumps(value: Any) -> bytes:
    """``value`` (dicts, lists, tuples, str, int, float, bool, None, dataclasses) as compact JSON bytes."""
    try:
        return orjson.dumps(value, option=_OPTIONS)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":"), default=_fields).encode()
