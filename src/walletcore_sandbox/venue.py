"""The sandbox venue: every approve outcome on purpose, by trigger amount.

The fixed-leg amount the quote was asked for (its `cryptoAmount` or `fiatAmount`) decides:

| fixed-leg amount | approve answers | the trade | a later `/trade` poll |
|---|---|---|---|
| exactly 502 | 502 `Order rejected: ...` | `failed`, `failureReason` set | stays `failed` |
| exactly 504 | 504 (outcome unknown) | stays `executing` | `completed` |
| exactly 202 | 200 | `approved` (accepted, being worked) | `completed` |
| exactly 203 | 200 | `approved` (accepted, never settles) | stays `approved`; an approve after the quote lapsed expires it |
| any other | 200 | `completed` | unchanged |

The venue is stateless: it prices an order at the sandbox price of the minute it was
approved, so a poll after a restart settles it with the same figures.
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
from walletcore.ports import TradeVenue
from walletcore_sandbox.prices import sandbox_unit_price

REJECT = Decimal(502)
TIMEOUT = Decimal(504)
SETTLE_LATER = Decimal(202)
NEVER_SETTLE = Decimal(203)
REJECT_REASON = "sandbox venue rejects a fixed-leg amount of 502"


class SandboxVenue(TradeVenue):
    async def execute(self, order: Order) -> Fill | Accepted:
        if order.fixed_amount == REJECT:
            raise OrderRejected(REJECT_REASON)
        figures = self._price(order)
        if order.fixed_amount == TIMEOUT:
            raise VenueTimeout()
        if order.fixed_amount in (SETTLE_LATER, NEVER_SETTLE):
            return Accepted(figures, reference=_reference(order))
        return Fill(figures, reference=_reference(order))

    async def status(self, order: Order) -> OrderOutcome:
        if order.fixed_amount == REJECT:
            return Rejected(REJECT_REASON)
        if order.fixed_amount == NEVER_SETTLE:
            return Accepted(self._price(order), reference=_reference(order))
        return Fill(self._price(order), reference=_reference(order))

    @staticmethod
    def _price(order: Order) -> Figures:
        price = sandbox_unit_price(order.symbol, order.fiat, order.approved_at)
        return derive_figures(order.fixed_leg, order.fixed_amount, price, order.decimals)


def _reference(order: Order) -> str:
    return f"SBX-{order.trade_id[:12].upper()}"


def build(**_: Any) -> SandboxVenue:
    """Entry point `walletcore.venues: sandbox`."""
    return SandboxVenue()
