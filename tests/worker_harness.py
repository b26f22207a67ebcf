"""Harness for testing a real worker process on its own: the test plays the master.

``ReportSink`` is a real RPC endpoint (the project's RpcServer) that persists every task.running and
task.result report in PostgreSQL, idempotently, and acknowledges only after the commit — the
contract the master keeps. It can be told to fail calls, and be stopped and restarted on its port.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg
from aiohttp import web

from engine.infra.ports import free_port
from engine.worker.spool import Spool, Spooled
from rpc import RpcClient, RpcServer
from rpc.messages import DispatchReply, ReportReply, TaskDispatch, TaskResult, TaskRunning
from tests import tls
from tests.helpers import TEST_SECRET, eventually

_ids = itertools.count(1000)


class ReportSink:
    def __init__(self, dsn: str, port: int | None = None) -> None:
        self.dsn = dsn
        self.port = port or free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.fail_next = 0
        self.calls = 0
        #: (task instance, "running" / "result") -> when the report first reached the sink (epoch ms)
        self.received: dict[tuple[int, str], float] = {}
        self.runner: web.AppRunner | None = None
        self.pool: asyncpg.Pool | None = None

    async def start(self) -> ReportSink:
        if self.pool is None:
            self.pool = await asyncpg.create_pool(self.dsn, min_size=1, max_size=4)
            await self.pool.execute(
                "CREATE TABLE IF NOT EXISTS reports (task_instance_id bigint, attempt int, kind text,"
                " state text, body jsonb, PRIMARY KEY (task_instance_id, attempt, kind))"
            )
        app = web.Application()
        server_tls = tls.server_ssl()  # a master's listener: mutual TLS when the suite runs with TLS
        server = RpcServer(app, TEST_SECRET, require_client_cert=server_tls is not None)
        server.register(TaskRunning, self._running)
        server.register(TaskResult, self._result)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port, ssl_context=server_tls).start()
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    async def close(self) -> None:
        await self.stop()
        if self.pool is not None:
            await self.pool.close()
            self.pool = None

    async def _persist(self, kind: str, msg: Any, state: str) -> ReportReply:
        self.received.setdefault((msg.task_instance_id, kind), time.time() * 1000)
        self.calls += 1
        if self.fail_next > 0:
            self.fail_next -= 1
            raise RuntimeError("sink told to fail")  # -> HTTP 500, not acknowledged
        import dataclasses
        import json

        assert self.pool is not None
        await self.pool.execute(
            "INSERT INTO reports VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            msg.task_instance_id,
            msg.attempt,
            kind,
            state,
            json.dumps(dataclasses.asdict(msg)),
        )
        return ReportReply(ack=True)

    async def _running(self, msg: TaskRunning) -> ReportReply:
        return await self._persist("running", msg, "RUNNING")

    async def _result(self, msg: TaskResult) -> ReportReply:
        return await self._persist("result", msg, msg.state)

    async def rows(self, task_instance_id: int) -> dict[str, dict[str, Any]]:
        import json

        assert self.pool is not None
        rows = await self.pool.fetch("SELECT kind, body FROM reports WHERE task_instance_id = $1", task_instance_id)
        return {r["kind"]: json.loads(r["body"]) for r in rows}

    async def result(self, task_instance_id: int, timeout: float = 30) -> dict[str, Any]:
        async def get() -> dict[str, Any] | None:
            return (await self.rows(task_instance_id)).get("result")

        return await eventually(get, timeout, f"result of task instance {task_instance_id}")  # type: ignore[no-any-return]

    async def running(self, task_instance_id: int, timeout: float = 30) -> dict[str, Any]:
        async def get() -> dict[str, Any] | None:
            return (await self.rows(task_instance_id)).get("running")

        return await eventually(get, timeout, f"RUNNING of task instance {task_instance_id}")  # type: ignore[no-any-return]


def task(task_type: str, params: dict[str, Any], master: str, **kw: Any) -> TaskDispatch:
    ti = next(_ids) + uuid.uuid4().int % 1000 * 1000
    return TaskDispatch(
        task_instance_id=ti,
        attempt=kw.pop("attempt", 1),
        workflow_instance_id=kw.pop("workflow_instance_id", ti // 10),
        workflow_definition_code=kw.pop("workflow_definition_code", 77),
        task_code=kw.pop("task_code", ti * 3),
        task_name=kw.pop("task_name", f"{task_type.lower()}-{ti}"),
        task_type=task_type,
        task_params=params,
        master=master,
        **kw,
    )


async def dispatch(client: RpcClient, worker: str, msg: TaskDispatch) -> DispatchReply:
    return await client.call(worker, msg)


async def log_text(path: str) -> str:
    from pathlib import Path

    return await asyncio.to_thread(Path(path).read_text)


class SlowSpool(Spool):
    """A spool whose group commits wait until the test lets them go (a slow disk's fsync)."""

    def __init__(self, root: Path, namespace: str) -> None:
        super().__init__(root, namespace)
        self.go = threading.Event()
        self.writing = threading.Event()

    def write_many(self, entries: Sequence[Spooled]) -> None:
        self.writing.set()
        assert self.go.wait(30), "the test never let the write go"
        super().write_many(entries)
