"""SPARK tasks on a real Spark standalone cluster (a Spark master and two Spark workers from the pyspark
wheel, engine/infra/spark.py) driven by real Porpoise processes: the example pipeline's Spark step runs
there; stopping the workflow ends the Spark application (driver and executors, as the Spark master's
JSON status shows); a worker killed -9 does not leave its attempt's application running; the application
id and the Spark UI link are in the task's log and in the task instance API answer.

One Spark cluster for the module (three JVMs), small: each Spark worker one core and 512 MB."""

from __future__ import annotations

import asyncio
import signal
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from engine.infra.etcd import EtcdServer
from engine.infra.spark import SparkCluster
from engine.states import WorkflowState
from engine.workflows.model import TaskDef
from tests.cluster_harness import command, instance_for, query, save, started_unguarded, tasks_of
from tests.conftest import ApiCluster
from tests.helpers import NodeProc, eventually, wait_sync
from tests.test_api import start, wait_final
from tests.test_cli import porpoise
from tests.test_example import DATE, EXAMPLE, check_output, warehouse  # noqa: F401 - the fixture

#: each Spark application here starts a driver and two executor JVMs: minutes on a loaded two-core machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

#: a PySpark job that keeps both executors busy for many minutes
LONG_JOB = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
print("UP", flush=True)
spark.range(0, 10**13, 1, 2).selectExpr("sum(hash(id))").collect()
"""


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, worker_cores=1, worker_memory="512m")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def spark_params(cluster: SparkCluster, script: str) -> dict[str, Any]:
    return {"rawScript": script, "master": cluster.master_url, "driverMemory": "512m", "executorMemory": "512m",
            "conf": {"spark.ui.showConsoleProgress": "false"}}  # fmt: skip


def apps(cluster: SparkCluster, which: str) -> dict[str, dict[str, Any]]:
    """``activeapps`` or ``completedapps`` of the Spark master's JSON status, by application id."""
    return {a["id"]: a for a in cluster.status()[which]}


def executors_busy(cluster: SparkCluster) -> int:
    """Cores held by executors, over the cluster and on each Spark worker (their own reports)."""
    status = cluster.status()
    return int(status["coresused"]) + sum(int(w["coresused"]) for w in status["workers"])


def assert_gone(cluster: SparkCluster, app_id: str) -> None:
    """The application ended at the Spark master and no executor of any application holds a core."""

    def ended() -> bool:
        return app_id not in apps(cluster, "activeapps") and app_id in apps(cluster, "completedapps")

    wait_sync(ended, 90, what=f"Spark application {app_id} to end", interval=0.5)
    wait_sync(lambda: executors_busy(cluster) == 0, 90, what="the executors to go", interval=0.5)


def test_example_pipeline_runs_its_spark_step_on_the_cluster(
    api_cluster: ApiCluster,
    warehouse: str,  # noqa: F811 - the fixture imported from test_example
    spark_cluster: SparkCluster,
    tmp_path: Path,
) -> None:
    assert porpoise(api_cluster, "apply", str(EXAMPLE / "taxi.yaml")).returncode == 0
    data_root = tmp_path / "data"
    run = porpoise(
        api_cluster, "start", "taxi_daily", "--watch",
        "--param", f"biz_date={DATE}", "--param", "rows=4000", "--param", f"spark_master={spark_cluster.master_url}",
        "--param", f"data_root={data_root}", "--param", f"example_dir={EXAMPLE}",
        timeout=700,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr + _tasks_and_logs(api_cluster)
    assert "finished SUCCESS" in run.stdout and "(4/4 tasks succeeded)" in run.stdout
    check_output(data_root, warehouse)

    client = api_cluster.client()
    code = client.get("/api/v1/workflows", name="taxi_daily")["items"][0]["code"]
    instance = client.get("/api/v1/instances", workflow=code)["items"][0]
    spark_task = next(t for t in client.get(f"/api/v1/instances/{instance['id']}")["tasks"]
                      if t["name"] == "clean_aggregate")  # fmt: skip
    detail = client.get(f"/api/v1/tasks/{spark_task['id']}")
    app_id, link = detail["app_id"], detail["app_link"]
    assert app_id.startswith("app-") and link.startswith("http://"), detail
    assert f"[porpoise] application {app_id} {link}" in porpoise(api_cluster, "logs", str(spark_task["id"])).stdout
    # it ran on the cluster, with executors on its workers, and finished there
    finished = apps(spark_cluster, "completedapps")[app_id]
    assert finished["state"] == "FINISHED" and app_id not in apps(spark_cluster, "activeapps")


def _tasks_and_logs(c: ApiCluster) -> str:
    """What the last taxi_daily run did (for a failure's message)."""
    client = c.client()
    code = client.get("/api/v1/workflows", name="taxi_daily")["items"][0]["code"]
    items = client.get("/api/v1/instances", workflow=code)["items"]
    if not items:
        return "\nno instance"
    tasks = client.get(f"/api/v1/instances/{items[0]['id']}")["tasks"]
    return "".join(f"\n--- {t['name']} {t['state']}\n" + porpoise(c, "logs", str(t["id"])).stdout[-3000:]
                   for t in tasks if t["id"])  # fmt: skip


def test_stopping_the_workflow_kills_its_spark_application(
    api_cluster: ApiCluster, spark_cluster: SparkCluster
) -> None:
    client = api_cluster.client()
    doc = {"name": f"spark_stop_{uuid.uuid4().hex[:6]}", "project": "spark-tests",
           "tasks": [{"name": "long", "type": "SPARK", "params": spark_params(spark_cluster, LONG_JOB)}]}  # fmt: skip
    code = client.post("/api/v1/workflows", doc, release=True)["code"]
    stop_while_the_application_runs(api_cluster, spark_cluster, start(api_cluster, code))


def stop_while_the_application_runs(api: Any, cluster: SparkCluster, instance_id: int) -> dict[str, Any]:
    """Instance ``instance_id`` (one SPARK task on ``cluster``, through the API of ``api``, which has a
    ``client()``) is stopped once its application's executors run: the task is KILLed, its driver is gone
    and the application ends at the Spark master. The task's detail while it ran."""
    client = api.client()

    def running_app() -> dict[str, Any] | None:
        tasks = client.get(f"/api/v1/instances/{instance_id}")["tasks"]
        detail = client.get(f"/api/v1/tasks/{tasks[0]['id']}") if tasks and tasks[0]["id"] else {}
        return detail if detail.get("app_id") else None

    # the application is in the task's detail while it runs (the worker reported it again)
    detail = wait_sync(running_app, 240, what="the Spark application in the task's detail", interval=0.5)
    app_id = detail["app_id"]
    assert detail["state"] == "RUNNING_EXECUTION" and detail["app_link"].startswith("http://")
    wait_sync(lambda: app_id in apps(cluster, "activeapps") and executors_busy(cluster) > 0, 240,
              what="the application's executors running on the cluster", interval=0.5)  # fmt: skip
    driver = psutil.Process(detail["pid"])

    assert client.post(f"/api/v1/instances/{instance_id}/stop")["accepted"]
    stopped = wait_final(api, instance_id, timeout=60)
    assert stopped["state"] == "STOP" and stopped["tasks"][0]["state"] == "KILL"
    assert not driver.is_running() or driver.status() == psutil.STATUS_ZOMBIE
    assert_gone(cluster, app_id)
    return dict(detail)


async def test_a_killed_worker_s_attempt_leaves_no_application_running(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    fresh_db: str,
    tmp_path: Path,
    spark_cluster: SparkCluster,
) -> None:
    """The worker running the Spark step is killed -9: its reaper kills the task's process group, the
    client-mode driver with it, and the Spark master ends the application; the next attempt (another
    worker, after the lease expired) runs its own application."""
    _, workers = await started_unguarded(node_factory, etcd_server, etcd_root, fresh_db, masters=1, workers=2, ttl=3)
    marker = tmp_path / "first-started"
    script = (
        textwrap.dedent(f"""
        import os
        if os.path.exists({str(marker)!r}):
            from pyspark.sql import SparkSession
            print("SECOND", SparkSession.builder.getOrCreate().range(10).count())
            raise SystemExit(0)
        open({str(marker)!r}, "w").close()
    """)
        + LONG_JOB
    )
    code = await save(fresh_db, "spark_failover", [
        TaskDef(name="spark", task_type="SPARK", params=spark_params(spark_cluster, script)),
    ])  # fmt: skip
    (cmd,) = await command(fresh_db, code)
    wi = await instance_for(fresh_db, cmd, final=False)

    async def first_app() -> Any:
        rows = [r for r in await tasks_of(fresh_db, wi["id"]) if r["attempt"] == 1 and r["app_id"]]
        return rows[0] if rows else None

    first = await eventually(first_app, 240, "the first attempt's Spark application in its task instance", interval=0.5)
    app_id = first["app_id"]

    def busy() -> bool:
        return app_id in apps(spark_cluster, "activeapps") and executors_busy(spark_cluster) > 0

    await eventually(lambda: asyncio.to_thread(busy), 240, "the first application's executors", interval=0.5)
    dead = next(w for w in workers if w.address == first["host"])
    dead.proc.record.signal(signal.SIGKILL)
    await asyncio.to_thread(assert_gone, spark_cluster, app_id)
    final = await instance_for(fresh_db, cmd, timeout=300)
    rows = await tasks_of(fresh_db, wi["id"])
    assert final["state"] == WorkflowState.SUCCESS and [r["attempt"] for r in rows] == [1, 2], rows  # SUCCESS
    second = rows[1]
    assert second["host"] != dead.address and second["app_id"] and second["app_id"] != app_id
    assert apps(spark_cluster, "completedapps")[second["app_id"]]["state"] == "FINISHED"
    assert app_id not in apps(spark_cluster, "activeapps")
    assert await query(fresh_db, "SELECT 1 FROM task_instance WHERE app_id = $1 AND attempt = 1", app_id)


@pytest.fixture(scope="module")
def spark_sum_jar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.java_jobs import SPARK_SUM, build_jar

    directory = tmp_path_factory.mktemp("spark-jar")
    directory.chmod(0o755)
    return build_jar(directory, "SparkSum", SPARK_SUM)


def _jar_params(cluster: SparkCluster, jar: Path, args: str, **more: Any) -> dict[str, Any]:
    return {"programType": "JAVA", "mainJar": str(jar), "mainClass": "SparkSum", "mainArgs": args,
            "master": cluster.master_url, "driverMemory": "512m", "executorMemory": "512m", **more}  # fmt: skip


@pytest.mark.parametrize("deploy", ["client", "cluster"])
def test_a_java_spark_jar_runs_on_the_cluster(
    api_cluster: ApiCluster, spark_cluster: SparkCluster, spark_sum_jar: Path, deploy: str
) -> None:
    client = api_cluster.client()
    params = _jar_params(spark_cluster, spark_sum_jar, "7", deployMode=deploy)
    doc = {"name": f"spark_jar_{uuid.uuid4().hex[:6]}", "project": "spark-tests",
           "tasks": [{"name": "sum", "type": "SPARK", "params": params}]}  # fmt: skip
    code = client.post("/api/v1/workflows", doc, release=True)["code"]
    detail = wait_final(api_cluster, start(api_cluster, code), timeout=600)
    task_id = detail["tasks"][0]["id"]
    log = porpoise(api_cluster, "logs", str(task_id)).stdout
    assert detail["state"] == "SUCCESS", log[-4000:]
    task = client.get(f"/api/v1/tasks/{task_id}")
    assert task["app_id"].startswith(("app-", "driver-")), task
    finished = apps(spark_cluster, "completedapps")
    if deploy == "client":  # the driver ran here: its output is in the task's log
        assert "SUM=42" in log and f"APP={task['app_id']}" in log and task["app_link"].startswith("http://")
        assert finished[task["app_id"]]["state"] == "FINISHED"
    else:  # the driver ran on a Spark worker: the application finished on the cluster
        assert any(a["name"] == "porpoise-sum" and a["state"] == "FINISHED" for a in finished.values())


def test_stopping_a_java_spark_jar_ends_its_application(
    api_cluster: ApiCluster, spark_cluster: SparkCluster, spark_sum_jar: Path
) -> None:
    client = api_cluster.client()
    doc = {"name": f"spark_jar_stop_{uuid.uuid4().hex[:6]}", "project": "spark-tests", "tasks": [
        {"name": "long", "type": "SPARK", "params": _jar_params(spark_cluster, spark_sum_jar, "long")}]}  # fmt: skip
    code = client.post("/api/v1/workflows", doc, release=True)["code"]
    detail = stop_while_the_application_runs(api_cluster, spark_cluster, start(api_cluster, code))
    assert detail["app_id"].startswith("app-")
