"""The random fault soak across hosts (``make chaos HOSTS=3``): the ledger workload of
tests/host_workload.py on tests/hosts.py's cluster while a seeded driver, every few seconds, kills a
whole host (SIGKILL: nodes, etcd member, tasks; then starts them again on the same address), cuts a
host's link for a while, or partitions a host from PostgreSQL; then the chaos ledger's checks.

``python -m tests.hosts_chaos --hosts 3 --workflows 40 --seed 7``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from core import logs
from tests.host_workload import TaskSampler, Workload
from tests.hosts import HostCluster

TTL = 3.0


def _restart_host(cluster: HostCluster, name: str) -> None:
    server = cluster.etcd[name]
    if server.proc is not None and server.proc.popen is not None:
        server.proc.popen.wait(10)
    cluster.record(server.start(wait=False))  # rejoins with its data directory
    for role in ("master", "worker"):
        old = (cluster.masters if role == "master" else cluster.workers)[name]
        if old.proc.popen is not None:
            old.proc.popen.wait(10)
        cluster.start_node(role, name, port=old.port)  # the same address


async def _driver(cluster: HostCluster, rng: random.Random, done: asyncio.Event, faults: dict[str, int]) -> None:
    while not done.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), rng.uniform(3.0, 6.0))
        if done.is_set():
            return
        name = rng.choice(cluster.names)
        kind = rng.choice(["kill host", "cut link", "partition from postgres"])
        faults[kind] = faults.get(kind, 0) + 1
        if kind == "kill host":
            cluster.kill_host(name)
            await asyncio.sleep(rng.uniform(0.5, TTL + 2))
            await asyncio.to_thread(_restart_host, cluster, name)
        elif kind == "cut link":
            cluster.net.cut(name)
            await asyncio.sleep(rng.uniform(0.5, 2 * TTL))  # shorter or longer than the lease
            cluster.net.restore(name)
        else:
            cluster.net.block(name, ["db"])
            await asyncio.sleep(rng.uniform(0.5, 2 * TTL))
            cluster.net.unblock(name, ["db"])


async def run(base: Path, hosts: int, workflows: int, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    cluster = HostCluster(base, hosts=hosts, ttl=TTL, on_lost="reregister", exec_slots="16")
    faults: dict[str, int] = {}
    started = time.monotonic()
    try:
        await asyncio.to_thread(cluster.up)
        work = Workload(cluster)
        with TaskSampler(base) as sampler:
            done = asyncio.Event()
            driver = asyncio.create_task(_driver(cluster, rng, done, faults))
            try:
                for _ in range(0, workflows, 4):
                    await work.submit(workflows=4, width=3, sleep=rng.uniform(0.5, 2.0))
                    await asyncio.sleep(rng.uniform(1.0, 3.0))
                await work.wait_all(600 + 10 * workflows)
            finally:
                done.set()
                await driver
            summary = await work.check(sampler)
        work.stop_and_check_nothing_left(summary)
    finally:
        await asyncio.to_thread(cluster.down)
    summary.seed = seed
    summary.faults.update(faults)
    summary.seconds = time.monotonic() - started
    return {"hosts": hosts, **json.loads(summary.text())}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.hosts_chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--workflows", type=int, default=40)
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    args = parser.parse_args()
    logs.configure("console", "warning")
    base = Path(tempfile.mkdtemp(prefix="porpoise-hosts-chaos-"))
    os.chmod(base, 0o755)
    result = asyncio.run(run(base, args.hosts, args.workflows, args.seed))
    print(result)
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
