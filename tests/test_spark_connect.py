"""SPARK tasks through a real Spark Connect server (the pyspark wheel's SparkConnectServer, local[2]) on
a real worker: each task in a Spark Connect session of its own, OUT parameters and logs as with
spark-submit, a kill interrupts the session's operations on the server, and an attempt whose process was
SIGKILLed (its worker died) has its operations interrupted by the next attempt.

The worker forks Connect tasks from its fork server (worker.spark_connect_prefork, on by default;
engine/worker/forkserver.py): the tests above run through it (a task with an environment_config starts the
normal way), and more: a forked task runs as its tenant with none of the worker's secrets; the fork
server killed mid-task loses the task (LOST) and the next attempt still runs; a stopped worker leaves no
process behind.

One server for the module (a JVM start, tens of seconds here); every task is a Python process only."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from engine.infra.etcd import EtcdServer
from engine.infra.spark import SparkConnectServer
from engine.tasks.base import ParamError, TaskContext
from engine.tasks.spark import SparkTask, session_id
from rpc.client import RpcClient
from rpc.messages import TaskDispatch, TaskKill
from tests.conftest import UNGUARDED
from tests.helpers import TEST_SECRET, NodeProc, eventually, process_alive, rpc_client, start_worker
from tests.worker_harness import ReportSink, dispatch, log_text, task

pytestmark = pytest.mark.slow

PY = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
n = int(sys.argv[1])
rows = spark.range(n).selectExpr("id % 3 AS k").groupBy("k").count().collect()
print("GROUPS", sorted((r["k"], r["count"]) for r in rows))
print("${setValue(rows=%d)}" % sum(r["count"] for r in rows))
"""
#: what a forked task prints of itself: who it runs as, its environment and the one it started with
WHOAMI = """
import json, os
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
print("WHO", json.dumps([os.getuid(), os.getgid(), os.getgroups()]))
print("ENV", json.dumps(dict(os.environ)))
with open("/proc/self/environ", "rb") as fh:
    print("STARTED WITH", fh.read().decode(errors="replace"))
print("${setValue(n=%d)}" % spark.range(7).count())
"""
FORKED = "[porpoise] forked by the worker's fork server"
#: a query that runs for minutes unless interrupted
LONG = "SELECT count(*) FROM range(0, 50000000000, 1, 1) WHERE hash(id) % 7 = 3"  # one core of the server's two


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkConnectServer]:
    server = SparkConnectServer(tmp_path_factory.mktemp("spark-connect"), master="local[2]")
    server.start()
    try:
        server.running_jobs(timeout=180)  # the UI's REST API answers slowly the first time (a loaded machine)
        yield server
    finally:
        server.stop()


@pytest.fixture
async def worker(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    tmp_path: Path,
    connect_server: SparkConnectServer,
) -> NodeProc:
    overrides = [
        f"worker.log_dir={tmp_path / 'logs'}",
        f"worker.exec_dir={tmp_path / 'exec'}",
        f"worker.spark_connect_url={connect_server.url}",
    ]
    return await asyncio.to_thread(node_factory, "worker", etcd_server.endpoint, etcd_root, 3, overrides, **UNGUARDED)


async def _jobs(server: SparkConnectServer) -> list[dict] | None:
    """The server's running jobs; None when its UI did not answer in time (a loaded machine): unknown."""
    try:
        return await asyncio.to_thread(server.running_jobs)
    except TimeoutError:
        return None


async def _idle(server: SparkConnectServer) -> bool:
    return await _jobs(server) == []


async def _job_started(server: SparkConnectServer, log_path: str) -> None:
    try:
        await eventually(lambda: _jobs(server), 180, "the task's Spark job on the server", interval=0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the task's log:\n{await log_text(log_path)}") from None


async def _long_query_running(
    client: RpcClient, worker: NodeProc, sink: ReportSink, server: SparkConnectServer
) -> tuple[TaskDispatch, dict]:
    """A Connect task running LONG, its job started on the server; the task and its RUNNING report."""
    msg = task("SPARK", {"programType": "SQL", "sql": LONG, "master": "connect"}, sink.address)
    assert (await dispatch(client, worker.address, msg)).accepted is True
    running = await sink.running(msg.task_instance_id)
    await _job_started(server, running["log_path"])
    return msg, running


async def test_pyspark_and_spark_sql_tasks_through_connect(
    worker: NodeProc, sink: ReportSink, connect_server: SparkConnectServer
) -> None:
    client = rpc_client(10)
    py = task(
        "SPARK",
        {
            "rawScript": PY,
            "mainArgs": "${n}",
            "master": "connect",
            "conf": {"spark.sql.shuffle.partitions": "3"},
            "localParams": [{"prop": "n", "value": "3000"}, {"prop": "rows", "direct": "OUT"}],
        },
        sink.address,
    )
    sql = task(
        "SPARK",
        {"programType": "SQL", "sql": "SELECT 40 + ${two} AS answer", "master": connect_server.url,
         "localParams": [{"prop": "two", "value": "2"}]},
        sink.address,
    )  # fmt: skip
    bad = task("SPARK", {"rawScript": "raise SystemExit(3)", "master": "connect"}, sink.address)
    prelude = task(
        "SPARK",
        {"rawScript": "import os\nprint('prelude says', os.environ['FROM_PRELUDE'])", "master": "connect"},
        sink.address,
        environment_config="export FROM_PRELUDE=yes",
    )
    for msg in (py, sql, bad, prelude):
        assert (await dispatch(client, worker.address, msg)).accepted is True
    r_py = await sink.result(py.task_instance_id, timeout=180)
    r_sql = await sink.result(sql.task_instance_id, timeout=180)
    r_bad = await sink.result(bad.task_instance_id, timeout=180)
    r_prelude = await sink.result(prelude.task_instance_id, timeout=180)
    await client.close()

    text = await log_text(r_py["log_path"])
    assert r_py["state"] == "SUCCESS", text
    assert "GROUPS [(0, 1000), (1, 1000), (2, 1000)]" in text
    assert r_py["var_pool"] == [{"prop": "rows", "direct": "OUT", "type": "VARCHAR", "value": "3000"}]
    # its own session, announced in the log and reported as the task's application
    sid = session_id(py.workflow_instance_id, py.task_code, 1)
    assert f"[porpoise] spark connect session {sid} on {connect_server.url}" in text
    assert r_py["app_id"] == sid
    assert "spark-submit" not in text and "SparkContext: Running Spark version" not in text  # no JVM of its own
    sql_text = await log_text(r_sql["log_path"])
    assert r_sql["state"] == "SUCCESS", sql_text
    assert "answer" in sql_text and "\n42\n" in sql_text
    assert r_sql["app_id"] != r_py["app_id"]
    assert r_bad["state"] == "FAILURE" and r_bad["exit_code"] == 3
    # forked by the fork server, but a task with a bash prelude: started the normal way, the prelude run
    assert FORKED in text and FORKED in sql_text and FORKED in await log_text(r_bad["log_path"])
    prelude_text = await log_text(r_prelude["log_path"])
    assert r_prelude["state"] == "SUCCESS" and "prelude says yes" in prelude_text, prelude_text
    assert FORKED not in prelude_text


async def test_a_kill_interrupts_the_session_s_operations(
    worker: NodeProc, sink: ReportSink, connect_server: SparkConnectServer
) -> None:
    client = rpc_client(30)
    msg, _ = await _long_query_running(client, worker, sink, connect_server)
    assert (await client.call(worker.address, TaskKill(msg.task_instance_id, 1))).killed is True
    result = await sink.result(msg.task_instance_id)
    await client.close()
    text = await log_text(result["log_path"])
    assert result["state"] == "KILL" and "1 operation(s) interrupted" in text and FORKED in text, text
    await eventually(lambda: _idle(connect_server), 60, "the server's jobs to be cancelled", interval=0.5)


async def test_the_next_attempt_interrupts_a_sigkilled_attempt_s_operations(
    worker: NodeProc, sink: ReportSink, connect_server: SparkConnectServer
) -> None:
    """The reaper SIGKILLs a dead worker's tasks: no handler runs, the query would go on on the server.
    The attempt after it (on any worker) interrupts the previous attempt's session first."""
    client = rpc_client(10)
    first, running = await _long_query_running(client, worker, sink, connect_server)
    os.killpg(running["pid"], signal.SIGKILL)  # what the reaper does
    await sink.result(first.task_instance_id)
    assert await _jobs(connect_server), "a SIGKILLed client leaves its query running on the server"
    await _second_attempt_interrupts_the_first(client, worker, sink, connect_server, first)
    await client.close()


async def _second_attempt_interrupts_the_first(
    client: RpcClient, worker: NodeProc, sink: ReportSink, server: SparkConnectServer, first: TaskDispatch
) -> str:
    """Attempt 2 of ``first`` succeeds, having interrupted attempt 1's query on the server; its log."""
    second = task(
        "SPARK",
        {"programType": "SQL", "sql": "SELECT 1 AS one", "master": "connect"},
        sink.address,
        attempt=2,
        workflow_instance_id=first.workflow_instance_id,
        task_code=first.task_code,
    )
    assert (await dispatch(client, worker.address, second)).accepted is True
    result = await sink.result(second.task_instance_id, timeout=180)
    text = await log_text(result["log_path"])
    assert result["state"] == "SUCCESS", text
    previous = session_id(first.workflow_instance_id, first.task_code, 1)
    assert f"previous attempt's session {previous}: 1 operation(s) interrupted" in text
    await eventually(lambda: _idle(server), 60, "the first attempt's job to be cancelled", interval=0.5)
    return text


def _fork_server(worker: NodeProc) -> psutil.Process:
    (server,) = [c for c in psutil.Process(worker.pid).children() if "engine.worker.forkserver" in c.cmdline()]
    return server


async def test_a_forked_task_runs_as_its_tenant_without_the_worker_s_secrets(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    workdir: Path,
    sink: ReportSink,
    client: RpcClient,
    connect_server: SparkConnectServer,
) -> None:
    env_secret, file_secret = f"env-secret-{uuid.uuid4().hex}", f"file-secret-{uuid.uuid4().hex}"
    base = workdir / f"connect-tenant-{uuid.uuid4().hex[:6]}"  # world-traversable: the tenant works in it
    base.mkdir()
    config = base / "worker.yaml"
    config.write_text(f"database:\n  password: {file_secret}\n")
    w = await asyncio.to_thread(
        start_worker, node_factory, etcd_server.endpoint, etcd_root, base,
        "worker.allow_root_tenant=false", f"worker.spark_connect_url={connect_server.url}",
        "worker.max_cpu_load_avg=100000", "worker.reserved_memory_gb=0",
        CLOUD_API_TOKEN=env_secret, PORPOISE_CONFIG=str(config),
    )  # fmt: skip
    params = {"rawScript": WHOAMI, "master": "connect", "localParams": [{"prop": "n", "direct": "OUT"}]}
    msg = task("SPARK", params, sink.address, tenant="nobody")
    assert (await dispatch(client, w.address, msg)).accepted is True
    result = await sink.result(msg.task_instance_id, timeout=180)
    text = await log_text(result["log_path"])
    assert result["state"] == "SUCCESS" and FORKED in text, text
    assert result["var_pool"] == [{"prop": "n", "direct": "OUT", "type": "VARCHAR", "value": "7"}]
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in text.splitlines() if " " in line}
    nobody = pwd.getpwnam("nobody")
    assert json.loads(lines["WHO"]) == [nobody.pw_uid, nobody.pw_gid, []]  # setpriv --clear-groups
    env = json.loads(lines["ENV"])
    assert env["USER"] == "nobody" and env["HOME"] == nobody.pw_dir and "PORPOISE_TASK_INSTANCE_ID" in env
    assert "STARTED WITH" in text  # what the fork server started with, inherited: no secret there either
    for what, value in {"rpc secret": TEST_SECRET, "env secret": env_secret, "config secret": file_secret,
                        "database DSN": w.proc.env["PORPOISE_DATABASE_DSN"]}.items():  # fmt: skip
        assert value not in text, f"the forked task saw the worker's {what}"
    assert "CLOUD_API_TOKEN" not in text and "PORPOISE_RPC" not in text and "PORPOISE_DATABASE" not in text


async def test_the_fork_server_killed_mid_task_loses_it_and_the_next_attempt_runs(
    worker: NodeProc, sink: ReportSink, client: RpcClient, connect_server: SparkConnectServer
) -> None:
    first, running = await _long_query_running(client, worker, sink, connect_server)
    server = _fork_server(worker)
    assert running["pid"] in [c.pid for c in server.children()]
    server.kill()
    result = await sink.result(first.task_instance_id)
    text = await log_text(result["log_path"])
    # not the task's failure: run again elsewhere (its process died with the server)
    assert result["state"] == "LOST" and "the fork server died" in result["message"], (result, text)
    assert not process_alive(running["pid"])
    text = await _second_attempt_interrupts_the_first(client, worker, sink, connect_server, first)
    assert FORKED not in text  # started the normal way while there is no fork server


async def test_a_stopped_worker_leaves_no_process(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    tmp_path: Path,
    sink: ReportSink,
    client: RpcClient,
    connect_server: SparkConnectServer,
) -> None:
    w = await asyncio.to_thread(
        start_worker, node_factory, etcd_server.endpoint, etcd_root, tmp_path,
        f"worker.spark_connect_url={connect_server.url}", "worker.drain_timeout=0",
        "worker.max_cpu_load_avg=100000", "worker.reserved_memory_gb=0",
    )  # fmt: skip
    msg, running = await _long_query_running(client, w, sink, connect_server)
    pids = {"worker": w.pid, "fork server": _fork_server(w).pid, "task": running["pid"]}
    await asyncio.to_thread(w.stop)
    result = await sink.result(msg.task_instance_id)
    text = await log_text(result["log_path"])
    assert result["state"] == "LOST" and "the worker stopped" in result["message"], (result, text)
    assert "1 operation(s) interrupted" in text  # killed as on request: its query ended on the server
    assert w.proc.exited() == 0, w.proc.tail(40)  # a clean stop, not the harness's SIGKILL
    assert not [name for name, pid in pids.items() if process_alive(pid)]
    await eventually(lambda: _idle(connect_server), 60, "the task's job to be cancelled", interval=0.5)


def test_connect_launch_and_its_refusals(tmp_path: Path) -> None:
    import datetime as dt

    def ctx(params: dict, options: dict | None = None, attempt: int = 1) -> TaskContext:
        return TaskContext(
            task_instance_id=9, task_name="q", task_params=params, values={"u": "sc://h:1"},
            when=dt.datetime(2026, 5, 17), exec_dir=tmp_path, workflow_instance_id=4, task_code=11,
            attempt=attempt, options=options or {},
        )  # fmt: skip

    launch = SparkTask().launch(ctx({"rawScript": "x", "master": "${u}", "conf": {"a": 1}}, attempt=2))
    assert launch.argv[1:] == ["-m", "engine.tasks.spark_connect_runner", "job.json"]
    job = json.loads(launch.files["job.json"])
    assert job["url"] == "sc://h:1" and job["main"] == "app.py" and job["conf"] == {"a": "1"}
    assert job["session_id"] == session_id(4, 11, 2) and job["previous_session_id"] == session_id(4, 11, 1)
    assert session_id(4, 11, 2) != session_id(4, 11, 1) != session_id(5, 11, 1)
    used = json.loads(SparkTask().launch(ctx({"rawScript": "x", "master": "connect"}, {"spark_connect_url": "sc://w:2"}))
                      .files["job.json"])  # fmt: skip
    assert used["url"] == "sc://w:2" and used["previous_session_id"] == ""
    with pytest.raises(ParamError) as err:
        SparkTask().launch(ctx({"rawScript": "x", "master": "connect"}))
    assert err.value.field == "master" and "worker.spark_connect_url" in err.value.reason
    with pytest.raises(ParamError) as err:
        SparkTask().launch(ctx({"rawScript": "x", "master": "${missing_is_literal}"}))
    assert err.value.field == "master"


def test_standalone_spark_modes_are_checked() -> None:
    import argparse

    from engine.standalone_spark import SparkServices, parse_modes

    assert parse_modes("cluster, connect") == {"cluster", "connect"}
    assert parse_modes("local") == {"local"}
    for bad in ("", "yarn", "cluster,nope"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected a comma list of local, cluster, connect"):
            parse_modes(bad)
    assert SparkServices().example_master == "local[2]"
    server = SparkConnectServer(Path("/nonexistent"), port=1, ui_port=2)
    assert SparkServices(connect=server).example_master == "connect"
