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


#: SQLSTATE classes of server-side errors about the server's condition, not about what was sent:
#: 40 transaction rollback (serialization failure, deadlock), 53 insufficient resources (disk full,
#: out of memory, too many connections), 57 operator intervention (statement timeout, shutdown),
#: 58 system error (I/O), XX internal error
_SERVER_CONDITION = frozenset({"40", "53", "57", "58", "XX"})


def transient(exc: BaseException) -> bool:
    """Whether the same statement may succeed later: the connection or the server went away, or the
    server failed for a reason of its own (:data:`_SERVER_CONDITION`). Not transient: an error about
    the data sent (a value too long, a constraint, a bad cast), and asyncpg's client-side
    ``DataError`` (an argument it cannot encode), which is an ``InterfaceError`` but also a
    ``ValueError``: sending the same again fails the same way."""
    if isinstance(exc, asyncpg.PostgresError):
        return str(getattr(exc, "sqlstate", "") or "")[:2] in _SERVER_CONDITION or isinstance(exc, CONNECTION_LOST)
    return isinstance(exc, CONNECTION_LOST) and not isinstance(exc, ValueError)
