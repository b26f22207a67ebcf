"""A statement inserting one command announces its row on porpoise_command, and the master of its slot claims
it from the announcement, without reading the command table, only while the rows in hand are all its slot
has left (engine/master/announced.py). Against a real PostgreSQL and the real trigger, through the poller."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

import asyncpg
import pytest

from engine.infra.postgres import PostgresServer
from engine.master.announced import COLUMNS, Announced, command_row
from engine.master.commands import CommandPoller, DefinitionCache
from engine.master.store import MasterStore
from tests.cluster_harness import command, query, save, shell
from tests.databases import database_name, owner_dsn

ME = "127.0.0.1:5679"


class Listening:
    """A poller of slot (0, 1) listening on porpoise_command; counts its reads of the command table and hands
    out each payload it hears."""

    def __init__(self, pool: asyncpg.Pool, dsn: str, page: int = 100) -> None:
        self.refusing = ""
        self.poller = CommandPoller(
            MasterStore(pool, ME), dsn, DefinitionCache(pool), lambda: (0, 1), lambda: self.refusing,
            lambda _: None, page=page,
        )  # fmt: skip
        self.reads = 0
        self.payloads: asyncio.Queue[str] = asyncio.Queue()
        real_fetch, real_heard = self.poller.store.fetch_commands, self.poller._heard

        async def fetch(*args: Any) -> list[asyncpg.Record]:
            self.reads += 1
            return await real_fetch(*args)

        def heard(conn: object, pid: int, channel: str, payload: str) -> None:
            real_heard(conn, pid, channel, payload)
            self.payloads.put_nowait(payload)

        self.poller.store.fetch_commands = fetch  # type: ignore[method-assign]
        self.poller._heard = heard  # type: ignore[method-assign]

    async def __aenter__(self) -> Listening:
        await self.poller._listen()
        assert self.poller._listener is not None
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.poller._close_listener()

    async def heard(self) -> str:
        return await asyncio.wait_for(self.payloads.get(), 10)


async def instances(dsn: str) -> list[int]:
    return [int(r["command_id"]) for r in await query(dsn, "SELECT command_id FROM workflow_instance ORDER BY id")]


async def test_an_announced_row_is_the_row_a_read_of_the_table_gives(pool: asyncpg.Pool, fresh_db: str) -> None:
    code = await save(fresh_db, "announced", [shell("t", "true")])
    async with Listening(pool, fresh_db) as listening:
        writer = await asyncpg.connect(fresh_db)
        try:
            await writer.execute("SET TimeZone = 'Asia/Kolkata'")  # an offset of hours and minutes
            await writer.execute(
                "INSERT INTO command (command_type, workflow_definition_code, command_param, schedule_time,"
                " warning_group_id, worker_group) VALUES (0, $1, $2, '2026-11-28 10:15:30.123456+05:30', 7, 'gpu')",
                code,
                json.dumps({"StartParams": {"day": "2026-11-28", "n": 3}, "nested": [{"a": None}, 1.5]}),
            )
        finally:
            await writer.close()
        row = command_row(await listening.heard())
        (read,) = await listening.poller.store.fetch_commands(0, 1, 100)
    assert row is not None and list(row) == list(COLUMNS)
    assert row == dict(read)
    for name in ("schedule_time", "start_time", "update_time"):  # in UTC as a read gives them, not +05:30
        assert row[name].isoformat() == read[name].isoformat() and row[name].utcoffset() == dt.timedelta(0)


async def test_a_scheduled_run_s_business_date_is_the_same_announced_or_read(
    pool: asyncpg.Pool, fresh_db: str, pg_server: PostgresServer
) -> None:
    """The server's time zone is not UTC: a schedule time announced (as the session writes it) and read give
    the same built-in dates."""
    owner = await asyncpg.connect(owner_dsn(pg_server, fresh_db))
    try:
        await owner.execute(f"ALTER DATABASE {database_name(fresh_db)} SET timezone TO 'America/New_York'")
    finally:
        await owner.close()
    dates = ({"prop": "d", "direct": "IN", "type": "VARCHAR", "value": "${system.biz.curdate}"},
             {"prop": "t", "direct": "IN", "type": "VARCHAR", "value": "${system.datetime}"})  # fmt: skip
    code = await save(fresh_db, "dates", [shell("t", "true")], global_params=dates)
    params = []
    async with Listening(pool, fresh_db) as listening:
        p = listening.poller
        assert await p.poll_once() == 0
        for announced in (True, False):
            (cid,) = await command(
                fresh_db, code, command_type=6, schedule_time=dt.datetime(2026, 11, 28, 0, 30, tzinfo=dt.UTC)
            )
            assert await listening.heard() != ""
            if not announced:
                p.announced.forget()
            reads = listening.reads
            assert await p.poll_once() == 1 and listening.reads == reads + (not announced)
            (row,) = await query(fresh_db, "SELECT global_params FROM workflow_instance WHERE command_id = $1", cid)
            params.append({g["prop"]: g["value"] for g in json.loads(row["global_params"])})
    assert params[0] == params[1] == {"d": "20261128", "t": "20261128003000"}


async def test_a_start_announced_with_its_row_is_claimed_without_reading_the_table(
    pool: asyncpg.Pool, fresh_db: str
) -> None:
    code = await save(fresh_db, "announced", [shell("t", "true")])
    async with Listening(pool, fresh_db) as listening:
        p = listening.poller
        assert await p.poll_once() == 0 and listening.reads == 1  # the slot read: nothing waits
        (first,) = await command(fresh_db, code)
        assert await listening.heard() != ""
        assert await p.poll_once() == 1
        assert listening.reads == 1, "a start announced with its row read the table"
        assert await instances(fresh_db) == [first]
        # a statement of several commands announces only that it happened: the next poll reads the table
        several = await command(fresh_db, code, 3)
        assert await listening.heard() == ""
        assert await p.poll_once() == 3 and listening.reads == 2
        (after,) = await command(fresh_db, code)
        await listening.heard()
        assert await p.poll_once() == 1 and listening.reads == 2
        assert await instances(fresh_db) == [first, *several, after]
    assert await query(fresh_db, "SELECT 1 FROM command") == []


async def test_commands_waiting_in_the_table_are_read_first_in_priority_order(
    pool: asyncpg.Pool, fresh_db: str
) -> None:
    """A full page read (more may wait), a refused claim, or a reconnected listener: the next poll reads the
    table, so an announced command never overtakes one that was waiting."""
    code = await save(fresh_db, "announced", [shell("t", "true")])
    async with Listening(pool, fresh_db, page=2) as listening:
        p = listening.poller
        waiting = await command(fresh_db, code, 3, workflow_instance_priority=2)
        await listening.heard()
        assert await p.poll_once() == 2  # a full page: the third still waits
        (urgent,) = await command(fresh_db, code, workflow_instance_priority=0)
        await listening.heard()
        reads = listening.reads
        assert await p.poll_once() == 2 and listening.reads == reads + 1, "an announced command skipped the table"
        made = await instances(fresh_db)
        assert made[:2] == waiting[:2] and sorted(made[2:]) == sorted([urgent, waiting[2]])  # one page, read
        assert await p.poll_once() == 0  # drained
        # refused: what comes meanwhile is read from the table afterwards
        listening.refusing = "overloaded: load average 99"
        (late,) = await command(fresh_db, code)
        await listening.heard()
        assert await p.poll_once() == 0
        listening.refusing = ""
        reads = listening.reads
        assert await p.poll_once() == 1 and listening.reads == reads + 1
        # a listener that reconnected may have missed notifications
        await p._close_listener()
        (missed,) = await command(fresh_db, code)
        await p._listen()
        (next_one,) = await command(fresh_db, code)
        await listening.heard()
        reads = listening.reads
        assert await p.poll_once() == 2 and listening.reads == reads + 1
        assert (await instances(fresh_db))[-3:] == [late, missed, next_one]


async def test_a_command_without_its_notification_waits_no_longer_than_the_poll_interval(
    pool: asyncpg.Pool, fresh_db: str, pg_server: PostgresServer
) -> None:
    """Inserted with the trigger off (a restore): announced commands keep coming, yet once the slot was read
    ``interval`` seconds ago the next poll reads it again, and the waiting command goes first (its priority)."""
    code = await save(fresh_db, "announced", [shell("t", "true")])
    async with Listening(pool, fresh_db) as listening:
        p = listening.poller
        assert await p.poll_once() == 0
        owner = await asyncpg.connect(owner_dsn(pg_server, fresh_db))
        try:
            async with owner.transaction():
                await owner.execute("ALTER TABLE command DISABLE TRIGGER command_notify")
                hidden = await owner.fetchval(
                    "INSERT INTO command (command_type, workflow_definition_code, workflow_instance_priority)"
                    " VALUES (0, $1, 0) RETURNING id",
                    code,
                )
                await owner.execute("ALTER TABLE command ENABLE TRIGGER command_notify")
        finally:
            await owner.close()
        (first,) = await command(fresh_db, code)
        await listening.heard()
        assert await p.poll_once() == 1 and listening.reads == 1  # from the rows in hand: not seen yet
        (second,) = await command(fresh_db, code)
        await listening.heard()
        p.announced._read_at -= p.interval  # the slot was read a poll interval ago
        assert await p.poll_once() == 2 and listening.reads == 2
    made = await instances(fresh_db)
    assert made[0] == first and sorted(made[1:]) == sorted([hidden, second])
    assert await query(fresh_db, "SELECT 1 FROM command") == []


async def test_a_notification_that_cannot_be_taken_still_wakes_the_poller(pool: asyncpg.Pool, fresh_db: str) -> None:
    p = CommandPoller(
        MasterStore(pool, ME), fresh_db, DefinitionCache(pool), lambda: (0, 1), lambda: "", lambda _: None
    )
    p.announced.reading()
    p.announced.read((0, 1), complete=True)
    p.announced.heard(json.dumps({"x": 1}))  # not a row: exactness gone
    assert p.announced.take((0, 1), 10) is None
    p.announced.reading()
    p.announced.read((0, 1), complete=True)
    deep = "[" * 100_000 + "]" * 100_000  # past the JSON parser's depth
    assert command_row(deep) is None
    p._heard(None, 0, "porpoise_command", deep)
    assert p.wake.is_set() and p.announced.take((0, 1), 10) is None


async def test_a_command_announced_and_read_becomes_one_instance(pool: asyncpg.Pool, fresh_db: str) -> None:
    """A command committed while a read runs is both read and announced: its second claim deletes nothing and
    creates nothing."""
    code = await save(fresh_db, "announced", [shell("t", "true")])
    async with Listening(pool, fresh_db) as listening:
        p = listening.poller
        assert await p.poll_once() == 0
        (cid,) = await command(fresh_db, code)
        payload = await listening.heard()
        p.announced.reading()  # the read that finds it begins after the announcement was heard ...
        p.announced.heard(payload)  # ... and it is announced again (heard during the read)
        p.announced.read((0, 1), complete=True)
        assert await p.poll_once() == 1
        assert await instances(fresh_db) == [cid]
        assert await p.poll_once() == 0  # claimed from the rows in hand: already taken, nothing created
    assert await instances(fresh_db) == [cid]
    assert await query(fresh_db, "SELECT 1 FROM error_command") == []


async def test_a_bad_announced_command_goes_to_error_command_and_blocks_nothing(
    pool: asyncpg.Pool, fresh_db: str
) -> None:
    code = await save(fresh_db, "announced", [shell("t", "true")])
    async with Listening(pool, fresh_db) as listening:
        p = listening.poller
        assert await p.poll_once() == 0
        (bad,) = await command(fresh_db, 987654321)  # no such workflow
        await listening.heard()
        (good,) = await command(fresh_db, code)
        await listening.heard()
        assert await p.poll_once() == 2 and listening.reads == 1
    assert await instances(fresh_db) == [good]
    (error,) = await query(fresh_db, "SELECT id, message FROM error_command")
    assert error["id"] == bad and "987654321 does not exist" in error["message"]


def test_the_rows_in_hand_serve_only_the_slot_that_was_read() -> None:
    def payload(cid: int, priority: int = 2) -> str:
        row: dict[str, Any] = dict.fromkeys(COLUMNS)
        row |= {"id": cid, "command_type": 0, "workflow_definition_code": 1, "workflow_definition_version": 0,
                "workflow_instance_id": 0, "workflow_instance_priority": priority,
                "start_time": "2026-11-28T10:00:00+00:00", "update_time": "2026-11-28T10:00:00.5+00:00"}  # fmt: skip
        return json.dumps(row)

    announced = Announced(limit=3, max_age=60)
    assert announced.take((0, 2), 10) is None  # never read
    announced.reading()
    announced.read((0, 2), complete=True)
    for cid in (5, 4, 2):
        announced.heard(payload(cid, priority=1 if cid == 4 else 2))
    assert announced.take((0, 3), 10) is None  # the slot changed: read it
    taken = announced.take((0, 2), 1)
    assert taken is not None and [r["id"] for r in taken] == [4]  # priority first; 5 is another slot's
    assert [r["id"] for r in announced.take((0, 2), 10) or []] == [2]
    assert announced.take((0, 2), 10) is None  # nothing in hand: read (the timer's poll)
    announced.reading()
    announced.read((1, 2), complete=True)
    announced.heard(payload(-3))  # PostgreSQL: -3 % 2 = -1, in no slot (as the read finds it)
    assert announced.take((1, 2), 10) == []
    for cid in (6, 8, 10, 12):  # past the limit
        announced.heard(payload(cid))
    assert announced.take((0, 2), 10) is None
    for bad in ("", "{", "[]", json.dumps({"id": 1}), payload(7).replace('"id": 7', '"id": "7"')):
        assert command_row(bad) is None
        announced.reading()
        announced.read((0, 2), complete=True)
        announced.heard(payload(14))
        announced.heard(bad)
        assert announced.take((0, 2), 10) is None, bad


@pytest.mark.parametrize("size", [7000, 9000])
async def test_a_row_too_long_for_a_notification_is_announced_without_it(
    pool: asyncpg.Pool, fresh_db: str, size: int
) -> None:
    code = await save(fresh_db, "announced", [shell("t", "true")])
    async with Listening(pool, fresh_db) as listening:
        assert await listening.poller.poll_once() == 0
        (cid,) = await command(fresh_db, code, command_param={"note": "y" * size})
        payload = await listening.heard()
        assert (payload != "") == (size < 7000 + 500)
        assert await listening.poller.poll_once() == 1
        assert listening.reads == 1 + (size > 7500)
    assert await instances(fresh_db) == [cid]
