"""The permission matrix, generated from the API's route table (engine.api.server.ROUTES).

Every route x {no credentials, expired token, stranger, READ, EXECUTE, WRITE, project owner, admin} has an
expected outcome, derived from the rule this file pins for the route (RULES): a route added without a rule,
or whose rule changes, fails ``test_every_route_has_the_pinned_rule`` until RULES says what it should be.

The matrix runs the real API server stack (authentication middleware, route binding, access checks) on a
real PostgreSQL with every handler replaced by a stub that answers ``{"reached": true}``: "allowed" means the
call got through to the handler, whatever the handler would then do. What the handlers themselves filter
(lists) and refuse is proved end to end by tests/test_users_e2e.py.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from engine import config as config_mod
from engine.accounts.tokens import create_token
from engine.api import access
from engine.api.routing import Call, Route
from engine.api.server import ROUTES, ApiServer
from engine.storage.jsoncodec import register_json
from tests.helpers import TEST_SECRET

RULES = {
    ("GET", "/api/v1/projects"): "USER",
    ("POST", "/api/v1/projects"): "USER",
    ("GET", "/api/v1/projects/{name}"): "READ project path.name",
    ("PATCH", "/api/v1/projects/{name}"): "WRITE project path.name",
    ("DELETE", "/api/v1/projects/{name}"): "OWNER project path.name",
    ("GET", "/api/v1/projects/{name}/parameters"): "READ project path.name",
    ("PUT", "/api/v1/projects/{name}/parameters/{param}"): "WRITE project path.name",
    ("DELETE", "/api/v1/projects/{name}/parameters/{param}"): "WRITE project path.name",
    ("GET", "/api/v1/projects/{name}/resources"): "READ project path.name",
    ("POST", "/api/v1/projects/{name}/resources"): "WRITE project path.name",
    ("DELETE", "/api/v1/projects/{name}/resources"): "WRITE project path.name",
    ("GET", "/api/v1/projects/{name}/resources/content"): "READ project path.name",
    ("GET", "/api/v1/projects/{name}/resources/versions"): "READ project path.name",
    ("POST", "/api/v1/projects/{name}/resources/restore"): "WRITE project path.name",
    ("GET", "/api/v1/projects/{name}/resources/references"): "READ project path.name",
    ("GET", "/api/v1/workflows"): "USER",
    ("POST", "/api/v1/workflows"): "WRITE project body.project create",
    ("GET", "/api/v1/workflows/{code}"): "READ workflow path.code",
    ("PUT", "/api/v1/workflows/{code}"): "WRITE workflow path.code",
    ("DELETE", "/api/v1/workflows/{code}"): "WRITE workflow path.code",
    ("GET", "/api/v1/workflows/{code}/versions"): "READ workflow path.code",
    ("GET", "/api/v1/workflows/{code}/versions/{version}"): "READ workflow path.code",
    ("POST", "/api/v1/workflows/{code}/versions/{version}/switch"): "WRITE workflow path.code",
    ("POST", "/api/v1/workflows/{code}/online"): "WRITE workflow path.code",
    ("POST", "/api/v1/workflows/{code}/offline"): "WRITE workflow path.code",
    ("POST", "/api/v1/workflows/{code}/start"): "EXECUTE workflow path.code uses alert_group body.warning_group_id",
    ("POST", "/api/v1/workflows/{code}/backfill"): "EXECUTE workflow path.code uses alert_group body.warning_group_id",
    ("GET", "/api/v1/commands/{id}"): "READ command path.id",
    ("GET", "/api/v1/instances"): "USER",
    ("GET", "/api/v1/instances/{id}"): "READ instance path.id",
    ("GET", "/api/v1/instances/{id}/waiting"): "READ instance path.id",
    ("POST", "/api/v1/instances/{id}/stop"): "EXECUTE instance path.id",
    ("POST", "/api/v1/instances/{id}/pause"): "EXECUTE instance path.id",
    ("POST", "/api/v1/instances/{id}/resume"): "EXECUTE instance path.id",
    ("POST", "/api/v1/instances/{id}/recover-failed"): "EXECUTE instance path.id",
    ("POST", "/api/v1/instances/{id}/rerun"): "EXECUTE instance path.id",
    ("POST", "/api/v1/tasks/{id}/force-success"): "EXECUTE task path.id",
    ("GET", "/api/v1/schedules"): "USER",
    ("POST", "/api/v1/schedules"): "WRITE workflow body.workflow_code uses alert_group body.warning_group_id",
    ("POST", "/api/v1/schedules/preview"): "USER",
    ("GET", "/api/v1/schedules/{id}"): "READ schedule path.id",
    ("PUT", "/api/v1/schedules/{id}"): "WRITE schedule path.id uses alert_group body.warning_group_id",
    ("DELETE", "/api/v1/schedules/{id}"): "WRITE schedule path.id",
    ("POST", "/api/v1/schedules/{id}/online"): "WRITE schedule path.id",
    ("POST", "/api/v1/schedules/{id}/offline"): "WRITE schedule path.id",
    ("GET", "/api/v1/tasks/{id}"): "READ task path.id",
    ("GET", "/api/v1/tasks/{id}/log"): "READ task path.id",
    ("GET", "/api/v1/tasks/{id}/log/download"): "READ task path.id",
    ("GET", "/api/v1/tasks/{id}/log/search"): "READ task path.id",
    ("GET", "/api/v1/tasks/{id}/log/follow"): "READ task path.id",
    ("GET", "/api/v1/cluster"): "USER",
    ("GET", "/api/v1/task-types"): "USER",
    ("GET", "/api/v1/events"): "USER",
    ("GET", "/api/v1/overview"): "USER",
    ("GET", "/api/v1/task-groups"): "USER",
    ("POST", "/api/v1/task-groups"): "ADMIN",
    ("GET", "/api/v1/task-groups/{id}"): "USER",
    ("PATCH", "/api/v1/task-groups/{id}"): "ADMIN",
    ("DELETE", "/api/v1/task-groups/{id}"): "ADMIN",
    ("GET", "/api/v1/task-groups/{id}/queue"): "USER",
    ("POST", "/api/v1/task-groups/queue/{task_instance_id}/force-start"): "ADMIN",
    ("POST", "/api/v1/cluster/workers/{address}/drain"): "ADMIN",
    ("DELETE", "/api/v1/cluster/workers/{address}/drain"): "ADMIN",
    ("GET", "/api/v1/datasources"): "USER",
    ("PUT", "/api/v1/datasources/{name}"): "ADMIN",
    ("POST", "/api/v1/datasources/{name}/test"): "READ datasource path.name",
    ("DELETE", "/api/v1/datasources/{name}"): "ADMIN",
    ("GET", "/api/v1/tokens"): "USER",
    ("POST", "/api/v1/tokens"): "USER",
    ("DELETE", "/api/v1/tokens/{id}"): "USER",
    ("GET", "/api/v1/alert-groups"): "USER",
    ("POST", "/api/v1/alert-groups"): "ADMIN",
    ("GET", "/api/v1/alert-groups/{id}"): "READ alert_group path.id",
    ("PATCH", "/api/v1/alert-groups/{id}"): "ADMIN",
    ("POST", "/api/v1/alert-groups/{id}/test"): "ADMIN",
    ("DELETE", "/api/v1/alert-groups/{id}"): "ADMIN",
    ("GET", "/api/v1/alerts"): "USER",
    ("POST", "/api/v1/alerts/{id}/resend"): "USER",
    ("GET", "/api/v1/alert-types"): "USER",
    ("POST", "/api/v1/import/dolphinscheduler"): "WRITE project body.project create",
    ("POST", "/api/v1/export/dolphinscheduler"): "READ project body.project",
    ("GET", "/api/v1/users"): "ADMIN",
    ("POST", "/api/v1/users"): "ADMIN",
    ("GET", "/api/v1/users/{name}"): "ADMIN",
    ("PUT", "/api/v1/users/{name}"): "ADMIN",
    ("DELETE", "/api/v1/users/{name}"): "ADMIN",
    ("GET", "/api/v1/me"): "USER",
    ("POST", "/api/v1/me/password"): "USER",
    ("POST", "/api/v1/login"): "PUBLIC",
    ("POST", "/api/v1/logout"): "USER",
    ("GET", "/api/v1/projects/{name}/grants"): "OWNER project path.name",
    ("PUT", "/api/v1/projects/{name}/grants/{user}"): "OWNER project path.name",
    ("DELETE", "/api/v1/projects/{name}/grants/{user}"): "OWNER project path.name",
    ("GET", "/api/v1/grants"): "ADMIN",
    ("POST", "/api/v1/grants"): "ADMIN",
    ("DELETE", "/api/v1/grants/{id}"): "ADMIN",
    ("GET", "/api/v1/audit"): "ADMIN",
    ("GET", "/api/v1/tenants"): "USER",
    ("POST", "/api/v1/tenants"): "ADMIN",
    ("DELETE", "/api/v1/tenants/{name}"): "ADMIN",
    ("GET", "/api/v1/worker-groups"): "USER",
    ("POST", "/api/v1/worker-groups"): "ADMIN",
    ("PATCH", "/api/v1/worker-groups/{name}"): "ADMIN",
    ("DELETE", "/api/v1/worker-groups/{name}"): "ADMIN",
    ("GET", "/api/v1/environments"): "USER",
    ("POST", "/api/v1/environments"): "ADMIN",
    ("GET", "/api/v1/environments/{name}"): "USER",
    ("PATCH", "/api/v1/environments/{name}"): "ADMIN",
    ("DELETE", "/api/v1/environments/{name}"): "ADMIN",
}

PERSONAS = ("none", "expired", "stranger", "reader", "executor", "writer", "owner", "admin")
OK, UNAUTH, FORBIDDEN, HIDDEN = "ok", 401, 403, 404
#: expected outcome of each persona, by the need of the route's rule
EXPECTED: dict[str, tuple[Any, ...]] = {
    #          none    expired  stranger   READ       EXECUTE    WRITE      owner      admin
    "PUBLIC": (OK,     OK,      OK,        OK,        OK,        OK,        OK,        OK),
    "USER":   (UNAUTH, UNAUTH,  OK,        OK,        OK,        OK,        OK,        OK),
    "ADMIN":  (UNAUTH, UNAUTH,  FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, OK),
    "READ":   (UNAUTH, UNAUTH,  HIDDEN,    OK,        OK,        OK,        OK,        OK),
    "EXECUTE": (UNAUTH, UNAUTH, HIDDEN,    FORBIDDEN, OK,        FORBIDDEN, OK,        OK),
    "WRITE":  (UNAUTH, UNAUTH,  HIDDEN,    FORBIDDEN, FORBIDDEN, OK,        OK,        OK),
    "OWNER":  (UNAUTH, UNAUTH,  HIDDEN,    FORBIDDEN, FORBIDDEN, FORBIDDEN, OK,        OK),
}  # fmt: skip


def _describe(route: Route) -> str:
    rule = route.rule
    if rule is None:
        return "NO RULE"
    if rule.find is None:
        return rule.need.name
    uses = "".join(f" uses {u.kind} {u.source}" for u in rule.uses)
    return f"{rule.need.name} {rule.find.kind} {rule.find.source}" + (" create" if rule.create else "") + uses


def test_every_route_has_the_pinned_rule() -> None:
    declared = {(r.method, r.path): _describe(r) for r in ROUTES}
    missing = sorted(k for k in declared if k not in RULES)
    assert not missing, f"routes without an expected rule in RULES (add one): {missing}"
    assert not [k for k, v in declared.items() if v == "NO RULE"], "every route declares a rule"
    assert declared == RULES


def test_a_route_without_a_rule_is_admin_only() -> None:
    """Fail closed: bind() treats a route that forgot its rule as admin-only."""
    assert Route("GET", "/x", _stub, "x", "x").rule is None
    assert EXPECTED["ADMIN"][-1] == OK and set(EXPECTED["ADMIN"][2:-1]) == {FORBIDDEN}


async def _stub(api: Any, call: Call) -> web.Response:
    return web.json_response({"reached": True})


@dataclasses.dataclass
class World:
    """A project p owned by `owner`, READ / EXECUTE / WRITE granted to three users, a stranger with nothing,
    an admin; a workflow, instance, task instance, schedule and command of p; a data source and an alert group
    granted to p."""

    tokens: dict[str, str]
    values: dict[str, str]


async def _world(dsn: str) -> World:
    conn = await asyncpg.connect(dsn)
    try:
        ids = {}
        for name, admin in (("admin", True), ("owner", False), ("reader", False), ("executor", False),
                            ("writer", False), ("stranger", False)):  # fmt: skip
            ids[name] = await conn.fetchval(
                "INSERT INTO users (user_name, user_type) VALUES ($1, $2) RETURNING id", name, 0 if admin else 1
            )
        tokens = {name: (await create_token(conn, uid, "t"))[1] for name, uid in ids.items()}
        past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
        tokens["expired"] = (await create_token(conn, ids["owner"], "old", past))[1]
        await conn.execute("INSERT INTO project (code, name, user_id) VALUES (1, 'p', $1)", ids["owner"])
        for name, perm in (("reader", access.READ), ("executor", access.EXECUTE), ("writer", access.WRITE)):
            await conn.execute(
                "INSERT INTO project_user (project_code, user_id, perm) VALUES (1, $1, $2)", ids[name], perm
            )
        await conn.execute("INSERT INTO workflow_definition (code, name, project_code) VALUES (10, 'wf', 1)")
        instance = await conn.fetchval(
            "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version,"
            " project_code, state, command_type, command_id) VALUES ('wf-1', 10, 1, 1, 7, 0, 500) RETURNING id"
        )
        task = await conn.fetchval(
            "INSERT INTO task_instance (name, task_type, task_code, task_definition_version, workflow_instance_id,"
            " state, attempt, flag) VALUES ('t', 'SHELL', 7, 1, $1, 7, 1, 1) RETURNING id",
            instance,
        )
        schedule = await conn.fetchval(
            "INSERT INTO schedule (workflow_definition_code, start_time, end_time, crontab)"
            " VALUES (10, now(), now() + interval '1 day', '0 * * * *') RETURNING id"
        )
        source = await conn.fetchval(
            "INSERT INTO datasource (name, type, connection_params) VALUES ('d', 'POSTGRESQL', '{}') RETURNING id"
        )
        group = await conn.fetchval("INSERT INTO alert_group (group_name) VALUES ('g') RETURNING id")
        for kind, rid in (("datasource", source), ("alert_group", group)):
            await conn.execute(
                "INSERT INTO resource_grant (resource_type, resource_id, project_code) VALUES ($1, $2, 1)", kind, rid
            )
    finally:
        await conn.close()
    values = {"project": "p", "workflow": "10", "instance": str(instance), "task": str(task),
              "schedule": str(schedule), "command": "500", "datasource": "d", "alert_group": str(group)}  # fmt: skip
    return World(tokens, values)


def _request(route: Route, world: World) -> tuple[str, dict[str, Any] | None]:
    """The route's path filled in, and a body: the values its rule's Find reads point into project p."""
    find = route.rule.find if route.rule else None
    path, body = route.path, ({} if route.body is not None else None)
    if find is not None:
        where, _, name = find.source.partition(".")
        value = world.values[find.kind]
        if where == "path":
            path = path.replace("{" + name + "}", value)
        else:
            assert body is not None
            body[name] = int(value) if find.kind in ("workflow",) else value
    for name, filler in (
        ("version", "1"),
        ("user", "reader"),
        ("name", "reader"),
        ("id", "1"),
        ("address", "127.0.0.1:1"),
        ("task_instance_id", "1"),
        ("param", "x"),
    ):
        path = path.replace("{" + name + "}", filler)
    return path, body


@pytest.fixture
async def stub_server(fresh_db: str) -> AsyncIterator[tuple[aiohttp.ClientSession, str, World]]:
    world = await _world(fresh_db)
    cfg = config_mod.load(
        overrides=[f"rpc.secret={TEST_SECRET}", "api.token_cache_seconds=0", "api.anonymous_rate_limit_per_second=0"],
        environ={},
    )
    stubbed = [dataclasses.replace(r, handler=_stub, body={} if r.body is not None else None) for r in ROUTES]
    api = ApiServer(cfg, routes=stubbed)
    api.pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4, init=register_json)
    server = TestServer(api.app)
    await server.start_server()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            yield session, str(server.make_url("")), world
    finally:
        await server.close()
        await api.pool.close()
        await api.etcd.close()
        await api.rpc.close()


async def _outcome(session: aiohttp.ClientSession, base: str, route: Route, persona: str, world: World) -> Any:
    path, body = _request(route, world)
    headers = {} if persona == "none" else {"Authorization": f"Bearer {world.tokens[persona]}"}
    data = None if body is None else json.dumps(body)
    async with session.request(route.method, base + path, data=data, headers=headers) as resp:
        answer = await resp.json()
    if resp.status == 200 and answer == {"reached": True}:
        return OK
    assert "error" in answer and answer["error"]["status"] == resp.status, answer  # always a JSON error
    return resp.status


async def test_permission_matrix(stub_server: tuple[aiohttp.ClientSession, str, World]) -> None:
    session, base, world = stub_server
    wrong = []
    cases = 0
    for route in ROUTES:
        need = route.rule.need.name if route.rule else "ADMIN"
        for persona, expected in zip(PERSONAS, EXPECTED[need], strict=True):
            got = await _outcome(session, base, route, persona, world)
            cases += 1
            if got != expected:
                wrong.append(f"{route.method} {route.path} as {persona}: expected {expected}, got {got}")
    assert not wrong, "\n".join(wrong)
    assert cases == len(ROUTES) * len(PERSONAS)


async def test_hidden_and_missing_answer_alike(stub_server: tuple[aiohttp.ClientSession, str, World]) -> None:
    """A stranger cannot tell a workflow it may not see from one that does not exist."""
    session, base, world = stub_server
    headers = {"Authorization": f"Bearer {world.tokens['stranger']}"}
    answers = []
    for code in (10, 99999):
        async with session.get(f"{base}/api/v1/workflows/{code}", headers=headers) as resp:
            answers.append((resp.status, (await resp.json())["error"]["message"].replace(str(code), "N")))
    assert answers[0] == answers[1] == (404, "workflow N does not exist")


async def test_tokens_of_reduced_rights(stub_server: tuple[aiohttp.ClientSession, str, World], fresh_db: str) -> None:
    """A token carries its user's rights or fewer: an admin's READ-only token is not an admin and cannot write;
    the owner's EXECUTE token starts but cannot edit."""
    session, base, _ = stub_server
    conn = await asyncpg.connect(fresh_db)
    try:
        admin = await conn.fetchval("SELECT id FROM users WHERE user_name = 'admin'")
        owner = await conn.fetchval("SELECT id FROM users WHERE user_name = 'owner'")
        admin_read = (await create_token(conn, admin, "r", perm=access.READ))[1]
        owner_exec = (await create_token(conn, owner, "x", perm=access.READ | access.EXECUTE))[1]
    finally:
        await conn.close()

    async def status(method: str, path: str, token: str, body: Any = None) -> int:
        async with session.request(
            method,
            base + path,
            headers={"Authorization": f"Bearer {token}"},
            data=None if body is None else json.dumps(body),
        ) as resp:
            return resp.status

    assert await status("GET", "/api/v1/users", admin_read) == 403
    assert await status("GET", "/api/v1/workflows/10", admin_read) == 200
    assert await status("PUT", "/api/v1/workflows/10", admin_read, {}) == 403
    assert await status("POST", "/api/v1/workflows/10/start", owner_exec) == 200
    assert await status("PUT", "/api/v1/workflows/10", owner_exec, {}) == 403
    assert await status("GET", "/api/v1/projects/p/grants", owner_exec) == 403
    # creating a project needs WRITE: a READ+EXECUTE token may not, by a save or an import naming a new one
    assert await status("POST", "/api/v1/workflows", owner_exec, {"project": "new-one"}) == 403
    assert await status("POST", "/api/v1/import/dolphinscheduler", owner_exec, {"project": "new-one"}) == 403
    assert await status("POST", "/api/v1/workflows", owner_exec, {"project": "p"}) == 403


async def test_session_cookie_needs_csrf_for_changes(
    stub_server: tuple[aiohttp.ClientSession, str, World], fresh_db: str
) -> None:
    """Cookie-authenticated calls that change something need the X-CSRF-Token header; reads do not."""
    session, base, _ = stub_server
    conn = await asyncpg.connect(fresh_db)
    try:
        owner = await conn.fetchval("SELECT id FROM users WHERE user_name = 'owner'")
        await conn.execute(
            "INSERT INTO user_session (user_id, session_hash, csrf_hash, expire_time)"
            " VALUES ($1, encode(sha256('s3ss'), 'hex'), encode(sha256('csrf'), 'hex'), now() + interval '1 hour')",
            owner,
        )
    finally:
        await conn.close()
    cookies = {"porpoise_session": "s3ss"}
    async with session.get(f"{base}/api/v1/workflows/10", cookies=cookies) as resp:
        assert resp.status == 200
    async with session.post(f"{base}/api/v1/workflows/10/start", cookies=cookies, data="{}") as resp:
        assert resp.status == 403 and "X-CSRF-Token" in (await resp.json())["error"]["message"]
    for wrong in ("nope", ""):
        async with session.post(
            f"{base}/api/v1/workflows/10/start", cookies=cookies, data="{}", headers={"X-CSRF-Token": wrong}
        ) as resp:
            assert resp.status == 403
    async with session.post(
        f"{base}/api/v1/workflows/10/start", cookies=cookies, data="{}", headers={"X-CSRF-Token": "csrf"}
    ) as resp:
        assert resp.status == 200
    async with session.get(f"{base}/api/v1/workflows/10", cookies={"porpoise_session": "other"}) as resp:
        assert resp.status == 401


async def test_a_start_may_name_only_a_granted_alert_group(
    stub_server: tuple[aiohttp.ClientSession, str, World], fresh_db: str
) -> None:
    """The alert group a start, backfill or schedule names must be granted to the caller or a project it sees."""
    session, base, world = stub_server
    conn = await asyncpg.connect(fresh_db)
    try:
        other = await conn.fetchval("INSERT INTO alert_group (group_name) VALUES ('not-granted') RETURNING id")
    finally:
        await conn.close()
    cases = [("owner", world.values["alert_group"], 200), ("owner", other, 404), ("owner", 987654, 404),
             ("admin", other, 200), ("executor", other, 404), ("reader", world.values["alert_group"], 403)]  # fmt: skip
    for persona, group, expected in cases:
        headers = {"Authorization": f"Bearer {world.tokens[persona]}"}
        body = json.dumps({"warning_group_id": int(group)})
        async with session.post(f"{base}/api/v1/workflows/10/start", data=body, headers=headers) as resp:
            answer = await resp.json()
        assert resp.status == expected, (persona, group, answer)
        if expected == 404:
            assert answer["error"]["field"] == "warning_group_id"
