"""The exchange venue (`TradeVenue`): an approval priced again on the book, checked against
the slippage limit, then placed as a MARKET order; its status and cancel asked by client
order id; and the factory of entry point `walletcore.venues: exchange`.

Approve, step by step: the order of this trade's client order id is looked for first (found:
it is used, never placed again: `orders`); else its market is chosen (`markets`), priced on
the book holding the fixed leg (`book`), `walletcore.pricing.check_slippage` runs on that
price in the trade fiat, and only then is it placed and waited for up to
`order_wait_seconds` (`orders`); what it came to is `outcomes`'. A failed request is the
port's error its stage makes it (`errors`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from walletcore.chainplugins import env_name
from walletcore.domain.errors import OrderRejected, VenueTimeout
from walletcore.domain.trade import Accepted, Figures, Fill, Order, OrderOutcome, Rejected, Unknown
from walletcore.ports import Clock, PriceSource, TradeVenue
from walletcore.pricing import check_slippage
from walletcore.secretfiles import ConfigurationError
from walletcore_markets.ccxt_support import close_quietly, load_fx, make_exchange
from walletcore_markets.exchange import book, orders, outcomes
from walletcore_markets.exchange.errors import ExchangeErrors, secrets_of
from walletcore_markets.exchange.markets import (
    Rate,
    Route,
    crossing_rate,
    rate_from_fx,
    rate_from_prices,
    route,
)
from walletcore_markets.exchange.settings import ExchangeSettings

if TYPE_CHECKING:
    from ccxt.async_support.base.exchange import Exchange  # type: ignore[import-untyped]

log = logging.getLogger("walletcore.venue.exchange")


class ExchangeVenue(TradeVenue):
    def __init__(
        self,
        exchange: Exchange,
        settings: ExchangeSettings,
        *,
        clock: Clock,
        rate: Rate,
        max_slippage_percent: Decimal,
        resources: tuple[object, ...] = (),
    ) -> None:
        self._exchange = exchange
        #: what this venue closes with itself (an FxSource it was built with)
        self._resources = resources
        self._settings = settings
        self._clock = clock
        self._rate_of = rate
        self._max_slippage = max_slippage_percent
        self._errors = ExchangeErrors(*secrets_of(settings))
        #: orders placed by this process (the tests' and the operator's view; not state)
        self.placed = 0

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        try:
            await self._exchange.load_markets()
        except Exception as exc:  # noqa: BLE001 - loaded again on the first order
            log.warning("exchange markets not loaded yet (%s)", self._errors.describe(exc))

    async def aclose(self) -> None:
        await self._exchange.close()
        for resource in self._resources:
            await close_quietly(resource)

    def client_order_id(self, trade_id: str) -> str:
        """The order's id at the exchange: the same for every attempt of one trade."""
        return orders.client_order_id(self._settings.client_order_prefix, trade_id)

    # -- the port -------------------------------------------------------------------------
    async def execute(self, order: Order) -> Fill | Accepted:
        errors, exchange = self._errors, self._exchange
        markets = await errors.pricing(exchange.load_markets())
        chosen = route(order, markets, self._settings)
        cid = self.client_order_id(order.trade_id)
        existing = await errors.pricing(orders.fetch(exchange, chosen, cid))
        if existing is not None:
            log.info(
                "trade %s: order %s found at the exchange; not placed again", order.trade_id, cid
            )
            outcome = await self._outcome(order, chosen, existing, None)
        else:
            market = markets[chosen.market]
            if market.get("active") is False:
                raise OrderRejected(f"the {chosen.market} market is closed on the exchange")
            rate = await crossing_rate(chosen, self._rate_of)
            depth = self._settings.book_depth
            order_book = await errors.pricing(exchange.fetch_order_book(chosen.market, depth))
            plan = book.plan(
                order,
                chosen,
                market,
                order_book,
                rate,
                by_cost=book.by_cost(exchange.has, order.side),
            )
            check_slippage(order, plan.estimate.price, self._max_slippage)
            placed = await self._place(order, chosen, plan, cid)
            placed = await orders.wait(
                exchange,
                chosen,
                cid,
                placed,
                self._settings.order_wait_seconds,
                errors.describe,
            )
            outcome = await self._outcome(order, chosen, placed, plan.estimate, rate)
        if isinstance(outcome, Rejected):
            raise OrderRejected(outcome.reason)
        if isinstance(outcome, Unknown):  # pragma: no cover - an order in hand is known
            raise VenueTimeout()
        return outcome

    async def status(self, order: Order) -> OrderOutcome:
        errors = self._errors
        markets = await errors.asking(self._exchange.load_markets())
        try:
            chosen = route(order, markets, self._settings)
        except OrderRejected as exc:
            return Rejected(exc.reason)  # no market: nothing could have been placed
        cid = self.client_order_id(order.trade_id)
        found = await errors.asking(orders.fetch(self._exchange, chosen, cid))
        if found is None:
            return outcomes.not_found(order, self._clock.now(), self._settings.lost_order_seconds)
        return await self._outcome(order, chosen, found, None)

    async def cancel(self, order: Order) -> OrderOutcome:
        errors = self._errors
        markets = await errors.asking(self._exchange.load_markets())
        try:
            chosen = route(order, markets, self._settings)
        except OrderRejected as exc:
            return Rejected(exc.reason)
        cid = self.client_order_id(order.trade_id)
        try:
            cancelled = await orders.cancel(self._exchange, chosen, cid)
        except Exception as exc:  # noqa: BLE001 - classified by `errors`
            errors.cancelling(exc, cid)
            # unknown to cancel: never placed, or already finished; ask what it became
            cancelled = await errors.asking(orders.fetch(self._exchange, chosen, cid))
        if cancelled is None:
            return Rejected("the exchange has no such order; nothing traded")
        return await self._outcome(order, chosen, cancelled, None)

    # -- helpers ----------------------------------------------------------------------------
    async def _place(
        self, order: Order, chosen: Route, plan: book.Plan, cid: str
    ) -> dict[str, Any]:
        try:
            placed = await orders.place(self._exchange, order, chosen, plan, cid)
        except Exception as exc:  # noqa: BLE001 - every ccxt and transport error classified
            raise self._errors.placing(exc, order.trade_id, cid) from None
        self.placed += 1
        return placed

    async def _outcome(
        self,
        order: Order,
        chosen: Route,
        found: Mapping[str, Any],
        estimate: Figures | None,
        rate: Decimal | None = None,
    ) -> Fill | Accepted | Rejected:
        """What the order `found` came to; an order that executed anything is crossed at
        `rate`, read now when not given."""
        if rate is None and outcomes.executed(found) > 0:
            rate = await self._errors.asking(crossing_rate(chosen, self._rate_of))
        return outcomes.outcome(order, found, estimate, rate)


def build(*, settings: Any, clock: Clock, prices: PriceSource, **_: Any) -> ExchangeVenue:
    """Entry point `walletcore.venues: exchange`."""
    venue_settings = ExchangeSettings()
    missing = [
        env_name(ExchangeSettings, name)
        for name in ("api_key", "secret")
        if getattr(venue_settings, name) is None
    ]
    if missing:
        raise ConfigurationError(f"the exchange venue needs {' and '.join(missing)}")
    fx = None if venue_settings.fx == "prices" else load_fx(venue_settings.fx)
    return ExchangeVenue(
        exchange_for(venue_settings),
        venue_settings,
        clock=clock,
        rate=rate_from_prices(prices) if fx is None else rate_from_fx(fx),
        max_slippage_percent=settings.max_slippage_percent,
        resources=(fx,) if fx is not None else (),
    )


def exchange_for(settings: ExchangeSettings) -> Exchange:
    """The ccxt client the settings describe (nothing is fetched)."""

    def reveal(value: SecretStr | None) -> str | None:
        return value.get_secret_value() if value is not None else None

    return make_exchange(
        settings.id,
        api_key=reveal(settings.api_key),
        secret=reveal(settings.secret),
        password=reveal(settings.password),
        url=settings.url,
        timeout_seconds=settings.timeout_seconds,
        sandbox=settings.sandbox,
        adjust_for_time_difference=settings.adjust_for_time_difference,
        rate_limit_ms=settings.rate_limit_ms,
    )


__all__ = ["ExchangeVenue", "build", "exchange_for"]
