"""The cluster as the registry sees it: live masters and workers with their latest heartbeats."""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.api.routing import ApiError, Call, Route
from registry.heartbeat import ServerStatus

_NODE = {
    "type": "object",
    "required": ["address", "group", "status", "heartbeat"],
    "properties": {
        "address": {"type": "string"},
        "group": {"type": ["string", "null"]},
        "status": {"type": "string"},
        "heartbeat": {"type": "object"},
    },
}
_CLUSTER = {
    "type": "object",
    "required": ["masters", "workers"],
    "properties": {"masters": {"type": "array", "items": _NODE}, "workers": {"type": "array", "items": _NODE}},
}


def _node(info: Any) -> dict[str, Any]:
    hb = dataclasses.asdict(info.heartbeat)
    return {
        "address": info.address,
        "group": info.node.group or None,
        "status": ServerStatus(info.heartbeat.status).name,
        "heartbeat": hb,
    }


async def get_cluster(api: Any, _: Call) -> dict[str, Any]:
    if not api.membership.ready.is_set():
        raise ApiError(503, "the registry (etcd) is not reachable yet")
    return {
        "masters": [_node(m) for m in api.membership.masters()],
        "workers": [_node(w) for w in api.membership.workers()],
    }


ROUTES = [Route("GET", "/api/v1/cluster", get_cluster, "Live masters and workers", "cluster", response=_CLUSTER)]
