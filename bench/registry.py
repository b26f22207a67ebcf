"""Registry benchmark: how fast the cluster notices a node dying and a node changing.

- detection: real worker processes registered with the benchmarks' lease TTL (BENCH_TTL); one is killed with
  kill -9; time until an observer's membership view emits REMOVED (the first half of failover).
- propagation: heartbeat writes of one node -> the observer's UPDATED event (p50/p99).
- lock handover: release by one session -> acquisition by a waiting session (p50/p99).
"""

from __future__ import annotations

import asyncio
import secrets
import signal
import sys
import time
from pathlib import Path

from bench.common import BENCH_TTL, bench_config, main, percentile, private_etcd, rounded, workdir
from engine.infra.ports import free_port
from engine.infra.process import ManagedProcess, wait_until
from engine.infra.stack import registry_timing_env
from registry import ChangeKind, EtcdClient, Heartbeat, Lock, MembershipView, NodeChange, Session

SIZES = {
    "tiny": {"kills": 1, "updates": 20, "handovers": 10},
    "full": {"kills": 5, "updates": 500, "handovers": 200},
}


#: the bench workers' shared RPC secret (a node refuses a short one)
BENCH_SECRET = secrets.token_urlsafe(32)


def _spawn_worker(endpoint: str, root: str, base: Path, i: int) -> ManagedProcess:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("PORPOISE_")}
    env |= {
        "PORPOISE_REGISTRY_ENDPOINTS": endpoint,
        "PORPOISE_REGISTRY_ROOT": root,
        "PORPOISE_RPC_SECRET": BENCH_SECRET,
        **registry_timing_env(bench_config()),
    }
    port = free_port()
    argv = [sys.executable, "-m", "engine.worker", "--set", f"worker.listen_port={port}"]
    argv += ["--set", "worker.advertise_host=127.0.0.1"]
    proc = ManagedProcess(f"worker-{i}", argv, base / "logs" / f"worker-{i}.log", env=env)
    proc.start()
    return proc


async def _detection(endpoint: str, base: Path, kills: int) -> dict[str, float]:
    ttl = BENCH_TTL
    client = EtcdClient([endpoint])
    times: list[float] = []
    for i in range(kills):
        root = f"/bench-detect-{i}"
        view = MembershipView(client, root)
        added, removed = asyncio.Event(), asyncio.Event()

        def on_change(c: NodeChange, added: asyncio.Event = added, removed: asyncio.Event = removed) -> None:
            (removed if c.kind is ChangeKind.REMOVED else added).set()

        view.subscribe(on_change)
        await view.start()
        proc = _spawn_worker(endpoint, root, base, i)
        await asyncio.wait_for(added.wait(), 30)
        assert proc.record is not None
        killed = time.monotonic()
        proc.record.signal(signal.SIGKILL)
        await asyncio.wait_for(removed.wait(), ttl + 10)
        times.append(time.monotonic() - killed)
        await asyncio.to_thread(proc.stop, 5)  # reap it
        await view.close()
    await client.close()
    return {
        "lease_ttl_s": ttl,
        "kill_to_removed_mean_s": sum(times) / len(times),
        "kill_to_removed_max_s": max(times),
    }


async def _propagation(endpoint: str, updates: int) -> dict[str, float]:
    client = EtcdClient([endpoint])
    root = "/bench-propagation"
    view = MembershipView(client, root)
    seen: asyncio.Queue[float] = asyncio.Queue()

    def on_change(change: NodeChange) -> None:
        seen.put_nowait(time.perf_counter())

    view.subscribe(on_change)
    await view.start()
    lat: list[float] = []
    key = f"{root}/nodes/worker/default/127.0.0.1:1"
    for i in range(updates):
        hb = Heartbeat(1, i, 0.1, 0.1, 0.1, 1.0, 1.0, 1)
        sent = time.perf_counter()
        await client.put(key, hb.to_json())
        lat.append((await asyncio.wait_for(seen.get(), 5)) - sent)
    await view.close()
    await client.close()
    return {"update_p50_ms": percentile(lat, 50) * 1000, "update_p99_ms": percentile(lat, 99) * 1000}


async def _handover(endpoint: str, rounds: int) -> dict[str, float]:
    client = EtcdClient([endpoint])
    a = await Session(client, ttl=5, keepalive_interval=1).start()
    b = await Session(client, ttl=5, keepalive_interval=1).start()
    lat: list[float] = []
    for i in range(rounds):
        key = f"/bench-lock/{i}"
        la, lb = Lock(a, key, "a"), Lock(b, key, "b")
        await la.acquire(timeout=5)
        waiter = asyncio.ensure_future(lb.acquire(timeout=10))
        await asyncio.sleep(0.01)
        released = time.perf_counter()
        await la.release()
        await waiter
        lat.append(time.perf_counter() - released)
        await lb.release()
    await a.close()
    await b.close()
    await client.close()
    return {
        "lock_handover_p50_ms": percentile(lat, 50) * 1000,
        "lock_handover_p99_ms": percentile(lat, 99) * 1000,
    }


def run(size: str = "full") -> dict[str, object]:
    params = SIZES[size]
    with workdir() as base, private_etcd(base) as etcd:
        wait_until(etcd.healthy, 10, what="etcd")
        result: dict[str, object] = {"benchmark": "registry", "size": size}
        result |= asyncio.run(_detection(etcd.endpoint, base, params["kills"]))
        result |= asyncio.run(_propagation(etcd.endpoint, params["updates"]))
        result |= asyncio.run(_handover(etcd.endpoint, params["handovers"]))
    return rounded(result)


if __name__ == "__main__":
    main(run)
