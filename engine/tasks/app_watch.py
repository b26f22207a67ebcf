"""Runs a JVM job (spark-submit of a jar, ``hadoop jar``) and announces the application it started.

usage: python -m engine.tasks.app_watch HOST -- COMMAND [ARGS...]

The command's standard output and error pass through unchanged (to the task's log); when its log lines name
the application — Spark's standalone master ("Connected to Spark cluster with app ID app-..."), YARN
("Submitted application application_..."), Hadoop's local runner ("Running job: job_local...") or a fixed
``spark.app.id`` given with ``--app-id`` — and its UI ("started service 'SparkUI' on port N" on HOST, YARN's
"The url to track the job: ..."), this prints ``[porpoise] application <id> <link>``, the line the worker
records into the task instance's app_id / app_link (as the PySpark bootstrap does from the SparkContext).

The watcher and the command share the task's process group, so a kill ends both; the watcher exits with the
command's exit code (128 + signal when a signal ended it).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys

MARKER = "[porpoise] application"
_ID_PATTERNS = (
    re.compile(r"Connected to Spark cluster with app ID (\S+)"),
    re.compile(r"Submitted application (application_\d+_\d+)"),
    re.compile(r"Running job: (job_\S+)"),
)
_UI_PORT = re.compile(r"started service 'SparkUI' on port (\d+)")
_TRACKING = re.compile(r"The url to track the job: (\S+)")


class Watch:
    """What the log said so far; :meth:`feed` answers the marker line to print, if one is due."""

    def __init__(self, host: str, app_id: str = "") -> None:
        self.host = host
        self.app_id = app_id
        self.link = ""
        self.announced = ("", "")

    def feed(self, line: str) -> str | None:
        for pattern in _ID_PATTERNS:
            if not self.app_id and (m := pattern.search(line)):
                self.app_id = m.group(1)
        if not self.link:
            if m := _UI_PORT.search(line):
                self.link = f"http://{self.host}:{m.group(1)}"
            elif (m := _TRACKING.search(line)) and not self.app_id.startswith("job_local"):
                # Hadoop's local runner names a tracking URL no server answers
                self.link = m.group(1)
        if self.app_id and (self.app_id, self.link) != self.announced:
            self.announced = (self.app_id, self.link)
            return f"{MARKER} {self.app_id} {self.link}".rstrip()
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
    out = sys.stdout.buffer
    for raw in proc.stdout:
        out.write(raw)
        marker = watch.feed(raw.decode(errors="replace"))
        if marker:
            out.write(marker.encode() + b"\n")
        out.flush()
    code = proc.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
