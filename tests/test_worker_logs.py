"""Task logs at scale: a log capped at worker.max_log_bytes keeps its newest part and says what it dropped,
old logs are removed, a worker whose log disk is nearly full refuses new tasks (and says so in its
heartbeat and the cluster view), and a log download streams through the API in bounded memory."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import aiohttp
import psutil
import pytest

from engine.api.cluster import _node
from engine.infra.etcd import EtcdServer
from engine.worker import executor
from engine.worker.logdisk import disk_short, remove_old_logs
from engine.worker.logfiles import CappedLog
from registry import Heartbeat, NodeId
from registry.client import EtcdClient
from registry.keys import node_key
from registry.membership import NodeInfo
from rpc import RpcClient
from tests import tls
from tests.conftest import ApiCluster
from tests.helpers import NodeProc, eventually, start_worker
from tests.worker_harness import ReportSink, dispatch, task

_NOTICE = re.compile(rb"^\[porpoise\] log truncated: the first (\d+) bytes of output were dropped")


def test_a_capped_log_keeps_its_newest_lines_and_counts_what_it_dropped(tmp_path: Path) -> None:
    cap = 64 * 1024
    rng = random.Random(7)
    path = tmp_path / "a" / "1-1.log"
    log = CappedLog(path, cap, "header\n")
    written = bytearray(b"header\n")
    largest = 0
    for i in range(20_000):
        chunk = (f"line {i} " + "x" * rng.randrange(0, 200) + "\n").encode()
        if i % 1000 == 999:
            chunk += b"partial line without an end, "  # a write may end mid-line
        log.write(chunk)
        written += chunk
        largest = max(largest, path.stat().st_size)
    log.close()
    data = path.read_bytes()
    assert largest <= cap + 300  # never more than the cap and one write
    notice, _, kept = data.partition(b"\n")
    m = _NOTICE.match(notice)
    assert m is not None, notice
    assert cap // 2 <= len(kept) <= cap
    assert int(m.group(1)) == len(written) - len(kept)  # what was dropped, exactly
    assert bytes(written).endswith(kept)
    assert bytes(written)[-len(kept) - 1 : -len(kept)] == b"\n"  # the kept part starts at a line


def test_an_uncapped_log_is_written_as_is(tmp_path: Path) -> None:
    path = tmp_path / "1-1.log"
    log = CappedLog(path, 0, "h\n")
    for _ in range(1000):
        log.write(b"y" * 1000 + b"\n")
    log.close()
    assert path.stat().st_size == 2 + 1001 * 1000


class _Output:
    """What _pump reads of a task: its output stream, fed the chunks a pipe would give."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.stdout = asyncio.StreamReader()
        for chunk in chunks:
            self.stdout.feed_data(chunk)
        self.stdout.feed_eof()


async def test_masked_values_never_reach_the_log_even_split_across_reads(tmp_path: Path) -> None:
    path = tmp_path / "t.log"
    log = CappedLog(path, 0)
    emitted: dict[str, str] = {}
    chunks = [b"token=hunter", b"22 ok\n${setValue(k=hunter22)}\nshort abc\n", b"tail hunter22 no newline"]
    await executor._pump(_Output(chunks), log, emitted, masked=(b"hunter22",))  # type: ignore[arg-type]
    log.close()
    assert path.read_bytes() == b"token=*** ok\n${setValue(k=***)}\nshort abc\ntail *** no newline"
    assert emitted == {"k": "hunter22"}  # the task's own OUT value is data, not log
    # a line longer than MASK_LINE_MAX is written at that size rather than held
    path = tmp_path / "long.log"
    log = CappedLog(path, 0)
    await executor._pump(_Output([b"x" * (executor.MASK_LINE_MAX + 1)]), log, {}, masked=(b"hunter22",))  # type: ignore[arg-type]
    log.close()
    assert path.stat().st_size == executor.MASK_LINE_MAX + 1


def test_old_logs_and_the_directories_they_leave_empty_are_removed(tmp_path: Path) -> None:
    now = time.time()
    old, young, busy = (
        tmp_path / "7" / "1" / "1-1.log",
        tmp_path / "7" / "2" / "2-1.log",
        tmp_path / "8" / "3" / "3-1.log",
    )
    other = tmp_path / "7" / "1" / "notes.txt"
    for path in (old, young, busy, other):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    for path in (old, busy, other):
        os.utime(path, (now - 31 * 86400, now - 31 * 86400))
    assert remove_old_logs(tmp_path, 30 * 86400, {busy}, now) == 1
    assert not old.exists() and young.exists() and busy.exists() and other.exists()
    other.unlink()
    busy.unlink()
    assert remove_old_logs(tmp_path, 30 * 86400, set(), now) == 0
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["7", "7/2", "7/2/2-1.log"]


def test_the_disk_guard_names_the_limit_it_is_below(tmp_path: Path) -> None:
    assert disk_short(tmp_path, 0, 0) == ""
    assert "below worker.min_free_disk_percent (100 %)" in disk_short(tmp_path, 0, 100)
    assert "below worker.min_free_disk_bytes (1024.0 TiB)" in disk_short(tmp_path / "not" / "yet", 1 << 50, 0)


def _worker(node_factory: Callable[..., NodeProc], etcd: EtcdServer, root: str, tmp: Path, *extra: str) -> NodeProc:
    return start_worker(node_factory, etcd.endpoint, root, tmp, *extra)


async def test_a_task_printing_more_than_the_cap_leaves_the_newest_output_and_the_notice(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    tmp_path: Path,
    sink: ReportSink,
    client: RpcClient,
) -> None:
    cap = 256 * 1024
    w = await asyncio.to_thread(_worker, node_factory, etcd_server, etcd_root, tmp_path, f"worker.max_log_bytes={cap}")
    msg = task("SHELL", {"rawScript": "seq 1 400000; echo the end"}, sink.address)
    assert (await dispatch(client, w.address, msg)).accepted is True
    result = await sink.result(msg.task_instance_id)
    assert result["state"] == "SUCCESS"
    data = await asyncio.to_thread(Path(result["log_path"]).read_bytes)
    assert len(data) <= cap
    lines = data.decode().splitlines()
    assert _NOTICE.match(lines[0].encode())
    assert lines[-2:-1] == ["the end"] and lines[-1].startswith("[porpoise]") and "finished: SUCCESS" in lines[-1]
    numbers = [int(x) for x in lines[1:-2]]
    assert numbers == list(range(numbers[0], 400001)) and len(numbers) > 10_000  # the newest, none missing


async def test_a_worker_whose_log_disk_is_nearly_full_refuses_tasks_and_says_why(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    tmp_path: Path,
    sink: ReportSink,
    client: RpcClient,
) -> None:
    w = await asyncio.to_thread(_worker, node_factory, etcd_server, etcd_root, tmp_path,
                                "worker.min_free_disk_percent=100")  # fmt: skip
    reply = await dispatch(client, w.address, task("SHELL", {"rawScript": "true"}, sink.address))
    assert reply.accepted is False
    assert reply.reason.startswith("log disk nearly full:") and "worker.min_free_disk_percent (100 %)" in reply.reason
    etcd = EtcdClient([etcd_server.endpoint], 2, tls.etcd_access())
    try:
        kv = await etcd.get(node_key(etcd_root, NodeId("worker", w.address, "default")))
    finally:
        await etcd.close()
    assert kv is not None
    hb = Heartbeat.from_json(kv.value)
    view = _node(NodeInfo(NodeId("worker", w.address, "default"), hb, kv.create_revision))
    assert view["status"] == "ABNORMAL" and view["reason"] == reply.reason


@pytest.mark.slow
async def test_a_log_larger_than_every_buffer_streams_through_the_api_in_bounded_memory(
    api_cluster: ApiCluster,
) -> None:
    """100 MB of log: the download arrives whole and identical while the API process grows by far less."""
    client = api_cluster.client()
    name = f"biglog_{uuid.uuid4().hex[:8]}"
    script = "yes 0123456789abcdef | head -c 100000000"
    doc = {"name": name, "project": "api-tests",
           "tasks": [{"name": "big", "type": "SHELL", "params": {"rawScript": script}}]}  # fmt: skip
    code = client.post("/api/v1/workflows", doc, release=True)["code"]
    command = client.post(f"/api/v1/workflows/{code}/start", {})

    def finished() -> dict | None:
        status = client.get(f"/api/v1/commands/{command['command_id']}")
        if not status.get("workflow_instance_id"):
            return None
        detail = client.get(f"/api/v1/instances/{status['workflow_instance_id']}")
        return detail if detail["finished"] else None

    detail = await eventually(lambda: asyncio.to_thread(finished), 120, "the big log's run")
    assert detail["state"] == "SUCCESS"
    task_id = detail["tasks"][0]["id"]
    on_disk = Path(client.get(f"/api/v1/tasks/{task_id}")["log_path"])
    expected = await asyncio.to_thread(lambda: hashlib.sha256(on_disk.read_bytes()).hexdigest())
    api = psutil.Process(api_cluster.api.pid)
    before = peak = api.memory_info().rss
    digest, size = hashlib.sha256(), 0
    headers = {"Authorization": f"Bearer {api_cluster.token}"}
    async with aiohttp.ClientSession(connector=tls.connector()) as http:
        url = f"{api_cluster.url}/api/v1/tasks/{task_id}/log/download"
        async with http.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=120)) as resp:
            assert resp.status == 200
            async for chunk in resp.content.iter_chunked(1 << 20):
                digest.update(chunk)
                size += len(chunk)
                peak = max(peak, api.memory_info().rss)
    assert size > 100_000_000 and digest.hexdigest() == expected
    assert peak - before < 30_000_000, f"the API grew by {(peak - before) / 1e6:.0f} MB for a 100 MB log"


def test_a_capped_log_s_copy_left_by_a_stopped_worker_goes_with_the_old_logs(tmp_path: Path) -> None:
    """A ``.log.tmp`` (CappedLog._keep_tail's copy, cut short when its worker stopped) is removed when old, so it
    does not keep its directory forever; the copy of a log being written is kept."""
    now = time.time()
    base = tmp_path / "7" / "0"
    stale, kept, young = base / "1-2-1.log.tmp", base / "1-3-1.log.tmp", tmp_path / "8" / "0" / "2-4-1.log.tmp"
    for path in (stale, kept, young):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    for path in (stale, kept):
        os.utime(path, (now - 31 * 86400, now - 31 * 86400))
    busy = {kept.with_suffix("")}  # its log is being written (and capped) right now
    assert remove_old_logs(tmp_path, 30 * 86400, busy, now) == 1
    assert not stale.exists() and kept.exists() and young.exists()
