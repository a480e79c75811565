"""The exchange ticker price source over ccxt's real `binance` client, against a loopback
Binance: direct fiat markets, prices crossed through USD, and refreshes that fail."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from decimal import Decimal

import pytest
from exchange_support import PER_USD, FakeFx, binance

from walletcore.clock import ManualClock
from walletcore.domain.assets import Fiat
from walletcore.domain.errors import PriceUnavailable
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_markets import tickers
from walletcore_markets.ccxt_support import make_exchange
from walletcore_markets.testing.binance_server import (
    BinanceTestServer,
    Fault,
    SymbolSpec,
    default_symbols,
)
from walletcore_markets.tickers import ExchangeTickerPriceSource

TICKERS = ("GET", "/api/v3/ticker/24hr")


@pytest.fixture
def server() -> Iterator[BinanceTestServer]:
    with binance() as running:
        yield running


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def fx() -> FakeFx:
    return FakeFx()


def source_for(
    server: BinanceTestServer, fx: FakeFx | None, clock: ManualClock
) -> ExchangeTickerPriceSource:
    exchange = make_exchange("binance", url=server.url, timeout_seconds=0.5, rate_limit_ms=0)
    return ExchangeTickerPriceSource(
        exchange,
        fx,
        clock,
        symbols=CONTRACT_CATALOG.symbols,
        timeout_seconds=0.5,
        max_age_seconds=60,
        interval_seconds=3600,
    )


@pytest.fixture
async def source(
    server: BinanceTestServer, fx: FakeFx, clock: ManualClock
) -> AsyncIterator[ExchangeTickerPriceSource]:
    built = source_for(server, fx, clock)
    yield built
    await built.aclose()


def mid(server: BinanceTestServer, symbol_id: str) -> Decimal:
    value = server.symbols[symbol_id].mid()
    assert value is not None
    return value


async def test_direct_markets_are_used_and_the_rest_crossed_through_usd(
    source: ExchangeTickerPriceSource, server: BinanceTestServer
) -> None:
    assert await source.refresh()

    btc_usd = mid(server, "BTCUSDT")  # USDT counted at par: no USDT/USD market listed
    assert await source.unit_price("BTC", Fiat.EUR) == mid(server, "BTCEUR")  # direct
    assert await source.unit_price("BTC", Fiat.USD) == btc_usd
    assert await source.unit_price("BTC", Fiat.GBP) == btc_usd * PER_USD[Fiat.GBP]
    assert await source.unit_price("BTC", Fiat.AED) == btc_usd * PER_USD[Fiat.AED]
    assert await source.unit_price("ETH", Fiat.EUR) == mid(server, "ETHUSDT") * PER_USD[Fiat.EUR]
    assert await source.unit_price("USDT", Fiat.USD) == Decimal(1)
    assert await source.unit_price("USDT", Fiat.CAD) == PER_USD[Fiat.CAD]
    assert await source.unit_price("USDC", Fiat.USD) == mid(server, "USDCUSDT")

    prices = await source.price_map()
    assert prices["BTC"] == {
        "USD": float(btc_usd),
        "EUR": float(mid(server, "BTCEUR")),
        "GBP": float(btc_usd * PER_USD[Fiat.GBP]),
        "CAD": float(btc_usd * PER_USD[Fiat.CAD]),
    }
    assert prices["POL"]["USD"] == float(mid(server, "POLUSDT"))
    # one ticker request priced every coin in every fiat
    assert server.requests.count(TICKERS) == 1


async def test_the_usd_quote_is_priced_from_its_own_usd_market(clock: ManualClock) -> None:
    usdt_usd = SymbolSpec(
        "USDT", "USD", [(Decimal("0.9990"), Decimal(10**6))], [(Decimal("0.9992"), Decimal(10**6))]
    )
    with binance(symbols=[*default_symbols(), usdt_usd]) as server:
        source = source_for(server, FakeFx(), clock)
        try:
            assert await source.refresh()
            usdt = await source.unit_price("USDT", Fiat.USD)
            btc_usd = await source.unit_price("BTC", Fiat.USD)
            btc_gbp = await source.unit_price("BTC", Fiat.GBP)
        finally:
            await source.aclose()

    assert usdt == Decimal("0.9991")
    assert btc_usd == mid(server, "BTCUSDT") * usdt
    assert btc_gbp == btc_usd * PER_USD[Fiat.GBP]


async def test_markets_load_once_and_each_refresh_is_one_ticker_request(
    source: ExchangeTickerPriceSource, server: BinanceTestServer
) -> None:
    assert await source.refresh()
    assert await source.refresh()

    assert server.requests.count(("GET", "/api/v3/exchangeInfo")) == 1
    assert server.requests.count(TICKERS) == 2


async def test_a_failed_refresh_keeps_the_last_values_until_they_age_out(
    source: ExchangeTickerPriceSource, server: BinanceTestServer, clock: ManualClock
) -> None:
    assert await source.refresh()
    before = await source.price_map()
    server.symbols["BTCUSDT"].bids[0] = (Decimal(50_000), Decimal(1))  # would move BTC
    server.inject(*TICKERS, Fault(status=502, times=1))
    clock.advance(30)

    assert not await source.refresh()
    assert source.failures == 1
    assert await source.price_map() == before
    assert await source.unit_price("BTC", Fiat.USD) == Decimal(100_000)

    clock.advance(31)  # 61 s since the last good refresh, over the 60 s max age
    with pytest.raises(PriceUnavailable):
        await source.unit_price("BTC", Fiat.USD)
    assert (await source.price_map())["BTC"]["USD"] == 100_000.0  # /prices: last known


async def test_a_refresh_that_times_out_keeps_the_last_values(
    source: ExchangeTickerPriceSource, server: BinanceTestServer
) -> None:
    assert await source.refresh()
    server.inject(*TICKERS, Fault(delay=1.5, times=1))

    assert not await source.refresh()
    assert source.failures == 1
    assert await source.unit_price("ETH", Fiat.USD) == mid(server, "ETHUSDT")


async def test_an_fx_failure_still_refreshes_direct_markets_and_usd(
    source: ExchangeTickerPriceSource, server: BinanceTestServer, fx: FakeFx
) -> None:
    assert await source.refresh()
    gbp_before = await source.unit_price("BTC", Fiat.GBP)
    book = server.symbols["BTCUSDT"]
    book.bids[0], book.asks[0] = (Decimal(109_990), Decimal(1)), (Decimal(110_010), Decimal(1))
    eur = server.symbols["BTCEUR"]
    eur.bids[0], eur.asks[0] = (Decimal(100_990), Decimal(1)), (Decimal(101_010), Decimal(1))
    fx.fail = True

    assert await source.refresh()

    assert await source.unit_price("BTC", Fiat.USD) == Decimal(110_000)
    assert await source.unit_price("BTC", Fiat.EUR) == Decimal(101_000)
    assert await source.unit_price("BTC", Fiat.GBP) == gbp_before  # crossed: last value


async def test_without_fx_only_direct_markets_and_usd_are_priced(
    server: BinanceTestServer, clock: ManualClock
) -> None:
    source = source_for(server, None, clock)
    try:
        assert await source.refresh()
        prices = await source.price_map()
    finally:
        await source.aclose()

    assert prices["BTC"]["EUR"] == float(mid(server, "BTCEUR"))
    assert prices["BTC"]["USD"] == float(mid(server, "BTCUSDT"))
    assert prices["BTC"]["GBP"] == 0.0  # a fiat with no quote reads 0
    assert prices["ETH"]["EUR"] == 0.0


async def test_build_reads_the_environment(
    server: BinanceTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WALLETCORE_TICKERS_URL", server.url)
    monkeypatch.setenv("WALLETCORE_TICKERS_FX", "exchange_support:FakeFx")
    monkeypatch.setenv("WALLETCORE_TICKERS_RATE_LIMIT_MS", "0")

    source = tickers.build(clock=ManualClock(), settings=Settings(), catalog=CONTRACT_CATALOG)
    try:
        assert await source.refresh()
        price = await source.unit_price("SOL", Fiat.PLN)
    finally:
        await source.aclose()

    assert price == mid(server, "SOLUSDT") * PER_USD[Fiat.PLN]
