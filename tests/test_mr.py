"""MR tasks on real processes: a word count compiled with javac in the test runs as a real MapReduce job in
Hadoop's local runner (the Hadoop client classes of the pyspark wheel, Java 17) over a generated file, with
the output checked word by word, the job id recorded as the task's application; a missing jar or a wrong
class fails the task with the reason; stopping the workflow kills the job (no JVM of it left)."""

from __future__ import annotations

import collections
import datetime as dt
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import psutil
import pytest

from engine.tasks.app_watch import Watch
from engine.tasks.base import ParamError, TaskContext
from engine.tasks.mr import MapReduceTask, main_jar
from tests.conftest import ApiCluster
from tests.helpers import wait_sync
from tests.java_jobs import WORD_COUNT, build_jar
from tests.test_api import start, wait_final
from tests.test_cli import porpoise

WORDS = ["porpoise", "dolphin", "whale", "orca", "narwhal", "beluga"]


def test_the_watcher_announces_ids_and_links_from_spark_hadoop_and_yarn_lines() -> None:
    w = Watch("10.0.0.5")
    assert w.feed("INFO Job: Running job: job_local1234_0001") == "[porpoise] application job_local1234_0001"
    assert w.feed("INFO Job: map 100% reduce 0%") is None
    assert w.feed("INFO Job: The url to track the job: http://localhost:8080/") is None  # the local runner's
    w = Watch("10.0.0.5")
    assert w.feed("INFO Utils: Successfully started service 'SparkUI' on port 4041.") is None
    assert w.feed("INFO StandaloneSchedulerBackend: Connected to Spark cluster with app ID app-2026-0001") == (
        "[porpoise] application app-2026-0001 http://10.0.0.5:4041"
    )
    w = Watch("h")  # Spark's local mode: the log never names the application; the driver's UI does
    assert w.feed("INFO Utils: Successfully started service 'SparkUI' on port 4040.") is None and w.ui_port == 4040
    assert w.learn("local-1764170000000") == "[porpoise] application local-1764170000000 http://h:4040"
    assert w.learn("local-other") is None
    w = Watch("h")
    assert w.feed("INFO impl.YarnClientImpl: Submitted application application_1700_0042") is not None
    assert w.feed("INFO mapreduce.Job: The url to track the job: http://rm:8088/proxy/application_1700_0042/") == (
        "[porpoise] application application_1700_0042 http://rm:8088/proxy/application_1700_0042/"
    )
    w = Watch("h")  # a standalone cluster's cluster deploy mode: the driver's submission names it
    assert w.feed("INFO ClientEndpoint: ... waiting before polling master for driver state") is None
    assert w.feed("INFO ClientEndpoint: Driver successfully submitted as driver-20261127001841-0000") == (
        "[porpoise] application driver-20261127001841-0000"
    )
    assert Watch("h").feed("INFO RestSubmissionClient: Submission successfully created as driver-1-0001") == (
        "[porpoise] application driver-1-0001"
    )


@pytest.mark.parametrize(
    ("params", "field"),
    [({}, "mainJar"), ({"mainJar": ""}, "mainJar"), ({"mainJar": "x.jar", "programType": "GO"}, "programType"),
     ({"mainJar": "x.jar", "mainArgs": 3}, "mainArgs"), ({"mainJar": {"resourceName": ""}}, "mainJar")],
)  # fmt: skip
def test_mr_params_are_checked_naming_the_field(params: dict[str, Any], field: str) -> None:
    with pytest.raises(ParamError) as err:
        MapReduceTask.validate(params)
    assert err.value.field == field
    assert main_jar({"mainJar": {"resourceName": "a/b.jar"}}) == "a/b.jar"


def test_a_value_stays_one_argument_of_the_job(tmp_path: Path) -> None:
    """A start parameter (an EXECUTE-only user's) never adds options: a streaming job's second -mapper would
    be a command of the caller's choosing."""
    params = {"programType": "PYTHON", "mainJar": "streaming.jar", "mainArgs": "--day ${v}",
              "others": "-mapper cat -reducer wc -input ${v} -output out"}  # fmt: skip
    values = {"v": "in -mapper 'sh -c id' -D x=\"y"}
    ctx = TaskContext(1, "mr", params, values, dt.datetime(2026, 3, 1), tmp_path)
    argv = MapReduceTask().launch(ctx).argv
    assert argv.count("-mapper") == 1 and argv[argv.index("-input") + 1] == values["v"]
    assert argv[argv.index("--day") + 1] == values["v"] and argv[-2:] == ["--day", values["v"]]
    with pytest.raises(ParamError) as err:
        MapReduceTask.validate({"mainJar": "x.jar", "others": "-D a='b"})
    assert err.value.field == "others"


def test_the_local_runner_stages_in_the_task_s_own_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hadoop's local runner stages in /tmp/hadoop/mapred/staging unless told otherwise: one directory for every
    OS user, owned by whoever ran a job first, and every other tenant's job failed there ("chmod: cannot access
    .../.staging"). The bundled runner reads a core-site.xml first on its class path that keeps its staging and
    temporary directories in the task's working directory; with HADOOP_HOME that installation's own applies."""
    monkeypatch.delenv("HADOOP_HOME", raising=False)
    ctx = TaskContext(1, "mr", {"mainJar": "job.jar", "mainClass": "Job"}, {}, dt.datetime(2026, 3, 1), tmp_path)
    launch = MapReduceTask().launch(ctx)
    argv = launch.argv
    classpath = argv[argv.index("-cp") + 1].split(":")
    assert classpath[0] == str(tmp_path), classpath
    site = ElementTree.fromstring(launch.files["core-site.xml"])
    props = {p.findtext("name"): p.findtext("value") for p in site.iter("property")}
    assert props["mapreduce.jobtracker.staging.root.dir"] == f"{tmp_path}/hadoop-tmp/staging"
    assert props["hadoop.tmp.dir"] == f"{tmp_path}/hadoop-tmp"
    hadoop = tmp_path / "hadoop" / "bin" / "hadoop"
    hadoop.parent.mkdir(parents=True)
    hadoop.write_text("#!/bin/sh\n")
    monkeypatch.setenv("HADOOP_HOME", str(hadoop.parent.parent))
    installed = MapReduceTask().launch(ctx)
    assert str(hadoop) in installed.argv and "core-site.xml" not in installed.files


@pytest.fixture(scope="module")
def jobs(workdir: Path) -> Iterator[Path]:
    """The word count jar and a world-writable place for inputs and outputs (tasks run as their tenant)."""
    root = workdir / f"mr-{uuid.uuid4().hex[:6]}"
    root.mkdir(mode=0o777)
    root.chmod(0o777)
    build_jar(root, "WordCount", WORD_COUNT)
    yield root


def _workflow(c: ApiCluster, params: dict[str, Any]) -> int:
    doc = {"name": f"mr_{uuid.uuid4().hex[:8]}", "project": "mr-tests",
           "tasks": [{"name": "count", "type": "MR", "params": params}]}  # fmt: skip
    return int(c.client().post("/api/v1/workflows", doc, release="true")["code"])


def _log(c: ApiCluster, detail: dict[str, Any]) -> str:
    return porpoise(c, "logs", str(detail["tasks"][0]["id"])).stdout


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_word_count_runs_in_hadoop_s_local_runner(api_cluster: ApiCluster, jobs: Path) -> None:
    rng = random.Random(20261126)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    source = jobs / f"in-{uuid.uuid4().hex[:6]}.txt"
    source.write_text("\n".join(lines) + "\n")
    source.chmod(0o644)
    out = jobs / f"out-{uuid.uuid4().hex[:6]}"
    code = _workflow(api_cluster, {
        "programType": "JAVA", "mainJar": str(jobs / "WordCount.jar"), "mainClass": "WordCount",
        "appName": "porpoise word count", "mainArgs": f"{source} {out}",
    })  # fmt: skip
    detail = wait_final(api_cluster, start(api_cluster, code), timeout=480)
    log = _log(api_cluster, detail)
    assert detail["state"] == "SUCCESS", log[-4000:]
    expected = collections.Counter(word for line in lines for word in line.split())
    produced = {}
    for part in sorted(out.glob("part-r-*")):
        for row in part.read_text().splitlines():
            word, count = row.split("\t")
            produced[word] = int(count)
    assert produced == dict(expected) and (out / "_SUCCESS").exists()
    task = api_cluster.client().get(f"/api/v1/tasks/{detail['tasks'][0]['id']}")
    assert task["app_id"].startswith("job_local"), task
    assert f"[porpoise] application {task['app_id']}" in log, log[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_missing_jar_or_a_wrong_class_fails_with_the_reason(api_cluster: ApiCluster, jobs: Path) -> None:
    missing = _workflow(api_cluster, {"mainJar": str(jobs / "nope.jar"), "mainClass": "WordCount",
                                      "mainArgs": "a b"})  # fmt: skip
    wrong = _workflow(api_cluster, {"mainJar": str(jobs / "WordCount.jar"), "mainClass": "NoSuchJob",
                                    "mainArgs": "a b"})  # fmt: skip
    first = wait_final(api_cluster, start(api_cluster, missing), timeout=300)
    second = wait_final(api_cluster, start(api_cluster, wrong), timeout=300)
    assert first["state"] == "FAILURE" and "nope.jar" in _log(api_cluster, first)
    assert second["state"] == "FAILURE" and "NoSuchJob" in _log(api_cluster, second)


def _jvms_of(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if any(marker in part for part in cmdline) and any(part.endswith("java") for part in cmdline[:1]):
            found.append(proc)
    return found


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_stopping_the_workflow_kills_the_job(api_cluster: ApiCluster, jobs: Path) -> None:
    source = jobs / f"slow-{uuid.uuid4().hex[:6]}.txt"
    source.write_text("\n".join(["one two three"] * 200) + "\n")
    source.chmod(0o644)
    out = jobs / f"slow-out-{uuid.uuid4().hex[:6]}"
    code = _workflow(api_cluster, {
        "mainJar": str(jobs / "WordCount.jar"), "mainClass": "WordCount",
        "others": "-D porpoise.test.sleep.ms=1000", "mainArgs": f"{source} {out}",
    })  # fmt: skip
    instance = start(api_cluster, code)
    client = api_cluster.client()

    def running_job() -> dict[str, Any] | None:
        tasks = client.get(f"/api/v1/instances/{instance}")["tasks"]
        detail = client.get(f"/api/v1/tasks/{tasks[0]['id']}") if tasks and tasks[0]["id"] else {}
        return detail if detail.get("app_id") else None

    detail = wait_sync(running_job, 300, what="the MR job in the task's detail", interval=0.5)
    assert detail["state"] == "RUNNING_EXECUTION" and _jvms_of(str(out))
    assert client.post(f"/api/v1/instances/{instance}/stop")["accepted"]
    stopped = wait_final(api_cluster, instance, timeout=60)
    assert stopped["state"] == "STOP" and stopped["tasks"][0]["state"] == "KILL"
    wait_sync(lambda: not _jvms_of(str(out)), 30, what="the job's JVM to go")
    assert not (out / "_SUCCESS").exists()
