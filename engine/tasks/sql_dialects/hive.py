"""HIVE through impyla's HiveServer2 client (Hive, Spark's Thrift server, Kyuubi). The client blocks: each call
runs in a thread of the runner, one at a time (a Thrift connection is not shared between threads). A statement
is started asynchronously and its state polled. The session keeps the running statement's operation handle: a
kill cancels it with HiveServer2's CancelOperation sent on a second connection (HiveServer2 looks operation
handles up server-wide and the RPC needs no session, so none is opened), never on the task's own connection,
which a poll may be using at that moment. No transactions. ``other`` holds session configuration
(``hive.exec.dynamic.partition``, ...); authentication is PLAIN (user and password; HiveServer2's NONE mode takes
any password) unless ``other`` has ``auth_mechanism`` (NOSASL, PLAIN, LDAP)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from typing import Any

from engine.tasks.sql_dialects import Rows, Session, SqlError, port_of
from engine.tasks.sql_dialects.split import split_statements

#: seconds between two looks at a running statement's state
POLL_INTERVAL = 0.2


class HiveSession(Session):
    conn: Any
    cursor: Any
    #: the operation handle of the statement running now (None between statements)
    running: Any = None

    async def _call(self, fn: Any, *args: Any) -> Any:
        from impala.error import Error as ImpalaError
        from thrift.transport.TTransport import TTransportException

        async with self._lock:
            try:
                return await asyncio.to_thread(fn, *args)
            except (ImpalaError, TTransportException, OSError, EOFError) as exc:
                raise SqlError(_message(exc)) from None

    async def open(self) -> None:
        try:
            from impala.dbapi import connect
        except ImportError:
            raise SqlError("HIVE data sources need impyla on the worker (pip install impyla)") from None
        self._lock = asyncio.Lock()
        other = {str(k): str(v) for k, v in (self.source.get("other") or {}).items()}
        auth = other.pop("auth_mechanism", "PLAIN")
        self._kwargs: dict[str, Any] = {
            "host": self.source.get("host") or "127.0.0.1",
            "port": port_of(self.source),
            "database": self.source.get("database") or None,
            "user": self.source.get("user") or "anonymous",
            "password": self.source.get("password") or "anonymous",
            "auth_mechanism": auth,
            "timeout": self.timeout,
        }
        self.conn = await self._call(lambda: connect(**self._kwargs))
        # every call is short (a long statement is polled), so the connect timeout bounds each
        self.cursor = await self._call(lambda: self.conn.cursor(configuration=other or None))

    async def close(self) -> None:
        if hasattr(self, "conn"):
            await self._call(self.conn.close)

    async def _run(self, sql: str, args: Sequence[Any] = ()) -> None:
        await self._call(self.cursor.execute_async, sql, list(args) if args else None)
        self.running = self.cursor._last_operation.handle
        try:
            while await self._call(self.cursor.is_executing):  # noqa: ASYNC110 - the server's state, polled
                await asyncio.sleep(POLL_INTERVAL)
            await self._call(self.cursor._wait_to_finish)  # raises the statement's error, if it failed
        finally:
            self.running = None

    async def query(self, sql: str, limit: int, args: Sequence[Any] = ()) -> Rows:
        await self._run(sql, args)
        if not self.cursor.description:
            return Rows([], [])
        columns = [d[0].rsplit(".", 1)[-1] for d in self.cursor.description]
        rows = [tuple(r) for r in await self._call(self.cursor.fetchmany, limit + 1)]
        return Rows(columns, rows[:limit], len(rows) > limit)

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        for stmt in [sql] if args else split_statements(sql):
            await self._run(stmt, args)
        return -1

    async def cancel(self) -> None:
        handle = self.running
        if handle is None:
            return
        await asyncio.to_thread(self._cancel_from_a_second_connection, handle)

    def bind(self, value: Any) -> Any:
        # Hive has no TIME type and impyla splices a time unquoted: it goes as its text ('HH:MM:SS')
        return value.isoformat() if isinstance(value, dt.time) else value

    def _cancel_from_a_second_connection(self, handle: Any) -> None:
        from impala._thrift_gen.TCLIService.ttypes import TCancelOperationReq
        from impala.dbapi import connect
        from impala.error import Error as ImpalaError
        from thrift.transport.TTransport import TTransportException

        try:
            other = connect(**{**self._kwargs, "retries": 1})  # a transport only: no session is opened
            try:
                other.service._rpc("CancelOperation", TCancelOperationReq(operationHandle=handle), False)
            finally:
                other.close()
        except (ImpalaError, TTransportException, OSError, EOFError) as exc:
            raise SqlError(_message(exc)) from None

    async def version(self) -> str:
        rows = await self.query("SELECT version()", 1)
        return "HiveServer2 " + (str(rows.rows[0][0]).split(" ")[0] if rows.rows else "?")


def _message(exc: BaseException) -> str:
    text = str(exc)
    for marker in ("Error running query: ", "HiveSQLException: "):
        if marker in text:
            text = text.split(marker, 1)[1]
    return " ".join(text.split("\n\tat ", 1)[0].split())[:2000]


SESSION = HiveSession
