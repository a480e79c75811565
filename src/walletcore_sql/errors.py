"""The adapter's errors: the one map of driver exceptions to the port's, and the schema checks.

Every place the SQL storage turns a driver's exception into the port's error goes through
`port_error` (SQLAlchemy's engine and its pysqlite and aiosqlite connections,
`storage_errors`; the units sent straight to asyncpg or pysqlite, `walletcore_sql.direct`;
migrations; nonce leases):
- `StorageUnavailable` (503, "retry with backoff") when a retry may fix it (`transient`):
  the server refused, lost or timed out the connection, or is shutting down or out of
  resources; no pooled connection came in time; SQLite stayed locked or busy (or its disk
  failed). On the units' own connections (`walletcore_sql.direct`) it also means the
  session may be broken: the connection is dropped, never pooled again.
- `StorageError` (500, "Internal error") for any other exception of SQLAlchemy's or a
  driver's (asyncpg, sqlite3): a constraint, a bad value, a bug.
- None for anything else (the code's own errors, a cancellation): it passes as it is.
The driver's exception stays chained to the port's (`raise ... from exc`) for the log; the
message a client sees is the port's safe one.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys

from sqlalchemy import exc as sa_exc

from walletcore.domain.errors import StorageError, StorageUnavailable
from walletcore.secretfiles import ConfigurationError


class SchemaError(ConfigurationError):
    """The database schema does not match this code; `walletcore serve` refuses to start."""


class SchemaNotMigrated(SchemaError):
    """An empty or unmigrated database."""


class SchemaOutdated(SchemaError):
    """A known revision older than this code's: `walletcore db upgrade` brings it up."""


class SchemaTooNew(SchemaError):
    """A revision this code does not know: the database was migrated by a newer walletcore."""


#: Failures a retry may fix: the server is down, restarting or overloaded.
_TRANSIENT: tuple[type[BaseException], ...] = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,  # no pooled connection in time
    OSError,  # connection refused or reset before the driver wrapped it
    asyncio.TimeoutError,
    sqlite3.OperationalError,  # locked, busy, disk I/O: raised by BEGIN, sent unwrapped
)
#: `_TRANSIENT` and asyncpg's own (raised on the units' connections, `walletcore_sql.direct`),
#: once asyncpg is imported: a process on SQLite never imports it.
_WITH_ASYNCPG: tuple[type[BaseException], ...] | None = None


def _transient_types() -> tuple[type[BaseException], ...]:
    global _WITH_ASYNCPG
    if _WITH_ASYNCPG is None:
        asyncpg = sys.modules.get("asyncpg")
        if asyncpg is None:  # none of its exceptions can have been raised
            return _TRANSIENT
        _WITH_ASYNCPG = (
            *_TRANSIENT,
            asyncpg.PostgresConnectionError,
            asyncpg.InterfaceError,
            asyncpg.InternalClientError,  # the protocol lost its state (a dropped session)
            asyncpg.exceptions.OperatorInterventionError,  # admin shutdown, crash shutdown
            asyncpg.exceptions.InsufficientResourcesError,
        )
    return _WITH_ASYNCPG


def transient(exc: BaseException) -> bool:
    """A retry may fix it (module rules): `port_error` makes it `StorageUnavailable`."""
    if isinstance(exc, sa_exc.DBAPIError):
        return exc.connection_invalidated or isinstance(exc, _TRANSIENT)
    return isinstance(exc, _transient_types())


def port_error(exc: BaseException) -> StorageError | StorageUnavailable | None:
    """The port's error for a driver's exception (module rules); None when `exc` is not a
    driver's or SQLAlchemy's (it passes as it is). The caller raises it `from exc`."""
    if transient(exc):
        return StorageUnavailable()
    if isinstance(exc, (sa_exc.SQLAlchemyError, sqlite3.Error)) or _from_asyncpg(exc):
        return StorageError()
    return None


def _from_asyncpg(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("asyncpg.")


def sqlite_locked(exc: BaseException) -> bool:
    """SQLite refused a lock another connection holds (SQLITE_BUSY, SQLITE_LOCKED): what
    a writer tries again until its busy timeout (`SqliteInline`), raw or wrapped."""
    reason = str(getattr(exc, "orig", None) or exc)
    return "locked" in reason or "busy" in reason


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a PostgreSQL error, raw or wrapped by SQLAlchemy (asyncpg keeps it
    on its own exception, which the DBAPI adapter's chains)."""
    orig = getattr(exc, "orig", None)
    for candidate in (exc, orig, getattr(orig, "__cause__", None)):
        code = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if code:
            return str(code)
    return None


class storage_errors:
    """Re-raise a driver's exception as the port's (`port_error`): `with storage_errors():
    ...`; anything else passes as it is.

    A class rather than a `contextlib.contextmanager` generator: it guards each statement
    and each unit's end, where the generator's own calls showed (docs/performance.md,
    "Fewer Python calls per request").
    """

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        if exc is None:
            return
        error = port_error(exc)
        if error is not None:
            raise error from exc
