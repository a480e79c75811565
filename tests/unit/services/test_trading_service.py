"""TradingService against scripted venues and price sources: every outcome an upstream can give."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from walletcore.domain.assets import Fiat
from walletcore.domain.errors import (
    DomainError,
    OrderRejected,
    PriceUnavailable,
    PricingTimeout,
    VenueTimeout,
)
from walletcore.domain.ids import new_id
from walletcore.domain.trade import (
    Accepted,
    Figures,
    Fill,
    FixedLeg,
    Order,
    OrderOutcome,
    Rejected,
    TradeStatus,
    Unknown,
)
from walletcore.ports import PriceMap
from walletcore_sandbox.venue import SandboxVenue

from ..conftest import Core, CoreFactory, CountingVenue

S = TradeStatus
FIGURES = Figures(Decimal("0.5"), Decimal(33000), Decimal(66000))


class ScriptedVenue(SandboxVenue):
    """Answers `execute` and `status` with what the test scripted (an outcome or an error)."""

    def __init__(self) -> None:
        self.on_execute: Any = Fill(FIGURES, reference="R-1")
        self.on_status: Any = Fill(FIGURES, reference="R-1")

    async def execute(self, order: Order) -> Fill | Accepted:
        if isinstance(self.on_execute, BaseException):
            raise self.on_execute
        return self.on_execute  # type: ignore[no-any-return]

    async def status(self, order: Order) -> OrderOutcome:
        if isinstance(self.on_status, BaseException):
            raise self.on_status
        return self.on_status  # type: ignore[no-any-return]


class ScriptedPrices:
    def __init__(self, price: Any = Decimal(66000)) -> None:
        self.price = price

    async def price_map(self) -> PriceMap:
        return {}

    async def unit_price(self, symbol: str, fiat: Fiat) -> Decimal:
        if isinstance(self.price, BaseException):
            raise self.price
        return self.price  # type: ignore[no-any-return]


@pytest.fixture
async def scripted(make_core: CoreFactory) -> tuple[Core, ScriptedVenue]:
    venue = ScriptedVenue()
    return await make_core(venue=CountingVenue(venue)), venue


async def approve(core: Core, trade_id: str) -> Any:
    return await core.trading.approve(core.caller(), user_id=core.user_id, trade_id=trade_id)


async def poll(core: Core, trade_id: str) -> Any:
    return await core.trading.get(core.caller(), user_id=core.user_id, trade_id=trade_id)


async def test_the_order_holds_the_fixed_leg(scripted: tuple[Core, ScriptedVenue]) -> None:
    core, _ = scripted
    by_fiat = await core.sell(fiat_amount="1000.50", fiat="EUR")
    await approve(core, by_fiat.trade_id)
    order = core.venue.executed[-1]
    assert (order.fixed_leg, order.fixed_amount, order.fiat) == (
        FixedLeg.FIAT,
        Decimal("1000.50"),
        Fiat.EUR,
    )
    assert (order.trade_id, order.symbol, order.decimals) == (by_fiat.trade_id, "BTC", 8)
    assert order.approved_at == core.clock.now()


async def test_a_fill_completes_with_executed_figures(scripted: tuple[Core, ScriptedVenue]) -> None:
    core, _ = scripted
    trade = await core.sell(crypto_amount="0.5")
    done = await approve(core, trade.trade_id)
    assert done.status is S.COMPLETED and done.figures == FIGURES and done.reference == "R-1"
    assert done.quote == trade.quote
    assert await core.stored(trade) == done


async def test_a_rejection_fails_the_trade_with_its_reason(
    scripted: tuple[Core, ScriptedVenue],
) -> None:
    core, venue = scripted
    venue.on_execute = OrderRejected("insufficient liquidity")
    trade = await core.sell(crypto_amount="0.5")
    with pytest.raises(OrderRejected) as raised:
        await approve(core, trade.trade_id)
    assert (raised.value.status, raised.value.message) == (
        502,
        "Order rejected: insufficient liquidity",
    )
    stored = await core.stored(trade)
    assert stored.status is S.FAILED and stored.failure_reason == "insufficient liquidity"
    assert stored.executed is None


async def test_no_price_at_the_venue_reopens_the_quote(
    scripted: tuple[Core, ScriptedVenue],
) -> None:
    """Nothing was placed: a 502 that is not a rejection, and the quote may be approved again."""
    core, venue = scripted
    venue.on_execute = PriceUnavailable()
    trade = await core.sell(crypto_amount="0.5")
    with pytest.raises(PriceUnavailable) as raised:
        await approve(core, trade.trade_id)
    assert raised.value.status == 502 and not raised.value.message.startswith("Order rejected")
    stored = await core.stored(trade)
    assert stored.status is S.OPEN and stored.approved_at is None
    venue.on_execute = Fill(FIGURES)
    assert (await approve(core, trade.trade_id)).status is S.COMPLETED


@pytest.mark.parametrize(
    "error",
    [VenueTimeout(), PricingTimeout(), RuntimeError("connection reset"), TimeoutError()],
    ids=repr,
)
async def test_an_unknown_outcome_is_504_and_the_trade_stays_executing(
    scripted: tuple[Core, ScriptedVenue], error: BaseException
) -> None:
    core, venue = scripted
    venue.on_execute = error
    trade = await core.sell(crypto_amount="0.5")
    with pytest.raises(VenueTimeout) as raised:
        await approve(core, trade.trade_id)
    assert raised.value.status == 504
    assert "connection reset" not in raised.value.message  # no internal detail leaks
    assert (await core.stored(trade)).status is S.EXECUTING
    with pytest.raises(DomainError) as again:
        await approve(core, trade.trade_id)
    assert again.value.status == 409
    assert len(core.venue.executed) == 1


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        (Unknown(), S.EXECUTING),
        (Accepted(FIGURES), S.APPROVED),
        (Rejected("expired at the venue"), S.FAILED),
        (Fill(FIGURES), S.COMPLETED),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, TradeStatus) else v.value,
)
async def test_polling_an_executing_trade_asks_the_venue(
    scripted: tuple[Core, ScriptedVenue], outcome: OrderOutcome, status: TradeStatus
) -> None:
    core, venue = scripted
    venue.on_execute = VenueTimeout()
    trade = await core.sell(crypto_amount="0.5")
    with pytest.raises(VenueTimeout):
        await approve(core, trade.trade_id)
    venue.on_status = outcome
    polled = await poll(core, trade.trade_id)
    assert polled.status is status
    assert await core.stored(trade) == polled
    if status is S.FAILED:
        assert polled.failure_reason == "expired at the venue"


async def test_a_poll_that_cannot_reach_the_venue_shows_the_stored_trade(
    scripted: tuple[Core, ScriptedVenue],
) -> None:
    core, venue = scripted
    venue.on_execute = Accepted(FIGURES)
    trade = await core.sell(crypto_amount="0.5")
    approved = await approve(core, trade.trade_id)
    venue.on_status = RuntimeError("venue down")
    assert await poll(core, trade.trade_id) == approved


async def test_settled_trades_are_not_polled_at_the_venue(
    scripted: tuple[Core, ScriptedVenue],
) -> None:
    core, _ = scripted
    trade = await core.sell(crypto_amount="0.5")
    await approve(core, trade.trade_id)
    await poll(core, trade.trade_id)
    await approve(core, trade.trade_id)  # replay
    assert core.venue.polled == [] and len(core.venue.executed) == 1


@pytest.mark.parametrize(
    ("price", "status"),
    [(PriceUnavailable(), 502), (PricingTimeout(), 504), (Decimal(0), 502), (Decimal(-1), 502)],
    ids=repr,
)
async def test_no_usable_price_quotes_nothing(
    make_core: CoreFactory, price: Any, status: int
) -> None:
    core = await make_core(prices=ScriptedPrices(price))
    with pytest.raises(DomainError) as raised:
        await core.sell(crypto_amount="0.5")
    assert raised.value.status == status
    assert await core.trading.list(core.caller(), user_id=core.user_id) == []


async def test_a_fiat_amount_too_small_for_one_base_unit_is_refused(make_core: CoreFactory) -> None:
    core = await make_core(prices=ScriptedPrices(Decimal(1000000000000)))
    with pytest.raises(DomainError) as raised:
        await core.sell(fiat_amount="0.01")
    assert raised.value.status == 400


async def test_quote_lifetime_and_page_size_follow_the_settings(make_core: CoreFactory) -> None:
    core = await make_core(quote_ttl_seconds=30, trades_page_size=3)
    trade = await core.sell(crypto_amount="0.5")
    assert trade.quote.expires_at - trade.created_at == timedelta(seconds=30)
    for _ in range(4):
        core.clock.advance(1)
        await core.sell(crypto_amount="0.1")
    assert len(await core.trading.list(core.caller(), user_id=core.user_id)) == 3


async def test_an_asset_disabled_after_quoting_cannot_be_approved(core: Core) -> None:
    trade = await core.sell(crypto_amount="0.5")
    core.client = replace(core.client, enabled_assets=(2,))
    with pytest.raises(DomainError) as raised:
        await approve(core, trade.trade_id)
    assert raised.value.status == 403
    assert (await core.stored(trade)).status is S.OPEN and not core.venue.executed


async def test_unknown_users_are_404(core: Core) -> None:
    for call in (
        core.trading.sell(core.caller(), user_id=new_id(), asset_id=1, crypto_amount="1"),
        core.trading.list(core.caller(), user_id=new_id()),
    ):
        with pytest.raises(DomainError) as raised:
            await call
        assert raised.value.status == 404


@pytest.mark.parametrize("field", ["user_id", "trade_id"])
@pytest.mark.parametrize("action", ["approve", "cancel", "get"])
async def test_malformed_ids_are_400(core: Core, field: str, action: str) -> None:
    body = {"user_id": core.user_id, "trade_id": new_id(), field: "not-an-id"}
    with pytest.raises(DomainError) as raised:
        await getattr(core.trading, action)(core.caller(), **body)
    assert raised.value.status == 400


async def test_listing_expires_lapsed_quotes_of_that_user_only(core: Core, make_user: Any) -> None:
    mine = await core.sell(crypto_amount="0.5")
    other_id = await make_user(core.storage, core.clock, core.client.client_id)
    theirs = await core.trading.sell(core.caller(), user_id=other_id, asset_id=1, crypto_amount="1")
    core.clock.advance(60)
    listed = await core.trading.list(core.caller(), user_id=core.user_id)
    assert [(t.trade_id, t.status, t.approved_at) for t in listed] == [
        (mine.trade_id, S.EXPIRED, None)
    ]
    assert listed[0].completed_at == mine.quote.expires_at
    assert (await core.stored(theirs)).status is S.OPEN  # untouched until its own user reads it
