"""The alert channel types (the sender plugins of engine/alerts) and the JSON Schema of each one's params: the UI
draws a sender's form from them. Secret params are marked ``writeOnly`` / ``format: password`` and listed in
``secret``: the API shows them back as "***", and an edit that sends "***" keeps the stored value."""

from __future__ import annotations

import sys
from typing import Any

from engine.alerts.senders import plugins
from engine.api import access
from engine.api.routing import Call, Route

_TYPE = {
    "type": "object",
    "required": ["type", "summary", "params", "secret"],
    "properties": {
        "type": {"type": "string", "description": "the sender type (WEBHOOK, EMAIL, SLACK ...)"},
        "summary": {"type": "string"},
        "params": {"type": "object", "description": "JSON Schema of the sender's params"},
        "secret": {"type": "array", "items": {"type": "string"}, "description": "the params that are secrets"},
    },
}


def _summary(cls: type) -> str:
    doc = cls.__doc__ or sys.modules[cls.__module__].__doc__ or ""
    return " ".join(doc.strip().split("\n\n", 1)[0].replace("``", "").split())


def catalogue() -> list[dict[str, Any]]:
    return [
        {"type": name, "summary": _summary(cls), "params": cls.params_schema, "secret": list(cls.secret)}
        for name, cls in sorted(plugins().items())
    ]


async def list_alert_types(api: Any, call: Call) -> dict[str, Any]:
    return {"items": catalogue()}


ROUTES = [
    Route("GET", "/api/v1/alert-types", list_alert_types, "Alert channel types and their parameter schemas",
          "alerts", response={"type": "object", "required": ["items"], "properties": {"items": {"type": "array",
          "items": _TYPE}}}, rule=access.SIGNED_IN),
]  # fmt: skip
