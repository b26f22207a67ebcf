"""One module per data-source type (the type decides the driver): a :class:`Session` is one connection to the
server for one task, with the operations the SQL and PROCEDURE runners need and a ``cancel`` that stops the
running statement on the server from a second connection (the runner calls it when the task is killed).

Drivers: asyncpg (POSTGRESQL), asyncmy (MYSQL, MariaDB too), clickhouse-driver's native protocol
(CLICKHOUSE), impyla's HiveServer2 client (HIVE). The blocking ones (clickhouse-driver, impyla) run in a
thread of the runner process, so the runner's loop stays free to take the kill signal.

Binding values into a statement is one function per type (:meth:`Session.placeholder`): the drivers' parameter
styles differ ($1, %s, %(name)s).
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.errors import PorpoiseError

#: data-source types and the module (in this package) that serves each
MODULES = {"POSTGRESQL": "postgresql", "MYSQL": "mysql", "CLICKHOUSE": "clickhouse", "HIVE": "hive"}
SOURCE_TYPES = tuple(MODULES)
#: the port used when a data source names none (ClickHouse: the native protocol's, not HTTP's 8123)
DEFAULT_PORTS = {"POSTGRESQL": 5432, "MYSQL": 3306, "CLICKHOUSE": 9000, "HIVE": 10000}
#: types a PROCEDURE task can call procedures on
PROCEDURE_TYPES = ("POSTGRESQL", "MYSQL")
#: where a PROCEDURE's ``method`` takes its next bound IN value / its next OUT argument (put there by the
#: PROCEDURE task in place of each ``${name}``; control characters, so no statement text holds them)
IN_MARK = "\x00in\x00"
OUT_MARK = "\x00out\x00"
#: seconds to open a connection (and to cancel a statement through a second one)
CONNECT_TIMEOUT = 30.0


class SqlError(PorpoiseError):
    """The server (or the connection to it) refused: the message is the server's."""


@dataclass
class Rows:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    #: whether the statement had more rows than were read (the limit)
    truncated: bool = False


class Session(ABC):
    """One connection for one task. Statements run in one transaction where the server has them
    (PostgreSQL, MySQL): ``commit`` at the end, nothing kept when the task fails."""

    #: bound values are sent as the Python values of their declared types (``INTEGER`` as int, ...): the
    #: driver formats them by Python type. PostgreSQL types them by the prepared statement's own parameters
    typed_binds = True

    def __init__(self, source: Mapping[str, Any], timeout: float = CONNECT_TIMEOUT) -> None:
        self.source = source
        self.timeout = timeout

    def bind(self, value: Any) -> Any:
        """A typed value as this driver must be given it (where its own formatting of that type is wrong)."""
        return value

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    async def begin(self) -> None:  # noqa: B027 - a no-op unless the server has transactions
        """Start the task's transaction (no-op where the server has none)."""

    async def commit(self) -> None:  # noqa: B027
        """Commit the task's transaction (no-op where the server has none)."""

    @abstractmethod
    async def query(self, sql: str, limit: int, args: Sequence[Any] = ()) -> Rows:
        """Run one query; at most ``limit`` rows read."""

    @abstractmethod
    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Run a statement that returns no rows (the text may hold several, ``;``-separated); the count of
        rows the last one changed (-1 when the server does not say)."""

    @abstractmethod
    async def cancel(self) -> None:
        """From a second connection: stop the statement this session runs on the server."""

    @abstractmethod
    async def version(self) -> str:
        """The server's version (the connection test reports it)."""

    def placeholder(self, index: int) -> str:
        """The driver's marker of the ``index``-th (from 1) bound value."""
        return "%s"

    async def call(self, method: str, ins: Sequence[Any], outs: Sequence[str]) -> list[Any]:
        """Call a procedure: ``method`` holds IN_MARK for each bound IN value (in order) and OUT_MARK for
        each OUT argument; the OUT values, in order."""
        raise SqlError(f"{type(self).__name__}: stored procedures are not supported on this type")


def session_for(source: Mapping[str, Any], timeout: float = CONNECT_TIMEOUT) -> Session:
    kind = str(source.get("type") or "POSTGRESQL").upper()
    if kind not in MODULES:
        raise SqlError(f"unknown data source type {kind!r} (one of {', '.join(SOURCE_TYPES)})")
    module = importlib.import_module(f"engine.tasks.sql_dialects.{MODULES[kind]}")
    return module.SESSION(source, timeout)


def port_of(source: Mapping[str, Any]) -> int:
    kind = str(source.get("type") or "POSTGRESQL").upper()
    return int(source.get("port") or DEFAULT_PORTS.get(kind, 0))
