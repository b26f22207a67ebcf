"""An in-process Executor with a real Reporter reporting to a real RPC sink: attempts ended because the
worker lost its lease are reported LOST (run again elsewhere), however early in their start they were."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.worker.executor import Executor
from engine.worker.reporter import Reporter
from engine.worker.taskenv import TaskPolicy
from tests.helpers import rpc_client
from tests.worker_harness import ReportSink, task


@pytest.fixture
async def executor(tmp_path: Path) -> AsyncIterator[Executor]:
    rpc = rpc_client(timeout=10)  # mutual TLS when the suite runs with it
    reporter = Reporter(rpc, retry_initial=0.05)
    reporter.start()
    ex = Executor(
        slots=8,
        log_dir=tmp_path / "logs",
        exec_dir=tmp_path / "exec",
        address="127.0.0.1:1",
        reporter=reporter,
        policy=TaskPolicy(allow_root_tenant=True),
    )
    yield ex
    await ex.kill_all()
    await reporter.close()
    await rpc.close()


@pytest.mark.parametrize("steps", [0, 1, 2, 3, 5, 8])
async def test_attempts_killed_for_a_lost_lease_are_reported_lost_at_any_point_of_their_start(
    executor: Executor, sink: ReportSink, steps: int
) -> None:
    d = task("SHELL", {"rawScript": "sleep 60"}, sink.address)
    assert executor.dispatch(d).accepted
    for _ in range(steps):  # let the start get this far: not begun, preparing, in its thread, spawning ...
        await asyncio.sleep(0)
    async with asyncio.timeout(10):  # in this task: with 0 steps the attempt's task has not begun at all
        await executor.kill_all(lost=True)  # returns, whatever the attempt was doing
    result = await sink.result(d.task_instance_id)
    assert result["state"] == "LOST", result
    assert executor.runs == {}


async def test_an_attempt_waits_until_its_process_starts(executor: Executor, sink: ReportSink) -> None:
    # admitted (it holds a slot), then set up (log, exec dir, tenant) before its process starts: waiting
    d = task("SHELL", {"rawScript": "sleep 60"}, sink.address)
    assert executor.dispatch(d).accepted
    assert (executor.holding(), executor.waiting()) == (1, 1)
    await sink.running(d.task_instance_id)
    assert (executor.holding(), executor.waiting()) == (1, 0)
