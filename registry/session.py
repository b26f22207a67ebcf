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

The keep-alive runs in a thread of its own, with its own event loop and etcd connection, so a node
whose main loop is saturated with work (hundreds of task processes starting) still renews its lease
on time instead of losing it and fencing itself — DolphinScheduler's "fake death" (#8110). State
changes are handed to the main loop with ``call_soon_threadsafe``.

The thread also watches the main loop's liveness: a timer callback on the main loop stamps
``_last_tick`` a few times a second, and the thread renews only while that stamp is younger than
``loop_stall_limit``. A loop that is busy still ticks between its callbacks; a loop wedged for good (a
blocking call, a deadlock) stops ticking, its lease expires, and its peers fail it over (a worker's
reaper, told nothing more, kills its tasks). A loop that recovers before the lease runs out is renewed
again and loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import threading
import time
from collections.abc import Callable
from typing import Any

from core import logs
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


#: longest pause between two ticks of the main loop's liveness stamp
TICK_INTERVAL = 0.25


class Session:
    """A lease and its keep-alive task."""

    def __init__(
        self,
        client: EtcdClient,
        ttl: float,
        keepalive_interval: float,
        clock: Callable[[], float] = time.monotonic,
        loop_stall_limit: float = 0,
    ) -> None:
        if keepalive_interval >= ttl:
            raise ValueError("keepalive_interval must be below ttl")
        self.client = client
        self.ttl = ttl
        self.keepalive_interval = keepalive_interval
        #: renew only while the main loop ticked within this many seconds (0 = a third of the TTL)
        self.loop_stall_limit = loop_stall_limit or ttl / 3
        self._clock = clock
        #: when the main loop last ran the tick callback (written on the loop, read by the thread)
        self._last_tick = 0.0
        self._tick_every = min(TICK_INTERVAL, self.loop_stall_limit / 4)
        self._tick_handle: asyncio.TimerHandle | None = None
        self.state = SessionState.CONNECTING
        #: lease id granted by etcd (0 before start)
        self.lease_id = 0
        #: set once the session is LOST (or closed); work needing liveness waits on it
        self.lost = asyncio.Event()
        self._listeners: list[Listener] = []
        #: send time of the last keep-alive etcd answered with a live lease (written by the thread)
        self._last_ok = 0.0
        #: called from the keep-alive thread after each renewal with the seconds the lease has left
        #: (must be thread-safe and quick: the worker's task reaper uses it)
        self.renewed: list[Callable[[float], None]] = []
        self._main_loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None
        self._thread_stop: asyncio.Event | None = None
        self._thread_ready = threading.Event()

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> Session:
        """Grant the lease and start keeping it alive; raises RegistryUnavailable if etcd is down."""
        self._check("start", SessionState.CONNECTING)
        sent = self._clock()
        self.lease_id, granted = await self.client.grant(self.ttl)
        self.ttl = float(granted)
        self._last_ok = sent
        self._main_loop = asyncio.get_running_loop()
        self._tick()
        self._set(SessionState.CONNECTED)
        self._thread = threading.Thread(target=self._thread_main, name=f"keepalive-{self.lease_id:x}", daemon=True)
        self._thread.start()
        log.info("session started", lease=f"{self.lease_id:x}", ttl=self.ttl)
        return self

    async def close(self, revoke: bool = True) -> None:
        """Stop keeping the lease alive and (by default) revoke it. Idempotent."""
        if self.state is SessionState.CLOSED:
            return
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None
        await self._stop_thread()
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

    def fence(self, reason: str) -> None:
        """Judge the session LOST now (on the main loop): something showed its work is no longer ours."""
        if self.alive:
            log.error("session fenced", lease=f"{self.lease_id:x}", reason=reason)
            self._set(SessionState.LOST)

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

    def _tick(self) -> None:
        """On the main loop: stamp its liveness and come back in a moment."""
        self._last_tick = self._clock()
        assert self._main_loop is not None
        self._tick_handle = self._main_loop.call_later(self._tick_every, self._tick)

    def loop_stalled_for(self) -> float:
        """Seconds since the main loop last ticked (thread-safe: one float read)."""
        return self._clock() - self._last_tick

    # -- the keep-alive thread ---------------------------------------------------------------------

    def _post(self, new: SessionState) -> None:
        """From the keep-alive thread: apply a state change on the main loop."""
        loop = self._main_loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._apply_from_thread, new)

    def _apply_from_thread(self, new: SessionState) -> None:
        if self.state in (SessionState.CLOSED, SessionState.LOST) or new is self.state:
            return
        self._set(new)

    def _thread_main(self) -> None:
        asyncio.run(self._thread_run())

    async def _thread_run(self) -> None:
        self._thread_loop = asyncio.get_running_loop()
        self._thread_stop = asyncio.Event()
        self._thread_ready.set()
        client = EtcdClient(self.client.endpoints, self.client.request_timeout, self.client.access)
        try:
            lost = await self._keepalive_loop(client)
        finally:
            await client.close()
        if lost:
            self._post(SessionState.LOST)

    async def _stop_thread(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        await asyncio.to_thread(self._thread_ready.wait, 5)
        loop, stop = self._thread_loop, self._thread_stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        await asyncio.to_thread(thread.join, 10)

    async def _keepalive_loop(self, client: EtcdClient) -> bool:
        """Renew until stopped (returns False) or until the lease is judged lost (returns True)."""
        assert self._thread_stop is not None
        retry = min(self.keepalive_interval, 0.5)
        suspended = stalled = False
        while True:
            wait = retry if suspended or stalled else self.keepalive_interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._thread_stop.wait(), max(0.0, min(wait, self.remaining())))
            if self._thread_stop.is_set():
                return False
            if self.remaining() <= 0:
                return True
            if self.loop_stalled_for() > self.loop_stall_limit:
                if not stalled:
                    stalled = True
                    log.error(
                        "event loop stalled: no longer renewing the lease",
                        lease=f"{self.lease_id:x}",
                        stalled_s=round(self.loop_stalled_for(), 2),
                        expires_in_s=round(self.remaining(), 2),
                    )
                continue
            if stalled:
                stalled = False
                log.warning("event loop ticking again: renewing the lease", lease=f"{self.lease_id:x}")
            sent = self._clock()
            try:
                # every endpoint may be tried (one may hang in an election), all within the lease's time
                ttl = await client.keepalive_once(self.lease_id, timeout=max(0.05, self.remaining()))
            except RegistryUnavailable as exc:
                if self.remaining() <= 0:
                    return True
                if not suspended:
                    suspended = True
                    log.warning("keep-alive failing", lease=f"{self.lease_id:x}", error=str(exc))
                    self._post(SessionState.SUSPENDED)
                continue
            if ttl <= 0:
                log.error("lease no longer exists", lease=f"{self.lease_id:x}")
                return True
            self._last_ok = sent
            for hook in self.renewed:
                hook(self.remaining())
            if suspended:
                suspended = False
                self._post(SessionState.CONNECTED)
