"""A lock contender process for tests/test_registry_lock.py.

usage: python -m tests.lock_contender ENDPOINT LOCK_KEY MARKER_KEY ITERATIONS HOLD_MS [hold-forever]

Each iteration acquires the lock, then creates MARKER_KEY only if absent (an etcd transaction): if the
marker already exists, another process is inside the critical section at the same time, and this
prints VIOLATION. Prints ACQUIRED for each entry and DONE at the end.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys

from core import logs
from registry import EtcdClient, Lock, Session
from tests import tls


async def main(endpoint: str, key: str, marker: str, iterations: int, hold_ms: int, forever: bool) -> int:
    client = EtcdClient([endpoint], request_timeout=2, access=tls.etcd_access_of(os.environ))
    session = await Session(client, ttl=2, keepalive_interval=0.5).start()
    lock = Lock(session, key, owner=f"pid-{os.getpid()}")
    violations = 0
    rng = random.Random(os.getpid())
    for _ in range(iterations):
        await lock.acquire(timeout=60)
        created, holder, _ = await client.put_if_absent(marker, str(os.getpid()), lease=session.lease_id)
        if not created:
            violations += 1
            print(f"VIOLATION held by {holder.value if holder else '?'}", flush=True)
        print("ACQUIRED", flush=True)
        if forever:
            await asyncio.Event().wait()
        await asyncio.sleep(rng.uniform(0, hold_ms / 1000))
        if created:
            await client.delete(marker)
        await lock.release()
    print("DONE", flush=True)
    await session.close()
    await client.close()
    return 1 if violations else 0


if __name__ == "__main__":
    logs.configure("json", "warning")
    a = sys.argv
    sys.exit(asyncio.run(main(a[1], a[2], a[3], int(a[4]), int(a[5]), len(a) > 6 and a[6] == "hold-forever")))
