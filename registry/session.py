"""One Session per node process: one lease, kept alive, with a locally judged liveness state.

States::

    CONNECTING --start()--> CONNECTED <--keep-alive ok-- SUSPENDED
                              |  keep-alive failing  -->  |
                              |                           | no successful keep-alive for a TTL,
                              v                           v or etcd says the lease is gone
                            CLOSED (close/orphan)        LOST  (terminal: build a new Session)

LOST is judged locally, from the send time of the last keep-alive etcd answered: etcd cannot expire
the lease before that time + TTL, so a node that stops acting on LOST stops no later than the moment
its peers may consider it dead (invariant 6).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from collections.abc import Callable
from typing import Any

from engine import logs
from registry.client import EtcdClient
from registry.errors import LeaseLost, RegistryUnavailable

log = logs.get(__name__)


class SessionState(enum.Enum):
    CONNECTING = "CONNECTING"
    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"
    CLOSED = "CLOSED"


_ALLOWED: dict[SessionState, set[SessionState]] = {
    SessionState.CONNECTING: {SessionState.CONNECTED, SessionState.CLOSED},
    SessionState.CONNECTED: {SessionState.SUSPENDED, SessionState.LOST, SessionState.CLOSED},
    SessionState.SUSPENDED: {SessionState.CONNECTED, SessionState.LOST, SessionState.CLOSED},
    SessionState.LOST: {SessionState.CLOSED},
    SessionState.CLOSED: set(),
}

Listener = Callable[[SessionState], Any]


class Session:
    """A lease and its keep-alive task."""

    def __init__(
        self,
        client: EtcdClient,
        ttl: float,
        keepalive_interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if keepalive_interval >= ttl:
            raise ValueError("keepalive_interval must be below ttl")
        self.client = client
        self.ttl = ttl
        self.keepalive_interval = keepalive_interval
        self._clock = clock
        self.state = SessionState.CONNECTING
        #: lease id granted by etcd (0 before start)
        self.lease_id = 0
        #: set once the session is LOST (or closed); work needing liveness waits on it
        self.lost = asyncio.Event()
        self._listeners: list[Listener] = []
        self._task: asyncio.Task[None] | None = None
        #: send time of the last keep-alive etcd answered with a live lease
        self._last_ok = 0.0

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> Session:
        """Grant the lease and start keeping it alive; raises RegistryUnavailable if etcd is down."""
        self._check("start", SessionState.CONNECTING)
        sent = self._clock()
        self.lease_id, granted = await self.client.grant(self.ttl)
        self.ttl = float(granted)
        self._last_ok = sent
        self._set(SessionState.CONNECTED)
        self._task = asyncio.create_task(self._keepalive_loop(), name=f"session-keepalive-{self.lease_id:x}")
        log.info("session started", lease=f"{self.lease_id:x}", ttl=self.ttl)
        return self

    async def close(self, revoke: bool = True) -> None:
        """Stop keeping the lease alive and (by default) revoke it. Idempotent."""
        if self.state is SessionState.CLOSED:
            return
        await self._stop_task()
        if revoke and self.lease_id and self.state in (SessionState.CONNECTED, SessionState.SUSPENDED):
            with contextlib.suppress(RegistryUnavailable):
                await self.client.revoke(self.lease_id)
        self._set(SessionState.CLOSED)

    async def orphan(self) -> None:
        """Stop refreshing without revoking: the lease dies at its TTL (crash-like exit, tests)."""
        await self.close(revoke=False)

    # -- observers --------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(state)`` on every state change; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    @property
    def alive(self) -> bool:
        return self.state in (SessionState.CONNECTED, SessionState.SUSPENDED)

    def require_alive(self) -> None:
        if not self.alive:
            raise LeaseLost(f"session lease {self.lease_id:x} is {self.state.value}")

    def remaining(self) -> float:
        """Seconds until the lease may expire, judged locally."""
        return self._last_ok + self.ttl - self._clock()

    # -- internals --------------------------------------------------------------------------------

    def _check(self, op: str, *states: SessionState) -> None:
        if self.state not in states:
            raise RuntimeError(f"cannot {op} a session in state {self.state.value}")

    def _set(self, new: SessionState) -> None:
        old = self.state
        if new is old:
            return
        if new not in _ALLOWED[old]:
            raise RuntimeError(f"illegal session transition {old.value} -> {new.value}")
        self.state = new
        if new in (SessionState.LOST, SessionState.CLOSED):
            self.lost.set()
        log.info("session state", lease=f"{self.lease_id:x}", old=old.value, new=new.value)
        for listener in list(self._listeners):
            try:
                listener(new)
            except Exception:
                log.exception("session listener failed", state=new.value)

    async def _stop_task(self) -> None:
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _keepalive_loop(self) -> None:
        retry = min(self.keepalive_interval, 0.5)
        while True:
            wait = self.keepalive_interval if self.state is SessionState.CONNECTED else retry
            await asyncio.sleep(max(0.0, min(wait, self.remaining())))
            if self.remaining() <= 0:
                break
            sent = self._clock()
            try:
                ttl = await self.client.keepalive_once(
                    self.lease_id, timeout=max(0.05, min(self.client.request_timeout, self.remaining()))
                )
            except RegistryUnavailable as exc:
                if self.remaining() <= 0:
                    break
                if self.state is SessionState.CONNECTED:
                    log.warning("keep-alive failing", lease=f"{self.lease_id:x}", error=str(exc))
                    self._set(SessionState.SUSPENDED)
                continue
            if ttl <= 0:
                log.error("lease no longer exists", lease=f"{self.lease_id:x}")
                break
            self._last_ok = sent
            self._set(SessionState.CONNECTED)
        self._task = None
        self._set(SessionState.LOST)
