"""POSTGRESQL through asyncpg: the task's statements in one transaction; cancel with pg_cancel_backend."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Sequence
from typing import Any

import asyncpg

from engine.tasks.sql_dialects import IN_MARK, OUT_MARK, Rows, Session, SqlError, port_of


def dsn_of(source: dict[str, Any] | Any) -> str:
    if source.get("dsn"):
        return str(source["dsn"])
    return f"postgresql://{source.get('host') or '127.0.0.1'}:{port_of(source)}/{source.get('database', '')}"


class PostgresSession(Session):
    typed_binds = False
    conn: asyncpg.Connection

    def _kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"timeout": self.timeout}
        if not self.source.get("dsn"):
            kwargs["user"] = self.source.get("user") or None
            kwargs["password"] = self.source.get("password") or None
        if self.source.get("other"):
            kwargs["server_settings"] = {str(k): str(v) for k, v in self.source["other"].items()}
        return kwargs

    async def open(self) -> None:
        try:
            self.conn = await asyncpg.connect(dsn_of(self.source), **self._kwargs())
        except (asyncpg.PostgresError, OSError, TimeoutError) as exc:
            raise SqlError(_message(exc)) from None
        self._tx = self.conn.transaction()

    async def close(self) -> None:
        if hasattr(self, "conn"):
            await self.conn.close(timeout=self.timeout)

    async def begin(self) -> None:
        await self._tx.start()

    async def commit(self) -> None:
        await self._tx.commit()

    def placeholder(self, index: int) -> str:
        return f"${index}"

    async def query(self, sql: str, limit: int, args: Sequence[Any] = ()) -> Rows:
        try:
            stmt = await self.conn.prepare(sql)
            args = _typed_all(args, stmt)
            columns = [a.name for a in stmt.get_attributes()]
            if columns:
                cursor = await stmt.cursor(*args)
                rows = [tuple(r.values()) for r in await cursor.fetch(limit + 1)]
            else:  # a statement without a result set, run as a query
                await stmt.fetch(*args)
                rows = []
        except asyncpg.PostgresError as exc:
            raise SqlError(_message(exc)) from None
        return Rows(columns, rows[:limit], len(rows) > limit)

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        try:
            if args:  # bound values: sent as the types PostgreSQL inferred for their placeholders
                args = _typed_all(args, await self.conn.prepare(sql))
            status = await self.conn.execute(sql, *args)
        except asyncpg.PostgresError as exc:
            raise SqlError(_message(exc)) from None
        last = status.rsplit(" ", 1)[-1] if status else ""
        return int(last) if last.isdigit() else -1

    async def call(self, method: str, ins: Sequence[Any], outs: Sequence[str]) -> list[Any]:
        counter = iter(range(1, len(ins) + 1))
        sql = method.replace(OUT_MARK, "NULL")
        while IN_MARK in sql:
            sql = sql.replace(IN_MARK, self.placeholder(next(counter)), 1)
        try:
            row = await self.conn.fetchrow(sql, *ins)
        except asyncpg.PostgresError as exc:
            raise SqlError(_message(exc)) from None
        return list(row.values()) if row is not None else []

    async def cancel(self) -> None:
        pid = self.conn.get_server_pid()
        other = await asyncpg.connect(dsn_of(self.source), **self._kwargs())
        try:
            await other.execute("SELECT pg_cancel_backend($1)", pid)
        finally:
            await other.close(timeout=self.timeout)

    async def version(self) -> str:
        return "PostgreSQL " + str(await self.conn.fetchval("SHOW server_version"))


_INTS = {"int2", "int4", "int8", "oid"}
_FLOATS = {"float4", "float8"}


def typed(value: Any, type_name: str, position: int) -> Any:
    """A bound text value as the Python object asyncpg sends for the type PostgreSQL inferred for its
    placeholder (an integer column's ``$1`` gets an integer); SqlError naming the placeholder otherwise."""
    if not isinstance(value, str):
        return value
    try:
        if type_name in _INTS:
            return int(value)
        if type_name in _FLOATS:
            return float(value)
        if type_name == "numeric":
            return decimal.Decimal(value)
        if type_name == "bool":
            return value.strip().lower() in ("t", "true", "1", "yes", "y", "on")
        if type_name == "date":
            return dt.date.fromisoformat(value)
        if type_name in ("timestamp", "timestamptz"):
            return dt.datetime.fromisoformat(value)
    except (ValueError, decimal.InvalidOperation):
        raise SqlError(f"parameter ${position}: {value!r} is not a valid {type_name}") from None
    return value


def _typed_all(args: Sequence[Any], stmt: Any) -> list[Any]:
    types = stmt.get_parameters()
    return [typed(v, t.name, i + 1) for i, (v, t) in enumerate(zip(args, types, strict=False))]


def _message(exc: BaseException) -> str:
    if isinstance(exc, asyncpg.PostgresError):
        return f"{exc.sqlstate or type(exc).__name__}: {exc}"
    return f"{type(exc).__name__}: {exc}"


SESSION = PostgresSession
