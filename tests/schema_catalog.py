"""What a PostgreSQL database's schema is, read from pg_catalog, as comparable plain data: two databases
with the same snapshot have the same tables, columns, constraints, indexes, sequences, functions, triggers
and storage options such as a fillfactor (column order aside: a migration appends the columns it adds, the
generated schema.sql lists them where tables.py declares them)."""

from __future__ import annotations

from typing import Any

import asyncpg

_COLUMNS = """
SELECT c.relname AS tbl, a.attname AS col, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS notnull,
       pg_get_expr(d.adbin, d.adrelid) AS dflt, a.attidentity AS ident
  FROM pg_attribute a
  JOIN pg_class c ON c.oid = a.attrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
"""
_CONSTRAINTS = """
SELECT c.relname AS tbl, k.conname AS name, pg_get_constraintdef(k.oid) AS def
  FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'public'
"""
_INDEXES = "SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE schemaname = 'public'"
_SEQUENCES = """
SELECT sequencename AS name, start_value, increment_by, min_value, max_value, cycle, data_type::text AS type
  FROM pg_sequences WHERE schemaname = 'public'
"""
_FUNCTIONS = """
SELECT p.proname AS name, pg_get_functiondef(p.oid) AS def
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
"""
_TRIGGERS = """
SELECT c.relname AS tbl, t.tgname AS name, pg_get_triggerdef(t.oid) AS def
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'public' AND NOT t.tgisinternal
"""
_OPTIONS = """
SELECT c.relname AS name, c.reloptions AS options
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'public' AND c.reloptions IS NOT NULL
"""
_OTHER = """
SELECT c.relname AS name, c.relkind::text AS kind
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'public' AND c.relkind NOT IN ('r', 'p', 'i', 'S')
"""


async def snapshot(dsn: str) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    try:
        columns: dict[str, dict[str, tuple[Any, ...]]] = {}
        for r in await conn.fetch(_COLUMNS):
            columns.setdefault(r["tbl"], {})[r["col"]] = (r["type"], r["notnull"], r["dflt"], r["ident"])
        return {
            "columns": columns,
            "constraints": {(r["tbl"], r["name"]): r["def"] for r in await conn.fetch(_CONSTRAINTS)},
            "indexes": {r["name"]: r["def"] for r in await conn.fetch(_INDEXES)},
            "sequences": {r["name"]: tuple(r.values())[1:] for r in await conn.fetch(_SEQUENCES)},
            "functions": {r["name"]: r["def"] for r in await conn.fetch(_FUNCTIONS)},
            "triggers": {(r["tbl"], r["name"]): r["def"] for r in await conn.fetch(_TRIGGERS)},
            "other": {r["name"]: r["kind"] for r in await conn.fetch(_OTHER)},
            "options": {r["name"]: sorted(r["options"]) for r in await conn.fetch(_OPTIONS)},
        }
    finally:
        await conn.close()


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Readable lines for every difference between two snapshots (empty: the same schema)."""
    out: list[str] = []
    for part in a.keys() | b.keys():
        left, right = a.get(part, {}), b.get(part, {})
        for key in sorted(left.keys() | right.keys(), key=str):
            if part == "columns":
                lcols, rcols = left.get(key, {}), right.get(key, {})
                for col in sorted(lcols.keys() | rcols.keys()):
                    if lcols.get(col) != rcols.get(col):
                        out.append(f"column {key}.{col}: {lcols.get(col)} != {rcols.get(col)}")
            elif left.get(key) != right.get(key):
                out.append(f"{part} {key}: {left.get(key)} != {right.get(key)}")
    return out
