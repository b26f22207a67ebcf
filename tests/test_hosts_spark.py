"""A Spark standalone cluster across the multi-host harness's hosts (tests/hosts.py with ``spark``): the
Spark master on a host of its own, a Spark worker on each of h2 and h3, every daemon bound to its host's
address. The Porpoise worker of h1 alone serves worker group ``spark``, so a SPARK task's driver (the
task's process, a child of that worker) runs on h1 and every executor on another host: the executors
reach the driver only at the address h1's worker advertises, and the driver reaches the master on its
own host. A distributed sum runs to SUCCESS there; stopping the workflow while its Spark step runs ends
the application at the Spark master and leaves no driver. One cluster for the module (three Spark JVMs
besides the harness's nodes); each application starts a driver and two executor JVMs."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from engine.accounts.tokens import create_token, ensure_user
from engine.client import ApiClient, Target
from engine.infra.spark import SparkCluster
from tests.chaos import Summary, _check_no_process_left
from tests.helpers import wait_sync
from tests.hosts import HostCluster
from tests.test_api import start, wait_final
from tests.test_spark_cluster import LONG_JOB, apps, spark_params, stop_while_the_application_runs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

#: production's lease: the test is about Spark across hosts, not faults, and JVMs starting on a loaded
#: two-core machine must not make a node miss its keep-alives
TTL = 15.0
DRIVER_HOST, GROUP = "h1", "spark"

#: a distributed job: a sum over eight partitions, then where each partition ran (the address its
#: executor's host sends from towards the driver: a UDP connect sends nothing, it only picks the route)
SUM_JOB = """
import socket
from pyspark.sql import SparkSession
sc = SparkSession.builder.getOrCreate().sparkContext
driver = sc.getConf().get("spark.driver.host")

def where(_):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((driver, 9))
    yield s.getsockname()[0]

print("SUM", sc.parallelize(range(1, 100001), 8).sum(), flush=True)
print("EXECUTOR_HOSTS", sorted(set(sc.parallelize(range(8), 8).mapPartitions(where).collect())), flush=True)
"""

#: the job waits for both executors (one core each) before its first stage, so both run partitions
BOTH_EXECUTORS = {"spark.cores.max": "2", "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                  "spark.scheduler.maxRegisteredResourcesWaitingTime": "300s"}  # fmt: skip


@dataclass
class HostsApi:
    """The harness's API (host db) with a token: what tests.test_api's start / wait_final call."""

    url: str
    token: str
    ca_file: str = ""

    def client(self) -> ApiClient:
        return ApiClient(Target(self.url, self.token, "test", self.ca_file))


@pytest.fixture(scope="module")
def spark_hosts(workdir: Path) -> Iterator[HostCluster]:
    """The cluster; once it is down, no process of it is left (Spark daemons, executors, drivers: every
    one has its command line or working directory under the cluster's base)."""
    base = workdir / f"hosts-spark-{uuid.uuid4().hex[:6]}"
    base.mkdir()
    os.chmod(base, 0o755)
    cluster = HostCluster(base, hosts=3, ttl=TTL, api=True, spark=True, groups={DRIVER_HOST: GROUP}, exec_slots="4")
    try:
        yield cluster.up()
    finally:
        cluster.down()
    left = Summary(seed=0, workflows=0)
    _check_no_process_left(base, left)
    assert not left.violations and not any(r.alive() for r in cluster.records), left.violations


@pytest.fixture(scope="module")
def api(spark_hosts: HostCluster) -> HostsApi:
    assert spark_hosts.pg is not None and spark_hosts.api is not None

    async def token() -> str:
        conn = await asyncpg.connect(spark_hosts.pg.dsn)
        try:
            return (await create_token(conn, await ensure_user(conn), "tests"))[1]
        finally:
            await conn.close()

    ca = spark_hosts.tls.ca if spark_hosts.tls else ""
    return HostsApi(spark_hosts.api.url, asyncio.run(token()), ca)


def _cluster(hosts: HostCluster) -> SparkCluster:
    assert hosts.spark is not None
    return hosts.spark


def _submit(api: HostsApi, cluster: SparkCluster, script: str, conf: dict[str, str] | None = None) -> int:
    """A workflow of one SPARK task on the cluster in worker group ``spark`` (h1), started: its instance."""
    params = spark_params(cluster, script)
    params["conf"] = {**params["conf"], **(conf or {})}
    doc = {"name": f"spark_hosts_{uuid.uuid4().hex[:6]}", "project": "spark-hosts",
           "tasks": [{"name": "spark", "type": "SPARK", "worker_group": GROUP, "params": params}]}  # fmt: skip
    code = api.client().post("/api/v1/workflows", doc, release=True)["code"]
    return start(api, code)


def _log(api: HostsApi, task_id: int) -> str:
    """The task's whole log, through the API (which reads it from the worker's host)."""
    lines: list[str] = []
    skip = 0
    while True:
        page = api.client().get(f"/api/v1/tasks/{task_id}/log", skip=skip, limit=1000)
        if not page["lines"]:
            return "\n".join(["", *lines, ""])
        lines, skip = lines + page["lines"], page["next"]


def test_a_spark_task_on_one_host_runs_its_executors_on_the_spark_workers_of_the_others(
    spark_hosts: HostCluster, api: HostsApi
) -> None:
    hosts, cluster = spark_hosts, _cluster(spark_hosts)
    driver_address = hosts.net.host(DRIVER_HOST).address
    worker_addresses = sorted(hosts.net.host(n).address for n in hosts.spark_worker_hosts)
    assert driver_address not in worker_addresses and cluster.host not in [driver_address, *worker_addresses]
    assert sorted(w["host"] for w in cluster.status()["workers"]) == worker_addresses

    instance_id = _submit(api, cluster, SUM_JOB, BOTH_EXECUTORS)
    final = wait_final(api, instance_id, timeout=400)
    client = api.client()
    detail = client.get(f"/api/v1/tasks/{final['tasks'][0]['id']}")
    log = _log(api, detail["id"])
    assert final["state"] == "SUCCESS", log[-4000:]
    assert detail["host"] == hosts.workers[DRIVER_HOST].address

    # the driver advertised h1's address (its UI link), and its log names the application
    app_id, link = detail["app_id"], detail["app_link"]
    assert app_id.startswith("app-") and link.startswith(f"http://{driver_address}:"), detail
    assert f"[porpoise] application {app_id} {link}" in log
    # a real distributed job: the right sum, its partitions computed on both other hosts
    assert "\nSUM 5000050000\n" in log
    assert f"\nEXECUTOR_HOSTS {worker_addresses}\n" in log, log[-4000:]
    # the Spark master saw it finish; each Spark worker (h2, h3) ran one of its executors
    assert apps(cluster, "completedapps")[app_id]["state"] == "FINISHED"
    assert app_id not in apps(cluster, "activeapps")

    def ran() -> dict[str, list[str]]:
        return {host: [e["appid"] for e in w["finishedexecutors"]] for host, w in cluster.worker_status().items()}

    # a Spark worker lists an executor as finished once its process has exited, a moment after the app ends
    wait_sync(lambda: all(app_id in ids for ids in ran().values()), 60, "each Spark worker's finished executor")
    assert sorted(ran()) == worker_addresses


def test_stopping_the_workflow_ends_its_application_across_the_hosts(spark_hosts: HostCluster, api: HostsApi) -> None:
    """The driver on h1 is killed with its task, the application ends at the master on its own host and
    no executor holds a core on h2 or h3."""
    detail = stop_while_the_application_runs(api, _cluster(spark_hosts), _submit(api, _cluster(spark_hosts), LONG_JOB))
    assert detail["host"] == spark_hosts.workers[DRIVER_HOST].address
