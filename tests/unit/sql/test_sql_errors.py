"""The one map of driver exceptions (`walletcore_sql.errors`): a driver's exception leaves as
the port's 503 or 500, chained to the original for the log, whichever path raised it
(SQLAlchemy's, or the units' straight on asyncpg and pysqlite); anything else passes as it
is."""

from __future__ import annotations

import asyncio
import sqlite3

import asyncpg
import pytest
from sqlalchemy import exc as sa_exc

from walletcore.domain.errors import StorageError, StorageUnavailable
from walletcore_sql.errors import port_error, sqlite_locked, sqlstate, storage_errors


def dbapi(kind: type[sa_exc.DBAPIError], *, invalidated: bool = False) -> sa_exc.DBAPIError:
    return kind("SELECT 1", {}, Exception("driver said no"), connection_invalidated=invalidated)


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (dbapi(sa_exc.OperationalError), StorageUnavailable),
        (dbapi(sa_exc.InterfaceError), StorageUnavailable),
        (dbapi(sa_exc.IntegrityError), StorageError),
        (dbapi(sa_exc.IntegrityError, invalidated=True), StorageUnavailable),
        (dbapi(sa_exc.ProgrammingError), StorageError),
        (sa_exc.TimeoutError("no pooled connection"), StorageUnavailable),
        (ConnectionRefusedError(111, "refused"), StorageUnavailable),
        (TimeoutError(), StorageUnavailable),
        (sqlite3.OperationalError("database is locked"), StorageUnavailable),
        (sqlite3.IntegrityError("UNIQUE constraint failed"), StorageError),
        (sa_exc.NoResultFound("none"), StorageError),
        # asyncpg's own, as the units straight on the driver meet them
        (asyncpg.exceptions.UniqueViolationError("duplicate key"), StorageError),
        (asyncpg.exceptions.DeadlockDetectedError("deadlock"), StorageError),
        (asyncpg.exceptions.ConnectionDoesNotExistError("closed"), StorageUnavailable),
        (asyncpg.exceptions.AdminShutdownError("terminating"), StorageUnavailable),
        (asyncpg.exceptions.TooManyConnectionsError("too many clients"), StorageUnavailable),
        (asyncpg.InterfaceError("connection is closed"), StorageUnavailable),
        (asyncpg.InternalClientError("protocol state lost"), StorageUnavailable),
    ],
    ids=lambda value: type(value).__name__,
)
def test_driver_errors_leave_as_the_ports(raised: BaseException, expected: type) -> None:
    with pytest.raises(expected) as caught, storage_errors():
        raise raised
    assert type(caught.value) is expected
    assert caught.value.__cause__ is raised
    assert "driver said no" not in str(caught.value)  # the safe message, never the driver's


@pytest.mark.parametrize(
    "raised", [ValueError("ours"), KeyError("k"), asyncio.CancelledError(), KeyboardInterrupt()]
)
def test_anything_else_passes_as_it_is(raised: BaseException) -> None:
    with pytest.raises(type(raised)) as caught, storage_errors():
        raise raised
    assert caught.value is raised


def test_nothing_raised_nothing_changed() -> None:
    with storage_errors():
        value = 1
    assert value == 1


async def test_it_guards_an_await() -> None:
    async def fails() -> None:
        await asyncio.sleep(0)
        raise dbapi(sa_exc.OperationalError)

    with pytest.raises(StorageUnavailable), storage_errors():
        await fails()


def test_the_map_itself_names_the_ports_error_or_none() -> None:
    assert isinstance(port_error(asyncpg.exceptions.UniqueViolationError("x")), StorageError)
    assert isinstance(port_error(ConnectionResetError()), StorageUnavailable)
    assert port_error(ValueError("ours")) is None


def test_sqlite_lock_refusals_are_told_apart_raw_or_wrapped() -> None:
    locked = sqlite3.OperationalError("database is locked")
    assert sqlite_locked(locked)
    assert sqlite_locked(sa_exc.OperationalError("BEGIN IMMEDIATE", {}, locked))
    assert not sqlite_locked(sqlite3.OperationalError("disk I/O error"))


def test_the_sqlstate_of_a_postgresql_error_raw_or_wrapped() -> None:
    raw = asyncpg.exceptions.LockNotAvailableError("lock timeout")
    assert sqlstate(raw) == "55P03"
    assert sqlstate(sa_exc.OperationalError("SELECT 1", {}, raw)) == "55P03"
    assert sqlstate(ValueError("no state")) is None
