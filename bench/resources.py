"""The resource center: a large file through the API in constant memory, and what a worker's cache saves.

On a standalone-shaped stack (private etcd + PostgreSQL, 1 master, 1 worker, 1 API; ``storage.type``
database, the default):

- upload: ``size_mib`` of random bytes streamed from a file to ``POST /api/v1/projects/bench/resources``
  (raw body), then downloaded back to a file through ``GET .../content``; wall time of each and the API
  process's peak RSS (sampled every 50 ms with psutil) against its RSS before: the figure that must stay flat
  whatever the file's size. The download's SHA-256 is checked against the upload's.
- task start: a one-task SHELL workflow whose ``resourceList`` names a file of ``task_file_kib`` and whose
  script only checks the file is there (``test -s``); dispatch (the attempt's ``submit_time``) to its end
  (``end_time``), which holds the files' fetch or cache hit, the copy into the working directory and a
  bash start (the attempt's ``start_time`` is taken before the files are placed, so it cannot show them);
  p50 over ``runs`` runs, with the worker's cache on (``storage.cache_max_bytes`` default: the first run
  fetches, the others hit) and off (0: every run fetches from the master), on two workers of their own
  groups, interleaved so a change of load meets both.

``python -m bench.resources [tiny|full]``
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import asyncpg
import psutil

from bench.common import bench_config, main, percentile, rounded, save_released, workdir
from engine.accounts.tokens import create_token, ensure_user
from engine.infra.stack import Stack
from engine.states import WORKFLOW_FINISHED, code_list
from engine.workflows.model import TaskDef

SIZES = {
    "tiny": {"size_mib": 8, "runs": 3, "task_file_kib": 256},
    "full": {"size_mib": 1024, "runs": 20, "task_file_kib": 4096},
}
FINAL = code_list(WORKFLOW_FINISHED)
SUCCESS = 7
BLOCK = 1 << 20


class PeakRss:
    """The highest RSS of a process while the block runs (a sampling thread)."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.proc = psutil.Process(pid)
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def _make_file(path: Path, mib: int) -> str:
    digest = hashlib.sha256()
    with path.open("wb") as fh:
        for _ in range(mib):
            block = os.urandom(BLOCK)
            digest.update(block)
            fh.write(block)
    return digest.hexdigest()


def _upload(url: str, token: str, path: Path, name: str) -> dict[str, Any]:
    import json

    with path.open("rb") as fh:
        req = urllib.request.Request(f"{url}/api/v1/projects/bench/resources?path={name}", data=fh, method="POST")
        req.add_header("Authorization", f"Bearer {token}")
        req.add_header("Content-Type", "application/octet-stream")
        req.add_header("Content-Length", str(path.stat().st_size))
        with urllib.request.urlopen(req, timeout=3600) as resp:
            return dict(json.loads(resp.read()))


def _download(url: str, token: str, name: str, target: Path) -> str:
    req = urllib.request.Request(f"{url}/api/v1/projects/bench/resources/content?path={name}")
    req.add_header("Authorization", f"Bearer {token}")
    digest = hashlib.sha256()
    with urllib.request.urlopen(req, timeout=3600) as resp, target.open("wb") as fh:
        while block := resp.read(BLOCK):
            digest.update(block)
            fh.write(block)
    return digest.hexdigest()


async def _prepare(dsn: str) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        uid = await ensure_user(conn)
        await conn.execute("INSERT INTO project (code, name, user_id) VALUES (7, 'bench', $1)", uid)
        return (await create_token(conn, uid, "bench-resources"))[1]
    finally:
        await conn.close()


async def _run_once(dsn: str, code: int) -> tuple[float, int]:
    """Start the workflow; (dispatch -> end seconds, final state)."""
    conn = await asyncpg.connect(dsn)
    try:
        cid = await conn.fetchval(
            "INSERT INTO command (command_type, workflow_definition_code) VALUES (0, $1) RETURNING id", code
        )
        deadline = time.monotonic() + 600
        while True:
            row = await conn.fetchrow(
                "SELECT id, state FROM workflow_instance WHERE command_id = $1 AND state = ANY($2)", cid, list(FINAL)
            )
            if row is not None:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"workflow {code} not finished after 600 s")
            await asyncio.sleep(0.02)
        task = await conn.fetchrow(
            "SELECT submit_time, end_time FROM task_instance WHERE workflow_instance_id = $1", row["id"]
        )
        return (task["end_time"] - task["submit_time"]).total_seconds(), int(row["state"])
    finally:
        await conn.close()


async def _task_starts(dsn: str, codes: dict[str, int], runs: int) -> dict[str, Any]:
    starts: dict[str, list[float]] = {k: [] for k in codes}
    states = []
    for _ in range(runs):
        for kind, code in codes.items():
            seconds, state = await _run_once(dsn, code)
            starts[kind].append(seconds)
            states.append(state)
    out: dict[str, Any] = {f"task_{k}_dispatch_to_end_p50_ms": percentile(v, 50) * 1000 for k, v in starts.items()}
    out |= {f"task_{k}_dispatch_to_end_max_ms": max(v) * 1000 for k, v in starts.items()}
    out["task_runs_all_success"] = float(all(s == SUCCESS for s in states))
    out["task_runs"] = len(states)
    return out


async def _save(dsn: str, name: str, resource: str, group: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        params = {"rawScript": f"test -s {resource}", "resourceList": [{"resourceName": resource}]}
        task = TaskDef("t", "SHELL", params, worker_group=group)
        return await save_released(conn, name, [task])
    finally:
        await conn.close()


def run(size: str = "full") -> dict[str, Any]:
    params = SIZES[size]
    result: dict[str, Any] = {"benchmark": "resources", "size": size, "file_mib": params["size_mib"]}
    with workdir() as base:
        limits = [f"storage.max_file_bytes={(params['size_mib'] + 1) << 20}",
                  f"storage.max_project_bytes={(params['size_mib'] + 64) << 20}"]  # fmt: skip
        stack = Stack(base / "stack", bench_config())
        try:
            stack.start_infra()
            assert stack.postgres is not None
            dsn = stack.postgres.dsn
            quiet = ["logging.level=warning"]
            stack.start_node("master", "master", [*quiet, "master.max_cpu_load_avg=100000"])
            # two workers: one caching (the default), one not; each workflow is pinned to its worker's group
            stack.start_node("worker", "worker-cached", [*quiet, "worker.max_cpu_load_avg=100000",
                                                         "worker.group=cached",
                                                         f"storage.cache_dir={base / 'cache'}"])  # fmt: skip
            stack.start_node("worker", "worker-uncached", [*quiet, "worker.max_cpu_load_avg=100000",
                                                           "worker.group=uncached", "storage.cache_max_bytes=0",
                                                           f"worker.exec_dir={base / 'exec2'}",
                                                           f"worker.spool_dir={base / 'spool2'}"])  # fmt: skip
            port = stack.api_port()
            api = stack.start_node("api", "api", [*quiet, *limits], port=port)
            url = f"http://127.0.0.1:{port}"
            token = asyncio.run(_prepare(dsn))
            big = base / "big.bin"
            sha = _make_file(big, params["size_mib"])
            api_proc = psutil.Process(api.popen.pid)
            result["api_rss_before_mib"] = api_proc.memory_info().rss / (1 << 20)
            with PeakRss(api.popen.pid) as up:
                t0 = time.monotonic()
                stored = _upload(url, token, big, "big.bin")
                result["upload_s"] = time.monotonic() - t0
            result["upload_api_peak_rss_mib"] = up.peak / (1 << 20)
            result["upload_mib_per_s"] = params["size_mib"] / result["upload_s"]
            result["upload_checksum_ok"] = float(stored["sha256"] == sha)
            big.unlink()
            with PeakRss(api.popen.pid) as down:
                t0 = time.monotonic()
                got = _download(url, token, "big.bin", base / "back.bin")
                result["download_s"] = time.monotonic() - t0
            result["download_api_peak_rss_mib"] = down.peak / (1 << 20)
            result["download_mib_per_s"] = params["size_mib"] / result["download_s"]
            result["download_checksum_ok"] = float(got == sha)
            (base / "back.bin").unlink()
            small = base / "lib.bin"
            small.write_bytes(os.urandom(params["task_file_kib"] << 10))
            _upload(url, token, small, "lib.bin")
            codes = {kind: asyncio.run(_save(dsn, f"res_{kind}", "lib.bin", kind)) for kind in ("cached", "uncached")}
            result |= asyncio.run(_task_starts(dsn, codes, params["runs"]))
        finally:
            stack.stop_all()
    return rounded(result)


if __name__ == "__main__":
    main(run)
