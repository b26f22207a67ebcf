"""A real worker process with real subprocesses and PostgreSQL; the test plays the master."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from engine.infra.etcd import EtcdServer
from engine.worker.reporter import RUNNING_DELAY
from registry import EtcdClient, Heartbeat, MembershipView, ServerStatus
from rpc import RpcClient
from rpc.messages import (
    DispatchReply,
    HostUpdate,
    KillReply,
    LogDownload,
    LogRange,
    LogRemove,
    LogRemoved,
    LogView,
    TaskDispatch,
    TaskDispatchBatch,
    TaskKill,
)
from tests import tls
from tests.databases import EmptyDb
from tests.helpers import TEST_SECRET, NodeProc, eventually, start_worker
from tests.worker_harness import ReportSink, dispatch, log_text, task


def _start_worker(
    node_factory: Callable[..., NodeProc], etcd: EtcdServer, root: str, tmp: Path, slots: int = 10, *extra: str
) -> NodeProc:
    return start_worker(node_factory, etcd.endpoint, root, tmp, f"worker.exec_slots={slots}", *extra)


@pytest.fixture
async def worker(node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, tmp_path: Path):
    # without the overload guard (its own test is below): a machine loaded by other work must not make this
    # worker refuse the tests' dispatches
    unguarded = "worker.max_cpu_load_avg=100000"
    return await asyncio.to_thread(_start_worker, node_factory, etcd_server, etcd_root, tmp_path, 10, unguarded)


SHELL_OUT = {
    "rawScript": "echo hello from ${who}; echo '${setValue(answer=42)}'; echo done",
    "localParams": [{"prop": "who", "value": "porpoise"}, {"prop": "answer", "direct": "OUT"}],
}


def gated(script: str, gate: Path) -> str:
    """``script`` once the file ``gate`` exists (the test decides when the task may end)."""
    return f"while [ ! -f {gate} ]; do sleep 0.02; done; {script}"


async def test_shell_success_reports_running_then_result_with_out_params(
    worker: NodeProc, sink: ReportSink, client: RpcClient, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    msg = task("SHELL", {**SHELL_OUT, "rawScript": gated(SHELL_OUT["rawScript"], gate)}, sink.address)
    assert (await dispatch(client, worker.address, msg)).accepted is True
    running = await sink.running(msg.task_instance_id)
    await asyncio.to_thread(gate.touch)
    result = await sink.result(msg.task_instance_id)
    assert running["pid"] > 0 and running["host"] == worker.address
    assert result["state"] == "SUCCESS" and result["exit_code"] == 0
    assert {"prop": "answer", "direct": "OUT", "type": "VARCHAR", "value": "42"} in result["var_pool"]
    text = await log_text(result["log_path"])
    assert "hello from porpoise" in text and "done" in text
    wid = msg.workflow_instance_id
    assert result["log_path"].endswith(f"/77/{wid // 1000}/{wid}-{msg.task_instance_id}-1.log")


async def test_a_task_that_ends_at_once_sends_only_its_result(
    worker: NodeProc, sink: ReportSink, client: RpcClient
) -> None:
    msgs = [task("SHELL", {"rawScript": "true"}, sink.address) for _ in range(5)]
    for msg in msgs:
        await dispatch(client, worker.address, msg)
    for msg in msgs:
        result = await sink.result(msg.task_instance_id)
        assert result["state"] == "SUCCESS" and result["host"] == worker.address and result["start_time"] > 0
        # the RUNNING report waits a moment (RUNNING_DELAY) from the task's start on; a result that reached
        # the sink within it (a loaded machine may take longer) replaced it: one RPC, not two
        if sink.received[(msg.task_instance_id, "result")] - result["start_time"] < RUNNING_DELAY * 1000:
            assert "running" not in await sink.rows(msg.task_instance_id), result


async def test_shell_failure(worker: NodeProc, sink: ReportSink, client: RpcClient) -> None:
    msg = task("SHELL", {"rawScript": "echo about to fail >&2; exit 3"}, sink.address)
    await dispatch(client, worker.address, msg)
    result = await sink.result(msg.task_instance_id)
    assert result["state"] == "FAILURE" and result["exit_code"] == 3
    assert "about to fail" in await log_text(result["log_path"])


async def test_python_success_and_failure(worker: NodeProc, sink: ReportSink, client: RpcClient) -> None:
    ok = task(
        "PYTHON",
        {
            "rawScript": "import sys\nprint('py', sys.version_info[0])\nprint('${setValue(n=7)}')",
            "localParams": [{"prop": "n", "direct": "OUT"}],
        },
        sink.address,
    )
    bad = task("PYTHON", {"rawScript": "raise SystemExit('boom')"}, sink.address)
    await dispatch(client, worker.address, ok)
    await dispatch(client, worker.address, bad)
    r_ok, r_bad = await sink.result(ok.task_instance_id), await sink.result(bad.task_instance_id)
    assert r_ok["state"] == "SUCCESS" and r_ok["var_pool"][0]["value"] == "7"
    assert "py 3" in await log_text(r_ok["log_path"])
    assert r_bad["state"] == "FAILURE" and r_bad["exit_code"] == 1
    assert "boom" in await log_text(r_bad["log_path"])


async def test_sql_query_non_query_and_failure(
    worker: NodeProc, sink: ReportSink, client: RpcClient, empty_db: EmptyDb
) -> None:
    source = {"warehouse": {"dsn": empty_db.owner}}  # a database of its own, where the task may create tables
    create = task(
        "SQL",
        {
            "datasource": "warehouse",
            "sqlType": "non_query",
            "sql": "CREATE TABLE trips (day text, n int);INSERT INTO trips VALUES ('$[yyyyMMdd]', 10), ('x', 5)",
        },
        sink.address,
        datasources=source,
        schedule_time="2026-03-01T00:00:00",
    )
    await dispatch(client, worker.address, create)
    assert (await sink.result(create.task_instance_id))["state"] == "SUCCESS"
    query = task(
        "SQL",
        {
            "datasource": "warehouse",
            "sql": "SELECT sum(n) AS total, count(*) AS rows FROM trips WHERE day <> '${skip}'",
            "localParams": [
                {"prop": "total", "direct": "OUT", "type": "INTEGER"},
                {"prop": "skip", "value": "none"},
            ],
            "maxRows": 10,
        },
        sink.address,
        datasources=source,
    )
    await dispatch(client, worker.address, query)
    result = await sink.result(query.task_instance_id)
    assert result["state"] == "SUCCESS"
    assert result["var_pool"] == [{"prop": "total", "direct": "OUT", "type": "INTEGER", "value": "15"}]
    text = await log_text(result["log_path"])
    assert "total\trows" in text and "15\t2" in text
    password = empty_db.owner.split("@", 1)[0].rsplit(":", 1)[-1]
    assert password not in text  # the password never reaches the log

    broken = task(
        "SQL",
        {"datasource": "warehouse", "sql": "SELECT * FROM no_such_table"},
        sink.address,
        datasources=source,
    )
    await dispatch(client, worker.address, broken)
    result = await sink.result(broken.task_instance_id)
    assert result["state"] == "FAILURE"
    assert "no_such_table" in await log_text(result["log_path"])


async def test_kill_leaves_no_process_of_the_tree_alive(worker: NodeProc, sink: ReportSink, client: RpcClient) -> None:
    script = "sleep 1000 & (sleep 1000 &) ; bash -c 'sleep 1000' & echo started; wait"
    msg = task("SHELL", {"rawScript": script}, sink.address)
    await dispatch(client, worker.address, msg)
    running = await sink.running(msg.task_instance_id)
    root = psutil.Process(running["pid"])

    def tree() -> list[psutil.Process]:
        return [root, *root.children(recursive=True)]

    procs = await eventually(lambda: len(tree()) >= 3 and tree(), 10, "the task's process tree")
    pgid_members = await eventually(
        lambda: [p for p in psutil.process_iter() if _pgid(p.pid) == running["pid"]],
        5,
        "group members",
    )
    assert any(p not in procs for p in pgid_members), "the orphaned (sleep &) should be in the group only"
    reply = await client.call(worker.address, TaskKill(msg.task_instance_id, 1))
    assert reply == KillReply(True, "KILL")
    result = await sink.result(msg.task_instance_id)
    assert result["state"] == "KILL"
    for p in {*procs, *pgid_members}:
        assert not _alive(p), f"{p} survived the kill"
    assert await client.call(worker.address, TaskKill(msg.task_instance_id, 1)) == KillReply(False, "UNKNOWN")


def _pgid(pid: int) -> int:
    import os

    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return -1


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_timeout_kills_and_fails(worker: NodeProc, sink: ReportSink, client: RpcClient) -> None:
    msg = task("SHELL", {"rawScript": "sleep 600"}, sink.address, timeout_seconds=1)
    await dispatch(client, worker.address, msg)
    running = await sink.running(msg.task_instance_id)
    result = await sink.result(msg.task_instance_id, timeout=20)
    assert result["state"] == "FAILURE" and "timed out after 1s" in result["message"]
    assert not psutil.pid_exists(running["pid"]) or not _alive(psutil.Process(running["pid"]))


async def test_dispatch_is_rejected_when_all_slots_are_busy(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    tmp_path: Path,
    sink: ReportSink,
    client: RpcClient,
) -> None:
    w = await asyncio.to_thread(_start_worker, node_factory, etcd_server, etcd_root, tmp_path, 1)
    first = task("SHELL", {"rawScript": "sleep 600"}, sink.address)
    assert (await dispatch(client, w.address, first)).accepted is True
    assert (await dispatch(client, w.address, first)).accepted is True  # same attempt again: idempotent
    second = task("SHELL", {"rawScript": "true"}, sink.address)
    reply = await dispatch(client, w.address, second)
    incarnation = reply.incarnation
    assert reply == DispatchReply(False, "all 1 exec slots are busy", free_slots=0, incarnation=incarnation)
    await client.call(w.address, TaskKill(first.task_instance_id, 1))
    await sink.result(first.task_instance_id)
    again = DispatchReply(True, "", free_slots=0, incarnation=incarnation)
    assert await dispatch(client, w.address, second) == again
    assert (await sink.result(second.task_instance_id))["state"] == "SUCCESS"


async def test_a_worker_with_every_slot_taken_says_busy_in_its_heartbeat(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    tmp_path: Path,
    sink: ReportSink,
    client: RpcClient,
    etcd: EtcdClient,
) -> None:
    unguarded = "worker.max_cpu_load_avg=100000"  # BUSY here must come from the slots, not the machine's load
    w = await asyncio.to_thread(_start_worker, node_factory, etcd_server, etcd_root, tmp_path, 1, unguarded)
    view = MembershipView(etcd, etcd_root)
    await view.start()
    try:

        def heartbeat() -> Heartbeat:
            return next(n.heartbeat for n in view.workers() if n.node.address == w.address)

        await eventually(view.workers, 10, "the worker registered")
        assert heartbeat().status == ServerStatus.NORMAL
        first = task("SHELL", {"rawScript": "sleep 600"}, sink.address)
        assert (await dispatch(client, w.address, first)).accepted is True
        await sink.running(first.task_instance_id)
        await eventually(lambda: heartbeat().status == ServerStatus.BUSY, 20, "the heartbeat to say BUSY")
        hb = heartbeat()
        assert (hb.running_tasks, hb.waiting_tasks, hb.exec_slots) == (1, 0, 1)  # its process started: not waiting
        await client.call(w.address, TaskKill(first.task_instance_id, 1))
        await sink.result(first.task_instance_id)
        await eventually(lambda: heartbeat().status == ServerStatus.NORMAL, 20, "the heartbeat NORMAL again")
    finally:
        await view.close()


async def test_a_dispatch_reply_names_the_incarnation_that_took_it(
    worker: NodeProc, sink: ReportSink, client: RpcClient, etcd: EtcdClient, etcd_root: str
) -> None:
    view = MembershipView(etcd, etcd_root)
    await view.start()
    try:
        (registered,) = await eventually(view.workers, 10, "the worker registered")
    finally:
        await view.close()
    msg = task("SHELL", {"rawScript": "true"}, sink.address)
    reply = await dispatch(client, worker.address, msg)
    # the create revision of its registry key: a master fails the attempt only when that key is lost
    assert reply.accepted is True and reply.incarnation == registered.create_revision > 0, reply
    batch = await client.call(worker.address, TaskDispatchBatch([task("SHELL", {"rawScript": "true"}, sink.address)]))
    assert [r.incarnation for r in batch.replies] == [registered.create_revision], batch


async def test_an_attempt_dispatched_again_after_it_finished_is_acknowledged_not_run_again(
    worker: NodeProc, sink: ReportSink, client: RpcClient, tmp_path: Path
) -> None:
    """A master whose dispatch reply was lost asks again with the same dispatch: the worker must say the
    attempt is (or was) here — also to a copy past its sender's lease validity — and never run it twice."""
    ledger = tmp_path / "ledger"
    msg = task("SHELL", {"rawScript": f"echo ran >> {ledger}"}, sink.address)
    assert (await dispatch(client, worker.address, msg)).accepted is True
    assert (await sink.result(msg.task_instance_id))["state"] == "SUCCESS"  # reported and acknowledged
    again = await dispatch(client, worker.address, msg)
    assert again.accepted is True and again.reason == "already finished (SUCCESS)"
    late = dataclasses.replace(msg, valid_until_ms=int(time.time() * 1000) - 1)
    batch = await client.call(worker.address, TaskDispatchBatch([late]))
    assert [(r.accepted, r.reason) for r in batch.replies] == [(True, "already finished (SUCCESS)")]
    # a new attempt of the same task instance is a new dispatch: it runs
    retry = dataclasses.replace(msg, attempt=2)
    reply = await dispatch(client, worker.address, retry)
    assert reply == DispatchReply(True, "", free_slots=9, incarnation=reply.incarnation)

    async def finished() -> bool:
        reply = await dispatch(client, worker.address, retry)
        return bool(reply.accepted and reply.reason == "already finished (SUCCESS)")

    await eventually(finished, 30, "the second attempt finished")
    assert ledger.read_text().splitlines() == ["ran", "ran"]  # attempts 1 and 2, each once


async def test_a_saturated_worker_holds_its_concurrency_and_takes_work_once_the_cpus_have_room(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, tmp_path: Path,
    sink: ReportSink, client: RpcClient,
) -> None:  # fmt: skip
    # a load limit any loaded machine passes; the 1-minute average then stays over it for minutes
    # after the load is gone, and the worker must not go on refusing with idle cpus
    w = await asyncio.to_thread(
        _start_worker, node_factory, etcd_server, etcd_root, tmp_path, 40, "worker.max_cpu_load_avg=0.01"
    )

    async def accepted(msg: TaskDispatch) -> bool:
        return bool((await dispatch(client, w.address, msg)).accepted)

    async def refused() -> str | None:
        reply = await dispatch(client, w.address, task("SHELL", {"rawScript": "true"}, sink.address))
        return None if reply.accepted else reply.reason

    def long() -> TaskDispatch:
        return task("SHELL", {"rawScript": "sleep 600"}, sink.address)

    longs = [long(), long()]
    for msg in longs:
        await eventually(lambda m=msg: accepted(m), 10, "a task accepted on a calm machine")
    hogs = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", "while True: pass")
        for _ in range((os.cpu_count() or 1) + 1)
    ]
    try:
        # probed with tasks that keep running: the concurrency held is then exactly the tasks
        # admitted when saturation was seen (a short probe could still be counted, or not)
        async def refused_long() -> str | None:
            msg = long()
            reply = await dispatch(client, w.address, msg)
            if reply.accepted:
                longs.append(msg)
                return None
            return reply.reason

        reason = await eventually(refused_long, 30, "a refusal while the cpus are saturated", interval=0.75)
        held = len(longs)
        assert "load average" in reason and "busy" in reason and f"holding at {held} running tasks" in reason
        # a finishing task's slot is refilled (the cpus it frees are not left idle), no slot is added
        await client.call(w.address, TaskKill(longs[0].task_instance_id, 1))
        await sink.result(longs[0].task_instance_id)
        refill = long()
        await eventually(lambda: accepted(refill), 10, "the freed slot refilled")
        longs.append(refill)
        assert f"holding at {held} running tasks" in (await refused() or "")
    finally:
        for hog in hogs:
            hog.kill()
            await hog.wait()
    assert os.getloadavg()[0] > 0.01  # the average still says loaded ...
    msg = task("SHELL", {"rawScript": "true"}, sink.address)
    await eventually(lambda: accepted(msg), 10, "the worker taking work again")  # ... the cpus have room
    assert (await sink.result(msg.task_instance_id))["state"] == "SUCCESS"
    for running in longs[1:]:
        await client.call(w.address, TaskKill(running.task_instance_id, 1))


async def test_a_batch_sent_after_the_master_s_lease_may_have_expired_starts_nothing(
    worker: NodeProc, sink: ReportSink, client: RpcClient
) -> None:
    late = [task("SHELL", {"rawScript": "true"}, sink.address, valid_until_ms=int(time.time() * 1000) + 60_000)]
    late.append(task("SHELL", {"rawScript": "true"}, sink.address))
    # the batch's validity replaces the tasks' own: both are refused, although one says it is valid
    reply = await client.call(worker.address, TaskDispatchBatch(late, valid_until_ms=1))
    assert [r.accepted for r in reply.replies] == [False, False]
    assert all("lease may have expired" in r.reason for r in reply.replies)
    fresh = TaskDispatchBatch(late, valid_until_ms=int(time.time() * 1000) + 60_000)
    assert [r.accepted for r in (await client.call(worker.address, fresh)).replies] == [True, True]
    for msg in late:
        assert (await sink.result(msg.task_instance_id))["state"] == "SUCCESS"


async def test_log_paging_returns_exactly_the_requested_lines_while_the_task_writes(
    worker: NodeProc, sink: ReportSink, client: RpcClient
) -> None:
    msg = task("SHELL", {"rawScript": "for i in $(seq 1 60); do echo line-$i; sleep 0.03; done"}, sink.address)
    await dispatch(client, worker.address, msg)
    path = (await sink.running(msg.task_instance_id))["log_path"]
    collected: list[str] = []
    skip, pages_while_running = 0, 0
    while True:
        page = await client.call(worker.address, LogRange(path, skip, 7))
        assert len(page.lines) <= 7 and page.next == skip + len(page.lines)
        collected += page.lines
        skip = page.next
        if page.complete and not page.lines:
            break
        if not page.complete:
            pages_while_running += 1
        await asyncio.sleep(0.02)
    body = [line for line in collected if line.startswith("line-")]
    assert body == [f"line-{i}" for i in range(1, 61)]
    assert pages_while_running > 1, "paging should have happened while the task was still writing"
    whole = await log_text(path)
    assert collected == whole.splitlines()
    tail = await client.call(worker.address, LogView(path, 3))
    assert tail.lines == whole.splitlines()[-3:] and tail.complete is True


async def test_log_download_remove_and_path_safety(worker: NodeProc, sink: ReportSink, client: RpcClient) -> None:
    msg = task("SHELL", {"rawScript": "echo downloadable"}, sink.address)
    await dispatch(client, worker.address, msg)
    path = (await sink.result(msg.task_instance_id))["log_path"]
    body = json.dumps({"path": path, "v": 1}).encode()
    raw = await client.call_raw(worker.address, LogDownload.METHOD, body)
    assert b"downloadable" in raw and raw == await asyncio.to_thread(Path(path).read_bytes)
    # a log past the size read in one trip is streamed: the same bytes either way
    big = task("SHELL", {"rawScript": "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 600000; echo"}, sink.address)
    await dispatch(client, worker.address, big)
    big_path = (await sink.result(big.task_instance_id))["log_path"]
    big_body = json.dumps({"path": big_path, "v": 1}).encode()
    streamed = await client.call_raw(worker.address, LogDownload.METHOD, big_body)
    assert len(streamed) > 600_000 and streamed == await asyncio.to_thread(Path(big_path).read_bytes)
    from rpc.errors import BadRequest

    for bad in ("/etc/passwd", path + "/../../../../etc/passwd", "../../x.log"):
        with pytest.raises(BadRequest, match="not a task log"):
            await client.call(worker.address, LogView(bad, 5))
    assert await client.call(worker.address, LogRemove(path)) == LogRemoved(True)
    assert not await asyncio.to_thread(Path(path).exists)
    with pytest.raises(BadRequest, match="does not exist"):
        await client.call(worker.address, LogView(path, 5))
    with pytest.raises(BadRequest, match="does not exist") as gone:
        await client.call_raw(worker.address, LogDownload.METHOD, body)
    assert gone.value.status == 404  # the archiver marks such a log MISSING
    await asyncio.to_thread(os.mkfifo, path)  # not a log: refused at once, no thread held opening it
    with pytest.raises(BadRequest, match="does not exist") as fifo:
        await client.call_raw(worker.address, LogDownload.METHOD, body, timeout=10)
    assert fifo.value.status == 404


async def test_placeholders_resolve_against_the_schedule_time(
    worker: NodeProc, sink: ReportSink, client: RpcClient
) -> None:
    script = (
        "echo biz=${system.biz.date} cur=$[yyyy-MM-dd] prev=$[yyyyMMdd-1] month=$[add_months(yyyyMM,-1)] g=${g} v=${up}"
    )
    msg = task(
        "SHELL",
        {"rawScript": script},
        sink.address,
        schedule_time="2026-03-01T10:00:00",
        global_params=[{"prop": "g", "value": "$[yyyyMMdd]"}],
        var_pool=[{"prop": "up", "direct": "IN", "value": "from-upstream"}],
    )
    await dispatch(client, worker.address, msg)
    text = await log_text((await sink.result(msg.task_instance_id))["log_path"])
    assert "biz=20260228 cur=2026-03-01 prev=20260228 month=202602 g=20260301 v=from-upstream" in text


async def test_bash_arithmetic_runs_and_a_bad_time_placeholder_refuses_the_attempt(
    worker: NodeProc, sink: ReportSink, client: RpcClient
) -> None:
    ok = task(
        "SHELL", {"rawScript": "echo sum=$[3+4] day=$[yyyyMMdd]"}, sink.address, schedule_time="2026-03-01T10:00:00"
    )
    # an upstream value brings a bad expression into the script: the attempt is refused, nothing runs
    bad = task(
        "SHELL",
        {"rawScript": "echo ran ${v}"},
        sink.address,
        var_pool=[{"prop": "v", "direct": "IN", "value": "$[i+1]"}],
    )
    await dispatch(client, worker.address, ok)
    await dispatch(client, worker.address, bad)
    text = await log_text((await sink.result(ok.task_instance_id))["log_path"])
    assert "sum=7 day=20260301" in text  # bash computed $[3+4]: Porpoise left it alone
    result = await sink.result(bad.task_instance_id)
    assert result["state"] == "FAILURE" and "bad time placeholder $[i+1]" in result["message"]
    text = await log_text(result["log_path"])
    assert "refused: bad time placeholder $[i+1]: pattern letter 'i' is not supported" in text and "ran" not in text


async def test_unknown_task_type_and_bad_params_fail_the_attempt_cleanly(
    worker: NodeProc, sink: ReportSink, client: RpcClient
) -> None:
    unknown = task("TELEPORT", {}, sink.address)
    bad = task("SHELL", {"rawScript": ""}, sink.address)
    await dispatch(client, worker.address, unknown)
    await dispatch(client, worker.address, bad)
    r1, r2 = await sink.result(unknown.task_instance_id), await sink.result(bad.task_instance_id)
    assert r1["state"] == "FAILURE" and "unknown task type 'TELEPORT'" in r1["message"]
    assert r2["state"] == "FAILURE" and r2["message"].startswith("rawScript:")
    assert worker.healthy()


async def test_reports_are_retried_across_a_master_restart_and_delivered_once(
    worker: NodeProc, sink_db: str, client: RpcClient, tmp_path: Path
) -> None:
    sink = await ReportSink(sink_db).start()
    gate = tmp_path / "gate"
    try:
        msg = task("SHELL", {"rawScript": gated("echo finished", gate)}, sink.address)
        await dispatch(client, worker.address, msg)
        await sink.running(msg.task_instance_id)
        await sink.stop()  # the master dies while the task runs
        await asyncio.to_thread(gate.touch)  # the task ends while no master listens: its result must wait
        await eventually(lambda: worker.health()[1]["pending_reports"] >= 1, 15, "the result waiting for a master")
        sink.fail_next = 2  # the restarted master first fails to persist twice
        await sink.start()
        result = await sink.result(msg.task_instance_id)
        assert result["state"] == "SUCCESS"
        await eventually(lambda: worker.health()[1]["pending_reports"] == 0, 15, "reports acknowledged")
        assert sink.calls >= 3  # two refused deliveries, then the persisted one
        assert (
            len(
                await sink.pool.fetch(
                    "SELECT 1 FROM reports WHERE task_instance_id = $1 AND kind = 'result'",
                    msg.task_instance_id,
                )
            )
            == 1
        )
    finally:
        await sink.close()


async def test_host_update_sends_reports_to_the_new_owner(
    worker: NodeProc, sink_db: str, client: RpcClient, tmp_path: Path
) -> None:
    old, new = await ReportSink(sink_db).start(), await ReportSink(sink_db).start()
    gate = tmp_path / "gate"
    try:
        msg = task("SHELL", {"rawScript": gated("echo ok", gate)}, old.address)
        await dispatch(client, worker.address, msg)
        await old.running(msg.task_instance_id)
        await old.stop()  # the old owner is dead
        await client.call(worker.address, HostUpdate(msg.workflow_instance_id, new.address))
        await asyncio.to_thread(gate.touch)  # the task ends after its instance moved
        result = await new.result(msg.task_instance_id)
        assert result["state"] == "SUCCESS"
    finally:
        await old.close()
        await new.close()


async def test_malformed_and_unauthenticated_calls_are_refused_and_change_nothing(
    worker: NodeProc, sink: ReportSink, tmp_path: Path
) -> None:
    import aiohttp

    from rpc import auth

    url = f"{worker.url}/rpc/task.dispatch"
    good = json.dumps(
        {
            "v": 1,
            **task("SHELL", {"rawScript": "touch /tmp/should-not-exist-" + uuid.uuid4().hex}, sink.address).__dict__,
        }
    ).encode()

    def signed(
        body: bytes, method: str = "task.dispatch", secret: str = TEST_SECRET, now: float | None = None
    ) -> dict[str, str]:
        return {auth.HEADER: auth.sign(secret, method, body, now)}

    cases = [
        (url, good, {}, 401, "missing X-Porpoise-Signature"),
        (url, good, signed(good, secret="wrong"), 401, "bad signature"),
        (url, good, signed(good, now=1_000_000), 401, "expired"),
        (url, good, signed(b"other body"), 401, "bad signature"),
        (url, b"{not json", signed(b"{not json"), 400, "not valid JSON"),
        (url, b"[1, 2]", signed(b"[1, 2]"), 400, "must be a JSON object"),
        (url, b'{"v": 1}', signed(b'{"v": 1}'), 400, "TaskDispatch.task_instance_id: required field missing"),
        (
            url,
            good.replace(b'"attempt": 1', b'"attempt": "one"'),
            signed(good.replace(b'"attempt": 1', b'"attempt": "one"')),
            400,
            "TaskDispatch.attempt: expected an integer",
        ),
        (
            url,
            good.replace(b'"v": 1', b'"v": 99'),
            signed(good.replace(b'"v": 1', b'"v": 99')),
            400,
            "unsupported message version 99",
        ),
        (
            url.replace("task.dispatch", "task.nope"),
            b"{}",
            signed(b"{}", "task.nope"),
            404,
            "unknown RPC method",
        ),
    ]
    big = b'{"v": 1, "pad": "' + b"x" * (9 * 1024 * 1024) + b'"}'
    cases.append((url, big, signed(big), 413, "exceeds"))
    async with aiohttp.ClientSession(connector=tls.connector(client_cert=True)) as http:
        for target, body, headers, status, message in cases:
            data = io.BytesIO(body) if len(body) > 1 << 20 else body
            async with http.post(target, data=data, headers=headers) as resp:
                text = await resp.text()
                assert resp.status == status, (message, resp.status, text)
                assert message in json.loads(text)["error"], text
                assert "Traceback" not in text
    health = worker.health()[1]
    assert health["running"] == 0 and health["pending_reports"] == 0
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").rglob("*.log"))


async def test_tasks_run_as_the_tenant_os_user(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    workdir: Path,
    sink: ReportSink,
    client: RpcClient,
) -> None:
    # exec dirs must be reachable by the tenant: use the world-traversable session workdir
    base = workdir / f"tenant-{uuid.uuid4().hex[:6]}"
    w = await asyncio.to_thread(_start_worker, node_factory, etcd_server, etcd_root, base)
    msg = task(
        "SHELL", {"rawScript": "id -un; touch made-by-tenant; stat -c %U made-by-tenant"}, sink.address, tenant="nobody"
    )
    await dispatch(client, w.address, msg)
    result = await sink.result(msg.task_instance_id)
    text = await log_text(result["log_path"])
    assert result["state"] == "SUCCESS", text
    assert text.count("nobody") >= 2
    missing = task("SHELL", {"rawScript": "true"}, sink.address, tenant="no-such-user-xyz")
    await dispatch(client, w.address, missing)
    result = await sink.result(missing.task_instance_id)
    assert result["state"] == "FAILURE" and "OS user 'no-such-user-xyz' does not exist" in result["message"]


async def test_graceful_shutdown_drains_then_kills_and_reports_the_rest_lost(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    tmp_path: Path,
    sink: ReportSink,
    client: RpcClient,
) -> None:
    def start() -> NodeProc:
        return node_factory(
            "worker", etcd_server.endpoint, etcd_root, 3,
            [f"worker.log_dir={tmp_path / 'logs'}", f"worker.exec_dir={tmp_path / 'exec'}",
             f"worker.spool_dir={tmp_path / 'spool'}", "worker.drain_timeout=3"],
        )  # fmt: skip

    w = await asyncio.to_thread(start)
    gate = tmp_path / "gate"
    quick = task("SHELL", {"rawScript": gated("echo finished", gate)}, sink.address)
    slow = task("SHELL", {"rawScript": "sleep 600"}, sink.address)
    await dispatch(client, w.address, quick)
    await dispatch(client, w.address, slow)
    await sink.running(quick.task_instance_id)
    await sink.running(slow.task_instance_id)
    assert w.proc.record is not None
    w.proc.record.signal(15)  # SIGTERM: both still run
    await eventually(lambda: w.health()[1]["draining"] == "shutting down", 10, "the worker draining")
    late = await dispatch(client, w.address, task("SHELL", {"rawScript": "true"}, sink.address))
    assert late.accepted is False and late.reason == "worker is draining (shutting down): it takes no new tasks"
    await asyncio.to_thread(gate.touch)  # the quick one ends within the drain
    code = await asyncio.to_thread(lambda: wait_exit(w))
    assert code == 0
    assert (await sink.result(quick.task_instance_id, timeout=1))["state"] == "SUCCESS"  # finished within the drain
    slow_result = await sink.result(slow.task_instance_id, timeout=1)  # killed after it, reported, not a failure
    assert slow_result["state"] == "LOST" and slow_result["message"] == "killed: the worker stopped (drain timeout 3s)"


def wait_exit(node: NodeProc) -> int | None:
    from tests.helpers import wait_sync

    wait_sync(lambda: node.proc.exited() is not None, 20, "worker exit")
    return node.proc.exited()
