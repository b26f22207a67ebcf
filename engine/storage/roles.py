"""Database roles: the schema owner runs migrations; the runtime role the nodes log in as may only read and
write rows (SELECT / INSERT / UPDATE / DELETE on tables, USAGE on sequences, EXECUTE on functions), never
create, alter or drop anything, so a node (or a task that steals its DSN) cannot change the schema. No other
role (but superusers) may connect to the database."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

import asyncpg

from core import logs
from core.errors import SchemaError

log = logs.get(__name__)

#: run by the owner after every upgrade (idempotent): the tables of now, and by default those of later
#: migrations, which the same owner creates
_GRANTS = (
    "GRANT CONNECT ON DATABASE {db} TO {role}",
    "GRANT USAGE ON SCHEMA public TO {role}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}",
    "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}",
    "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {role}",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {role}",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {role}",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT EXECUTE ON FUNCTIONS TO {role}",
    # no one else connects (PostgreSQL lets PUBLIC connect to a new database): a session in the database may
    # LISTEN on any channel, and porpoise_command carries the rows of new commands (their start parameters).
    # The owner keeps its own right; a role running this that does not own the database revokes nothing.
    "REVOKE CONNECT ON DATABASE {db} FROM PUBLIC",
)


def dsn_user(dsn: str) -> str:
    """The role a ``postgresql://user@host/db`` DSN logs in as ("" when it names none)."""
    try:
        return unquote(urlsplit(dsn).username or "")
    except ValueError:
        return ""


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def grant_runtime(conn: asyncpg.Connection, role: str, required: bool = True) -> bool:
    """Give ``role`` the run-time rights on this database (connected as the schema owner); whether it did.
    Nothing to do when the owner is the runtime role too (a one-role development set-up), or when the role
    does not exist and was not asked for by name (``required``)."""
    if role == await conn.fetchval("SELECT current_user"):
        return False
    if not await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role):
        if not required:
            return False
        raise SchemaError(f"database role {role!r} (the runtime role) does not exist")
    database = quote_ident(await conn.fetchval("SELECT current_database()"))
    async with conn.transaction():
        for grant in _GRANTS:
            await conn.execute(grant.format(db=database, role=quote_ident(role)))
    if await conn.fetchval("SELECT has_database_privilege('public', current_database(), 'CONNECT')"):
        # the REVOKE revoked nothing: the schema owner does not own the database
        log.warning(
            "every role of the server may connect to the metadata database (and LISTEN to new commands' rows):"
            " revoke it as the database's owner",
            statement=f"REVOKE CONNECT ON DATABASE {database} FROM PUBLIC",
        )
    return True


async def ddl_powers(conn: asyncpg.Connection) -> str:
    """Why the connected role could change the schema ("" when it cannot): a superuser, or the owner of the
    schema's tables, or allowed to create in schema public."""
    row = await conn.fetchrow(
        "SELECT r.rolsuper,"
        " EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = 'public' AND tableowner = current_user) AS owns,"
        " has_schema_privilege('public', 'CREATE') AS creates"
        " FROM pg_roles r WHERE r.rolname = current_user"
    )
    if row is None:
        return ""
    reasons = [why for flag, why in zip(row.values(), ("superuser", "owns tables", "may create in public"), strict=True)
               if flag]  # fmt: skip
    return ", ".join(reasons)
