"""PostgreSQL ``json`` / ``jsonb`` as Python objects on every connection the engine opens (the pool's
``init``, and the CLI's single connections): a row's JSON column reads as a dict / list, never as text.

A parameter bound to a JSON column may be a Python object (encoded here) or a ``str``, taken as JSON text
already encoded (``json.dumps`` output), so it is not encoded twice: a JSON string value is therefore
passed encoded (``json.dumps("text")``).
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg


def _encode(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


async def register_json(conn: asyncpg.Connection) -> None:
    """Install the JSON codecs on ``conn`` (pass as ``asyncpg.create_pool(init=register_json)``)."""
    for name in ("json", "jsonb"):
        await conn.set_type_codec(name, schema="pg_catalog", encoder=_encode, decoder=json.loads, format="text")
