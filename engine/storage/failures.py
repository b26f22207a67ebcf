"""Which exceptions of a metadata-database call mean "the database or the connection failed" —
one definition for every loop that rides through an outage.

asyncpg raises more than ``PostgresError`` and ``InterfaceError`` when PostgreSQL goes away:
``InternalClientError`` (e.g. "cannot switch to state 12; another operation (2) is in progress"
when the server's shutdown notice arrives between a statement's prepare and its type
introspection) derives from ``Exception`` only, and a server shutting down answers with
``AdminShutdownError``, an ``OperatorInterventionError`` rather than a connection error.
"""

from __future__ import annotations

import asyncpg
from asyncpg.exceptions import OperatorInterventionError

#: the connection or the server went away: the same call on a fresh connection may succeed
CONNECTION_LOST: tuple[type[Exception], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    OperatorInterventionError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)

#: any failure of a database call, server-side errors included: what a polling loop logs and retries
DB_FAILURES: tuple[type[Exception], ...] = (*CONNECTION_LOST, asyncpg.PostgresError)
