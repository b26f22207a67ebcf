"""Re-sealing the secrets stored in PostgreSQL under a keyring's primary key (engine/secretbox.py).

Used by ``porpoise secrets encrypt-all`` (the upgrade step that seals rows stored in plain text by older
versions), ``rotate-key`` (after a new primary key was added) and ``prune-keys`` (which keys are still in
use). Rows are handled a few at a time, each batch in its own short transaction that locks only its rows,
so a live cluster keeps working: a row is either still under its old key (which the keyring still holds)
or already under the new one. The connection given reads JSON columns as objects (``jsoncodec.register_json``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import asyncpg

from engine.alerts.senders import SECRET_KEYS
from engine.secretbox import DATASOURCE_SECRETS, PROJECT_PARAM_SECRETS, Keyring, key_ids, reseal_params

#: (table, JSON column, secret fields, sealing context)
TABLES = (
    ("datasource", "connection_params", DATASOURCE_SECRETS, "datasource"),
    ("alert_sender", "params", SECRET_KEYS, "alert_sender"),
)


@dataclass
class Resealed:
    scanned: int = 0
    changed: int = 0


async def reseal_all(conn: asyncpg.Connection, keyring: Keyring, batch: int = 50) -> dict[str, Resealed]:
    """Seal every secret value not yet under ``keyring.primary``; counts per table. Idempotent."""
    out: dict[str, Resealed] = {}
    for table, column, fields, kind in TABLES:
        done = out[table] = Resealed()
        last = 0
        while True:
            async with conn.transaction():
                rows = await conn.fetch(
                    f"SELECT id, {column} AS params FROM {table} WHERE id > $1 ORDER BY id LIMIT $2 FOR UPDATE",
                    last,
                    batch,
                )
                for row in rows:
                    params = dict(row["params"])
                    sealed = reseal_params(keyring, params, fields, kind)
                    if sealed != params:
                        await conn.execute(
                            f"UPDATE {table} SET {column} = $2::jsonb, update_time = now() WHERE id = $1",
                            row["id"],
                            json.dumps(sealed),
                        )
                        done.changed += 1
            done.scanned += len(rows)
            if len(rows) < batch:
                break
            last = rows[-1]["id"]
    out["project_parameter"] = await _reseal_project_params(conn, keyring, batch)
    return out


async def _reseal_project_params(conn: asyncpg.Connection, keyring: Keyring, batch: int) -> Resealed:
    """The secret project parameters (one sealed text column, engine/api/project_params.py)."""
    done = Resealed()
    last = 0
    while True:
        async with conn.transaction():
            rows = await conn.fetch(
                "SELECT id, param_value FROM project_parameter WHERE secret = 1 AND id > $1 ORDER BY id LIMIT $2"
                " FOR UPDATE",
                last,
                batch,
            )
            for row in rows:
                sealed = reseal_params(
                    keyring, {"value": row["param_value"]}, PROJECT_PARAM_SECRETS, "project_parameter"
                )["value"]
                if sealed != row["param_value"]:
                    await conn.execute(
                        "UPDATE project_parameter SET param_value = $2, update_time = now() WHERE id = $1",
                        row["id"],
                        sealed,
                    )
                    done.changed += 1
        done.scanned += len(rows)
        if len(rows) < batch:
            return done
        last = rows[-1]["id"]


async def keys_in_use(conn: asyncpg.Connection) -> set[str]:
    """Key ids the stored secrets are sealed with; ``""`` when some secret is still plain text."""
    used: set[str] = set()
    for table, column, fields, _ in TABLES:
        for row in await conn.fetch(f"SELECT {column} AS params FROM {table}"):
            used |= key_ids(dict(row["params"]), fields)
    for row in await conn.fetch("SELECT param_value FROM project_parameter WHERE secret = 1"):
        used |= key_ids({"value": row["param_value"]}, PROJECT_PARAM_SECRETS)
    return used
