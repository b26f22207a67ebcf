"""Worker groups managed in the cluster (DolphinScheduler's ``t_ds_worker_group``): an admin names a group and
the workers (by address, ``host:port`` as they register) that belong to it, through the API
(engine/api/worker_groups.py). Each master reads the assignments from the database every
``master.worker_group_refresh_interval`` seconds, so a change takes effect without a restart; when they
change, attempts waiting for a group are given another chance at once.

A worker belongs to the group of its own configuration (``worker.group``) and to every managed group that
lists its address. The database, not etcd, holds the assignments: they are configuration, which lives in
PostgreSQL with the rest of it (backed up with it, and it survives an etcd loss: etcd holds only the live
state of the cluster), and an assigned worker that is down keeps its place until it registers again. The
cost is the refresh interval (default 2 s) and one small query per master per round.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncpg

from core import logs
from core.aio import BackgroundService
from engine.storage.failures import DB_FAILURES
from registry.membership import NodeInfo

log = logs.get(__name__)


def parse_addresses(addr_list: str | None) -> frozenset[str]:
    return frozenset(a.strip() for a in (addr_list or "").split(",") if a.strip())


class WorkerGroupMap(BackgroundService):
    task_name = "worker-groups"

    def __init__(self, pool: asyncpg.Pool, interval: float, on_change: Callable[[], None]) -> None:
        self.pool = pool
        self.interval = interval
        self.on_change = on_change
        #: managed group -> the worker addresses assigned to it
        self.assigned: dict[str, frozenset[str]] = {}

    async def _run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.interval)

    async def refresh(self) -> bool:
        """Read the assignments; whether they changed (then ``on_change`` ran)."""
        try:
            rows = await self.pool.fetch("SELECT name, addr_list FROM worker_group")
        except DB_FAILURES as exc:
            log.info("worker groups not refreshed; the next round tries again", error=str(exc))
            return False
        fresh = {r["name"]: parse_addresses(r["addr_list"]) for r in rows}
        if fresh == self.assigned:
            return False
        log.info("worker group assignments changed", groups=sorted(fresh))
        self.assigned = fresh
        self.on_change()
        return True

    def workers(self, registered: list[NodeInfo], group: str) -> list[NodeInfo]:
        """The registered workers of ``group``: configured in it, or assigned to it by address."""
        members = self.assigned.get(group, frozenset())
        return [w for w in registered if w.node.group == group or w.address in members]
