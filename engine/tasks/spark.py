"""SPARK: a PySpark application, Spark SQL, or a Java / Scala application jar, through spark-submit (from the
installed pyspark) or (PySpark and SQL) a Spark Connect server.

``programType`` JAVA or SCALA (DolphinScheduler's names): ``mainJar`` (a path on the worker, or
``{"resourceName": path}``), ``mainClass`` (else the jar's manifest names it), ``mainArgs``, and the resource
options below. spark-submit runs under engine/tasks/app_watch.py, which reads the application id and UI link
from Spark's own log lines, or from the driver's UI where the log never names it (``local`` masters): a JVM
driver cannot run the PySpark bootstrap. Standalone and YARN clusters take jars in cluster deploy mode too.

``master`` (placeholders allowed):

- ``local[*]`` (default), ``spark://HOST:PORT`` (a Spark standalone cluster), ``yarn``, ``k8s://...``:
  spark-submit, passed through. In client deploy mode (the default) the driver is the spark-submit JVM,
  a child of the task's process group: a kill, a timeout or the worker's reaper kills the driver, and the
  cluster manager then ends the application and its executors. The driver runs a small bootstrap
  (``spark_boot.py``) that prints the Spark application id and UI link, which the worker records
  (task instance ``app_id`` / ``app_link``). In cluster deploy mode (``yarn``, ``k8s://``) spark-submit
  only submits: killing it does not end the application on the cluster (Spark standalone refuses cluster
  deploy mode for Python applications, so ``spark://`` + ``cluster`` is refused here at save time).
  A client-mode driver on a cluster (any master but ``local``) advertises the host its worker advertises to
  its peers (``spark.driver.host``, which it also binds): executors on other machines connect back to it,
  so it must not be a loopback or some other interface's address the machine's name resolves to. A
  task's own ``conf`` ``spark.driver.host`` (or one in ``others``) wins.
- ``sc://HOST:PORT`` (a Spark Connect server) or ``connect`` (the worker's own server,
  ``worker.spark_connect_url``): no JVM per task; ``spark_connect_runner`` runs the application in a
  Spark Connect session of its own, forked from the worker's pre-imported fork server
  (``worker.spark_connect_prefork``) unless the task has an environment_config; a kill interrupts that
  session's operations. The spark-submit resource parameters (deployMode, driver*/executor*/numExecutors,
  others) do not apply; ``conf`` entries are set as session settings.
"""

from __future__ import annotations

import json
import shlex
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.tasks import placing
from engine.tasks.base import Launch, ParamError, TaskContext, TaskPlugin, describe_params, optional
from engine.tasks.mr import main_jar

PROGRAM_TYPES = ("PYTHON", "SQL", "JAVA", "SCALA")
#: program types that run a jar (no PySpark bootstrap, no Spark Connect)
JAR_TYPES = ("JAVA", "SCALA")
DEPLOY_MODES = ("client", "cluster")
_SQL_APP = Path(__file__).with_name("spark_sql_app.py")
_BOOT = Path(__file__).with_name("spark_boot.py")
#: the master URL schemes spark-submit takes (and Spark Connect's)
MASTERS = ("local", "spark://", "yarn", "k8s://", "mesos://", "sc://", "connect")
#: master value: the Spark Connect server configured on the worker (worker.spark_connect_url)
CONNECT = "connect"
#: the module running a Connect task (``python -m``, or forked from the worker's fork server)
CONNECT_RUNNER = "engine.tasks.spark_connect_runner"
#: namespace of Spark Connect session ids (one per attempt, derived, so the next attempt knows it)
_SESSIONS = uuid.UUID("6f1b3c1e-8d1a-4c1e-9a55-7b0d5e0c2f19")


def is_connect(master: str) -> bool:
    return master == CONNECT or master.startswith("sc://")


def check_master(master: str) -> None:
    if not master.startswith(MASTERS):
        raise ParamError("master", f"unsupported master URL {master!r} (local, spark://, yarn, k8s://, sc://, connect)")


def session_id(workflow_instance_id: int, task_code: int, attempt: int) -> str:
    """The Spark Connect session of one attempt (a UUID, version 4 form as Spark Connect expects)."""
    derived = uuid.uuid5(_SESSIONS, f"{workflow_instance_id}/{task_code}/{attempt}")
    return str(uuid.UUID(bytes=derived.bytes, version=4))


#: why a SPARK task fails on a worker installed without the ``spark`` extra
NO_PYSPARK = (
    "SPARK tasks need PySpark on the worker that runs them, and this worker has none: install it there "
    "(pip install 'porpoise-scheduler[spark]'), or run SPARK tasks in a worker group whose workers have it"
)


def spark_submit() -> str:
    try:
        import pyspark
    except ImportError:
        raise ParamError("type", NO_PYSPARK) from None

    path = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if not path.exists():  # pragma: no cover - ships with the pyspark wheel
        raise ParamError("programType", f"spark-submit not found at {path}")
    return str(path)


def driver_host(ctx: TaskContext, master: str, deploy: str) -> dict[str, str]:
    """``spark.driver.host``: the worker's advertised host, for a driver here (client deploy mode) that
    executors elsewhere call back (any master but ``local``); nothing when the worker has no host yet."""
    host = ctx.options.get("worker_host", "")
    if deploy != "client" or master.startswith("local") or not host:
        return {}
    return {"spark.driver.host": host}


class SparkTask(TaskPlugin):
    task_type = "SPARK"
    params_schema = describe_params(
        {
            "programType": {"enum": list(PROGRAM_TYPES), "default": "PYTHON"},
            "mainFile": {
                "type": ["string", "object"],
                "description": "path of the PySpark application (or rawScript); {resourceName}: a resource-center file",
            },
            "mainJar": {"type": ["string", "object"], "description": "the application jar (JAVA / SCALA)"},
            "mainClass": {"type": "string", "description": "its main class (JAVA / SCALA)"},
            "rawScript": {"type": "string", "contentMediaType": "text/x-python", "description": "inline PySpark"},
            "sql": {"type": "string", "contentMediaType": "text/x-sql", "description": "Spark SQL (programType SQL)"},
            "master": {"type": "string", "default": "local[*]", "description": "local[*], spark://, yarn, k8s://"},
            "deployMode": {"enum": list(DEPLOY_MODES), "default": "client"},
            "driverCores": {"type": "integer", "minimum": 1},
            "driverMemory": {"type": "string", "description": "e.g. 1g"},
            "executorCores": {"type": "integer", "minimum": 1},
            "executorMemory": {"type": "string", "description": "e.g. 2g"},
            "numExecutors": {"type": "integer", "minimum": 1},
            "appName": {"type": "string"},
            "mainArgs": {"type": "string", "description": "arguments of the application"},
            "others": {"type": "string", "description": "more spark-submit options"},
            "conf": {
                "type": "object",
                "additionalProperties": {"type": ["string", "number", "boolean"]},
                "description": "Spark properties",
            },
        },
        examples=(
            {"programType": "PYTHON", "rawScript": "print('hello from spark')"},
            {"programType": "SQL", "sql": "select 1", "master": "local[2]", "deployMode": "client",
             "driverCores": 1, "driverMemory": "1g", "executorCores": 1, "executorMemory": "1g", "numExecutors": 1,
             "appName": "a", "mainArgs": "", "others": "", "conf": {"spark.x": "1"}},
            {"mainFile": "app.py"},
        ),
    )  # fmt: skip

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        super().validate(params)
        program = optional(params, "programType", str, "PYTHON")
        if program not in PROGRAM_TYPES:
            raise ParamError("programType", f"must be one of {', '.join(PROGRAM_TYPES)}, got {program!r}")
        if program == "PYTHON" and not (params.get("mainFile") or params.get("rawScript")):
            raise ParamError("mainFile", "a PYTHON Spark task needs mainFile (a path) or rawScript (inline code)")
        if program == "SQL" and not (isinstance(params.get("sql"), str) and params["sql"].strip()):
            raise ParamError("sql", "a SQL Spark task needs the sql to run")
        if program in JAR_TYPES:
            main_jar(params)
            optional(params, "mainClass", str, None)
        master = optional(params, "master", str, "local[*]")
        if "${" not in master and "$[" not in master:  # a placeholder is checked once resolved
            check_master(master)
            if program in JAR_TYPES and is_connect(master):
                raise ParamError("master", "Spark Connect runs PySpark and SQL; a JAVA / SCALA jar needs spark-submit")
        deploy = optional(params, "deployMode", str, "client")
        if deploy not in DEPLOY_MODES:
            raise ParamError("deployMode", "must be client or cluster")
        if deploy == "cluster" and master.startswith("spark://") and program not in JAR_TYPES:
            raise ParamError(
                "deployMode", "Spark standalone clusters run Python applications in client deploy mode only"
            )
        for name in ("driverCores", "executorCores", "numExecutors"):
            value = optional(params, name, int, None)
            if value is not None and value < 1:
                raise ParamError(name, "must be >= 1")
        for name in ("driverMemory", "executorMemory", "appName", "mainArgs", "others"):
            optional(params, name, str, None)
        for name in ("mainArgs", "others"):
            try:
                shlex.split(params.get(name) or "")
            except ValueError as exc:
                raise ParamError(name, f"cannot be split into arguments: {exc}") from None
        conf = optional(params, "conf", dict, {})
        if not all(isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in conf.items()):
            raise ParamError("conf", "must map Spark property names to scalar values")

    def launch(self, ctx: TaskContext) -> Launch:
        p = ctx.task_params
        master = ctx.render(p.get("master", "local[*]"))
        check_master(master)
        if is_connect(master):
            return self._launch_connect(ctx, master)
        deploy = p.get("deployMode", "client")
        argv = [spark_submit(), "--master", master, "--deploy-mode", deploy]
        argv += ["--name", ctx.render(p.get("appName") or f"porpoise-{ctx.task_name}-{ctx.task_instance_id}")]
        for flag, name in (
            ("--driver-cores", "driverCores"),
            ("--driver-memory", "driverMemory"),
            ("--executor-cores", "executorCores"),
            ("--executor-memory", "executorMemory"),
            ("--num-executors", "numExecutors"),
        ):
            if p.get(name) is not None:
                argv += [flag, str(p[name])]
        conf = {"spark.ui.showConsoleProgress": "false", **driver_host(ctx, master, deploy)}
        conf.update({k: str(v) for k, v in p.get("conf", {}).items()})
        for key, value in conf.items():
            argv += ["--conf", f"{key}={ctx.render(value)}"]
        if p.get("others"):
            argv += [ctx.render(word) for word in shlex.split(p["others"])]  # a value stays one argument
        env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        if p.get("programType", "PYTHON") in JAR_TYPES:
            return self._launch_jar(ctx, argv, master, env)
        files, main, args = _program(ctx)
        if deploy == "client":  # the driver is here: the bootstrap announces the application
            files["boot.py"] = _BOOT.read_text()
            argv += ["boot.py", main, *args]
        else:
            argv += [main, *args]
        if ctx.environment_config.strip():
            files["run.sh"] = ctx.environment_config.strip() + "\nexec " + shlex.join(argv) + "\n"
            return Launch(argv=["bash", "run.sh"], files=files, env=env)
        return Launch(argv=argv, files=files, env=env)

    def _launch_jar(self, ctx: TaskContext, submit: list[str], master: str, env: dict[str, str]) -> Launch:
        """spark-submit of a jar, under the watcher that announces the application from Spark's log."""
        p = ctx.task_params
        host = ctx.options.get("worker_host", "") or "localhost"
        watch = [sys.executable, "-m", "engine.tasks.app_watch", host]
        if p.get("mainClass"):
            submit += ["--class", ctx.render(p["mainClass"])]
        submit.append(ctx.render(main_jar(p)))
        if p.get("mainArgs"):
            submit += [ctx.render(word) for word in shlex.split(p["mainArgs"])]  # a value stays one argument
        command = [*watch, "--", *submit]
        if ctx.environment_config.strip():
            script = ctx.environment_config.strip() + "\nexec " + shlex.join(command) + "\n"
            return Launch(argv=["bash", "run.sh"], files={"run.sh": script}, env=env)
        return Launch(argv=command, env=env)

    def _launch_connect(self, ctx: TaskContext, master: str) -> Launch:
        url = master if master != CONNECT else ctx.options.get("spark_connect_url", "")
        if not url:
            raise ParamError("master", "this worker has no Spark Connect server (worker.spark_connect_url is empty)")
        p = ctx.task_params
        files, main, args = _program(ctx)
        sid = session_id(ctx.workflow_instance_id, ctx.task_code, ctx.attempt)
        previous = session_id(ctx.workflow_instance_id, ctx.task_code, ctx.attempt - 1) if ctx.attempt > 1 else ""
        files["job.json"] = json.dumps(
            {
                "url": url,
                "session_id": sid,
                "previous_session_id": previous,
                "tag": f"porpoise-{ctx.task_instance_id}",
                "main": main,
                "args": args,
                "conf": {k: ctx.render(str(v)) for k, v in p.get("conf", {}).items()},
            }
        )
        argv = [sys.executable, "-m", CONNECT_RUNNER, "job.json"]
        if ctx.environment_config.strip():  # a bash prelude: started cold, never forked
            files["run.sh"] = ctx.environment_config.strip() + "\nexec " + shlex.join(argv) + "\n"
            return Launch(argv=["bash", "run.sh"], files=files)
        return Launch(argv=argv, files=files, inprocess=CONNECT_RUNNER)


def _program(ctx: TaskContext) -> tuple[dict[str, str], str, list[str]]:
    """The files to write, the main file and its arguments of the task's program (PYTHON or SQL)."""
    p = ctx.task_params
    files: dict[str, str] = {}
    if p.get("programType", "PYTHON") == "SQL":
        files["app.py"] = _SQL_APP.read_text()
        files["statements.json"] = json.dumps({"sql": ctx.render(p["sql"]), "max_rows": 100})
        return files, "app.py", ["statements.json"]
    if p.get("rawScript"):
        files["app.py"] = placing.python(p["rawScript"], ctx.values, ctx.when)  # values as literals, as PYTHON
        main = "app.py"
    else:
        main = ctx.render(main_jar(p, "mainFile"))
    return files, main, [ctx.render(word) for word in shlex.split(p.get("mainArgs") or "")]
