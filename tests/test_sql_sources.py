"""SQL tasks on every data-source type, run by a real worker against real servers: PostgreSQL (the suite's),
MariaDB, ClickHouse and Spark's Thrift server (HIVE) started by tests/sql_servers.py. The test plays the master
(tests/worker_harness.py)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from clickhouse_driver import Client

from engine.infra.etcd import EtcdServer
from engine.infra.ports import free_port
from rpc import RpcClient
from rpc.messages import KillReply, TaskKill
from tests.databases import EmptyDb
from tests.helpers import NodeProc, eventually, start_worker
from tests.sql_servers import ClickHouse, HiveServer, MariaDb
from tests.worker_harness import ReportSink, dispatch, log_text, task

pytestmark = pytest.mark.slow
#: Spark's Thrift server (a JVM) takes minutes to start on a loaded machine: its tests get a longer limit
HIVE = pytest.param("HIVE", marks=pytest.mark.timeout(1500))
KINDS = ("POSTGRESQL", "MYSQL", "CLICKHOUSE", HIVE)


@pytest.fixture
async def worker(node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, tmp_path: Path):
    args = (node_factory, etcd_server.endpoint, etcd_root, tmp_path, "worker.exec_slots=10")
    return await asyncio.to_thread(start_worker, *args, "worker.max_cpu_load_avg=100000")


@dataclass
class Server:
    """One data-source type under test: its connection params and the SQL its dialect needs."""

    kind: str
    source: dict[str, Any]
    #: column types of the test table, and what follows CREATE TABLE's column list
    text_type: str
    table_suffix: str
    #: a statement that runs for minutes
    long_sql: str
    running: Callable[[str], Any]
    #: seconds a statement may take (Spark's first statements compile and warm up a JVM)
    slow: float = 30

    def create(self, table: str) -> str:
        return f"CREATE TABLE {table} (day {self.text_type}, n Int){self.table_suffix}"


def _pg_running(dsn: str) -> Callable[[str], Any]:
    async def running(marker: str) -> int:
        conn = await asyncpg.connect(dsn)
        try:
            sql = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()"
            return int(await conn.fetchval(sql, f"%{marker}%"))
        finally:
            await conn.close()

    return running


def _mysql_running(server: MariaDb) -> Callable[[str], Any]:
    async def running(marker: str) -> int:
        sql = (
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST"
            f" WHERE INFO LIKE '%{marker}%' AND ID <> CONNECTION_ID()"
        )
        return int((await asyncio.to_thread(server.admin, sql)).strip())

    return running


def _clickhouse_running(server: ClickHouse) -> Callable[[str], Any]:
    def count(marker: str) -> int:
        client = Client(host=server.host, port=server.port, user="default")
        try:
            sql = (
                "SELECT count() FROM system.processes WHERE query LIKE %(m)s AND query NOT LIKE '%%system.processes%%'"
            )
            return int(client.execute(sql, {"m": f"%{marker}%"})[0][0])
        finally:
            client.disconnect()

    return lambda marker: asyncio.to_thread(count, marker)


def _hive_running(server: HiveServer) -> Callable[[str], Any]:
    """Spark's Thrift server runs a statement as Spark jobs described by its text: the running ones its UI lists."""

    def count(marker: str) -> int:
        return sum(marker in str(job.get("description") or "") for job in server.jobs("running"))

    return lambda marker: asyncio.to_thread(count, marker)


@pytest.fixture(params=KINDS)
def server(request: pytest.FixtureRequest) -> Server:
    kind = request.param
    if kind == "POSTGRESQL":
        db: EmptyDb = request.getfixturevalue("empty_db")
        return Server(
            kind, {"type": kind, "dsn": db.owner}, "varchar(32)", "", "SELECT pg_sleep(600)", _pg_running(db.owner)
        )
    if kind == "MYSQL":
        maria: MariaDb = request.getfixturevalue("mariadb")
        return Server(kind, maria.source(), "varchar(32)", "", "SELECT SLEEP(600)", _mysql_running(maria))
    if kind == "HIVE":
        hive: HiveServer = request.getfixturevalue("hive")
        long_sql = "SELECT count(*) FROM range(10000000000000)"
        return Server(kind, hive.source(), "STRING", "", long_sql, _hive_running(hive), slow=300)
    ch: ClickHouse = request.getfixturevalue("clickhouse")
    long_sql = "SELECT sleep(2) FROM system.numbers LIMIT 300 SETTINGS max_block_size = 1"
    return Server(kind, ch.source(), "String", " ENGINE = Memory", long_sql, _clickhouse_running(ch))


def _var(result: dict[str, Any], name: str) -> str | None:
    return next((v["value"] for v in result["var_pool"] if v["prop"] == name), None)


async def test_query_non_query_pre_post_out_params_limit_and_the_servers_error(
    server: Server, worker: NodeProc, sink: ReportSink, client: RpcClient
) -> None:
    table = f"trips_{uuid.uuid4().hex[:8]}"
    sources = {"wh": server.source}
    load = task(
        "SQL",
        {
            "datasource": "wh",
            "type": server.kind,
            "sqlType": "non_query",
            "preStatements": [server.create(table)],
            "sql": f"INSERT INTO {table} VALUES ('a', 10), ('b', 5);\nINSERT INTO {table} VALUES ('c', 1)",
            "postStatements": [f"INSERT INTO {table} VALUES ('z', 100)"],
            "localParams": [{"prop": "inserted", "direct": "OUT", "type": "INTEGER"}],
        },
        sink.address,
        datasources=sources,
    )
    await dispatch(client, worker.address, load)
    result = await sink.result(load.task_instance_id, server.slow)
    assert result["state"] == "SUCCESS", await log_text(result["log_path"])
    assert _var(result, "inserted") in ("1", "-1")  # the last statement's count, where the server says it

    query = task(
        "SQL",
        {
            "datasource": "wh",
            # ${least} is bound as the INTEGER it is declared (a number compared with a number on every server)
            "sql": f"SELECT day, n FROM {table} WHERE day <> '${{skip}}' AND n >= ${{least}} ORDER BY n DESC",
            "limit": 2,
            "maxRows": 1,
            "localParams": [
                {"prop": "n", "direct": "OUT", "type": "INTEGER"},
                {"prop": "day", "direct": "OUT", "type": "LIST"},
                {"prop": "skip", "value": "c"},
                {"prop": "least", "direct": "IN", "type": "INTEGER", "value": "2"},
            ],
        },
        sink.address,
        datasources=sources,
    )
    await dispatch(client, worker.address, query)
    result = await sink.result(query.task_instance_id, server.slow)
    text = await log_text(result["log_path"])
    assert result["state"] == "SUCCESS", text
    assert _var(result, "n") == "100"
    assert json.loads(_var(result, "day") or "") == ["z", "a"]  # 2 rows read of 3: the limit
    assert "query returned 2 row(s) (limit reached)" in text and "day\tn" in text and "z\t100" in text
    assert "... 1 more row(s) not shown" in text
    assert "s3cret-Pw" not in text

    broken = task(
        "SQL", {"datasource": "wh", "sql": "SELECT * FROM no_such_table_q"}, sink.address, datasources=sources
    )
    await dispatch(client, worker.address, broken)
    result = await sink.result(broken.task_instance_id, server.slow)
    assert result["state"] == "FAILURE"
    text = await log_text(result["log_path"])
    assert "SQL task failed" in text and "no_such_table_q" in text and "Traceback" not in text


async def test_kill_cancels_the_statement_on_the_server(
    server: Server, worker: NodeProc, sink: ReportSink, client: RpcClient
) -> None:
    msg = task("SQL", {"datasource": "wh", "sql": server.long_sql}, sink.address, datasources={"wh": server.source})
    await dispatch(client, worker.address, msg)
    marker = server.long_sql.split(" FROM")[0].removeprefix("SELECT ")
    await eventually(lambda: _positive(server.running(marker)), server.slow, f"{marker} running on the server")
    assert await client.call(worker.address, TaskKill(msg.task_instance_id, 1)) == KillReply(True, "KILL")
    result = await sink.result(msg.task_instance_id, server.slow)
    assert result["state"] == "KILL"
    text = await log_text(result["log_path"])
    # the runner is gone: the statement must have been cancelled on the server, not left to run on
    await eventually(lambda: _zero(server.running(marker)), 30, f"{marker} gone from the server; task log: {text}")
    assert "statement cancelled" in text


async def _positive(count: Any) -> bool:
    return await count > 0


async def _zero(count: Any) -> bool:
    return await count == 0


@pytest.mark.parametrize("kind", ["MYSQL", "CLICKHOUSE", "POSTGRESQL", HIVE])
async def test_unreachable_or_refused_source_fails_with_the_reason(
    kind: str, worker: NodeProc, sink: ReportSink, client: RpcClient, request: pytest.FixtureRequest
) -> None:
    closed = {"type": kind, "host": "127.0.0.1", "port": free_port(), "user": "u", "password": "p", "database": "d"}
    msgs = [task("SQL", {"datasource": "down", "sql": "SELECT 1"}, sink.address, datasources={"down": closed})]
    if kind in ("MYSQL", "CLICKHOUSE"):
        live = request.getfixturevalue("mariadb" if kind == "MYSQL" else "clickhouse")
        wrong = live.source(password="not-the-password")
        msgs.append(task("SQL", {"datasource": "w", "sql": "SELECT 1"}, sink.address, datasources={"w": wrong}))
    for msg in msgs:
        await dispatch(client, worker.address, msg)
    refused, *denied = [await sink.result(m.task_instance_id) for m in msgs]
    assert refused["state"] == "FAILURE"
    text = await log_text(refused["log_path"])
    assert "SQL task failed" in text and ("refused" in text.lower() or "connect" in text.lower()), text
    for result in denied:
        text = await log_text(result["log_path"])
        assert result["state"] == "FAILURE"
        assert any(w in text for w in ("Access denied", "password", "Authentication")), text


@pytest.mark.parametrize(
    ("server", "sql"),
    [("CLICKHOUSE", "SELECT ${ts} AS ts, ${t} AS t"),
     pytest.param("HIVE", "SELECT CAST(${ts} AS STRING) AS ts, ${t} AS t", marks=pytest.mark.timeout(1500))],
    indirect=["server"],
)  # fmt: skip
async def test_time_and_timestamp_values_are_bound_whole(
    server: Server, sql: str, worker: NodeProc, sink: ReportSink, client: RpcClient
) -> None:
    # a TIMESTAMP keeps its fraction of a second and a TIME is a quoted value (a driver formatting them by
    # type dropped the one and spliced the other bare)
    query = task(
        "SQL",
        {"datasource": "wh", "sql": sql,
         "localParams": [{"prop": "ts", "direct": "IN", "type": "TIMESTAMP", "value": "2026-01-02 03:04:05.123456"},
                         {"prop": "t", "direct": "IN", "type": "TIME", "value": "01:02:03"},
                         {"prop": "ts", "direct": "OUT", "type": "VARCHAR"},
                         {"prop": "t", "direct": "OUT", "type": "VARCHAR"}]},
        sink.address,
        datasources={"wh": server.source},
    )  # fmt: skip
    await dispatch(client, worker.address, query)
    result = await sink.result(query.task_instance_id, server.slow)
    assert result["state"] == "SUCCESS", await log_text(result["log_path"])
    assert _var(result, "ts") == "2026-01-02 03:04:05.123456" and _var(result, "t") == "01:02:03", result
