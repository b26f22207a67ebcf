"""MR: a MapReduce job, submitted as ``hadoop jar`` does (DolphinScheduler's MR task, facts §18.4).

Parameters (DolphinScheduler's names): ``programType`` JAVA (default), SCALA or PYTHON (streaming: ``mainJar`` is
the streaming jar and ``others`` carries ``-mapper``/``-reducer``/``-input``/``-output``), ``mainJar`` (a path on
the worker, absolute or relative to the task's working directory; DolphinScheduler's ``{"resourceName": ...}``
form is read too), ``mainClass`` (not for PYTHON), ``mainArgs``, ``appName`` (``-Dmapreduce.job.name``),
``yarnQueue`` (``-Dmapreduce.job.queuename``, unless ``others`` sets it), ``others`` (more generic options:
``-D``, ``-files``, ``-libjars``, ``-archives``).

The command line is ``<hadoop> jar <mainJar> [<mainClass>] [-D...] [<others>] [<mainArgs>]``, run without a
shell. ``<hadoop>`` is ``$HADOOP_HOME/bin/hadoop`` when the worker has ``HADOOP_HOME`` (its configuration, and
so YARN, from ``HADOOP_CONF_DIR``). On a machine without Hadoop it is Java running
``org.apache.hadoop.util.RunJar`` on the Hadoop client classes the ``pyspark`` wheel ships, with Hadoop's
defaults (``mapreduce.framework.name=local``, ``fs.defaultFS=file:///``): a real job in Hadoop's local runner.
The job's ids (``job_local...`` here, ``application_...`` on YARN) and its tracking URL are recorded as the
task's application (engine/tasks/app_watch.py). A kill ends the task's process group, and so the local job;
on YARN it ends the client, as DolphinScheduler's kill does without a YARN call.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from engine.tasks.base import Launch, ParamError, TaskContext, TaskPlugin, describe_params, optional

PROGRAM_TYPES = ("JAVA", "SCALA", "PYTHON")
#: the JVM options Hadoop's local runner needs on Java 17 (reflection into java.base), as spark-class passes
JAVA17_OPENS = [
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
]


def main_jar(params: Mapping[str, Any], field: str = "mainJar") -> str:
    """The jar named by a task: a path, or DolphinScheduler's ``{"resourceName": path}``."""
    value = params.get(field)
    if isinstance(value, Mapping):
        value = value.get("resourceName") or value.get("res")
    if not isinstance(value, str) or not value.strip():
        raise ParamError(field, "give the jar to run (a path on the worker)")
    return value


def words(params: Mapping[str, Any], field: str) -> list[str]:
    """The words of an argument field as its writer wrote it (shell quoting), before any placeholder is
    replaced; ParamError at the field for unbalanced quotes."""
    try:
        return shlex.split(params.get(field) or "")
    except ValueError as exc:
        raise ParamError(field, f"cannot be split into arguments: {exc}") from None


def hadoop_jars() -> Path:
    """The Hadoop client classes of the installed pyspark (``hadoop-client-api`` and its runtime)."""
    try:
        import pyspark
    except ImportError:
        raise ParamError(
            "type", "MR tasks need Hadoop on the worker: HADOOP_HOME, or PySpark's Hadoop client (porpoise[spark])"
        ) from None
    return Path(pyspark.__file__).parent / "jars"


#: logging of the bundled runner (Hadoop's client classes log through log4j2, silent without a configuration):
#: warnings, and the job's progress with its id, as ``hadoop jar`` shows them
LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
logger.job.name = org.apache.hadoop.mapreduce.Job
logger.job.level = info
logger.runner.name = org.apache.hadoop.mapred
logger.runner.level = info
"""


#: the bundled runner's Hadoop configuration (core-site.xml in the task's working directory, first on the class
#: path): its staging and temporary directories inside that directory. Hadoop's local runner otherwise stages in
#: /tmp/hadoop/mapred/staging, one directory for every OS user of the machine: the first user to run a job owns
#: it (mode 755), and every other tenant's job then fails ("chmod: cannot access .../.staging").
LOCAL_SITE = """\
<?xml version="1.0"?>
<configuration>
  <property><name>hadoop.tmp.dir</name><value>{tmp}</value></property>
  <property><name>mapreduce.jobtracker.staging.root.dir</name><value>{tmp}/staging</value></property>
</configuration>
"""


def hadoop_command(exec_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The start of ``hadoop jar`` on this worker and the files it needs in the task's working directory
    ``exec_dir``. Without a Hadoop installation Hadoop's defaults apply (``mapreduce.framework.name=local``,
    ``fs.defaultFS=file:///``: the local runner), its scratch directories in ``exec_dir`` (LOCAL_SITE)."""
    home = os.environ.get("HADOOP_HOME", "")
    if home and Path(home, "bin", "hadoop").exists():
        return [str(Path(home, "bin", "hadoop")), "jar"], {}
    java = shutil.which("java") or "java"
    argv = [java, *JAVA17_OPENS, "-Dlog4j2.configurationFile=log4j2.properties",
            "-cp", f"{exec_dir}:{hadoop_jars()}/*", "org.apache.hadoop.util.RunJar"]  # fmt: skip
    site = LOCAL_SITE.format(tmp=escape(str(exec_dir / "hadoop-tmp")))
    return argv, {"log4j2.properties": LOG4J2, "core-site.xml": site}


class MapReduceTask(TaskPlugin):
    task_type = "MR"
    params_schema = describe_params(
        {
            "programType": {"enum": list(PROGRAM_TYPES), "default": "JAVA"},
            "mainJar": {"type": ["string", "object"], "description": "the job's jar (a path on the worker)"},
            "mainClass": {"type": "string", "description": "its main class (JAVA / SCALA)"},
            "mainArgs": {"type": "string", "description": "arguments of the main class"},
            "appName": {"type": "string", "description": "the job's name (-Dmapreduce.job.name)"},
            "yarnQueue": {"type": "string", "description": "YARN queue (-Dmapreduce.job.queuename)"},
            "others": {"type": "string", "description": "more options: -D k=v, -files, -libjars, -archives"},
        },
        examples=(
            {"programType": "JAVA", "mainJar": "wordcount.jar", "mainClass": "WordCount", "mainArgs": "in out"},
            {"programType": "PYTHON", "mainJar": "/opt/hadoop/share/hadoop/tools/lib/hadoop-streaming.jar",
             "others": "-mapper cat -reducer wc -input in -output out", "appName": "a", "yarnQueue": "q"},
        ),
    )  # fmt: skip

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        super().validate(params)
        program = optional(params, "programType", str, "JAVA")
        if program not in PROGRAM_TYPES:
            raise ParamError("programType", f"must be one of {', '.join(PROGRAM_TYPES)}, got {program!r}")
        main_jar(params)
        if program != "PYTHON" and params.get("mainClass") is not None:
            optional(params, "mainClass", str)
        for name in ("mainArgs", "appName", "yarnQueue", "others"):
            optional(params, name, str, None)
        for name in ("mainArgs", "others"):
            words(params, name)

    def launch(self, ctx: TaskContext) -> Launch:
        p = ctx.task_params
        start, files = hadoop_command(ctx.exec_dir)
        argv = [*start, ctx.render(main_jar(p))]
        if p.get("programType", "JAVA") != "PYTHON" and p.get("mainClass"):
            argv.append(ctx.render(p["mainClass"]))
        # split into words as written, then each word's placeholders replaced: a value is always one argument
        others = [ctx.render(word) for word in words(p, "others")]
        options = []
        if p.get("appName"):
            options.append(f"-Dmapreduce.job.name={ctx.render(p['appName'])}")
        if p.get("yarnQueue") and not any("mapreduce.job.queuename" in o for o in others):
            options.append(f"-Dmapreduce.job.queuename={ctx.render(p['yarnQueue'])}")
        argv += [*options, *others]
        argv += [ctx.render(word) for word in words(p, "mainArgs")]
        watch = [sys.executable, "-m", "engine.tasks.app_watch", ctx.options.get("worker_host", "") or "localhost"]
        command = [*watch, "--", *argv]
        if ctx.environment_config.strip():
            script = ctx.environment_config.strip() + "\nexec " + shlex.join(command) + "\n"
            return Launch(argv=["bash", "run.sh"], files={**files, "run.sh": script})
        return Launch(argv=command, files=files)
