"""The attacks of the hostile review (issue 24) by an ordinary account, each pinned through the real API with
real users and tokens (tests/hostile.py): alice and bob, each with their own project, no admin rights."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest

from tests.hostile import Hostile, hostile_api, shell, unique, waits_on

DATES = [dt.datetime(2024, 3, d, tzinfo=dt.UTC).isoformat() for d in (1, 2)]


@pytest.fixture
async def world(fresh_db: str) -> AsyncIterator[Hostile]:
    async with hostile_api(fresh_db) as w:
        yield w


async def test_an_all_dependent_backfill_queues_only_what_the_caller_may_start(world: Hostile) -> None:
    """Item 3: bob's victim_wf waits on alice's workflow; alice's ALL_DEPENDENT backfill must neither queue it
    nor name it. Her own downstream workflow is queued; one whose tenant grant was revoked is skipped; one of
    bob's she may only READ is counted, not named."""
    mine, victim = unique("alice"), unique("victim")
    up = await world.workflow("alice", {"name": "up", "project": mine, "tasks": [shell("a")]})
    own = await world.workflow("alice", {"name": "own", "project": mine, "tasks": [waits_on(up)]})
    # alice shares her project with bob (READ), so bob's workflows may wait on hers
    await world.ok("alice", "PUT", f"/api/v1/projects/{mine}/grants/bob", {"perms": ["READ"]})
    victim_wf = await world.workflow("bob", {"name": "victim_wf", "project": victim, "tasks": [waits_on(up)]})
    # a tenant granted to alice's project, then revoked: a start of that workflow would be refused
    await world.ok("admin", "POST", "/api/v1/tenants", {"name": "etl"})
    grant = await world.ok("admin", "POST", "/api/v1/grants", {"resource_type": "tenant", "resource": "etl",
                                                               "project": mine})  # fmt: skip
    tenant_wf = await world.workflow(
        "alice", {"name": "as_etl", "project": mine, "tenant": "etl", "tasks": [waits_on(own)]}
    )
    await world.ok("admin", "DELETE", f"/api/v1/grants/{grant['id']}")
    # bob's second project: alice may read it, not start anything in it
    shared = unique("shared")
    readable = await world.workflow("bob", {"name": "readable", "project": shared, "tasks": [waits_on(up)]})
    await world.ok("bob", "PUT", f"/api/v1/projects/{shared}/grants/alice", {"perms": ["READ"]})
    assert (await world.call("alice", "GET", f"/api/v1/workflows/{victim_wf}")).status == 404

    reply = await world.ok(
        "alice", "POST", f"/api/v1/workflows/{up}/backfill", {"dates": DATES, "dependent_mode": "ALL_DEPENDENT"}
    )
    listed = {d["code"]: d for d in reply["dependents"]}
    assert set(listed) == {own, tenant_wf}
    assert listed[own]["command_ids"] and listed[own]["skipped"] is None
    assert not listed[tenant_wf]["command_ids"] and "tenant 'etl'" in listed[tenant_wf]["skipped"]
    assert reply["skipped_not_permitted"] == 2
    text = str(reply)
    assert "victim" not in text and "readable" not in text and str(victim_wf) not in text
    queued = {r["workflow_definition_code"] for r in await world.query("SELECT workflow_definition_code FROM command")}
    assert queued == {up, own} and not {victim_wf, readable, tenant_wf} & queued
    # bob may read alice's workflow, not backfill it
    assert (await world.call("bob", "POST", f"/api/v1/workflows/{up}/backfill", {"dates": DATES})).status == 403
