"""Real markets end to end over HTTP: the service on the `coingecko` price source and the
`exchange` venue (ccxt), pointed at loopback servers speaking CoinGecko's and Binance's real
APIs (`walletcore_markets.testing`). Quotes, approvals, refusals, a timeout retried by client
order id, a stale feed; the spec's statuses and messages."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from http_support import Api, assert_error, assert_ok

from walletcore.clock import ManualClock
from walletcore.container import Container
from walletcore.domain.assets import Chain
from walletcore.testing import CONTRACT_CATALOG
from walletcore_markets.testing.binance_server import BinanceTestServer, Fault
from walletcore_markets.testing.coingecko_server import CoinGeckoTestServer

BTC = CONTRACT_CATALOG.native_asset(Chain.BITCOIN).id
#: The loopback exchange's BTC/USDT book: bids 99,990 (0.5), 99,980 (1.0), ...
BOOK_BID = Decimal(99_990)
MAX_AGE = 300


@pytest.fixture
def coingecko() -> Iterator[CoinGeckoTestServer]:
    with CoinGeckoTestServer() as server:
        # the aggregator agrees with the exchange's book, as real markets do within a spread
        server.set_price("bitcoin", "usd", "100000")
        for fiat, per_usd in {"eur": "0.92", "gbp": "0.79", "cad": "1.36", "aud": "1.52"}.items():
            server.set_price("bitcoin", fiat, Decimal(100_000) * Decimal(per_usd))
            server.set_price("tether", fiat, per_usd)
        server.set_price("tether", "usd", "1")
        yield server


@pytest.fixture
def exchange() -> Iterator[BinanceTestServer]:
    with BinanceTestServer() as server:
        yield server


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {"prices": "coingecko", "venue": "exchange", "price_max_age_seconds": MAX_AGE}


@pytest.fixture(autouse=True)
def _markets_env(
    coingecko: CoinGeckoTestServer, exchange: BinanceTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WALLETCORE_COINGECKO_URL", f"{coingecko.url}/api/v3")
    monkeypatch.setenv("WALLETCORE_EXCHANGE_URL", exchange.url)
    monkeypatch.setenv("WALLETCORE_EXCHANGE_API_KEY", exchange.api_key)
    monkeypatch.setenv("WALLETCORE_EXCHANGE_SECRET", "loopback-secret")
    monkeypatch.setenv("WALLETCORE_EXCHANGE_ADJUST_FOR_TIME_DIFFERENCE", "false")
    monkeypatch.setenv("WALLETCORE_EXCHANGE_RATE_LIMIT_MS", "0")
    monkeypatch.setenv("WALLETCORE_EXCHANGE_TIMEOUT_SECONDS", "1")
    monkeypatch.setenv("WALLETCORE_EXCHANGE_ORDER_WAIT_SECONDS", "0.2")


async def sell(api: Api, user_id: str, amount: str, fiat: str = "USD") -> dict[str, Any]:
    body = {"userId": user_id, "assetId": BTC, "cryptoAmount": amount, "fiat": fiat}
    return assert_ok(await api.post("/sell", body))  # type: ignore[no-any-return]


async def test_prices_and_quotes_come_from_the_aggregator(
    api: Api, coingecko: CoinGeckoTestServer
) -> None:
    prices = assert_ok(await api.post("/prices"))
    assert prices["BTC"] == {"USD": 100000.0, "EUR": 92000.0, "GBP": 79000.0, "CAD": 136000.0}
    user_id = await api.new_user()
    quote = await sell(api, user_id, "0.1", fiat="AUD")  # a fiat /prices does not show
    assert quote["price"] == "152000" and quote["fiatAmount"] == "15200"
    assert coingecko.count("/api/v3/simple/price") == 1  # one call priced every fiat


async def test_an_approval_fills_on_the_exchange_at_the_walked_book(
    api: Api, exchange: BinanceTestServer
) -> None:
    user_id = await api.new_user()
    quote = await sell(api, user_id, "0.1")
    done = assert_ok(
        await api.post("/trade/approve", {"userId": user_id, "tradeId": quote["tradeId"]})
    )
    assert done["status"] == "completed"
    assert Decimal(done["price"]) == BOOK_BID  # the best bid held 0.5 BTC
    assert Decimal(done["fiatAmount"]) == BOOK_BID / 10
    assert done["quote"]["price"] == "100000"  # the quote stays as it was
    [placed] = exchange.orders()
    assert done["reference"] == str(placed["orderId"])
    assert placed["clientOrderId"].endswith(quote["tradeId"])


async def test_a_fiat_without_a_market_is_crossed_through_usdt(
    api: Api, exchange: BinanceTestServer
) -> None:
    user_id = await api.new_user()
    quote = await sell(api, user_id, "0.1", fiat="AUD")
    done = assert_ok(
        await api.post("/trade/approve", {"userId": user_id, "tradeId": quote["tradeId"]})
    )
    assert done["status"] == "completed"
    assert Decimal(done["price"]) == BOOK_BID * Decimal("1.52")  # USDT in AUD, aggregator's
    assert exchange.orders()[0]["symbol"] == "BTCUSDT"


async def test_an_exchange_refusal_is_order_rejected_and_the_trade_failed(
    api: Api, exchange: BinanceTestServer
) -> None:
    exchange.set_status("BTCUSDT", "BREAK")  # the market is closed
    user_id = await api.new_user()
    quote = await sell(api, user_id, "0.1")
    ids = {"userId": user_id, "tradeId": quote["tradeId"]}
    refused = assert_error(await api.post("/trade/approve", ids), 502)
    assert refused["message"].startswith("Order rejected: ")
    polled = assert_ok(await api.post("/trade", ids))
    assert polled["status"] == "failed" and polled["failureReason"]
    assert exchange.placed == 0


async def test_an_ordering_timeout_is_a_504_then_the_poll_finds_the_one_order(
    api: Api, exchange: BinanceTestServer
) -> None:
    exchange.inject("POST", "/api/v3/order", Fault(delay=1.5, after=True, times=1))
    user_id = await api.new_user()
    quote = await sell(api, user_id, "0.2")
    ids = {"userId": user_id, "tradeId": quote["tradeId"]}
    assert_error(await api.post("/trade/approve", ids), 504)
    assert exchange.placed == 1  # the exchange took it; the answer was lost
    polled = assert_ok(await api.post("/trade", ids))  # asks by the client order id
    assert polled["status"] == "completed"
    assert polled["reference"] == str(exchange.orders()[0]["orderId"])
    replayed = assert_ok(await api.post("/trade/approve", ids))  # completed: a replay
    assert replayed == polled
    assert exchange.placed == 1  # one order, whatever the client retried


async def test_a_stale_feed_stops_quotes_but_prices_keep_the_last_values(
    api: Api, coingecko: CoinGeckoTestServer, container: Container, clock: ManualClock
) -> None:
    user_id = await api.new_user()
    await sell(api, user_id, "0.1")
    coingecko.fail(503)
    clock.advance(MAX_AGE + 61)
    await container.prices().refresh()  # the background refresh, failing
    body = {"userId": user_id, "assetId": BTC, "cryptoAmount": "0.1"}
    assert_error(await api.post("/sell", body), 502)
    assert assert_ok(await api.post("/prices"))["BTC"]["USD"] == 100000.0
