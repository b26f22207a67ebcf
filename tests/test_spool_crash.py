"""A worker killed (-9) right after a group of results went to its spool together (one file, one fsync):
every result of the group is delivered by the next start, none is lost and none sent from memory only."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.infra.etcd import EtcdServer
from tests.helpers import NodeProc, eventually, rpc_client
from tests.test_failover import kill
from tests.test_worker_stop import TTL, dirs, exit_code
from tests.worker_harness import ReportSink, dispatch, task

pytestmark = pytest.mark.slow

TASKS = 24


def spooled_results(tmp: Path) -> set[int]:
    """Task instance ids of the results in the spool's files (a file holds a group of them)."""
    ids = set()
    for path in (tmp / "spool").rglob("*.json"):
        try:
            data = json.loads(path.read_bytes())
        except (FileNotFoundError, ValueError):
            continue
        for item in data if isinstance(data, list) else [data]:
            ids.add(item["result"]["task_instance_id"])
    return ids


async def test_a_worker_killed_right_after_a_group_of_results_delivers_them_all_when_restarted(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, tmp_path: Path, sink: ReportSink
) -> None:
    def start(*extra: str) -> NodeProc:
        return node_factory("worker", etcd_server.endpoint, etcd_root, TTL, [*dirs(tmp_path), *extra])

    held = await asyncio.to_thread(start, "worker.test_hold_results=true")
    client = rpc_client(10)
    try:
        msgs = [task("SHELL", {"rawScript": "echo done"}, sink.address) for _ in range(TASKS)]
        replies = await asyncio.gather(*(dispatch(client, held.address, m) for m in msgs))
        assert all(r.accepted is True for r in replies)
        ids = {m.task_instance_id for m in msgs}
        await eventually(lambda: spooled_results(tmp_path) == ids, 60, "every result spooled")
        kill(held)  # right after the last group reached the disk; no master has any of them
        await asyncio.to_thread(exit_code, held)
        for m in msgs:
            assert "result" not in await sink.rows(m.task_instance_id)
        await asyncio.to_thread(start)
        for m in msgs:
            result = await sink.result(m.task_instance_id, timeout=60)
            assert result["state"] == "SUCCESS" and result["host"] == held.address
        await eventually(lambda: not spooled_results(tmp_path), 20, "the acknowledged results removed from the spool")
    finally:
        await client.close()
