"""Task groups: the admission rule (pure), and end to end with real masters, workers, etcd and
PostgreSQL: a group never holds more than its size, waiting tasks go by priority, and a slot is released
exactly once however its attempt ends, including when the owning master is killed mid-run."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.concurrency.task_groups import admissible
from engine.infra.etcd import EtcdServer
from engine.states import TaskState, WorkflowState
from tests.cluster_harness import command, instance_for, max_overlap, query, save, shell
from tests.cluster_harness import started_unguarded as started
from tests.helpers import NodeProc, eventually

#: instance states of a run that stopped, failed or succeeded
_ENDED = frozenset({WorkflowState.STOP, WorkflowState.FAILURE, WorkflowState.SUCCESS})


SUCCESS = 7


@pytest.mark.parametrize(
    ("size", "used", "waiting", "admitted"),
    [
        (2, 0, [(1, 1), (2, 1), (3, 1)], [1, 2]),
        (2, 1, [(1, 1), (2, 1)], [1]),
        (2, 2, [(1, 1)], []),
        (3, 0, [(1, 2), (2, 2), (3, 1)], [1]),  # the head does not get overtaken by smaller ones behind it
        (3, 1, [(1, 3), (2, 1)], []),
        (1, 3, [(1, 1)], []),  # over the size (a force start, a shrink): nothing until below it
        (0, 0, [(1, 1)], []),  # a group of size 0 holds everything back
        (5, 0, [], []),
    ],
)
def test_admission_goes_down_the_queue_while_the_head_fits(
    size: int, used: int, waiting: list[tuple[int, int]], admitted: list[int]
) -> None:
    assert admissible(size, used, waiting) == admitted


async def _group(dsn: str, name: str, size: int) -> int:
    rows = await query(dsn, "INSERT INTO task_group (name, group_size) VALUES ($1, $2) RETURNING id", name, size)
    return int(rows[0]["id"])


def _ledger_task(name: str, ledger: Path, seconds: float, **kw: object) -> object:
    script = (
        f"echo start {name} $(date +%s.%N) >> {ledger}; sleep {seconds}; echo end {name} $(date +%s.%N) >> {ledger}"
    )
    return shell(name, script, **kw)


def _spans(ledger: Path) -> dict[str, list[float]]:
    """task name -> [start, end] as the task processes wrote them (an attempt killed mid-run has no end)."""
    spans: dict[str, list[float]] = {}
    for line in ledger.read_text().splitlines():
        _, name, when = line.split()
        spans.setdefault(name, []).append(float(when))
    return spans


async def _held(dsn: str, group_id: int) -> int:
    rows = await query(
        dsn,
        "SELECT coalesce(sum(slots), 0) AS n FROM task_group_queue WHERE task_group_id = $1 AND status = 1",
        group_id,
    )
    return int(rows[0]["n"])


async def test_a_group_runs_at_most_its_size_and_admits_by_priority(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    await started(node_factory, etcd_server, etcd_root, fresh_db, masters=1, workers=1, ttl=3)
    group = await _group(fresh_db, "db", 2)
    ledger = tmp_path / "ledger"
    tasks = [_ledger_task(f"p{i}", ledger, 1, task_group="db", task_group_priority=i) for i in range(6)]
    code = await save(fresh_db, "grouped", tasks)
    (cid,) = await command(fresh_db, code)
    peak = 0

    async def done() -> bool:
        nonlocal peak
        peak = max(peak, await _held(fresh_db, group))
        rows = await query(fresh_db, "SELECT state FROM workflow_instance WHERE command_id = $1", cid)
        return bool(rows) and rows[0]["state"] in _ENDED

    await eventually(done, 90, "the grouped workflow finished")
    rows = await query(fresh_db, "SELECT state FROM workflow_instance WHERE command_id = $1", cid)
    assert rows[0]["state"] == SUCCESS
    spans = _spans(ledger)
    assert sorted(spans) == [f"p{i}" for i in range(6)] and all(len(s) == 2 for s in spans.values())
    assert max_overlap([(s, e) for s, e in spans.values()]) <= 2
    assert peak <= 2
    order = [int(name[1:]) for name, _ in sorted(spans.items(), key=lambda kv: kv[1][0])]
    assert set(order[:2]) == {5, 4} and set(order[-2:]) == {1, 0}, order  # highest priority first
    assert await query(fresh_db, "SELECT * FROM task_group_queue") == []  # every slot released


async def test_slots_are_released_once_when_the_owning_master_is_killed_mid_run(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    masters, _ = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=2, workers=1, ttl=2)
    group = await _group(fresh_db, "one", 1)
    ledger = tmp_path / "ledger"
    code = await save(fresh_db, "exclusive", [_ledger_task(n, ledger, 3, task_group="one") for n in "abc"])
    (cid,) = await command(fresh_db, code)

    async def holding_and_waiting() -> bool:
        rows = await query(fresh_db, "SELECT status, count(*) AS n FROM task_group_queue GROUP BY 1 ORDER BY 1")
        running = await query(fresh_db, f"SELECT 1 FROM task_instance WHERE state = {int(TaskState.RUNNING_EXECUTION)}")
        return [(r["status"], r["n"]) for r in rows] == [(0, 2), (1, 1)] and bool(running)

    await eventually(holding_and_waiting, 60, "one task holding the slot, two waiting")
    owner = (await query(fresh_db, "SELECT host FROM workflow_instance WHERE command_id = $1", cid))[0]["host"]
    victim = next(m for m in masters if m.address == owner)
    assert victim.proc.record is not None
    victim.proc.record.signal(signal.SIGKILL)
    peak = 0

    async def done() -> bool:
        nonlocal peak
        peak = max(peak, await _held(fresh_db, group))
        rows = await query(fresh_db, "SELECT state, host FROM workflow_instance WHERE command_id = $1", cid)
        return rows[0]["state"] in _ENDED

    await eventually(done, 120, "the workflow finished on the surviving master")
    rows = await query(fresh_db, "SELECT state, host FROM workflow_instance WHERE command_id = $1", cid)
    assert rows[0]["state"] == SUCCESS and rows[0]["host"] != owner
    spans = _spans(ledger)
    # each task ran to its end once, never two at a time (the running one was adopted, not re-run)
    assert sorted(spans) == ["a", "b", "c"] and all(len(s) == 2 for s in spans.values()), spans
    assert max_overlap([(s, e) for s, e in spans.values()]) == 1
    assert peak <= 1
    assert await query(fresh_db, "SELECT * FROM task_group_queue") == []  # released, exactly once each


async def test_a_slot_granted_without_its_notification_reaches_its_task_through_the_periodic_check(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str
) -> None:
    """A slot granted while no master listened (its NOTIFY lost) is found by the master's periodic look at the
    attempts its runs hold back in a group's queue."""
    env = {"PORPOISE_DATABASE_DSN": fresh_db, "PORPOISE_MASTER_MAX_CPU_LOAD_AVG": "100000",
           "PORPOISE_WORKER_MAX_CPU_LOAD_AVG": "100000", "PORPOISE_MASTER_LOGIC_CHECK_INTERVAL": "0.5"}  # fmt: skip
    node_factory("master", etcd_server.endpoint, etcd_root, 3, **env)
    node_factory("worker", etcd_server.endpoint, etcd_root, 3, **env)
    group = await _group(fresh_db, "closed", 1)
    code = await save(fresh_db, "held_back", [shell("t", "true", task_group="closed")])
    await query(fresh_db, "UPDATE task_group SET group_size = 0 WHERE id = $1", group)  # admits nothing by itself
    (cid,) = await command(fresh_db, code)

    async def queued() -> bool:
        rows = await query(fresh_db, "SELECT status FROM task_group_queue WHERE task_group_id = $1", group)
        return [r["status"] for r in rows] == [0]

    await eventually(queued, 60, "the grouped task waiting in its group's queue")
    # admitted as admit() does it, but with no notification sent
    await query(fresh_db, "UPDATE task_group_queue SET status = 1 WHERE task_group_id = $1", group)
    row = await instance_for(fresh_db, cid, 60)
    assert row["state"] == SUCCESS
