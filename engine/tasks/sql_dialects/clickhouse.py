"""CLICKHOUSE through clickhouse-driver (the native protocol, port 9000 by default; it speaks to old servers
such as Debian's 18.16 as well as current ones). The driver blocks: each call runs in a thread of the runner.
No transactions; every statement carries a query id, and cancel is ``KILL QUERY WHERE query_id = ...`` from a
second connection. ``other`` holds query settings (``max_threads``, ``max_execution_time``, ...).

``INSERT INTO t VALUES (...), (...)`` with the rows in the statement's text is sent as
``INSERT INTO t SELECT ... UNION ALL SELECT ...``: over the native protocol an old server (18.16) expects the
client to parse inline rows and send them as blocks, and silently drops them otherwise."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import uuid
from collections.abc import Sequence
from typing import Any

from clickhouse_driver import Client
from clickhouse_driver.errors import Error as ClickHouseError

from engine.tasks.sql_dialects import Rows, Session, SqlError, port_of
from engine.tasks.sql_dialects.split import split_statements

_INLINE_INSERT = re.compile(r"^\s*(INSERT\s+INTO\s+.+?)\s+VALUES\s*(\(.*)$", re.IGNORECASE | re.DOTALL)


def _tuples(data: str) -> list[str] | None:
    """The insides of the top-level ``(...)`` groups of an inline VALUES list; None when it is not one."""
    groups: list[str] = []
    depth, start, i, n = 0, 0, 0, len(data)
    while i < n:
        ch = data[i]
        if ch in "'\"`":
            i += 1
            while i < n and data[i] != ch:
                i += 2 if data[i] == "\\" else 1
        elif ch == "(":
            depth += 1
            if depth == 1:
                start = i + 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                groups.append(data[start:i])
            elif depth < 0:
                return None
        elif depth == 0 and not (ch.isspace() or ch == ","):
            return None
        i += 1
    return groups if groups and depth == 0 else None


def inline_insert_as_select(stmt: str) -> str:
    """``stmt`` with inline VALUES rows turned into SELECTs (see the module's doc); other statements as given."""
    match = _INLINE_INSERT.match(stmt)
    rows = _tuples(match.group(2).rstrip().rstrip(";")) if match else None
    if not match or not rows:
        return stmt
    return f"{match.group(1)} " + " UNION ALL ".join(f"SELECT {row}" for row in rows)


class ClickHouseSession(Session):
    client: Client
    query_id = ""

    def bind(self, value: Any) -> Any:
        # clickhouse-driver formats a datetime to whole seconds: one with a fraction goes as its text, which
        # ClickHouse reads into DateTime64 exactly (a time of day has no type here either: its text)
        if isinstance(value, dt.datetime) and value.microsecond and value.tzinfo is None:
            return value.isoformat(sep=" ")
        return value.isoformat() if isinstance(value, dt.time) else value

    def _client(self) -> Client:
        return Client(
            host=self.source.get("host") or "127.0.0.1",
            port=port_of(self.source),
            user=self.source.get("user") or "default",
            password=self.source.get("password") or "",
            database=self.source.get("database") or "default",
            connect_timeout=self.timeout,
            settings={str(k): v for k, v in (self.source.get("other") or {}).items()},
            client_name="porpoise",
        )

    async def _in_thread(self, client: Client, sql: str, args: Sequence[Any] = (), **kw: Any) -> Any:
        params = {f"p{i}": v for i, v in enumerate(args, 1)} if args else None
        try:
            return await asyncio.to_thread(client.execute, sql, params, **kw)
        except (ClickHouseError, OSError, EOFError) as exc:
            raise SqlError(_message(exc)) from None

    async def open(self) -> None:
        self.client = self._client()
        await self._in_thread(self.client, "SELECT 1")

    async def close(self) -> None:
        if hasattr(self, "client"):
            await asyncio.to_thread(self.client.disconnect)

    def placeholder(self, index: int) -> str:
        return f"%(p{index})s"

    def _next_id(self) -> str:
        self.query_id = str(uuid.uuid4())
        return self.query_id

    async def query(self, sql: str, limit: int, args: Sequence[Any] = ()) -> Rows:
        settings = {"max_result_rows": limit + 1, "result_overflow_mode": "break"}
        rows, types = await self._in_thread(
            self.client, sql, args, with_column_types=True, query_id=self._next_id(), settings=settings
        )
        return Rows([t[0] for t in types], [tuple(r) for r in rows[:limit]], len(rows) > limit)

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        count = -1
        for stmt in [sql] if args else split_statements(sql):
            await self._in_thread(self.client, inline_insert_as_select(stmt), args, query_id=self._next_id())
            progress = getattr(self.client.last_query, "progress", None)
            # an INSERT ... SELECT reports the rows it read (18.16 does not count written rows)
            count = (progress.written_rows or progress.rows) if progress is not None else -1
        return count

    async def cancel(self) -> None:
        if not self.query_id:
            return
        other = self._client()
        try:
            await self._in_thread(other, "KILL QUERY WHERE query_id = %(p1)s ASYNC", [self.query_id])
        finally:
            await asyncio.to_thread(other.disconnect)

    async def version(self) -> str:
        return "ClickHouse " + str((await self._in_thread(self.client, "SELECT version()"))[0][0])


def _message(exc: BaseException) -> str:
    if isinstance(exc, ClickHouseError):
        text = str(getattr(exc, "message", "") or exc).split("Stack trace:", 1)[0].strip()
        return f"Code {getattr(exc, 'code', '?')}: {' '.join(text.split())}"
    return f"{type(exc).__name__}: {exc}"


SESSION = ClickHouseSession
