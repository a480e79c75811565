"""Databases for the contract suites of `walletcore.testing.contracts`: a migrated SQLite
file per test (copied from one migrated once), and a PostgreSQL schema of this session's
own (created and migrated once, emptied before each test, dropped at the end).

PostgreSQL must be reachable: its tests fail rather than skip when it is not.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from walletcore_sql import migrate
from walletcore_sql.engine import sqlite_url
from walletcore_sql.testing import create_schema, drop_schema, off_loop, pg_test_url


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


@pytest.fixture
def sqlite_file(sqlite_template: Path, tmp_path: Path) -> str:
    """The URL of a migrated SQLite file of this test's own."""
    path = tmp_path / "walletcore.db"
    shutil.copyfile(sqlite_template, path)
    return sqlite_url(path)
