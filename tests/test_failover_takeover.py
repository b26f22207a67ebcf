"""The takeover of one instance against a real PostgreSQL (no registry, no workers): what the failover
service leaves behind when something between the takeover's commit and the actor's start goes wrong."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from engine.master.commands import DefinitionCache
from engine.master.failover import FailoverService
from engine.master.store import MasterStore
from engine.states import WorkflowState
from rpc import RpcClient

ME, DEAD = "127.0.0.1:5678", "127.0.0.1:5679"


@pytest.fixture
async def pool(fresh_db: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4)
    yield pool
    await pool.close()


class Started:
    """The service's start_actor: records what it was asked to drive."""

    def __init__(self) -> None:
        self.instances: list[tuple[int, int]] = []

    def __call__(self, info: Any, *_: Any, **__: Any) -> None:
        self.instances.append((info.id, info.epoch))


def service(pool: asyncpg.Pool, started: Started, actors: dict[int, Any] | None = None) -> FailoverService:
    return FailoverService(
        ME,
        MasterStore(pool, ME),
        DefinitionCache(pool),
        RpcClient("test-secret"),
        lambda: None,
        actors or {},
        started,
        5.0,
    )


async def instance(pool: asyncpg.Pool, host: str, code: int = 404, version: int = 1) -> tuple[int, int]:
    row = await pool.fetchrow(
        "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version, project_code,"
        " state, command_type, host, epoch) VALUES ('w', $1, $2, 1, 1, 0, $3, nextval('workflow_epoch_seq'))"
        " RETURNING id, epoch",
        code,
        version,
        host,
    )
    return int(row["id"]), int(row["epoch"])


async def test_an_instance_whose_definition_is_gone_ends_failure_with_the_reason(pool: asyncpg.Pool) -> None:
    started = Started()
    svc = service(pool, started)
    wid, epoch = await instance(pool, DEAD)
    try:
        await svc._take(wid, DEAD, epoch, set())
    finally:
        await svc.rpc.close()
    row = await pool.fetchrow("SELECT state, end_time, state_history, host FROM workflow_instance WHERE id = $1", wid)
    assert started.instances == []
    assert WorkflowState(row["state"]) is WorkflowState.FAILURE, "owned by a live master and never driven"
    assert row["end_time"] is not None
    history = json.loads(row["state_history"]) if isinstance(row["state_history"], str) else row["state_history"]
    assert any("404" in h["desc"] and "does not exist" in h["desc"] for h in history), history
