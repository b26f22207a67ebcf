"""A new run's first turn is taken when its command is claimed, and the one-statement claim of a page of plain
starts writes each run's first attempts with its instance (engine.master.first_turn): the actor then dispatches
them with no write of its own. A turn the claim does not write (task groups, the claim's transaction) is written
by the actor, and a claim that wrote something else than the turn crashes the actor for recovery. Against a real
PostgreSQL, with real actors (dispatches recorded instead of sent)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import pytest

from engine.master import commands as commands_mod
from engine.master import first_turn as first_turn_mod
from engine.master.actor import DispatchRequest, InstanceInfo, WorkflowActor
from engine.master.attempt_rows import new_attempt
from engine.master.commands import Claimed
from engine.master.first_turn import FirstTurn
from engine.master.store import MasterStore, WriteBatch
from engine.master.wheel import StateWheel
from engine.master.workflow_messages import CreateAttempts
from engine.states import TaskState, WorkflowState
from tests.cluster_harness import command, query, save, shell
from tests.helpers import eventually
from tests.test_claim_starts import ME, no_transaction, one_statement_tries, poller


class CountingStore(MasterStore):
    """The master's store, counting the actor's writes."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool, ME)
        self.writes: list[WriteBatch] = []

    async def write(self, instance_id: int, epoch: int, batch: WriteBatch) -> list[int]:
        self.writes.append(batch)
        return await super().write(instance_id, epoch, batch)


class Actors:
    """Real actors started as Master.start_actor starts them, their dispatches recorded."""

    def __init__(self, store: MasterStore) -> None:
        self.store = store
        self.wheel = StateWheel()
        self.sent: list[DispatchRequest] = []
        self.actors: list[WorkflowActor] = []

    def start(self, claimed: Claimed) -> WorkflowActor:
        row, spec, _, turn = claimed
        assert turn is not None
        info = InstanceInfo.from_row(row)
        turn.run.instance_id = info.id
        actor = WorkflowActor(info, spec, turn.run, self.store, self.wheel, ME, self.sent.append, _kill,
                              lambda *_: None, first=turn)  # fmt: skip
        self.actors.append(actor)
        actor.start()
        return actor

    async def __aenter__(self) -> Actors:
        self.wheel.start(lambda owner, event: owner.post(event))
        return self

    async def __aexit__(self, *_: object) -> None:
        for actor in self.actors:
            await actor.stop()
        await self.wheel.close()


async def _kill(*_: object) -> None:
    return None


async def codes(dsn: str, workflow: int) -> dict[str, int]:
    rows = await query(
        dsn,
        "SELECT t.name, t.code FROM task_definition t JOIN workflow_task_relation r ON r.post_task_code = t.code"
        " WHERE r.workflow_definition_code = $1",
        workflow,
    )
    return {r["name"]: int(r["code"]) for r in rows}


def diamond() -> list[Any]:
    return [shell("a", "true"), shell("b", "echo b", priority=2), shell("c", "true", ("a", "b"))]


async def test_the_claim_writes_each_new_run_s_first_attempts_with_its_instance(
    pool: asyncpg.Pool, fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    used, tries = no_transaction(monkeypatch), one_statement_tries(monkeypatch)
    code = await save(fresh_db, "diamond", diamond(), timeout=5)  # the turn arms the run's time limit too
    ids = await command(fresh_db, code, 3, dry_run=1)
    task = await codes(fresh_db, code)
    p = poller(pool, fresh_db)
    claimed = await p.claim(await p.store.fetch_commands(0, 1, 100))
    assert tries == [True] and used == [], "a page of plain starts is one statement"
    assert [int(row["command_id"]) for row, *_ in claimed] == ids
    for row, spec, _, turn in claimed:
        assert turn is not None and turn.attempts is not None and turn.ids is not None
        rows = await query(
            fresh_db, "SELECT * FROM task_instance WHERE workflow_instance_id = $1 ORDER BY id", row["id"]
        )
        assert {r["task_code"]: r["id"] for r in rows} == {
            a.task_code: ti for a, ti in zip(turn.attempts, turn.ids, strict=True)
        }
        assert sorted(r["task_code"] for r in rows) == sorted([task["a"], task["b"]]), "the roots, not c"
        created = {a.code: a for action in turn.actions if isinstance(action, CreateAttempts) for a in action.attempts}
        for r in rows:
            want = new_attempt(spec, created[r["task_code"]], 1)
            assert (r["attempt"], r["state"], r["flag"], r["dry_run"]) == (1, int(TaskState.SUBMITTED_SUCCESS), 1, 1)
            assert (json.loads(r["task_params"]), json.loads(r["var_pool"]), r["task_instance_priority"],
                    r["max_retry_times"]) == (
                want.task_params, want.var_pool, want.priority, want.max_retry_times)  # fmt: skip
            assert (r["name"], r["task_type"], r["task_definition_version"], r["worker_group"]) == (
                want.name, want.task_type, want.task_version, want.worker_group)  # fmt: skip
        instance = (await query(fresh_db, "SELECT update_time FROM workflow_instance WHERE id = $1", row["id"]))[0]
        assert {r["submit_time"] for r in rows} == {instance["update_time"]}, "written in the instance's statement"


async def test_an_actor_started_from_its_first_turn_dispatches_the_claim_s_attempts_without_a_write(
    pool: asyncpg.Pool, fresh_db: str
) -> None:
    code = await save(fresh_db, "diamond", diamond(), timeout=5)
    (cid,) = await command(fresh_db, code)
    store = CountingStore(pool)
    p = poller(pool, fresh_db)
    (claimed,) = await p.claim(await p.store.fetch_commands(0, 1, 100))
    row, _, _, turn = claimed
    assert turn is not None and turn.ids is not None
    async with Actors(store) as actors:
        actor = actors.start(claimed)
        await eventually(lambda: len(actors.sent) == 2, 10, "both roots dispatched")
        assert store.writes == [], "the first turn's write was the claim's"
        sent = sorted(r.message.task_instance_id for r in actors.sent)
        assert sent == sorted(turn.ids) and {r.message.epoch for r in actors.sent} == {row["epoch"]}
        assert not actor.crashed and actor.run.state is WorkflowState.RUNNING_EXECUTION
        assert actors.wheel.due((row["id"], "workflow-timeout")) is not None, "the turn's timer is armed"
    assert len(await query(fresh_db, "SELECT 1 FROM task_instance")) == 2, "nothing written twice"
    assert cid == row["command_id"]


async def test_a_first_turn_the_claim_took_in_its_transaction_is_written_by_the_actor(
    pool: asyncpg.Pool, fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    used, tries = no_transaction(monkeypatch), one_statement_tries(monkeypatch)
    good = await save(fresh_db, "good", diamond())
    long_code = await save(fresh_db, "long", [shell("t", "true")])
    for table in ("workflow_definition", "workflow_definition_log"):  # refused by the one-statement claim
        await query(fresh_db, f"UPDATE {table} SET name = $2 WHERE code = $1", long_code, "n" * 255)
    await command(fresh_db, good)
    await command(fresh_db, long_code)
    store = CountingStore(pool)
    p = poller(pool, fresh_db)
    (claimed,) = await p.claim(await p.store.fetch_commands(0, 1, 100))
    assert tries == [False] and used, "the page went through the transaction"
    row, _, _, turn = claimed
    assert turn is not None and turn.attempts is not None and turn.ids is None
    assert await query(fresh_db, "SELECT 1 FROM task_instance") == [], "the transaction writes no attempt"
    async with Actors(store) as actors:
        actors.start(claimed)
        await eventually(lambda: len(actors.sent) == 2, 10, "both roots dispatched")
        assert len(store.writes) == 1 and len(store.writes[0].new_attempts) == 2, "the actor wrote its first turn"
    stored = await query(fresh_db, "SELECT id FROM task_instance WHERE workflow_instance_id = $1", row["id"])
    assert sorted(r["id"] for r in stored) == sorted(r.message.task_instance_id for r in actors.sent)


async def test_a_turn_that_takes_task_group_slots_is_not_written_by_the_claim(
    pool: asyncpg.Pool, fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries = one_statement_tries(monkeypatch)
    await query(fresh_db, "INSERT INTO task_group (name, group_size) VALUES ('g', 1)")
    code = await save(fresh_db, "grouped", [shell("a", "true", task_group="g"), shell("b", "true")])
    await command(fresh_db, code)
    p = poller(pool, fresh_db)
    ((row, _, _, turn),) = await p.claim(await p.store.fetch_commands(0, 1, 100))
    assert tries == [True] and row["host"] == ME
    assert turn is not None and turn.attempts is None and turn.ids is None, "its slots are taken by the actor"
    assert await query(fresh_db, "SELECT 1 FROM task_instance") == []


async def test_a_start_from_a_task_writes_only_that_task_s_attempt(pool: asyncpg.Pool, fresh_db: str) -> None:
    code = await save(fresh_db, "diamond", diamond())
    task = await codes(fresh_db, code)
    await command(fresh_db, code, command_type=1, command_param={"StartNodeList": [task["c"]]}, task_depend_type=0)
    p = poller(pool, fresh_db)
    ((row, _, _, turn),) = await p.claim(await p.store.fetch_commands(0, 1, 100))
    assert turn is not None and turn.ids is not None
    stored = await query(fresh_db, "SELECT id, task_code FROM task_instance WHERE workflow_instance_id = $1", row["id"])
    assert [(r["id"], r["task_code"]) for r in stored] == [(turn.ids[0], task["c"])]


async def test_a_claim_that_wrote_other_attempts_than_the_turn_crashes_the_actor_for_recovery(
    pool: asyncpg.Pool, fresh_db: str
) -> None:
    code = await save(fresh_db, "diamond", diamond())
    await command(fresh_db, code)
    store = CountingStore(pool)
    p = poller(pool, fresh_db)
    (claimed,) = await p.claim(await p.store.fetch_commands(0, 1, 100))
    turn = claimed[3]
    assert turn is not None and turn.ids is not None
    turn.ids = turn.ids[:1]  # one attempt fewer than the turn creates
    async with Actors(store) as actors:
        actor = actors.start(claimed)
        await eventually(lambda: actor.task is None, 10, "the actor ended")
        assert actor.crashed and actors.sent == [] and store.writes == []


async def test_a_first_turn_that_cannot_be_taken_leaves_the_start_to_the_actor(
    pool: asyncpg.Pool, fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> FirstTurn:
        raise RuntimeError("broken")

    monkeypatch.setattr(commands_mod, "first_turn", broken)
    code = await save(fresh_db, "plain", [shell("t", "true")])
    ids = await command(fresh_db, code, 2)
    p = poller(pool, fresh_db)
    claimed = await p.claim(await p.store.fetch_commands(0, 1, 100))
    assert [int(row["command_id"]) for row, *_ in claimed] == ids and all(turn is None for *_, turn in claimed)
    assert await query(fresh_db, "SELECT 1 FROM task_instance") == []


async def test_the_runs_of_a_page_read_their_context_once_while_it_is_claimed(
    pool: asyncpg.Pool, fresh_db: str
) -> None:
    one = await save(fresh_db, "one", [shell("t", "true")])
    two = await save(fresh_db, "two", diamond())
    project = (await query(fresh_db, "SELECT project_code FROM workflow_definition WHERE code = $1", one))[0][0]
    await query(fresh_db, "INSERT INTO project_parameter (project_code, param_name, param_value) VALUES ($1, 'p', 'v')",
                project)  # fmt: skip
    await command(fresh_db, one, 3)
    await command(fresh_db, two, 2)
    store = CountingStore(pool)
    reads: list[tuple[int, tuple[int, ...]]] = []
    real = store.run_context

    async def counted(project_code: int, environments: Any) -> Any:
        reads.append((project_code, tuple(environments)))
        return await real(project_code, environments)

    store.run_context = counted  # type: ignore[method-assign]
    p = poller(pool, fresh_db)
    p.store = store
    claimed = await p.claim(await p.store.fetch_commands(0, 1, 100))
    assert reads == [(project, (-1,))], "one read for the page's five runs of one project"
    async with Actors(store) as actors:
        for c in claimed:
            actors.start(c)
        await eventually(lambda: len(actors.sent) == 3 + 2 * 2, 10, "every root dispatched")
        assert len(reads) == 1, "no actor read it again"
        assert all(r.message.project_params == [{"prop": "p", "value": "v", "secret": False}] for r in actors.sent)


async def test_a_command_whose_param_is_a_json_array_of_pairs_does_not_stall_its_page(
    pool: asyncpg.Pool, fresh_db: str
) -> None:
    """``dict(["ab"])`` is ``{"a": "b"}``: such a command is accepted as before, and nothing about one command
    fails the page's claim (which the poller would retry forever)."""
    code = await save(fresh_db, "plain", [shell("t", "true")])
    (odd,) = await command(fresh_db, code, command_param='["ab"]')
    good = await command(fresh_db, code, 2)
    p = poller(pool, fresh_db)
    claimed = await p.claim(await p.store.fetch_commands(0, 1, 100))
    assert sorted(int(row["command_id"]) for row, *_ in claimed) == sorted([odd, *good])
    assert await query(fresh_db, "SELECT id FROM command") == []


async def test_a_context_read_before_a_claim_that_took_longer_than_its_ttl_is_read_again(
    pool: asyncpg.Pool, fresh_db: str
) -> None:
    """The page's context is read while it is claimed; its age counts from the read's start, so a claim that
    took longer than master.run_context_ttl (here 0) has the first dispatch read it again."""
    code = await save(fresh_db, "one", [shell("t", "true")])
    project = (await query(fresh_db, "SELECT project_code FROM workflow_definition WHERE code = $1", code))[0][0]
    await query(fresh_db, "INSERT INTO project_parameter (project_code, param_name, param_value)"
                " VALUES ($1, 'p', 'old')", project)  # fmt: skip
    await command(fresh_db, code)
    p = poller(pool, fresh_db)

    class SlowClaim(CountingStore):
        async def claim(self, *args: Any, **kw: Any) -> Any:
            await asyncio.gather(*p._reads)  # the page's context is read (the old value) before the claim ends
            await query(fresh_db, "UPDATE project_parameter SET param_value = 'new' WHERE project_code = $1", project)
            return await super().claim(*args, **kw)

    store = SlowClaim(pool)
    p.store = store
    ((row, spec, _, turn),) = await p.claim(await p.store.fetch_commands(0, 1, 100))
    assert turn is not None and turn.context is not None and turn.context.done()
    assert turn.context.result().project_params[0]["value"] == "old", "read before the claim"
    info = InstanceInfo.from_row(row)
    turn.run.instance_id = info.id
    async with Actors(store) as actors:
        actor = WorkflowActor(info, spec, turn.run, store, actors.wheel, ME, actors.sent.append, _kill,
                              lambda *_: None, context_ttl=0.0, first=turn)  # fmt: skip
        actors.actors.append(actor)
        actor.start()
        await eventually(lambda: actors.sent, 10, "the first dispatch")
        assert actors.sent[0].message.project_params == [{"prop": "p", "value": "new", "secret": False}]


async def test_a_claim_writes_first_attempts_up_to_its_cap_and_the_actors_write_the_rest(
    pool: asyncpg.Pool, fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its statement stays small however wide the page's DAGs: the turns past the cap have their actors write."""
    monkeypatch.setattr(first_turn_mod, "CLAIM_ATTEMPTS", 3)
    tries = one_statement_tries(monkeypatch)
    code = await save(fresh_db, "diamond", diamond())  # two roots: two first attempts per run
    ids = await command(fresh_db, code, 3)
    p = poller(pool, fresh_db)
    claimed = await p.claim(await p.store.fetch_commands(0, 1, 100))
    assert tries == [True] and [int(row["command_id"]) for row, *_ in claimed] == ids
    turns = [turn for *_, turn in claimed]
    assert all(t is not None and t.attempts for t in turns)
    assert [t.ids is not None for t in turns if t is not None] == [True, False, False], "2 <= 3 < 4"
    written = await query(fresh_db, "SELECT DISTINCT workflow_instance_id AS w FROM task_instance")
    assert [r["w"] for r in written] == [claimed[0][0]["id"]]
