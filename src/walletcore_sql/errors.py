"""The adapter's errors: driver exceptions become port-level ones, schema checks fail clearly."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

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


@contextmanager
def storage_errors() -> Iterator[None]:
    """Re-raise a driver's exception as `StorageUnavailable` (503) or `StorageError` (500).

    The original stays chained for the log; the message shown to clients is the safe one.
    """
    try:
        yield
    except sa_exc.DBAPIError as exc:
        if exc.connection_invalidated or isinstance(exc, _TRANSIENT):
            raise StorageUnavailable() from exc
        raise StorageError() from exc
    except _TRANSIENT as exc:
        raise StorageUnavailable() from exc
    except (sa_exc.SQLAlchemyError, sqlite3.Error) as exc:
        raise StorageError() from exc
