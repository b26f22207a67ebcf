"""Control commands through the API with real api + master + worker processes: rerun
(REPEAT_RUNNING), recover from the failed tasks (START_FAILURE_TASK_PROCESS), force success, start
from chosen tasks (TASK_ONLY / TASK_PRE / TASK_POST), backfill (COMPLEMENT_DATA) and schedules."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from engine.states import TaskState, WorkflowState
from tests.conftest import ApiCluster
from tests.helpers import wait_sync
from tests.test_api import _name, claimed, error_of, start, wait_final

#: instance states of a run that ended
_ENDED = frozenset({WorkflowState.PAUSE, WorkflowState.STOP, WorkflowState.FAILURE, WorkflowState.SUCCESS})


pytestmark = pytest.mark.slow


def ledger_task(name: str, ledger: Path, script: str = "true", upstream: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "name": name,
        "type": "SHELL",
        "params": {"rawScript": f"echo {name} >> {ledger}; {script}"},
        "upstream": list(upstream),
    }


def create(c: ApiCluster, tasks: list[dict[str, Any]], **extra: Any) -> int:
    doc = {"name": _name(), "project": "control-tests", "tasks": tasks, **extra}
    return int(c.client().post("/api/v1/workflows", doc, release="true")["code"])


def ran(ledger: Path) -> list[str]:
    return ledger.read_text().split() if ledger.exists() else []


def task_rows(c: ApiCluster, instance_id: int) -> list[tuple[str, int, str, int]]:
    rows = c.query("SELECT name, attempt, state, flag FROM task_instance WHERE workflow_instance_id = $1", instance_id)
    return sorted((r["name"], r["attempt"], TaskState(r["state"]).name, r["flag"]) for r in rows)


def test_rerun_repeats_a_finished_instance_and_is_refused_while_running(
    api_cluster: ApiCluster, tmp_path: Path
) -> None:
    c, ledger, gate = api_cluster, tmp_path / "ledger", tmp_path / "gate"
    code = create(c, [ledger_task("a", ledger), ledger_task("b", ledger, f"while [ ! -f {gate} ]; do sleep 0.05; done",
                                                             ("a",))])  # fmt: skip
    wid = start(c, code)
    err = error_of(lambda: c.client().post(f"/api/v1/instances/{wid}/rerun"))
    assert err.status == 409 and "RUNNING_EXECUTION" in str(err)
    gate.touch()
    assert wait_final(c, wid)["state"] == "SUCCESS"
    reply = c.client().post(f"/api/v1/instances/{wid}/rerun")
    assert claimed(c, reply["command_id"]) == wid  # the same instance runs again
    detail = wait_final(c, wid)
    assert detail["state"] == "SUCCESS"
    assert ran(ledger) == ["a", "b", "a", "b"]
    assert task_rows(c, wid) == [
        ("a", 1, "SUCCESS", 0), ("a", 2, "SUCCESS", 1), ("b", 1, "SUCCESS", 0), ("b", 2, "SUCCESS", 1),
    ]  # fmt: skip
    run_times = c.query("SELECT run_times, history_cmd FROM workflow_instance WHERE id = $1", wid)[0]
    assert run_times["run_times"] == 2 and run_times["history_cmd"].endswith("REPEAT_RUNNING")


def test_recover_failed_reruns_only_the_failed_tasks(api_cluster: ApiCluster, tmp_path: Path) -> None:
    c, ledger, marker = api_cluster, tmp_path / "ledger", tmp_path / "second-time"
    flaky = f"if [ -f {marker} ]; then exit 0; fi; touch {marker}; exit 3"
    code = create(
        c,
        [ledger_task("a", ledger), ledger_task("b", ledger, flaky, ("a",)), ledger_task("c", ledger, "true", ("b",)),
         ledger_task("side", ledger)],
    )  # fmt: skip
    wid = start(c, code)
    assert wait_final(c, wid)["state"] == "FAILURE"
    assert sorted(ran(ledger)) == ["a", "b", "side"]
    err = error_of(lambda: c.client().post(f"/api/v1/instances/{wid}/resume"))
    assert err.status == 409 and "needs PAUSE or STOP" in str(err)
    reply = c.client().post(f"/api/v1/instances/{wid}/recover-failed")
    assert claimed(c, reply["command_id"]) == wid
    assert wait_final(c, wid)["state"] == "SUCCESS"
    assert sorted(ran(ledger)) == ["a", "b", "b", "c", "side"]  # a and side did not run again
    assert [r for r in task_rows(c, wid) if r[0] == "b"] == [("b", 1, "FAILURE", 0), ("b", 2, "SUCCESS", 1)]
    err = error_of(lambda: c.client().post(f"/api/v1/instances/{wid}/recover-failed"))
    assert err.status == 409 and "needs FAILURE" in str(err)


def test_force_success_lets_recovery_continue_past_a_failed_task(api_cluster: ApiCluster, tmp_path: Path) -> None:
    c, ledger = api_cluster, tmp_path / "ledger"
    code = create(c, [ledger_task("a", ledger), ledger_task("b", ledger, "exit 1", ("a",)),
                      ledger_task("c", ledger, "true", ("b",))])  # fmt: skip
    wid = start(c, code)
    detail = wait_final(c, wid)
    assert detail["state"] == "FAILURE"
    tasks = {t["name"]: t for t in detail["tasks"]}
    err = error_of(lambda: c.client().post(f"/api/v1/tasks/{tasks['a']['id']}/force-success"))
    assert err.status == 409 and "only a failed or killed task" in str(err)
    forced = c.client().post(f"/api/v1/tasks/{tasks['b']['id']}/force-success")
    assert forced["state"] == "FORCED_SUCCESS"
    reply = c.client().post(f"/api/v1/instances/{wid}/recover-failed")
    claimed(c, reply["command_id"])
    assert wait_final(c, wid)["state"] == "SUCCESS"
    assert ran(ledger) == ["a", "b", "c"]  # b was not run again: forced, c followed
    err = error_of(lambda: c.client().post(f"/api/v1/tasks/{tasks['b']['id']}/force-success"))
    assert err.status == 409 and "SUCCESS" in str(err)
    assert error_of(lambda: c.client().post("/api/v1/tasks/999999999/force-success")).status == 404


@pytest.mark.parametrize(
    ("scope", "expected"), [("TASK_ONLY", ["b"]), ("TASK_PRE", ["a", "b"]), ("TASK_POST", ["b", "c"])]
)
def test_start_from_chosen_tasks(api_cluster: ApiCluster, tmp_path: Path, scope: str, expected: list[str]) -> None:
    c, ledger = api_cluster, tmp_path / "ledger"
    code = create(c, [ledger_task("a", ledger), ledger_task("b", ledger, "true", ("a",)),
                      ledger_task("c", ledger, "true", ("b",)), ledger_task("d", ledger)])  # fmt: skip
    wid = start(c, code, {"start_tasks": ["b"], "scope": scope})
    detail = wait_final(c, wid)
    assert detail["state"] == "SUCCESS"
    assert sorted(ran(ledger)) == expected
    assert sorted(t["name"] for t in detail["tasks"]) == expected


def test_start_from_unknown_tasks_is_refused(api_cluster: ApiCluster) -> None:
    code = create(api_cluster, [{"name": "a", "type": "SHELL", "params": {"rawScript": "true"}}])
    err = error_of(lambda: api_cluster.client().post(f"/api/v1/workflows/{code}/start", {"start_tasks": ["zz"]}))
    assert err.status == 400 and err.field == "start_tasks" and "'zz'" in str(err)
    err = error_of(lambda: api_cluster.client().post(f"/api/v1/workflows/{code}/start", {"scope": "TASK_ONLY"}))
    assert err.status == 400 and err.field == "scope"


def _backfill_workflow(c: ApiCluster, script: str = "true") -> int:
    return create(
        c,
        [{"name": "t", "type": "SHELL", "params": {"rawScript": script}}],
        params={"day": "$[yyyyMMdd]"},
    )


def _instances(c: ApiCluster, code: int, expected: int) -> list[Any]:
    rows: list[Any] = []

    def done() -> bool:
        nonlocal rows
        rows = c.query(
            "SELECT id, state, schedule_time, start_time, end_time, global_params FROM workflow_instance"
            " WHERE workflow_definition_code = $1 ORDER BY id",
            code,
        )
        queued = c.query("SELECT count(*) AS n FROM command WHERE workflow_definition_code = $1", code)[0]["n"]
        return len(rows) >= expected and queued == 0 and all(r["state"] in _ENDED for r in rows)

    wait_sync(done, 90, what=f"{expected} backfill instances finished")
    return rows


def _day(row: Any) -> str:
    params = row["global_params"]
    params = json.loads(params) if isinstance(params, str) else params
    return next(p["value"] for p in params if p["prop"] == "day")


def test_serial_backfill_runs_dates_one_after_another_in_reverse(api_cluster: ApiCluster) -> None:
    c = api_cluster
    code = _backfill_workflow(c, "sleep 0.2")
    dates = ["2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00", "2026-01-03T00:00:00+00:00"]
    reply = c.client().post(f"/api/v1/workflows/{code}/backfill", {"dates": dates, "reverse": True})
    assert reply["dates"] == 3 and reply["chains"] == 1
    rows = _instances(c, code, 3)
    assert [r["state"] for r in rows] == [7, 7, 7]
    assert [_day(r) for r in rows] == ["20260103", "20260102", "20260101"]  # the business date of each run
    for before, after in itertools.pairwise(rows):
        assert after["start_time"] >= before["end_time"]


def test_serial_backfill_stops_at_a_failed_date_unless_told_to_continue(api_cluster: ApiCluster) -> None:
    c = api_cluster
    script = '[ "${day}" != "20260102" ]'
    dates = [f"2026-01-0{d}T00:00:00+00:00" for d in (1, 2, 3)]
    stop = _backfill_workflow(c, script)
    c.client().post(f"/api/v1/workflows/{stop}/backfill", {"dates": dates})
    rows = _instances(c, stop, 2)
    assert [(_day(r), r["state"]) for r in rows] == [("20260101", 7), ("20260102", 6)]
    go_on = _backfill_workflow(c, script)
    c.client().post(f"/api/v1/workflows/{go_on}/backfill", {"dates": dates, "on_failure": "CONTINUE"})
    rows = _instances(c, go_on, 3)
    assert [(_day(r), r["state"]) for r in rows] == [("20260101", 7), ("20260102", 6), ("20260103", 7)]


def test_parallel_backfill_over_a_range_keeps_to_its_parallelism(api_cluster: ApiCluster) -> None:
    c = api_cluster
    code = _backfill_workflow(c, "sleep 0.3")
    body = {"start": "2026-03-01T00:00:00Z", "end": "2026-03-06T00:00:00Z", "run_mode": "PARALLEL", "parallelism": 2}
    reply = c.client().post(f"/api/v1/workflows/{code}/backfill", body)
    assert reply["dates"] == 6 and reply["chains"] == 2  # daily at midnight: no schedule defines other times
    rows = _instances(c, code, 6)
    assert sorted(_day(r) for r in rows) == [f"2026030{d}" for d in range(1, 7)]
    events = sorted([(r["start_time"], 1) for r in rows] + [(r["end_time"], -1) for r in rows])
    live = peak = 0
    for _, delta in events:
        live += delta
        peak = max(peak, live)
    assert peak <= 2
    by_chain = sorted(rows, key=lambda r: r["id"])
    first_chain = [_day(r) for r in by_chain if _day(r) <= "20260303"]
    assert first_chain == ["20260301", "20260302", "20260303"]


def test_a_long_serial_backfill_keeps_its_dates_once_and_walks_them_in_order(api_cluster: ApiCluster) -> None:
    c = api_cluster
    code = _backfill_workflow(c, '[ "${day}" -lt 20000106 ]')  # the 6th date fails: the chain stops there
    body = {"start": "2000-01-01T00:00:00Z", "end": "2027-05-18T00:00:00Z"}
    reply = c.client().post(f"/api/v1/workflows/{code}/backfill", body)
    assert reply["dates"] == 10_000 and reply["chains"] == 1
    rows = _instances(c, code, 6)
    assert [(_day(r), r["state"]) for r in rows] == [(f"2000010{d}", 7) for d in range(1, 6)] + [("20000106", 6)]
    for before, after in itertools.pairwise(rows):
        assert after["start_time"] >= before["end_time"]
    params = c.query(
        "SELECT command_param::text AS p FROM workflow_instance WHERE workflow_definition_code = $1 ORDER BY id", code
    )
    # each command named its place in the backfill instead of carrying the 9,999 .. 9,994 dates left
    # (one date is ~27 bytes of JSON: the first command used to hold 270 KB, the 10,000 of them 1.35 GB)
    sizes = {len(r["p"]) for r in params}
    assert len(sizes) == 1 and max(sizes) < 200, sizes
    assert [json.loads(r["p"])["backfillIndex"] for r in params] == list(range(6))
    (row,) = c.query("SELECT cardinality(dates) AS n FROM backfill WHERE workflow_definition_code = $1", code)
    assert row["n"] == 10_000  # the dates, kept once


def test_a_backfill_queued_before_the_backfill_table_goes_on_from_its_date_list(api_cluster: ApiCluster) -> None:
    c = api_cluster
    code = _backfill_workflow(c)
    dates = [f"2026-02-0{d}T00:00:00+00:00" for d in (3, 1, 2)]  # the older format: the list, in run order
    param = {"StartParams": {}, "complementScheduleDateList": dates, "complementOnFailure": "STOP"}
    c.query(
        "INSERT INTO command (command_type, workflow_definition_code, command_param, schedule_time)"
        " VALUES (5, $1, $2, $3)",
        code,
        json.dumps(param),
        dt.datetime.fromisoformat(dates[0]),
    )
    rows = _instances(c, code, 3)
    assert [(_day(r), r["state"]) for r in rows] == [("20260203", 7), ("20260201", 7), ("20260202", 7)]
    (kept,) = c.query("SELECT dates FROM backfill WHERE workflow_definition_code = $1", code)
    assert [d.isoformat() for d in kept["dates"]] == dates[1:]  # the remaining dates moved into a row


def test_bad_backfill_requests_are_refused(api_cluster: ApiCluster) -> None:
    c = api_cluster
    code = _backfill_workflow(c)
    post = c.client().post
    cases = [
        ({}, "start"),
        ({"start": "2026-01-02T00:00:00Z", "end": "2026-01-01T00:00:00Z"}, "end"),
        ({"start": "2026-01-01T00:00:00Z"}, "end"),
        ({"dates": ["2026-01-01T00:00:00Z"], "start": "2026-01-01T00:00:00Z"}, "dates"),
        ({"dates": ["yesterday"]}, "dates"),
        ({"start": "2000-01-01T00:00:00Z", "end": "2099-01-01T00:00:00Z"}, "end"),
        ({"dates": ["2026-01-01T00:00:00Z"], "parallelism": 2}, "parallelism"),
    ]
    for body, field in cases:
        err = error_of(lambda body=body: post(f"/api/v1/workflows/{code}/backfill", body))
        assert err.status == 400 and err.field == field, (body, err)
    assert not c.query("SELECT 1 FROM command WHERE workflow_definition_code = $1", code)


def test_schedule_api_rules(api_cluster: ApiCluster) -> None:
    c = api_cluster
    client = c.client()
    code = create(c, [{"name": "a", "type": "SHELL", "params": {"rawScript": "true"}}])
    err = error_of(lambda: client.post("/api/v1/schedules", {"workflow_code": code, "crontab": "0 0 0 LW * ?"}))
    assert err.status == 400 and err.field == "crontab" and "LW" in str(err)
    err = error_of(lambda: client.post("/api/v1/schedules", {"workflow_code": code, "crontab": "0 0 * * *",
                                                               "timezone": "Mars/Olympus"}))  # fmt: skip
    assert err.status == 400 and err.field == "timezone"
    sched = client.post(
        "/api/v1/schedules",
        {"workflow_code": code, "crontab": "0 0 2 ? * MON", "timezone": "Europe/Paris", "online": True},
    )
    assert sched["release_state"] == "ONLINE" and len(sched["next_fire_times"]) == 5
    first = dt.datetime.fromisoformat(sched["next_fire_times"][0])
    assert first.astimezone(ZoneInfo("Europe/Paris")).strftime("%a %H:%M") == "Mon 02:00"
    err = error_of(lambda: client.delete(f"/api/v1/schedules/{sched['id']}"))
    assert err.status == 409
    preview = client.post("/api/v1/schedules/preview", {"crontab": "*/15 * * * *", "count": 3})
    times = [dt.datetime.fromisoformat(t) for t in preview["next_fire_times"]]
    assert len(times) == 3 and all(t.minute % 15 == 0 for t in times)
    client.post(f"/api/v1/workflows/{code}/offline")
    client.post(f"/api/v1/schedules/{sched['id']}/offline")
    err = error_of(lambda: client.post(f"/api/v1/schedules/{sched['id']}/online"))
    assert err.status == 409 and "offline" in str(err)
    updated = client.put(f"/api/v1/schedules/{sched['id']}", {"crontab": "0 30 1 * * ?"})
    assert updated["crontab"] == "0 30 1 * * ?" and updated["release_state"] == "OFFLINE"
    assert client.delete(f"/api/v1/schedules/{sched['id']}") == {"deleted": sched["id"]}


def test_a_stop_ends_an_instance_whose_task_no_worker_can_take(api_cluster: ApiCluster, tmp_path: Path) -> None:
    # no live worker serves the task's group: its attempt waits in the master's dispatch queue; a stop drops it
    # from there (KILL, never sent) and the instance ends STOP instead of staying READY_STOP
    c, ledger = api_cluster, tmp_path / "ledger"
    code = create(c, [{**ledger_task("a", ledger), "worker_group": "served-by-nobody"}])
    wid = start(c, code)
    wait_sync(lambda: task_rows(c, wid) == [("a", 1, "SUBMITTED_SUCCESS", 1)], 30, what="the attempt queued")
    assert c.client().post(f"/api/v1/instances/{wid}/stop")["accepted"]
    final = wait_final(c, wid)
    assert final["state"] == "STOP" and [t["state"] for t in final["tasks"]] == ["KILL"]
    assert ran(ledger) == []  # never sent
