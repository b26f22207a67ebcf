"""A lease-bound lock (the failover lock of a dead node).

Acquire = create the key with this session's lease in a transaction that requires
``create_revision == 0``. If another session holds it, read the holder's key and watch it from the
read's revision + 1 until it is deleted (released, or its holder's lease expired), then try again.
The holder's death releases the lock by itself: its lease expires and etcd deletes the key.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from core import logs
from registry.errors import LockTimeout, NotLockOwner, RegistryUnavailable
from registry.session import Session

log = logs.get(__name__)


class Lock:
    def __init__(self, session: Session, key: str, owner: str) -> None:
        self.session = session
        self.key = key
        self.owner = owner
        #: create revision of our key while we hold the lock (0 when not held)
        self.revision = 0

    @property
    def held(self) -> bool:
        return self.revision != 0 and self.session.alive

    async def try_acquire(self) -> bool:
        """One attempt, no waiting."""
        self.session.require_alive()
        created, holder, revision = await self.session.client.put_if_absent(
            self.key, self.owner, lease=self.session.lease_id
        )
        if created:
            self.revision = revision
            return True
        if holder is not None and holder.lease == self.session.lease_id:
            self.revision = holder.create_revision  # already ours (re-entrant acquire)
            return True
        return False

    async def acquire(self, timeout: float) -> None:
        """Acquire, waiting for the holder to release or die; raises LockTimeout after ``timeout``."""
        deadline = time.monotonic() + timeout
        client = self.session.client
        while True:
            self.session.require_alive()
            created, holder, revision = await client.put_if_absent(self.key, self.owner, lease=self.session.lease_id)
            if created:
                self.revision = revision
                log.info("lock acquired", key=self.key)
                return
            if holder is not None and holder.lease == self.session.lease_id:
                self.revision = holder.create_revision
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LockTimeout(f"lock {self.key} not acquired within {timeout:.1f}s")
            if holder is None:
                continue  # released between our compare and our read
            try:
                await asyncio.wait_for(client.wait_deleted(self.key, revision + 1), remaining)
            except TimeoutError:
                raise LockTimeout(f"lock {self.key} not acquired within {timeout:.1f}s") from None
            except RegistryUnavailable:
                await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    async def release(self) -> None:
        """Delete the key if it is still ours; raises NotLockOwner otherwise."""
        if not self.revision:
            raise NotLockOwner(f"lock {self.key} is not held")
        revision, self.revision = self.revision, 0
        deleted = await self.session.client.delete_if_created_at(self.key, revision)
        if not deleted:
            raise NotLockOwner(f"lock {self.key} was no longer ours when released")
        log.info("lock released", key=self.key)

    async def __aenter__(self) -> Lock:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.revision:
            with contextlib.suppress(NotLockOwner, RegistryUnavailable):
                await self.release()
