"""The master's and the API server's pools hand a released connection on without asyncpg's session reset
(engine/storage/pool.py ``reset_sessions=False``): that is only right while no code of theirs leaves state in
a pooled connection's session. This test reads the source and fails on the first such statement: a LISTEN
(add_listener) outside the modules that open a connection of their own for it, a session-level advisory
lock outside the schema upgrade (its own connection), a session-level SET or set_config, a cursor held
past its transaction. SQL of task plugins (engine/tasks: connections to users' databases, never the pool)
is not concerned."""

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
    return found


def test_the_checks_find_each_kind_of_session_state() -> None:
    bad = Path(ROOT / "engine/api/example.py")
    text = "\n".join([
        "await conn.add_listener('x', f)",
        "await conn.execute('SELECT pg_advisory_lock(1)')",
        "await conn.execute(\"SET statement_timeout = 5\")",
        "await conn.execute(\"SELECT set_config('a.b', '1', false)\")",
        "await conn.execute('DECLARE c CURSOR WITH HOLD FOR SELECT 1')",
        "await conn.execute('SET LOCAL lock_timeout = 1')",  # transaction-scoped: fine
        "await conn.execute('SELECT pg_advisory_xact_lock(1)')",  # fine
        "await conn.execute('UPDATE t SET x = 1')",  # not a session setting
    ])  # fmt: skip
    assert [f.split(": ", 1)[1] for f in findings(bad, text)] == [
        "LISTEN on what may be a pooled connection",
        "session-level advisory lock (use pg_advisory_xact_lock)",
        "session-level setting (use SET LOCAL inside a transaction)",
        "session-level setting (use SET LOCAL inside a transaction)",
        "a cursor held past its transaction",
    ]


def test_no_code_that_uses_the_pools_leaves_state_in_a_session() -> None:
    sources = _sources()
    assert any(p.as_posix().endswith("engine/api/server.py") for p in sources)
    found = [f for p in sources for f in findings(p, p.read_text())]
    assert not found, "\n".join(found)
