"""Helpers for end-to-end tests with real master and worker processes on a fresh database."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import asyncpg

from engine.accounts.tokens import create_token, ensure_user
from engine.client import ApiClient, Target
from engine.infra.etcd import EtcdServer
from engine.states import WORKFLOW_FINISHED
from engine.workflows.definitions import save_workflow
from engine.workflows.model import TaskDef, WorkflowDef
from tests.helpers import NodeProc, eventually

FINAL = WORKFLOW_FINISHED


def shell(name: str, script: str, upstream: tuple[str, ...] = (), **kw: Any) -> TaskDef:
    return TaskDef(
        name=name, task_type="SHELL", params={"rawScript": script, **kw.pop("params", {})}, upstream=upstream, **kw
    )


async def save(dsn: str, name: str, tasks: list[TaskDef], release: bool = True, **kw: Any) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        code, _ = await save_workflow(conn, WorkflowDef(name=name, project="tests", tasks=tuple(tasks), **kw), release)
    finally:
        await conn.close()
    return code


async def command(dsn: str, code: int, count: int = 1, **cols: Any) -> list[int]:
    conn = await asyncpg.connect(dsn)
    try:
        if "command_param" in cols and not isinstance(cols["command_param"], str):
            cols["command_param"] = json.dumps(cols["command_param"])
        ctype = cols.pop("command_type", 0)
        names = ["command_type", "workflow_definition_code", *cols]
        marks = ", ".join(f"${i}" for i in range(1, len(names) + 1))
        rows = await conn.fetch(
            f"INSERT INTO command ({', '.join(names)}) SELECT {marks} FROM generate_series(1, {count}) RETURNING id",
            ctype,
            code,
            *cols.values(),
        )
        return [int(r["id"]) for r in rows]
    finally:
        await conn.close()


async def query(dsn: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def instance_for(dsn: str, command_id: int, timeout: float = 30, final: bool = True) -> asyncpg.Record:
    async def get() -> asyncpg.Record | None:
        rows = await query(dsn, "SELECT * FROM workflow_instance WHERE command_id = $1", command_id)
        if rows and (not final or rows[0]["state"] in FINAL):
            return rows[0]
        return None

    return await eventually(get, timeout, f"instance of command {command_id}", interval=0.05)  # type: ignore[no-any-return]


async def tasks_of(dsn: str, instance_id: int) -> list[asyncpg.Record]:
    return await query(dsn, "SELECT * FROM task_instance WHERE workflow_instance_id = $1 ORDER BY id", instance_id)


def start_nodes(
    node_factory: Callable[..., NodeProc],
    etcd: EtcdServer,
    root: str,
    dsn: str,
    masters: int = 1,
    workers: int = 1,
    worker_overrides: list[str] | None = None,
    ttl: float = 3,
) -> tuple[list[NodeProc], list[NodeProc]]:
    ms = [node_factory("master", etcd.endpoint, root, ttl, PORPOISE_DATABASE_DSN=dsn) for _ in range(masters)]
    ws = [
        node_factory("worker", etcd.endpoint, root, ttl, worker_overrides or [], PORPOISE_DATABASE_DSN=dsn)
        for _ in range(workers)
    ]
    return ms, ws


async def started(
    node_factory: Callable[..., NodeProc], etcd: EtcdServer, root: str, dsn: str, **kw: Any
) -> tuple[list[NodeProc], list[NodeProc]]:
    return await asyncio.to_thread(start_nodes, node_factory, etcd, root, dsn, **kw)


async def started_unguarded(
    node_factory: Callable[..., NodeProc], etcd: EtcdServer, root: str, dsn: str, masters: int, workers: int, ttl: float
) -> tuple[list[NodeProc], list[NodeProc]]:
    """Nodes that claim and take work however loaded the shared test machine is (the load guard is
    another test's subject; here it would only stall the runs)."""
    env = {"PORPOISE_DATABASE_DSN": dsn, "PORPOISE_MASTER_MAX_CPU_LOAD_AVG": "100000",
           "PORPOISE_WORKER_MAX_CPU_LOAD_AVG": "100000"}  # fmt: skip

    def start() -> tuple[list[NodeProc], list[NodeProc]]:
        ms = [node_factory("master", etcd.endpoint, root, ttl, **env) for _ in range(masters)]
        return ms, [node_factory("worker", etcd.endpoint, root, ttl, **env) for _ in range(workers)]

    return await asyncio.to_thread(start)


def max_overlap(intervals: list[tuple[dt.datetime, dt.datetime]]) -> int:
    """The most intervals open at one time (an end at the same instant as a start does not overlap)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    now = top = 0
    for _, step in events:
        now += step
        top = max(top, now)
    return top


class Started:
    """A failover service's start_actor in tests: records what it was asked to drive (instance id, epoch)."""

    def __init__(self) -> None:
        self.instances: list[tuple[int, int]] = []

    def __call__(self, info: Any, *_: Any, **__: Any) -> None:
        self.instances.append((info.id, info.epoch))


async def admin_api(
    node_factory: Callable[..., Any], etcd_server: EtcdServer, etcd_root: str, dsn: str, ttl: int = 2
) -> tuple[Any, ApiClient]:
    """An API node on ``dsn`` (tokens re-read on every request) and an admin's client of it."""
    conn = await asyncpg.connect(dsn)
    try:
        token = (await create_token(conn, await ensure_user(conn), "tests"))[1]
    finally:
        await conn.close()
    api = await asyncio.to_thread(
        node_factory, "api", etcd_server.endpoint, etcd_root, ttl, ["api.token_cache_seconds=0"], 0,
        PORPOISE_DATABASE_DSN=dsn,
    )  # fmt: skip
    return api, ApiClient(Target(f"http://{api.address}", token, "test"))
