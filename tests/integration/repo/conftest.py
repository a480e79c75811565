"""The `repo` fixture: one Repo contract, every adapter (memory, the sandbox's JSON file,
SQLite, PostgreSQL).

PostgreSQL runs in a schema unique to this test session (created, migrated once, dropped
at the end) and is emptied before each test; it must be reachable: its tests fail rather
than skip when it is not. SQLite copies a once-migrated file per test.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from walletcore.ports import Repo
from walletcore.sandbox.filerepo import FileRepo
from walletcore.sandbox.repo import InMemoryRepo
from walletcore_sql import migrate
from walletcore_sql.engine import sqlite_url
from walletcore_sql.repo import SqlRepo
from walletcore_sql.testing import (
    create_schema,
    drop_schema,
    off_loop,
    pg_test_url,
    truncate_async,
)


@pytest.fixture(scope="session")
def pg_url() -> str:
    return pg_test_url()


@pytest.fixture(scope="session")
def pg_schema(pg_url: str) -> Iterator[str]:
    """A migrated schema of its own for this session, dropped afterwards."""
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


def _sqlite_copy(template: Path, directory: Path) -> str:
    path = directory / "walletcore.db"
    shutil.copyfile(template, path)
    return sqlite_url(path)


@pytest.fixture(
    params=["memory", "file", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def repo(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Repo]:
    kind = request.param
    if kind == "memory":
        yield InMemoryRepo()
        return
    if kind == "file":
        yield FileRepo(tmp_path / "home" / "sandbox-repo.json", nonce_wait=5.0)
        return
    if kind == "sqlite":
        sql = SqlRepo(
            _sqlite_copy(request.getfixturevalue("sqlite_template"), tmp_path), migrate=False
        )
    else:
        url, schema = request.getfixturevalue("pg_url"), request.getfixturevalue("pg_schema")
        await truncate_async(url, schema)
        sql = SqlRepo(url, migrate=False, schema=schema)
    await sql.start()
    try:
        yield sql
    finally:
        await sql.aclose()
