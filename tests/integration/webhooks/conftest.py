"""The webhook tests' storages: in memory, a migrated SQLite file per test, and a
PostgreSQL schema of this session's own (emptied before each test)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from walletcore.ports import Storage
from walletcore.testing import InMemoryStorage
from walletcore_sql import migrate
from walletcore_sql.engine import sqlite_url
from walletcore_sql.storage import SqlStorage
from walletcore_sql.testing import create_schema, drop_schema, off_loop, pg_test_url, truncate_async


@pytest.fixture(scope="session")
def pg_url() -> str:
    return pg_test_url()


@pytest.fixture(scope="session")
def pg_schema(pg_url: str) -> Iterator[str]:
    schema = off_loop(lambda: create_schema(pg_url))
    try:
        off_loop(lambda: migrate.upgrade(pg_url, schema=schema))
        yield schema
    finally:
        off_loop(lambda: drop_schema(pg_url, schema))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "walletcore.db"
    off_loop(lambda: migrate.upgrade(sqlite_url(path)))
    return path


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def storages(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[list[Storage]]:
    """Two storages on one database (two processes' worth; in memory, one storage twice)."""
    if request.param == "memory":
        memory = InMemoryStorage()
        yield [memory, memory]
        return
    if request.param == "sqlite":
        path = tmp_path / "walletcore.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        url, schema = sqlite_url(path), None
    else:
        url = request.getfixturevalue("pg_url")
        schema = request.getfixturevalue("pg_schema")
        await truncate_async(url, schema)
    opened = [SqlStorage(url, migrate=False, schema=schema) for _ in range(2)]
    for storage in opened:
        await storage.start()
    yield list(opened)
    for storage in opened:
        await storage.aclose()


@pytest.fixture
def storage(storages: list[Storage]) -> Storage:
    return storages[0]
