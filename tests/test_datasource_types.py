"""Data sources by type through the API, the CLI and the SDK against a real cluster (api_cluster) and real
servers (MariaDB, ClickHouse and Spark's Thrift server from tests/sql_servers.py): create, edit, test (connect
and SELECT 1, the server's error when it fails), secrets sealed and masked; and a workflow whose SQL task runs
on MariaDB."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from engine.infra.ports import free_port
from porpoise.client import Client
from tests.conftest import ApiCluster
from tests.sql_servers import PASSWORD, ClickHouse, HiveServer, MariaDb
from tests.test_api import error_of, start, wait_final
from tests.test_cli import porpoise
from tests.test_procedure import create_mysql_procedure

pytestmark = pytest.mark.slow


def _params(source: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in source.items() if k != "type"}


def test_api_create_edit_test_and_mask_a_mysql_source(api_cluster: ApiCluster, mariadb: MariaDb) -> None:
    client = api_cluster.client()
    name = f"my_{uuid.uuid4().hex[:8]}"
    put = client.put(f"/api/v1/datasources/{name}", {"type": "MYSQL", "params": _params(mariadb.source())})
    assert put["type"] == "MYSQL" and put["params"]["password"] == "***"
    listed = {d["name"]: d for d in client.get("/api/v1/datasources", size=500)["items"]}
    assert listed[name]["type"] == "MYSQL" and PASSWORD not in json.dumps(listed)
    stored = api_cluster.query("SELECT connection_params FROM datasource WHERE name = $1", name)[0][0]
    assert PASSWORD not in stored and '"password": "pps1:' in stored

    tested = client.post(f"/api/v1/datasources/{name}/test", {})
    assert tested["ok"] is True and tested["version"].startswith("MySQL 10.") and tested["type"] == "MYSQL"

    # an edit without a type keeps MYSQL; a wrong password is answered with the server's error
    wrong = {**_params(mariadb.source()), "password": "not-it"}
    assert client.put(f"/api/v1/datasources/{name}", {"params": wrong})["type"] == "MYSQL"
    tested = client.post(f"/api/v1/datasources/{name}/test")
    assert tested["ok"] is False and "Access denied" in tested["error"] and "not-it" not in json.dumps(tested)

    bad = error_of(lambda: client.put(f"/api/v1/datasources/{name}", {"params": {"dsn": "postgresql://x/y"}}))
    assert (bad.status, bad.field) == (400, "params.dsn")
    bad = error_of(lambda: client.put(f"/api/v1/datasources/{name}", {"type": "ORACLE", "params": {}}))
    assert bad.status == 400 and bad.field == "type"
    bad = error_of(lambda: client.put(f"/api/v1/datasources/{name}", {"params": {"host": "a b", "password": "x"}}))
    assert (bad.status, bad.field) == (400, "params.host")
    assert error_of(lambda: client.post("/api/v1/datasources/no-such-source/test")).status == 404

    # nothing listening: a failed test within its timeout, naming the reason
    down = {"host": "127.0.0.1", "port": free_port(), "database": "d", "user": "u", "password": "p"}
    client.put(f"/api/v1/datasources/{name}", {"type": "CLICKHOUSE", "params": down})
    tested = client.post(f"/api/v1/datasources/{name}/test", {"timeout": 5})
    assert tested["ok"] is False and ("refused" in tested["error"].lower() or "connect" in tested["error"].lower())
    client.delete(f"/api/v1/datasources/{name}")


def test_cli_and_sdk_put_and_test_a_clickhouse_source(api_cluster: ApiCluster, clickhouse: ClickHouse) -> None:
    name = f"ch_{uuid.uuid4().hex[:8]}"
    src = clickhouse.source()
    args = ["--type", "CLICKHOUSE", "--host", src["host"], "--port", str(src["port"]), "--database", "default",
            "--user", src["user"], "--password-env", "CH_PW", "--other", "max_threads=2"]  # fmt: skip
    out = porpoise(api_cluster, "datasource", "put", name, *args, env={"CH_PW": PASSWORD})
    assert out.returncode == 0 and f"data source {name} (CLICKHOUSE) saved" in out.stdout, out.stderr
    out = porpoise(api_cluster, "datasource", "test", name)
    assert out.returncode == 0 and "ok, ClickHouse 18.16" in out.stdout, out.stdout + out.stderr
    out = porpoise(api_cluster, "datasource", "list")
    assert name in out.stdout and "CLICKHOUSE" in out.stdout and PASSWORD not in out.stdout

    sdk = Client(api=api_cluster.client())
    edited = sdk.edit_datasource(name, user="nobody")  # an edit: the other params and the password kept
    assert edited["params"]["user"] == "nobody" and edited["params"]["port"] == src["port"]
    answer = sdk.test_datasource(name)
    assert answer["ok"] is False and "nobody" in answer["error"], answer  # the server's own message
    out = porpoise(api_cluster, "datasource", "test", name)
    assert out.returncode == 1 and "FAILED" in out.stdout and "nobody" in out.stdout
    assert sdk.edit_datasource(name, user=src["user"], password=PASSWORD)["type"] == "CLICKHOUSE"
    assert sdk.test_datasource(name)["ok"] is True
    assert [d["type"] for d in sdk.datasources() if d["name"] == name] == ["CLICKHOUSE"]
    out = porpoise(api_cluster, "datasource", "put", name, "--password-env", "NOT_SET_ANYWHERE")
    assert out.returncode != 0 and "NOT_SET_ANYWHERE is not set" in out.stderr
    assert sdk.delete_datasource(name) == {"deleted": name}
    sdk.put_datasource(name, type="CLICKHOUSE", host=src["host"], port=src["port"], user=src["user"])
    out = porpoise(api_cluster, "datasource", "delete", name)
    assert out.returncode == 0 and name not in porpoise(api_cluster, "datasource", "list").stdout


@pytest.mark.timeout(1500)  # Spark's Thrift server (a JVM) takes minutes to start on a loaded machine
def test_api_and_cli_create_edit_and_test_a_hive_source(api_cluster: ApiCluster, hive: HiveServer) -> None:
    client = api_cluster.client()
    client.timeout = 150  # the first test warms up Spark: it may take most of its own timeout
    name = f"hive_{uuid.uuid4().hex[:8]}"
    put = client.put(f"/api/v1/datasources/{name}", {"type": "HIVE", "params": _params(hive.source())})
    assert put["type"] == "HIVE" and put["params"]["password"] == "***" and put["params"]["port"] == hive.port
    tested = client.post(f"/api/v1/datasources/{name}/test", {"timeout": 120})
    assert tested["ok"] is True and tested["type"] == "HIVE", tested
    assert tested["version"].startswith("HiveServer2 4."), tested  # Spark's version, from the pyspark wheel

    # the server's own error: Spark's Thrift server takes any password, so a database it does not have
    edited = client.put(f"/api/v1/datasources/{name}", {"params": {**_params(hive.source()), "database": "no_db_q"}})
    assert edited["type"] == "HIVE" and edited["params"]["database"] == "no_db_q"
    tested = client.post(f"/api/v1/datasources/{name}/test", {"timeout": 60})
    assert tested["ok"] is False and "no_db_q" in tested["error"] and PASSWORD not in json.dumps(tested), tested

    src = hive.source()
    cli = f"hive_cli_{uuid.uuid4().hex[:8]}"
    args = ["--host", src["host"], "--port", str(src["port"]), "--user", src["user"],
            "--other", "spark.sql.shuffle.partitions=2"]  # fmt: skip
    put = ["datasource", "put", cli, "--type", "HIVE", "--database", "default", *args, "--password-env", "HIVE_PW"]
    out = porpoise(api_cluster, *put, env={"HIVE_PW": PASSWORD})
    assert out.returncode == 0 and f"data source {cli} (HIVE) saved" in out.stdout, out.stderr
    out = porpoise(api_cluster, "datasource", "test", cli, "--timeout", "60")
    assert out.returncode == 0 and "ok, HiveServer2 4." in out.stdout, out.stdout + out.stderr
    out = porpoise(api_cluster, "datasource", "put", cli, "--database", "no_db_q", *args)  # password, type kept
    assert out.returncode == 0 and f"data source {cli} (HIVE) saved" in out.stdout, out.stderr
    out = porpoise(api_cluster, "datasource", "test", cli, "--timeout", "60")
    assert out.returncode == 1 and "FAILED" in out.stdout and "no_db_q" in out.stdout, out.stdout + out.stderr
    out = porpoise(api_cluster, "datasource", "list")
    assert cli in out.stdout and "HIVE" in out.stdout and PASSWORD not in out.stdout

    # nothing listening: a failed test within its timeout, naming the reason
    down = {**_params(hive.source()), "port": free_port()}
    client.put(f"/api/v1/datasources/{name}", {"params": down})
    tested = client.post(f"/api/v1/datasources/{name}/test", {"timeout": 5})
    assert tested["ok"] is False and ("refused" in tested["error"].lower() or "connect" in tested["error"].lower())
    assert porpoise(api_cluster, "datasource", "delete", cli).returncode == 0
    client.delete(f"/api/v1/datasources/{name}")


def test_a_workflow_runs_sql_and_a_procedure_on_a_mysql_source(api_cluster: ApiCluster, mariadb: MariaDb) -> None:
    """SQL's OUT param feeds the PROCEDURE's IN argument; the procedure's OUT values reach a SHELL task."""
    client = api_cluster.client()
    source = f"my_{uuid.uuid4().hex[:8]}"
    proc = f"add_one_{uuid.uuid4().hex[:6]}"
    asyncio.run(create_mysql_procedure(mariadb, proc))
    client.put(f"/api/v1/datasources/{source}", {"type": "MYSQL", "params": _params(mariadb.source())})
    doc = {
        "name": f"mysql_sql_{uuid.uuid4().hex[:8]}",
        "project": "api-tests",
        "tasks": [
            {"name": "q", "type": "SQL", "params": {
                "datasource": source, "type": "MYSQL", "sql": "SELECT 41 + 1 AS answer, VERSION() AS v",
                "localParams": [{"prop": "answer", "direct": "OUT", "type": "INTEGER"}]}},
            {"name": "p", "type": "PROCEDURE", "upstream": ["q"], "params": {
                "datasource": source, "method": f"CALL {proc}(${{answer}}, 'w', ${{b}}, ${{label}})",
                "localParams": [{"prop": "b", "direct": "OUT", "type": "INTEGER"},
                                {"prop": "label", "direct": "OUT", "type": "VARCHAR"}]}},
            {"name": "echo", "type": "SHELL", "upstream": ["p"], "params": {"rawScript": "echo got ${b} ${label}"}},
        ],
    }  # fmt: skip
    code = int(client.request("POST", "/api/v1/workflows", doc, query={"release": True})["code"])
    detail = wait_final(api_cluster, start(api_cluster, code))
    assert detail["state"] == "SUCCESS", detail
    log = client.get(f"/api/v1/tasks/{_task_id(detail, 'echo')}/log")
    assert "got 43 w-42" in "\n".join(log["lines"])


def _task_id(detail: dict[str, Any], name: str) -> int:
    return int(next(t["id"] for t in detail["tasks"] if t["name"] == name))
