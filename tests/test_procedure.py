"""PROCEDURE tasks on PostgreSQL (procedures with OUT arguments) and MariaDB (IN / OUT), run by a real worker;
the test plays the master (tests/worker_harness.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncmy
import asyncpg
import pytest

from engine.infra.etcd import EtcdServer
from engine.tasks import registry
from engine.tasks.base import ParamError
from rpc import RpcClient
from tests.databases import EmptyDb
from tests.helpers import NodeProc, start_worker
from tests.sql_servers import MariaDb
from tests.worker_harness import ReportSink, dispatch, log_text, task

pytestmark = pytest.mark.slow

PG_PROC = """CREATE PROCEDURE {name}(IN a integer, IN tag text, OUT b integer, OUT label text)
LANGUAGE plpgsql AS $$ BEGIN b := a + 1; label := tag || '-' || a; END $$"""
MY_PROC = """CREATE PROCEDURE {name}(IN a INT, IN tag VARCHAR(20), OUT b INT, OUT label VARCHAR(40))
BEGIN SET b = a + 1; SET label = CONCAT(tag, '-', a); SELECT 'a result set the call also selects'; END"""


@pytest.fixture
async def worker(node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, tmp_path: Path):
    args = (node_factory, etcd_server.endpoint, etcd_root, tmp_path, "worker.exec_slots=10")
    return await asyncio.to_thread(start_worker, *args, "worker.max_cpu_load_avg=100000")


async def create_mysql_procedure(server: MariaDb, name: str) -> None:
    src = server.source()
    conn = await asyncmy.connect(host=src["host"], port=src["port"], user=src["user"], password=src["password"],
                                 db=src["database"])  # fmt: skip
    try:
        async with conn.cursor() as cur:
            await cur.execute(MY_PROC.format(name=name))
    finally:
        conn.close()


async def create_pg_procedure(dsn: str, name: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(PG_PROC.format(name=name))
    finally:
        await conn.close()


@pytest.fixture(params=["POSTGRESQL", "MYSQL"])
def with_procedure(request: pytest.FixtureRequest) -> tuple[dict[str, Any], str]:
    """A data source holding procedure ``<name>(IN a, IN tag, OUT b = a + 1, OUT label = tag-a)``."""
    name = f"add_one_{uuid.uuid4().hex[:6]}"
    if request.param == "POSTGRESQL":
        db: EmptyDb = request.getfixturevalue("empty_db")
        asyncio.run(create_pg_procedure(db.owner, name))
        return {"type": "POSTGRESQL", "dsn": db.owner}, name
    server: MariaDb = request.getfixturevalue("mariadb")
    asyncio.run(create_mysql_procedure(server, name))
    return server.source(), name


def _vars(result: dict[str, Any]) -> dict[str, str]:
    return {v["prop"]: v["value"] for v in result["var_pool"]}


async def test_in_and_out_arguments_become_out_parameters(
    with_procedure: tuple[dict[str, Any], str], worker: NodeProc, sink: ReportSink, client: RpcClient
) -> None:
    source, proc = with_procedure
    msg = task(
        "PROCEDURE",
        {
            "datasource": "db",
            "type": source["type"],
            "method": f"CALL {proc}(${{a}}, ${{tag}}, ${{b}}, ${{label}})",
            "localParams": [
                {"prop": "a", "direct": "IN", "type": "INTEGER", "value": "41"},
                {"prop": "tag", "direct": "IN", "type": "VARCHAR", "value": "it's"},  # a quote: bound, not pasted
                {"prop": "b", "direct": "OUT", "type": "INTEGER", "value": ""},
                {"prop": "label", "direct": "OUT", "type": "VARCHAR", "value": ""},
            ],
        },
        sink.address,
        datasources={"db": source},
    )
    await dispatch(client, worker.address, msg)
    result = await sink.result(msg.task_instance_id)
    text = await log_text(result["log_path"])
    assert result["state"] == "SUCCESS", text
    assert {k: v for k, v in _vars(result).items() if k in ("b", "label")} == {"b": "42", "label": "it's-41"}
    assert f"call: CALL {proc}(?, ?, ?, ?)" in text


async def test_a_call_that_does_not_match_fails_with_the_reason(
    with_procedure: tuple[dict[str, Any], str], worker: NodeProc, sink: ReportSink, client: RpcClient
) -> None:
    source, proc = with_procedure
    typed_wrong = task(
        "PROCEDURE",
        {"datasource": "db", "method": f"CALL {proc}(${{a}}, 'x', ${{b}}, ${{label}})",
         "localParams": [{"prop": "a", "direct": "IN", "type": "INTEGER", "value": "many"},
                         {"prop": "b", "direct": "OUT", "type": "INTEGER"},
                         {"prop": "label", "direct": "OUT"}]},
        sink.address, datasources={"db": source},
    )  # fmt: skip
    unknown = task(
        "PROCEDURE",
        {"datasource": "db", "method": f"CALL {proc}(1, 'x', ${{nowhere}}, ${{label}})",
         "localParams": [{"prop": "label", "direct": "OUT"}]},
        sink.address, datasources={"db": source},
    )  # fmt: skip
    missing = task(
        "PROCEDURE",
        {"datasource": "db", "method": f"CALL no_such_proc_{proc}(${{b}})",
         "localParams": [{"prop": "b", "direct": "OUT", "type": "INTEGER"}]},
        sink.address, datasources={"db": source},
    )  # fmt: skip
    for msg in (typed_wrong, unknown, missing):
        await dispatch(client, worker.address, msg)
    results = [await sink.result(m.task_instance_id) for m in (typed_wrong, unknown, missing)]
    texts = [await log_text(r["log_path"]) for r in results]
    assert [r["state"] for r in results] == ["FAILURE"] * 3
    assert "IN parameter a: 'many' is not a INTEGER" in texts[0]
    assert "${nowhere} is neither an OUT parameter nor a known value" in texts[1]
    assert f"no_such_proc_{proc}" in texts[2] and "Traceback" not in texts[2]


def test_procedure_params_are_checked_at_save_time() -> None:
    ok = {"datasource": "d", "method": "CALL p(${a})", "localParams": [{"prop": "a", "type": "INTEGER"}]}
    registry.validate("PROCEDURE", ok)
    with pytest.raises(ParamError, match="method"):
        registry.validate("PROCEDURE", {"datasource": "d"})
    with pytest.raises(ParamError, match="PROCEDURE runs on POSTGRESQL and MYSQL"):
        registry.validate("PROCEDURE", {**ok, "type": "CLICKHOUSE"})
    with pytest.raises(ParamError, match="IN argument's type"):
        registry.validate("PROCEDURE", {**ok, "localParams": [{"prop": "a", "type": "LIST"}]})
