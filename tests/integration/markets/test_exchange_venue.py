"""The exchange venue over ccxt's real `binance` client, against a loopback Binance spot API:
book-walk pricing, fills and their figures, idempotent client order ids, refusals, faults."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal

import pytest
from exchange_support import (
    API_KEY,
    SECRET,
    FakePrices,
    binance,
    make_order,
    make_venue,
    order_posts,
    venue_settings,
)

from walletcore.clock import ManualClock
from walletcore.domain.assets import Fiat
from walletcore.domain.errors import OrderRejected, PriceUnavailable, PricingTimeout, VenueTimeout
from walletcore.domain.trade import Accepted, Fill, FixedLeg, Rejected, Side, Unknown
from walletcore.secretfiles import ConfigurationError
from walletcore.settings import Settings
from walletcore_markets import exchange
from walletcore_markets.ccxt_support import ccxt_errors, exchange_error
from walletcore_markets.exchange import ExchangeSettings, ExchangeVenue
from walletcore_markets.exchange.errors import PORT_ERRORS, Failure, Stage, classify
from walletcore_markets.testing.binance_server import BinanceTestServer, Fault


@pytest.fixture
def server() -> Iterator[BinanceTestServer]:
    with binance() as running:
        yield running


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def venue(server: BinanceTestServer, clock: ManualClock) -> AsyncIterator[ExchangeVenue]:
    built = make_venue(server, clock=clock)
    yield built
    await built.aclose()


# -- fills ------------------------------------------------------------------------------
async def test_a_buy_fills_on_the_walked_book_cut_to_the_lot_step(
    venue: ExchangeVenue, server: BinanceTestServer
) -> None:
    # 0.700009 BTC is cut to the 0.00001 step: 0.5 at 100010, then 0.2 at 100020
    order = make_order("0.700009", quoted_price="100000")

    outcome = await venue.execute(order)

    assert isinstance(outcome, Fill)
    assert outcome.figures.crypto_amount == Decimal("0.7")
    assert outcome.figures.fiat_amount == Decimal(70009)
    assert outcome.figures.price == Decimal(70009) / Decimal("0.7")
    placed = server.orders()
    assert len(placed) == server.placed == 1
    assert outcome.reference == str(placed[0]["orderId"])
    assert placed[0]["clientOrderId"] == f"wc-{order.trade_id}"
    assert placed[0]["origQty"] == "0.70000000"
    # the book was consumed and the commission (0.1% of the base received) charged
    assert server.symbols["BTCUSDT"].asks[0] == (Decimal(100020), Decimal("0.8"))
    assert server.balances["BTC"] == Decimal("10.6993")
    assert server.balances["USDT"] == Decimal(1_000_000) - Decimal(70009)


async def test_a_fiat_fixed_sell_on_a_direct_market_sends_the_quote_amount(
    venue: ExchangeVenue, server: BinanceTestServer
) -> None:
    order = make_order(
        "5000", side=Side.SELL, fiat=Fiat.EUR, fixed_leg=FixedLeg.FIAT, quoted_price="92000"
    )

    outcome = await venue.execute(order)

    assert isinstance(outcome, Fill)
    placed = server.orders()[0]
    assert placed["symbol"] == "BTCEUR"
    assert placed["origQuoteOrderQty"] == "5000.00000000"
    # the exchange sells what 5000 EUR buys at the best bid, in whole lot steps
    assert outcome.figures.crypto_amount == Decimal("0.05435")
    assert outcome.figures.fiat_amount == Decimal("0.05435") * 91990
    assert outcome.figures.price == Decimal(91990)


async def test_a_fiat_without_its_market_crosses_through_the_usd_quote(
    server: BinanceTestServer,
) -> None:
    venue = make_venue(server, fiat_markets={"EUR": "USDT"})
    try:
        order = make_order("1000", fiat=Fiat.EUR, fixed_leg=FixedLeg.FIAT, quoted_price="92000")
        outcome = await venue.execute(order)
    finally:
        await venue.aclose()

    assert isinstance(outcome, Fill)
    placed = server.orders()[0]
    assert placed["symbol"] == "BTCUSDT"
    # 1000 EUR at 0.92 EUR per USDT is 1086.95 USDT (cut to the market's precision)
    assert placed["origQuoteOrderQty"] == "1086.95000000"
    cost_usdt = Decimal("0.01086") * 100010
    assert outcome.figures.crypto_amount == Decimal("0.01086")
    assert outcome.figures.fiat_amount == cost_usdt * Decimal("0.92")
    assert outcome.figures.fiat_amount <= Decimal(1000)


async def test_a_market_order_the_book_only_partly_fills_settles_on_the_part(
    venue: ExchangeVenue, server: BinanceTestServer
) -> None:
    server.fill_limit = Decimal("0.3")

    outcome = await venue.execute(make_order("0.7", quoted_price="100000"))

    assert server.orders()[0]["status"] == "EXPIRED"
    assert isinstance(outcome, Fill)
    assert outcome.figures.crypto_amount == Decimal("0.3")
    assert outcome.figures.fiat_amount == Decimal("0.3") * 100010


async def test_a_working_order_is_accepted_then_settled_by_status(
    venue: ExchangeVenue, server: BinanceTestServer
) -> None:
    server.hold_orders(2)
    order = make_order("0.7", quoted_price="100000")

    accepted = await venue.execute(order)
    assert isinstance(accepted, Accepted)
    assert accepted.figures.crypto_amount == Decimal("0.7")  # the book walk's estimate
    assert accepted.figures.fiat_amount == Decimal(70009)

    server.tick()
    halfway = await venue.status(order)
    assert isinstance(halfway, Accepted)
    assert halfway.figures.crypto_amount == Decimal("0.35")
    assert halfway.figures.fiat_amount == Decimal("0.35") * 100010

    server.tick()
    done = await venue.status(order)
    assert isinstance(done, Fill)
    assert done.figures.crypto_amount == Decimal("0.7")
    assert done.figures.fiat_amount == Decimal(70009)
    assert done.reference == accepted.reference


async def test_approve_waits_for_a_working_order_to_finish(server: BinanceTestServer) -> None:
    server.hold_orders(1)
    venue = make_venue(server, order_wait_seconds=2)

    async def fill_once_placed() -> None:
        while not server.placed:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # the venue has polled it as NEW meanwhile
        server.tick()

    filler = asyncio.create_task(fill_once_placed())
    try:
        outcome = await venue.execute(make_order("0.1", quoted_price="100000"))
    finally:
        await venue.aclose()
        await filler

    assert isinstance(outcome, Fill)
    assert outcome.figures.crypto_amount == Decimal("0.1")
    assert server.requests.count(("GET", "/api/v3/order")) >= 2  # the lookup, then polls


# -- idempotency and timeouts -------------------------------------------------------------
async def test_an_order_whose_answer_timed_out_is_found_and_never_placed_twice(
    venue: ExchangeVenue, server: BinanceTestServer
) -> None:
    server.inject("POST", "/api/v3/order", Fault(delay=1.5, after=True, times=1))
    order = make_order("0.2", quoted_price="100000")

    with pytest.raises(VenueTimeout):
        await venue.execute(order)
    assert server.placed == 1

    polled = await venue.status(order)
    assert isinstance(polled, Fill)
    assert polled.figures.crypto_amount == Decimal("0.2")
    assert polled.reference == str(server.orders()[0]["orderId"])

    again = await venue.execute(order)
    assert again == polled
    assert server.placed == 1
    assert order_posts(server) == 1


async def test_a_pricing_timeout_places_nothing(
    venue: ExchangeVenue, server: BinanceTestServer
) -> None:
    server.inject("GET", "/api/v3/depth", Fault(delay=1.5, times=1))

    with pytest.raises(PricingTimeout):
        await venue.execute(make_order("0.2", quoted_price="100000"))

    assert server.placed == 0
    assert order_posts(server) == 0


async def test_a_5xx_while_pricing_is_safe_to_retry(
    venue: ExchangeVenue, server: BinanceTestServer
) -> None:
    server.inject("GET", "/api/v3/depth", Fault(status=503, times=1))
    order = make_order("0.2", quoted_price="100000")

    with pytest.raises(PriceUnavailable):
        await venue.execute(order)
    assert order_posts(server) == 0

    assert isinstance(await venue.execute(order), Fill)  # the retry of approve
    assert server.placed == 1


async def test_a_5xx_while_ordering_is_unknown_until_the_order_cannot_appear(
    venue: ExchangeVenue, server: BinanceTestServer, clock: ManualClock
) -> None:
    unknown_error = {"code": -1000, "msg": "An unknown error occured while processing the request."}
    server.inject("POST", "/api/v3/order", Fault(status=500, body=unknown_error, times=1))
    order = make_order("0.2", quoted_price="100000", approved_at=clock.now())

    with pytest.raises(VenueTimeout):
        await venue.execute(order)

    assert server.placed == 0
    assert isinstance(await venue.status(order), Unknown)
    clock.advance(121)
    lost = await venue.status(order)
    assert isinstance(lost, Rejected)
    assert "never received" in lost.reason


async def test_status_of_an_unreachable_exchange_is_a_venue_timeout(
    venue: ExchangeVenue, server: BinanceTestServer
) -> None:
    order = make_order("0.2", quoted_price="100000")
    await venue.execute(order)
    server.inject("GET", "/api/v3/order", Fault(delay=1.5, times=1))

    with pytest.raises(VenueTimeout):
        await venue.status(order)


# -- refusals -----------------------------------------------------------------------------
async def test_insufficient_funds_is_rejected_with_a_clear_reason() -> None:
    with binance(balances={"USDT": Decimal(100)}) as server:
        venue = make_venue(server)
        try:
            with pytest.raises(OrderRejected) as caught:
                await venue.execute(make_order("0.01", quoted_price="100000"))
        finally:
            await venue.aclose()
        assert server.placed == 0
    assert caught.value.message == (
        "Order rejected: the exchange account's balance does not cover the order "
        "(Account has insufficient balance for requested action.)"
    )


@pytest.mark.parametrize(
    ("amount", "words"),
    [
        ("0.000004", "minimum order of 0.00001 BTC"),  # under LOT_SIZE's minimum
        ("0.00003", "minimum of 5 USDT"),  # 3 USDT, under NOTIONAL's minimum
    ],
)
async def test_an_amount_under_the_market_filters_is_refused_before_sending(
    venue: ExchangeVenue, server: BinanceTestServer, amount: str, words: str
) -> None:
    with pytest.raises(OrderRejected) as caught:
        await venue.execute(make_order(amount, quoted_price="100000"))

    assert words in caught.value.reason
    assert order_posts(server) == 0


async def test_a_filter_failure_at_the_exchange_is_rejected(
    venue: ExchangeVenue, server: BinanceTestServer
) -> None:
    await venue.start()  # markets loaded with a minimum notional of 5
    server.symbols["BTCUSDT"].min_notional = Decimal(100)

    with pytest.raises(OrderRejected) as caught:
        await venue.execute(make_order("0.0005", quoted_price="100000"))

    assert "Filter failure: NOTIONAL" in caught.value.reason
    assert order_posts(server) == 1
    assert server.placed == 0


async def test_a_closed_market_is_rejected(venue: ExchangeVenue, server: BinanceTestServer) -> None:
    await venue.start()
    server.set_status("BTCUSDT", "BREAK")

    with pytest.raises(OrderRejected) as caught:
        await venue.execute(make_order("0.1", quoted_price="100000"))

    assert caught.value.reason == "the market is closed on the exchange (Market is closed.)"
    assert server.placed == 0


async def test_a_market_listed_as_closed_is_rejected_before_sending(
    venue: ExchangeVenue, server: BinanceTestServer
) -> None:
    server.set_status("BTCUSDT", "BREAK")

    with pytest.raises(OrderRejected) as caught:
        await venue.execute(make_order("0.1", quoted_price="100000"))

    assert caught.value.reason == "the BTC/USDT market is closed on the exchange"
    assert order_posts(server) == 0


async def test_slippage_over_the_limit_is_rejected_and_nothing_placed(
    venue: ExchangeVenue, server: BinanceTestServer
) -> None:
    with pytest.raises(OrderRejected) as caught:
        await venue.execute(make_order("0.7", quoted_price="95000"))

    assert "over the slippage limit of 2%" in caught.value.reason
    assert order_posts(server) == 0


async def test_a_pair_the_exchange_does_not_list_is_rejected(venue: ExchangeVenue) -> None:
    with pytest.raises(OrderRejected) as caught:
        await venue.execute(make_order("1", symbol="DOGE", quoted_price="1"))

    assert "lists no market to trade DOGE for USD" in caught.value.reason


@pytest.mark.parametrize(
    ("key", "secret"),
    [(API_KEY, "x" + SECRET[1:]), ("Z" + API_KEY[1:], SECRET)],
    ids=["wrong-secret", "unknown-key"],
)
async def test_refused_credentials_are_rejected_without_a_secret_in_sight(
    server: BinanceTestServer, caplog: pytest.LogCaptureFixture, key: str, secret: str
) -> None:
    venue = make_venue(server, api_key=key, secret=secret)
    caplog.set_level(logging.DEBUG)
    try:
        with pytest.raises(OrderRejected) as caught:
            await venue.execute(make_order("0.1", quoted_price="100000"))
    finally:
        await venue.aclose()

    assert caught.value.reason == "the exchange refused the venue's credentials; nothing was placed"
    assert server.placed == 0
    assert "WALLETCORE_EXCHANGE_API_KEY" in caplog.text  # the operator is told what to check
    shown = f"{caught.value!s} {caught.value!r} {caplog.text}"
    for secret_text in {API_KEY, SECRET, key, secret}:
        assert secret_text not in shown
    assert "signature=" not in shown


async def test_a_skewed_clock_is_rejected_unless_the_time_difference_is_adjusted(
    server: BinanceTestServer,
) -> None:
    server.time_offset_ms = -30_000  # the exchange's clock is 30 s behind ours
    skewed = make_venue(server)
    adjusted = make_venue(server, adjust_for_time_difference=True)
    try:
        with pytest.raises(OrderRejected) as caught:
            await skewed.execute(make_order("0.1", quoted_price="100000"))
        outcome = await adjusted.execute(make_order("0.1", quoted_price="100000"))
    finally:
        await skewed.aclose()
        await adjusted.aclose()

    assert "timestamp" in caught.value.reason
    assert isinstance(outcome, Fill)
    assert server.placed == 1


# -- cancel -------------------------------------------------------------------------------
async def test_cancel_of_a_working_order_settles_what_traded(
    venue: ExchangeVenue, server: BinanceTestServer
) -> None:
    server.hold_orders(2)  # orders stay working, filling in two slices
    partly = make_order("0.2", quoted_price="100000")
    assert isinstance(await venue.execute(partly), Accepted)
    server.tick()  # its first slice of 0.1 trades
    untouched = make_order("0.4", quoted_price="100000")
    assert isinstance(await venue.execute(untouched), Accepted)

    nothing = await venue.cancel(untouched)
    part = await venue.cancel(partly)

    assert isinstance(nothing, Rejected)
    assert "cancelled" in nothing.reason
    assert isinstance(part, Fill)
    assert part.figures.crypto_amount == Decimal("0.1")
    assert part.figures.fiat_amount == Decimal("0.1") * 100010
    assert [o["status"] for o in server.orders()] == ["CANCELED", "CANCELED"]
    server.tick()
    assert isinstance(await venue.status(partly), Fill)  # nothing more trades after it


async def test_cancel_of_a_finished_or_unknown_order(venue: ExchangeVenue) -> None:
    filled = make_order("0.1", quoted_price="100000")
    fill = await venue.execute(filled)

    assert await venue.cancel(filled) == fill
    unknown = await venue.cancel(make_order("0.1", quoted_price="100000"))
    assert isinstance(unknown, Rejected)
    assert "no such order" in unknown.reason


# -- settings and the factory ---------------------------------------------------------------
def test_client_order_ids_are_deterministic_and_valid_for_binance(venue: ExchangeVenue) -> None:
    trade_id = "65f1c0ffee0123456789abcd"

    cid = venue.client_order_id(trade_id)

    assert cid == venue.client_order_id(trade_id) == f"wc-{trade_id}"
    assert re.fullmatch(r"[\.A-Z\:/a-z0-9_-]{1,36}", cid)


def test_settings_never_show_their_secrets(server: BinanceTestServer) -> None:
    settings = venue_settings(server, password="passphrase-123")

    shown = f"{settings!r} {settings!s} {settings.model_dump()}"

    assert API_KEY not in shown and SECRET not in shown and "passphrase-123" not in shown


async def test_build_reads_the_environment(
    server: BinanceTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WALLETCORE_EXCHANGE_API_KEY", API_KEY)
    monkeypatch.setenv("WALLETCORE_EXCHANGE_SECRET", SECRET)
    monkeypatch.setenv("WALLETCORE_EXCHANGE_URL", server.url)
    monkeypatch.setenv("WALLETCORE_EXCHANGE_FIAT_MARKETS", '{"GBP": "USDT"}')
    monkeypatch.setenv("WALLETCORE_EXCHANGE_ADJUST_FOR_TIME_DIFFERENCE", "false")

    venue = exchange.build(settings=Settings(), clock=ManualClock(), prices=FakePrices())
    try:
        outcome = await venue.execute(make_order("0.1", fiat=Fiat.GBP, quoted_price="79000"))
    finally:
        await venue.aclose()

    assert isinstance(outcome, Fill)
    assert outcome.figures.fiat_amount == Decimal("0.1") * 100010 * Decimal("0.79")


def test_build_names_the_missing_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WALLETCORE_EXCHANGE_API_KEY", raising=False)
    monkeypatch.delenv("WALLETCORE_EXCHANGE_SECRET", raising=False)

    with pytest.raises(ConfigurationError) as caught:
        exchange.build(settings=Settings(), clock=ManualClock(), prices=FakePrices())

    assert "WALLETCORE_EXCHANGE_API_KEY and WALLETCORE_EXCHANGE_SECRET" in str(caught.value)
    assert ExchangeSettings().id == "binance"


# -- what ccxt errors mean --------------------------------------------------------------------
def _binance(kind: str, code: int, msg: str) -> Exception:
    error: Exception = getattr(ccxt_errors(), kind)(f'binance {{"code":{code},"msg":"{msg}"}}')
    return error


@pytest.mark.parametrize(
    ("error", "failure"),
    [
        # on api.binance.com ccxt raises BadRequest for these; on other hosts InvalidNonce or
        # AuthenticationError: the code decides either way
        (
            _binance(
                "BadRequest", -1021, "Timestamp for this request is outside of the recvWindow."
            ),
            Failure.TIMESTAMP,
        ),
        (
            _binance(
                "InvalidNonce", -1021, "Timestamp for this request is outside of the recvWindow."
            ),
            Failure.TIMESTAMP,
        ),
        (
            _binance("BadRequest", -1022, "Signature for this request is not valid."),
            Failure.CREDENTIALS,
        ),
        (_binance("OperationRejected", -2011, "Unknown order sent."), Failure.NOT_FOUND),
        (
            _binance("OperationFailed", -1007, "Timeout waiting for response from backend server."),
            Failure.UNKNOWN,
        ),
        (_binance("ExchangeError", -1013, "Filter failure: LOT_SIZE"), Failure.REFUSED),
    ],
    ids=[
        "timestamp-spot",
        "timestamp",
        "signature-spot",
        "cancel-unknown-spot",
        "-1007",
        "lot-size",
    ],
)
def test_binance_answers_are_classified_by_their_code(error: Exception, failure: Failure) -> None:
    assert classify(error) is failure


def test_every_failure_is_one_of_the_ports_errors_at_every_stage() -> None:
    for stage in Stage:
        assert set(PORT_ERRORS[stage]) == set(Failure), stage
    # nothing was sent while pricing: no failure leaves the order's outcome unknown
    assert VenueTimeout not in PORT_ERRORS[Stage.PRICING].values()
    # a refusal placed nothing, whenever it came
    assert PORT_ERRORS[Stage.PLACING][Failure.REFUSED] is OrderRejected
    assert set(PORT_ERRORS[Stage.ASKING].values()) == {VenueTimeout}


def test_an_error_text_with_a_signed_url_shows_nothing_of_it() -> None:
    errors = ccxt_errors()
    text = f"binance GET http://h/api/v3/order?timestamp=1&signature=abc X-MBX-APIKEY {API_KEY}"

    assert exchange_error(errors.ExchangeNotAvailable(text + " 502 Bad Gateway")) == (None, None)
    assert classify(errors.ExchangeNotAvailable(text)) is Failure.UNKNOWN
    assert classify(errors.RequestTimeout(text)) is Failure.TIMEOUT
    insufficient = errors.InsufficientFunds(
        "binance Account has insufficient balance for requested action."
    )
    assert exchange_error(insufficient) == (
        None,
        "Account has insufficient balance for requested action.",
    )
    assert classify(insufficient) is Failure.REFUSED
