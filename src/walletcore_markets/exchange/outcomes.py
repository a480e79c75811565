"""What an order at the exchange (ccxt's order) comes to for the trade: its outcome and its
figures, and the fees logged with a fill.

Rules:
- Outcomes: a terminal order that executed anything is a `Fill` of what executed (a market
  order whose book ran out expires with the rest unfilled: the trade settles on the part);
  a working order (`WORKING`: new, partially filled) is `Accepted` with the figures so far;
  cancelled, expired or rejected with nothing executed is `Rejected`. Not found is
  `Unknown`, and `Rejected` once `lost_order_seconds` passed since the approval (the
  exchange refuses a request older than its `recvWindow`, so it can no longer appear).
- Figures of a fill: crypto = executed base quantity (cut to the asset's decimals), fiat =
  executed quote cost crossed at the rate of the moment it is read, price = fiat / crypto,
  reference = the exchange's order id. A working order with nothing executed shows the
  estimate it was placed on, else the quote's figures.
- Fees: the exchange's commission (Binance: on what the order receives, base on a buy and
  quote on a sell) is the operator's cost: the trade's figures are gross, and commissions
  are logged with each fill.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from walletcore.domain.trade import (
    Accepted,
    Figures,
    Fill,
    Order,
    OrderOutcome,
    Rejected,
    Unknown,
    derive_figures,
)
from walletcore_markets.ccxt_support import dec
from walletcore_markets.exchange.book import figures, plain

log = logging.getLogger("walletcore.venue.exchange")

#: ccxt's statuses of an order still being worked (None: not reported yet).
WORKING = (None, "open", "canceling")

#: Why an order that ended with nothing traded was rejected, by ccxt's status.
_ENDED = {
    "canceled": "the order was cancelled on the exchange before anything traded",
    "expired": "the order expired on the exchange with nothing traded (no liquidity)",
    "rejected": "the exchange rejected the order",
}


def executed(found: Mapping[str, Any]) -> Decimal:
    """The base quantity the order executed so far."""
    return dec(found.get("filled")) or Decimal(0)


def outcome(
    order: Order, found: Mapping[str, Any], estimate: Figures | None, rate: Decimal | None
) -> Fill | Accepted | Rejected:
    """The outcome of the exchange's order `found` (module rules). `rate`: one quote unit in
    the trade fiat, needed when it executed anything; `estimate`: the figures it was placed
    on, if this process placed it."""
    state = found.get("status")
    filled = executed(found)
    reference = str(found["id"]) if found.get("id") is not None else None
    if filled > 0:
        assert rate is not None, "an order that executed is crossed at a rate"
        cost = dec(found.get("cost"))
        if cost is None:
            cost = filled * (dec(found.get("average")) or Decimal(0))
        so_far = figures(order, filled, cost * rate)
    else:
        so_far = estimate or quoted(order)
    if state in WORKING:
        return Accepted(so_far, reference=reference)
    if filled > 0:
        if state != "closed":
            log.info(
                "trade %s: order %s ended %s after executing %s of it; settled on that part",
                order.trade_id,
                reference,
                state,
                plain(filled),
            )
        log_fees(order, found)
        return Fill(so_far, reference=reference)
    return Rejected(
        _ENDED.get(str(state), f"the exchange ended the order ({state}) with nothing traded")
    )


def not_found(order: Order, now: datetime, lost_order_seconds: float) -> OrderOutcome:
    """The outcome of an order the exchange has no record of (module rules)."""
    waited = (now - order.approved_at).total_seconds()
    if waited > lost_order_seconds:
        return Rejected("the exchange never received the order; nothing traded")
    return Unknown()


def quoted(order: Order) -> Figures:
    """Figures of a working order with nothing executed yet: the quote's."""
    price = order.quoted_price or Decimal(0)
    if price <= 0:
        return Figures(None, None, Decimal(0))
    return derive_figures(order.fixed_leg, order.fixed_amount, price, order.decimals)


def log_fees(order: Order, found: Mapping[str, Any]) -> None:
    fees = found.get("fees") or ([found["fee"]] if found.get("fee") else [])
    paid = ", ".join(
        f"{plain(dec(f.get('cost')) or Decimal(0))} {f.get('currency')}" for f in fees if f
    )
    log.info(
        "trade %s: order %s filled %s %s for %s (commission %s)",
        order.trade_id,
        found.get("id"),
        found.get("filled"),
        order.symbol,
        found.get("cost"),
        paid or "not reported",
    )


__all__ = ["WORKING", "executed", "log_fees", "not_found", "outcome", "quoted"]
