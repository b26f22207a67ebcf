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
    ├── RegistryError            etcd (registry.errors: RegistryUnavailable, LeaseLost, NotLockOwner, ...)
    └── InvalidInput             input that cannot be used (also a ValueError): the message says why
        ├── FieldError           ... at one field (``field``: ``tasks[2].upstream``; ``reason``): DefinitionError
        │                        (workflows), ParamError (task parameters), BackfillError (backfill requests)
        └── CronError, PluginError, ExpressionError, PlaceholderError, ExportError, ...

Errors of the outside world the user is shown as they are (the SQL server's, an alert receiver's) are
PorpoiseErrors too: SqlError, SendError; the API's answers are ApiError.
"""

from __future__ import annotations


class PorpoiseError(Exception):
    """Base of every error Porpoise raises on purpose; its message is meant for the user."""


class InvalidInput(PorpoiseError, ValueError):
    """Input (a definition, a parameter, an expression, a schedule) that cannot be used; the message says why."""


class FieldError(InvalidInput):
    """Invalid input at one field: ``field`` locates it for the user (``tasks[2].upstream``), ``reason`` says why."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


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
