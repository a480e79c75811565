"""The adapter's errors: driver exceptions become port-level ones, schema checks fail clearly."""

from __future__ import annotations

import asyncio
import sqlite3

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


#: Driver-level failures a retry may fix: the server is down, restarting or overloaded.
_TRANSIENT: tuple[type[BaseException], ...] = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,  # no pooled connection in time
    OSError,  # connection refused or reset before the driver wrapped it
    asyncio.TimeoutError,
    sqlite3.OperationalError,  # locked, busy, disk I/O: raised by BEGIN, sent unwrapped
)


class storage_errors:
    """Re-raise a driver's exception as `StorageUnavailable` (503) or `StorageError` (500):
    `with storage_errors(): ...`.

    The original stays chained for the log; the message shown to clients is the safe one.
    A class rather than a `contextlib.contextmanager` generator: it guards each statement
    and each unit's end, where the generator's own calls showed (docs/performance.md,
    item 31).
    """

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        if exc is None:
            return
        if isinstance(exc, sa_exc.DBAPIError):
            if exc.connection_invalidated or isinstance(exc, _TRANSIENT):
                raise StorageUnavailable() from exc
            raise StorageError() from exc
        if isinstance(exc, _TRANSIENT):
            raise StorageUnavailable() from exc
        if isinstance(exc, (sa_exc.SQLAlchemyError, sqlite3.Error)):
            raise StorageError() from exc
        # anything else passes as it is
