"""A workflow's SQL and PROCEDURE tasks name data sources that exist, of a type the task runs on: checked when
the workflow is saved (400 at ``tasks[i].params.datasource``, admins too), not at run time. A general user
may name in PROCEDURE tasks, as in SQL tasks, only data sources granted to them or to the project. The
connection test of a POSTGRESQL source answers ok."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from engine.api.datasources import probe
from tests.conftest import ApiCluster
from tests.test_api import error_of
from tests.test_users_e2e import make_user


def _doc(name: str, *tasks: dict[str, Any], project: str = "ds-names") -> dict[str, Any]:
    return {"name": name, "project": project, "tasks": list(tasks)}


def _sql(source: str, **extra: Any) -> dict[str, Any]:
    return {"name": "q", "type": "SQL", "params": {"datasource": source, "sql": "select 1", **extra}}


def _procedure(source: str) -> dict[str, Any]:
    return {"name": "p", "type": "PROCEDURE", "params": {"datasource": source, "method": "CALL p()"},
            "upstream": ["q"]}  # fmt: skip


def test_a_saved_task_names_an_existing_data_source_of_a_type_it_runs_on(api_cluster: ApiCluster) -> None:
    client = api_cluster.client()
    tag = uuid.uuid4().hex[:8]
    pg, hive = f"pg_{tag}", f"hive_{tag}"
    client.request("PUT", f"/api/v1/datasources/{pg}", {"params": {"host": "127.0.0.1", "database": "d"}})
    client.request("PUT", f"/api/v1/datasources/{hive}", {"type": "HIVE", "params": {"host": "127.0.0.1"}})
    name = f"wf_{tag}"

    missing = error_of(lambda: client.post("/api/v1/workflows", _doc(name, _sql(pg), _procedure(f"nope_{tag}"))))
    assert (missing.status, missing.field) == (400, "tasks[1].params.datasource")
    assert f"data source 'nope_{tag}' does not exist" in str(missing)
    wrong_type = error_of(lambda: client.post("/api/v1/workflows", _doc(name, _sql(pg), _procedure(hive))))
    assert (wrong_type.status, wrong_type.field) == (400, "tasks[1].params.datasource")
    assert "is HIVE: PROCEDURE runs on POSTGRESQL, MYSQL" in str(wrong_type)
    said = error_of(lambda: client.post("/api/v1/workflows", _doc(name, _sql(pg, type="MYSQL"))))
    assert (said.status, said.field) == (400, "tasks[0].params.datasource") and "is POSTGRESQL, not MYSQL" in str(said)
    assert client.get("/api/v1/workflows", name=name)["total"] == 0  # nothing was saved

    code = client.post("/api/v1/workflows", _doc(name, _sql(hive), _procedure(pg)))["code"]
    # an update is checked as a create is
    gone = error_of(lambda: client.put(f"/api/v1/workflows/{code}", _doc(name, _sql(f"gone_{tag}"))))
    assert (gone.status, gone.field) == (400, "tasks[0].params.datasource")


def test_a_procedure_task_names_only_a_granted_data_source(api_cluster: ApiCluster) -> None:
    tag = uuid.uuid4().hex[:8]
    admin = api_cluster.client()
    source, project = f"secret_pg_{tag}", f"ds-own-{tag}"
    admin.request("PUT", f"/api/v1/datasources/{source}", {"params": {"host": "127.0.0.1", "database": "d"}})
    user = make_user(api_cluster, f"ds_user_{tag}")
    proc = {"name": "p", "type": "PROCEDURE", "params": {"datasource": source, "method": "CALL p()"}}
    refused = error_of(lambda: user.post("/api/v1/workflows", _doc(f"wf_{tag}", proc, project=project)))
    assert refused.status == 403 and f"'{source}' not granted to you" in str(refused)
    admin.post("/api/v1/grants", {"resource_type": "datasource", "resource": source, "user": f"ds_user_{tag}"})
    assert user.post("/api/v1/workflows", _doc(f"wf_{tag}", proc, project=project))["version"] == 1


def test_a_postgresql_source_answers_the_connection_test(fresh_db: str) -> None:
    """The connection test of a POSTGRESQL source runs SELECT 1 as a task's query does (in the session's
    transaction: asyncpg reads rows through a cursor, which needs one) and answers the server's version."""
    ok, said = asyncio.run(probe({"type": "POSTGRESQL", "dsn": fresh_db}, 15))
    assert ok, said
    assert said.startswith("PostgreSQL ")
    refused = asyncio.run(probe({"type": "POSTGRESQL", "dsn": fresh_db.rsplit("/", 1)[0] + "/no_such_db"}, 15))
    assert refused[0] is False and "no_such_db" in refused[1]
