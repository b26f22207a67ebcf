"""The instances list's filters a DolphinScheduler or Airflow user reaches for: workflow name, project,
business-date (schedule time) range, run type, host and state, each validated at its field (a bad value is a
400 naming it): the real server stack on a real PostgreSQL, rows written as the master writes them."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import pytest

from engine.accounts.tokens import create_token
from engine.api import access
from engine.states import CommandType, WorkflowState
from tests.api_harness import in_process_api

#: (name, workflow code, project code, command type, history_cmd, schedule time, host)
_RUNS = [
    ("nightly-1", 10, 1, CommandType.SCHEDULER, "SCHEDULER", "2026-03-01T00:00:00Z", "m1:5678"),
    ("nightly-2", 10, 1, CommandType.COMPLEMENT_DATA, "COMPLEMENT_DATA", "2026-03-02T00:00:00Z", "m1:5678"),
    ("nightly-3", 10, 1, CommandType.COMPLEMENT_DATA, "COMPLEMENT_DATA", "2026-03-03T00:00:00Z", "m2:5678"),
    ("nightly-4", 10, 1, CommandType.START_PROCESS, "START_PROCESS", None, "m2:5678"),
    ("nightly-5", 10, 1, CommandType.REPEAT_RUNNING, "START_PROCESS,REPEAT_RUNNING", None, "m2:5678"),
    ("nightly-6", 10, 1, CommandType.START_FAILURE_TASK_PROCESS, "SCHEDULER,START_FAILURE_TASK_PROCESS",
     "2026-03-04T00:00:00Z", "m1:5678"),
    # woken from a serial wait: keeps the type of the command that made it (backfill), or manual without one
    ("nightly-7", 10, 1, CommandType.RECOVER_SERIAL_WAIT, "COMPLEMENT_DATA,RECOVER_SERIAL_WAIT",
     "2026-03-05T00:00:00Z", "m1:5678"),
    ("nightly-8", 10, 1, CommandType.RECOVER_SERIAL_WAIT, None, None, "m1:5678"),
    ("hourly-1", 20, 1, CommandType.SCHEDULER, "SCHEDULER", "2026-03-02T01:00:00Z", "m1:5678"),
    ("nightly-x", 30, 2, CommandType.SCHEDULER, "SCHEDULER", "2026-03-02T00:00:00Z", "m1:5678"),
]  # fmt: skip


@pytest.fixture
async def world(fresh_db: str) -> AsyncIterator[dict[str, Any]]:
    """Projects p (workflows nightly, hourly) and q (a workflow also called nightly); an admin, and a reader
    of p only."""
    conn = await asyncpg.connect(fresh_db)
    try:
        admin = await conn.fetchval("INSERT INTO users (user_name, user_type) VALUES ('root', 0) RETURNING id")
        reader = await conn.fetchval("INSERT INTO users (user_name, user_type) VALUES ('reader', 1) RETURNING id")
        await conn.execute("INSERT INTO project (code, name, user_id) VALUES (1, 'p', $1), (2, 'q', $1)", admin)
        await conn.execute(
            "INSERT INTO project_user (project_code, user_id, perm) VALUES (1, $1, $2)", reader, access.READ
        )
        await conn.execute(
            "INSERT INTO workflow_definition (code, name, project_code)"
            " VALUES (10, 'nightly', 1), (20, 'hourly', 1), (30, 'nightly', 2)"
        )
        ids = {}
        for n, (name, code, project, command, history, when, host) in enumerate(_RUNS):
            state = WorkflowState.FAILURE if name == "nightly-4" else WorkflowState.SUCCESS
            ids[name] = await conn.fetchval(
                "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version,"
                " project_code, state, command_type, command_id, history_cmd, schedule_time, host)"
                " VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $8::text::timestamptz, $9) RETURNING id",
                name, code, project, int(state), int(command), 500 + n, history, when, host,
            )  # fmt: skip
        tokens = {
            "admin": (await create_token(conn, admin, "t"))[1],
            "reader": (await create_token(conn, reader, "t"))[1],
        }
    finally:
        await conn.close()
    yield {"dsn": fresh_db, "ids": ids, "tokens": tokens}


async def _names(session: aiohttp.ClientSession, base: str, **query: str) -> set[str]:
    async with session.get(f"{base}/api/v1/instances", params={**query, "size": "100"}) as resp:
        body = await resp.json()
        assert resp.status == 200, body
        return {i["name"] for i in body["items"]}


async def _refused(session: aiohttp.ClientSession, base: str, **query: str) -> dict[str, Any]:
    async with session.get(f"{base}/api/v1/instances", params=query) as resp:
        body = await resp.json()
        assert resp.status == 400, body
        return dict(body["error"])


async def test_run_type_filter_matches_the_run_type_each_row_shows(world: dict[str, Any]) -> None:
    async with in_process_api(world["dsn"], [], world["tokens"]["admin"]) as (session, base):
        everything = {}
        async with session.get(f"{base}/api/v1/instances", params={"size": "100"}) as resp:
            for item in (await resp.json())["items"]:
                everything[item["name"]] = item["run_type"]
        for run_type in ("manual", "scheduled", "backfill", "rerun", "recovery"):
            expected = {n for n, t in everything.items() if t == run_type}
            assert await _names(session, base, run_type=run_type) == expected, run_type
        assert await _names(session, base, run_type="backfill") == {"nightly-2", "nightly-3", "nightly-7"}
        assert await _names(session, base, run_type="manual") == {"nightly-4", "nightly-8"}
        assert await _names(session, base, run_type="rerun,recovery") == {"nightly-5", "nightly-6"}
        body = await _refused(session, base, run_type="complement")
        assert body["field"] == "query.run_type" and "complement" in body["message"]


async def test_business_date_range_filters_on_the_schedule_time(world: dict[str, Any]) -> None:
    async with in_process_api(world["dsn"], [], world["tokens"]["admin"]) as (session, base):
        window = {"schedule_since": "2026-03-02T00:00:00Z", "schedule_until": "2026-03-04T00:00:00Z"}
        assert await _names(session, base, **window) == {"nightly-2", "nightly-3", "hourly-1", "nightly-x"}
        assert await _names(session, base, schedule_since="2026-03-05T00:00:00+00:00") == {"nightly-7"}
        # a zone in the value counts: 08:00 in Shanghai is midnight UTC
        assert await _names(session, base, schedule_until="2026-03-01T08:00:01+08:00") == {"nightly-1"}
        for field in ("schedule_since", "schedule_until"):
            body = await _refused(session, base, **{field: "NaN"})
            assert body["field"] == f"query.{field}"


async def test_workflow_name_project_and_host(world: dict[str, Any]) -> None:
    async with in_process_api(world["dsn"], [], world["tokens"]["admin"]) as (session, base):
        nightly = {f"nightly-{n}" for n in range(1, 9)}
        assert await _names(session, base, workflow_name="nightly") == nightly | {"nightly-x"}
        assert await _names(session, base, workflow_name="nightly", project="p") == nightly
        assert await _names(session, base, workflow_name="night") == set()  # the exact name, as the picker gives
        assert await _names(session, base, workflow_name="hourly", host="m1:5678") == {"hourly-1"}
        assert await _names(session, base, host="m2:5678", state="SUCCESS") == {"nightly-3", "nightly-5"}
        assert await _names(session, base, project="nope") == set()
        body = await _refused(session, base, workflow="nightly")  # a name where the code belongs
        assert body["field"] == "query.workflow" and "nightly" in body["message"]


async def test_a_reader_filters_only_within_the_projects_they_see(world: dict[str, Any]) -> None:
    async with in_process_api(world["dsn"], [], world["tokens"]["reader"]) as (session, base):
        assert await _names(session, base, workflow_name="nightly") == {f"nightly-{n}" for n in range(1, 9)}
        assert await _names(session, base, project="q") == set()


async def test_the_workflows_list_says_the_zone_of_the_next_fire(world: dict[str, Any]) -> None:
    """The UI shows a schedule's next fire in the schedule's own zone beside the viewer's."""
    conn = await asyncpg.connect(world["dsn"])
    try:
        await conn.execute(
            "INSERT INTO schedule (workflow_definition_code, start_time, end_time, crontab, timezone_id,"
            " release_state) VALUES (10, now(), now() + interval '3 days', '0 2 * * *', 'Asia/Shanghai', 1)"
        )
    finally:
        await conn.close()
    async with (
        in_process_api(world["dsn"], [], world["tokens"]["admin"]) as (session, base),
        session.get(f"{base}/api/v1/workflows", params={"project": "p"}) as resp,
    ):
        listed = {w["name"]: w for w in (await resp.json())["items"]}
    nightly, hourly = listed["nightly"], listed["hourly"]
    assert nightly["next_fire_timezone"] == "Asia/Shanghai"
    assert nightly["next_fire_time"].endswith("18:00:00+00:00")  # 02:00 in Shanghai
    assert hourly["next_fire_time"] is None and hourly["next_fire_timezone"] is None


def test_a_run_type_named_many_times_filters_as_once() -> None:
    # 1,000 "manual" in one query (8 KB) made 1 MB of SQL compiled twice on the API's loop
    from engine.api import rows
    from engine.api.instances import _names, _run_type_clause

    once = str(_run_type_clause(_names("manual", rows.RUN_TYPES, "query.run_type")).compile())
    many = ",".join(["manual", "MANUAL ", "backfill"] * 400)
    assert _names(many, rows.RUN_TYPES, "query.run_type") == ["backfill", "manual"]
    assert str(_run_type_clause(_names("manual,manual", rows.RUN_TYPES, "query.run_type")).compile()) == once


@pytest.mark.parametrize("raw", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "2026-02-30T00:00:00"])
def test_a_time_no_database_holds_is_refused_at_its_field(raw: str) -> None:
    # year 1 with an offset east of UTC parsed, then overflowed in the driver: a 500 with a traceback
    from engine.api.routing import ApiError, Param

    with pytest.raises(ApiError, match="must be an ISO 8601 time") as exc:
        Param("schedule_since", dt.datetime).parse(raw)
    assert exc.value.field == "query.schedule_since"
    assert Param("since", dt.datetime).parse("2026-11-27T08:00:00+08:00") == dt.datetime(2026, 11, 27, tzinfo=dt.UTC)
