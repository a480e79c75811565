"""The refreshing price source (the `/prices` rules) and the sandbox's deterministic prices."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from decimal import Decimal

import pytest

from walletcore.clock import ManualClock
from walletcore.domain.assets import PRICE_FIATS, Fiat
from walletcore.domain.errors import PriceUnavailable
from walletcore.pricing import PriceTable, RefreshingPriceSource
from walletcore.testing import CONTRACT_CATALOG
from walletcore_sandbox.prices import (
    FX_PER_USD,
    SandboxPriceSource,
    sandbox_table,
    sandbox_unit_price,
)


class Upstream:
    """A fetch function whose answers the test scripts: a table, or an error."""

    def __init__(self, table: PriceTable) -> None:
        self.table: PriceTable | BaseException = table
        self.calls = 0
        self.hang = False

    async def __call__(self) -> PriceTable:
        self.calls += 1
        if self.hang:
            await asyncio.sleep(10)
        if isinstance(self.table, BaseException):
            raise self.table
        return self.table


FULL: PriceTable = {
    s: {f: Decimal(i + 1) * (10 if f is Fiat.USD else 9) for f in PRICE_FIATS}
    for i, s in enumerate(CONTRACT_CATALOG.symbols)
}


async def close_or_fail(prices: RefreshingPriceSource, note: str = "") -> None:
    closing = asyncio.ensure_future(prices.aclose())
    done, _ = await asyncio.wait({closing}, timeout=1)
    if not done:
        prices._interval = 3600  # park the runaway loop in a sleep a cancel can end
        pytest.fail(f"aclose() did not return{note}: the refresh loop ran on")


def source(upstream: Upstream, clock: ManualClock, **kwargs: float) -> RefreshingPriceSource:
    return RefreshingPriceSource(
        upstream, clock, symbols=CONTRACT_CATALOG.symbols, interval_seconds=60, **kwargs
    )


async def test_the_map_covers_every_symbol_in_the_four_fiats_as_numbers(clock: ManualClock) -> None:
    prices = await source(Upstream(FULL), clock).price_map()
    assert set(prices) == {"BNB", "BTC", "ETH", "POL", "SOL", "TRX", "USDC", "USDT"}
    for by_fiat in prices.values():
        assert list(by_fiat) == ["USD", "EUR", "GBP", "CAD"]
        assert all(type(v) is float for v in by_fiat.values())
    assert prices["BNB"]["USD"] == 10.0 and prices["BTC"]["EUR"] == 18.0


async def test_a_missing_fiat_or_symbol_reads_as_zero(clock: ManualClock) -> None:
    partial: PriceTable = {"BTC": {Fiat.USD: Decimal("65000.5")}, "ETH": {}}
    prices = await source(Upstream(partial), clock).price_map()
    assert prices["BTC"] == {"USD": 65000.5, "EUR": 0.0, "GBP": 0.0, "CAD": 0.0}
    assert prices["ETH"] == prices["SOL"] == {"USD": 0.0, "EUR": 0.0, "GBP": 0.0, "CAD": 0.0}


async def test_unusable_upstream_values_are_ignored(clock: ManualClock) -> None:
    upstream = Upstream({"BTC": {Fiat.USD: Decimal(100), Fiat.EUR: Decimal(90)}})
    prices = source(upstream, clock)
    await prices.refresh()
    upstream.table = {"BTC": {Fiat.USD: Decimal(0), Fiat.EUR: Decimal("NaN")}}
    assert await prices.refresh()
    assert (await prices.price_map())["BTC"]["USD"] == 100.0
    assert await prices.unit_price("BTC", Fiat.EUR) == Decimal(90)


async def test_last_known_values_are_served_while_refreshes_fail(clock: ManualClock) -> None:
    upstream = Upstream(FULL)
    prices = source(upstream, clock)
    before = await prices.price_map()
    upstream.table = ConnectionError("upstream down")
    for _ in range(3):
        clock.advance(61)  # due again: each read attempts a refresh, which fails
        assert await prices.price_map() == before
        assert await prices.unit_price("ETH", Fiat.GBP) == Decimal(27)
    assert prices.failures == 3 and upstream.calls == 4


async def test_a_refresh_that_hangs_keeps_the_last_values(clock: ManualClock) -> None:
    upstream = Upstream(FULL)
    prices = source(upstream, clock, timeout_seconds=0.01)
    before = await prices.price_map()
    upstream.hang = True
    assert await prices.refresh() is False
    assert await prices.price_map() == before


async def test_a_quote_needs_a_recent_price(clock: ManualClock) -> None:
    upstream = Upstream(FULL)
    prices = source(upstream, clock, max_age_seconds=900)
    assert await prices.unit_price("BTC", Fiat.USD) == Decimal(20)
    upstream.table = ConnectionError()
    clock.advance(900)
    assert await prices.unit_price("BTC", Fiat.USD) == Decimal(20)  # stale, but within age
    clock.advance(1)
    with pytest.raises(PriceUnavailable) as raised:
        await prices.unit_price("BTC", Fiat.USD)
    assert raised.value.status == 502
    assert (await prices.price_map())["BTC"]["USD"] == 20.0  # the map still serves it


async def test_no_price_at_all_is_502(clock: ManualClock) -> None:
    prices = source(Upstream({"BTC": {Fiat.USD: Decimal(1)}}), clock)
    with pytest.raises(PriceUnavailable):
        await prices.unit_price("BTC", Fiat.AUD)
    failing = source(Upstream(FULL), clock)
    failing._fetch = Upstream(RuntimeError())  # type: ignore[assignment]
    with pytest.raises(PriceUnavailable):
        await failing.unit_price("BTC", Fiat.USD)


async def test_without_a_background_task_reads_refresh_once_per_interval(
    clock: ManualClock,
) -> None:
    upstream = Upstream(FULL)
    prices = source(upstream, clock)
    await prices.price_map()
    await prices.unit_price("BTC", Fiat.USD)
    clock.advance(59)
    await prices.price_map()
    assert upstream.calls == 1
    clock.advance(1)
    await prices.price_map()
    assert upstream.calls == 2


async def test_background_refresh_runs_between_start_and_aclose(clock: ManualClock) -> None:
    upstream = Upstream(FULL)
    prices = RefreshingPriceSource(
        upstream, clock, symbols=CONTRACT_CATALOG.symbols, interval_seconds=0.005
    )
    await prices.start()
    assert upstream.calls == 1  # start refreshes at once
    for _ in range(200):
        if upstream.calls >= 4:
            break
        await asyncio.sleep(0.005)
    assert upstream.calls >= 4
    calls = upstream.calls
    await prices.price_map()
    assert upstream.calls == calls  # with the task running, reads never fetch inline
    await close_or_fail(prices)
    stopped = upstream.calls
    await asyncio.sleep(0.03)
    assert upstream.calls == stopped
    await prices.aclose()  # idempotent


async def test_background_refresh_survives_failures(clock: ManualClock) -> None:
    upstream = Upstream(FULL)
    prices = RefreshingPriceSource(
        upstream, clock, symbols=CONTRACT_CATALOG.symbols, interval_seconds=0.005
    )
    await prices.start()
    upstream.table = RuntimeError("boom")
    for _ in range(200):
        if prices.failures >= 3:
            break
        await asyncio.sleep(0.005)
    assert prices.failures >= 3
    upstream.table = FULL
    calls = upstream.calls
    for _ in range(200):
        if upstream.calls > calls + 1:
            break
        await asyncio.sleep(0.005)
    assert upstream.calls > calls + 1  # still refreshing after the failures
    assert await prices.unit_price("BTC", Fiat.USD) == Decimal(20)
    await close_or_fail(prices)


# -- the sandbox prices ------------------------------------------------------------------------
def test_sandbox_prices_are_deterministic_and_positive(clock: ManualClock) -> None:
    at = clock.now()
    assert sandbox_table(at, CONTRACT_CATALOG.symbols) == sandbox_table(
        at, CONTRACT_CATALOG.symbols
    )
    for by_fiat in sandbox_table(at, CONTRACT_CATALOG.symbols).values():
        assert set(by_fiat) == set(Fiat)
        assert all(p > 0 and -p.as_tuple().exponent <= 8 for p in by_fiat.values())  # type: ignore[operator]


def test_sandbox_prices_hold_within_a_minute_and_move_across_minutes(clock: ManualClock) -> None:
    start = clock.now().replace(second=0)
    same = {sandbox_unit_price("BTC", Fiat.USD, start + timedelta(seconds=s)) for s in range(60)}
    assert len(same) == 1
    moved = {sandbox_unit_price("BTC", Fiat.USD, start + timedelta(minutes=m)) for m in range(10)}
    assert len(moved) == 10


def test_sandbox_prices_follow_fx_and_stablecoins_stay_pegged(clock: ManualClock) -> None:
    at = clock.now()
    usd = sandbox_unit_price("ETH", Fiat.USD, at)
    eur = sandbox_unit_price("ETH", Fiat.EUR, at)
    assert abs(eur / usd - Decimal("0.92")) < Decimal("0.000001")
    for hours in range(0, 24, 3):
        for coin in ("USDT", "USDC"):
            for fiat in Fiat:
                price = sandbox_unit_price(coin, fiat, at + timedelta(hours=hours))
                peg = Decimal(repr(FX_PER_USD[fiat]))
                assert abs(price / peg - 1) <= Decimal("0.0011")


async def test_the_sandbox_source_serves_the_sandbox_table(clock: ManualClock) -> None:
    prices = SandboxPriceSource(clock, symbols=CONTRACT_CATALOG.symbols)
    assert await prices.unit_price("SOL", Fiat.CAD) == sandbox_unit_price(
        "SOL", Fiat.CAD, clock.now()
    )
    assert (await prices.price_map())["BTC"]["USD"] == float(
        sandbox_unit_price("BTC", Fiat.USD, clock.now())
    )


async def test_aclose_always_stops_the_refresh_task(clock: ManualClock) -> None:
    """A cancel landing as a fetch completes must not leave the loop running (Python 3.11's
    `asyncio.wait_for` swallows such a cancel): closing returns, and no fetch follows."""
    for cycle in range(30):
        upstream = Upstream(FULL)
        prices = RefreshingPriceSource(
            upstream, clock, symbols=CONTRACT_CATALOG.symbols, interval_seconds=0
        )
        await prices.start()
        for _ in range(cycle % 5):
            await asyncio.sleep(0)
        await close_or_fail(prices, f" (cycle {cycle})")
        calls = upstream.calls
        await asyncio.sleep(0.002)
        assert upstream.calls == calls
