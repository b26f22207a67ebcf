"""Parsers of user input do bounded work and answer bad input with a 400 (or 413) naming the field: the
real server stack on a real PostgreSQL, as an admin (issue 24: crontabs, `$[...]`, sizes, cycles)."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import pytest

from engine.accounts.tokens import create_token
from engine.scheduling.cron import MAX_STEPS
from tests.api_harness import in_process_api
from tests.cluster_harness import save, shell


@pytest.fixture
async def admin_api(fresh_db: str) -> AsyncIterator[tuple[aiohttp.ClientSession, str, str]]:
    conn = await asyncpg.connect(fresh_db)
    try:
        uid = await conn.fetchval("INSERT INTO users (user_name, user_type) VALUES ('root_admin', 0) RETURNING id")
        token = (await create_token(conn, uid, "t"))[1]
    finally:
        await conn.close()
    async with in_process_api(fresh_db, [], token) as (session, base):
        yield session, base, fresh_db


async def _call(session: aiohttp.ClientSession, method: str, url: str, body: Any = None) -> tuple[int, Any]:
    data: Any = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    if data is not None and len(data) > 1 << 20:
        data = io.BytesIO(data)  # aiohttp warns of large raw bodies
    async with session.request(method, url, data=data, headers={"Content-Type": "application/json"}) as resp:
        return resp.status, await resp.json()


# -- crontabs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("crontab", "expected"),
    [
        ("* * * * * ? 2025,2099", ["2099-01-01T00:00:00", "2099-01-01T00:00:01", "2099-01-01T00:00:02"]),
        ("*/10 * * * * ? 2025,2098", ["2098-01-01T00:00:00", "2098-01-01T00:00:10", "2098-01-01T00:00:20"]),
    ],
)
async def test_preview_of_a_year_list_with_a_gap_jumps_to_the_next_year_with_bounded_work(
    admin_api: tuple[aiohttp.ClientSession, str, str], crontab: str, expected: list[str]
) -> None:
    session, base, _ = admin_api
    status, answer = await _call(session, "POST", f"{base}/api/v1/schedules/preview", {"crontab": crontab, "count": 3})
    assert status == 200, answer
    assert [t.removesuffix("Z").removesuffix("+00:00") for t in answer["next_fire_times"]] == expected
    assert answer["work"] <= 3 * MAX_STEPS


@pytest.mark.parametrize(
    ("crontab", "message"),
    [
        ("0 0 0 1 1 ? 9999", "1970-2099"),  # accepted by parse() before, then failed in the scheduler
        ("0 0 0 29 2 ? 2025-2027,2029-2031", "no fire time"),  # no 29 February in those years
        ("0 0 0 1 1 ? 2020", "no fire time"),  # only in the past
        ("0 0 0 29 2 ? 1970-2099/4,2096", "within"),  # ~30 years to jump for the first fire
    ],
)
async def test_a_schedule_that_cannot_fire_within_its_bound_is_refused_at_the_crontab(
    admin_api: tuple[aiohttp.ClientSession, str, str], crontab: str, message: str
) -> None:
    session, base, dsn = admin_api
    code = await save(dsn, "sched-bound", [shell("a", "true")])
    url = f"{base}/api/v1/schedules"
    status, answer = await _call(session, "POST", url, {"workflow_code": code, "crontab": crontab})
    assert status == 400, answer
    assert answer["error"]["field"] == "crontab" and message in answer["error"]["message"]
    status, answer = await _call(session, "POST", url, {"workflow_code": code, "crontab": "0 0 0 1 1 ? 2098"})
    assert status == 201, answer


# -- sizes, `$[...]` and the parsers' edges ---------------------------------------------------------

#: an error answer quotes at most this much of what was sent
ECHO_BOUND = 400


def _workflow(name: str, tasks: list[dict[str, Any]] | None = None, **fields: Any) -> dict[str, Any]:
    tasks = tasks or [{"name": "a", "type": "SHELL", "params": {"rawScript": "true"}}]
    return {"name": name, "project": "bounds", "tasks": tasks, **fields}


async def _refused(session: aiohttp.ClientSession, method: str, url: str, body: Any, status: int = 400) -> dict:
    got, answer = await _call(session, method, url, body)
    assert got == status, str(answer)[:1000]
    assert len(json.dumps(answer)) < ECHO_BOUND + 300, "the error echoes the input back"
    return dict(answer["error"])


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"big": "x" * 200_000}, "params.big"),  # a parameter value over the bound
        ({"d": "$[yyyyMMdd+" + "9" * 3000 + "*0]"}, "params"),  # a huge operand, multiplied away
        ({"d": "$[yyyyMMdd+" + "99999999*" * 60 + "0]"}, "params"),  # a huge product, multiplied away
        ({"d": "$[yyyyMMdd+1*" + "(" * 600 + "1" + ")" * 600 + "]"}, "params"),  # ~600 nested parentheses
    ],
)
async def test_parameters_and_time_arithmetic_are_bounded_and_never_echoed_whole(
    admin_api: tuple[aiohttp.ClientSession, str, str], params: dict[str, str], field: str
) -> None:
    session, base, _ = admin_api
    error = await _refused(session, "POST", f"{base}/api/v1/workflows", _workflow("p", params=params))
    assert field in error["field"]


async def test_a_body_over_the_size_limit_is_a_413(admin_api: tuple[aiohttp.ClientSession, str, str]) -> None:
    session, base, _ = admin_api
    body = _workflow("huge", params={"big": "x" * (5 << 20)})
    await _refused(session, "POST", f"{base}/api/v1/workflows", body, 413)


async def test_a_cycle_of_1200_tasks_is_a_400_naming_the_tasks(
    admin_api: tuple[aiohttp.ClientSession, str, str],
) -> None:
    session, base, _ = admin_api
    n = 1200
    tasks = [
        {"name": f"t{i}", "type": "SHELL", "params": {"rawScript": "true"}, "upstream": [f"t{(i + 1) % n}"]}
        for i in range(n)
    ]
    error = await _refused(session, "POST", f"{base}/api/v1/workflows", _workflow("ring", tasks))
    assert error["field"] == "tasks" and error["message"].startswith("cycle: ")


async def test_a_task_timeout_beyond_32_bits_is_a_400_at_the_field(
    admin_api: tuple[aiohttp.ClientSession, str, str],
) -> None:
    session, base, _ = admin_api
    task = {"name": "a", "type": "SHELL", "params": {"rawScript": "true"}, "timeout": 3_000_000_000}
    error = await _refused(session, "POST", f"{base}/api/v1/workflows", _workflow("t", [task]))
    assert error["field"] == "tasks[0].timeout"
    error = await _refused(session, "POST", f"{base}/api/v1/workflows", _workflow("t", timeout=3_000_000_000))
    assert error["field"] == "timeout"


@pytest.mark.parametrize("path", ["/api/v1/instances/99999999999999999999", "/api/v1/schedules/-99999999999999999999"])
async def test_an_id_beyond_64_bits_in_a_route_is_a_400_not_a_500(
    admin_api: tuple[aiohttp.ClientSession, str, str], path: str
) -> None:
    session, base, _ = admin_api
    status, answer = await _call(session, "GET", f"{base}{path}")
    assert status in (400, 404), answer


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
async def test_nan_in_a_json_body_is_a_400(admin_api: tuple[aiohttp.ClientSession, str, str], constant: str) -> None:
    session, base, _ = admin_api
    body = b'{"crontab": "0 * * * *", "count": ' + constant.encode() + b"}"
    error = await _refused(session, "POST", f"{base}/api/v1/schedules/preview", body)
    assert error["field"] == "body" and constant in error["message"]


async def test_a_dolphinscheduler_import_with_a_non_numeric_dep_task_code_is_a_400_naming_it(
    admin_api: tuple[aiohttp.ClientSession, str, str],
) -> None:
    session, base, _ = admin_api
    item = {"projectCode": 1, "definitionCode": 77, "depTaskCode": "abc", "cycle": "day", "dateValue": "today"}
    params = {"dependence": {"relation": "AND", "dependTaskList": [{"relation": "AND", "dependItemList": [item]}]}}
    task = {"code": 11, "name": "t", "taskType": "DEPENDENT", "flag": "YES", "taskParams": params}
    export = [{
        "processDefinition": {"code": 1, "name": "wf", "globalParams": "[]", "timeout": 0, "tenantCode": "etl"},
        "processTaskRelationList": [{"preTaskCode": 0, "postTaskCode": 11, "conditionType": "NONE"}],
        "taskDefinitionList": [task], "schedule": None,
    }]  # fmt: skip
    body = {"export": export, "project": "imported"}
    error = await _refused(session, "POST", f"{base}/api/v1/import/dolphinscheduler", body)
    assert "depTaskCode" in error["field"] + error["message"]


async def test_a_large_bad_value_is_not_echoed_back(admin_api: tuple[aiohttp.ClientSession, str, str]) -> None:
    session, base, dsn = admin_api
    code = await save(dsn, "echo", [shell("a", "true")])
    body = {"workflow_code": code, "crontab": "0 0 * * *", "start_time": "x" * 100_000}
    error = await _refused(session, "POST", f"{base}/api/v1/schedules", body)
    assert error["field"] == "start_time"
