"""The master end to end: real master and worker processes, real etcd and PostgreSQL."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.infra.etcd import EtcdServer
from engine.states import TaskState, WorkflowState
from rpc.messages import ControlReply, Done, WorkflowControl
from tests.cluster_harness import command, instance_for, query, save, shell, started, tasks_of
from tests.helpers import NodeProc, eventually, metric, rpc_client, scrape

SUCCESS, FAILURE, STOP = 7, 6, 5


@pytest.fixture
async def cluster(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
):
    overrides = [f"worker.log_dir={tmp_path / 'logs'}", f"worker.exec_dir={tmp_path / 'exec'}"]
    return await started(node_factory, etcd_server, etcd_root, fresh_db, worker_overrides=overrides)


async def test_chain_diamond_and_out_params(cluster, fresh_db: str) -> None:  # type: ignore[no-untyped-def]
    code = await save(
        fresh_db,
        "diamond",
        [
            shell("a", "echo '${setValue(x=hello)}'", params={"localParams": [{"prop": "x", "direct": "OUT"}]}),
            shell("b", "sleep 0.2; echo b", ("a",)),
            shell("c", "echo c got ${x}", ("a",)),
            shell("d", "echo d", ("b", "c")),
        ],
    )
    (cid,) = await command(fresh_db, code)
    wi = await instance_for(fresh_db, cid)
    assert wi["state"] == SUCCESS and wi["end_time"] is not None and wi["epoch"] > 0
    rows = {r["name"]: r for r in await tasks_of(fresh_db, wi["id"])}
    assert set(rows) == {"a", "b", "c", "d"} and all(r["state"] == SUCCESS for r in rows.values())
    assert rows["a"]["end_time"] <= rows["b"]["start_time"] and rows["a"]["end_time"] <= rows["c"]["start_time"]
    assert max(rows["b"]["end_time"], rows["c"]["end_time"]) <= rows["d"]["start_time"]
    assert rows["c"]["var_pool"] and "hello" in rows["c"]["var_pool"]
    assert "c got hello" in await asyncio.to_thread(Path(rows["c"]["log_path"]).read_text)
    assert all(r["host"] and r["pid"] and r["attempt"] == 1 and r["flag"] == 1 for r in rows.values())


async def test_retries_create_new_attempts_until_success(cluster, fresh_db: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    counter = tmp_path / "count"
    script = f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; [ $n -ge 3 ]"
    code = await save(fresh_db, "flaky", [shell("flaky", script, retries=3, retry_interval=0)])
    (cid,) = await command(fresh_db, code)
    wi = await instance_for(fresh_db, cid)
    assert wi["state"] == SUCCESS
    attempts = await tasks_of(fresh_db, wi["id"])
    assert [(r["attempt"], r["retry_times"], r["state"], r["flag"]) for r in attempts] == [
        (1, 0, FAILURE, 0),
        (2, 1, FAILURE, 0),
        (3, 2, SUCCESS, 1),
    ]


async def test_retries_exhausted_and_end_strategy_kills_parallel_work(cluster, fresh_db: str) -> None:  # type: ignore[no-untyped-def]
    code = await save(
        fresh_db,
        "ending",
        [
            shell("bad", "sleep 0.5; exit 2", retries=1, retry_interval=0),
            shell("slow", "sleep 60"),
            shell("after", "true", ("bad",)),
        ],
    )
    (cid,) = await command(fresh_db, code, failure_strategy=0)  # END
    wi = await instance_for(fresh_db, cid, timeout=40)
    assert wi["state"] == FAILURE
    rows = await tasks_of(fresh_db, wi["id"])
    states = {(r["name"], r["attempt"]): r["state"] for r in rows}
    assert states == {("bad", 1): FAILURE, ("bad", 2): FAILURE, ("slow", 1): 9}  # slow was KILLed, after never ran


async def test_bad_commands_go_to_error_command_with_the_reason(cluster, fresh_db: str) -> None:  # type: ignore[no-untyped-def]
    offline = await save(fresh_db, "offline", [shell("t", "true")], release=False)
    ids = (
        await command(fresh_db, offline)
        + await command(fresh_db, 987654321)
        + await command(fresh_db, offline, command_type=10)  # RECOVER_WAITING_THREAD (legacy)
        + await command(fresh_db, offline, command_type=7)
    )

    async def moved() -> list:
        rows = await query(fresh_db, "SELECT id, message FROM error_command ORDER BY id")
        return rows if len(rows) == 4 else []

    rows = await eventually(moved, 20, "four refused commands")
    assert [r["id"] for r in rows] == ids
    assert "is offline" in rows[0]["message"]
    assert "does not exist" in rows[1]["message"]
    assert "not supported" in rows[2]["message"]
    assert "REPEAT_RUNNING needs a workflow instance" in rows[3]["message"]
    assert await query(fresh_db, "SELECT 1 FROM command") == []
    assert await query(fresh_db, "SELECT 1 FROM workflow_instance") == []


async def test_stop_kills_the_running_task_and_ends_stop(cluster, fresh_db: str) -> None:  # type: ignore[no-untyped-def]
    masters, _ = cluster
    code = await save(fresh_db, "stoppable", [shell("long", "sleep 120"), shell("next", "true", ("long",))])
    (cid,) = await command(fresh_db, code)
    wi = await instance_for(fresh_db, cid, final=False)

    async def running() -> bool:
        rows = await tasks_of(fresh_db, wi["id"])
        return bool(rows) and rows[0]["state"] == TaskState.RUNNING_EXECUTION

    await eventually(running, 20, "task running")
    client = rpc_client()
    reply = await client.call(masters[0].address, WorkflowControl(wi["id"], "stop"))
    await client.close()
    assert reply == ControlReply(True)
    final = await instance_for(fresh_db, cid)
    assert final["state"] == STOP
    assert [(r["name"], r["state"]) for r in await tasks_of(fresh_db, wi["id"])] == [("long", 9)]


async def test_metrics_endpoint(cluster, fresh_db: str) -> None:  # type: ignore[no-untyped-def]

    masters, _ = cluster
    code = await save(fresh_db, "metered", [shell("t", "true")])
    (cid,) = await command(fresh_db, code)
    await instance_for(fresh_db, cid)
    seen = await asyncio.to_thread(scrape, masters[0].url)
    assert seen[("porpoise_master_commands_claimed_total", frozenset())] == 1
    assert seen[("porpoise_master_instances_finished", frozenset({("state", "SUCCESS")}))] == 1
    assert seen[("porpoise_master_actors", frozenset())] == 0
    assert ("porpoise_master_event_loop_lag_seconds", frozenset({("quantile", "0.99")})) in seen
    # the histograms saw the one command, its one attempt and the database pool
    assert seen[("porpoise_master_command_wait_seconds_count", frozenset())] == 1
    assert seen[("porpoise_master_dispatch_wait_seconds_count", frozenset())] == 1
    assert seen[("porpoise_master_db_pool_wait_seconds_count", frozenset())] > 0


async def test_the_running_gauge_counts_each_owned_run_in_its_state_until_it_ends(
    cluster, fresh_db: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    masters, _ = cluster
    gate = tmp_path / "gate"
    waits = f"while [ ! -e {gate} ]; do sleep 0.05; done"  # the task's own wait, released by the test
    code = await save(fresh_db, "gated", [shell("wait", waits), shell("after", "true", ("wait",))])
    first, second = await command(fresh_db, code, count=2)
    stopped = (await instance_for(fresh_db, first, final=False))["id"]
    await instance_for(fresh_db, second, final=False)

    def counted() -> dict[str, float]:
        seen = scrape(masters[0].url)
        return {dict(k[1])["state"]: v for k, v in seen.items() if k[0] == "porpoise_master_instances_running"}

    async def counts(expected: dict[str, float]) -> bool:
        return await asyncio.to_thread(counted) == expected

    await eventually(lambda: counts({"RUNNING_EXECUTION": 2}), 20, "two runs counted RUNNING_EXECUTION")
    reply = await (client := rpc_client()).call(masters[0].address, WorkflowControl(stopped, "stop"))
    await client.close()
    assert reply == ControlReply(True)
    assert (await instance_for(fresh_db, first))["state"] == STOP
    await eventually(lambda: counts({"RUNNING_EXECUTION": 1}), 20, "the stopped run no longer counted")
    gate.touch()
    assert (await instance_for(fresh_db, second))["state"] == SUCCESS
    await eventually(lambda: counts({}), 20, "no run counted, in any state")
    assert await asyncio.to_thread(metric, masters[0].url, "porpoise_master_actors") == 0


async def test_dispatches_and_reports_due_together_travel_in_one_call(cluster, fresh_db: str) -> None:  # type: ignore[no-untyped-def]

    masters, _ = cluster
    code = await save(fresh_db, "wide", [shell(f"t{i}", "true") for i in range(60)])
    (cid,) = await command(fresh_db, code)
    wi = await instance_for(fresh_db, cid, timeout=60)
    assert wi["state"] == WorkflowState.SUCCESS
    rows = await tasks_of(fresh_db, wi["id"])
    assert len(rows) == 60 and all(r["state"] == TaskState.SUCCESS and r["pid"] and r["host"] for r in rows)
    seen = await asyncio.to_thread(scrape, masters[0].url)

    def total(name: str) -> float:
        return seen[(f"porpoise_master_{name}_total", frozenset())]

    assert total("task_results") == 60
    assert 0 < total("report_batches") < 60  # 60 results arrived in fewer calls than results
    assert total("tasks_dispatched") == 60
    assert 0 < total("dispatch_batches") < 60


async def test_a_full_worker_is_not_sent_what_it_would_refuse(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:

    # 40 tasks for 2 slots: the worker's replies say how many more it takes, its results free slots,
    # so the master holds the rest instead of sending them to be refused (each retry used to send all)
    overrides = [f"worker.log_dir={tmp_path / 'logs'}", f"worker.exec_dir={tmp_path / 'exec'}", "worker.exec_slots=2"]
    masters, _ = await started(node_factory, etcd_server, etcd_root, fresh_db, worker_overrides=overrides)
    code = await save(fresh_db, "narrow", [shell(f"t{i}", "sleep 0.1") for i in range(40)])
    (cid,) = await command(fresh_db, code)
    wi = await instance_for(fresh_db, cid, timeout=90)
    assert wi["state"] == SUCCESS
    rows = await tasks_of(fresh_db, wi["id"])
    assert len(rows) == 40 and all(r["state"] == SUCCESS for r in rows)
    starts = sorted((r["start_time"], 1) for r in rows) + sorted((r["end_time"], -1) for r in rows)
    running = peak = 0
    for _, step in sorted(starts, key=lambda x: (x[0], x[1])):
        running += step
        peak = max(peak, running)
    assert peak <= 2
    refusals = await asyncio.to_thread(metric, masters[0].url, "porpoise_master_dispatch_refusals_total")
    # only the probes of a worker thought full may be refused (one per retry period at most)
    assert refusals is not None and refusals <= 5


async def test_fencing_an_actor_whose_epoch_was_bumped_writes_nothing(cluster, fresh_db: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    masters, workers = cluster
    gate = tmp_path / "gate"
    a = shell("a", f"while [ ! -f {gate} ]; do sleep 0.05; done")  # ends when the test says
    code = await save(fresh_db, "fenced", [a, shell("b", "true", ("a",))])
    (cid,) = await command(fresh_db, code)
    wi = await instance_for(fresh_db, cid, final=False)

    async def running() -> bool:
        rows = await tasks_of(fresh_db, wi["id"])
        return bool(rows) and rows[0]["state"] == TaskState.RUNNING_EXECUTION

    await eventually(running, 20, "task a running")
    # another master took the instance over (what failover does): same host here, fresh epoch
    await query(fresh_db, "UPDATE workflow_instance SET epoch = nextval('workflow_epoch_seq') WHERE id = $1", wi["id"])
    await asyncio.to_thread(gate.touch)  # a ends now; persisting its result is what finds the actor fenced
    await eventually(lambda: masters[0].health()[1]["actors"] == 0, 20, "the fenced actor to stop")

    def result_answered() -> bool:  # a's result came again after the actor stopped: a late write had its chance
        lines = masters[0].proc.log_path.read_text(errors="replace").splitlines()
        return any("report for an owned instance without an actor" in line and f'"workflow_instance_id": {wi["id"]}'
                   in line for line in lines)  # fmt: skip

    await eventually(lambda: asyncio.to_thread(result_answered), 20, "a's result delivered to the fenced master")
    rows = await tasks_of(fresh_db, wi["id"])
    assert [(r["name"], r["state"]) for r in rows] == [("a", 1)], (
        "the fenced actor must not persist a's result or submit b"
    )
    after = (await query(fresh_db, "SELECT state, end_time FROM workflow_instance WHERE id = $1", wi["id"]))[0]
    assert after["state"] == WorkflowState.RUNNING_EXECUTION and after["end_time"] is None
    # the worker keeps the unacknowledged result for the instance's real owner
    assert workers[0].health()[1]["pending_reports"] >= 1


async def test_claim_race_1000_commands_3_masters_exactly_1000_instances(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str
) -> None:
    masters, _ = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=3, workers=0)
    await eventually(lambda: all(m.health()[1]["slot"]["count"] == 3 for m in masters), 10, "3 slots")
    code = await save(fresh_db, "race", [shell("t", "true")])
    ids: list[int] = []
    for i in range(10):
        ids += await command(fresh_db, code, 100)
        if i == 5:  # a master dies mid-way, after it claimed part of the backlog; its slot moves on

            async def claimed_some() -> bool:
                rows = await query(fresh_db, "SELECT 1 FROM workflow_instance WHERE host = $1", masters[2].address)
                return bool(rows)

            await eventually(claimed_some, 20, "the third master claimed some commands")
            assert masters[2].proc.record is not None
            masters[2].proc.record.signal(signal.SIGKILL)

    async def all_claimed() -> bool:
        left = await query(fresh_db, "SELECT count(*) AS n FROM command")
        return left[0]["n"] == 0

    await eventually(all_claimed, 60, "every command claimed")
    rows = await query(fresh_db, "SELECT command_id, host FROM workflow_instance")
    assert len(rows) == 1000 and {r["command_id"] for r in rows} == set(ids)
    assert await query(fresh_db, "SELECT 1 FROM error_command") == []
    dead = masters[2].address
    # the killed master claimed part of the backlog; failover moved those instances to the live masters

    async def all_moved() -> bool:
        owners = await query(fresh_db, "SELECT DISTINCT host FROM workflow_instance")
        return dead not in {r["host"] for r in owners}

    await eventually(all_moved, 30, "the dead master's instances failed over")
    moved = await query(fresh_db, "SELECT count(*) AS n FROM workflow_instance WHERE recovery = 1")
    assert moved[0]["n"] > 0, "all three masters claimed part of the backlog"
    hosts = {r["host"] for r in await query(fresh_db, "SELECT host FROM workflow_instance")}
    assert hosts == {masters[0].address, masters[1].address}


async def test_cache_expire_makes_a_taken_offline_definition_refuse_commands(cluster, fresh_db: str) -> None:  # type: ignore[no-untyped-def]
    from engine.workflows.definitions import set_release
    from rpc.messages import CacheExpire
    from tests.cluster_harness import query as q

    masters, _ = cluster
    code = await save(fresh_db, "cached", [shell("t", "true")])
    (first,) = await command(fresh_db, code)
    assert (await instance_for(fresh_db, first))["state"] == SUCCESS  # the master now caches the head as ONLINE
    import asyncpg

    conn = await asyncpg.connect(fresh_db)
    await set_release(conn, code, online=False)
    await conn.close()
    client = rpc_client()
    assert await client.call(masters[0].address, CacheExpire(code)) == Done(True)
    await client.close()
    (second,) = await command(fresh_db, code)

    async def refused() -> list:
        return await q(fresh_db, "SELECT message FROM error_command WHERE id = $1", second)

    rows = await eventually(refused, 20, "the command refused")
    assert "is offline" in rows[0]["message"]


async def test_overloaded_master_claims_nothing_and_counts_it(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str
) -> None:
    # a memory reservation no machine meets: the guard must hold every claim back
    master = await asyncio.to_thread(
        node_factory, "master", etcd_server.endpoint, etcd_root, 3, ["master.reserved_memory_gb=100000"],
        PORPOISE_DATABASE_DSN=fresh_db,
    )  # fmt: skip
    code = await save(fresh_db, "held", [shell("t", "true")])
    await command(fresh_db, code, 5)

    def overload_events() -> float:
        return metric(master.url, "porpoise_master_overload_events_total") or 0

    await eventually(lambda: overload_events() >= 1, 15, "an overload event")
    assert len(await query(fresh_db, "SELECT 1 FROM command")) == 5
    assert await query(fresh_db, "SELECT 1 FROM workflow_instance") == []


async def test_graceful_master_shutdown_leaves_instances_for_failover(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    from tests.helpers import wait_sync

    # no master is left to take the worker's reports: its stop at teardown kills the task left running and
    # exits at once (it would wait out the drain and the flush)
    overrides = [f"worker.log_dir={tmp_path / 'logs'}", f"worker.exec_dir={tmp_path / 'exec'}",
                 "worker.drain_timeout=0", "worker.report_flush_timeout=0"]  # fmt: skip
    masters, _ = await started(node_factory, etcd_server, etcd_root, fresh_db, worker_overrides=overrides)
    code = await save(fresh_db, "interrupted", [shell("long", "sleep 30")])
    (cid,) = await command(fresh_db, code)
    wi = await instance_for(fresh_db, cid, final=False)
    await eventually(lambda: masters[0].health()[1]["actors"] == 1, 10, "actor running")
    assert masters[0].proc.record is not None
    masters[0].proc.record.signal(signal.SIGTERM)
    await asyncio.to_thread(lambda: wait_sync(lambda: masters[0].proc.exited() is not None, 20, "master exit"))
    assert masters[0].proc.exited() == 0
    row = (await query(fresh_db, "SELECT state, host, end_time FROM workflow_instance WHERE id = $1", wi["id"]))[0]
    assert (
        row["state"] == WorkflowState.RUNNING_EXECUTION
        and row["host"] == masters[0].address
        and row["end_time"] is None
    )


async def test_poison_commands_go_to_error_command_and_the_rest_of_their_page_is_claimed(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str
) -> None:
    # commands the API now refuses, inserted directly: a start parameter whose time arithmetic
    # overflows, one that divides by zero, and a workflow whose name makes the instance name longer
    # than varchar(255) (the INSERT fails). Each used to roll back its whole page, which the poller
    # then retried forever: every other command of that master's slot starved.
    masters, _ = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=3, workers=0)
    await eventually(lambda: all(m.health()[1]["slot"]["count"] == 3 for m in masters), 10, "3 slots")
    # "day" is declared: a start may set only declared globals, and these starts must fail on its value
    day = {"prop": "day", "direct": "IN", "type": "VARCHAR", "value": ""}
    code = await save(fresh_db, "good", [shell("t", "true")], global_params=(day,))
    long_code = await save(fresh_db, "long", [shell("t", "true")])
    long_name = "n" * 255  # saved before names were bounded: the instance name cannot fit
    for table in ("workflow_definition", "workflow_definition_log"):
        await query(fresh_db, f"UPDATE {table} SET name = $2 WHERE code = $1", long_code, long_name)
    good: list[int] = []
    poison: dict[int, str] = {}
    good += await command(fresh_db, code, 10)
    (cid,) = await command(fresh_db, code, command_param={"StartParams": {"day": "$[yyyyMMdd+99999999]"}})
    poison[cid] = "StartParams.day: bad time placeholder $[yyyyMMdd+99999999]: the date is out of range"
    good += await command(fresh_db, code, 40)
    (cid,) = await command(fresh_db, long_code)
    poison[cid] = "cannot create the workflow instance: value too long for type character varying(255)"
    good += await command(fresh_db, code, 40)
    (cid,) = await command(fresh_db, code, command_param={"StartParams": {"day": "$[yyyyMMdd+1/0]"}})
    poison[cid] = "StartParams.day: bad time placeholder $[yyyyMMdd+1/0]: division by zero"
    good += await command(fresh_db, code, 10)

    async def all_taken() -> bool:
        left = await query(fresh_db, "SELECT count(*) AS n FROM command")
        return left[0]["n"] == 0

    await eventually(all_taken, 60, "every command claimed or refused")
    rows = await query(fresh_db, "SELECT command_id FROM workflow_instance")
    assert sorted(r["command_id"] for r in rows) == sorted(good)
    errors = {r["id"]: r["message"] for r in await query(fresh_db, "SELECT id, message FROM error_command")}
    assert set(errors) == set(poison)
    for cid, words in poison.items():
        assert words in errors[cid], (cid, errors[cid])
    assert all(m.proc.exited() is None for m in masters)
