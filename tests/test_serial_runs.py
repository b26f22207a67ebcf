"""Serial execution and per-workflow caps end to end: real masters, workers, etcd and PostgreSQL.

Runs never overlap beyond their workflow's cap, whichever master claims them, while cron fires every
second and a master is killed; SERIAL_WAIT runs start in order, SERIAL_DISCARD runs are recorded as STOP
with the reason, SERIAL_PRIORITY runs stop the one before and start once it has ended.
"""

from __future__ import annotations

import datetime as dt
import json
import signal
from collections.abc import Callable

import asyncpg

from engine.concurrency.serial import Mode
from engine.infra.etcd import EtcdServer
from engine.scheduling.scheduler import set_online
from engine.states import WORKFLOW_FAILOVER, ReleaseState, WorkflowState, code_list
from tests.cluster_harness import command, max_overlap, query, save, shell
from tests.cluster_harness import started_unguarded as started
from tests.helpers import NodeProc, eventually

SUCCESS, STOP = 7, 5
UNFINISHED = code_list(WORKFLOW_FAILOVER | {WorkflowState.SERIAL_WAIT})


async def runs(dsn: str, code: int) -> list[asyncpg.Record]:
    return await query(
        dsn,
        "SELECT w.id, w.state, w.start_time, w.end_time, w.state_history, w.host,"
        " (SELECT count(*) FROM task_instance t WHERE t.workflow_instance_id = w.id) AS tasks,"
        " (SELECT min(t.start_time) FROM task_instance t WHERE t.workflow_instance_id = w.id) AS task_start,"
        " (SELECT max(t.end_time) FROM task_instance t WHERE t.workflow_instance_id = w.id) AS task_end"
        " FROM workflow_instance w WHERE w.workflow_definition_code = $1 ORDER BY w.id",
        code,
    )


def reasons(row: asyncpg.Record) -> str:
    history = row["state_history"]
    entries = json.loads(history) if isinstance(history, str) else history
    return " | ".join(f"{e['state']}: {e['desc']}" for e in entries)


async def all_finished(dsn: str, *codes: int) -> bool:
    rows = await query(
        dsn,
        "SELECT (SELECT count(*) FROM command) AS queued, (SELECT count(*) FROM workflow_instance"
        " WHERE workflow_definition_code = ANY($1::bigint[]) AND state = ANY($2::smallint[])) AS open",
        list(codes),
        list(UNFINISHED),
    )
    return rows[0]["queued"] == 0 and rows[0]["open"] == 0


def ran(rows: list[asyncpg.Record]) -> list[tuple[dt.datetime, dt.datetime]]:
    """The instance intervals of the runs that ran (have task instances)."""
    return [(r["start_time"], r["end_time"]) for r in rows if r["tasks"]]


def task_spans(rows: list[asyncpg.Record]) -> list[tuple[dt.datetime, dt.datetime]]:
    """The span of each run's tasks as the workers saw them (start of the first to end of the last)."""
    return [(r["task_start"], r["task_end"]) for r in rows if r["task_start"] and r["task_end"]]


async def test_a_capped_workflow_runs_at_most_its_cap_at_once_and_the_rest_wait_in_order(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str
) -> None:
    await started(node_factory, etcd_server, etcd_root, fresh_db, masters=2, workers=1, ttl=3)
    code = await save(fresh_db, "capped", [shell("a", "sleep 1")], max_active_runs=2)
    await command(fresh_db, code, count=6)
    await eventually(lambda: all_finished(fresh_db, code), 90, "every run finished")
    rows = await runs(fresh_db, code)
    assert [r["state"] for r in rows] == [SUCCESS] * 6
    assert max_overlap(ran(rows)) <= 2
    assert max_overlap(task_spans(rows)) <= 2
    # those that waited started in the order they were made, and say why they waited. Two runs woken by
    # the same end (or by two ends a moment apart) are claimed concurrently, by either master, so their
    # start times may swap by the claims' few milliseconds; out of order (a later run admitted at one
    # end while an earlier one still waits for the next) would put it a whole run (1 s) ahead.
    starts = [r["start_time"] for r in rows]
    concurrent = dt.timedelta(seconds=0.4)
    assert all(later >= earlier - concurrent for i, earlier in enumerate(starts[2:]) for later in starts[3 + i :])
    waited = [r for r in rows if "SERIAL_WAIT" in reasons(r)]
    assert len(waited) >= 4 and all("at most 2" in reasons(r) or "waiting behind" in reasons(r) for r in waited)
    assert all("woken" in reasons(r) for r in waited)
    errors = await query(fresh_db, "SELECT message FROM error_command")
    assert not errors, errors


async def test_serial_modes_hold_while_cron_fires_every_second_and_a_master_is_killed(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str
) -> None:
    masters, _ = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=3, workers=2, ttl=2)
    codes = {
        mode: await save(fresh_db, f"serial-{mode.name}", [shell("a", "sleep 3")], execution_type=int(mode))
        for mode in (Mode.SERIAL_WAIT, Mode.SERIAL_DISCARD, Mode.SERIAL_PRIORITY)
    }
    conn = await asyncpg.connect(fresh_db)
    try:
        for code in codes.values():
            sid = await conn.fetchval(
                "INSERT INTO schedule (workflow_definition_code, start_time, end_time, crontab)"
                " VALUES ($1, now() - interval '1 day', 'infinity', '* * * * * ?') RETURNING id",
                code,
            )
            await set_online(conn, sid, True)
    finally:
        await conn.close()

    async def instances(n: int) -> bool:
        rows = await query(fresh_db, "SELECT count(*) AS n FROM workflow_instance")
        return rows[0]["n"] >= n

    await eventually(lambda: instances(3 * 4), 40, "runs made by the schedules")
    assert masters[0].proc.record is not None
    masters[0].proc.record.signal(signal.SIGKILL)
    before = (await query(fresh_db, "SELECT count(*) AS n FROM workflow_instance"))[0]["n"]
    await eventually(lambda: instances(before + 3 * 5), 60, "runs made after the kill")
    await query(fresh_db, f"UPDATE schedule SET release_state = {int(ReleaseState.OFFLINE)}")
    await eventually(lambda: all_finished(fresh_db, *codes.values()), 150, "every run finished")

    for mode, code in codes.items():
        rows = await runs(fresh_db, code)
        assert len(rows) >= 9, mode
        # exactly one run at a time, as the masters saw it and as the workers saw it
        assert max_overlap(ran(rows)) == 1, (mode, [(r["id"], r["start_time"], r["end_time"]) for r in rows])
        assert max_overlap(task_spans(rows)) == 1, mode
        states = [r["state"] for r in rows]
        if mode is Mode.SERIAL_WAIT:
            assert states == [SUCCESS] * len(rows)  # every run ran, one after another, in order
            assert [r["start_time"] for r in rows] == sorted(r["start_time"] for r in rows)
        elif mode is Mode.SERIAL_DISCARD:
            discarded = [r for r in rows if r["state"] == STOP]
            assert set(states) == {SUCCESS, STOP} and discarded
            assert all(r["tasks"] == 0 and "SERIAL_DISCARD" in reasons(r) for r in discarded)
        else:
            # the newest run wins; every earlier one was stopped (while running) or superseded (waiting)
            assert states[-1] == SUCCESS and set(states[:-1]) <= {STOP, SUCCESS}
            assert states.count(STOP) >= len(rows) // 2
            superseded = [r for r in rows if r["state"] == STOP and r["tasks"] == 0]
            assert all("superseded" in reasons(r) for r in superseded)
            # each stopped run says why, whichever master drove it (the stop crosses masters by RPC)
            stopped = [r for r in rows if r["state"] == STOP]
            assert all("SERIAL_PRIORITY" in reasons(r) for r in stopped), [reasons(r) for r in stopped]
    errors = await query(fresh_db, "SELECT message FROM error_command")
    assert not errors, errors
