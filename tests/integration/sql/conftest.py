"""Fixtures of the SQL adapter's own tests: fresh databases (SQLite file, PostgreSQL schema)
and the trading service wired to a storage, a clock-driven price source and a venue.

PostgreSQL must be reachable: its tests fail rather than skip when it is not.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sql_helpers import Db, trading_service

from walletcore.ports import Clock, Storage, TradeVenue
from walletcore.services.trading import TradingService
from walletcore.settings import Settings
from walletcore_sql.engine import sqlite_url
from walletcore_sql.storage import SqlStorage
from walletcore_sql.testing import create_schema_async, drop_schema_async, pg_test_url


@pytest.fixture
async def pg_database() -> AsyncIterator[Db]:
    """A schema of its own (unmigrated), dropped after the test."""
    url = pg_test_url()
    schema = await create_schema_async(url)
    try:
        yield Db("postgres", url, schema)
    finally:
        await drop_schema_async(url, schema)


@pytest.fixture
async def pg_storage(pg_database: Db) -> AsyncIterator[SqlStorage]:
    """A started `SqlStorage` on a migrated schema of its own, closed after the test."""
    opened = pg_database.storage(migrate=True)
    await opened.start()
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture
def sqlite_database(tmp_path: Path) -> Db:
    return Db("sqlite", sqlite_url(tmp_path / "db" / "walletcore.db"))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest) -> Db:
    """An empty, unmigrated database of each kind."""
    name = "sqlite_database" if request.param == "sqlite" else "pg_database"
    db: Db = request.getfixturevalue(name)
    return db


@pytest.fixture
def make_trading(settings: Settings) -> object:
    """`make_trading(storage, clock, venue)` -> a TradingService."""

    def make(storage: Storage, clock: Clock, venue: TradeVenue) -> TradingService:
        return trading_service(storage, clock, venue, settings)

    return make
