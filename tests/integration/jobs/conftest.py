"""Fixtures of the job tests: a migrated PostgreSQL schema of their own per test (with
procrastinate's tables created there by the first worker), and SQLite files."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from jobs_support import PgSchema

from walletcore_sql import migrate
from walletcore_sql.testing import create_schema_async, drop_schema_async, pg_test_url


@pytest.fixture
async def pg_schema() -> AsyncIterator[PgSchema]:
    url = pg_test_url()
    schema = await create_schema_async(url)
    try:
        await migrate.upgrade_async(url, schema=schema)
        yield PgSchema(url, schema)
    finally:
        await drop_schema_async(url, schema)
