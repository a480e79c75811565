"""Fixtures of the kill -9 tests: an empty store of each kind (a SQLite file, a PostgreSQL
schema of its own, dropped after), migrated by the test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from crash_support import Store

from walletcore_sql.engine import sqlite_url
from walletcore_sql.testing import create_schema_async, drop_schema_async, pg_test_url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        yield Store("sqlite", sqlite_url(tmp_path / "db" / "walletcore.db"))
        return
    url = pg_test_url()
    schema = await create_schema_async(url)
    try:
        yield Store("postgres", url, schema)
    finally:
        await drop_schema_async(url, schema)
