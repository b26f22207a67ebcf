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


def _text(value: Any) -> bytes:
    return (value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))).encode()


#: the binary formats (binary, not text: a row type holding a JSON column, such as a whole ``command`` row
#: a statement returns, is decoded in binary, and a text codec cannot take part in it): ``json`` is its
#: text; ``jsonb`` is a version byte (1) and its text
def _json_encode(value: Any) -> bytes:
    return _text(value)


def _json_decode(data: bytes) -> Any:
    return json.loads(data)


def _jsonb_encode(value: Any) -> bytes:
    return b"\x01" + _text(value)


def _jsonb_decode(data: bytes) -> Any:
    return json.loads(data[1:])


async def register_json(conn: asyncpg.Connection) -> None:
    """Install the JSON codecs on ``conn`` (pass as ``asyncpg.create_pool(init=register_json)``)."""
    await conn.set_type_codec("json", schema="pg_catalog", encoder=_json_encode, decoder=_json_decode, format="binary")
    await conn.set_type_codec(
        "jsonb", schema="pg_catalog", encoder=_jsonb_encode, decoder=_jsonb_decode, format="binary"
    )
