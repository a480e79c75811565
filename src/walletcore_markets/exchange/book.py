"""An order priced again from the order book before it is placed: what will be sent (`Plan`)
and what it should come to.

Rules:
- Holding the fixed leg: the asks are walked for a buy and the bids for a sell, for the
  crypto amount, or for the fiat amount crossed into the quote currency; the price is what
  the walk comes to, not the last trade. (The venue then checks the slippage limit on it,
  `walletcore.pricing.check_slippage`, before anything is sent.)
- Sent: a MARKET order by base quantity when the crypto leg is fixed; by quote amount
  (`quoteOrderQty`, ccxt's `createMarket*OrderWithCost`) when the fiat leg is fixed and the
  exchange supports it (`by_cost`), else by the walked quantity.
- Rounding: a fixed crypto amount is cut down to the market's lot step (never more than the
  fixed leg); a quote amount is cut to 8 places here and to the market's precision by ccxt.
  An amount under the market's minimum quantity or notional, or more than the book holds,
  is `OrderRejected` before anything is sent.
- Figures (an estimate here, a fill's in `outcomes`): crypto cut to the asset's decimals,
  fiat in full, price = fiat / crypto.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal, localcontext
from typing import Any

from walletcore.domain.errors import OrderRejected
from walletcore.domain.trade import Figures, FixedLeg, Order, Side
from walletcore_markets.ccxt_support import dec
from walletcore_markets.exchange.markets import Route


@dataclass(frozen=True, slots=True)
class Plan:
    """What will be sent: a base `amount` or a quote `cost`, and its book-walk estimate."""

    amount: Decimal | None
    cost: Decimal | None
    estimate: Figures


def plan(
    order: Order,
    route: Route,
    market: Mapping[str, Any],
    book: Mapping[str, Any],
    rate: Decimal,
    *,
    by_cost: bool,
) -> Plan:
    """The order to send on `market` (ccxt's market) priced on `book` (ccxt's order book),
    `rate` crossing the quote into the trade fiat (module rules)."""
    side = "asks" if order.side is Side.BUY else "bids"
    levels = [(dec(p), dec(q)) for p, q, *_ in book.get(side) or []]
    levels_ok = [(p, q) for p, q in levels if p is not None and q is not None and p > 0 and q > 0]
    step = dec(market.get("precision", {}).get("amount"))
    min_qty = dec(market.get("limits", {}).get("amount", {}).get("min"))
    min_cost = dec(market.get("limits", {}).get("cost", {}).get("min"))
    base, quote = order.symbol, route.quote
    with localcontext() as ctx:
        ctx.prec = 60
        if order.fixed_leg is FixedLeg.CRYPTO:
            qty = floor(order.fixed_amount, step)
            if qty <= 0 or (min_qty is not None and qty < min_qty):
                raise OrderRejected(
                    f"{order.fixed_amount} {base} is under the {route.market} market's "
                    f"minimum order of {min_qty or step} {base} after its lot step"
                )
            filled, cost = walk_base(levels_ok, qty)
            if filled < qty:
                raise OrderRejected(f"the {route.market} order book is too thin for {qty} {base}")
            if min_cost is not None and cost < min_cost:
                raise OrderRejected(
                    f"the order's value of {plain(cost)} {quote} is under the "
                    f"{route.market} market's minimum of {plain(min_cost)} {quote}"
                )
            return Plan(qty, None, figures(order, qty, cost * rate))
        spend = order.fixed_amount / rate if route.crossed else order.fixed_amount
        spend = spend.quantize(Decimal("1e-8"), rounding=ROUND_DOWN)
        if min_cost is not None and spend < min_cost:
            raise OrderRejected(
                f"{plain(spend)} {quote} is under the {route.market} market's minimum "
                f"order value of {plain(min_cost)} {quote}"
            )
        filled, spent = walk_quote(levels_ok, spend)
        if spent < spend or filled <= 0:
            raise OrderRejected(
                f"the {route.market} order book is too thin for {plain(spend)} {quote}"
            )
        if by_cost:
            return Plan(None, spend, figures(order, filled, spent * rate))
        qty = floor(filled, step)
        if qty <= 0 or (min_qty is not None and qty < min_qty):
            raise OrderRejected(
                f"{plain(spend)} {quote} buys less than the {route.market} market's minimum order"
            )
        return Plan(qty, None, figures(order, filled, spent * rate))


def by_cost(has: Mapping[str, Any], side: Side) -> bool:
    """Whether the exchange (its ccxt `has` map) places a market order of `side` by quote
    amount."""
    key = "createMarketBuyOrderWithCost" if side is Side.BUY else "createMarketSellOrderWithCost"
    return bool(has.get(key))


def floor(value: Decimal, step: Decimal | None) -> Decimal:
    if step is None or step <= 0:
        return value
    return (value // step) * step


def walk_base(levels: list[tuple[Decimal, Decimal]], qty: Decimal) -> tuple[Decimal, Decimal]:
    """(base taken, quote cost) of taking `qty` from the levels, best first."""
    filled = cost = Decimal(0)
    for price, available in levels:
        take = min(qty - filled, available)
        filled += take
        cost += take * price
        if filled >= qty:
            break
    return filled, cost


def walk_quote(levels: list[tuple[Decimal, Decimal]], quote: Decimal) -> tuple[Decimal, Decimal]:
    """(base taken, quote spent) of spending `quote` on the levels, best first; all of it
    unless the levels run out."""
    filled = spent = Decimal(0)
    for price, available in levels:
        left = quote - spent
        if available * price >= left:
            return filled + left / price, quote
        filled += available
        spent += available * price
    return filled, spent


def figures(order: Order, crypto: Decimal, fiat: Decimal) -> Figures:
    """Executed (or estimated) figures: crypto cut to the asset's decimals, fiat in full,
    price = fiat / crypto (to the current context's digits: 60 for an estimate here, the
    default 28 for a fill)."""
    crypto = crypto.quantize(Decimal(1).scaleb(-order.decimals), rounding=ROUND_DOWN)
    price = fiat / crypto if crypto > 0 else Decimal(0)
    return Figures(crypto, fiat, price)


def plain(value: Decimal) -> str:
    """A decimal as people write it: no exponent, no trailing zeros."""
    return f"{value.normalize():f}"


__all__ = ["Plan", "by_cost", "figures", "floor", "plain", "plan", "walk_base", "walk_quote"]
