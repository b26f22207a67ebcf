"""The master's write batch: task updates folded into few statements with the same end result."""

from __future__ import annotations

import asyncpg
import pytest
from asyncpg.exceptions import _base

from engine.master.store import TaskUpdate, _task_update_sql, _task_updates, _task_updates_sql
from engine.storage.failures import transient


def test_updates_of_one_attempt_fold_into_one_and_same_columns_share_a_statement() -> None:
    groups = _task_updates(
        [
            TaskUpdate(1, 1, {"host": "w:1"}),  # DISPATCH
            TaskUpdate(2, 1, {"host": "w:2"}),
            TaskUpdate(1, 7, {"end_time": 1_000, "exit_code": 0}),  # then its result, in the same batch
            TaskUpdate(3, 1, {"host": "w:1"}),
        ]
    )
    assert len(groups) == 2
    assert groups[("host",)] == [[2, 1, "w:2"], [3, 1, "w:1"]]
    ((names, (row,)),) = [(names, rows) for names, rows in groups.items() if "end_time" in names]
    # the last state wins and the fields of both updates are set, as applying them in order would
    assert names == ("end_time", "exit_code", "host") and row[:2] == [1, 7] and row[3:] == [0, "w:1"]


def test_one_attempt_is_one_row_statement_and_many_share_one_set_based_statement() -> None:
    one = _task_update_sql(("host", "var_pool"))
    assert one == (
        "UPDATE task_instance SET state = $2, update_time = now(), host = $3, var_pool = $4::jsonb WHERE id = $1"
    )
    many = _task_updates_sql(("host", "var_pool"))
    assert "unnest($1::bigint[], $2::smallint[], $3::text[], $4::jsonb[]) AS u(id, state, host, var_pool)" in many
    assert many.endswith("WHERE t.id = u.id")


def test_an_unknown_column_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown task field"):
        _task_updates([TaskUpdate(1, 1, {"state; DROP TABLE x": 1})])


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ConnectionResetError(), True),
        (TimeoutError(), True),
        (asyncpg.ConnectionDoesNotExistError("closed"), True),
        (asyncpg.AdminShutdownError("shutdown"), True),
        (asyncpg.SerializationError("retry"), True),
        (asyncpg.DiskFullError("full"), True),
        (asyncpg.QueryCanceledError("statement timeout"), True),
        (asyncpg.StringDataRightTruncationError("value too long"), False),
        (asyncpg.UniqueViolationError("duplicate"), False),
        (_base.DataError("invalid input for query argument $1"), False),  # client-side: cannot encode it
        (OverflowError("date value out of range"), False),
    ],
)
def test_only_a_lost_connection_or_a_failing_server_is_transient(exc: BaseException, expected: bool) -> None:
    # a claim retries its page for a transient error; anything else is the command's own fault
    assert transient(exc) is expected
