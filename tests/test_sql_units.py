"""Units of the SQL runners: statement splitting, ClickHouse's inline INSERT rewrite, IN value types."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from engine.tasks.base import TaskContext
from engine.tasks.sql import SqlTask
from engine.tasks.sql_dialects import SqlError, session_for
from engine.tasks.sql_dialects.clickhouse import inline_insert_as_select
from engine.tasks.sql_dialects.split import split_statements
from engine.tasks.sql_runner import bound_args, typed


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


def _job_of(sql: str, local_params: list[dict[str, str]], kind: str) -> dict[str, object]:
    """The runner's job for one SQL task on a data source of ``kind``, as the worker writes it."""
    params = {"datasource": "wh", "sql": sql, "localParams": local_params}
    ctx = TaskContext(
        task_instance_id=1, task_name="q", task_params=params,
        values={p["prop"]: p["value"] for p in local_params if "value" in p},
        when=dt.datetime(2024, 1, 31), exec_dir=Path("/nonexistent"),
        datasources={"wh": {"type": kind, "host": "127.0.0.1", "port": 9000, "user": "u", "password": "p"}},
    )  # fmt: skip
    launch = SqlTask().launch(ctx)
    return dict(json.loads(launch.files["job.json"])["sql"])


@pytest.mark.parametrize(
    ("kind", "typed_binds", "bound"),
    [
        ("CLICKHOUSE", True, [5, "x"]),
        ("MYSQL", True, [5, "x"]),
        ("HIVE", True, [5, "x"]),
        ("POSTGRESQL", False, ["5", "x"]),
    ],
)
def test_bound_values_go_to_the_driver_as_their_declared_types(
    kind: str, typed_binds: bool, bound: list[object]
) -> None:
    stmt = _job_of("SELECT * FROM t WHERE n >= ${least} AND d = ${day}",
                   [{"prop": "least", "direct": "IN", "type": "INTEGER", "value": "5"},
                    {"prop": "day", "direct": "IN", "type": "VARCHAR", "value": "x"}], kind)  # fmt: skip
    session = session_for({"type": kind})
    assert session.typed_binds is typed_binds
    assert bound_args(session, stmt) == bound
    with pytest.raises(SqlError, match="IN parameter least: 'five' is not a INTEGER"):
        bound_args(session if typed_binds else session_for({"type": "CLICKHOUSE"}), {**stmt, "args": ["five", "x"]})


def test_drivers_are_given_times_and_fractional_timestamps_they_format_whole() -> None:
    from impala.interface import _bind_parameters

    stmt = {"args": ["2026-01-02 03:04:05.5", "01:02:03", "2026-01-02 03:04:05"],
            "types": ["TIMESTAMP", "TIME", "TIMESTAMP"], "names": ["a", "b", "c"]}  # fmt: skip
    hive = bound_args(session_for({"type": "HIVE"}), stmt)
    assert _bind_parameters("SELECT %s, %s", tuple(hive[:2])) == "SELECT '2026-01-02 03:04:05.500000', '01:02:03'"
    clickhouse = bound_args(session_for({"type": "CLICKHOUSE"}), stmt)
    assert clickhouse[:2] == ["2026-01-02 03:04:05.500000", "01:02:03"]
    assert clickhouse[2] == dt.datetime(2026, 1, 2, 3, 4, 5)  # a whole second stays a datetime (its zone kept)
