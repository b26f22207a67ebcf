"""Runs a JVM job (spark-submit of a jar, ``hadoop jar``) and announces the application it started.

usage: python -m engine.tasks.app_watch HOST [--app-id ID] -- COMMAND [ARGS...]

The command's standard output and error pass through unchanged (to the task's log). The application's id
comes from its log lines — Spark's standalone master ("Connected to Spark cluster with app ID app-..."), YARN
("Submitted application application_..."), a standalone cluster's cluster deploy mode ("Driver successfully
submitted as driver-..."), Hadoop's local runner ("Running job: job_local...") — or, where
the log never names it (Spark's local mode), from the driver's own UI (``/api/v1/applications``); its link
from "started service 'SparkUI' on port N" (on HOST) or YARN's "The url to track the job: ...". Once the id
is known this prints ``[porpoise] application <id> <link>``, the line the worker records into the task
instance's app_id / app_link (as the PySpark bootstrap does from the SparkContext).

The watcher and the command share the task's process group, so a kill ends both; the watcher exits with the
command's exit code (128 + signal when a signal ended it).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

MARKER = "[porpoise] application"
_ID_PATTERNS = (
    re.compile(r"Connected to Spark cluster with app ID (\S+)"),
    re.compile(r"Submitted application (application_\d+_\d+)"),
    re.compile(r"Running job: (job_\S+)"),
    # a standalone cluster's cluster deploy mode: the driver's submission id (legacy and REST gateways)
    re.compile(r"Driver successfully submitted as (driver-\S+)"),
    re.compile(r"Submission successfully created as (driver-\S+)"),
)
_UI_PORT = re.compile(r"started service 'SparkUI' on port (\d+)")
_TRACKING = re.compile(r"The url to track the job: (\S+)")


class Watch:
    """What the log said so far; :meth:`feed` answers the marker line to print, if one is due."""

    def __init__(self, host: str, app_id: str = "") -> None:
        self.host = host
        self.app_id = app_id
        self.link = ""
        #: the driver's UI port (Spark), to ask it for the application's id when no log line names it
        self.ui_port = 0
        self.announced = ("", "")

    def learn(self, app_id: str) -> str | None:
        """The id the driver's UI answered: the marker to print, unless a log line named one first."""
        if not self.app_id:
            self.app_id = app_id
        return self.feed("")

    def feed(self, line: str) -> str | None:
        for pattern in _ID_PATTERNS:
            if not self.app_id and (m := pattern.search(line)):
                self.app_id = m.group(1)
        if not self.link:
            if m := _UI_PORT.search(line):
                self.ui_port = int(m.group(1))
                self.link = f"http://{self.host}:{self.ui_port}"
            elif (m := _TRACKING.search(line)) and not self.app_id.startswith("job_local"):
                # Hadoop's local runner names a tracking URL no server answers
                self.link = m.group(1)
        if self.app_id and (self.app_id, self.link) != self.announced:
            self.announced = (self.app_id, self.link)
            return f"{MARKER} {self.app_id} {self.link}".rstrip()
        return None


def ask_ui(port: int, deadline: float) -> str | None:
    """The first application id the Spark UI on ``port`` (this machine) lists, retried until ``deadline``."""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/applications", timeout=2) as resp:
                apps = json.loads(resp.read())
            if apps and isinstance(apps, list) and apps[0].get("id"):
                return str(apps[0]["id"])
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    return None


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("usage: app_watch HOST [--app-id ID] -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    split = argv.index("--")
    head, command = argv[:split], argv[split + 1 :]
    host = head[0] if head else "localhost"
    app_id = head[head.index("--app-id") + 1] if "--app-id" in head else ""
    watch = Watch(host, app_id)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # a SIGTERM to the watcher alone (not the group) still ends the command
    signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    assert proc.stdout is not None
    out, lock = sys.stdout.buffer, threading.Lock()

    def emit(data: bytes, marker: str | None) -> None:
        with lock:
            out.write(data)
            if marker:
                out.write(marker.encode() + b"\n")
            out.flush()

    def from_ui(port: int) -> None:
        found = ask_ui(port, time.monotonic() + 60)
        if found:
            with lock:
                marker = watch.learn(found)
            if marker:
                emit(b"", marker)

    asking: threading.Thread | None = None
    for raw in proc.stdout:
        with lock:
            marker = watch.feed(raw.decode(errors="replace"))
        emit(raw, marker)
        if watch.ui_port and not watch.app_id and asking is None:
            asking = threading.Thread(target=from_ui, args=(watch.ui_port,), daemon=True)
            asking.start()
    code = proc.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
