"""JSON columns read as Python objects on the pools the nodes open (engine/storage/jsoncodec.py), and a
parameter bound to one may be an object or JSON text, never encoded twice (a real PostgreSQL)."""

from __future__ import annotations

import asyncio
import json

import asyncpg

from engine import config
from engine.storage.jsoncodec import register_json
from engine.storage.pool import connect_pool


async def test_the_node_pool_reads_json_columns_as_objects_and_takes_both_kinds_of_parameter(fresh_db: str) -> None:
    cfg = config.load(overrides=[f"database.dsn={fresh_db}"], environ={})
    pool = await connect_pool(cfg.database, asyncio.Event())
    try:
        assert await pool.fetchval("""SELECT '{"a": [1, "x"]}'::jsonb""") == {"a": [1, "x"]}
        assert await pool.fetchval("""SELECT '[true]'::json""") == [True]
        value = {"host": "h", "n": [1, 2]}
        as_object = await pool.fetchval("SELECT $1::jsonb", value)
        as_text = await pool.fetchval("SELECT $1::jsonb", json.dumps(value))  # not encoded twice
        assert as_object == as_text == value
        assert await pool.fetchval("SELECT jsonb_typeof($1::jsonb)", json.dumps(value)) == "object"
        assert await pool.fetchval("SELECT $1::jsonb[]", [value, json.dumps([3])]) == [value, [3]]
        assert await pool.fetchval("SELECT $1::jsonb", json.dumps("text")) == "text"
    finally:
        await pool.close()


async def test_a_row_type_holding_a_json_column_is_decoded(fresh_db: str) -> None:
    # a statement returning a whole row (a composite): decoded in binary, which a text codec cannot join
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=1, init=register_json)
    try:
        async with pool.acquire() as conn:
            await conn.execute("CREATE TEMP TABLE j (id int, doc jsonb, raw json)")
            row = await conn.fetchval(
                "INSERT INTO j VALUES (1, $1, $2) RETURNING j", {"a": [1, "x"]}, json.dumps({"b": None})
            )
            assert row["doc"] == {"a": [1, "x"]} and row["raw"] == {"b": None}
            assert await conn.fetchval("SELECT doc FROM j") == {"a": [1, "x"]}
    finally:
        await pool.close()
