"""The most relevant violation of a JSON schema as (field path, reason): how a document, a task's params and an
API body name what is wrong, at its field. Below every user of jsonschema so the task registry and the
workflow document share it without importing each other."""

from __future__ import annotations

from typing import Any

import jsonschema

#: a reason quoting more of the offending value than this is cut (never echo a large value back)
_MAX_MESSAGE = 300


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(document)"


def schema_problem(validator: jsonschema.protocols.Validator, doc: Any) -> tuple[str, str] | None:
    """(field path, reason) of the most relevant violation of ``validator``'s schema, or None."""
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is None:
        return None
    where = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        return (_path([*where, extra[0]]) if extra else _path(where)), "unknown field"
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        return _path([*where, missing]), "is required"
    if error.validator == "maxLength":
        return _path(where), f"is too long (more than {error.validator_value} characters)"
    message = error.message
    if len(message) > _MAX_MESSAGE:  # never echo a large value back
        message = f"{message[:_MAX_MESSAGE]}... ({len(message)} characters)"
    return _path(where), message
