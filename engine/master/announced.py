"""Commands announced with their rows: a claim without reading the command table first.

A statement that inserts one command (the API's start, a rerun, a sub-workflow's) announces the row on
``porpoise_command`` (``engine/storage/db_objects.py``). The poller keeps those rows and claims its slot's
from them instead of reading the table, one round trip fewer per start, only while that reads what a
read would: every command of the slot not yet claimed is in hand, which holds when

- the last read of the slot found all of its commands (fewer than a page) and they were all claimed, for
  the slot the master has now;
- every notification since that read began carried its row (a statement inserting several commands, a
  row too long for a notification, or a listener that reconnected and may have missed some makes the
  next poll read the table);
- no claim failed and none was refused since (the commands stay in the table: read it);
- the slot was read less than ``max_age`` seconds ago (the poll interval): a command whose notification
  never came (inserted with triggers off, as by a restore) waits no longer than it did before the rows in
  hand, however many announced ones come meanwhile.

A command announced during a read may come twice (read, and announced): its second claim deletes
nothing and so creates nothing (the claim's DELETE decides, as between masters). Rows are taken in the
read's order (priority, then id), a page at a time.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

from engine.storage.tables import command

#: the command table's columns, in order (a row announced is the whole row)
COLUMNS = tuple(c.name for c in command.columns)
#: its timestamptz columns (row_to_json writes them as ISO 8601 text)
_TIMES = tuple(c.name for c in command.columns if c.name.endswith("_time"))
_INTS = frozenset(
    {"id", "command_type", "workflow_definition_code", "workflow_definition_version", "workflow_instance_id",
     "workflow_instance_priority"}
)  # fmt: skip

Slot = tuple[int, int]


def command_row(payload: str) -> dict[str, Any] | None:
    """The command row a notification carries, typed as a read of the table gives it; None when the payload
    is not one (empty: a statement of several commands). Times come in the inserting session's time zone:
    they are turned to UTC, as asyncpg gives them (a schedule time's business date is read from its fields)."""
    if not payload:
        return None
    try:
        row = json.loads(payload)
        if not isinstance(row, dict) or set(row) != set(COLUMNS):
            return None
        out = {name: row[name] for name in COLUMNS}
        if not all(isinstance(out[name], int) for name in _INTS):
            return None
        for name in _TIMES:
            if out[name] is not None:
                out[name] = dt.datetime.fromisoformat(out[name]).astimezone(dt.UTC)
    except Exception:  # not a row (a JSON nested past the parser's depth raises RecursionError): read the table
        return None
    return out


class Announced:
    """The rows announced since the slot was last read (see the module's docstring)."""

    def __init__(self, limit: int, max_age: float) -> None:
        #: at most this many rows held; past it the next poll reads the table
        self.limit = limit
        #: seconds after a read of the slot that the next poll reads it again whatever is in hand
        self.max_age = max_age
        self._read_at = 0.0
        self.rows: dict[int, dict[str, Any]] = {}
        self._exact = False  # every notification since the last read began carried its row
        self._complete = False  # that read found all of its slot's commands and they were claimed
        self._slot: Slot | None = None

    def heard(self, payload: str) -> None:
        """A notification on porpoise_command."""
        row = command_row(payload)
        if row is None or len(self.rows) >= self.limit:
            self._exact = False
            self.rows.clear()
        else:
            self.rows[row["id"]] = row

    def forget(self) -> None:
        """The table may hold commands not in hand (notifications missed, a claim failed or refused)."""
        self._exact = self._complete = False
        self.rows.clear()

    def reading(self) -> None:
        """A read of the table begins: whatever was committed before it, it finds."""
        self._read_at = time.monotonic()
        self.rows.clear()
        self._exact = True
        self._complete = False

    def read(self, slot: Slot, complete: bool) -> None:
        """The read of ``slot`` and the claim of what it found succeeded; ``complete``: it found fewer than a page."""
        self._slot = slot
        self._complete = complete

    def take(self, slot: Slot, page: int) -> list[dict[str, Any]] | None:
        """At most ``page`` of ``slot``'s commands in poll order when the rows in hand are all it has left, else
        None (read the table). An empty list: only other slots' commands were announced."""
        if not (self._exact and self._complete and self.rows and slot == self._slot):
            return None
        if time.monotonic() - self._read_at >= self.max_age:
            return None
        index, count = slot
        mine = sorted(
            (r for r in self.rows.values() if _sql_mod(r["id"], count) == index),
            key=lambda r: (r["workflow_instance_priority"], r["id"]),
        )
        self.rows = {r["id"]: r for r in mine[page:]}
        return mine[:page]


def _sql_mod(a: int, b: int) -> int:
    """``a % b`` as PostgreSQL computes it (the sign of ``a``), as the read's ``id % count = slot`` does."""
    return a % b if a >= 0 else -(-a % b)
