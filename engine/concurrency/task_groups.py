"""Task groups: the pure admission rule (no I/O; the SQL is engine/concurrency/task_groups_sql.py).

A group has ``size`` slots. Its queue is ordered by priority (higher first), then by arrival. Admission
goes down the queue from its head while the head fits in the free slots, and stops at the first that does
not: a task that needs many slots is not overtaken forever by small ones behind it (no starvation), at
the cost of idle slots while it waits for room. Force-started rows hold slots without being admitted by
this rule, so the slots in use may exceed a group's size (after a force start, or after the group
shrank); nothing more is admitted until the use is below the size again.
"""

from __future__ import annotations

from collections.abc import Sequence


def admissible(size: int, used: int, waiting: Sequence[tuple[int, int]]) -> list[int]:
    """The queue rows to admit now: ``waiting`` are (row id, slots) in queue order."""
    out = []
    for row_id, slots in waiting:
        if used + slots > size:
            break
        used += slots
        out.append(row_id)
    return out
