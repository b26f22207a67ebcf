"""Engine figures across hosts (tests/hosts.py: 3 network namespaces, a 3-member etcd cluster, a
master and a worker per host, PostgreSQL on its own host), with no added delay and with a delay on
every link (host to host: that delay each way), measured from the database's timestamps like
bench/engine.py, whose loopback figures they sit next to:

- chain latency: a chain of SHELL ``true`` tasks; gap between one task's end and the next one's start;
- throughput: W workflows of T independent SHELL ``true`` tasks started at once; tasks per second;
- ping: ICMP round trips from host h1 to host h2 (tests/netprobe.py), a sanity figure for the link.

Each figure's key names the link layer that gave it: ``bridge_`` (the kernel's bridge and veths; its
delays through ``tc netem``) or ``switch_`` (tests/delay_switch.py, the user-space switch holding every
frame). The bridge round always runs at 0 ms; a delay the kernel cannot add (no ``sch_netem``) is
measured on a second cluster joined by the switch, which also measures 0 ms, so the delayed figures
sit next to undelayed ones from the same link layer.
"""

from __future__ import annotations

import asyncio
import os
import statistics
from pathlib import Path
from typing import Any

import asyncpg

from bench.common import main, rounded, workdir
from bench.engine import _chain, _save, _start, _task_span, _wait_done
from engine.states import WorkflowState
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
        "throughput_all_success": float(all(r["state"] == WorkflowState.SUCCESS for r in done)),
    }


def _round(cluster: HostCluster, params: dict[str, Any]) -> dict[str, Any]:
    """The figures of one delay on a running cluster."""
    assert cluster.pg is not None
    dsn = cluster.pg.dsn
    ping = cluster.net.probe("h1", "ping", cluster.net.host("h2").address, "--count", "5", "--timeout", "2")
    rtts = ping["rtt_ms"]
    figures: dict[str, Any] = {
        "ping_rtt_ms_median": statistics.median(rtts) if rtts else None,
        "ping_lost": ping["lost"],
    }
    figures |= {k: v for k, v in asyncio.run(_chain(dsn, params["chain"])).items() if k != "chain_tasks"}
    return figures | asyncio.run(_throughput(dsn, params["workflows"], params["tasks"]))


def _measure(base: Path, params: dict[str, Any], link: str, delays: list[int]) -> tuple[dict[str, Any], list[int]]:
    """Each of ``delays`` on one cluster joined by ``link``: its figures, and the delays it cannot add."""
    result: dict[str, Any] = {}
    missing = []
    cluster = HostCluster(base / link, hosts=3, ttl=15.0, link=link, exec_slots="100")
    try:
        cluster.up()
        for delay in delays:
            tag = f"{link}_delay_{delay}ms"
            try:
                cluster.net.delay(delay)
            except NetemUnavailable as exc:
                result[tag] = f"not measured: {exc}"
                missing.append(delay)
                continue
            result |= {f"{tag}_{k}": v for k, v in _round(cluster, params).items()}
    finally:
        cluster.down()
    return result, missing


def run(size: str = "full") -> dict[str, Any]:
    params = SIZES[size]
    result: dict[str, Any] = {"benchmark": "hosts", "size": size, "hosts": 3}
    with workdir() as base:
        for link in ("bridge", "switch"):
            (base / link).mkdir(mode=0o755)  # PostgreSQL runs as its own user under it
        figures, missing = _measure(base, params, "bridge", list(params["delays_ms"]))
        result |= figures
        if missing:  # no sch_netem: the delays through the switch, beside its own undelayed round
            result |= _measure(base, params, "switch", sorted({0, *missing}))[0]
    return rounded(result)


if __name__ == "__main__":
    main(run)
