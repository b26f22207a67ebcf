"""Units of the SQL runners: statement splitting, ClickHouse's inline INSERT rewrite, IN value types."""

from __future__ import annotations

import datetime as dt

import pytest

from engine.tasks.sql_dialects import SqlError
from engine.tasks.sql_dialects.clickhouse import inline_insert_as_select
from engine.tasks.sql_dialects.split import split_statements
from engine.tasks.sql_runner import typed


def test_split_keeps_semicolons_in_quotes_and_comments_and_drops_empty_statements() -> None:
    text = "INSERT INTO t VALUES ('a;b');\n-- a comment; still\n/* x; y */ SELECT \"c;d\", `e;f`;; \n-- tail"
    assert split_statements(text) == [
        "INSERT INTO t VALUES ('a;b')",
        '-- a comment; still\n/* x; y */ SELECT "c;d", `e;f`',
    ]
    assert split_statements("SELECT 'it\\'s; here'") == ["SELECT 'it\\'s; here'"]
    assert split_statements("  ;\n") == []


def test_clickhouse_inline_values_become_selects() -> None:
    assert (
        inline_insert_as_select("INSERT INTO t (a, b) VALUES ('x)', 1), (f(2), 3);")
        == "INSERT INTO t (a, b) SELECT 'x)', 1 UNION ALL SELECT f(2), 3"
    )
    for stmt in ("INSERT INTO t VALUES", "INSERT INTO t SELECT 1", "INSERT INTO t VALUES (1) junk"):
        assert inline_insert_as_select(stmt) == stmt


def test_in_values_take_their_declared_type_or_fail_naming_the_parameter() -> None:
    assert typed("7", "INTEGER", "a") == 7 and typed("2.5", "DOUBLE", "a") == 2.5
    assert typed("true", "BOOLEAN", "a") is True and typed("x", "VARCHAR", "a") == "x"
    assert typed("2026-03-01", "DATE", "a") == dt.date(2026, 3, 1)
    with pytest.raises(SqlError, match="IN parameter a: 'x' is not a INTEGER"):
        typed("x", "INTEGER", "a")
