"""The master process. So far: registry presence and its command slot, kept current on every
membership change; command claiming, actors and dispatch build on this."""

from __future__ import annotations

from typing import Any

from engine import logs
from engine.node import Node
from registry import MASTER, HeartbeatSource, LoadLimits, NodeId, SlotTracker

log = logs.get(__name__)


class Master(Node):
    role = "master"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slots: SlotTracker | None = None

    def listen(self) -> tuple[str, int, str]:
        m = self.cfg.master
        return m.listen_host, m.listen_port, m.advertise_host

    def node_id(self) -> NodeId:
        return NodeId(MASTER, self.address)

    def heartbeat_source(self) -> HeartbeatSource:
        m = self.cfg.master
        return HeartbeatSource(LoadLimits(m.max_cpu_load_avg, m.reserved_memory_gb))

    async def on_registered(self) -> None:
        if self.slots is not None:
            self.slots.close()
        assert self.registry is not None
        self.slots = SlotTracker(self.registry.membership, self.address)

    async def on_fenced(self) -> None:
        # Nothing to claim with once the lease is gone: the slot is void until re-registration.
        if self.slots is not None:
            self.slots.close()
            self.slots = None

    def health(self) -> dict[str, Any]:
        slot = self.slots.slot if self.slots else None
        masters = self.registry.membership.masters() if self.registry else []
        workers = self.registry.membership.workers() if self.registry else []
        return {
            "slot": None if slot is None else {"index": slot.index, "count": slot.count},
            "masters": [m.address for m in masters],
            "workers": [f"{w.node.group}/{w.address}" for w in workers],
        }
