"""Prices refreshed once for the deployment, served by every process from the store; the
in-process jobs on SQLite (`WALLETCORE_JOBS=inprocess`)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from jobs_support import (
    PRICE,
    CountingFeed,
    CountingVenue,
    executing_trades,
    job_container,
    settle_entries,
    statuses,
)

from walletcore.clock import ManualClock
from walletcore.container import start, stop
from walletcore.domain.assets import Fiat
from walletcore.domain.errors import PriceUnavailable
from walletcore.domain.trade import TradeStatus
from walletcore.jobs import Jobs, JobsMode
from walletcore.pricing import SharedPriceSource
from walletcore.testing import CONTRACT_CATALOG
from walletcore.testing.storage import InMemoryStorage
from walletcore_sql.engine import sqlite_url
from walletcore_sql.storage import SqlStorage

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def _jobs(storage: InMemoryStorage | SqlStorage, clock: ManualClock, feed: CountingFeed) -> Jobs:
    def no_trading() -> None:
        raise AssertionError("not settling here")

    return Jobs(
        storage=storage,
        clock=clock,
        feed=lambda: feed,
        trading=no_trading,  # type: ignore[arg-type]
        refresh_seconds=60,
        settle_seconds=5,
        settle_batch=10,
    )


async def test_the_shared_source_serves_what_the_job_saved_and_ages_into_502() -> None:
    storage, clock, feed = InMemoryStorage(), ManualClock(T0), CountingFeed()
    shared = SharedPriceSource(
        storage, clock, symbols=CONTRACT_CATALOG.symbols, max_age_seconds=900, cache_seconds=0
    )
    with pytest.raises(PriceUnavailable):  # nothing stored yet
        await shared.unit_price("ETH", Fiat.EUR)
    assert (await shared.price_map())["ETH"] == {"USD": 0.0, "EUR": 0.0, "GBP": 0.0, "CAD": 0.0}

    assert await _jobs(storage, clock, feed).refresh_prices()
    assert await shared.unit_price("ETH", Fiat.EUR) == PRICE
    # a fiat the upstream never priced: 0 in the map, 502 for a quote
    assert (await shared.price_map())["BTC"] == {
        "USD": 3000.5,
        "EUR": 3000.5,
        "GBP": 0.0,
        "CAD": 0.0,
    }
    with pytest.raises(PriceUnavailable):
        await shared.unit_price("BTC", Fiat.GBP)
    assert shared.ages()["ETH"].total_seconds() == 0

    clock.advance(900)  # at the limit: still quoted
    assert await shared.unit_price("ETH", Fiat.EUR) == PRICE
    clock.advance(1)  # past it: 502, and the map keeps the last known value
    with pytest.raises(PriceUnavailable):
        await shared.unit_price("ETH", Fiat.EUR)
    assert (await shared.price_map())["ETH"]["EUR"] == 3000.5


async def test_a_failed_refresh_keeps_the_last_values() -> None:
    storage, clock, feed = InMemoryStorage(), ManualClock(T0), CountingFeed()
    jobs = _jobs(storage, clock, feed)
    await jobs.refresh_prices()
    clock.advance(60)

    async def broken() -> None:
        raise TimeoutError

    feed.fetch_table = broken  # type: ignore[method-assign]
    with pytest.raises(TimeoutError):  # the engine retries it
        await jobs.refresh_prices()
    shared = SharedPriceSource(storage, clock, symbols=CONTRACT_CATALOG.symbols, cache_seconds=0)
    assert await shared.unit_price("SOL", Fiat.USD) == PRICE


async def test_the_load_is_cached_per_process() -> None:
    storage, clock, feed = InMemoryStorage(), ManualClock(T0), CountingFeed()
    await _jobs(storage, clock, feed).refresh_prices()
    shared = SharedPriceSource(storage, clock, symbols=CONTRACT_CATALOG.symbols, cache_seconds=30)
    await asyncio.gather(*(shared.unit_price("ETH", Fiat.USD) for _ in range(50)))
    await shared.price_map()
    assert shared.loads == 1


async def test_two_http_containers_read_one_refresh(tmp_path: Path) -> None:
    """Two processes' containers on one database: one fetch from the upstream serves both;
    a second run within half an interval skips the fetch."""
    url = sqlite_url(tmp_path / "db" / "walletcore.db")
    feed = CountingFeed()
    containers = [
        job_container(
            SqlStorage(url, migrate=True),
            home=tmp_path / f"home{n}",
            mode=JobsMode.INPROCESS,
            feed=feed,
            venue=CountingVenue(),
            refresh_seconds=60,
        )
        for n in range(2)
    ]
    try:
        assert await containers[0].jobs().refresh_prices()
        assert not await containers[1].jobs().refresh_prices()  # fresh: skipped
        assert feed.fetches == 1
        for container in containers:
            prices = container.prices()
            assert isinstance(prices, SharedPriceSource)
            assert await prices.unit_price("BTC", Fiat.USD) == PRICE
    finally:
        for container in containers:
            await container.storage().aclose()


async def test_in_process_jobs_on_sqlite_refresh_and_settle(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "db" / "walletcore.db")
    storage = SqlStorage(url, migrate=True)
    feed, venue = CountingFeed(), CountingVenue()
    container = job_container(
        storage,
        home=tmp_path / "home",
        mode=JobsMode.INPROCESS,
        feed=feed,
        venue=venue,
        refresh_seconds=0.3,
        settle_seconds=0.1,
    )
    await storage.start()
    trades = await executing_trades(storage, 3)
    await start(container)
    try:
        assert feed.fetches == 1  # before the first request
        assert await container.prices().unit_price("ETH", Fiat.USD) == PRICE
        for _ in range(50):
            if set(await statuses(storage, trades)) == {TradeStatus.COMPLETED}:
                break
            await asyncio.sleep(0.05)
        assert set(await statuses(storage, trades)) == {TradeStatus.COMPLETED}
        assert sorted(await settle_entries(storage)) == sorted(t.trade_id for t in trades)
        await asyncio.sleep(0.7)
        assert 2 <= feed.fetches <= 4  # every 0.3 s (skipped when under half of it old)
    finally:
        await stop(container)
    fetched = feed.fetches
    await asyncio.sleep(0.4)
    assert feed.fetches == fetched  # stopped
    assert venue.statuses.count(trades[0].trade_id) == 1


async def test_without_start_the_shared_source_refreshes_inline(tmp_path: Path) -> None:
    """A CLI command or an embedder that never calls `start` still gets prices."""
    url = sqlite_url(tmp_path / "db" / "walletcore.db")
    feed = CountingFeed(price=Decimal(7))
    container = job_container(
        SqlStorage(url, migrate=True),
        home=tmp_path / "home",
        mode=JobsMode.INPROCESS,
        feed=feed,
        venue=CountingVenue(),
        refresh_seconds=60,
    )
    try:
        assert await container.prices().unit_price("ETH", Fiat.USD) == 7
        assert await container.prices().unit_price("BTC", Fiat.USD) == 7
        assert feed.fetches == 1
    finally:
        await container.storage().aclose()


def test_the_mode_follows_the_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from walletcore.jobs import JobSettings, jobs_mode

    monkeypatch.delenv("WALLETCORE_JOBS", raising=False)  # the default, as a deployer has it
    from walletcore.settings import Settings

    def mode(**kw: object) -> JobsMode:
        return jobs_mode(Settings(home=tmp_path, **kw), JobSettings())  # type: ignore[arg-type]

    assert mode(repo="sql") is JobsMode.INPROCESS
    assert mode(repo="sql", database_url="postgresql+asyncpg://u@h/db") is JobsMode.PROCRASTINATE
    assert mode(repo="memory") is JobsMode.OFF
    assert jobs_mode(Settings(home=tmp_path), JobSettings(jobs=JobsMode.OFF)) is JobsMode.OFF
