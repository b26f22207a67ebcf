"""The per-run facts of a dispatch (MasterStore.run_context, real PostgreSQL): the project's parameters and
the environments a run's tasks name, read in one round trip when a master starts the run; a change is seen
by the next read, i.e. by the runs started after it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from engine.master.store import MasterStore, RunContext

ME = "127.0.0.1:5678"
PROJECT, OTHER = 11, 12


@pytest.fixture
async def pool(fresh_db: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=2)
    for code in (PROJECT, OTHER):
        await pool.execute("INSERT INTO project (code, name) VALUES ($1, $2)", code, f"p{code}")
    rows = [(PROJECT, "b", "2", 0), (PROJECT, "a", "sealed", 1), (OTHER, "a", "other", 0)]
    await pool.executemany(
        "INSERT INTO project_parameter (project_code, param_name, param_value, secret) VALUES ($1, $2, $3, $4)", rows
    )
    await pool.executemany(
        "INSERT INTO environment (code, name, config) VALUES ($1, $2, $3)",
        [(101, "java", "export JAVA_HOME=/j"), (102, "py", "export P=1"), (103, "unused", "export U=1")],
    )
    yield pool
    await pool.close()


async def test_a_run_gets_its_projects_parameters_and_its_tasks_environments(pool: asyncpg.Pool) -> None:
    ctx = await MasterStore(pool, ME).run_context(PROJECT, {101, 102, -1})
    assert ctx.project_params == [
        {"prop": "a", "value": "sealed", "secret": True},
        {"prop": "b", "value": "2", "secret": False},
    ]
    assert ctx.environments == {101: "export JAVA_HOME=/j", 102: "export P=1"}  # not 103, named by no task
    assert ctx.environment_config(101) == "export JAVA_HOME=/j"
    assert ctx.environment_config(-1) == "" and ctx.environment_config(999) == ""
    assert RunContext().project_params == [] and RunContext().environment_config(101) == ""


async def test_a_change_is_seen_by_the_runs_started_after_it(pool: asyncpg.Pool) -> None:
    store = MasterStore(pool, ME)
    before = await store.run_context(PROJECT, {101})
    await pool.execute("UPDATE project_parameter SET param_value = '3' WHERE project_code = $1 AND param_name = 'b'",
                       PROJECT)  # fmt: skip
    await pool.execute("INSERT INTO project_parameter (project_code, param_name, param_value) VALUES ($1, 'c', 'new')",
                       PROJECT)  # fmt: skip
    await pool.execute("UPDATE environment SET config = 'export JAVA_HOME=/k' WHERE code = 101")
    after = await store.run_context(PROJECT, {101})
    assert {p["prop"]: p["value"] for p in after.project_params} == {"a": "sealed", "b": "3", "c": "new"}
    assert after.environment_config(101) == "export JAVA_HOME=/k"
    # the run started before keeps what it read (its tasks are dispatched with one set of values)
    assert {p["prop"]: p["value"] for p in before.project_params} == {"a": "sealed", "b": "2"}
    assert before.environment_config(101) == "export JAVA_HOME=/j"
