"""Engine figures across hosts (tests/hosts.py: 3 network namespaces on a bridge, a 3-member etcd
cluster, a master and a worker per host, PostgreSQL on its own host), first with no added delay, then
with ``tc netem delay`` on every host's link (host to host: that delay each way), measured from the
database's timestamps like bench/engine.py, whose loopback figures they sit next to:

- chain latency: a chain of SHELL ``true`` tasks; gap between one task's end and the next one's start;
- throughput: W workflows of T independent SHELL ``true`` tasks started at once; tasks per second.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import asyncpg

from bench.common import main, rounded, workdir
from bench.engine import _chain, _save, _start, _task_span, _wait_done
from engine.workflows.model import TaskDef
from tests.hosts import HostCluster, NetemUnavailable

SIZES = {
    "tiny": {"chain": 5, "workflows": 2, "tasks": 10, "delays_ms": (0, 20)},
    "full": {"chain": 50, "workflows": 20, "tasks": 50, "delays_ms": (0, 20)},
}


async def _throughput(dsn: str, workflows: int, tasks: int) -> dict[str, float]:
    code = await _save(
        dsn, f"wide-{os.urandom(3).hex()}", [TaskDef(f"t{i}", "SHELL", {"rawScript": "true"}) for i in range(tasks)]
    )
    conn = await asyncpg.connect(dsn)
    try:
        done = await _wait_done(conn, await _start(conn, code, workflows), 900)
        span = await _task_span(conn, done)
    finally:
        await conn.close()
    return {
        "throughput_tasks_per_s": int(span["n"]) / (span["last"] - span["first"]).total_seconds(),
        "throughput_all_success": float(all(r["state"] == 7 for r in done)),
    }


def run(size: str = "full") -> dict[str, Any]:
    params = SIZES[size]
    result: dict[str, Any] = {"benchmark": "hosts", "size": size, "hosts": 3}
    with workdir() as base:
        cluster = HostCluster(base, hosts=3, ttl=15.0, exec_slots="100")
        try:
            cluster.up()
            assert cluster.pg is not None
            dsn = cluster.pg.dsn
            for delay in params["delays_ms"]:
                tag = f"delay_{delay}ms"
                try:
                    cluster.net.delay(delay)
                except NetemUnavailable as exc:
                    result[tag] = f"not measured: {exc}"
                    continue
                chain = asyncio.run(_chain(dsn, params["chain"]))
                result |= {f"{tag}_{k}": v for k, v in chain.items() if k != "chain_tasks"}
                wide = asyncio.run(_throughput(dsn, params["workflows"], params["tasks"]))
                result |= {f"{tag}_{k}": v for k, v in wide.items()}
        finally:
            cluster.down()
    return rounded(result)


if __name__ == "__main__":
    main(run)
