"""Master and worker failover with real processes killed by SIGKILL: nothing lost, nothing run twice.

Each task appends "<task> <attempt pid> start|end" to a ledger file, so the tests see every process a
task really ran in, not just what the database says.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.infra.etcd import EtcdServer
from engine.node import EXIT_LEASE_LOST
from engine.states import TaskState
from engine.workflows.model import TaskDef
from registry import EtcdClient
from rpc.messages import HostUpdate, HostUpdateReply, KillReply, TaskDispatch, TaskKill
from tests.cluster_harness import command, instance_for, query, save, shell, started, started_unguarded, tasks_of
from tests.delay_proxy import DelayProxy
from tests.helpers import NodeProc, eventually, rpc_client
from tests.task_watch import WATCH_PREAMBLE, TaskWatcher
from tests.worker_harness import ReportSink, dispatch, task

pytestmark = pytest.mark.slow

SUCCESS, NEED_FAULT_TOLERANCE, RUNNING = 7, 8, 1
TTL = 2.0


def ledgered(name: str, ledger: Path, body: str, upstream: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    return shell(name, f"echo {name} $$ start >> {ledger}; {body}; echo {name} $$ end >> {ledger}", upstream)


def runs(ledger: Path, task: str) -> list[str]:
    if not ledger.exists():
        return []
    return [line for line in ledger.read_text().splitlines() if line.startswith(f"{task} ") and line.endswith("start")]


async def running_task(dsn: str, instance_id: int, name: str) -> dict:  # type: ignore[type-arg]
    async def get():  # type: ignore[no-untyped-def]
        rows = await tasks_of(dsn, instance_id)
        hit = [r for r in rows if r["name"] == name and r["state"] == RUNNING and r["flag"] == 1]
        return dict(hit[0]) if hit else None

    return await eventually(get, 30, f"{name} running")  # type: ignore[no-any-return]


def gated(ledger: Path, gate: Path, follow_up: bool = True) -> list:  # type: ignore[type-arg]
    """``long`` runs until the gate file exists; ``after`` (optional) follows it."""
    tasks = [ledgered("long", ledger, f"while [ ! -f {gate} ]; do sleep 0.05; done")]
    if follow_up:
        tasks.append(ledgered("after", ledger, "true", ("long",)))
    return tasks


async def start_gated(dsn: str, name: str, ledger: Path, gate: Path, follow_up: bool = True):  # type: ignore[no-untyped-def]
    """Save and start a gated workflow; returns (command id, instance row) once ``long`` is running."""
    (cmd,) = await command(dsn, await save(dsn, name, gated(ledger, gate, follow_up)))
    wi = await instance_for(dsn, cmd, final=False)
    await running_task(dsn, wi["id"], "long")
    return cmd, wi


async def start_victim(dsn: str, name: str, ledger: Path, marker: Path):  # type: ignore[no-untyped-def]
    """``victim`` (then ``next``): its first attempt blocks, any later one finishes at once. Returns (command
    id, instance row, the first attempt's row) once the first attempt runs."""
    body = f"if [ -f {marker} ]; then exit 0; fi; touch {marker}; sleep 120"
    code = await save(dsn, name, [ledgered("victim", ledger, body), ledgered("next", ledger, "true", ("victim",))])
    (cmd,) = await command(dsn, code)
    wi = await instance_for(dsn, cmd, final=False)
    return cmd, wi, await running_task(dsn, wi["id"], "victim")


def kill(node: NodeProc) -> None:
    assert node.proc.record is not None
    node.proc.record.signal(signal.SIGKILL)


async def test_a_killed_master_is_failed_over_and_its_running_task_is_adopted_not_rerun(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    masters, _ = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=2, workers=1, ttl=TTL)
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    cmd, wi = await start_gated(fresh_db, "adopt", ledger, gate)
    owner = next(m for m in masters if m.address == wi["host"])
    survivor = next(m for m in masters if m is not owner)
    kill(owner)

    async def moved() -> bool:
        row = (await query(fresh_db, "SELECT host, epoch FROM workflow_instance WHERE id = $1", wi["id"]))[0]
        return row["host"] == survivor.address and row["epoch"] > wi["epoch"]

    await eventually(moved, TTL + 10, "instance owned by the surviving master")
    gate.touch()  # the adopted task finishes now and reports to its new owner
    final = await instance_for(fresh_db, cmd)
    assert final["state"] == SUCCESS and final["host"] == survivor.address and final["recovery"] == 1
    rows = await tasks_of(fresh_db, wi["id"])
    assert sorted((r["name"], r["attempt"], r["state"]) for r in rows) == [("after", 1, SUCCESS), ("long", 1, SUCCESS)]
    assert len(runs(ledger, "long")) == 1, "the task on the live worker must not run again"
    alerts = await query(
        fresh_db, "SELECT content FROM alert WHERE alert_type = 4 AND workflow_instance_id = $1", wi["id"]
    )
    assert alerts and owner.address in alerts[0]["content"]


async def test_a_killed_worker_s_task_runs_again_on_another_worker_once(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path,
    etcd: EtcdClient,
) -> None:  # fmt: skip
    _, workers = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=2, workers=2, ttl=TTL)
    ledger, marker = tmp_path / "ledger", tmp_path / "first-started"
    watcher = TaskWatcher().start()  # when each attempt's process really started and died, seen from outside
    try:
        # the first attempt blocks; any later attempt finishes at once
        body = WATCH_PREAMBLE % {"port": watcher.port, "label": "victim"}
        body += f"if [ -f {marker} ]; then exit 0; fi; touch {marker}; sleep 120"
        code = await save(
            fresh_db, "rerun", [ledgered("victim", ledger, body), ledgered("next", ledger, "true", ("victim",))]
        )
        (cmd,) = await command(fresh_db, code)
        wi = await instance_for(fresh_db, cmd, final=False)
        first = await running_task(fresh_db, wi["id"], "victim")
        dead = next(w for w in workers if w.address == first["host"])
        key = f"{etcd_root}/nodes/worker/default/{dead.address}"
        registered = time.time()
        assert await etcd.get(key) is not None
        kill(dead)
        lease_alive_at = await _last_seen(etcd, key, TTL + 10, registered)
        final = await instance_for(fresh_db, cmd, timeout=TTL + 30)
        assert final["state"] == SUCCESS
        rows = [r for r in await tasks_of(fresh_db, wi["id"]) if r["name"] == "victim"]
        assert [(r["attempt"], r["state"], r["flag"]) for r in rows] == [(1, NEED_FAULT_TOLERANCE, 0), (2, SUCCESS, 1)]
        assert rows[1]["host"] != dead.address
        assert len(runs(ledger, "victim")) == 2 and len(runs(ledger, "next")) == 1
        # invariant 3: the new attempt's process started only once the old one was gone (watched), and not
        # before the dead worker's lease could have expired (its key was still there at lease_alive_at)
        old, new = watcher.life("victim")
        assert old.died is not None and new.started > old.died, (old, new)
        assert new.started > lease_alive_at, (new, lease_alive_at)
    finally:
        watcher.close()


async def _last_seen(etcd: EtcdClient, key: str, timeout: float, seen: float) -> float:
    """Wait for ``key`` to go (its lease expired); the last ``time.time()`` at which it certainly existed
    (taken before a read that found it; ``seen`` at first), a lower bound of the lease's expiry."""

    async def gone() -> bool:
        nonlocal seen
        before = time.time()
        if await etcd.get(key) is not None:
            seen = before
            return False
        return True

    await eventually(gone, timeout, f"{key} gone with its lease")
    return seen


async def test_a_master_restarted_at_the_same_address_takes_back_its_earlier_instances(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    """The only master dies and comes back on the same host:port before anyone else is alive: its new
    incarnation's epoch floor marks the old instances as orphans, and its own sweep takes them back."""
    (master,), _ = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=1, workers=1, ttl=TTL)
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    cmd, wi = await start_gated(fresh_db, "comeback", ledger, gate, follow_up=False)
    kill(master)
    master.proc.popen.wait()  # type: ignore[union-attr]
    again = node_factory(
        "master", etcd_server.endpoint, etcd_root, TTL, port=master.port, PORPOISE_DATABASE_DSN=fresh_db
    )
    assert again.address == master.address

    async def retaken() -> bool:
        row = (await query(fresh_db, "SELECT epoch FROM workflow_instance WHERE id = $1", wi["id"]))[0]
        return row["epoch"] > wi["epoch"]

    await eventually(retaken, TTL + 15, "instance taken back by the new incarnation")
    gate.touch()
    final = await instance_for(fresh_db, cmd)
    assert final["state"] == SUCCESS
    assert len(runs(ledger, "long")) == 1


async def test_an_instance_its_live_master_owns_without_an_actor_is_taken_back(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    """A takeover's (or a claim's) commit landed while the master saw it fail: the instance is the live
    master's at an epoch no actor of it holds. Here the epoch moves under a running actor, which is fenced
    out on its next write: the master's sweep takes the instance back, and the adopted task is not rerun."""
    (master,), _ = await started_unguarded(node_factory, etcd_server, etcd_root, fresh_db, 1, 1, TTL)
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    cmd, wi = await start_gated(fresh_db, "undriven", ledger, gate)
    await query(fresh_db, "UPDATE workflow_instance SET epoch = nextval('workflow_epoch_seq') WHERE id = $1", wi["id"])
    gate.touch()  # the result's write is fenced out: the actor ends, the instance is ours with no actor
    final = await instance_for(fresh_db, cmd, timeout=60)
    assert final["state"] == SUCCESS and final["host"] == master.address
    assert len(runs(ledger, "long")) == 1 and len(runs(ledger, "after")) == 1


async def test_a_worker_refuses_dispatches_from_an_owner_older_than_one_it_knows(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str
) -> None:
    worker = node_factory("worker", etcd_server.endpoint, etcd_root, 3, PORPOISE_DATABASE_DSN=fresh_db)
    client = rpc_client()
    try:
        reply = await client.call(worker.address, HostUpdate(424242, "127.0.0.1:1", epoch=10))
        assert reply == HostUpdateReply(known=[])
        stale = TaskDispatch(
            task_instance_id=1, attempt=1, workflow_instance_id=424242, workflow_definition_code=1, task_code=1,
            task_name="t", task_type="SHELL", task_params={"rawScript": "true"}, master="127.0.0.1:2", epoch=9,
        )  # fmt: skip
        answer = await client.call(worker.address, stale)
        assert answer.accepted is False and "stale owner" in answer.reason
    finally:
        await client.close()


async def test_a_paused_master_wakes_after_failover_writes_nothing_and_exits(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    masters, _ = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=2, workers=1, ttl=TTL)
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    cmd, wi = await start_gated(fresh_db, "paused", ledger, gate)
    owner = next(m for m in masters if m.address == wi["host"])
    survivor = next(m for m in masters if m is not owner)
    assert owner.proc.record is not None
    owner.proc.record.signal(signal.SIGSTOP)
    try:

        async def moved() -> bool:
            row = (await query(fresh_db, "SELECT host FROM workflow_instance WHERE id = $1", wi["id"]))[0]
            return row["host"] == survivor.address

        await eventually(moved, TTL + 10, "instance taken over from the paused master")
        gate.touch()
        final = await instance_for(fresh_db, cmd)
    finally:
        owner.proc.record.signal(signal.SIGCONT)
    # the woken master finds its lease gone and exits (registry.on_lost = exit) without touching anything
    assert owner.proc.popen is not None
    assert await asyncio.to_thread(owner.proc.popen.wait, 30) == EXIT_LEASE_LOST
    assert final["state"] == SUCCESS and final["host"] == survivor.address
    after = (await query(fresh_db, "SELECT host, state, epoch FROM workflow_instance WHERE id = $1", wi["id"]))[0]
    assert (after["host"], after["state"], after["epoch"]) == (survivor.address, SUCCESS, final["epoch"])
    rows = await tasks_of(fresh_db, wi["id"])
    assert sorted((r["name"], r["attempt"]) for r in rows) == [("after", 1), ("long", 1)]
    assert len(runs(ledger, "long")) == 1 and len(runs(ledger, "after")) == 1


async def test_when_every_master_died_a_new_master_takes_their_instances_at_start(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    """No live master saw the others die (there was none): the newcomer's first sweep finds the orphans."""
    masters, _ = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=2, workers=1, ttl=TTL)
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    commands = await command(fresh_db, await save(fresh_db, "all_down", gated(ledger, gate)), 4)
    for cmd in commands:
        await instance_for(fresh_db, cmd, final=False)
    for m in masters:
        kill(m)
    newcomer = await asyncio.to_thread(
        node_factory, "master", etcd_server.endpoint, etcd_root, TTL, PORPOISE_DATABASE_DSN=fresh_db
    )
    gate.touch()
    finals = [await instance_for(fresh_db, cmd, timeout=TTL + 30) for cmd in commands]
    assert all(f["state"] == SUCCESS and f["host"] == newcomer.address for f in finals)
    assert len(runs(ledger, "long")) == 4 and len(runs(ledger, "after")) == 4


async def test_a_worker_refuses_kills_from_an_older_owner(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, sink: ReportSink, tmp_path: Path
) -> None:
    worker = node_factory(
        "worker", etcd_server.endpoint, etcd_root, 3,
        overrides=[f"worker.log_dir={tmp_path / 'logs'}", f"worker.exec_dir={tmp_path / 'exec'}"],
    )  # fmt: skip
    client = rpc_client()
    try:
        msg = task("SHELL", {"rawScript": "sleep 1000"}, sink.address)
        msg = dataclasses.replace(msg, epoch=5)
        await dispatch(client, worker.address, msg)
        await sink.running(msg.task_instance_id)
        # the instance moved to a new owner (epoch 6); the old owner's kill must not land
        await client.call(worker.address, HostUpdate(msg.workflow_instance_id, sink.address, epoch=6))
        stale = await client.call(worker.address, TaskKill(msg.task_instance_id, 1, epoch=5))
        assert stale == KillReply(False, "STALE")
        late = await client.call(worker.address, TaskKill(msg.task_instance_id, 1, epoch=6, valid_until_ms=1))
        assert late == KillReply(False, "STALE")
        assert await client.call(worker.address, TaskKill(msg.task_instance_id, 1, epoch=6)) == KillReply(True, "KILL")
    finally:
        await client.close()


async def test_an_attempt_dispatched_but_not_yet_recorded_is_adopted_not_rerun(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    """The dead master sent the dispatch and died before it recorded where: the row says SUBMITTED with no
    host, yet the task runs on a live worker. The new owner asks the live workers instead of re-running."""
    (master,), _ = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=1, workers=1, ttl=TTL)
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    cmd, wi = await start_gated(fresh_db, "unrecorded", ledger, gate)
    kill(master)
    await query(
        fresh_db,
        f"UPDATE task_instance SET state = {int(TaskState.SUBMITTED_SUCCESS)}, host = NULL"
        " WHERE workflow_instance_id = $1 AND name = 'long'",
        wi["id"],
    )
    newcomer = await asyncio.to_thread(
        node_factory, "master", etcd_server.endpoint, etcd_root, TTL, PORPOISE_DATABASE_DSN=fresh_db
    )
    await eventually(
        lambda: query(fresh_db, "SELECT 1 FROM workflow_instance WHERE id = $1 AND host = $2", wi["id"],
                      newcomer.address),
        TTL + 15, "instance taken over",
    )  # fmt: skip
    gate.touch()
    final = await instance_for(fresh_db, cmd, timeout=30)
    assert final["state"] == SUCCESS
    assert len(runs(ledger, "long")) == 1, "the unrecorded attempt must be adopted, not run again"
    assert len(runs(ledger, "after")) == 1


async def test_a_sub_workflow_parent_survives_its_master_without_a_second_child(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    masters, _ = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=2, workers=1, ttl=TTL)
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    await save(fresh_db, "child", gated(ledger, gate, follow_up=False))
    parent = await save(
        fresh_db,
        "parent",
        [TaskDef("sub", "SUB_PROCESS", {"workflow": "child"}), ledgered("after", ledger, "true", ("sub",))],
    )
    (cmd,) = await command(fresh_db, parent)
    wi = await instance_for(fresh_db, cmd, final=False)

    async def child_running() -> int | None:
        rows = await query(
            fresh_db,
            "SELECT workflow_instance_id FROM sub_workflow_relation WHERE parent_workflow_instance_id = $1",
            wi["id"],
        )
        if rows and rows[0]["workflow_instance_id"]:
            await running_task(fresh_db, rows[0]["workflow_instance_id"], "long")
            return int(rows[0]["workflow_instance_id"])
        return None

    child = await eventually(child_running, 30, "child running")
    owner = next(m for m in masters if m.address == wi["host"])
    kill(owner)

    async def moved() -> bool:
        row = (await query(fresh_db, "SELECT host FROM workflow_instance WHERE id = $1", wi["id"]))[0]
        return row["host"] != owner.address

    await eventually(moved, TTL + 10, "parent owned by the surviving master")
    gate.touch()
    final = await instance_for(fresh_db, cmd, timeout=60)
    assert final["state"] == SUCCESS
    subs = [r for r in await tasks_of(fresh_db, wi["id"]) if r["name"] == "sub"]
    assert [(r["attempt"], r["state"]) for r in subs] == [(1, SUCCESS)], "the sub-workflow task must not run again"
    links = await query(fresh_db, "SELECT workflow_instance_id FROM sub_workflow_relation")
    assert [r["workflow_instance_id"] for r in links] == [child]
    assert len(runs(ledger, "long")) == 1 and len(runs(ledger, "after")) == 1


async def test_a_worker_restarted_at_its_address_within_its_ttl_keeps_what_its_new_incarnation_took(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    """The incarnation race (issue 25.3), made deterministic: the master reaches etcd through a proxy whose
    replies are held, so its view keeps the killed worker's key while the worker, restarted at the same
    address, registers anew and takes the master's dispatch; released, the master's watch applies the old
    incarnation's removal after that dispatch. The attempt the new incarnation runs must not be failed as
    lost (it would run a second time, while the first still runs)."""
    ttl = 30.0  # the hold outlasts a worker's start: no lease of the master runs out meanwhile
    scheme = etcd_server.endpoint.split("://", 1)[0]
    proxy = await DelayProxy(etcd_server.client_port).start()
    env = {"PORPOISE_DATABASE_DSN": fresh_db, "PORPOISE_MASTER_MAX_CPU_LOAD_AVG": "100000",
           "PORPOISE_WORKER_MAX_CPU_LOAD_AVG": "100000"}  # fmt: skip
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    try:
        master = await asyncio.to_thread(node_factory, "master", f"{scheme}://127.0.0.1:{proxy.port}", etcd_root, ttl,
                                         **env)  # fmt: skip
        first = await asyncio.to_thread(node_factory, "worker", etcd_server.endpoint, etcd_root, ttl, **env)
        (warm,) = await command(fresh_db, await save(fresh_db, "incarnation-warm", [shell("a", "true")]))
        assert (await instance_for(fresh_db, warm))["state"] == SUCCESS  # the master dispatches to the worker
        kill(first)
        assert first.proc.popen is not None
        await asyncio.to_thread(first.proc.popen.wait)
        proxy.hold()  # the master hears nothing more from etcd: its view keeps the killed incarnation
        second = await asyncio.to_thread(node_factory, "worker", etcd_server.endpoint, etcd_root, ttl,
                                         port=first.port, **env)  # fmt: skip
        cmd, wi = await start_gated(fresh_db, "incarnation-race", ledger, gate, follow_up=False)
        (attempt,) = await tasks_of(fresh_db, wi["id"])
        assert attempt["host"] == second.address == first.address  # taken by the new incarnation
        proxy.release()
        log = master.proc.log_path

        def removal_applied() -> bool:
            return any("worker left" in line and first.address in line for line in log.read_text().splitlines())

        await eventually(removal_applied, 30, "the master applied the old incarnation's removal")
        gate.touch()
        final = await instance_for(fresh_db, cmd)
    finally:
        proxy.release()
        await proxy.close()
    assert final["state"] == SUCCESS
    rows = await tasks_of(fresh_db, wi["id"])
    assert [(r["attempt"], r["state"]) for r in rows] == [(1, SUCCESS)], [dict(r) for r in rows]
    assert len(runs(ledger, "long")) == 1
