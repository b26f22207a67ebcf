"""An in-process Executor with a real Reporter reporting to a real RPC sink: attempts ended because the
worker lost its lease are reported LOST (run again elsewhere), however early in their start they were."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.worker.executor import Executor
from engine.worker.reporter import Reporter
from engine.worker.taskenv import TaskPolicy
from tests.helpers import eventually, rpc_client
from tests.worker_harness import ReportSink, SlowSpool, log_text, task


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


@contextlib.asynccontextmanager
async def slow_disk_executor(tmp_path: Path, slots: int) -> AsyncIterator[tuple[Executor, Reporter, SlowSpool]]:
    """An in-process Executor whose Reporter spools to a SlowSpool (its writes wait until ``spool.go`` is set);
    everything stopped afterwards, the spool let go first."""
    spool = SlowSpool(tmp_path / "spool", "/x")
    spool.open()
    rpc = rpc_client(timeout=10)
    reporter = Reporter(rpc, retry_initial=0.05, spool=spool)
    reporter.start()
    ex = Executor(slots=slots, log_dir=tmp_path / "logs", exec_dir=tmp_path / "exec", address="127.0.0.1:1",
                  reporter=reporter, policy=TaskPolicy(allow_root_tenant=True))  # fmt: skip
    try:
        yield ex, reporter, spool
    finally:
        spool.go.set()
        await ex.kill_all()
        await reporter.close()
        await rpc.close()
        spool.close()


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


async def test_a_worker_paused_while_the_process_was_created_kills_it_and_reports_lost(
    executor: Executor, sink: ReportSink
) -> None:
    """Invariant 3 where the log, the exec dir and the process are made in one trip to a thread: may_start
    said yes before that trip, no right after it (the lease may be gone meanwhile): the task does not run on."""
    asked: list[str] = []

    def may_start() -> str:
        asked.append("")
        return "" if len(asked) == 1 else "paused: the registry lease may be gone"

    executor.may_start = may_start
    d = task("SHELL", {"rawScript": "sleep 60"}, sink.address)
    assert executor.dispatch(d).accepted
    result = await sink.result(d.task_instance_id)
    assert result["state"] == "LOST" and result["pid"] > 0, result
    assert len(asked) == 2
    assert executor.runs == {}


async def test_a_worker_that_may_not_start_writes_why_and_starts_nothing(executor: Executor, sink: ReportSink) -> None:
    executor.may_start = lambda: "paused: the registry lease may be gone"
    d = task("SHELL", {"rawScript": "echo ran-it"}, sink.address)
    assert executor.dispatch(d).accepted
    result = await sink.result(d.task_instance_id)
    assert result["state"] == "LOST" and result["pid"] == 0, result
    assert "not started: paused" in result["message"]
    text = await log_text(result["log_path"])
    assert "[porpoise] not started: paused: the registry lease may be gone\n" in text and "\nran-it\n" not in text
    assert "running" not in await sink.rows(d.task_instance_id)


async def test_a_process_that_cannot_be_created_fails_with_its_log_closed_and_exec_dir_released(
    executor: Executor, sink: ReportSink, tmp_path: Path
) -> None:
    executor.policy = TaskPolicy(allow_root_tenant=True, python_interpreter=str(tmp_path / "no-such-python"))
    d = task("PYTHON", {"rawScript": "print('ran-it')"}, sink.address)
    assert executor.dispatch(d).accepted
    result = await sink.result(d.task_instance_id)
    assert result["state"] == "FAILURE" and "FileNotFoundError" in result["message"], result
    text = await log_text(result["log_path"])
    assert text.startswith("[porpoise] ") and "rendered rawScript" in text and "\nran-it\n" not in text
    assert result["log_tail"] and result["log_tail"] in text  # the log was set up and closed as for any attempt
    exec_dir = tmp_path / "exec" / f"{d.workflow_instance_id}-{d.task_instance_id}-{d.attempt}"
    assert not exec_dir.exists()  # handed back (kept as a spare under another name, or removed)
    assert {p.name for p in (tmp_path / "exec").iterdir()} <= {".spare"}  # one level: no directory per instance
    assert executor.runs == {}


async def test_busy_with_counts_the_attempts_held_per_workflow_instance(executor: Executor, sink: ReportSink) -> None:
    """The reporter asks busy_with per acknowledged result (whether an instance's owner entry may go): it is
    true while any attempt of the instance is held here, also after a later attempt of a task replaced an
    earlier one (the earlier no longer counts), and false once the last one ended."""
    import dataclasses

    first = task("SHELL", {"rawScript": "sleep 60"}, sink.address, workflow_instance_id=991)
    other = task("SHELL", {"rawScript": "true"}, sink.address, workflow_instance_id=991)
    assert executor.dispatch(first).accepted and executor.dispatch(other).accepted
    assert executor.busy_with(991) and not executor.busy_with(992)
    await sink.result(other.task_instance_id)
    assert executor.busy_with(991)  # the first still runs
    await sink.running(first.task_instance_id)
    replaced = executor.runs[first.task_instance_id]
    again = dataclasses.replace(first, attempt=2, workflow_instance_id=992)  # held under another id, say
    assert executor.dispatch(again).accepted
    assert executor.busy_with(992) and not executor.busy_with(991)
    assert replaced.proc is not None
    await executor._kill_group(replaced.proc.pid, signal.SIGKILL)
    await replaced.done.wait()
    assert executor.busy_with(992) and not executor.busy_with(991)
    held = list(executor.runs.values())
    await executor.kill_all()
    async with asyncio.timeout(10):
        await asyncio.gather(*(r.done.wait() for r in held))
    assert executor.runs == {}
    assert not executor.busy_with(992) and not executor.busy_with(991)


async def test_an_attempt_handing_its_result_over_frees_its_slot_before_it_is_on_disk(
    tmp_path: Path, sink: ReportSink
) -> None:
    """The result reaches the master while it goes to the spool: the master counts the slot free on it and may
    send the next attempt at once, so the worker takes it although the ended attempt waits for the disk."""
    async with slow_disk_executor(tmp_path, slots=1) as (ex, _reporter, spool):
        first = task("SHELL", {"rawScript": "true"}, sink.address)
        assert ex.dispatch(first).accepted
        assert ex.free_slots() == 0 and not ex.dispatch(task("SHELL", {"rawScript": "true"}, sink.address)).accepted
        await sink.result(first.task_instance_id)  # delivered while its spool write waits
        assert spool.writing.is_set() and first.task_instance_id in ex.runs
        assert (ex.holding(), ex.free_slots()) == (0, 1)
        second = task("SHELL", {"rawScript": "true"}, sink.address)
        assert ex.dispatch(second).accepted
        assert ex.holding() == 1
        spool.go.set()
        await sink.result(second.task_instance_id)
        async with asyncio.timeout(10):
            await asyncio.gather(*(r.done.wait() for r in list(ex.runs.values())))
        assert (ex.holding(), ex.free_slots(), ex.runs) == (0, 1, {})


async def test_the_owner_entry_goes_when_the_acknowledgement_came_while_the_result_went_to_disk(
    tmp_path: Path, sink: ReportSink
) -> None:
    """The reporter forgets an instance's owner on an acknowledgement only when no attempt of it is held; one
    acknowledged before its spool write ended (its attempt still held then) is forgotten when the attempt goes,
    not kept for ever (found by a hostile review)."""
    async with slow_disk_executor(tmp_path, slots=1) as (ex, reporter, spool):
        reporter.busy = ex.busy_with  # as engine/worker/server.py wires it
        d = task("SHELL", {"rawScript": "true"}, sink.address)
        assert ex.dispatch(d).accepted
        await sink.result(d.task_instance_id)
        await eventually(lambda: not reporter.pending, 10, "the result acknowledged")
        assert spool.writing.is_set() and d.workflow_instance_id in reporter.masters  # still held: kept
        held = list(ex.runs.values())
        spool.go.set()
        async with asyncio.timeout(10):
            await asyncio.gather(*(r.done.wait() for r in held))
        assert ex.runs == {} and reporter.masters == {}


async def test_a_replaced_attempt_handing_its_result_over_frees_no_slot_it_does_not_hold(
    tmp_path: Path, sink: ReportSink
) -> None:
    """An attempt replaced by a later one of its task (its owner moved on) left the slots when it was replaced:
    its end frees none again, so the worker never takes more than its slots (found by a hostile review)."""
    import dataclasses

    async with slow_disk_executor(tmp_path, slots=2) as (ex, _reporter, _spool):
        first = task("SHELL", {"rawScript": "sleep 60"}, sink.address)
        assert ex.dispatch(first).accepted
        await sink.running(first.task_instance_id)
        replaced = ex.runs[first.task_instance_id]
        assert ex.dispatch(dataclasses.replace(first, attempt=2)).accepted
        assert (ex.holding(), ex.free_slots()) == (1, 1)
        assert replaced.proc is not None
        await ex._kill_group(replaced.proc.pid, signal.SIGKILL)
        await eventually(lambda: replaced.ended, 10, "the replaced attempt handing its result over")
        assert (ex.holding(), ex.free_slots()) == (1, 1)


async def test_an_attempt_whose_result_waits_for_the_disk_keeps_its_slot_until_the_result_is_sent(
    tmp_path: Path, sink: ReportSink
) -> None:
    """A slot is free once the attempt's result is on its way to the master (which frees it on the result and
    may send the next attempt), not before: a result waiting for the next group commit keeps its slot, so no
    reply meanwhile offers the master a slot it will be told of again by the result."""
    gate = tmp_path / "gate"
    async with slow_disk_executor(tmp_path, slots=2) as (ex, _reporter, spool):
        first = task("SHELL", {"rawScript": "true"}, sink.address)
        second = task("SHELL", {"rawScript": f"while [ ! -f {gate} ]; do sleep 0.05; done"}, sink.address)
        assert ex.dispatch(first).accepted and ex.dispatch(second).accepted
        await sink.result(first.task_instance_id)  # sent at once, its group held on the way to the disk
        waiting = ex.runs[second.task_instance_id]
        await asyncio.to_thread(gate.touch)
        await eventually(lambda: waiting.ended, 10, "the second attempt over, its result waiting for the disk")
        assert (await sink.rows(second.task_instance_id)).get("result") is None
        assert (ex.holding(), ex.free_slots()) == (1, 1)  # the first's slot free, the second's not yet
        held = list(ex.runs.values())
        spool.go.set()
        await sink.result(second.task_instance_id)
        async with asyncio.timeout(10):
            await asyncio.gather(*(r.done.wait() for r in held))
        assert (ex.holding(), ex.free_slots()) == (0, 2)
