"""Which market of the exchange an order trades on (`Route`), and what one unit of its quote
currency is worth in the trade fiat (`Rate`).

Rules:
- A trade in `fiat` trades on the spot market `SYMBOL/<quote>`, where the quote is
  `fiat_markets[fiat]` when set, else the fiat itself when the exchange lists `SYMBOL/FIAT`
  (direct), else `usd_quote` (USDT) crossed into the fiat. None of them listed: the order
  is `OrderRejected`, naming the markets looked for.
- Crossing: at the rate of one quote unit in the fiat, by default the container's price
  source's `unit_price(USDT, fiat)` (`rate_from_prices`), or `per_usd()[fiat]` of an
  FxSource (`rate_from_fx`, the `fx` setting; the quote counted at par with USD). A rate of
  0 or less, or none, prices nothing (`PriceUnavailable`).
- A stablecoin whose only market is its inverse (`EUR/USDT`) is not traded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from walletcore.domain.assets import Fiat
from walletcore.domain.errors import OrderRejected, PriceUnavailable
from walletcore.domain.trade import Order
from walletcore.ports import PriceSource
from walletcore_markets.exchange.settings import ExchangeSettings
from walletcore_markets.fx import FxSource

#: One unit of an exchange quote currency in a trade fiat.
Rate = Callable[[str, Fiat], Awaitable[Decimal]]


@dataclass(frozen=True, slots=True)
class Route:
    """The market an order trades on, and whether its quote must be crossed to the fiat."""

    market: str
    quote: str
    fiat: Fiat

    @property
    def crossed(self) -> bool:
        return self.quote != self.fiat.value


def route(order: Order, markets: Mapping[str, Any], settings: ExchangeSettings) -> Route:
    """The market `order` trades on among the exchange's `markets` (module rules)."""
    chosen = settings.fiat_markets.get(order.fiat)
    quotes = [chosen] if chosen else [order.fiat.value, settings.usd_quote]
    for quote in quotes:
        name = f"{order.symbol}/{quote}"
        market = markets.get(name)
        if market is not None and market.get("spot", True):
            return Route(name, quote, order.fiat)
    raise OrderRejected(
        f"the exchange lists no market to trade {order.symbol} for {order.fiat.value} "
        f"({' or '.join(f'{order.symbol}/{q}' for q in quotes)})"
    )


async def crossing_rate(route: Route, rate_of: Rate) -> Decimal:
    """One unit of the route's quote in its fiat: 1 on a direct market."""
    if not route.crossed:
        return Decimal(1)
    rate = await rate_of(route.quote, route.fiat)
    if rate <= 0:
        raise PriceUnavailable(
            f"No usable {route.quote}/{route.fiat.value} rate; retry with backoff"
        )
    return rate


def rate_from_prices(prices: PriceSource) -> Rate:
    """One quote unit in the fiat, as the price source prices that coin (USDT, USDC)."""

    async def rate(quote: str, fiat: Fiat) -> Decimal:
        return await prices.unit_price(quote, fiat)

    return rate


def rate_from_fx(fx: FxSource) -> Rate:
    """One quote unit in the fiat, the quote (a USD stablecoin) counted at par with USD."""

    async def rate(quote: str, fiat: Fiat) -> Decimal:
        try:
            table = await fx.per_usd()
        except Exception:  # noqa: BLE001 - an fx upstream failure prices nothing
            raise PriceUnavailable(f"No usable {fiat.value} rate; retry with backoff") from None
        value = Decimal(1) if fiat is Fiat.USD else table.get(fiat)
        if value is None:
            raise PriceUnavailable(f"No usable {fiat.value} rate; retry with backoff")
        return value

    return rate


__all__ = ["Rate", "Route", "crossing_rate", "rate_from_fx", "rate_from_prices", "route"]
