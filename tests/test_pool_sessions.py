"""The master's and the API server's pools hand a released connection on without asyncpg's session reset
(engine/storage/pool.py ``reset_sessions=False``): that is only right while no code of theirs leaves state in
a pooled connection's session. This test reads the source and fails on the first such statement: a LISTEN
(add_listener) outside the modules that open a connection of their own for it, a session-level advisory
lock outside the schema upgrade (its own connection), a session-level SET or set_config (SET ROLE and SET
SESSION AUTHORIZATION among them), a cursor held past its transaction, a temporary table kept past its
transaction, a prepared statement of SQL's PREPARE. The bodies of the database functions the migrations
define (triggers run on whichever connection writes) are read for the same. SQL of task plugins
(engine/tasks: connections to users' databases, never the pool) is not concerned."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: modules whose LISTEN runs on a connection they open for it alone (asyncpg.connect, never the pool)
OWN_LISTENERS = {"engine/api/live.py", "engine/master/commands.py", "engine/concurrency/task_groups_sql.py"}
#: the schema upgrade's advisory lock is held on the owner's connection it opened (engine/storage/schema.py)
OWN_LOCKS = {"engine/storage/schema.py"}
#: SQL is written in capitals here: a statement (or one after a ";") that is a SET of the session
SESSION_SET = re.compile(r"""["'](?:[^"']*;\s*)?SET\s+(?!LOCAL\b|TRANSACTION\b|CONSTRAINTS\b)\w""")
SESSION_LOCK = re.compile(r"pg_(?:try_)?advisory_lock(?:_shared)?\s*\(")
SESSION_CONFIG = re.compile(r"set_config\s*\([^)]*\bfalse\s*\)", re.IGNORECASE)
#: a statement (or one after a ";") that LISTENs or PREPAREs: both outlive the transaction
SESSION_LISTEN = re.compile(r"""["'](?:[^"']*;\s*)?LISTEN\s+\w""")
SESSION_PREPARE = re.compile(r"""["'](?:[^"']*;\s*)?PREPARE\s+\w""")
#: a temporary table lives as long as the session unless it is dropped at commit (ON COMMIT DROP)
TEMP_TABLE = re.compile(r"\b(?:CREATE\s+(?:(?:GLOBAL|LOCAL)\s+)?TEMP(?:ORARY)?\s+TABLE|INTO\s+TEMP(?:ORARY)?\s)")
DROPPED_AT_COMMIT = re.compile(r"ON\s+COMMIT\s+DROP")
#: the same in a database function's body (PL/pgSQL: no quotes; a SET there starts its line)
FUNCTION_BODY = re.compile(r"\$\$(.*?)\$\$", re.DOTALL)
BODY_STATEMENT = re.compile(r"^\s*(?:(?:SET\s+(?!LOCAL\b|TRANSACTION\b|CONSTRAINTS\b))|LISTEN\s|PREPARE\s)")


def _sources() -> list[Path]:
    return [p for p in sorted((ROOT / "engine").rglob("*.py")) if "engine/tasks/" not in p.as_posix()]


def findings(path: Path, text: str) -> list[str]:
    rel = path.relative_to(ROOT).as_posix()
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        if "add_listener(" in code and rel not in OWN_LISTENERS:
            found.append(f"{rel}:{n}: LISTEN on what may be a pooled connection")
        if SESSION_LOCK.search(code) and rel not in OWN_LOCKS:
            found.append(f"{rel}:{n}: session-level advisory lock (use pg_advisory_xact_lock)")
        if SESSION_SET.search(code) or SESSION_CONFIG.search(code):
            found.append(f"{rel}:{n}: session-level setting (use SET LOCAL inside a transaction)")
        if re.search(r"WITH\s+HOLD", code, re.IGNORECASE):
            found.append(f"{rel}:{n}: a cursor held past its transaction")
        if SESSION_LISTEN.search(code) and rel not in OWN_LISTENERS:
            found.append(f"{rel}:{n}: LISTEN on what may be a pooled connection")
        if SESSION_PREPARE.search(code):
            found.append(f"{rel}:{n}: a prepared statement kept by the session (asyncpg prepares its own)")
        if TEMP_TABLE.search(code) and not DROPPED_AT_COMMIT.search(code):
            found.append(f"{rel}:{n}: a temporary table kept by the session (ON COMMIT DROP, in a transaction)")
    return found


def function_findings(path: Path, text: str) -> list[str]:
    """Session state left by the body of a database function a migration defines."""
    rel = path.relative_to(ROOT).as_posix()
    found = []
    for body in FUNCTION_BODY.findall(text):
        for line in body.splitlines():
            code = line.split("--", 1)[0]
            kept_table = TEMP_TABLE.search(code) and not DROPPED_AT_COMMIT.search(code)
            if SESSION_LOCK.search(code) or SESSION_CONFIG.search(code) or BODY_STATEMENT.search(code) or kept_table:
                found.append(f"{rel}: function body: {code.strip()}")
    return found


def test_the_checks_find_each_kind_of_session_state() -> None:
    bad = Path(ROOT / "engine/api/example.py")
    text = "\n".join([
        "await conn.add_listener('x', f)",
        "await conn.execute('SELECT pg_advisory_lock(1)')",
        "await conn.execute(\"SET statement_timeout = 5\")",
        "await conn.execute(\"SELECT set_config('a.b', '1', false)\")",
        "await conn.execute('DECLARE c CURSOR WITH HOLD FOR SELECT 1')",
        "await conn.execute('SET ROLE porpoise_reader')",
        "await conn.execute('SET SESSION AUTHORIZATION porpoise_reader')",
        "await conn.execute('LISTEN porpoise_state')",
        "await conn.execute('PREPARE q AS SELECT 1')",
        "await conn.execute('CREATE TEMP TABLE ids (id bigint)')",
        "await conn.execute('CREATE TEMPORARY TABLE ids (id bigint) ON COMMIT PRESERVE ROWS')",
        "await conn.execute('SELECT id INTO TEMP ids FROM t')",
        "await conn.execute('declare c cursor with hold for select 1')",
        "await conn.execute('SET LOCAL lock_timeout = 1')",  # transaction-scoped: fine
        "await conn.execute('SELECT pg_advisory_xact_lock(1)')",  # fine
        "await conn.execute('UPDATE t SET x = 1')",  # not a session setting
        "await conn.execute('CREATE TEMP TABLE ids (id bigint) ON COMMIT DROP')",  # gone at commit: fine
        "await conn.execute('SELECT pg_notify($1, $2)')",  # fine
    ])  # fmt: skip
    setting = "session-level setting (use SET LOCAL inside a transaction)"
    temp = "a temporary table kept by the session (ON COMMIT DROP, in a transaction)"
    assert [f.split(": ", 1)[1] for f in findings(bad, text)] == [
        "LISTEN on what may be a pooled connection",
        "session-level advisory lock (use pg_advisory_xact_lock)",
        setting,
        setting,
        "a cursor held past its transaction",
        setting,
        setting,
        "LISTEN on what may be a pooled connection",
        "a prepared statement kept by the session (asyncpg prepares its own)",
        temp,
        temp,
        temp,
        "a cursor held past its transaction",
    ]


def test_the_checks_read_the_bodies_of_database_functions() -> None:
    sql = Path(ROOT / "engine/storage/migrations/9999_example.sql")
    text = """
CREATE INDEX IF NOT EXISTS x ON t (a);  -- outside a function: the upgrade's own connection
CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('porpoise.x', '1', false);
    PERFORM pg_advisory_lock(1);
    SET search_path = other;
    CREATE TEMP TABLE seen (id bigint);
    PERFORM pg_advisory_xact_lock(1);  -- fine
    PERFORM pg_notify('porpoise_state', NEW.id::text);  -- fine
    RETURN NEW;
END
$$;
"""
    assert [f.split("function body: ", 1)[1] for f in function_findings(sql, text)] == [
        "PERFORM set_config('porpoise.x', '1', false);",
        "PERFORM pg_advisory_lock(1);",
        "SET search_path = other;",
        "CREATE TEMP TABLE seen (id bigint);",
    ]


def test_no_code_that_uses_the_pools_leaves_state_in_a_session() -> None:
    sources = _sources()
    assert any(p.as_posix().endswith("engine/api/server.py") for p in sources)
    found = [f for p in sources for f in findings(p, p.read_text())]
    migrations = sorted((ROOT / "engine/storage/migrations").glob("*.sql"))
    assert migrations
    found += [f for p in migrations for f in function_findings(p, p.read_text())]
    assert not found, "\n".join(found)
