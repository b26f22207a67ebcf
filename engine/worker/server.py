"""The worker process. So far: registry presence under its group with a heartbeat carrying its
exec slots and task counts; dispatch, plugins and reporting build on this."""

from __future__ import annotations

from typing import Any

from engine.node import Node
from registry import WORKER, HeartbeatSource, LoadLimits, NodeId, TaskCounts


class Worker(Node):
    role = "worker"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.running = 0
        self.waiting = 0

    def listen(self) -> tuple[str, int, str]:
        w = self.cfg.worker
        return w.listen_host, w.listen_port, w.advertise_host

    def node_id(self) -> NodeId:
        return NodeId(WORKER, self.address, self.cfg.worker.group)

    def counts(self) -> TaskCounts:
        return TaskCounts(running=self.running, waiting=self.waiting, slots=self.cfg.worker.exec_slots)

    def heartbeat_source(self) -> HeartbeatSource:
        w = self.cfg.worker
        return HeartbeatSource(
            LoadLimits(w.max_cpu_load_avg, w.reserved_memory_gb),
            host_weight=w.host_weight,
            counts=self.counts,
        )

    def health(self) -> dict[str, Any]:
        return {"group": self.cfg.worker.group, "running": self.running, "slots": self.cfg.worker.exec_slots}
