"""Command slots: a master's slot is its index in the sorted live-master list; the count is its length.

Masters claim commands with ``id % count == slot``. Slots are advisory: the claim transaction's
row count is the real guard when two masters briefly disagree during a membership change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from core import logs
from registry.membership import MembershipView, NodeChange

log = logs.get(__name__)


@dataclass(frozen=True)
class Slot:
    index: int
    count: int

    def owns(self, command_id: int) -> bool:
        return self.count > 0 and command_id % self.count == self.index


NO_SLOT = Slot(0, 0)


def compute_slot(masters: Sequence[str], me: str) -> Slot:
    """Slot of ``me`` among ``masters`` (addresses); NO_SLOT when ``me`` is not registered."""
    ordered = sorted(set(masters))
    if me not in ordered:
        return NO_SLOT
    return Slot(ordered.index(me), len(ordered))


class SlotTracker:
    """Recomputes this master's slot on every membership change."""

    def __init__(self, view: MembershipView, me: str) -> None:
        self.view = view
        self.me = me
        self.slot = NO_SLOT
        self.changed = asyncio.Event()
        self._unsubscribe = view.subscribe(self._on_change)
        self.recompute()

    def _on_change(self, change: NodeChange) -> None:
        if change.info.node.role == "master":
            self.recompute()

    def recompute(self) -> Slot:
        slot = compute_slot([m.address for m in self.view.masters()], self.me)
        if slot != self.slot:
            log.info(
                "command slot",
                slot=slot.index,
                count=slot.count,
                previous=f"{self.slot.index}/{self.slot.count}",
            )
            self.slot = slot
            self.changed.set()
        return slot

    def close(self) -> None:
        self._unsubscribe()
