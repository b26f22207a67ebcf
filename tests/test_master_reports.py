"""A master's answer to a batch of worker reports (Master.on_task_reports, real PostgreSQL for the
instances no actor drives): each report is answered on its own and in order — persisted by its actor,
acknowledged when nothing will consume it, refused naming the owner when another master owns it, refused
when malformed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from engine.master.arrivals import Arrivals
from engine.master.server import Master
from engine.master.store import MasterStore
from engine.master.workflow_messages import TaskResultEvent, TaskRunningEvent
from engine.metrics import NodeMetrics
from rpc.messages import ReportReply, TaskReports, TaskResult, TaskRunning

ME, OTHER = "127.0.0.1:5678", "127.0.0.1:6789"


class Actor:
    """Stands in for a WorkflowActor: persists what it is posted (or refuses it, as a fenced one does)."""

    def __init__(self, persists: bool) -> None:
        self.persists = persists
        self.task = object()  # running
        self.posted: list[Any] = []

    def post(self, event: Any, wait: bool = False) -> asyncio.Future[bool]:
        self.posted.append(event)
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(self.persists)
        return fut


@pytest.fixture
async def pool(fresh_db: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=2)
    yield pool
    await pool.close()


async def _instance(pool: asyncpg.Pool, host: str, state: int, epoch: int) -> int:
    return int(
        await pool.fetchval(
            "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version, project_code,"
            " state, command_type, host, epoch) VALUES ('w', 1, 1, 1, $1, 0, $2, $3) RETURNING id",
            state,
            host,
            epoch,
        )
    )


def _master(pool: asyncpg.Pool, actors: dict[int, Actor]) -> Master:
    master = Master.__new__(Master)  # only what answering reports uses
    master.store = MasterStore(pool, ME)
    master.actors = actors  # type: ignore[assignment]
    master.metrics = NodeMetrics("master")
    master.address = ME  # type: ignore[misc]
    master.arrivals = Arrivals()

    class Dispatcher:
        def __init__(self) -> None:
            self.freed_hosts: list[str] = []

        def freed(self, host: str) -> None:
            self.freed_hosts.append(host)

    master.dispatcher = Dispatcher()  # type: ignore[assignment]
    return master


def _running(wid: int, tid: int) -> TaskRunning:
    return TaskRunning(tid, 1, wid, "w:1", 42, "/l", "/e", 1)


def _result(wid: int, tid: int, state: str = "SUCCESS") -> TaskResult:
    return TaskResult(tid, 1, wid, "w:1", state, 0, 1, 2)


async def test_each_report_of_a_batch_is_answered_on_its_own_and_in_order(pool: asyncpg.Pool) -> None:
    running = await _instance(pool, OTHER, 1, 7)  # another master drives it
    finished = await _instance(pool, OTHER, 7, 3)  # SUCCESS: nothing will consume a report
    fenced = await _instance(pool, OTHER, 1, 9)  # our actor for it was fenced out
    driven, unknown = 1_000_001, 1_000_002
    ours, stale = Actor(persists=True), Actor(persists=False)
    master = _master(pool, {driven: ours, fenced: stale})
    reply = await master.on_task_reports(
        TaskReports(
            running=[_running(driven, 1), _running(running, 2)],
            results=[
                _result(driven, 1),
                _result(finished, 3),
                _result(driven, 4, state="EXPLODED"),  # malformed: refused, the others still answered
                _result(unknown, 5),
                _result(fenced, 6),
            ],
        )
    )
    assert reply.replies == [
        ReportReply(ack=True),  # persisted by its actor
        ReportReply(ack=False, owner=OTHER, epoch=7),  # the worker re-targets it
        ReportReply(ack=True),
        ReportReply(ack=True),  # the instance is over
        ReportReply(ack=False),
        ReportReply(ack=True),  # dropped: no such instance
        ReportReply(ack=False, owner=OTHER, epoch=9),
    ]
    assert [type(e) for e in ours.posted] == [TaskRunningEvent, TaskResultEvent]
    assert [e.task_instance_id for e in ours.posted] == [1, 1]
    assert [e.task_instance_id for e in stale.posted] == [6]
    # every well-formed result freed its slot on the worker
    assert master.dispatcher.freed_hosts == ["w:1"] * 4  # type: ignore[attr-defined]
