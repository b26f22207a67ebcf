"""The cluster as the registry sees it: live masters and workers with their latest heartbeats; draining
a worker (it takes no new tasks, its running ones finish) and undoing it."""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.api import access
from engine.api.routing import ApiError, Call, Route
from registry.heartbeat import ServerStatus
from rpc.errors import RpcError
from rpc.messages import WorkerDrain

#: seconds the API waits for a worker's answer to a drain
DRAIN_TIMEOUT = 5.0

_NODE = {
    "type": "object",
    "required": ["address", "group", "status", "heartbeat"],
    "properties": {
        "address": {"type": "string"},
        "group": {"type": ["string", "null"]},
        "status": {"type": "string"},
        "reason": {"type": "string", "description": "why it takes no new work (a full log disk, a drain), or empty"},
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
        "reason": info.heartbeat.reason,
        "heartbeat": hb,
    }


_DRAIN = {
    "type": "object",
    "properties": {
        "address": {"type": "string"},
        "draining": {"type": "boolean", "description": "the worker takes no new tasks"},
        "running": {"type": "integer", "description": "tasks still running on it"},
        "pending_reports": {"type": "integer", "description": "reports it has not delivered yet"},
    },
}


def _membership(api: Any) -> Any:
    if not api.membership.ready.is_set():
        raise ApiError(503, "the registry (etcd) is not reachable yet")
    return api.membership


async def get_cluster(api: Any, _: Call) -> dict[str, Any]:
    membership = _membership(api)
    return {
        "masters": [_node(m) for m in membership.masters()],
        "workers": [_node(w) for w in membership.workers()],
    }


async def _drain(api: Any, call: Call, drain: bool) -> dict[str, Any]:
    address = call.path["address"]
    if not any(w.address == address for w in _membership(api).workers()):
        raise ApiError(404, f"no live worker at {address!r}", "path.address")
    try:
        reply = await api.rpc.call(address, WorkerDrain(drain), timeout=DRAIN_TIMEOUT)
    except RpcError as exc:
        raise ApiError(502, f"worker {address} did not answer: {exc}") from exc
    if reply.refused:
        raise ApiError(409, f"worker {address}: {reply.refused}")
    return {
        "address": address,
        "draining": reply.draining,
        "running": reply.running,
        "pending_reports": reply.pending_reports,
    }


async def drain_worker(api: Any, call: Call) -> dict[str, Any]:
    return await _drain(api, call, True)


async def undrain_worker(api: Any, call: Call) -> dict[str, Any]:
    return await _drain(api, call, False)


ROUTES = [
    Route("GET", "/api/v1/cluster", get_cluster, "Live masters and workers", "cluster", response=_CLUSTER,
          rule=access.SIGNED_IN),
    Route("POST", "/api/v1/cluster/workers/{address}/drain", drain_worker,
          "Drain a worker: it takes no new tasks, its running tasks finish, it stays up (status DRAINING)",
          "cluster", response=_DRAIN, rule=access.ADMIN),
    Route("DELETE", "/api/v1/cluster/workers/{address}/drain", undrain_worker,
          "End a worker's drain: it takes tasks again (not while it is shutting down: 409)", "cluster",
          response=_DRAIN, rule=access.ADMIN),
]  # fmt: skip
