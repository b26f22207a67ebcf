"""SPARK with programType JAVA on local[*] through real Porpoise processes: a Java application compiled with javac
in the test against the pyspark wheel's jars runs through spark-submit, its output in the task's log, its
application id (asked from the driver's UI) and UI link in the task's detail; a wrong class fails the task
with the reason; parameters are checked naming the field. The standalone cluster's runs and stops are in
tests/test_spark_cluster.py."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from engine.tasks.base import ParamError
from engine.tasks.spark import SparkTask
from tests.conftest import ApiCluster
from tests.java_jobs import SPARK_SUM, build_jar
from tests.test_api import start, wait_final
from tests.test_cli import porpoise


@pytest.mark.parametrize(
    ("params", "field"),
    [({"programType": "JAVA"}, "mainJar"), ({"programType": "SCALA", "mainJar": ""}, "mainJar"),
     ({"programType": "JAVA", "mainJar": "a.jar", "mainClass": 5}, "mainClass"),
     ({"programType": "JAVA", "mainJar": "a.jar", "master": "sc://h:15002"}, "master")],
)  # fmt: skip
def test_jar_params_are_checked_naming_the_field(params: dict[str, Any], field: str) -> None:
    with pytest.raises(ParamError) as err:
        SparkTask.validate(params)
    assert err.value.field == field


def test_a_jar_may_run_in_cluster_deploy_mode_on_a_standalone_cluster() -> None:
    SparkTask.validate({"programType": "JAVA", "mainJar": "a.jar", "master": "spark://h:7077", "deployMode": "cluster"})
    with pytest.raises(ParamError):
        SparkTask.validate({"rawScript": "x", "master": "spark://h:7077", "deployMode": "cluster"})


@pytest.fixture(scope="module")
def jar(workdir: Path) -> Path:
    directory = workdir / f"spark-jar-{uuid.uuid4().hex[:6]}"
    directory.mkdir()
    return build_jar(directory, "SparkSum", SPARK_SUM)


def _run(c: ApiCluster, params: dict[str, Any]) -> tuple[dict[str, Any], str]:
    doc = {"name": f"spark_jar_{uuid.uuid4().hex[:8]}", "project": "spark-jar-tests",
           "tasks": [{"name": "sum", "type": "SPARK", "params": params}]}  # fmt: skip
    code = c.client().post("/api/v1/workflows", doc, release="true")["code"]
    detail = wait_final(c, start(c, code), timeout=480)
    return detail, porpoise(c, "logs", str(detail["tasks"][0]["id"])).stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_java_application_runs_locally_with_its_application_recorded(api_cluster: ApiCluster, jar: Path) -> None:
    detail, log = _run(api_cluster, {"programType": "JAVA", "mainJar": str(jar), "mainClass": "SparkSum",
                                     "mainArgs": "7", "master": "local[1]", "driverMemory": "512m"})  # fmt: skip
    assert detail["state"] == "SUCCESS", log[-4000:]
    task = api_cluster.client().get(f"/api/v1/tasks/{detail['tasks'][0]['id']}")
    assert "SUM=42" in log
    # the id recorded is the one the application itself reports
    assert task["app_id"].startswith("local-") and f"APP={task['app_id']}" in log, (task, log[-3000:])
    assert task["app_link"].startswith("http://")

    detail, log = _run(api_cluster, {"programType": "SCALA", "mainJar": str(jar), "mainClass": "NoSuchMain",
                                     "master": "local[1]"})  # fmt: skip
    assert detail["state"] == "FAILURE" and "NoSuchMain" in log
