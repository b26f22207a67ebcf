"""History retention (engine/storage/retention.py, engine/master/retention.py).

The rules on a database filled by hand (every case the pass must keep, small batches so keyset paging is
crossed), then real masters running the job under the etcd lock while runs are created and finish: what is
old and finished goes, everything else stays, nothing is left orphaned.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import asyncpg
import pytest

from engine.config import DEPENDENT_LOOKBACK_DAYS, ConfigError, load
from engine.infra.etcd import EtcdServer
from engine.states import WorkflowState, sql_codes
from engine.storage.jsoncodec import register_json
from engine.storage.retention import Removed, Retention
from engine.workflows.model import TaskDef
from tests.cluster_harness import command, query, save, shell
from tests.helpers import NodeProc, eventually

#: instance states of a run that ended
_ENDED = frozenset({WorkflowState.PAUSE, WorkflowState.STOP, WorkflowState.FAILURE, WorkflowState.SUCCESS})


RUNNING, STOP, FAILURE, SUCCESS, READY_BLOCK = 1, 5, 6, 7, 15
OLD = dt.timedelta(days=100)

# Rows nothing may be left pointing at after a pass (each query counts the orphans of one kind).
ORPHANS = {
    "task instances": "SELECT count(*) FROM task_instance t WHERE NOT EXISTS"
    " (SELECT 1 FROM workflow_instance w WHERE w.id = t.workflow_instance_id)",
    "sub-workflow relations": "SELECT count(*) FROM sub_workflow_relation s WHERE s.workflow_instance_id <> 0 AND"
    " NOT EXISTS (SELECT 1 FROM workflow_instance w WHERE w.id = s.workflow_instance_id)",
    "alerts": "SELECT count(*) FROM alert a WHERE a.workflow_instance_id IS NOT NULL AND NOT EXISTS"
    " (SELECT 1 FROM workflow_instance w WHERE w.id = a.workflow_instance_id)",
    "task-group queue rows": "SELECT count(*) FROM task_group_queue q WHERE NOT EXISTS"
    " (SELECT 1 FROM workflow_instance w WHERE w.id = q.workflow_instance_id)",
    "commands": "SELECT count(*) FROM command c WHERE c.workflow_instance_id <> 0 AND NOT EXISTS"
    " (SELECT 1 FROM workflow_instance w WHERE w.id = c.workflow_instance_id)",
}


async def _orphans(conn: asyncpg.Connection) -> dict[str, int]:
    return {kind: int(await conn.fetchval(sql)) for kind, sql in ORPHANS.items()}


async def _project(conn: asyncpg.Connection, name: str, keep_days: int | None) -> int:
    return int(
        await conn.fetchval(
            "INSERT INTO project (code, name, keep_days) VALUES (nextval('definition_code_seq'), $1, $2)"
            " RETURNING code",
            name,
            keep_days,
        )
    )


async def _instance(
    conn: asyncpg.Connection, project: int, state: int, ended_ago: dt.timedelta | None, tasks: int = 2, **cols: Any
) -> int:
    end = None if ended_ago is None else dt.datetime.now(dt.UTC) - ended_ago
    param = json.dumps(cols.pop("command_param", {}))
    instance = int(
        await conn.fetchval(
            "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version, project_code,"
            " state, command_type, start_time, end_time, command_param)"
            " VALUES ('w', $1, 1, $2, $3, 0, coalesce($4, now()) - interval '1 minute', $4, $5::jsonb) RETURNING id",
            cols.pop("code", 1),
            project,
            state,
            end,
            param,
        )
    )
    for i in range(tasks):
        await conn.execute(
            "INSERT INTO task_instance (name, task_type, task_code, task_definition_version, workflow_instance_id,"
            " state) VALUES ($1, 'SHELL', $2, 1, $3, 7)",
            f"t{i}",
            i + 1,
            instance,
        )
    return instance


async def _child(conn: asyncpg.Connection, parent: int, child: int, command_id: int | None = None) -> None:
    task = await conn.fetchval("SELECT min(id) FROM task_instance WHERE workflow_instance_id = $1", parent)
    await conn.execute(
        "INSERT INTO sub_workflow_relation (parent_workflow_instance_id, parent_task_instance_id, workflow_instance_id,"
        " command_id) VALUES ($1, $2, $3, $4)",
        parent,
        task,
        child,
        command_id,
    )


class History:
    """A database filled by hand: ``gone`` must be removed by a pass with keep_days 90, ``kept`` must stay."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.gone: list[int] = []
        self.kept: dict[str, int] = {}
        self.backfills: list[int] = []

    async def instances(self) -> None:
        conn, kept = self.conn, self.kept
        default = self.default = await _project(conn, "default-keep", None)
        longer = await _project(conn, "longer", 200)
        forever = await _project(conn, "forever", 0)
        for state in (SUCCESS, FAILURE, STOP, 3, 16):  # every finished state, more rows than a batch
            self.gone += [await _instance(conn, default, state, OLD) for _ in range(3)]
        self.gone.append(await _instance(conn, default, SUCCESS, dt.timedelta(days=91)))
        kept["young"] = await _instance(conn, default, SUCCESS, dt.timedelta(days=89))
        kept["unfinished"] = await _instance(conn, default, READY_BLOCK, None)
        kept["running, started long ago"] = await _instance(conn, default, RUNNING, None)
        await conn.execute(
            "UPDATE workflow_instance SET start_time = now() - interval '300 days' WHERE id = $1",
            kept["running, started long ago"],
        )
        kept["project keeps 200 days"] = await _instance(conn, longer, SUCCESS, OLD)
        self.gone.append(await _instance(conn, longer, SUCCESS, dt.timedelta(days=201)))
        kept["project keeps for ever"] = await _instance(conn, forever, SUCCESS, dt.timedelta(days=3000))
        # a queued command (a rerun the API inserted) and an alert not delivered yet
        kept["queued rerun"] = await _instance(conn, default, FAILURE, OLD)
        await conn.execute(
            "INSERT INTO command (command_type, workflow_definition_code, workflow_instance_id) VALUES (7, 1, $1)",
            kept["queued rerun"],
        )
        kept["alert pending"] = await _instance(conn, default, FAILURE, OLD)
        sent = await _instance(conn, default, SUCCESS, OLD)
        self.gone.append(sent)
        for instance, status in ((kept["alert pending"], 0), (sent, 1)):
            await conn.execute(
                "INSERT INTO alert (title, content, alert_type, alert_status, workflow_instance_id)"
                " VALUES ('a', 'c', 1, $2, $1)",
                instance,
                status,
            )

    async def sub_workflows(self) -> None:
        """A finished parent whose child still runs; a child goes with its parent only."""
        conn, kept, default = self.conn, self.kept, self.default
        kept["parent of a running child"] = await _instance(conn, default, STOP, OLD)
        kept["running child"] = await _instance(conn, default, READY_BLOCK, None)
        await _child(conn, kept["parent of a running child"], kept["running child"])
        kept["young parent"] = await _instance(conn, default, SUCCESS, dt.timedelta(days=1))
        kept["old child of a young parent"] = await _instance(conn, default, SUCCESS, OLD)
        await _child(conn, kept["young parent"], kept["old child of a young parent"])
        kept["parent whose child is queued"] = await _instance(conn, default, SUCCESS, OLD)
        queued = await conn.fetchval(
            "INSERT INTO command (command_type, workflow_definition_code) VALUES (0, 1) RETURNING id"
        )
        await _child(conn, kept["parent whose child is queued"], 0, queued)
        parent = await _instance(conn, default, SUCCESS, OLD)
        child = await _instance(conn, default, SUCCESS, OLD)
        grandchild = await _instance(conn, default, FAILURE, OLD)
        await _child(conn, parent, child)
        await _child(conn, child, grandchild)
        self.gone += [parent, child, grandchild]
        # task-group queue rows left behind by an old run
        await conn.execute("INSERT INTO task_group (name, group_size) VALUES ('g', 1)")
        await conn.execute(
            "INSERT INTO task_group_queue (task_group_id, task_instance_id, workflow_instance_id, slots)"
            " SELECT (SELECT id FROM task_group), min(id), $1, 1 FROM task_instance WHERE workflow_instance_id = $1",
            self.gone[0],
        )

    async def others(self) -> None:
        """Backfills (one no longer named, one named by a queued command, one by a kept instance), error
        commands, schedule fires (old ones behind the watermark go), audit rows."""
        conn = self.conn
        for _ in range(3):
            self.backfills.append(
                await conn.fetchval(
                    "INSERT INTO backfill (workflow_definition_code, dates, create_time) VALUES"
                    " (1, ARRAY[now()], now() - interval '100 days') RETURNING id"
                )
            )
        await conn.execute(
            "INSERT INTO command (command_type, workflow_definition_code, command_param) VALUES (5, 1, $1::jsonb)",
            json.dumps({"backfillId": self.backfills[1]}),
        )
        self.kept["backfill run"] = await _instance(
            conn, self.default, SUCCESS, dt.timedelta(days=1), command_param={"backfillId": self.backfills[2]}
        )
        await conn.execute(
            "INSERT INTO error_command (id, command_type, workflow_definition_code, message, update_time)"
            " SELECT g, 0, 1, 'x', now() - (CASE WHEN g % 2 = 0 THEN 100 ELSE 1 END) * interval '1 day'"
            " FROM generate_series(1, 10) g"
        )
        await conn.execute(
            "INSERT INTO workflow_definition (code, name, project_code) VALUES (77, 'wf', $1)", self.default
        )
        await conn.execute(
            "INSERT INTO schedule (workflow_definition_code, start_time, end_time, crontab, fired_until) VALUES"
            " (77, now() - interval '1 year', now() + interval '1 year', '* * * * *', now() - interval '95 days')"
        )
        await conn.execute(
            "INSERT INTO schedule_fire (schedule_id, fire_time, command_id) SELECT (SELECT id FROM schedule),"
            " now() - g * interval '1 day', g FROM generate_series(1, 120) g"
        )
        await conn.execute(
            "INSERT INTO audit_log (action, resource_type, status, create_time)"
            " SELECT 'x', 'y', 200, now() - g * interval '1 day' FROM generate_series(1, 40) g"
        )


async def _pass(dsn: str) -> Removed:
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2, init=register_json)
    try:
        return await Retention(pool, keep_days=90, audit_keep_days=30, batch=4).run()
    finally:
        await pool.close()


async def test_a_pass_removes_exactly_the_old_finished_history_and_keeps_what_is_still_needed(fresh_db: str) -> None:
    conn = await asyncpg.connect(fresh_db)
    try:
        h = History(conn)
        await h.instances()
        await h.sub_workflows()
        await h.others()
        total_tasks = await conn.fetchval("SELECT count(*) FROM task_instance")
        kept_ids = set(h.kept.values())
        kept_tasks = await conn.fetchval(
            "SELECT count(*) FROM task_instance WHERE workflow_instance_id = ANY($1::bigint[])", list(kept_ids)
        )

        removed = await _pass(fresh_db)

        left = {int(r["id"]) for r in await conn.fetch("SELECT id FROM workflow_instance")}
        assert not set(h.gone) & left, "old finished instances left"
        assert {k: i for k, i in h.kept.items() if i not in left} == {}, "instances removed that were still needed"
        assert left == kept_ids
        assert removed.instances == len(h.gone)
        assert await conn.fetchval("SELECT count(*) FROM task_instance") == kept_tasks < total_tasks
        assert await _orphans(conn) == dict.fromkeys(ORPHANS, 0)
        assert await conn.fetchval("SELECT count(*) FROM alert") == 1  # the pending one
        assert await conn.fetchval("SELECT count(*) FROM task_group_queue") == 0
        assert sorted(r["id"] for r in await conn.fetch("SELECT id FROM backfill")) == h.backfills[1:]
        assert sorted(r["id"] for r in await conn.fetch("SELECT id FROM error_command")) == [1, 3, 5, 7, 9]
        # fires: older than 90 days and behind the watermark (95 days ago) go; days 1..95 stay
        ages = "SELECT round(extract(epoch FROM now() - fire_time) / 86400)::int AS d FROM schedule_fire ORDER BY 1"
        assert [r["d"] for r in await conn.fetch(ages)] == list(range(1, 96))
        assert await conn.fetchval("SELECT max(now() - create_time) < interval '31 days' FROM audit_log")
        assert await conn.fetchval("SELECT count(*) FROM audit_log") == 29
        assert (await _pass(fresh_db)).total() == 0
    finally:
        await conn.close()


def test_keep_days_below_the_longest_dependent_look_back_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"history\.keep_days: 30 is below 62 days"):
        load(overrides=["history.keep_days=30"], environ={})
    assert load(overrides=["history.keep_days=0"], environ={}).history.keep_days == 0
    days = DEPENDENT_LOOKBACK_DAYS
    assert load(overrides=[f"history.keep_days={days}"], environ={}).history.keep_days == days


async def _finished(dsn: str, ids: list[int]) -> bool:
    rows = await query(dsn, "SELECT count(*) AS n FROM workflow_instance WHERE command_id = ANY($1::bigint[])"
                            f" AND state IN {sql_codes(_ENDED)}", ids)  # fmt: skip
    return int(rows[0]["n"]) == len(ids)


# the instances of commands $1 and their sub-workflow children
_FAMILY = (
    "SELECT id FROM workflow_instance WHERE command_id = ANY($1::bigint[]) UNION SELECT s.workflow_instance_id"
    " FROM sub_workflow_relation s JOIN workflow_instance p ON p.id = s.parent_workflow_instance_id"
    " WHERE p.command_id = ANY($1::bigint[])"
)


@pytest.mark.timeout(240)
async def test_masters_remove_old_history_under_load_and_nothing_else(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str
) -> None:
    """Two real masters run the job every 0.3 s (one at a time, under the etcd lock) while runs are started
    and finish, and old runs are backdated under them: at the end every old finished run is gone with its
    task instances and sub-workflow children, every other run is intact, and nothing points at a removed row."""
    quick = await save(fresh_db, "quick", [shell("a", "true"), shell("b", "true", ("a",))])
    await save(fresh_db, "child", [shell("c", "true")])
    parent = await save(fresh_db, "parent", [TaskDef(name="sub", task_type="SUB_PROCESS",
                                                     params={"workflow": "child"})])  # fmt: skip
    env = {"PORPOISE_DATABASE_DSN": fresh_db, "PORPOISE_MASTER_MAX_CPU_LOAD_AVG": "100000",
           "PORPOISE_WORKER_MAX_CPU_LOAD_AVG": "100000", "PORPOISE_HISTORY_INTERVAL_SECONDS": "0.3",
           "PORPOISE_HISTORY_BATCH_SIZE": "7"}  # fmt: skip

    def start() -> list[NodeProc]:
        ms = [node_factory("master", etcd_server.endpoint, etcd_root, 3, **env) for _ in range(2)]
        node_factory("worker", etcd_server.endpoint, etcd_root, 3, **env)
        return ms

    masters = await asyncio.to_thread(start)
    # history: runs that finish, then are backdated while later runs are created and finish
    first = await command(fresh_db, quick, 40) + await command(fresh_db, parent, 10)
    await eventually(lambda: _finished(fresh_db, first), 120, "the first runs to finish", interval=0.2)
    old = {int(r["id"]) for r in await query(fresh_db, _FAMILY, first)}
    assert len(old) == 60  # 40 quick, 10 parents, 10 children
    later: list[int] = []
    backdate = (
        "UPDATE workflow_instance SET end_time = end_time - interval '100 days',"
        f" start_time = start_time - interval '100 days' WHERE id IN ({_FAMILY})"
    )
    for chunk in range(0, len(first), 10):
        later += await command(fresh_db, quick, 8) + await command(fresh_db, parent, 2)
        await query(fresh_db, backdate, first[chunk : chunk + 10])
        await asyncio.sleep(0)
    await eventually(lambda: _finished(fresh_db, later), 120, "the later runs to finish", interval=0.2)

    async def old_gone() -> bool:
        rows = await query(fresh_db, "SELECT count(*) AS n FROM workflow_instance WHERE id = ANY($1::bigint[])",
                           list(old))  # fmt: skip
        return int(rows[0]["n"]) == 0

    await eventually(old_gone, 60, "the old runs to be removed", interval=0.2)
    for m in masters:
        assert m.proc.exited() is None
    conn = await asyncpg.connect(fresh_db)
    try:
        # every later run is there, finished, with its tasks; its children too
        rows = await conn.fetch("SELECT id, state FROM workflow_instance WHERE command_id = ANY($1::bigint[])", later)
        assert len(rows) == len(later) and {r["state"] for r in rows} == {SUCCESS}
        assert await conn.fetchval("SELECT count(*) FROM workflow_instance WHERE is_sub_workflow = 1") == 10
        assert await conn.fetchval("SELECT count(*) FROM workflow_instance") == len(later) + 10
        assert await conn.fetchval(
            "SELECT count(*) FROM task_instance t JOIN workflow_instance w ON w.id = t.workflow_instance_id"
            " WHERE t.flag = 1"
        ) == 40 * 2 + 10 + 10  # fmt: skip
        assert await _orphans(conn) == dict.fromkeys(ORPHANS, 0)
        assert await conn.fetchval("SELECT count(*) FROM command") == 0
        assert await conn.fetchval("SELECT count(*) FROM error_command") == 0
    finally:
        await conn.close()
