"""The sandbox venue: every approve outcome on purpose, by trigger amount.

The fixed-leg amount the quote was asked for (its `cryptoAmount` or `fiatAmount`) decides:

| fixed-leg amount | approve answers | the trade | a later `/trade` poll |
|---|---|---|---|
| exactly 502 | 502 `Order rejected: ...` | `failed`, `failureReason` set | stays `failed` |
| exactly 504 | 504 (outcome unknown) | stays `executing` | `completed` |
| exactly 202 | 200 | `approved` (accepted, being worked) | `completed` |
| exactly 203 | 200 | `approved` (accepted, never settles) | stays `approved`; an approve after the quote lapsed cancels the order and expires it |
| any other | 200 | `completed` | unchanged |

Prices come from the price source it is handed (the container's: `WALLETCORE_PRICES`), never
a feed of its own: an order is priced when it is placed, and an order being worked (202) when
it fills, at a later poll. Before placing, a price that moved against the quote more than
`WALLETCORE_MAX_SLIPPAGE_PERCENT` is a rejection (`walletcore.pricing.check_slippage`).
The venue keeps no state: what it answers follows from the order and the price source.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from walletcore.domain.errors import OrderRejected, VenueTimeout
from walletcore.domain.trade import (
    Accepted,
    Figures,
    Fill,
    Order,
    OrderOutcome,
    Rejected,
    derive_figures,
)
from walletcore.ports import PriceSource, TradeVenue
from walletcore.pricing import check_slippage

REJECT = Decimal(502)
TIMEOUT = Decimal(504)
SETTLE_LATER = Decimal(202)
NEVER_SETTLE = Decimal(203)
REJECT_REASON = "sandbox venue rejects a fixed-leg amount of 502"


CANCELLED_REASON = "sandbox venue cancelled the order before it filled"


class SandboxVenue(TradeVenue):
    def __init__(self, prices: PriceSource, *, max_slippage_percent: Decimal | None = None) -> None:
        self._prices = prices
        self._slippage = max_slippage_percent

    async def execute(self, order: Order) -> Fill | Accepted:
        if order.fixed_amount == REJECT:
            raise OrderRejected(REJECT_REASON)
        figures = await self._price(order)
        if self._slippage is not None:
            check_slippage(order, figures.price, self._slippage)
        if order.fixed_amount == TIMEOUT:
            raise VenueTimeout()
        if order.fixed_amount in (SETTLE_LATER, NEVER_SETTLE):
            return Accepted(figures, reference=_reference(order))
        return Fill(figures, reference=_reference(order))

    async def status(self, order: Order) -> OrderOutcome:
        if order.fixed_amount == REJECT:
            return Rejected(REJECT_REASON)
        if order.fixed_amount == NEVER_SETTLE:
            return Accepted(await self._price(order), reference=_reference(order))
        return Fill(await self._price(order), reference=_reference(order))

    async def cancel(self, order: Order) -> OrderOutcome:
        """A never-settling order (203) stops with nothing traded; any other had filled."""
        if order.fixed_amount == REJECT:
            return Rejected(REJECT_REASON)
        if order.fixed_amount == NEVER_SETTLE:
            return Rejected(CANCELLED_REASON)
        return Fill(await self._price(order), reference=_reference(order))

    async def _price(self, order: Order) -> Figures:
        price = await self._prices.unit_price(order.symbol, order.fiat)
        return derive_figures(order.fixed_leg, order.fixed_amount, price, order.decimals)


def _reference(order: Order) -> str:
    return f"SBX-{order.trade_id[:12].upper()}"


def build(*, prices: PriceSource, settings: Any, **_: Any) -> SandboxVenue:
    """Entry point `walletcore.venues: sandbox`: prices through the container's source."""
    return SandboxVenue(prices, max_slippage_percent=settings.max_slippage_percent)
