"""SPARK tasks through real spark-submit (pyspark wheel, local[*], Java 17) on a real worker.

Each SPARK task is its own Spark application, so each test pays one JVM start; the module keeps to
four applications and runs them concurrently on one worker where it can."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from engine.infra.etcd import EtcdServer
from engine.tasks.base import ParamError
from engine.tasks.spark import SparkTask
from rpc.messages import TaskKill
from tests.conftest import UNGUARDED
from tests.helpers import NodeProc, eventually, rpc_client
from tests.worker_harness import ReportSink, dispatch, log_text, task

FAST = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}

APP = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
n = int(sys.argv[1])
df = spark.range(n).selectExpr("id % 3 AS k")
counts = {r["k"]: r["c"] for r in df.groupBy("k").count().withColumnRenamed("count", "c").collect()}
print("GROUPS", sorted(counts.items()))
print("${setValue(rows=%d)}" % sum(counts.values()))
spark.stop()
"""


@pytest.fixture
async def worker(node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, tmp_path: Path):
    overrides = [f"worker.log_dir={tmp_path / 'logs'}", f"worker.exec_dir={tmp_path / 'exec'}"]
    return await asyncio.to_thread(node_factory, "worker", etcd_server.endpoint, etcd_root, 3, overrides, **UNGUARDED)


async def test_spark_python_sql_and_failure(worker: NodeProc, sink: ReportSink) -> None:
    client = rpc_client(10)
    py = task(
        "SPARK",
        {
            "programType": "PYTHON",
            "rawScript": APP,
            "mainArgs": "${n}",
            "master": "local[2]",
            "driverMemory": "512m",
            "conf": FAST,
            "localParams": [{"prop": "n", "value": "3000"}, {"prop": "rows", "direct": "OUT"}],
        },
        sink.address,
    )
    sql = task(
        "SPARK",
        {"programType": "SQL", "sql": "SELECT 40 + 2 AS answer", "master": "local[1]", "conf": FAST},
        sink.address,
    )
    bad = task(
        "SPARK",
        {"programType": "PYTHON", "rawScript": "raise SystemExit(3)", "master": "local[1]", "conf": FAST},
        sink.address,
    )
    for msg in (py, sql, bad):
        assert (await dispatch(client, worker.address, msg)).accepted is True
    r_py = await sink.result(py.task_instance_id, timeout=180)
    r_sql = await sink.result(sql.task_instance_id, timeout=180)
    r_bad = await sink.result(bad.task_instance_id, timeout=180)
    await client.close()

    assert r_py["state"] == "SUCCESS", await log_text(r_py["log_path"])
    assert "GROUPS [(0, 1000), (1, 1000), (2, 1000)]" in await log_text(r_py["log_path"])
    assert r_py["var_pool"] == [{"prop": "rows", "direct": "OUT", "type": "VARCHAR", "value": "3000"}]
    # the bootstrap announced the application (UI disabled here: no link); the result carries it
    assert r_py["app_id"].startswith("local-") and r_py["app_link"] == ""
    assert f"[porpoise] application {r_py['app_id']}\n" in await log_text(r_py["log_path"])
    assert r_sql["state"] == "SUCCESS", await log_text(r_sql["log_path"])
    text = await log_text(r_sql["log_path"])
    assert "answer" in text and "\n42\n" in text
    assert r_bad["state"] == "FAILURE" and r_bad["exit_code"] != 0


async def test_killing_a_spark_task_kills_the_driver(worker: NodeProc, sink: ReportSink) -> None:
    client = rpc_client(10)
    app = (
        "from pyspark.sql import SparkSession\nimport time\n"
        "spark = SparkSession.builder.getOrCreate()\nprint('UP', flush=True)\ntime.sleep(600)\n"
    )
    msg = task("SPARK", {"rawScript": app, "master": "local[1]", "conf": FAST}, sink.address)
    await dispatch(client, worker.address, msg)
    running = await sink.running(msg.task_instance_id)
    root = psutil.Process(running["pid"])

    def java() -> list[psutil.Process]:
        return [p for p in [root, *root.children(recursive=True)] if "java" in p.name()]

    drivers = await eventually(java, 60, "the Spark driver JVM")
    await eventually(lambda: "UP" in Path(running["log_path"]).read_text(), 120, "the Spark session to start")
    assert (await client.call(worker.address, TaskKill(msg.task_instance_id, 1))).killed is True
    assert (await sink.result(msg.task_instance_id))["state"] == "KILL"
    for proc in drivers:
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    await client.close()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"programType": "SCALA"}, "mainJar"),  # a jar program names its jar
        ({"programType": "R"}, "programType"),
        ({"programType": "PYTHON"}, "mainFile"),
        ({"programType": "SQL"}, "sql"),
        ({"rawScript": "x", "master": "ftp://nope"}, "master"),
        ({"rawScript": "x", "deployMode": "both"}, "deployMode"),
        ({"rawScript": "x", "executorCores": 0}, "executorCores"),
        ({"rawScript": "x", "conf": {"a": [1]}}, "conf"),
        ({"rawScript": "x", "others": "--conf 'a=b"}, "others"),
        ({"rawScript": "x", "mainArgs": 'a "b'}, "mainArgs"),
    ],
)
def test_spark_params_are_validated_with_the_field_named(params: dict, field: str) -> None:
    with pytest.raises(ParamError) as err:
        SparkTask.validate(params)
    assert err.value.field == field


def test_spark_submit_command_line() -> None:
    import datetime as dt

    from engine.tasks.base import TaskContext

    ctx = TaskContext(
        task_instance_id=5,
        task_name="agg",
        task_params={
            "mainFile": "/jobs/agg.py",
            "mainArgs": "--date $[yyyyMMdd]",
            "master": "spark://10.0.0.1:7077",
            "deployMode": "cluster",
            "driverCores": 2,
            "executorMemory": "4g",
            "numExecutors": 3,
            "appName": "agg-${d}",
            "conf": {"spark.sql.shuffle.partitions": 8},
        },
        values={"d": "x"},
        when=dt.datetime(2026, 5, 17),
        exec_dir=Path("/tmp"),
    )
    argv = SparkTask().launch(ctx).argv
    assert argv[0].endswith("/pyspark/bin/spark-submit")
    joined = " ".join(argv[1:])
    assert "--master spark://10.0.0.1:7077 --deploy-mode cluster --name agg-x" in joined
    assert "--driver-cores 2" in joined and "--executor-memory 4g" in joined and "--num-executors 3" in joined
    assert "--conf spark.sql.shuffle.partitions=8" in joined
    assert joined.endswith("/jobs/agg.py --date 20260517")


@pytest.mark.parametrize(
    ("params", "worker_host", "driver_host"),
    [
        ({"master": "spark://10.0.0.1:7077"}, "10.0.0.7", "10.0.0.7"),  # executors elsewhere call it back
        ({"master": "yarn"}, "h7.example", "h7.example"),
        ({"master": "local[2]"}, "10.0.0.7", None),  # no executor elsewhere
        ({"master": "yarn", "deployMode": "cluster"}, "10.0.0.7", None),  # the driver runs elsewhere
        ({"master": "spark://10.0.0.1:7077"}, "", None),  # a worker with no host yet
        ({"master": "spark://10.0.0.1:7077", "conf": {"spark.driver.host": "10.9.9.9"}}, "10.0.0.7", "10.9.9.9"),
        ({"master": "spark://10.0.0.1:7077", "others": "--conf spark.driver.host=10.9.9.9"}, "10.0.0.7", "10.9.9.9"),
    ],
)
def test_a_client_mode_driver_on_a_cluster_advertises_its_worker_s_host(
    params: dict, worker_host: str, driver_host: str | None
) -> None:
    """spark-submit gets ``spark.driver.host`` = the host the worker advertises (so a driver in a host
    whose name resolves to another interface is still reachable), unless the task chose its own; the last
    ``--conf`` of a key is the one spark-submit keeps."""
    import datetime as dt

    from engine.tasks.base import TaskContext

    ctx = TaskContext(
        task_instance_id=5, task_name="agg", task_params={"rawScript": "print(1)", **params}, values={},
        when=dt.datetime(2026, 5, 17), exec_dir=Path("/tmp"), options={"worker_host": worker_host},
    )  # fmt: skip
    argv = SparkTask().launch(ctx).argv
    confs = [argv[i + 1] for i, a in enumerate(argv) if a == "--conf"]
    hosts = [c.partition("=")[2] for c in confs if c.startswith("spark.driver.host=")]
    assert (hosts[-1] if hosts else None) == driver_host, argv
