"""The audit log: who did what, when and from where, kept in PostgreSQL (table audit_log).

Every API call that may change something (any method but GET / HEAD / OPTIONS) is recorded once answered,
allowed or refused: the user, the client address, the action (login, create, update, delete, start, stop,
grant ...), the resource (route tag + path values), the project when known, and the answer's status. Request
bodies are never recorded (they may hold passwords or connection secrets). Admins read it at GET /api/v1/audit.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from core import logs
from engine.api import access
from engine.api.routing import AUDIT_USER, PAGE, PRINCIPAL, PROJECT_CODE, Call, Param, Route, page, select_page
from engine.api.sessions import SAFE_METHODS, client_address
from engine.storage.failures import DB_FAILURES

log = logs.get(__name__)

_VERBS = {"POST": "create", "PUT": "update", "DELETE": "delete"}
#: last path segment -> action, for the POST routes that are actions rather than creations
_ACTIONS = {
    "start": "start", "backfill": "start", "stop": "stop", "pause": "pause", "resume": "resume",
    "recover-failed": "start", "rerun": "start", "force-success": "update", "online": "update",
    "offline": "update", "switch": "update", "login": "login", "logout": "logout", "password": "update",
    "preview": "", "dolphinscheduler": "", "restore": "update",
}  # fmt: skip
_ENTRY = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "time": {"type": "string", "format": "date-time"},
        "user": {"type": ["string", "null"]},
        "address": {"type": ["string", "null"]},
        "action": {"type": "string"},
        "resource_type": {"type": "string"},
        "resource": {"type": ["string", "null"]},
        "status": {"type": "integer"},
    },
}


def action_of(method: str, path: str) -> str:
    """The audit action of a route: 'grant' / 'revoke' for grants, the verb of action routes, else by method."""
    if "/grants" in path:
        return "grant" if method in ("PUT", "POST") else "revoke"
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if method == "POST" and last in _ACTIONS:
        return _ACTIONS[last] or ("import" if "import" in path else "export" if "export" in path else "read")
    return _VERBS.get(method, method.lower())


async def record(api: Any, request: web.Request, route: Route, status: int) -> None:
    """Write one audit row for an answered call (best effort: a failure is logged, never raised)."""
    if request.method in SAFE_METHODS:
        return
    who = request.get(PRINCIPAL)
    attempted = request.get(AUDIT_USER)
    detail = {"path": request.path, **({"query": dict(request.query)} if request.query else {})}
    try:
        await api.db.execute(
            "INSERT INTO audit_log (user_id, user_name, client_addr, action, resource_type, resource, project_code,"
            " status, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb)",
            who.user_id if who else None,
            who.user_name if who else attempted,
            client_address(request),
            action_of(route.method, route.path),
            route.tag,
            "/".join(request.match_info.values())[:255] or None,
            request.get(PROJECT_CODE),
            status,
            json.dumps(detail),
        )
    except DB_FAILURES as exc:
        log.warning("audit record failed", path=request.path, error=str(exc))


async def list_audit(api: Any, call: Call) -> dict[str, Any]:
    q = call.query
    equal = {"user_name": q["user"], "action": q["action"], "resource_type": q["resource_type"]}
    rows, total = await select_page(api.db, call, "audit_log", equal, "id DESC")
    items = [
        {"id": r["id"], "time": r["create_time"], "user": r["user_name"], "address": r["client_addr"],
         "action": r["action"], "resource_type": r["resource_type"], "resource": r["resource"],
         "project_code": r["project_code"], "status": r["status"],
         "detail": r["detail"]}
        for r in rows
    ]  # fmt: skip
    return page(items, total, call)


ROUTES = [
    Route("GET", "/api/v1/audit", list_audit, "The audit log, newest first (admins)", "audit",
          query=(Param("user", str, "user name"), Param("action", str, "login, create, update, delete, start ..."),
                 Param("resource_type", str, "route tag: workflows, users, grants ..."), *PAGE),
          response=_ENTRY, rule=access.ADMIN),
]  # fmt: skip
