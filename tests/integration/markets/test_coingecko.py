"""The `coingecko` price source and `CoinGeckoFx` against the loopback CoinGecko API."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from decimal import Decimal
from typing import Any, Literal

import httpx
import pytest
from pydantic import SecretStr

from walletcore import plugins
from walletcore.clock import ManualClock, SystemClock
from walletcore.domain.assets import PRICE_FIATS, Fiat
from walletcore.domain.errors import PriceUnavailable, PricingTimeout
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_markets.coingecko import (
    DEFAULT_IDS,
    PRO_URL,
    PUBLIC_URL,
    CoinGeckoError,
    CoinGeckoFx,
    CoinGeckoPriceSource,
    CoinGeckoSettings,
)
from walletcore_markets.testing.coingecko_server import CoinGeckoTestServer

KEY = "CG-s3cr3tK3yValue0123456789"
PRICES = "/api/v3/simple/price"
Source = Callable[..., CoinGeckoPriceSource]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def coingecko_server(clock: ManualClock) -> Iterator[CoinGeckoTestServer]:
    with CoinGeckoTestServer(now=lambda: clock.now().timestamp()) as server:
        yield server


def coingecko_settings(server: CoinGeckoTestServer, **values: Any) -> CoinGeckoSettings:
    return CoinGeckoSettings(url=SecretStr(server.url + "/api/v3"), **values)


@pytest.fixture
async def coingecko_source(
    coingecko_server: CoinGeckoTestServer, clock: ManualClock
) -> AsyncIterator[Source]:
    """Sources on the server (closed at the end): interval 60 s, timeout 2 s, max age 300 s
    unless told."""
    made: list[CoinGeckoPriceSource] = []

    def make(
        settings: CoinGeckoSettings | None = None,
        *,
        interval_seconds: float = 60.0,
        timeout_seconds: float = 2.0,
        max_age_seconds: float = 300.0,
    ) -> CoinGeckoPriceSource:
        source = CoinGeckoPriceSource(
            settings or coingecko_settings(coingecko_server),
            clock,
            symbols=CONTRACT_CATALOG.symbols,
            interval_seconds=interval_seconds,
            timeout_seconds=timeout_seconds,
            max_age_seconds=max_age_seconds,
        )
        made.append(source)
        return source

    yield make
    for source in made:
        await source.aclose()


def expected(server: CoinGeckoTestServer, symbol: str, fiat: Fiat) -> Decimal:
    return server.prices[DEFAULT_IDS[symbol]][fiat.value.lower()]


# -- prices ---------------------------------------------------------------------------------
async def test_one_call_prices_every_symbol_in_all_ten_fiats(
    coingecko_server: CoinGeckoTestServer, coingecko_source: Source
) -> None:
    source = coingecko_source()

    prices = await source.price_map()

    assert coingecko_server.count() == 1
    seen = coingecko_server.requests[0]
    assert set(seen.params["ids"].split(",")) == set(DEFAULT_IDS.values())
    assert seen.params["vs_currencies"].split(",") == [f.value.lower() for f in Fiat]
    assert seen.params["precision"] == "full"
    assert set(prices) == set(CONTRACT_CATALOG.symbols)
    for symbol in CONTRACT_CATALOG.symbols:
        assert list(prices[symbol]) == [f.value for f in PRICE_FIATS]
        for fiat in PRICE_FIATS:
            assert prices[symbol][fiat.value] == float(expected(coingecko_server, symbol, fiat))
        for fiat in Fiat:  # exact: full precision, read as Decimal
            assert await source.unit_price(symbol, fiat) == expected(coingecko_server, symbol, fiat)
    assert await source.unit_price("BTC", Fiat.USD) == Decimal("65000.123456789")
    assert coingecko_server.count() == 1  # every quote above came from that one call


async def test_moves_show_after_the_interval(
    coingecko_server: CoinGeckoTestServer, coingecko_source: Source, clock: ManualClock
) -> None:
    source = coingecko_source()
    before = await source.unit_price("ETH", Fiat.EUR)
    coingecko_server.move("ethereum", "10")

    clock.advance(59)
    assert await source.unit_price("ETH", Fiat.EUR) == before
    clock.advance(1)
    assert await source.unit_price("ETH", Fiat.EUR) == before * Decimal("1.1")
    assert coingecko_server.count() == 2


async def test_a_missing_fiat_reads_0_and_cannot_be_quoted(
    coingecko_server: CoinGeckoTestServer, coingecko_source: Source
) -> None:
    coingecko_server.remove("bitcoin", "cad")
    coingecko_server.remove("bitcoin", "aed")
    source = coingecko_source()

    assert await source.refresh()
    prices = await source.price_map()
    assert prices["BTC"]["CAD"] == 0.0
    assert prices["BTC"]["USD"] > 0 and prices["ETH"]["CAD"] > 0
    for fiat in (Fiat.CAD, Fiat.AED):
        with pytest.raises(PriceUnavailable) as raised:
            await source.unit_price("BTC", fiat)
        assert raised.value.status == 502
    assert await source.unit_price("BTC", Fiat.SEK) == expected(coingecko_server, "BTC", Fiat.SEK)


async def test_a_missing_coin_is_not_updated_and_named_in_the_log(
    coingecko_server: CoinGeckoTestServer,
    coingecko_source: Source,
    caplog: pytest.LogCaptureFixture,
) -> None:
    coingecko_server.remove("tron")
    source = coingecko_source()

    assert await source.refresh()

    assert (await source.price_map())["TRX"] == {f.value: 0.0 for f in PRICE_FIATS}
    with pytest.raises(PriceUnavailable):
        await source.unit_price("TRX", Fiat.USD)
    assert any("TRX" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


async def test_a_changed_coin_id_is_read_from_the_settings(
    coingecko_server: CoinGeckoTestServer, coingecko_source: Source
) -> None:
    coingecko_server.set_price("matic-network", "usd", "0.5")
    source = coingecko_source(coingecko_settings(coingecko_server, ids={"pol": "matic-network"}))

    assert await source.unit_price("POL", Fiat.USD) == Decimal("0.5")
    assert await source.unit_price("BTC", Fiat.USD) == expected(coingecko_server, "BTC", Fiat.USD)


# -- the API key ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["demo", "pro"])
async def test_the_api_key_travels_in_its_plans_header(
    kind: Literal["demo", "pro"], clock: ManualClock, coingecko_source: Source
) -> None:
    stamp = clock.now().timestamp
    with CoinGeckoTestServer(api_key=KEY, key_kind=kind, now=stamp) as server:
        source = coingecko_source(coingecko_settings(server, api_key=KEY, api_key_kind=kind))

        assert await source.refresh()

        assert server.requests[-1].headers[f"x-cg-{kind}-api-key"] == KEY
        assert KEY not in server.requests[-1].path + str(server.requests[-1].params)
        await source.aclose()


@pytest.mark.parametrize(
    ("sent", "kind"),
    [(None, "demo"), ("CG-wrongKey0000000000000000", "demo"), (KEY, "pro")],
    ids=["missing", "wrong", "other-plan"],
)
async def test_a_refused_key_fails_the_refresh_and_stays_out_of_logs(
    sent: str | None,
    kind: str,
    clock: ManualClock,
    coingecko_source: Source,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with CoinGeckoTestServer(api_key=KEY, now=lambda: clock.now().timestamp()) as server:
        url = server.url + "/api/v3"
        settings = coingecko_settings(server, api_key=sent, api_key_kind=kind)
        source = coingecko_source(settings)

        assert not await source.refresh()
        with pytest.raises(PriceUnavailable):
            await source.unit_price("BTC", Fiat.USD)
        assert source.failures == 1
        assert server.count() == 1
        await source.aclose()

    ours = [r for r in caplog.records if r.name.startswith("walletcore")]
    assert any("HTTP 40" in r.getMessage() and "error_code 100" in r.getMessage() for r in ours)
    assert KEY not in caplog.text and (sent is None or sent not in caplog.text)
    assert not any(url in r.getMessage() for r in ours)
    assert KEY not in repr(settings) and url not in repr(settings)


async def test_no_secret_in_settings_repr_or_errors(coingecko_server: CoinGeckoTestServer) -> None:
    settings = coingecko_settings(coingecko_server, api_key=KEY)
    coingecko_server.fail(503)
    fx = CoinGeckoFx(settings)

    with pytest.raises(CoinGeckoError) as raised:
        await fx.per_usd()
    await fx.aclose()

    assert str(raised.value) == "/exchange_rates: HTTP 503"
    for text in (repr(settings), str(settings.model_dump()), str(raised.value)):
        assert KEY not in text and coingecko_server.url not in text


# -- failures keep the last values ------------------------------------------------------------
FAULTS: dict[str, Callable[[CoinGeckoTestServer], None]] = {
    "503": lambda s: s.fail(503),
    "500": lambda s: s.fail(500),
    "429": lambda s: s.rate_limit(None),
    "malformed": lambda s: s.malformed(),
    "timeout": lambda s: setattr(s, "delay", 3.0),
}


@pytest.mark.parametrize("fault", FAULTS)
async def test_the_last_values_are_kept_while_refreshes_fail(
    fault: str,
    coingecko_server: CoinGeckoTestServer,
    coingecko_source: Source,
    clock: ManualClock,
) -> None:
    # a timeout a loaded machine's loopback never reaches, far below the fault's delay
    source = coingecko_source(timeout_seconds=1.0)
    assert await source.refresh()
    before_map = await source.price_map()
    before = await source.unit_price("SOL", Fiat.GBP)

    coingecko_server.set_price("solana", "gbp", "1")
    FAULTS[fault](coingecko_server)
    assert not await source.refresh()
    assert not await source.refresh()

    assert source.failures == 2
    assert await source.price_map() == before_map
    assert await source.unit_price("SOL", Fiat.GBP) == before
    coingecko_server.heal()
    clock.advance(1)
    assert await source.refresh()
    assert await source.unit_price("SOL", Fiat.GBP) == Decimal(1)


async def test_an_answer_without_our_coins_is_a_failed_refresh(
    coingecko_server: CoinGeckoTestServer, coingecko_source: Source, clock: ManualClock
) -> None:
    source = coingecko_source()
    before = await source.price_map()
    for coin in DEFAULT_IDS.values():
        coingecko_server.remove(coin)  # CoinGecko answers `{}` for ids it does not know

    clock.advance(60)
    assert not await source.refresh()

    assert source.failures == 1
    assert await source.price_map() == before
    assert await source.unit_price("BNB", Fiat.DKK) > 0


async def test_a_price_older_than_max_age_is_not_quoted_but_still_shown(
    coingecko_server: CoinGeckoTestServer, coingecko_source: Source, clock: ManualClock
) -> None:
    source = coingecko_source(max_age_seconds=300)
    btc = await source.unit_price("BTC", Fiat.USD)
    coingecko_server.fail(503)

    clock.advance(200)  # a refresh is due, and fails: the price is 200 s old
    assert await source.unit_price("BTC", Fiat.USD) == btc
    clock.advance(101)
    with pytest.raises(PriceUnavailable) as raised:
        await source.unit_price("BTC", Fiat.USD)

    assert raised.value.status == 502
    assert source.failures == 2
    assert (await source.price_map())["BTC"]["USD"] == float(btc)


async def test_a_frozen_feed_ages_into_502(
    coingecko_server: CoinGeckoTestServer, coingecko_source: Source, clock: ManualClock
) -> None:
    source = coingecko_source(max_age_seconds=300)
    assert await source.refresh()
    btc = await source.unit_price("BTC", Fiat.USD)
    coingecko_server.freeze("bitcoin")  # bitcoin's `last_updated_at` stops moving

    clock.advance(240)
    assert await source.refresh()
    assert await source.unit_price("BTC", Fiat.USD) == btc  # 240 s old: still quoted
    clock.advance(61)
    assert await source.refresh()  # the other coins refresh; bitcoin's age goes on

    with pytest.raises(PriceUnavailable):
        await source.unit_price("BTC", Fiat.USD)
    assert await source.unit_price("ETH", Fiat.USD) == expected(coingecko_server, "ETH", Fiat.USD)
    assert (await source.price_map())["BTC"]["USD"] == float(btc)
    coingecko_server.freeze()
    clock.advance(301)
    assert not await source.refresh()  # nothing current at all: a failed refresh
    assert source.failures == 1


async def test_a_refresh_slower_than_the_timeout_is_a_504(
    coingecko_server: CoinGeckoTestServer, coingecko_source: Source
) -> None:
    coingecko_server.delay = 2.0
    source = coingecko_source(timeout_seconds=0.3)

    started = asyncio.get_running_loop().time()
    with pytest.raises(PricingTimeout) as raised:
        await source.unit_price("BTC", Fiat.USD)

    assert raised.value.status == 504
    assert asyncio.get_running_loop().time() - started < 1.5
    assert coingecko_server.count() == 1


async def test_no_request_before_retry_after(
    coingecko_server: CoinGeckoTestServer, coingecko_source: Source, clock: ManualClock
) -> None:
    source = coingecko_source(interval_seconds=30)
    coingecko_server.rate_limit(120, times=1)

    assert not await source.refresh()
    for _ in range(3):  # due every 30 s, but CoinGecko asked for 120 s
        clock.advance(30)
        with pytest.raises(PriceUnavailable):
            await source.unit_price("BTC", Fiat.USD)
    assert coingecko_server.count() == 1
    assert source.failures == 4

    clock.advance(30)
    assert await source.unit_price("BTC", Fiat.USD) == expected(coingecko_server, "BTC", Fiat.USD)
    assert coingecko_server.count() == 2


async def test_the_background_refresh_asks_once_per_interval() -> None:
    with CoinGeckoTestServer() as server:  # real time: `last_updated_at` moves
        settings = coingecko_settings(server)
        source = CoinGeckoPriceSource(
            settings, SystemClock(), symbols=CONTRACT_CATALOG.symbols, interval_seconds=0.2
        )

        await source.start()
        assert server.count() == 1  # start refreshes before it returns
        server.move("bitcoin", "-5")
        for _ in range(20):  # quotes do not refresh inline while the task runs
            await source.unit_price("BTC", Fiat.USD)
        await asyncio.sleep(1.1)
        await source.aclose()
        asked = server.count()
        await asyncio.sleep(0.5)

        assert 4 <= asked <= 7
        assert server.count() == asked  # stopped
        assert await source.unit_price("BTC", Fiat.USD) == expected(server, "BTC", Fiat.USD)


# -- the entry point --------------------------------------------------------------------------
async def test_the_entry_point_reads_the_environment_and_the_core_timing(
    coingecko_server: CoinGeckoTestServer, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WALLETCORE_COINGECKO_URL", coingecko_server.url + "/api/v3")
    monkeypatch.setenv("WALLETCORE_COINGECKO_IDS", '{"USDT": "tether-x"}')
    coingecko_server.set_price("tether-x", "usd", "0.998")
    core = Settings(price_refresh_seconds=5, price_timeout_seconds=3, price_max_age_seconds=20)

    source = plugins.build(
        "walletcore.price_sources",
        "coingecko",
        settings=core,
        clock=clock,
        catalog=CONTRACT_CATALOG,
    )
    try:
        assert isinstance(source, CoinGeckoPriceSource)
        assert await source.unit_price("USDT", Fiat.USD) == Decimal("0.998")
        coingecko_server.fail(503)
        clock.advance(5)  # the core's interval: one refresh, failing
        await source.price_map()
        assert (coingecko_server.count(), source.failures) == (2, 1)
        clock.advance(16)  # past the core's max age
        with pytest.raises(PriceUnavailable):
            await source.unit_price("USDT", Fiat.USD)
    finally:
        await source.aclose()


def test_settings_defaults_and_roots(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = CoinGeckoSettings()
    assert settings.ids == {
        "BTC": "bitcoin",
        "ETH": "ethereum",
        "BNB": "binancecoin",
        "POL": "polygon-ecosystem-token",
        "SOL": "solana",
        "TRX": "tron",
        "USDT": "tether",
        "USDC": "usd-coin",
    }
    assert settings.base_url == PUBLIC_URL
    assert CoinGeckoSettings(api_key=SecretStr(KEY)).base_url == PUBLIC_URL
    assert CoinGeckoSettings(api_key=SecretStr(KEY), api_key_kind="pro").base_url == PRO_URL
    monkeypatch.setenv("WALLETCORE_COINGECKO_API_KEY", KEY)
    monkeypatch.setenv("WALLETCORE_COINGECKO_API_KEY_KIND", "pro")
    from_env = CoinGeckoSettings()
    assert from_env.base_url == PRO_URL and from_env.api_key is not None
    assert from_env.api_key.get_secret_value() == KEY
    doge = CoinGeckoSettings(ids={"DOGE": "dogecoin"})  # a coin no served asset is
    with pytest.raises(ValueError, match="unknown symbols"):
        CoinGeckoPriceSource(doge, SystemClock(), symbols=CONTRACT_CATALOG.symbols)


# -- FX ---------------------------------------------------------------------------------------
async def test_fx_rates_per_usd_for_the_ten_fiats(coingecko_server: CoinGeckoTestServer) -> None:
    coingecko_server.remove("bitcoin", "pln")
    async with httpx.AsyncClient() as client:
        fx = CoinGeckoFx(coingecko_settings(coingecko_server), client=client)

        rates = await fx.per_usd()
        await fx.aclose()
        assert not client.is_closed  # a shared client is the caller's

    btc = coingecko_server.prices["bitcoin"]
    usd = btc["usd"].quantize(Decimal("0.001"))
    assert rates[Fiat.USD] == Decimal(1)
    assert set(rates) == set(Fiat) - {Fiat.PLN}  # absent upstream, absent here
    for fiat in set(Fiat) - {Fiat.USD, Fiat.PLN}:
        assert rates[fiat] == btc[fiat.value.lower()].quantize(Decimal("0.001")) / usd
    assert abs(rates[Fiat.EUR] - Decimal("0.92")) < Decimal("0.0001")
    assert abs(rates[Fiat.AED] - Decimal("3.6725")) < Decimal("0.0001")
    assert coingecko_server.count("/api/v3/exchange_rates") == 1


async def test_fx_sends_the_key_and_raises_on_failures(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    with CoinGeckoTestServer(api_key=KEY, key_kind="pro") as server:
        monkeypatch.setenv("WALLETCORE_COINGECKO_URL", server.url + "/api/v3")
        monkeypatch.setenv("WALLETCORE_COINGECKO_API_KEY", KEY)
        monkeypatch.setenv("WALLETCORE_COINGECKO_API_KEY_KIND", "pro")
        fx = CoinGeckoFx.from_settings()
        try:
            assert (await fx.per_usd())[Fiat.GBP] > 0
            assert server.requests[-1].headers["x-cg-pro-api-key"] == KEY
            server.malformed(times=1)
            with pytest.raises(CoinGeckoError, match="not JSON"):
                await fx.per_usd()
            server.rate_limit(None, times=1)
            with pytest.raises(CoinGeckoError, match="HTTP 429 \\(error_code 429\\)"):
                await fx.per_usd()
            assert Fiat.BRL in await fx.per_usd()
        finally:
            await fx.aclose()


# -- the loopback server ----------------------------------------------------------------------
def test_the_server_answers_like_coingecko(coingecko_server: CoinGeckoTestServer) -> None:
    root = coingecko_server.url + "/api/v3"
    with httpx.Client(base_url=root) as http:
        assert http.get("/ping").json() == {"gecko_says": "(V3) To the Moon!"}
        missing = http.get("/simple/price", params={"ids": "bitcoin"})
        assert (missing.status_code, missing.json()) == (
            422,
            {"error": "Missing parameter vs_currencies"},
        )
        answer = http.get(
            "/simple/price", params={"ids": "bitcoin,no-such-coin", "vs_currencies": "usd,xyz"}
        ).json()
        assert answer == {"bitcoin": {"usd": 65000.12}}  # rounded without `precision`
        coingecko_server.rate_limit(120, times=1)
        limited = http.get("/exchange_rates")
        assert limited.status_code == 429 and limited.headers["retry-after"] == "120"
        assert limited.json()["status"]["error_code"] == 429
        assert http.get("/exchange_rates").json()["rates"]["btc"]["type"] == "crypto"
    assert coingecko_server.count("/api/v3/exchange_rates") == 2
