"""An order's requests at the exchange, by its client order id: place it, find it, wait for
it, cancel it (ccxt's answers and errors as they are; `errors` reads them).

Rules:
- Idempotency: the client order id is the prefix + the trade id (Binance allows
  `^[.A-Z:/a-z0-9_-]{1,36}$`): the same for every attempt of one trade. Before placing, the
  venue asks for it: an order found is used, never placed again.
- Placing: a MARKET order, by quote amount (`Plan.cost`) or by base quantity
  (`Plan.amount`).
- Waiting: a working order is asked about every `POLL_SECONDS` until it finishes or the wait
  is over; a poll that fails keeps what was known (a later `/trade` poll settles it).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from walletcore.domain.trade import Order, Side
from walletcore_markets.exchange.book import Plan
from walletcore_markets.exchange.errors import Failure, classify
from walletcore_markets.exchange.markets import Route
from walletcore_markets.exchange.outcomes import WORKING

if TYPE_CHECKING:
    from ccxt.async_support.base.exchange import Exchange  # type: ignore[import-untyped]

log = logging.getLogger("walletcore.venue.exchange")

_CLIENT_ID_CHARS = re.compile(r"[^.A-Za-z0-9:/_-]")
#: Seconds between two reads of a working order while approve waits for it.
POLL_SECONDS = 0.2


def client_order_id(prefix: str, trade_id: str) -> str:
    """The order's id at the exchange: the same for every attempt of one trade."""
    raw = _CLIENT_ID_CHARS.sub("", prefix + trade_id)
    return raw[:36]


async def place(
    exchange: Exchange, order: Order, route: Route, plan: Plan, cid: str
) -> dict[str, Any]:
    """Send the MARKET order `plan` describes under the client order id `cid`."""
    params: dict[str, Any] = {"clientOrderId": cid}
    if plan.cost is not None:
        cost = float(plan.cost)
        if order.side is Side.BUY:
            placed = await exchange.create_market_buy_order_with_cost(route.market, cost, params)
        else:
            placed = await exchange.create_market_sell_order_with_cost(route.market, cost, params)
    else:
        assert plan.amount is not None
        placed = await exchange.create_order(
            route.market, "market", order.side.value, float(plan.amount), None, params
        )
    result: dict[str, Any] = placed
    return result


async def fetch(exchange: Exchange, route: Route, cid: str) -> dict[str, Any] | None:
    """The order of this client order id, or None when the exchange has none."""
    try:
        found: dict[str, Any] = await exchange.fetch_order(
            None, route.market, {"clientOrderId": cid}
        )
    except Exception as exc:
        if classify(exc) is Failure.NOT_FOUND:
            return None
        raise
    return found


async def wait(
    exchange: Exchange,
    route: Route,
    cid: str,
    placed: dict[str, Any],
    seconds: float,
    describe: Callable[[BaseException], str],
) -> dict[str, Any]:
    """Poll a working order until it finishes or `seconds` pass; the order as last read."""
    deadline = asyncio.get_running_loop().time() + seconds
    current = placed
    while current.get("status") in WORKING:
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            break
        await asyncio.sleep(min(POLL_SECONDS, left))
        try:
            found = await fetch(exchange, route, cid)
        except Exception as exc:  # noqa: BLE001 - keep what we have; a poll settles it
            log.info("order %s not read while waiting (%s)", cid, describe(exc))
            break
        if found is not None:
            current = found
    return current


async def cancel(exchange: Exchange, route: Route, cid: str) -> dict[str, Any] | None:
    """Cancel the order of this client order id; the order as the exchange answered."""
    cancelled: dict[str, Any] | None = await exchange.cancel_order(
        None, route.market, {"clientOrderId": cid}
    )
    return cancelled


__all__ = ["POLL_SECONDS", "cancel", "client_order_id", "fetch", "place", "wait"]
