"""The sandbox venue: its documented trigger amounts, and the figures it fills at."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from walletcore.clock import ManualClock
from walletcore.domain.assets import Fiat
from walletcore.domain.errors import OrderRejected, VenueTimeout
from walletcore.domain.trade import Accepted, Fill, FixedLeg, Order, Rejected, Side
from walletcore.testing import CONTRACT_CATALOG, FixedPrices
from walletcore_sandbox.prices import SandboxPriceSource, sandbox_unit_price
from walletcore_sandbox.venue import CANCELLED_REASON, SandboxVenue

APPROVED = datetime(2026, 1, 1, 12, 1, 15, tzinfo=UTC)


def order(
    amount: str,
    leg: FixedLeg = FixedLeg.FIAT,
    *,
    symbol: str = "BTC",
    decimals: int = 8,
    side: Side = Side.SELL,
    fiat: Fiat = Fiat.USD,
) -> Order:
    return Order(
        trade_id="0123456789abcdef01234567",
        side=side,
        asset_id=1,
        symbol=symbol,
        decimals=decimals,
        fiat=fiat,
        fixed_leg=leg,
        fixed_amount=Decimal(amount),
        approved_at=APPROVED,
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(APPROVED)


@pytest.fixture
def venue(clock: ManualClock) -> SandboxVenue:
    return SandboxVenue(
        SandboxPriceSource(clock, symbols=CONTRACT_CATALOG.symbols, interval_seconds=1)
    )


@pytest.mark.parametrize("leg", list(FixedLeg))
@pytest.mark.parametrize("amount", ["502", "502.00"])
async def test_502_is_rejected_and_stays_rejected(
    venue: SandboxVenue, leg: FixedLeg, amount: str
) -> None:
    with pytest.raises(OrderRejected) as raised:
        await venue.execute(order(amount, leg))
    assert raised.value.status == 502
    assert raised.value.message.startswith("Order rejected: ")
    assert raised.value.reason and raised.value.message == f"Order rejected: {raised.value.reason}"
    assert await venue.status(order(amount, leg)) == Rejected(raised.value.reason)


@pytest.mark.parametrize("leg", list(FixedLeg))
async def test_504_times_out_then_settles_on_a_poll(venue: SandboxVenue, leg: FixedLeg) -> None:
    with pytest.raises(VenueTimeout) as raised:
        await venue.execute(order("504", leg))
    assert raised.value.status == 504
    settled = await venue.status(order("504", leg))
    assert isinstance(settled, Fill)


@pytest.mark.parametrize("leg", list(FixedLeg))
async def test_202_is_accepted_then_settles_at_the_same_figures(
    venue: SandboxVenue, leg: FixedLeg
) -> None:
    accepted = await venue.execute(order("202", leg))
    assert isinstance(accepted, Accepted)
    settled = await venue.status(order("202", leg))
    assert isinstance(settled, Fill) and settled.figures == accepted.figures
    assert settled.reference == accepted.reference


@pytest.mark.parametrize("amount", ["0.5", "1", "5020", "50.2", "2020", "503", "501.99"])
async def test_any_other_amount_fills_at_once(venue: SandboxVenue, amount: str) -> None:
    assert isinstance(await venue.execute(order(amount)), Fill)


async def test_a_crypto_leg_is_held_and_fiat_derived_at_the_approval_price(
    venue: SandboxVenue,
) -> None:
    fill = await venue.execute(order("0.5", FixedLeg.CRYPTO))
    assert isinstance(fill, Fill)
    price = sandbox_unit_price("BTC", Fiat.USD, APPROVED)
    assert fill.figures.crypto_amount == Decimal("0.5")
    assert fill.figures.price == price and fill.figures.fiat_amount == Decimal("0.5") * price


async def test_a_fiat_leg_is_held_and_crypto_derived_within_the_assets_decimals(
    venue: SandboxVenue,
) -> None:
    fill = await venue.execute(
        order("1000", FixedLeg.FIAT, symbol="ETH", decimals=18, fiat=Fiat.EUR)
    )
    assert isinstance(fill, Fill)
    price = sandbox_unit_price("ETH", Fiat.EUR, APPROVED)
    crypto = fill.figures.crypto_amount
    assert fill.figures.fiat_amount == Decimal(1000) and fill.figures.price == price
    assert crypto is not None and crypto * price <= 1000
    assert -crypto.as_tuple().exponent <= 18  # type: ignore[operator]


async def test_the_venue_is_stateless(venue: SandboxVenue, clock: ManualClock) -> None:
    """A poll after a restart (a new venue on the same prices) settles with the same figures
    and reference."""
    first = await venue.execute(order("0.5", FixedLeg.CRYPTO))
    again = await SandboxVenue(SandboxPriceSource(clock, symbols=CONTRACT_CATALOG.symbols)).status(
        order("0.5", FixedLeg.CRYPTO)
    )
    assert first == again
    assert first.reference == "SBX-0123456789AB"


async def test_prices_follow_the_source_at_the_moment_of_the_order(
    venue: SandboxVenue, clock: ManualClock
) -> None:
    now = await venue.execute(order("0.5", FixedLeg.CRYPTO))
    clock.advance(60)
    moved = await venue.execute(order("0.5", FixedLeg.CRYPTO))
    assert now.figures.price != moved.figures.price
    assert moved.figures.price == sandbox_unit_price(
        "BTC", Fiat.USD, APPROVED + timedelta(minutes=1)
    )


async def test_an_embedders_price_source_is_the_one_the_venue_fills_at() -> None:
    """Overriding the price source moves the fills too: no hidden second feed."""
    venue = SandboxVenue(FixedPrices({"BTC": Decimal(50_000)}))
    fill = await venue.execute(order("0.5", FixedLeg.CRYPTO))
    assert fill.figures.price == Decimal(50_000)
    assert fill.figures.fiat_amount == Decimal(25_000)


@pytest.mark.parametrize(
    ("side", "quoted", "limit", "refused"),
    [
        (Side.SELL, "51000", "1", True),  # 50,000 is 1.96 % under the quote
        (Side.SELL, "51000", "2", False),
        (Side.SELL, "49000", "0", False),  # in the seller's favour
        (Side.BUY, "49000", "2", True),  # 2.04 % over the quote
        (Side.BUY, "51000", "0", False),  # in the buyer's favour
    ],
)
async def test_a_reprice_past_the_slippage_limit_is_a_rejection(
    side: Side, quoted: str, limit: str, refused: bool
) -> None:
    venue = SandboxVenue(FixedPrices({"BTC": Decimal(50_000)}), max_slippage_percent=Decimal(limit))
    placed = replace(order("0.5", FixedLeg.CRYPTO, side=side), quoted_price=Decimal(quoted))
    if refused:
        with pytest.raises(OrderRejected, match="slippage limit"):
            await venue.execute(placed)
    else:
        assert isinstance(await venue.execute(placed), Fill)


async def test_cancel_stops_a_never_settling_order_and_finds_the_others_filled(
    venue: SandboxVenue,
) -> None:
    assert await venue.cancel(order("203")) == Rejected(CANCELLED_REASON)
    assert isinstance(await venue.cancel(order("202")), Fill)
    assert isinstance(await venue.cancel(order("502")), Rejected)
