"""A page of plain starts is claimed in one statement (the DELETE of its commands and the INSERT of their
instances); a page the database refuses, or one that is not only plain starts, goes through the claim's
transaction, which finds the command at fault. Against a real PostgreSQL, through the command poller."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg
import pytest

from engine.master import claim as claim_mod
from engine.master.commands import CommandPoller, DefinitionCache
from engine.master.store import MasterStore
from engine.states import WorkflowState
from tests.cluster_harness import command, query, save, shell

ME = "127.0.0.1:5678"


def poller(pool: asyncpg.Pool, dsn: str) -> CommandPoller:
    return CommandPoller(MasterStore(pool, ME), dsn, DefinitionCache(pool), lambda: (0, 1), lambda: "", lambda _: None)


def recorded(monkeypatch: pytest.MonkeyPatch, name: str, outcome: Callable[[Any], bool]) -> list[bool]:
    """Each call of ``claim_mod.<name>`` from now on, as ``outcome`` of what it returned (of None if it raised)."""
    calls: list[bool] = []
    real = getattr(claim_mod, name)

    async def recording(*args: Any, **kw: Any) -> Any:
        out = None
        try:
            out = await real(*args, **kw)
            return out
        finally:
            calls.append(outcome(out))

    monkeypatch.setattr(claim_mod, name, recording)
    return calls


def no_transaction(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record whether the claim's transaction ran (it must not for a page of plain starts)."""
    return recorded(monkeypatch, "_claim", lambda _: True)


def one_statement_tries(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record each try of the one-statement claim: whether it claimed the page (True) or gave it up."""
    return recorded(monkeypatch, "_claim_starts", lambda out: out is not None)


async def test_a_page_of_plain_starts_is_one_statement_and_skips_a_command_another_master_took(
    pool: asyncpg.Pool, fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    used, tries = no_transaction(monkeypatch), one_statement_tries(monkeypatch)
    code = await save(fresh_db, "plain", [shell("t", "true")])
    ids = await command(fresh_db, code, 5)
    p = poller(pool, fresh_db)
    rows = await p.store.fetch_commands(0, 1, 100)
    assert [r["id"] for r in rows] == ids
    await query(fresh_db, "DELETE FROM command WHERE id = $1", ids[2])  # claimed by another master meanwhile
    claimed = await p.claim(rows)
    assert tries == [True] and used == [], "the transaction ran for a page of plain starts"
    mine = [i for i in ids if i != ids[2]]
    assert [int(row["command_id"]) for row, _, _, _ in claimed] == mine
    assert all(row["host"] == ME and row["state"] == WorkflowState.RUNNING_EXECUTION for row, _, _, _ in claimed)
    assert len({row["epoch"] for row, _, _, _ in claimed}) == len(mine)
    assert [spec.code for _, spec, _, _ in claimed] == [code] * len(mine)
    stored = await query(
        fresh_db,
        "SELECT command_id, host, name, jsonb_typeof(global_params) AS globals, jsonb_typeof(command_param) AS param"
        " FROM workflow_instance ORDER BY id",
    )
    assert [r["command_id"] for r in stored] == mine and {r["host"] for r in stored} == {ME}
    # JSON columns hold their values, not JSON strings of them
    assert all(r["name"].startswith("plain-") and (r["globals"], r["param"]) == ("array", "object") for r in stored)
    assert await query(fresh_db, "SELECT 1 FROM command") == []
    assert await query(fresh_db, "SELECT 1 FROM error_command") == []


async def test_a_page_the_database_refuses_is_claimed_in_the_transaction_which_finds_the_command_at_fault(
    pool: asyncpg.Pool, fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    used, tries = no_transaction(monkeypatch), one_statement_tries(monkeypatch)
    good = await save(fresh_db, "good", [shell("t", "true")])
    long_code = await save(fresh_db, "long", [shell("t", "true")])
    for table in ("workflow_definition", "workflow_definition_log"):  # saved before names were bounded
        await query(fresh_db, f"UPDATE {table} SET name = $2 WHERE code = $1", long_code, "n" * 255)
    first = await command(fresh_db, good, 2)
    (poison,) = await command(fresh_db, long_code)
    last = await command(fresh_db, good, 2)
    p = poller(pool, fresh_db)
    claimed = await p.claim(await p.store.fetch_commands(0, 1, 100))
    assert tries == [False] and used, "the statement was refused (nothing written) and the transaction ran"
    assert [int(row["command_id"]) for row, _, _, _ in claimed] == first + last
    errors = await query(fresh_db, "SELECT id, message FROM error_command")
    assert [r["id"] for r in errors] == [poison] and "value too long" in errors[0]["message"]
    assert await query(fresh_db, "SELECT 1 FROM command") == []


async def test_a_page_with_a_sub_workflow_start_goes_through_the_transaction(
    pool: asyncpg.Pool, fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    used, tries = no_transaction(monkeypatch), one_statement_tries(monkeypatch)
    code = await save(fresh_db, "child", [shell("t", "true")])
    await command(fresh_db, code, 1)
    await command(fresh_db, code, 1, command_param={"parentWorkflowInstanceId": 1, "parentTaskCode": 1})
    p = poller(pool, fresh_db)
    claimed = await p.claim(await p.store.fetch_commands(0, 1, 100))
    assert tries == [False] and used and len(claimed) == 2
    assert await query(fresh_db, "SELECT 1 FROM command") == []
