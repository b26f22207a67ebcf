"""The failover lock against a real etcd: mutual exclusion across processes and under a property
test, hand-over when the holder dies, timeouts and ownership errors."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.infra.etcd import EtcdServer
from registry import EtcdClient, Lock, LockTimeout, NotLockOwner, Session
from tests import tls
from tests.helpers import ROOT


def _contender(endpoint: str, key: str, marker: str, iterations: int, hold_ms: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.lock_contender",
            endpoint,
            key,
            marker,
            str(iterations),
            str(hold_ms),
            *extra,
        ],
        cwd=ROOT,
        env={**os.environ, **tls.registry_env()},  # its etcd client's TLS files and user, with TLS on
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_lock_is_mutually_exclusive_across_processes(etcd_server: EtcdServer, etcd_root: str) -> None:
    key, marker = f"{etcd_root}/lock/failover/master/x:1", f"{etcd_root}/inside"
    procs = [_contender(etcd_server.endpoint, key, marker, 15, 20) for _ in range(5)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    for proc, out in zip(procs, outputs, strict=True):
        assert "VIOLATION" not in out, out
        assert proc.returncode == 0, out
        assert out.count("ACQUIRED") == 15 and "DONE" in out


def test_lock_passes_on_when_the_holder_is_killed(etcd_server: EtcdServer, etcd_root: str) -> None:
    key, marker = f"{etcd_root}/lock/failover/master/y:1", f"{etcd_root}/inside"
    holder = _contender(etcd_server.endpoint, key, marker, 1, 0, "hold-forever")
    assert holder.stdout is not None
    assert "ACQUIRED" in (line.strip() for line in holder.stdout)

    async def contend() -> float:
        client = EtcdClient([etcd_server.endpoint], access=tls.etcd_access())
        session = await Session(client, ttl=2, keepalive_interval=0.5).start()
        lock = Lock(session, key, "test")
        assert not await lock.try_acquire()
        holder.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        await lock.acquire(timeout=10)
        took = time.monotonic() - killed
        assert lock.held
        await lock.release()
        await session.close()
        await client.close()
        return took

    took = asyncio.run(contend())
    holder.communicate(timeout=10)
    assert took <= 2 + 1, f"lock passed on after {took:.2f}s with the holder's TTL at 2s"


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    holds=st.lists(st.lists(st.integers(0, 15), min_size=1, max_size=4), min_size=2, max_size=5),
)
def test_property_never_two_holders(etcd_server: EtcdServer, holds: list[list[int]]) -> None:
    """Any number of contenders (own sessions), each taking the lock a few times with random hold
    times: the count of holders inside the critical section never exceeds one."""
    key = f"/prop-{uuid.uuid4().hex[:8]}/lock"

    async def run() -> int:
        inside = 0
        most = 0
        client = EtcdClient([etcd_server.endpoint], access=tls.etcd_access())

        async def contender(plan: list[int]) -> None:
            nonlocal inside, most
            session = await Session(client, ttl=3, keepalive_interval=0.5).start()
            lock = Lock(session, key, "c")
            for hold in plan:
                await lock.acquire(timeout=30)
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(hold / 1000)
                inside -= 1
                await lock.release()
            await session.close()

        await asyncio.gather(*(contender(plan) for plan in holds))
        await client.close()
        return most

    assert asyncio.run(run()) == 1


async def test_timeouts_and_ownership_errors(etcd: EtcdClient, etcd_root: str) -> None:
    key = f"{etcd_root}/lock/t"
    a = await Session(etcd, ttl=2, keepalive_interval=0.5).start()
    b = await Session(etcd, ttl=2, keepalive_interval=0.5).start()
    la, lb = Lock(a, key, "a"), Lock(b, key, "b")
    await la.acquire(timeout=1)
    assert await la.try_acquire()  # re-entrant for the same session
    started = time.monotonic()
    with pytest.raises(LockTimeout):
        await lb.acquire(timeout=0.5)
    assert time.monotonic() - started < 2
    with pytest.raises(NotLockOwner):
        await lb.release()
    # release wakes a waiter at once (no TTL wait)
    waiter = asyncio.ensure_future(lb.acquire(timeout=5))
    await asyncio.sleep(0.1)
    assert not waiter.done()
    await la.release()
    await asyncio.wait_for(waiter, 2)
    assert lb.held
    # a lock whose session is gone is not owned any more
    await b.orphan()
    assert not lb.held
    await a.close()
