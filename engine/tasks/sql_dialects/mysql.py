"""MYSQL (MySQL and MariaDB) through asyncmy: one connection, the task's statements in one transaction
(where the engine has them; DDL commits on its own in MySQL); cancel with ``KILL QUERY <connection id>``.
``other`` holds session variables, set with ``SET SESSION`` after connecting."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import asyncmy
from asyncmy.cursors import SSCursor
from asyncmy.errors import MySQLError

from engine.tasks.sql_dialects import IN_MARK, OUT_MARK, Rows, Session, SqlError, port_of
from engine.tasks.sql_dialects.split import split_statements

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class MySqlSession(Session):
    conn: Any
    connection_id = 0

    async def _connect(self) -> Any:
        try:
            return await asyncio.wait_for(
                asyncmy.connect(
                    host=self.source.get("host") or "127.0.0.1",
                    port=port_of(self.source),
                    user=self.source.get("user") or "",
                    password=self.source.get("password") or "",
                    db=self.source.get("database") or None,
                    connect_timeout=self.timeout,
                    autocommit=False,
                    local_infile=False,
                ),
                self.timeout,
            )
        except (MySQLError, OSError, TimeoutError) as exc:
            raise SqlError(_message(exc)) from None

    async def open(self) -> None:
        self.conn = await self._connect()
        async with self.conn.cursor() as cur:
            await cur.execute("SELECT CONNECTION_ID()")
            self.connection_id = int((await cur.fetchone())[0])
            for key, value in (self.source.get("other") or {}).items():
                if not _NAME.match(str(key)):
                    raise SqlError(f"other: {key!r} is not a session variable name")
                await self._run(cur, f"SET SESSION {key} = %s", [str(value)])

    async def close(self) -> None:
        if hasattr(self, "conn"):
            self.conn.close()

    async def begin(self) -> None:
        await self.conn.begin()

    async def commit(self) -> None:
        try:
            await self.conn.commit()
        except MySQLError as exc:
            raise SqlError(_message(exc)) from None

    async def _run(self, cur: Any, sql: str, args: Sequence[Any] = ()) -> None:
        try:
            await cur.execute(sql, list(args) if args else None)
        except MySQLError as exc:
            raise SqlError(_message(exc)) from None

    async def query(self, sql: str, limit: int, args: Sequence[Any] = ()) -> Rows:
        cur = self.conn.cursor(SSCursor)  # unbuffered: only the rows read cross the network
        try:
            await self._run(cur, sql, args)
            if not cur.description:
                return Rows([], [])
            columns = [d[0] for d in cur.description]
            rows = [tuple(r) for r in await cur.fetchmany(limit + 1)]
        except MySQLError as exc:
            raise SqlError(_message(exc)) from None
        finally:
            await cur.close()
        return Rows(columns, rows[:limit], len(rows) > limit)

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        count = -1
        async with self.conn.cursor() as cur:
            for stmt in [sql] if args else split_statements(sql):
                await self._run(cur, stmt, args)
                count = cur.rowcount
        return count

    async def call(self, method: str, ins: Sequence[Any], outs: Sequence[str]) -> list[Any]:
        names = [f"@porpoise_out_{i}" for i in range(1, len(outs) + 1)]
        sql = method.replace("%", "%%") if ins else method  # % is the driver's marker only with values
        for name in names:
            sql = sql.replace(OUT_MARK, name, 1)
        sql = sql.replace(IN_MARK, "%s")
        async with self.conn.cursor() as cur:
            await self._run(cur, sql, ins)
            while await cur.nextset():  # result sets the procedure selected
                pass
            if not names:
                return []
            await self._run(cur, "SELECT " + ", ".join(names))
            row = await cur.fetchone()
        return list(row or [])

    async def cancel(self) -> None:
        other = await self._connect()
        try:
            async with other.cursor() as cur:
                await self._run(cur, "KILL QUERY %s", [self.connection_id])
        finally:
            other.close()

    async def version(self) -> str:
        async with self.conn.cursor() as cur:
            await self._run(cur, "SELECT VERSION()")
            return "MySQL " + str((await cur.fetchone())[0])


def _message(exc: BaseException) -> str:
    if isinstance(exc, MySQLError) and len(exc.args) >= 2:
        return f"({exc.args[0]}) {exc.args[1]}"
    return f"{type(exc).__name__}: {exc}"


SESSION = MySqlSession
