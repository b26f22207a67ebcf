"""The attacks of the hostile review (issue 24) by an ordinary account, each pinned through the real API with
real users and tokens (tests/hostile.py): alice and bob, each with their own project, no admin rights."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine.secretbox import ensure_key_file
from tests.hostile import Hostile, hostile_api, shell, unique, waits_on
from tests.test_migrate_dolphinscheduler import load
from tests.tls import node_files

DATES = [dt.datetime(2024, 3, d, tzinfo=dt.UTC).isoformat() for d in (1, 2)]


@pytest.fixture
async def world(fresh_db: str) -> AsyncIterator[Hostile]:
    async with hostile_api(fresh_db) as w:
        yield w


async def test_an_all_dependent_backfill_queues_only_what_the_caller_may_start(world: Hostile) -> None:
    """Item 3: bob's victim_wf waits on alice's workflow; alice's ALL_DEPENDENT backfill must neither queue it
    nor name it. Her own downstream workflow is queued; one whose tenant grant was revoked is skipped; one of
    bob's she may only READ is counted, not named."""
    mine, victim = unique("alice"), unique("victim")
    up = await world.workflow("alice", {"name": "up", "project": mine, "tasks": [shell("a")]})
    own = await world.workflow("alice", {"name": "own", "project": mine, "tasks": [waits_on(up)]})
    # alice shares her project with bob (READ), so bob's workflows may wait on hers
    await world.ok("alice", "PUT", f"/api/v1/projects/{mine}/grants/bob", {"perms": ["READ"]})
    victim_wf = await world.workflow("bob", {"name": "victim_wf", "project": victim, "tasks": [waits_on(up)]})
    # a tenant granted to alice's project, then revoked: a start of that workflow would be refused
    await world.ok("admin", "POST", "/api/v1/tenants", {"name": "etl"})
    grant = await world.ok("admin", "POST", "/api/v1/grants", {"resource_type": "tenant", "resource": "etl",
                                                               "project": mine})  # fmt: skip
    tenant_wf = await world.workflow(
        "alice", {"name": "as_etl", "project": mine, "tenant": "etl", "tasks": [waits_on(own)]}
    )
    await world.ok("admin", "DELETE", f"/api/v1/grants/{grant['id']}")
    # bob's second project: alice may read it, not start anything in it
    shared = unique("shared")
    readable = await world.workflow("bob", {"name": "readable", "project": shared, "tasks": [waits_on(up)]})
    await world.ok("bob", "PUT", f"/api/v1/projects/{shared}/grants/alice", {"perms": ["READ"]})
    assert (await world.call("alice", "GET", f"/api/v1/workflows/{victim_wf}")).status == 404

    reply = await world.ok(
        "alice", "POST", f"/api/v1/workflows/{up}/backfill", {"dates": DATES, "dependent_mode": "ALL_DEPENDENT"}
    )
    listed = {d["code"]: d for d in reply["dependents"]}
    assert set(listed) == {own, tenant_wf}
    assert listed[own]["command_ids"] and listed[own]["skipped"] is None
    assert not listed[tenant_wf]["command_ids"] and "tenant 'etl'" in listed[tenant_wf]["skipped"]
    assert reply["skipped_not_permitted"] == 2
    text = str(reply)
    assert "victim" not in text and "readable" not in text and str(victim_wf) not in text
    queued = {r["workflow_definition_code"] for r in await world.query("SELECT workflow_definition_code FROM command")}
    assert queued == {up, own} and not {victim_wf, readable, tenant_wf} & queued
    # bob may read alice's workflow, not backfill it
    assert (await world.call("bob", "POST", f"/api/v1/workflows/{up}/backfill", {"dates": DATES})).status == 403


async def test_a_token_without_write_creates_no_project(world: Hostile) -> None:
    """Item 7: a READ+EXECUTE token created a project (and saved a workflow in it): creating one needs WRITE."""
    await world.user("carol", perms=["READ", "EXECUTE"])
    fresh = unique("fresh")
    doc = {"name": "w", "project": fresh, "tasks": [shell("a")]}
    answer = await world.call("carol", "POST", "/api/v1/workflows", doc)
    assert answer.status == 403 and "WRITE" in answer.error["message"] and answer.error["field"] == "project"
    answer = await world.call("carol", "POST", "/api/v1/projects", {"name": fresh})
    assert answer.status == 403 and answer.error["field"] == "name"
    assert not await world.query("SELECT 1 FROM project WHERE name = $1", fresh)
    # a token carrying WRITE still may
    await world.user("dave", perms=["WRITE"])
    assert (await world.call("dave", "POST", "/api/v1/workflows", doc)).status == 201


async def test_a_token_mints_only_weaker_shorter_lived_children_revoked_with_it(world: Hostile) -> None:
    """Item 7: a 1-day READ token minted a 365-day token, revoking the parent left the child alive, and a READ
    token revoked its user's full token. A token mints only within its rights and lifetime, its children die
    with it, and managing tokens needs a session or a token of full rights."""
    full = await world.ok("alice", "POST", "/api/v1/tokens", {"name": "full", "expires_in_days": 1})
    world.tokens["alice-1d"] = full["token"]
    limit = dt.datetime.fromisoformat(full["expire_time"])
    reduced = await world.ok("alice", "POST", "/api/v1/tokens", {"name": "ro", "perms": ["READ"]})
    world.tokens["alice-ro"] = reduced["token"]
    # the reduced token manages no tokens at all: it cannot mint, list, or revoke its user's full token
    calls = [("POST", "/api/v1/tokens", {"name": "x", "perms": ["READ"]}), ("GET", "/api/v1/tokens", None),
             ("DELETE", f"/api/v1/tokens/{full['id']}", None)]  # fmt: skip
    for method, path, body in calls:
        answer = await world.call("alice-ro", method, path, body)
        assert answer.status == 403 and "full rights" in answer.error["message"], (method, path)
    assert (await world.call("alice-1d", "GET", "/api/v1/me")).status == 200
    # the 1-day full token: a 365-day child is refused; without a lifetime the child ends with its parent
    answer = await world.call("alice-1d", "POST", "/api/v1/tokens", {"name": "long", "expires_in_days": 365})
    assert answer.status == 400 and answer.error["field"] == "expires_in_days"
    child = await world.ok("alice-1d", "POST", "/api/v1/tokens", {"name": "child"})
    assert dt.datetime.fromisoformat(child["expire_time"]) <= limit
    world.tokens["child"] = child["token"]
    grandchild = await world.ok("child", "POST", "/api/v1/tokens", {"name": "grandchild", "perms": ["READ"]})
    world.tokens["grandchild"] = grandchild["token"]
    assert (await world.call("grandchild", "GET", "/api/v1/me")).status == 200
    # revoking the parent revokes every token it minted, transitively
    revoked = await world.ok("alice", "DELETE", f"/api/v1/tokens/{full['id']}")
    assert set(revoked["revoked"]) == {full["id"], child["id"], grandchild["id"]}
    for name in ("alice-1d", "child", "grandchild"):
        assert (await world.call(name, "GET", "/api/v1/me")).status == 401, name
    assert (await world.call("alice-ro", "GET", "/api/v1/me")).status == 200
    # another user's token: still 404, whatever its family
    bobs = [t["id"] for t in (await world.ok("bob", "GET", "/api/v1/tokens"))["items"]]
    assert (await world.call("alice", "DELETE", f"/api/v1/tokens/{bobs[0]}")).status == 404


def _sub(target: str) -> dict[str, Any]:
    return {"name": "sub", "type": "SUB_PROCESS", "params": {"workflow": target}}


async def test_a_sub_process_cycle_is_refused_when_saved(world: Hostile) -> None:
    """Item 5: a SUB_PROCESS naming its own workflow, or a cycle A -> B -> A, made 1,297 instances in 20 s.
    Both are refused at save time (400 at the field), for admins too; a chain without a cycle is fine."""
    mine = unique("loop")
    for who in ("alice", "admin"):
        for params in ({"workflow": "self"}, {"workflow": "self", "project": mine}):
            doc = {"name": "self", "project": mine, "tasks": [{"name": "s", "type": "SUB_PROCESS", "params": params}]}
            answer = await world.call(who, "POST", "/api/v1/workflows", doc)
            assert answer.status == 400 and answer.error["field"] == "tasks[0].params.workflow", answer.body
    # B runs A (not saved yet); saving A to run B closes the cycle
    await world.workflow("alice", {"name": "b", "project": mine, "tasks": [_sub("a")]})
    answer = await world.call(
        "alice", "POST", "/api/v1/workflows", {"name": "a", "project": mine, "tasks": [_sub("b")]}
    )
    assert answer.status == 400 and "cycle" in answer.error["message"], answer.body
    # A saved plain, then changed to run C -> B -> A: refused by code as well as by name
    a = await world.workflow("alice", {"name": "a", "project": mine, "tasks": [shell("x")]})
    c = await world.workflow("alice", {"name": "c", "project": mine, "tasks": [_sub("b")]})
    by_code = {"name": "s", "type": "SUB_PROCESS", "params": {"workflow_code": c}}
    answer = await world.call(
        "alice", "PUT", f"/api/v1/workflows/{a}", {"name": "a", "project": mine, "tasks": [by_code]}
    )
    assert answer.status == 400 and answer.error["field"] == "tasks[0].params.workflow_code", answer.body
    # no cycle: d runs c -> b -> a (a plain SHELL)
    assert await world.workflow("alice", {"name": "d", "project": mine, "tasks": [_sub("c")]})


async def test_an_event_stream_ends_when_its_token_is_revoked(fresh_db: str) -> None:
    """Low item: an SSE stream kept delivering events after its token was revoked. It checks its credentials
    before every batch and keep-alive and ends with ``signed-out``."""
    async with hostile_api(fresh_db, ["api.events_heartbeat_seconds=0.1"]) as world:
        listing = await world.ok("alice", "GET", "/api/v1/tokens")
        (mine,) = [t["id"] for t in listing["items"]]
        headers = {"Authorization": f"Bearer {world.tokens['alice']}"}
        async with world.session.get(f"{world.base}/api/v1/events", headers=headers) as stream:
            assert stream.status == 200
            assert (await stream.content.readline()).startswith(b"id: ")  # hello
            await world.ok("admin", "DELETE", f"/api/v1/tokens/{mine}")
            rest = await stream.content.read()  # the server ends the stream
        assert b"event: signed-out" in rest and rest.rstrip().endswith(b"}")


async def test_every_answer_carries_the_security_headers(world: Hostile) -> None:
    """Low item: no CSP, X-Frame-Options or nosniff on the UI."""
    for who, path in ((None, "/"), (None, "/health"), (None, "/docs"), (None, "/api/v1/me"), ("alice", "/api/v1/me"),
                      ("alice", "/api/v1/workflows/123456"), (None, "/nowhere/at/all")):  # fmt: skip
        headers = (await world.call(who, "GET", path)).headers
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"], path
        assert "script-src 'self'" in headers["Content-Security-Policy"], path
        # the UI's <base href>: with base-uri 'none' a deep link (/instances/3) loaded a blank page
        assert "base-uri 'self'" in headers["Content-Security-Policy"], path
        assert headers["X-Frame-Options"] == "DENY" and headers["X-Content-Type-Options"] == "nosniff", path


async def test_the_session_cookie_is_secure_with_tls_on(fresh_db: str) -> None:
    """Low item: the session cookie lacked Secure with TLS on (api.tls_cert) and session_cookie_secure unset."""
    files = node_files()
    async with hostile_api(fresh_db, [f"api.tls_cert={files.cert}", f"api.tls_key={files.key}"]) as world:
        answer = await world.call(None, "POST", "/api/v1/login", {"user": "alice", "password": "correct horse battery"})
        assert answer.status == 200, answer.body
        cookie = answer.headers["Set-Cookie"]
        assert cookie.startswith("porpoise_session=") and "Secure" in cookie and "HttpOnly" in cookie, cookie


async def test_backfill_parallelism_and_dependent_polling_are_bounded(world: Hostile) -> None:
    """Low items: backfill ``parallelism`` was unbounded (one command per date with PARALLEL), and a DEPENDENT
    task could poll every 50 ms."""
    mine = unique("bounds")
    up = await world.workflow("alice", {"name": "up", "project": mine, "tasks": [shell("a")]})
    body = {"dates": DATES, "run_mode": "PARALLEL", "parallelism": 100_000}
    answer = await world.call("alice", "POST", f"/api/v1/workflows/{up}/backfill", body)
    assert answer.status == 400 and answer.error["field"] == "parallelism", answer.body
    many = [(dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=d)).isoformat() for d in range(100)]
    reply = await world.ok("alice", "POST", f"/api/v1/workflows/{up}/backfill", {"dates": many, "run_mode": "PARALLEL"})
    assert reply["chains"] == 64
    fast = waits_on(up)
    fast["params"]["check_interval"] = 0.05
    answer = await world.call("alice", "POST", "/api/v1/workflows", {"name": "poll", "project": mine, "tasks": [fast]})
    assert answer.status == 400 and answer.error["field"].endswith("check_interval"), answer.body


async def test_rerun_recover_and_resume_check_the_tenant_grant_again(world: Hostile) -> None:
    """Low item: rerun / recover / resume did not re-check the tenant grant (a start does)."""
    mine = unique("tenant")
    await world.ok("alice", "POST", "/api/v1/projects", {"name": mine})
    await world.ok("admin", "POST", "/api/v1/tenants", {"name": "etl"})
    grant = await world.ok("admin", "POST", "/api/v1/grants", {"resource_type": "tenant", "resource": "etl",
                                                               "project": mine})  # fmt: skip
    code = await world.workflow("alice", {"name": "w", "project": mine, "tenant": "etl", "tasks": [shell("a")]})
    ids = {}
    # a finished, a failed and a paused run of it (as a master leaves them)
    for n, (action, state) in enumerate((("rerun", 7), ("recover-failed", 6), ("resume", 3))):
        (row,) = await world.query(
            "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version, project_code,"
            " state, command_type, command_id) SELECT 'w-1', code, 1, project_code, $2, 0, $3 FROM workflow_definition"
            " WHERE code = $1 RETURNING id",
            code,
            state,
            900 + n,
        )
        ids[action] = row["id"]
    await world.ok("admin", "DELETE", f"/api/v1/grants/{grant['id']}")
    for action, instance in ids.items():
        answer = await world.call("alice", "POST", f"/api/v1/instances/{instance}/{action}")
        assert answer.status == 403 and answer.error["field"] == "tenant", (action, answer.body)
    assert not await world.query("SELECT 1 FROM command")


async def test_a_task_group_queue_hides_other_projects_tasks(world: Hostile) -> None:
    """Low item: a task group's queue showed every project's task names to any signed-in user."""
    group = await world.ok("admin", "POST", "/api/v1/task-groups", {"name": unique("g"), "size": 1})
    for n, (who, task) in enumerate((("alice", "alice_task"), ("bob", "secret_payroll_task"))):
        code = await world.workflow(who, {"name": "w", "project": unique(who), "tasks": [shell("a")]})
        await world.query(
            "WITH w AS (INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version,"
            " project_code, state, command_type, command_id) SELECT 'w-1', code, 1, project_code, 1, 0, $2"
            " FROM workflow_definition WHERE code = $1 RETURNING id), t AS (INSERT INTO task_instance (name,"
            " task_type, task_code, task_definition_version, workflow_instance_id, state, attempt, flag)"
            " SELECT $3, 'SHELL', 7, 1, id, 17, 1, 1 FROM w RETURNING id, workflow_instance_id)"
            " INSERT INTO task_group_queue (task_group_id, task_instance_id, workflow_instance_id, slots)"
            " SELECT $4, id, workflow_instance_id, 1 FROM t RETURNING task_instance_id",
            code,
            20_000 + n,
            task,
            group["id"],
        )
    queue = (await world.ok("alice", "GET", f"/api/v1/task-groups/{group['id']}/queue"))["items"]
    assert [q["task"] for q in queue] == ["alice_task", None] and queue[1]["task_instance_id"] is None
    assert "secret_payroll_task" not in str(queue)
    assert {
        q["task"] for q in (await world.ok("admin", "GET", f"/api/v1/task-groups/{group['id']}/queue"))["items"]
    } == {
        "alice_task",
        "secret_payroll_task",
    }


async def test_concurrent_logins_cannot_race_past_the_throttle(fresh_db: str) -> None:
    """Low item: the login throttle was checked before the (slow) password check and counted after it, so
    concurrent attempts all got a guess. Now at most api.login_max_failures (5) guesses get through."""
    async with hostile_api(fresh_db, ["api.login_max_failures=5"]) as world:
        guesses = [{"user": "alice", "password": f"guess number {i}"} for i in range(20)]
        answers = await asyncio.gather(*(world.call(None, "POST", "/api/v1/login", g) for g in guesses))
        statuses = sorted(a.status for a in answers)
        assert statuses == [401] * 5 + [429] * 15, statuses
        # the right password is refused too until the window has passed
        right = await world.call(None, "POST", "/api/v1/login", {"user": "alice", "password": "correct horse battery"})
        assert right.status == 429


async def test_metrics_can_be_closed_with_a_token(fresh_db: str) -> None:
    """Low item: /metrics was open to anyone; with api.metrics_token it answers only to that token."""
    async with hostile_api(fresh_db, ["api.metrics_token=scrape-me-0123456789"]) as world:
        assert (await world.call(None, "GET", "/metrics")).status == 401
        assert (await world.call("alice", "GET", "/metrics")).status == 401  # a user's token is not the scraper's
        world.tokens["scraper"] = "scrape-me-0123456789"
        answer = await world.call("scraper", "GET", "/metrics")
        assert answer.status == 200 and b"porpoise_" in answer.body


async def test_import_answers_reveal_neither_data_sources_nor_other_projects_workflows(world: Hostile) -> None:
    """Low item: an import's answer told whether a data source exists (400 missing vs 403 not granted) and
    which project owns a workflow code (a SUB_PROCESS naming it was translated to its project and name)."""
    batch = load("ds31_batch-export_shell-python-sql-subprocess.json")
    await world.ok("admin", "PUT", "/api/v1/datasources/admins_only", {"params": {"host": "h"}})
    answers = []
    for source in ("admins_only", "never_made"):
        body = {"export": batch, "project": unique("imp"), "datasources": {"1": source}}
        answer = await world.call("alice", "POST", "/api/v1/import/dolphinscheduler", body)
        answers.append((answer.status, answer.error["field"], answer.error["message"].replace(source, "X")))
    assert answers[0] == answers[1] and answers[0][0] == 400, answers
    # a SUB_PROCESS naming bob's workflow by code: answered as an unknown code, never with its project
    secret = unique("bobs_secret_project")
    code = await world.workflow("bob", {"name": "payroll", "project": secret, "tasks": [shell("a")]})
    only_sub = [w for w in batch if w["processDefinition"]["name"] == "subprocess1"]
    only_sub[0]["taskDefinitionList"][0]["taskParams"]["processDefinitionCode"] = code
    for target in (code, 987_654_321):
        only_sub[0]["taskDefinitionList"][0]["taskParams"]["processDefinitionCode"] = target
        body = {"export": only_sub, "project": unique("imp"), "skip_unsupported": True}
        answer = await world.call("alice", "POST", "/api/v1/import/dolphinscheduler", body)
        assert answer.status >= 400 and secret not in str(answer.body) and "payroll" not in str(answer.body)
        answers.append((answer.status, str(answer.body).replace(str(target), "N")))
    assert answers[-1] == answers[-2], answers[-2:]


async def test_an_admin_saving_into_a_squatted_project_is_told_whose_it_is(world: Hostile) -> None:
    """Low item: whoever creates a project name first owns it, and an admin's later apply wrote into it
    without a word. The answer now says whose project it is."""
    await world.ok("alice", "POST", "/api/v1/projects", {"name": "finance"})  # alice got there first
    saved = await world.ok("admin", "POST", "/api/v1/workflows", {"name": "close", "project": "finance",
                                                                  "tasks": [shell("a")]})  # fmt: skip
    assert saved["warning"] == "project 'finance' belongs to user 'alice'; saved there with admin rights"
    mine = await world.ok("admin", "POST", "/api/v1/workflows", {"name": "w", "project": unique("admins"),
                                                                 "tasks": [shell("a")]})  # fmt: skip
    assert "warning" not in mine
    own = await world.ok(
        "alice", "POST", "/api/v1/workflows", {"name": "w", "project": "finance", "tasks": [shell("a")]}
    )
    assert "warning" not in own


async def test_an_import_whose_sub_processes_form_a_cycle_is_refused(world: Hostile) -> None:
    """Item 5 through an import: two workflows of one file running each other are refused, nothing saved."""
    batch = load("ds31_batch-export_shell-python-sql-subprocess.json")
    (first,) = [w for w in batch if w["processDefinition"]["name"] == "subprocess1"]
    text = json.dumps(first)
    codes = [str(first["processDefinition"]["code"])] + [str(t["code"]) for t in first["taskDefinitionList"]]
    for old in codes:  # a copy under other codes and another name
        text = text.replace(old, str(int(old) + 7))
    second = json.loads(text)
    second["processDefinition"]["name"] = "subprocess2"
    first["taskDefinitionList"][0]["taskParams"]["processDefinitionCode"] = second["processDefinition"]["code"]
    second["taskDefinitionList"][0]["taskParams"]["processDefinitionCode"] = first["processDefinition"]["code"]
    project = unique("imp")
    body = {"export": [first, second], "project": project}
    answer = await world.call("alice", "POST", "/api/v1/import/dolphinscheduler", body)
    assert answer.status == 400 and "cycle" in answer.error["message"], answer.body
    assert not await world.query(
        "SELECT 1 FROM workflow_definition d JOIN project p ON p.code = d.project_code WHERE p.name = $1", project
    )


@pytest.fixture
async def keyed(fresh_db: str, tmp_path: Path) -> AsyncIterator[Hostile]:
    """The hostile set-up with a secrets keyring (data source passwords, alert sender tokens)."""
    async with hostile_api(fresh_db, [f"secrets.key_file={ensure_key_file(tmp_path / 'secrets.key')}"]) as w:
        yield w


async def test_data_source_tests_are_bounded_per_user(keyed: Hostile) -> None:
    """A user with a grant on a data source starts its connection tests (a Python process each, up to 120 s)
    as fast as she likes: against a server that never answers, the third at once is a 429, and the held
    ones still answer in time with the reason, never the password."""
    accepted: list[asyncio.StreamWriter] = []
    two = asyncio.Event()

    async def blackhole(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        if len(accepted) >= 2:
            two.set()

    server = await asyncio.start_server(blackhole, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    mine, source = unique("alice"), unique("silent")
    await keyed.workflow("alice", {"name": "w", "project": mine, "tasks": [shell("a")]})
    await keyed.ok("admin", "PUT", f"/api/v1/datasources/{source}",
                   {"params": {"host": "127.0.0.1", "port": port, "user": "u", "password": "pw-S3cret-9"}})  # fmt: skip
    await keyed.ok("admin", "POST", "/api/v1/grants", {"resource_type": "datasource", "resource": source,
                                                       "project": mine})  # fmt: skip
    try:
        held = [
            asyncio.create_task(keyed.call("alice", "POST", f"/api/v1/datasources/{source}/test", {"timeout": 60}))
            for _ in range(2)
        ]
        await asyncio.wait_for(two.wait(), 60)
        third = await keyed.call("alice", "POST", f"/api/v1/datasources/{source}/test", {"timeout": 60})
        assert third.status == 429 and third.headers["Retry-After"]
        for writer in accepted:  # the server goes away: the held tests end with the reason
            writer.transport.abort()
        for answer in await asyncio.gather(*held):
            assert answer.status == 200 and answer.body["ok"] is False and "S3cret" not in json.dumps(answer.body)
        after = await keyed.call("alice", "POST", f"/api/v1/datasources/{source}/test", {"timeout": 1})
        assert after.status == 200
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_a_masked_secret_is_not_kept_when_the_sender_is_pointed_elsewhere(keyed: Hostile) -> None:
    """An edit that sends a secret back masked keeps the stored one, so an edit moving the sender (its apiUrl,
    its URL, its SMTP host, its type) while keeping a masked token would send that token, never shown to
    anyone, to an address of the editor's choosing at the next test or alert."""
    made = await keyed.ok("admin", "POST", "/api/v1/alert-groups", {"name": unique("g"), "senders": [
        {"type": "SLACK", "name": "bot", "params": {"botToken": "xoxb-never-shown", "channel": "#ops",
                                                   "apiUrl": "https://slack.example.com/api"}},
        {"type": "WEBHOOK", "name": "hook", "params": {"url": "https://hooks.example.com/x",
                                                      "headers": {"Authorization": "Bearer never-shown"}}},
        {"type": "EMAIL", "name": "mail", "params": {"host": "smtp.example.com", "sender": "a@example.com",
                                                    "receivers": ["b@example.com"], "user": "a",
                                                    "password": "never-shown"}},
    ]})  # fmt: skip
    group = f"/api/v1/alert-groups/{made['id']}"
    shown = (await keyed.ok("admin", "GET", group))["senders"]
    moves = [
        {"apiUrl": "https://attacker.example.net"},
        {"url": "https://attacker.example.net/x"},
        {"host": "smtp.attacker.example.net"},
    ]
    for i, move in enumerate(moves):
        senders = [{**s, "params": {**s["params"], **(move if j == i else {})}} for j, s in enumerate(shown)]
        answer = await keyed.call("admin", "PATCH", group, {"senders": senders})
        assert answer.status == 400 and answer.error["field"] == f"senders[{i}].params", answer.body
    retyped = [{**shown[0], "type": "TELEGRAM", "params": {**shown[0]["params"], "chatId": "1"}}, *shown[1:]]
    assert (await keyed.call("admin", "PATCH", group, {"senders": retyped})).status == 400
    # where it sends unchanged, or the secret given again: the edit is taken
    renamed = [{**shown[0], "name": "bot2", "params": {**shown[0]["params"], "channel": "#dev"}}, *shown[1:]]
    assert (await keyed.ok("admin", "PATCH", group, {"senders": renamed}))["senders"][0]["name"] == "bot2"
    moved = {**shown[0]["params"], "apiUrl": "https://elsewhere.example.net", "botToken": "xoxb-new"}
    await keyed.ok("admin", "PATCH", group, {"senders": [{**shown[0], "params": moved}, *shown[1:]]})
