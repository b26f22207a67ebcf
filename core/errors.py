"""Porpoise's error tree. Lower-library errors are translated at the boundary (``raise ... from exc``).

::

    PorpoiseError
    ├── ConfigError              bad configuration key or value (names the key, value and origin)
    ├── InfraError               private etcd / PostgreSQL could not be prepared, started or stopped
    │   ├── BinaryNotFound       a server binary is missing
    │   ├── PortInUse            a configured port is taken by another process
    │   └── DataDirCorrupt       a data directory exists but is not usable
    ├── StorageError             the metadata database refused or failed a call
    │   └── SchemaError          schema.sql or a migration could not be applied
    │       └── SchemaMismatch   the database's schema version is not the one this code knows
    └── RegistryError            etcd (registry.errors: RegistryUnavailable, LeaseLost, NotLockOwner, ...)
"""

from __future__ import annotations


class PorpoiseError(Exception):
    """Base of every error Porpoise raises on purpose; its message is meant for the user."""


class ConfigError(PorpoiseError):
    """A configuration key or value is invalid."""


class InfraError(PorpoiseError):
    """Private infrastructure (etcd, PostgreSQL) could not be prepared, started or stopped."""


class BinaryNotFound(InfraError):
    """A required server binary is not installed."""


class PortInUse(InfraError):
    """A configured port is already taken."""


class DataDirCorrupt(InfraError):
    """A data directory exists but cannot be used."""


class StorageError(PorpoiseError):
    """The metadata database refused or failed a call."""


class SchemaError(StorageError):
    """schema.sql or a migration could not be applied."""


class SchemaMismatch(SchemaError):
    """The database holds no Porpoise schema, an older one (run ``porpoise db upgrade``) or a newer one
    (this code is older than the database). Nodes refuse to start: restarting will not help."""


class RegistryError(PorpoiseError):
    """Base of the registry (etcd) errors; the subclasses live in registry.errors."""
