"""The worker's result spool on a real file system, and the reporter sending what it holds: results
survive the worker, every worker sharing the directory holds a slot of its own, a dead worker's slot is
adopted, and a result whose master is gone reaches the instance's owner through a live master."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import multiprocessing.synchronize
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from engine.infra.ports import free_port
from engine.worker.reporter import Pending, Reporter
from engine.worker.spool import Spool, Spooled
from rpc import RpcClient, RpcServer, codec
from rpc.messages import ReportReply, TaskResult
from tests import tls
from tests.helpers import TEST_SECRET, eventually, rpc_client
from tests.worker_harness import ReportSink, SlowSpool


def result(task_instance_id: int, attempt: int = 1, state: str = "SUCCESS") -> TaskResult:
    return TaskResult(
        task_instance_id=task_instance_id,
        attempt=attempt,
        workflow_instance_id=task_instance_id // 10,
        host="127.0.0.1:1",
        state=state,
        exit_code=0,
        start_time=1,
        end_time=2,
        var_pool=[{"prop": "answer", "direct": "OUT", "type": "VARCHAR", "value": "42"}],
    )


def test_a_spooled_result_is_found_again_by_the_next_holder(tmp_path: Path) -> None:
    first = Spool(tmp_path, "/cluster")
    assert first.open() == []
    entry = Spooled("127.0.0.1:5678", 7, result(101))
    first.write(entry)
    first.write(Spooled("127.0.0.1:5678", 7, result(102, state="LOST")))
    first.remove([(102, 1)])
    first.close()
    again = Spool(tmp_path, "/cluster")
    assert again.open() == [entry]
    assert again.slot == first.slot
    again.close()


def test_workers_sharing_the_directory_hold_their_own_slots_and_adopt_a_dead_one(tmp_path: Path) -> None:
    alive, other = Spool(tmp_path, "/c"), Spool(tmp_path, "/c")
    alive.open()
    other.open()
    assert alive.slot != other.slot
    mine, theirs = Spooled("m:1", 1, result(201)), Spooled("m:1", 1, result(202))
    alive.write(mine)
    other.write(theirs)
    other.close()  # that worker is dead: its lock is gone
    newcomer = Spool(tmp_path, "/c")
    assert newcomer.open() == [theirs]  # a live worker's slot is never touched
    assert [p.name for p in alive.files()] == ["201-1.json"]
    alive.close()
    newcomer.close()


def _hold_slot(root: str, ready: multiprocessing.synchronize.Event, done: multiprocessing.synchronize.Event) -> None:
    spool = Spool(Path(root), "/c")
    spool.open()
    spool.write(Spooled("m:1", 1, result(301)))
    ready.set()
    done.wait(30)


def test_a_slot_locked_by_another_process_is_left_alone(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    ready, done = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold_slot, args=(str(tmp_path), ready, done))
    proc.start()
    try:
        assert ready.wait(30)
        mine = Spool(tmp_path, "/c")
        assert mine.open() == []  # the other process holds slot 0 and its file
        mine.close()
    finally:
        done.set()
        proc.join(30)
    after = Spool(tmp_path, "/c")
    assert [e.key for e in after.open()] == [(301, 1)]  # its holder is gone: adopted
    after.close()


def test_clusters_do_not_see_each_other_s_results_and_broken_files_are_set_aside(tmp_path: Path) -> None:
    a = Spool(tmp_path, "/a")
    a.open()
    a.write(Spooled("m:1", 1, result(401)))
    assert a.slot is not None
    (a.slot / "402-1.json").write_text("{not json")
    (a.slot / "403-1.json.tmp").write_text("half a write")
    a.close()
    b = Spool(tmp_path, "/b")
    assert b.open() == []
    b.close()
    again = Spool(tmp_path, "/a")
    assert [e.key for e in again.open()] == [(401, 1)]
    assert again.slot is not None
    assert sorted(p.name for p in again.slot.iterdir()) == [".lock", "401-1.json", "402-1.bad"]
    again.close()


@pytest.fixture
async def rpc() -> AsyncIterator[RpcClient]:
    client = rpc_client(2)
    yield client
    await client.close()


async def test_a_restored_result_for_a_dead_master_reaches_the_owner_a_live_master_names(
    tmp_path: Path, sink: ReportSink, rpc: RpcClient
) -> None:
    """The spool names a master that is gone; a live master that is not the owner answers with the owner
    and its epoch (newer than the one spooled), and the result goes there and leaves the spool."""
    before = Spool(tmp_path, "/c")
    before.open()
    dead = f"127.0.0.1:{free_port()}"
    msg = result(501)
    before.write(Spooled(dead, 5, msg))
    before.close()  # the worker died
    spool = Spool(tmp_path, "/c")
    left = spool.open()
    asked: list[int] = []

    async def redirect(m: TaskResult) -> ReportReply:
        asked.append(m.task_instance_id)
        return ReportReply(False, sink.address, 6)

    app = web.Application()
    RpcServer(app, TEST_SECRET, require_client_cert=tls.ENABLED).register(TaskResult, redirect)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls.server_ssl()).start()
    live = f"127.0.0.1:{port}"
    reporter = Reporter(rpc, retry_initial=0.05, retry_max=0.2, spool=spool, live_masters=lambda: [live])
    try:
        reporter.restore(left)
        reporter.start()
        got = await sink.result(msg.task_instance_id, timeout=20)
        assert got["state"] == "SUCCESS" and got["var_pool"] == msg.var_pool
        assert asked == [msg.task_instance_id]
        await eventually(lambda: not spool.files(), 10, "acknowledged result removed from the spool")
        assert reporter.epochs[msg.workflow_instance_id] == 6
    finally:
        await reporter.close()
        await runner.cleanup()
        spool.close()


async def test_a_redirect_to_an_owner_older_than_one_known_is_not_followed(sink: ReportSink, rpc: RpcClient) -> None:
    reporter = Reporter(rpc, retry_initial=0.05, retry_max=0.2)
    reporter.note_owner(9, sink.address, 6)
    reporter._settle((91, 1, "result"), _pending(result(91)), sink.address, ReportReply(False, "x:1", 5))
    assert reporter.masters[9] == sink.address
    reporter._settle((91, 1, "result"), _pending(result(91)), sink.address, ReportReply(False, "y:1", 7))
    assert reporter.masters[9] == "y:1"


async def test_a_live_master_naming_the_dead_owner_already_targeted_does_not_restart_the_backoff(
    rpc: RpcClient,
) -> None:
    """Before a takeover, a live master that a report was rerouted to names the dead owner the report targets
    already: the report backs off further (restarting its backoff would resend it every few hundred ms, from
    every worker, for every result, until the takeover: a storm on the live masters)."""
    reporter = Reporter(rpc, retry_initial=0.05, retry_max=60.0)
    dead, live = "127.0.0.1:1", "127.0.0.1:2"
    reporter.note_owner(9, dead, 5)
    msg = result(91)
    reporter.report(msg, dead)
    key = (91, 1, "result")
    p = reporter.pending[key]
    delays = []
    for _ in range(4):  # each failed delivery: the dead owner twice, then the live master it is rerouted to
        p.in_flight = True
        before = time.monotonic()
        reporter._settle(key, p, live, ReportReply(False, dead, 5))
        delays.append(p.due - before)
    assert p.attempts == 4 and reporter.masters[9] == dead
    assert delays == sorted(delays) and delays[-1] >= 0.05 * 2**3, "the backoff doubles, never restarts"
    p.in_flight = True
    reporter._settle(key, p, live, ReportReply(False, "127.0.0.1:3", 6))  # a new owner: re-targeted at once
    assert reporter.masters[9] == "127.0.0.1:3" and p.attempts == 1


def _pending(msg: TaskResult) -> Pending:
    return Pending(msg, due=0.0)


async def test_held_results_are_spooled_and_not_sent(tmp_path: Path, sink: ReportSink, rpc: RpcClient) -> None:
    spool = Spool(tmp_path, "/c")
    spool.open()
    reporter = Reporter(rpc, retry_initial=0.05, spool=spool, hold_results=True)
    reporter.start()
    try:
        await reporter.result(result(601), sink.address)
        assert [p.name for p in spool.files()] == ["601-1.json"]
        assert not await reporter.flush(0.5)
        assert await sink.rows(601) == {}
    finally:
        await reporter.close()
        spool.close()
    assert [p.name for p in spool.files()] == ["601-1.json"]


async def test_a_result_is_sent_while_it_goes_to_the_spool_and_leaves_it_once_acknowledged_and_written(
    tmp_path: Path, sink: ReportSink, rpc: RpcClient
) -> None:
    """The disk's fsync is not on the way to the master when the disk is idle: the result is delivered (and
    acknowledged) while its group is still being written; ``result`` returns only once it is on disk (the
    attempt is over here from then on), and the acknowledgement that came first removes it from the spool
    once it is written. A result ending meanwhile goes with the next group and is sent after it."""
    spool = SlowSpool(tmp_path, "/s")
    spool.open()
    reporter = Reporter(rpc, retry_initial=0.05, spool=spool)
    reporter.start()
    try:
        handed = asyncio.create_task(reporter.result(result(801), sink.address))
        got = await sink.result(801, timeout=20)  # delivered while the write waits
        assert got["state"] == "SUCCESS"
        await eventually(lambda: not reporter.pending, 10, "the result acknowledged")
        assert spool.writing.is_set() and not handed.done() and spool.files() == []
        # one ending while that group is on its way waits for the next group, and is sent once written
        later = asyncio.create_task(reporter.result(result(802), sink.address))
        await eventually(lambda: reporter._to_spool, 10, "the next result waiting for the disk")
        assert (await sink.rows(802)) == {} and (802, 1, "result") not in reporter.pending
        spool.go.set()
        await asyncio.wait_for(asyncio.gather(handed, later), 10)
        assert (await sink.result(802, timeout=20))["state"] == "SUCCESS"
        await eventually(lambda: not spool.files() and spool.held() == 0, 10, "the written results removed")
    finally:
        spool.go.set()
        await reporter.close()
        spool.close()


def test_a_group_of_results_is_one_file_that_goes_once_every_result_in_it_is_acknowledged(tmp_path: Path) -> None:
    spool = Spool(tmp_path, "/g")
    spool.open()
    group = [Spooled("m:1", 1, result(i)) for i in (701, 702, 703)]
    spool.write_many(group)
    assert [p.name for p in spool.files()] == ["701-1.json"]
    spool.remove([(701, 1), (703, 1)])
    assert [p.name for p in spool.files()] == ["701-1.json"] and spool.held() == 1
    spool.close()
    again = Spool(tmp_path, "/g")
    # the removals were not made durable, and need not be: results acknowledged already are sent again
    assert again.open() == group
    again.remove([(701, 1), (702, 1), (703, 1)])
    assert again.files() == [] and again.held() == 0
    again.close()


def test_a_result_written_again_supersedes_its_earlier_copy_in_another_group(tmp_path: Path) -> None:
    spool = Spool(tmp_path, "/g")
    spool.open()
    spool.write_many([Spooled("m:1", 1, result(801)), Spooled("m:1", 1, result(802))])
    newer = Spooled("m:2", 2, result(801, state="FAILURE"))
    spool.write_many([newer])  # named after 801 too: a name still holding results is not replaced
    assert sorted(p.name for p in spool.files()) == ["801-1.1.json", "801-1.json"]
    spool.remove([(802, 1)])  # the first group holds nothing else live now: it goes
    assert [p.name for p in spool.files()] == ["801-1.1.json"]
    spool.close()
    again = Spool(tmp_path, "/g")
    assert again.open() == [newer]
    again.close()


def test_a_file_of_one_result_as_older_workers_wrote_it_is_read_and_a_newer_copy_wins(tmp_path: Path) -> None:
    spool = Spool(tmp_path, "/g")
    spool.open()
    assert spool.slot is not None
    spool.write_many([Spooled("m:1", 1, result(901)), Spooled("m:1", 1, result(902))])
    spool.close()
    newer = Spooled("m:2", 2, result(901, state="FAILURE"))
    single = spool.slot / "901-1.x.json"  # one object, not a list: a worker before group commits
    single.write_text(json.dumps({"master": "m:2", "epoch": 2, "result": codec.encode(newer.result)}))
    os.utime(single, (time.time() + 5, time.time() + 5))
    again = Spool(tmp_path, "/g")
    assert sorted((e.key, e.epoch) for e in again.open()) == [((901, 1), 2), ((902, 1), 1)]
    again.close()
