"""Registry errors. etcd3-py and aiohttp failures are translated into these at the client boundary.

::

    RegistryError (core.errors)
    ├── RegistryUnavailable   etcd could not be reached or did not answer in time
    ├── LeaseLost             the session's lease expired or was revoked
    ├── LockTimeout           a lock was not acquired within the caller's timeout
    ├── NotLockOwner          releasing a lock this session does not hold
    └── DuplicateNode         another live node holds this node's key (same advertised address)
"""

from __future__ import annotations

from core.errors import RegistryError


class RegistryUnavailable(RegistryError):
    """etcd could not be reached or did not answer in time."""


class LeaseLost(RegistryError):
    """The session's lease expired or was revoked."""


class LockTimeout(RegistryError):
    """A lock was not acquired within the timeout."""


class NotLockOwner(RegistryError):
    """The lock is not held by this session."""


class DuplicateNode(RegistryError):
    """Another live node holds this node's registry key (two nodes advertise the same address)."""
