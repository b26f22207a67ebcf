"""Runs a SPARK task's PySpark application (or its Spark SQL) against a Spark Connect server.

usage: python -m engine.tasks.spark_connect_runner job.json

The worker runs this in the task's process group, as every task: started as a new process, or (without an
environment_config) forked from the worker's fork server, which has ``PRELOAD`` imported already and calls
``main`` in the forked process (engine/worker/forkserver.py): seconds of imports saved per task.

It opens the task's own Spark Connect session (its id is derived from the workflow instance, the task and
the attempt, so a later attempt knows the session of the one before), tags it, applies ``conf`` as
session settings, announces it (``[porpoise] application <session id>``, read by the worker), and runs
the main file as ``__main__`` with ``SPARK_REMOTE`` pointing at that session:
``SparkSession.builder.getOrCreate()`` in the task's code returns it. Output, exit code and
``${setValue(...)}`` OUT parameters are the task's as usual.

Kill: the worker's SIGTERM interrupts every operation of the session on the server (a fresh client,
not the one the main thread may be blocked in), then the runner exits. A SIGKILL (the reaper, after the
worker died) cannot do that, so an attempt first interrupts and releases the session of the attempt
before it: a failed-over task does not leave its first attempt's queries running on the server.
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import signal
import sys
import time
from types import FrameType
from typing import Any

#: exit code after a kill (128 + SIGTERM, what a shell reports)
KILLED = 128 + signal.SIGTERM
#: what the worker's fork server (engine/worker/forkserver.py) imports once, so that a task forked from it
#: starts with the Spark Connect client loaded: the modules ``main`` and a session's first queries import
PRELOAD = (
    "pyspark.sql.connect.session",
    "pyspark.sql.connect.client",
    "pyspark.sql.connect.dataframe",
    "pyspark.sql.connect.functions",
    "pyspark.sql.functions",
    "pandas",
    "pyarrow",
    "grpc",
    "grpc._channel",
)


def session_url(url: str, session_id: str) -> str:
    """``url`` (``sc://host:port`` with optional ``/;k=v`` parameters) bound to ``session_id``."""
    if "/;" in url:
        return f"{url};session_id={session_id}"
    return f"{url.rstrip('/')}/;session_id={session_id}"


def _client(url: str, session_id: str) -> Any:
    from pyspark.sql.connect.client import SparkConnectClient

    return SparkConnectClient(session_url(url, session_id))


def interrupt(url: str, session_id: str, release: bool) -> list[str]:
    """Interrupt every operation of a session (from a client of its own); optionally release it."""
    client = _client(url, session_id)
    try:
        ids = list(client.interrupt_all() or [])
        if release:
            with contextlib.suppress(Exception):  # interrupted already; the server expires it if this fails
                client.release_session()
        return ids
    finally:
        with contextlib.suppress(Exception):
            client.close()


def _interrupt_previous(url: str, previous: str) -> None:
    """The attempt before may have been SIGKILLed with its queries still running on the server."""
    try:
        stopped = interrupt(url, previous, release=True)
        print(f"[porpoise] previous attempt's session {previous}: {len(stopped)} operation(s) interrupted")
    except Exception as exc:  # a closed or unknown session: nothing is left running
        print(f"[porpoise] previous attempt's session {previous}: {type(exc).__name__}")


def main(argv: list[str]) -> int:
    with open(argv[1]) as fh:
        job = json.load(fh)
    url = job["url"]
    started = time.monotonic()
    if job.get("previous_session_id"):
        _interrupt_previous(url, job["previous_session_id"])
    session_id = job["session_id"]
    from pyspark.sql.connect.session import SparkSession

    spark = SparkSession.builder.remote(session_url(url, session_id)).create()

    def on_term(signum: int, _frame: FrameType | None) -> None:
        print("[porpoise] killed: interrupting the session's operations", flush=True)
        try:
            ids = interrupt(url, session_id, release=True)
            print(f"[porpoise] {len(ids)} operation(s) interrupted", flush=True)
        except Exception as exc:  # report and exit all the same
            print(f"[porpoise] interrupt failed: {type(exc).__name__}: {exc}", flush=True)
        sys.stdout.flush()
        os._exit(KILLED)

    signal.signal(signal.SIGTERM, on_term)
    os.environ["SPARK_REMOTE"] = session_url(url, session_id)
    spark.addTag(job["tag"])
    for key, value in job.get("conf", {}).items():
        try:
            spark.conf.set(key, value)
        except Exception as exc:  # a static setting cannot change per session: say so
            print(f"[porpoise] conf {key} not applied to the session: {type(exc).__name__}")
    where = url.split("/;")[0]  # without its parameters (a token)
    print(f"[porpoise] spark connect session {session_id} on {where} ({time.monotonic() - started:.2f}s)")
    print(f"[porpoise] application {session_id}", flush=True)
    main_file = job["main"]
    sys.argv = [main_file, *job.get("args", [])]
    sys.path.insert(0, os.path.dirname(os.path.abspath(main_file)))
    try:
        runpy.run_path(main_file, run_name="__main__")
    finally:
        sys.stdout.flush()
        if not spark.is_stopped:
            spark.stop()  # releases the session on the server
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
