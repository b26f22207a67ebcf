"""A workflow's total time limit with the FAILED strategy, end to end (real master, worker, etcd,
PostgreSQL): the run is alerted, its tasks are killed and it ends FAILURE."""

from __future__ import annotations

from collections.abc import Callable

from engine.infra.etcd import EtcdServer
from tests.cluster_harness import command, instance_for, query, save, shell, started_unguarded, tasks_of
from tests.helpers import NodeProc

FAILURE, KILL = 6, 9


async def test_a_workflow_past_its_time_limit_with_failed_is_stopped_and_fails(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str
) -> None:
    await started_unguarded(node_factory, etcd_server, etcd_root, fresh_db, masters=1, workers=1, ttl=3)
    code = await save(fresh_db, "too-slow", [shell("slow", "sleep 600")], timeout=1, timeout_strategy=1)
    (cid,) = await command(fresh_db, code)
    wi = await instance_for(fresh_db, cid, timeout=150)
    assert wi["state"] == FAILURE
    (task,) = await tasks_of(fresh_db, wi["id"])
    assert task["state"] == KILL
    alerts = await query(fresh_db, "SELECT title, content FROM alert WHERE workflow_instance_id = $1", wi["id"])
    assert any("timed out" in a["title"] and "it fails" in a["content"] for a in alerts), alerts
