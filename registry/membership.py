"""Live view of the cluster's nodes: read ``nodes/``, then watch from the read's revision + 1.

No event between the read and the watch is missed. When the watch is cancelled, compacted, breaks,
or the owner asks for it (session reconnected), the view re-reads the prefix and emits the difference
as ADDED / UPDATED / REMOVED changes, so subscribers never miss a change even across an etcd restart.
Keys that are not well-formed node keys, or whose value is not a heartbeat, are logged and ignored.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core import logs
from core.aio import cancel_and_wait
from registry.client import EtcdClient, KeyValue
from registry.errors import RegistryUnavailable
from registry.heartbeat import Heartbeat
from registry.keys import MASTER, WORKER, NodeId, nodes_prefix, parse_node_key

log = logs.get(__name__)


class ChangeKind(enum.Enum):
    ADDED = "ADDED"
    UPDATED = "UPDATED"
    REMOVED = "REMOVED"


@dataclass(frozen=True)
class NodeInfo:
    node: NodeId
    heartbeat: Heartbeat
    create_revision: int

    @property
    def address(self) -> str:
        return self.node.address


@dataclass(frozen=True)
class NodeChange:
    kind: ChangeKind
    info: NodeInfo


Listener = Callable[[NodeChange], Any]


class MembershipView:
    """Masters and workers currently registered, with their latest heartbeats."""

    def __init__(self, client: EtcdClient, root: str, idle_rewatch: float = 30.0, retry_delay: float = 0.5) -> None:
        self.client = client
        self.root = root
        self.prefix = nodes_prefix(root)
        self.idle_rewatch = idle_rewatch
        self.retry_delay = retry_delay
        #: key -> node, the current snapshot
        self._nodes: dict[str, NodeInfo] = {}
        #: revision the snapshot reflects
        self.revision = 0
        self._listeners: list[Listener] = []
        self._task: asyncio.Task[None] | None = None
        self._resync = asyncio.Event()
        self.ready = asyncio.Event()
        #: count of full re-reads (observability and tests)
        self.resyncs = 0

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Read the current members (raises RegistryUnavailable if etcd is down), then watch."""
        await self._read()
        self.ready.set()
        self._task = asyncio.create_task(self._run(), name="membership-watch")

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def resume(self) -> None:
        """Watch again from the last revision seen (after close()); a compacted gap forces a re-read."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="membership-watch")

    def request_resync(self) -> None:
        """Re-read the prefix soon (e.g. after the session reconnected)."""
        self._resync.set()

    # -- queries ----------------------------------------------------------------------------------

    def masters(self) -> list[NodeInfo]:
        return sorted((n for n in self._nodes.values() if n.node.role == MASTER), key=lambda n: n.address)

    def workers(self, group: str | None = None) -> list[NodeInfo]:
        return sorted(
            (n for n in self._nodes.values() if n.node.role == WORKER and (group is None or n.node.group == group)),
            key=lambda n: (n.node.group, n.address),
        )

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    # -- internals --------------------------------------------------------------------------------

    def _parse(self, kv: KeyValue) -> NodeInfo | None:
        node = parse_node_key(self.root, kv.key)
        if node is None:
            log.warning("ignoring unknown key in the registry", key=kv.key)
            return None
        try:
            heartbeat = Heartbeat.from_json(kv.value)
        except ValueError as exc:
            log.warning("ignoring node key whose value is not a heartbeat", key=kv.key, error=str(exc))
            return None
        return NodeInfo(node=node, heartbeat=heartbeat, create_revision=kv.create_revision)

    def _emit(self, kind: ChangeKind, info: NodeInfo) -> None:
        change = NodeChange(kind, info)
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("membership listener failed", change=kind.value, node=str(info.node))

    def _apply_put(self, key: str, info: NodeInfo) -> None:
        old = self._nodes.get(key)
        self._nodes[key] = info
        if old is None:
            self._emit(ChangeKind.ADDED, info)
        elif old.create_revision != info.create_revision:
            # the node re-registered (new lease) between two observations: it left and came back
            self._emit(ChangeKind.REMOVED, old)
            self._emit(ChangeKind.ADDED, info)
        else:
            self._emit(ChangeKind.UPDATED, info)

    def _apply_delete(self, key: str) -> None:
        old = self._nodes.pop(key, None)
        if old is not None:
            self._emit(ChangeKind.REMOVED, old)

    async def _read(self) -> None:
        revision, kvs = await self.client.get_prefix(self.prefix)
        fresh: dict[str, NodeInfo] = {}
        for kv in kvs:
            info = self._parse(kv)
            if info is not None:
                fresh[kv.key] = info
        for key in [k for k in self._nodes if k not in fresh]:
            self._apply_delete(key)
        for key, info in fresh.items():
            old = self._nodes.get(key)
            if old is None or old.heartbeat != info.heartbeat or old.create_revision != info.create_revision:
                self._apply_put(key, info)
        self.revision = revision
        self.resyncs += 1

    async def _run(self) -> None:
        need_read = False
        while True:
            try:
                if need_read or self._resync.is_set():
                    self._resync.clear()
                    await self._read()
                    need_read = False
                need_read = await self._watch_once()
            except RegistryUnavailable as exc:
                log.warning("membership watch interrupted", error=str(exc))
                need_read = True
                await asyncio.sleep(self.retry_delay)
            except Exception:
                # a listener or parsing bug must not end membership for the life of the process
                log.exception("membership watch failed; re-reading")
                need_read = True
                await asyncio.sleep(self.retry_delay)

    async def _watch_once(self) -> bool:
        """Watch until the stream ends or a resync is requested; True if a full re-read is needed."""
        consume = asyncio.ensure_future(self._consume_watch())
        resync_wait = asyncio.ensure_future(self._resync.wait())
        try:
            done, _ = await asyncio.wait({consume, resync_wait}, return_when=asyncio.FIRST_COMPLETED)
            if consume in done:
                return consume.result()
            return True
        finally:
            for task in (consume, resync_wait):
                task.cancel()
            await asyncio.gather(consume, resync_wait, return_exceptions=True)

    async def _consume_watch(self) -> bool:
        watch = self.client.watch_prefix(self.prefix, self.revision + 1, idle_timeout=self.idle_rewatch)
        try:
            async for batch in watch:
                if batch.canceled or batch.compact_revision:
                    log.warning("watch cancelled", compact_revision=batch.compact_revision)
                    return True
                for ev in batch.events:
                    if ev.kind == "DELETE":
                        self._apply_delete(ev.kv.key)
                    else:
                        info = self._parse(ev.kv)
                        if info is not None:
                            self._apply_put(ev.kv.key, info)
                    # only event revisions advance the view: a response header may run ahead of
                    # events still to be delivered on this stream
                    self.revision = max(self.revision, ev.kv.mod_revision)
            return False  # idle or closed stream: re-watch from the revision we have
        finally:
            await watch.aclose()
