"""A node's presence in the registry: one client, one session, its registration and the membership view."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from core import logs
from registry.client import EtcdAccess, EtcdClient
from registry.heartbeat import Heartbeat, Registration
from registry.keys import NodeId, failover_lock_key, job_lock_key, node_key
from registry.lock import Lock
from registry.membership import MembershipView
from registry.session import Session, SessionState

log = logs.get(__name__)


class RegistrySettings(Protocol):
    """What a node's presence reads from its configuration: the ``registry`` section (engine.config's
    RegistryConfig, which the engine hands in; the registry does not import the engine)."""

    endpoints: list[str]
    root: str
    lease_ttl: float
    keepalive_interval: float
    heartbeat_interval: float
    request_timeout: float
    tls_ca: str
    tls_cert: str
    tls_key: str
    user: str
    password: str

    def stall_limit(self) -> float: ...


class RegistryNode:
    """Starts in order (session, registration, membership) and closes in reverse; close is idempotent."""

    def __init__(
        self,
        cfg: RegistrySettings,
        node: NodeId,
        heartbeat: Callable[[], Awaitable[Heartbeat]],
        client: EtcdClient | None = None,
    ) -> None:
        self.cfg = cfg
        self.node = node
        self.client = client or EtcdClient(cfg.endpoints, cfg.request_timeout, EtcdAccess.of(cfg))
        self._own_client = client is None
        self.session = Session(self.client, cfg.lease_ttl, cfg.keepalive_interval, loop_stall_limit=cfg.stall_limit())
        self.registration = Registration(self.session, node_key(cfg.root, node), heartbeat, cfg.heartbeat_interval)
        self.membership = MembershipView(self.client, cfg.root)
        self._was_suspended = False
        self._closed = False

    async def start(self) -> None:
        await self.session.start()
        self.session.subscribe(self._on_session_state)
        await self.registration.start()
        await self.membership.start()

    def _on_session_state(self, state: SessionState) -> None:
        if state is SessionState.SUSPENDED:
            self._was_suspended = True
        elif state is SessionState.CONNECTED and self._was_suspended:
            self._was_suspended = False
            # etcd may have restarted or been partitioned: the watch may be stale
            self.membership.request_resync()

    def failover_lock(self, dead: NodeId) -> Lock:
        return Lock(self.session, failover_lock_key(self.cfg.root, dead), owner=str(self.node))

    def job_lock(self, name: str) -> Lock:
        """The lock of a job one node of the cluster runs at a time (held by this session's lease)."""
        return Lock(self.session, job_lock_key(self.cfg.root, name), owner=str(self.node))

    async def close(self, revoke: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        await self.membership.close()
        await self.registration.stop(delete=revoke)
        await self.session.close(revoke=revoke)
        if self._own_client:
            await self.client.close()
