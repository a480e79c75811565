"""The sandbox venue: its documented trigger amounts, and the figures it fills at."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from walletcore.domain.assets import Fiat
from walletcore.domain.errors import OrderRejected, VenueTimeout
from walletcore.domain.trade import Accepted, Fill, FixedLeg, Order, Rejected, Side
from walletcore_sandbox.prices import sandbox_unit_price
from walletcore_sandbox.venue import SandboxVenue

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
def venue() -> SandboxVenue:
    return SandboxVenue()


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


async def test_the_venue_is_stateless(venue: SandboxVenue) -> None:
    """A poll after a restart (a new venue) settles with the same figures and reference."""
    first = await venue.execute(order("0.5", FixedLeg.CRYPTO))
    again = await SandboxVenue().status(order("0.5", FixedLeg.CRYPTO))
    assert first == again
    assert first.reference == "SBX-0123456789AB"


async def test_prices_follow_the_approval_minute(venue: SandboxVenue) -> None:
    now = await venue.execute(order("0.5", FixedLeg.CRYPTO))
    next_minute = replace(
        order("0.5", FixedLeg.CRYPTO), approved_at=APPROVED + timedelta(minutes=1)
    )
    moved = await venue.execute(next_minute)
    assert now.figures.price != moved.figures.price
    assert moved.figures.price == sandbox_unit_price(
        "BTC", Fiat.USD, APPROVED + timedelta(minutes=1)
    )
