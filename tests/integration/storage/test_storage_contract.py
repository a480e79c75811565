"""The storage contract (`walletcore.testing.contracts.StorageContract`) on every adapter
of this repository: in memory, SQLite and PostgreSQL; the SQL storage both on its fast
paths and through SQLAlchemy alone (`SqlStorage(..., direct=False)`), so the fast paths are
checked against the plain one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from walletcore.testing import InMemoryStorage
from walletcore.testing.contracts import StorageContract
from walletcore_sql.storage import SqlStorage
from walletcore_sql.testing import truncate_async


class TestInMemoryStorage(StorageContract):
    @pytest.fixture
    def storage(self) -> InMemoryStorage:
        return InMemoryStorage()


class TestSqliteStorage(StorageContract):
    @pytest.fixture
    async def storage(self, sqlite_file: str) -> AsyncIterator[SqlStorage]:
        sql = SqlStorage(sqlite_file, migrate=False)
        await sql.start()
        yield sql
        await sql.aclose()


@pytest.mark.postgres
class TestPostgresStorage(StorageContract):
    @pytest.fixture
    async def storage(self, pg_url: str, pg_schema: str) -> AsyncIterator[SqlStorage]:
        await truncate_async(pg_url, pg_schema)
        sql = SqlStorage(pg_url, migrate=False, schema=pg_schema)
        await sql.start()
        yield sql
        await sql.aclose()


class TestSqliteStorageThroughSqlalchemy(StorageContract):
    @pytest.fixture
    async def storage(self, sqlite_file: str) -> AsyncIterator[SqlStorage]:
        sql = SqlStorage(sqlite_file, migrate=False, direct=False)
        await sql.start()
        yield sql
        await sql.aclose()


@pytest.mark.postgres
class TestPostgresStorageThroughSqlalchemy(StorageContract):
    @pytest.fixture
    async def storage(self, pg_url: str, pg_schema: str) -> AsyncIterator[SqlStorage]:
        await truncate_async(pg_url, pg_schema)
        sql = SqlStorage(pg_url, migrate=False, schema=pg_schema, direct=False)
        await sql.start()
        yield sql
        await sql.aclose()
