"""Run SQLAlchemy Core statements on a plain asyncpg pool or connection.

The API builds its filtered, paginated queries with Core (composable, no string pasting) and runs them
through the same asyncpg pool the rest of Porpoise uses: the statement is compiled once for the
asyncpg dialect (``$n`` markers) and executed with asyncpg, so there is one driver and one pool.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from sqlalchemy.dialects.postgresql import asyncpg as asyncpg_dialect
from sqlalchemy.sql import ClauseElement

_DIALECT = asyncpg_dialect.dialect()

Executor = asyncpg.Pool | asyncpg.Connection


def compile_sql(stmt: ClauseElement) -> tuple[str, list[Any]]:
    """(SQL text with $n markers, positional arguments) for asyncpg."""
    compiled = stmt.compile(dialect=_DIALECT, compile_kwargs={"render_postcompile": True})
    names = compiled.positiontup or []
    params = compiled.params
    return str(compiled), [params[n] for n in names]


async def fetch(db: Executor, stmt: ClauseElement) -> list[asyncpg.Record]:
    sql, args = compile_sql(stmt)
    return await db.fetch(sql, *args)  # type: ignore[no-any-return]


async def fetchrow(db: Executor, stmt: ClauseElement) -> asyncpg.Record | None:
    sql, args = compile_sql(stmt)
    return await db.fetchrow(sql, *args)


async def fetchval(db: Executor, stmt: ClauseElement) -> Any:
    sql, args = compile_sql(stmt)
    return await db.fetchval(sql, *args)


async def execute(db: Executor, stmt: ClauseElement) -> str:
    sql, args = compile_sql(stmt)
    return await db.execute(sql, *args)  # type: ignore[no-any-return]
