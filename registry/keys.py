"""Key layout under the registry root (e.g. ``/porpoise``)::

<root>/nodes/master/<host:port>            master heartbeat, bound to its session lease
<root>/nodes/worker/<group>/<host:port>    worker heartbeat, bound to its session lease
<root>/lock/failover/<role>/<host:port>    failover lock of a dead node, bound to the holder's lease
<root>/lock/job/<name>                     a cluster-wide job one node runs at a time (retention)
"""

from __future__ import annotations

from dataclasses import dataclass

MASTER = "master"
WORKER = "worker"


@dataclass(frozen=True, order=True)
class NodeId:
    """Identity of a node in the registry."""

    role: str
    address: str  # host:port
    group: str = ""  # worker group; empty for masters

    def __str__(self) -> str:
        return f"{self.role}:{self.group + '/' if self.group else ''}{self.address}"


def nodes_prefix(root: str) -> str:
    return f"{root}/nodes/"


def node_key(root: str, node: NodeId) -> str:
    if node.role == MASTER:
        return f"{root}/nodes/master/{node.address}"
    return f"{root}/nodes/worker/{node.group}/{node.address}"


def parse_node_key(root: str, key: str) -> NodeId | None:
    """The node a key describes, or None for anything that is not a well-formed node key."""
    prefix = nodes_prefix(root)
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix) :].split("/")
    if parts[0] == MASTER and len(parts) == 2 and _is_address(parts[1]):
        return NodeId(MASTER, parts[1])
    if parts[0] == WORKER and len(parts) == 3 and parts[1] and _is_address(parts[2]):
        return NodeId(WORKER, parts[2], parts[1])
    return None


def failover_lock_key(root: str, node: NodeId) -> str:
    return f"{root}/lock/failover/{node.role}/{node.address}"


def job_lock_key(root: str, name: str) -> str:
    return f"{root}/lock/job/{name}"


def _is_address(text: str) -> bool:
    host, sep, port = text.rpartition(":")
    return bool(sep and host and port.isdigit() and 0 < int(port) < 65536)
