"""The Spark services ``porpoise standalone --spark MODES`` starts beside the nodes (``make run SPARK=...``).

- ``local`` (default): nothing; SPARK tasks run spark-submit with their own ``local[...]`` master.
- ``cluster``: a Spark standalone cluster on loopback (a Spark master and two Spark workers, one core and
  512 MB each); the example's Spark step runs on it (``spark_master=spark://127.0.0.1:PORT``).
- ``connect``: a Spark Connect server (on the cluster when ``cluster`` is given too, else ``local[2]``);
  the worker gets ``worker.spark_connect_url``, and the example's Spark step runs through it
  (``spark_master=connect``).

Modes combine with commas (``cluster,connect``). The processes are recorded in the run directory's
state like the nodes, so ``porpoise cluster stop`` also stops them; Ctrl-C stops them first.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from core import logs
from engine.infra.spark import SparkCluster, SparkConnectServer
from engine.infra.stack import Stack

log = logs.get(__name__)

MODES = ("local", "cluster", "connect")


def parse_modes(text: str) -> frozenset[str]:
    """``--spark`` value: a comma list of MODES (argparse type: a bad one is a usage error naming it)."""
    modes = frozenset(m.strip() for m in text.split(",") if m.strip())
    unknown = sorted(modes - set(MODES))
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"expected a comma list of {', '.join(MODES)}, got {text!r}")
    return modes


@dataclass
class SparkServices:
    cluster: SparkCluster | None = None
    connect: SparkConnectServer | None = None
    #: extra `--set` items for the worker node
    worker_overrides: list[str] = field(default_factory=list)

    @property
    def example_master(self) -> str:
        """The example pipeline's spark_master parameter."""
        if self.connect is not None:
            return "connect"
        if self.cluster is not None:
            return self.cluster.master_url
        return "local[2]"

    def banner(self) -> str:
        lines = ""
        if self.cluster is not None:
            lines += f"  Spark       {self.cluster.master_url} (status {self.cluster.ui_url}/json/)\n"
        if self.connect is not None:
            lines += f"  Connect     {self.connect.url} (Spark UI {self.connect.ui_url})\n"
        return lines

    def stop(self) -> None:
        if self.connect is not None:
            self.connect.stop()
        if self.cluster is not None:
            self.cluster.stop()


def start_spark(stack: Stack, modes: frozenset[str]) -> SparkServices:
    """Start what ``modes`` asks for, recorded in the stack's state; stops what it started on failure."""
    services = SparkServices()
    spark_dir = stack.run_dir / "spark"
    try:
        if "cluster" in modes:
            # the daemons run as the default tenant: the executors run the applications' code, which must not
            # run as the launcher's user (root) any more than the tasks that submit it
            services.cluster = SparkCluster(spark_dir, workers=2, worker_cores=1, worker_memory="512m",
                                            user=stack.tenant, python=stack.python)  # fmt: skip
            for record in services.cluster.start(stack.cfg.standalone.start_timeout + 150):
                stack.remember(record)
            log.info("spark cluster ready", master=services.cluster.master_url, ui=services.cluster.ui_url)
        if "connect" in modes:
            master = services.cluster.master_url if services.cluster is not None else "local[2]"
            services.connect = SparkConnectServer(spark_dir, master=master, user=stack.tenant, python=stack.python)
            stack.remember(services.connect.start(stack.cfg.standalone.start_timeout + 150))
            services.worker_overrides.append(f"worker.spark_connect_url={services.connect.url}")
            log.info("spark connect server ready", url=services.connect.url, master=master)
    except BaseException:
        services.stop()
        raise
    return services
