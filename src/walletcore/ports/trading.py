"""Ports of the market: indicative prices, and the venue approved orders execute at.

Their values are the domain's (`walletcore.domain.trade`: `Order`, `Fill`, `Accepted`,
`OrderOutcome`), re-exported here with `PriceMap`.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Protocol

from walletcore.domain.assets import Fiat
from walletcore.domain.trade import Accepted, Fill, Order, OrderOutcome

#: symbol -> price fiat -> price. Floats appear here and nowhere else (the `/prices` map).
PriceMap = Mapping[str, Mapping[str, float]]


class PriceSource(Protocol):
    """Indicative fiat prices: the `/prices` map and the unit price a quote is made at."""

    async def price_map(self) -> PriceMap:
        """Last known prices for every symbol in USD, EUR, GBP, CAD; a missing fiat is 0."""
        ...

    async def unit_price(self, symbol: str, fiat: Fiat) -> Decimal:
        """Price of one whole coin in `fiat`.

        Raises `PriceUnavailable` (502) when there is no usable price, `PricingTimeout` (504)
        when the upstream did not answer in time.
        """
        ...


class TradeVenue(Protocol):
    """Where approved orders execute. The order's fixed leg is held; the other leg moves."""

    async def execute(self, order: Order) -> Fill | Accepted:
        """Price the order again and execute it.

        Returns a `Fill` (settled) or `Accepted` (taken, being worked). Raises
        `OrderRejected` (nothing traded), `PriceUnavailable` (nothing placed, safe to retry)
        or `VenueTimeout` / `PricingTimeout` (outcome unknown).
        """
        ...

    async def status(self, order: Order) -> OrderOutcome:
        """What became of an order placed earlier, found by its trade id."""
        ...

    async def cancel(self, order: Order) -> OrderOutcome:
        """Stop an order the venue is still working (its trade's quote lapsed).

        Returns what became of it: `Rejected` when nothing (more) will trade and nothing
        traded, a `Fill` of what traded before the cancel took (the trade settles on it),
        `Accepted` when it could not be stopped yet. Raises like `status` when the venue
        cannot be asked; the trade then stays as it is.
        """
        ...


__all__ = [
    "Accepted",
    "Fill",
    "Order",
    "OrderOutcome",
    "PriceMap",
    "PriceSource",
    "TradeVenue",
]
