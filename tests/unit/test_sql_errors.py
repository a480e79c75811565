"""`storage_errors`: a driver's exception leaves as the port's 503 or 500, chained to the
original for the log; anything else passes as it is."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from sqlalchemy import exc as sa_exc

from walletcore.domain.errors import StorageError, StorageUnavailable
from walletcore_sql.errors import storage_errors


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
