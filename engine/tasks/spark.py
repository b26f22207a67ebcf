"""SPARK: spark-submit (from the installed pyspark) of a PySpark application or Spark SQL.

The master URL defaults to ``local[*]``; any ``spark://``, ``yarn`` or ``k8s://`` URL works by
configuration. In client deploy mode the driver is the spark-submit JVM, a child of the task's
process group, so killing the task kills the driver.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.tasks.base import Launch, ParamError, TaskContext, TaskPlugin, describe_params, optional

PROGRAM_TYPES = ("PYTHON", "SQL")
DEPLOY_MODES = ("client", "cluster")
_SQL_APP = Path(__file__).with_name("spark_sql_app.py")


def spark_submit() -> str:
    import pyspark

    path = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if not path.exists():  # pragma: no cover - ships with the pyspark wheel
        raise ParamError("programType", f"spark-submit not found at {path}")
    return str(path)


class SparkTask(TaskPlugin):
    task_type = "SPARK"
    params_schema = describe_params(
        {
            "programType": {"enum": list(PROGRAM_TYPES), "default": "PYTHON"},
            "mainFile": {"type": "string", "description": "path of the PySpark application (or rawScript)"},
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
        master = optional(params, "master", str, "local[*]")
        if not master.startswith(("local", "spark://", "yarn", "k8s://", "mesos://")):
            raise ParamError("master", f"unsupported master URL {master!r}")
        if optional(params, "deployMode", str, "client") not in DEPLOY_MODES:
            raise ParamError("deployMode", "must be client or cluster")
        for name in ("driverCores", "executorCores", "numExecutors"):
            value = optional(params, name, int, None)
            if value is not None and value < 1:
                raise ParamError(name, "must be >= 1")
        for name in ("driverMemory", "executorMemory", "appName", "mainArgs", "others"):
            optional(params, name, str, None)
        conf = optional(params, "conf", dict, {})
        if not all(isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in conf.items()):
            raise ParamError("conf", "must map Spark property names to scalar values")

    def launch(self, ctx: TaskContext) -> Launch:
        p = ctx.task_params
        argv = [
            spark_submit(),
            "--master",
            p.get("master", "local[*]"),
            "--deploy-mode",
            p.get("deployMode", "client"),
        ]
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
        conf = {"spark.ui.showConsoleProgress": "false", **{k: str(v) for k, v in p.get("conf", {}).items()}}
        for key, value in conf.items():
            argv += ["--conf", f"{key}={ctx.render(value)}"]
        if p.get("others"):
            argv += shlex.split(ctx.render(p["others"]))
        files: dict[str, str] = {}
        if p.get("programType", "PYTHON") == "SQL":
            files["app.py"] = _SQL_APP.read_text()
            files["statements.json"] = json.dumps({"sql": ctx.render(p["sql"]), "max_rows": 100})
            argv += ["app.py", "statements.json"]
        else:
            if p.get("rawScript"):
                files["app.py"] = ctx.render(p["rawScript"])
                main = "app.py"
            else:
                main = ctx.render(p["mainFile"])
            argv.append(main)
            if p.get("mainArgs"):
                argv += shlex.split(ctx.render(p["mainArgs"]))
        env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        if ctx.environment_config.strip():
            files["run.sh"] = ctx.environment_config.strip() + "\nexec " + shlex.join(argv) + "\n"
            return Launch(argv=["bash", "run.sh"], files=files, env=env)
        return Launch(argv=argv, files=files, env=env)
