"""Data sources SQL and PROCEDURE tasks name, by type (POSTGRESQL, MYSQL, CLICKHOUSE, HIVE: the type decides
the driver, engine/tasks/sql_dialects). Passwords and DSNs are sealed with the secrets keyring before they are
stored (engine/secretbox.py) and never returned: shown as ``***``, and a PUT that sends ``***`` back keeps the
stored one (an edit form that never saw it).

``POST /api/v1/datasources/{name}/test`` connects with the stored params and runs ``SELECT 1`` in a
subprocess (``python -m engine.tasks.sql_runner --probe``: a driver that blocks or hangs never holds the API's
loop, and is killed at the timeout); it answers ``ok`` with the server's version, or the server's error."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Iterator, Mapping
from typing import Any

from engine.api import access
from engine.api.routing import PAGE, ApiError, Call, Route, not_found, page, select_page
from engine.secretbox import DATASOURCE_SECRETS, MASK, SecretError, open_params, seal_params
from engine.tasks.sql_dialects import DEFAULT_PORTS, SOURCE_TYPES

_SECRET_KEYS = DATASOURCE_SECRETS
#: seconds a connection test may take by default (the request may ask for 1..120)
TEST_TIMEOUT = 15
_PARAMS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "host": {"type": "string", "pattern": r"^[A-Za-z0-9_.:\[\]-]*$"},
        "port": {
            "type": "integer",
            "minimum": 1,
            "maximum": 65535,
            "description": "default by type: " + ", ".join(f"{k} {v}" for k, v in DEFAULT_PORTS.items()),
        },
        "database": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]*$"},
        "user": {"type": "string"},
        "password": {"type": "string", "description": "*** keeps the stored password"},
        "dsn": {"type": "string", "description": "POSTGRESQL only: a full postgresql:// URL instead of the fields"},
        "other": {
            "type": "object",
            "description": "session settings: PostgreSQL server settings, MySQL session variables, ClickHouse "
            "query settings, Hive configuration",
            "propertyNames": {"pattern": r"^[A-Za-z_][A-Za-z0-9_.]*$"},
            "additionalProperties": {"type": ["string", "integer", "number", "boolean"]},
        },
    },
}
_PUT = {
    "type": "object",
    "required": ["params"],
    "additionalProperties": False,
    "properties": {
        "type": {"enum": list(SOURCE_TYPES), "description": "POSTGRESQL when a new source names none; kept on edit"},
        "params": _PARAMS,
        "note": {"type": "string"},
    },
}
_TEST = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"timeout": {"type": "integer", "minimum": 1, "maximum": 120, "default": TEST_TIMEOUT}},
}
_TESTED = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "type": {"type": "string"},
        "ok": {"type": "boolean"},
        "version": {"type": "string", "description": "the server's, when ok"},
        "error": {"type": "string", "description": "the server's (or the connection's) error, when not ok"},
        "seconds": {"type": "number"},
    },
}
_SOURCE = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "type": {"type": "string"}, "params": {"type": "object"}},
}


def _public(row: Any) -> dict[str, Any]:
    shown = {k: (MASK if k in _SECRET_KEYS else v) for k, v in row["connection_params"].items()}
    return {"name": row["name"], "type": row["type"], "params": shown, "note": row["note"]}


async def list_sources(api: Any, call: Call) -> dict[str, Any]:
    rows, total = await select_page(api.db, call, "datasource", {}, "name", access.granted_filter(call, "datasource"))
    return page([_public(r) for r in rows], total, call)


async def _kept_secrets(api: Any, name: str, kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with each secret sent back as its mask ("***", what GET shows) replaced by the stored value:
    an edit form that never saw the password keeps it."""
    masked = [k for k in _SECRET_KEYS if params.get(k) == MASK]
    if not masked:
        return params
    row = await api.db.fetchrow("SELECT type, connection_params FROM datasource WHERE name = $1", name)
    old = dict(row["connection_params"]) if row is not None else {}
    # a kept password goes only where it went: a new host, port or type with "***" would hand the stored one
    # to a server of the editor's choosing at the next test or task
    if row is not None:
        where = {"type": (kind, row["type"])}
        where |= {k: (params.get(k), old.get(k)) for k in ("host", "port", "dsn") if params.get(k) != MASK}
        for key, (now, before) in where.items():
            if (now or None) != (before or None):
                raise ApiError(400, f"{key} changed: give the {masked[0]} again", f"params.{masked[0]}")
    for key in masked:
        if key not in old:
            raise ApiError(400, f"no stored {key} to keep: give the {key} itself", f"params.{key}")
        params = {**params, key: old[key]}
    return params


async def put_source(api: Any, call: Call) -> dict[str, Any]:
    kind = call.body.get("type")
    if kind is None:
        kind = await api.db.fetchval("SELECT type FROM datasource WHERE name = $1", call.path["name"]) or "POSTGRESQL"
    if call.body["params"].get("dsn") and kind != "POSTGRESQL":
        raise ApiError(
            400, f"dsn is for POSTGRESQL data sources; give host, port and database for {kind}", "params.dsn"
        )
    params = await _kept_secrets(api, call.path["name"], kind, call.body["params"])
    try:
        params = seal_params(api.keyring, params, DATASOURCE_SECRETS, "datasource")
    except SecretError as exc:
        raise ApiError(503, str(exc), "params") from None
    row = await api.db.fetchrow(
        "INSERT INTO datasource (name, type, connection_params, note, user_id) VALUES ($1, $2, $3::jsonb, $4, $5)"
        " ON CONFLICT (name) DO UPDATE SET type = EXCLUDED.type, connection_params = EXCLUDED.connection_params,"
        " note = EXCLUDED.note, update_time = now() RETURNING name, type, connection_params, note",
        call.path["name"],
        kind,
        json.dumps(params),
        call.body.get("note"),
        call.user_id,
    )
    return _public(row)


async def probe(source: Mapping[str, Any], timeout: float) -> tuple[bool, str]:
    """Connect to ``source`` (secrets open) and run SELECT 1 in a subprocess: (ok, the server's version or
    its error)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "engine.tasks.sql_runner", "--probe", str(timeout),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:  # the source (secrets open) on the runner's standard input, never its environment
        out, err = await asyncio.wait_for(proc.communicate(json.dumps(dict(source)).encode()), timeout + 5)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return False, f"no answer within {timeout}s"
    if proc.returncode == 0:
        return True, out.decode(errors="replace").strip()
    lines = err.decode(errors="replace").strip().splitlines()
    return False, (lines[-1] if lines else f"exit code {proc.returncode}").removeprefix("data source test failed: ")


#: connection tests one user may run at once, and one API server: each is a Python process for up to ``timeout``
#: seconds, so a signed-in user holding a grant must not be able to fill the API host with them
TESTS_PER_USER = 2
TESTS_PER_SERVER = 8
#: API server (by id) -> user id -> tests running
_running: dict[int, dict[int, int]] = {}


@contextlib.contextmanager
def _test_slot(api: Any, user_id: int) -> Iterator[None]:
    running = _running.setdefault(id(api), {})
    if running.get(user_id, 0) >= TESTS_PER_USER or sum(running.values()) >= TESTS_PER_SERVER:
        raise ApiError(429, "too many data source tests running; retry when they have answered", retry_after=5)
    running[user_id] = running.get(user_id, 0) + 1
    try:
        yield
    finally:
        running[user_id] -= 1
        if not running[user_id]:
            del running[user_id]
        if not running:
            _running.pop(id(api), None)


async def test_source(api: Any, call: Call) -> dict[str, Any]:
    with _test_slot(api, call.user_id):
        return await _tested(api, call)


async def _tested(api: Any, call: Call) -> dict[str, Any]:
    row = await api.db.fetchrow("SELECT type, connection_params FROM datasource WHERE name = $1", call.path["name"])
    if row is None:
        raise not_found(f"data source {call.path['name']!r}")
    stored = dict(row["connection_params"])
    try:
        source = open_params(api.keyring, stored, DATASOURCE_SECRETS, "datasource")
    except SecretError as exc:
        raise ApiError(503, str(exc), "params") from None
    timeout = (call.body or {}).get("timeout", TEST_TIMEOUT)
    started = time.monotonic()
    ok, said = await probe({**source, "type": row["type"]}, timeout)
    answer: dict[str, Any] = {"name": call.path["name"], "type": row["type"], "ok": ok}
    answer["version" if ok else "error"] = said
    answer["seconds"] = round(time.monotonic() - started, 3)
    return answer


async def delete_source(api: Any, call: Call) -> dict[str, Any]:
    deleted = await api.db.fetchval("DELETE FROM datasource WHERE name = $1 RETURNING name", call.path["name"])
    if deleted is None:
        raise not_found(f"data source {call.path['name']!r}")
    return {"deleted": deleted}


ROUTES = [
    Route("GET", "/api/v1/datasources", list_sources, "Data sources (secrets masked)", "datasources",
          query=PAGE, response=_SOURCE, rule=access.SIGNED_IN),
    Route("PUT", "/api/v1/datasources/{name}", put_source, "Create or replace a data source", "datasources",
          body=_PUT, response=_SOURCE, rule=access.ADMIN),
    Route("POST", "/api/v1/datasources/{name}/test", test_source, "Connect and run SELECT 1", "datasources",
          body=_TEST, body_required=False, response=_TESTED, rule=access.read("datasource", "path.name")),
    Route("DELETE", "/api/v1/datasources/{name}", delete_source, "Delete a data source", "datasources",
          response={"type": "object", "properties": {"deleted": {"type": "string"}}}, rule=access.ADMIN),
]  # fmt: skip
