"""schema.sql (at the repository root), generated from the metadata of engine/storage/tables.py (the one definition
of the schema): what ``porpoise db init`` applies to an empty database.

    python -m engine.storage.schema_sql --write    regenerate the file after changing the tables
    python -m engine.storage.schema_sql --check    exit 1 when the committed file is stale (make lint)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from sqlalchemy import create_mock_engine

from engine.datafiles import data_path
from engine.storage import tables

HEADER = """\
-- GENERATED from engine/storage/tables.py, auth_tables.py and db_objects.py by
-- `python -m engine.storage.schema_sql --write`: do not edit. `porpoise db init` applies it to an empty
-- database and records every migration of engine/storage/migrations/ as applied; existing databases
-- change only through those migrations (`porpoise db upgrade`).
"""


def render() -> str:
    """The DDL of the whole schema, as PostgreSQL statements in creation order."""
    statements: list[str] = []

    def emit(ddl: Any, *_: Any, **__: Any) -> None:
        text = str(ddl.compile(dialect=engine.dialect)).strip()
        lines = [line.rstrip().replace("\t", "    ") for line in text.splitlines()]
        statements.append("\n".join(lines) + ";")

    engine = create_mock_engine("postgresql+asyncpg://", emit)  # type: ignore[arg-type]
    tables.metadata.create_all(engine, checkfirst=False)  # type: ignore[arg-type]
    return HEADER + "\n" + "\n\n".join(_indexes_sorted(statements)) + "\n"


def _indexes_sorted(statements: list[str]) -> list[str]:
    """A table's indexes come in set order (it changes with the interpreter's hash seed): each run of
    CREATE INDEX statements (one table's) in name order, so the file is the same on every run."""
    out: list[str] = []
    run: list[str] = []
    for statement in [*statements, ""]:
        if statement.startswith(("CREATE INDEX", "CREATE UNIQUE INDEX")):
            run.append(statement)
            continue
        out += sorted(run, key=lambda s: s.split(" ON ")[0].split()[-1])
        run = []
        if statement:
            out.append(statement)
    return out


def schema_text() -> str:
    """The committed schema.sql (engine/datafiles.py: the checkout's, or the copy a wheel carries)."""
    return data_path("schema.sql").read_text(encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.storage.schema_sql", description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="regenerate schema.sql")
    mode.add_argument("--check", action="store_true", help="fail when schema.sql is stale")
    args = parser.parse_args(argv)
    path = data_path("schema.sql")
    text = render()
    if args.write:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
        return 0
    if path.read_text(encoding="utf-8") != text:
        print(f"{path} is stale: run python -m engine.storage.schema_sql --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
