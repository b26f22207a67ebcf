"""Bootstrap of a SPARK task's PySpark application (spark-submit, client deploy mode).

usage: spark-submit ... boot.py MAIN_FILE [ARGS...]

Runs MAIN_FILE as ``__main__`` (its directory first on ``sys.path``, ``sys.argv`` without this file, as if
spark-submit had run it) and, as soon as a SparkContext exists, prints
``[porpoise] application <Spark application id> <Spark UI link>``: the worker reads that line into the task
instance's app_id / app_link. Taken from the SparkContext itself (not parsed from Spark's own log lines),
so it holds whatever the log level or format."""

import os
import runpy
import sys

from pyspark import SparkContext

_init = SparkContext.__init__


def _init_and_announce(self, *args, **kwargs):  # type: ignore[no-untyped-def]
    _init(self, *args, **kwargs)
    print(f"[porpoise] application {self.applicationId} {self.uiWebUrl or ''}".rstrip(), flush=True)


def main() -> None:
    SparkContext.__init__ = _init_and_announce  # type: ignore[method-assign]
    main_file = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(main_file))
    runpy.run_path(main_file, run_name="__main__")


if __name__ == "__main__":
    main()
