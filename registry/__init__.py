"""Registry on etcd: sessions, heartbeats, membership, command slots and the failover lock."""

from registry.client import EtcdAccess, EtcdClient
from registry.errors import DuplicateNode, LeaseLost, LockTimeout, NotLockOwner, RegistryUnavailable
from registry.heartbeat import Heartbeat, HeartbeatSource, LoadLimits, Registration, ServerStatus, TaskCounts
from registry.keys import MASTER, WORKER, NodeId, failover_lock_key, node_key
from registry.lock import Lock
from registry.membership import ChangeKind, MembershipView, NodeChange, NodeInfo
from registry.node import RegistryNode
from registry.session import Session, SessionState
from registry.slots import NO_SLOT, Slot, SlotTracker, compute_slot

__all__ = [
    "MASTER",
    "NO_SLOT",
    "WORKER",
    "ChangeKind",
    "DuplicateNode",
    "EtcdAccess",
    "EtcdClient",
    "Heartbeat",
    "HeartbeatSource",
    "LeaseLost",
    "LoadLimits",
    "Lock",
    "LockTimeout",
    "MembershipView",
    "NodeChange",
    "NodeId",
    "NodeInfo",
    "NotLockOwner",
    "Registration",
    "RegistryNode",
    "RegistryUnavailable",
    "ServerStatus",
    "Session",
    "SessionState",
    "Slot",
    "SlotTracker",
    "TaskCounts",
    "compute_slot",
    "failover_lock_key",
    "node_key",
]
