"""The exchange venue: approved orders execute as MARKET orders on the operator's own
exchange account through ccxt (`WALLETCORE_VENUE=exchange`, settings `WALLETCORE_EXCHANGE_*`).

Rules:
- Markets: a trade in `fiat` trades on `SYMBOL/<quote>`, where the quote is
  `fiat_markets[fiat]` when set, else the fiat itself when the exchange lists
  `SYMBOL/FIAT` (direct), else `usd_quote` (USDT) crossed into the fiat at the rate of one
  quote unit in that fiat: by default the container's price source's `unit_price(USDT,
  fiat)`, or `per_usd()[fiat]` of an FxSource (`fx` setting; the quote counted at par with
  USD). A stablecoin whose only market is its inverse (`EUR/USDT`) is not traded.
- Approve: the order is priced again from the order book holding the fixed leg (asks for a
  buy, bids for a sell, walked for the crypto amount, or for the fiat amount crossed into
  the quote), `walletcore.pricing.check_slippage` runs on that price in the trade fiat, and
  only then is a MARKET order placed: by base quantity when the crypto leg is fixed, by
  quote amount (`quoteOrderQty`, ccxt's `createMarket*OrderWithCost`) when the fiat leg is
  fixed and the exchange supports it, else by the walked quantity.
- Rounding: a fixed crypto amount is cut down to the market's lot step (never more than the
  fixed leg); a quote amount is cut to the market's precision by ccxt. An amount under the
  market's minimum quantity or notional is refused before anything is sent. Executed
  crypto is cut to the asset's decimals. Fiat figures keep full precision.
- Fees: the exchange's commission (Binance: on what the order receives, base on a buy and
  quote on a sell) is the operator's cost: the trade's figures are the executed quantity
  and its quote cost, gross; commissions are logged with the fill.
- Figures of a fill: crypto = executed base quantity, fiat = executed quote cost (crossed
  at the rate of the moment it is read), price = fiat / crypto, reference = the exchange's
  order id.
- Idempotency: the client order id is `client_order_prefix` + the trade id (Binance allows
  `^[.A-Z:/a-z0-9_-]{1,36}$`). Before placing, the venue asks for it: an order found is
  used, never placed again.
- Outcomes: a terminal order that executed anything is a `Fill` of what executed (a market
  order whose book ran out expires with the rest unfilled: the trade settles on the part);
  a working order (NEW, PARTIALLY_FILLED) is `Accepted` with the figures so far, after up
  to `order_wait_seconds` of waiting for it to finish; cancelled, expired or rejected with
  nothing executed is `Rejected`; not found yet is `Unknown`, and `Rejected` once
  `lost_order_seconds` passed since the approval (the exchange refuses a request older
  than its `recvWindow`, so it can no longer appear).
- Errors: an exchange refusal (balance, filters, closed market, unknown symbol) is
  `OrderRejected` with a plain reason and the exchange's own message, never a key, URL or
  signature. Refused credentials or timestamp are `OrderRejected` too (nothing was placed;
  a retry cannot succeed before the operator acts) and log an operator warning. A timeout
  or network error before the order is sent is `PricingTimeout` (timeout) or
  `PriceUnavailable` (safe to approve again); while or after sending it, `VenueTimeout`:
  the trade stays `executing` and `status` settles it by the client order id.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal, localcontext
from typing import TYPE_CHECKING, Any

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.chainplugins import env_name
from walletcore.domain.assets import Fiat
from walletcore.domain.errors import (
    DomainError,
    OrderRejected,
    PriceUnavailable,
    PricingTimeout,
    VenueTimeout,
)
from walletcore.domain.trade import (
    Accepted,
    Figures,
    Fill,
    FixedLeg,
    Order,
    OrderOutcome,
    Rejected,
    Side,
    Unknown,
    derive_figures,
)
from walletcore.ports import Clock, PriceSource, TradeVenue
from walletcore.pricing import check_slippage
from walletcore.secretfiles import ConfigurationError
from walletcore_markets.ccxt_support import (
    Failure,
    ccxt_errors,
    classify,
    close_quietly,
    dec,
    exchange_error,
    load_fx,
    make_exchange,
    scrub,
)
from walletcore_markets.fx import FxSource

if TYPE_CHECKING:
    from ccxt.async_support.base.exchange import Exchange  # type: ignore[import-untyped]

log = logging.getLogger("walletcore.venue.exchange")

#: One unit of an exchange quote currency in a trade fiat.
Rate = Callable[[str, Fiat], Awaitable[Decimal]]

_CLIENT_ID_CHARS = re.compile(r"[^.A-Za-z0-9:/_-]")
_POLL_SECONDS = 0.2


class ExchangeSettings(BaseSettings):
    """Settings of the exchange venue (`WALLETCORE_EXCHANGE_` + the field's name)."""

    model_config = SettingsConfigDict(env_prefix="WALLETCORE_EXCHANGE_", extra="ignore")

    #: ccxt's id of the exchange
    id: str = "binance"
    api_key: SecretStr | None = None
    secret: SecretStr | None = None
    #: some exchanges' API passphrase
    password: SecretStr | None = None
    #: another scheme and host for every API URL of the exchange (a testnet, a proxy, a
    #: loopback server); each URL keeps its path
    url: str | None = None
    #: ccxt's sandbox (testnet) URLs of the exchange
    sandbox: bool = False
    #: trade fiat -> the quote currency it trades against (e.g. `{"EUR": "EUR", "GBP":
    #: "USDT"}`); unset: the fiat when `SYMBOL/FIAT` is listed, else `usd_quote`
    fiat_markets: dict[Fiat, str] = Field(default_factory=dict)
    #: the USD stable quote a fiat without a direct market crosses through
    usd_quote: str = "USDT"
    #: `prices` (the container's price source prices one quote unit in the fiat) or an
    #: FxSource: `coingecko` or `module:factory` (the quote counted at par with USD)
    fx: str = "prices"
    #: how long one exchange request may take
    timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    #: how long approve waits for a working order to finish before answering `approved`
    order_wait_seconds: float = Field(default=5.0, ge=0, le=300)
    #: order book levels read to price an order
    book_depth: int = Field(default=100, ge=5, le=5000)
    #: an order still not found this long after its approval was never placed
    lost_order_seconds: float = Field(default=120.0, gt=0)
    client_order_prefix: str = Field(default="wc-", max_length=8, pattern=r"^[.A-Za-z0-9:/_-]*$")
    #: ask the exchange's clock once and sign with its time (ccxt `adjustForTimeDifference`)
    adjust_for_time_difference: bool = True
    #: ccxt's client-side throttle, milliseconds per unit of request weight (binance: 50,
    #: i.e. 1200 weight a minute; its spot limit is 6000); unset: ccxt's; 0: off
    rate_limit_ms: float | None = Field(default=None, ge=0)


@dataclass(frozen=True, slots=True)
class Route:
    """The market an order trades on, and whether its quote must be crossed to the fiat."""

    market: str
    quote: str
    fiat: Fiat

    @property
    def crossed(self) -> bool:
        return self.quote != self.fiat.value


@dataclass(frozen=True, slots=True)
class _Plan:
    """What will be sent: a base `amount` or a quote `cost`, and its book-walk estimate."""

    amount: Decimal | None
    cost: Decimal | None
    estimate: Figures


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
        self._secrets = tuple(
            s.get_secret_value()
            for s in (settings.api_key, settings.secret, settings.password)
            if s is not None
        )
        #: orders placed by this process (the tests' and the operator's view; not state)
        self.placed = 0

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        try:
            await self._exchange.load_markets()
        except Exception as exc:  # noqa: BLE001 - loaded again on the first order
            log.warning("exchange markets not loaded yet (%s)", self._describe(exc))

    async def aclose(self) -> None:
        await self._exchange.close()
        for resource in self._resources:
            await close_quietly(resource)

    def client_order_id(self, trade_id: str) -> str:
        """The order's id at the exchange: the same for every attempt of one trade."""
        raw = _CLIENT_ID_CHARS.sub("", self._settings.client_order_prefix + trade_id)
        return raw[:36]

    # -- the port -------------------------------------------------------------------------
    async def execute(self, order: Order) -> Fill | Accepted:
        markets = await self._pricing(self._exchange.load_markets())
        route = self._route(order, markets)
        cid = self.client_order_id(order.trade_id)
        existing = await self._pricing(self._fetch(route, cid))
        if existing is not None:
            log.info(
                "trade %s: order %s found at the exchange; not placed again", order.trade_id, cid
            )
            outcome = await self._outcome(order, route, existing, None)
        else:
            market = markets[route.market]
            if market.get("active") is False:
                raise OrderRejected(f"the {route.market} market is closed on the exchange")
            rate = await self._rate(route)
            plan = await self._plan(order, route, market, rate)
            check_slippage(order, plan.estimate.price, self._max_slippage)
            placed = await self._place(order, route, plan, cid)
            placed = await self._wait(route, cid, placed)
            outcome = await self._outcome(order, route, placed, plan.estimate, rate)
        if isinstance(outcome, Rejected):
            raise OrderRejected(outcome.reason)
        if isinstance(outcome, Unknown):  # pragma: no cover - an order in hand is known
            raise VenueTimeout()
        return outcome

    async def status(self, order: Order) -> OrderOutcome:
        markets = await self._asking(self._exchange.load_markets())
        try:
            route = self._route(order, markets)
        except OrderRejected as exc:
            return Rejected(exc.reason)  # no market: nothing could have been placed
        found = await self._asking(self._fetch(route, self.client_order_id(order.trade_id)))
        if found is None:
            return self._not_found(order)
        return await self._outcome(order, route, found, None)

    async def cancel(self, order: Order) -> OrderOutcome:
        markets = await self._asking(self._exchange.load_markets())
        try:
            route = self._route(order, markets)
        except OrderRejected as exc:
            return Rejected(exc.reason)
        cid = self.client_order_id(order.trade_id)
        try:
            cancelled: dict[str, Any] | None = await self._exchange.cancel_order(
                None, route.market, {"clientOrderId": cid}
            )
        except Exception as exc:  # noqa: BLE001 - classified below
            failure = classify(exc)
            if failure in (Failure.TIMEOUT, Failure.UNKNOWN):
                raise VenueTimeout() from None
            if failure is not Failure.NOT_FOUND:
                log.warning("cancel of %s refused (%s)", cid, self._describe(exc))
            # unknown to cancel: never placed, or already finished; ask what it became
            cancelled = await self._asking(self._fetch(route, cid))
        if cancelled is None:
            return Rejected("the exchange has no such order; nothing traded")
        return await self._outcome(order, route, cancelled, None)

    # -- markets and prices -----------------------------------------------------------------
    def _route(self, order: Order, markets: Mapping[str, Any]) -> Route:
        chosen = self._settings.fiat_markets.get(order.fiat)
        quotes = [chosen] if chosen else [order.fiat.value, self._settings.usd_quote]
        for quote in quotes:
            name = f"{order.symbol}/{quote}"
            market = markets.get(name)
            if market is not None and market.get("spot", True):
                return Route(name, quote, order.fiat)
        raise OrderRejected(
            f"the exchange lists no market to trade {order.symbol} for {order.fiat.value} "
            f"({' or '.join(f'{order.symbol}/{q}' for q in quotes)})"
        )

    async def _rate(self, route: Route) -> Decimal:
        if not route.crossed:
            return Decimal(1)
        rate = await self._rate_of(route.quote, route.fiat)
        if rate <= 0:
            raise PriceUnavailable(
                f"No usable {route.quote}/{route.fiat.value} rate; retry with backoff"
            )
        return rate

    async def _plan(
        self, order: Order, route: Route, market: Mapping[str, Any], rate: Decimal
    ) -> _Plan:
        book = await self._pricing(
            self._exchange.fetch_order_book(route.market, self._settings.book_depth)
        )
        side = "asks" if order.side is Side.BUY else "bids"
        levels = [(dec(p), dec(q)) for p, q, *_ in book.get(side) or []]
        levels_ok = [
            (p, q) for p, q in levels if p is not None and q is not None and p > 0 and q > 0
        ]
        step = dec(market.get("precision", {}).get("amount"))
        min_qty = dec(market.get("limits", {}).get("amount", {}).get("min"))
        min_cost = dec(market.get("limits", {}).get("cost", {}).get("min"))
        base, quote = order.symbol, route.quote
        with localcontext() as ctx:
            ctx.prec = 60
            if order.fixed_leg is FixedLeg.CRYPTO:
                qty = _floor(order.fixed_amount, step)
                if qty <= 0 or (min_qty is not None and qty < min_qty):
                    raise OrderRejected(
                        f"{order.fixed_amount} {base} is under the {route.market} market's "
                        f"minimum order of {min_qty or step} {base} after its lot step"
                    )
                filled, cost = _walk_base(levels_ok, qty)
                if filled < qty:
                    raise OrderRejected(
                        f"the {route.market} order book is too thin for {qty} {base}"
                    )
                if min_cost is not None and cost < min_cost:
                    raise OrderRejected(
                        f"the order's value of {_plain(cost)} {quote} is under the "
                        f"{route.market} market's minimum of {_plain(min_cost)} {quote}"
                    )
                return _Plan(qty, None, _figures(order, qty, cost * rate))
            spend = order.fixed_amount / rate if route.crossed else order.fixed_amount
            spend = spend.quantize(Decimal("1e-8"), rounding=ROUND_DOWN)
            if min_cost is not None and spend < min_cost:
                raise OrderRejected(
                    f"{_plain(spend)} {quote} is under the {route.market} market's minimum "
                    f"order value of {_plain(min_cost)} {quote}"
                )
            filled, spent = _walk_quote(levels_ok, spend)
            if spent < spend or filled <= 0:
                raise OrderRejected(
                    f"the {route.market} order book is too thin for {_plain(spend)} {quote}"
                )
            if self._by_cost(order.side):
                return _Plan(None, spend, _figures(order, filled, spent * rate))
            qty = _floor(filled, step)
            if qty <= 0 or (min_qty is not None and qty < min_qty):
                raise OrderRejected(
                    f"{_plain(spend)} {quote} buys less than the {route.market} market's minimum order"
                )
            return _Plan(qty, None, _figures(order, filled, spent * rate))

    def _by_cost(self, side: Side) -> bool:
        has = self._exchange.has
        key = (
            "createMarketBuyOrderWithCost" if side is Side.BUY else "createMarketSellOrderWithCost"
        )
        return bool(has.get(key))

    # -- orders -----------------------------------------------------------------------------
    async def _place(self, order: Order, route: Route, plan: _Plan, cid: str) -> dict[str, Any]:
        params: dict[str, Any] = {"clientOrderId": cid}
        exchange = self._exchange
        try:
            if plan.cost is not None:
                cost = float(plan.cost)
                if order.side is Side.BUY:
                    placed = await exchange.create_market_buy_order_with_cost(
                        route.market, cost, params
                    )
                else:
                    placed = await exchange.create_market_sell_order_with_cost(
                        route.market, cost, params
                    )
            else:
                assert plan.amount is not None
                placed = await exchange.create_order(
                    route.market, "market", order.side.value, float(plan.amount), None, params
                )
        except Exception as exc:  # noqa: BLE001 - every ccxt and transport error classified
            failure = classify(exc)
            if failure not in (Failure.REFUSED, Failure.CREDENTIALS, Failure.TIMESTAMP):
                log.warning(
                    "trade %s: order %s sent, outcome unknown (%s); it stays executing",
                    order.trade_id,
                    cid,
                    self._describe(exc),
                )
                raise VenueTimeout() from None
            raise OrderRejected(self._refusal(failure, exc)) from None
        self.placed += 1
        result: dict[str, Any] = placed
        return result

    async def _wait(self, route: Route, cid: str, placed: dict[str, Any]) -> dict[str, Any]:
        """Poll a working order until it finishes or `order_wait_seconds` pass."""
        deadline = asyncio.get_running_loop().time() + self._settings.order_wait_seconds
        current = placed
        while current.get("status") in (None, "open", "canceling"):
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            await asyncio.sleep(min(_POLL_SECONDS, left))
            try:
                found = await self._fetch(route, cid)
            except Exception as exc:  # noqa: BLE001 - keep what we have; a poll settles it
                log.info("order %s not read while waiting (%s)", cid, self._describe(exc))
                break
            if found is not None:
                current = found
        return current

    async def _fetch(self, route: Route, cid: str) -> dict[str, Any] | None:
        """The order of this client order id, or None when the exchange has none."""
        try:
            found: dict[str, Any] = await self._exchange.fetch_order(
                None, route.market, {"clientOrderId": cid}
            )
        except Exception as exc:
            if classify(exc) is Failure.NOT_FOUND:
                return None
            raise
        return found

    async def _outcome(
        self,
        order: Order,
        route: Route,
        found: Mapping[str, Any],
        estimate: Figures | None,
        rate: Decimal | None = None,
    ) -> Fill | Accepted | Rejected:
        state = found.get("status")
        filled = dec(found.get("filled")) or Decimal(0)
        reference = str(found["id"]) if found.get("id") is not None else None
        if filled > 0:
            if rate is None:
                rate = await self._asking(self._rate(route))
            cost = dec(found.get("cost"))
            if cost is None:
                cost = filled * (dec(found.get("average")) or Decimal(0))
            figures = _figures(order, filled, cost * rate)
        else:
            figures = estimate or _quoted(order)
        if state in (None, "open", "canceling"):
            return Accepted(figures, reference=reference)
        if filled > 0:
            if state != "closed":
                log.info(
                    "trade %s: order %s ended %s after executing %s of it; settled on that part",
                    order.trade_id,
                    reference,
                    state,
                    _plain(filled),
                )
            self._log_fees(order, found)
            return Fill(figures, reference=reference)
        reasons = {
            "canceled": "the order was cancelled on the exchange before anything traded",
            "expired": "the order expired on the exchange with nothing traded (no liquidity)",
            "rejected": "the exchange rejected the order",
        }
        return Rejected(
            reasons.get(str(state), f"the exchange ended the order ({state}) with nothing traded")
        )

    def _not_found(self, order: Order) -> OrderOutcome:
        waited = (self._clock.now() - order.approved_at).total_seconds()
        if waited > self._settings.lost_order_seconds:
            return Rejected("the exchange never received the order; nothing traded")
        return Unknown()

    def _log_fees(self, order: Order, found: Mapping[str, Any]) -> None:
        fees = found.get("fees") or ([found["fee"]] if found.get("fee") else [])
        paid = ", ".join(
            f"{_plain(dec(f.get('cost')) or Decimal(0))} {f.get('currency')}" for f in fees if f
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

    # -- errors -----------------------------------------------------------------------------
    async def _pricing(self, call: Awaitable[Any]) -> Any:
        """Await an exchange call made before any order is sent: its failures place nothing."""
        try:
            return await call
        except DomainError:
            raise
        except Exception as exc:  # noqa: BLE001 - every ccxt and transport error classified
            failure = classify(exc)
            if failure is Failure.TIMEOUT:
                raise PricingTimeout() from None
            if failure in (Failure.CREDENTIALS, Failure.TIMESTAMP):
                raise OrderRejected(self._refusal(failure, exc)) from None
            log.warning(
                "exchange unavailable while pricing (%s); nothing placed", self._describe(exc)
            )
            raise PriceUnavailable(
                "The exchange could not price the order now; retry with backoff"
            ) from None

    async def _asking(self, call: Awaitable[Any]) -> Any:
        """Await an exchange call of `status`/`cancel`: a failure is `VenueTimeout`."""
        try:
            return await call
        except DomainError:
            raise
        except Exception as exc:  # noqa: BLE001
            log.warning("exchange could not be asked (%s)", self._describe(exc))
            raise VenueTimeout() from None

    def _refusal(self, failure: Failure, exc: BaseException) -> str:
        """Why the exchange refused a request (nothing was done): the reason an
        `OrderRejected` carries; refused credentials or timestamp also warn the operator."""
        errors = ccxt_errors()
        _, message = exchange_error(exc)
        said = f" ({scrub(message, *self._secrets)})" if message else ""
        if failure is Failure.TIMESTAMP:
            log.warning(
                "the exchange refused the request's timestamp%s: check this host's clock "
                "(or set %s=true); nothing was placed",
                said,
                env_name(ExchangeSettings, "adjust_for_time_difference"),
            )
            return "the exchange refused the request's timestamp; nothing was placed"
        if failure is Failure.CREDENTIALS:
            log.warning(
                "the exchange refused the venue's API credentials%s: check %s and %s, the "
                "key's trading permission and IP whitelist; nothing was placed",
                said,
                env_name(ExchangeSettings, "api_key"),
                env_name(ExchangeSettings, "secret"),
            )
            return "the exchange refused the venue's credentials; nothing was placed"
        if isinstance(exc, errors.InsufficientFunds):
            return f"the exchange account's balance does not cover the order{said}"
        if isinstance(exc, errors.MarketClosed):
            return f"the market is closed on the exchange{said}"
        if isinstance(exc, errors.BadSymbol):
            return f"the exchange does not trade this market{said}"
        if isinstance(exc, errors.InvalidOrder | errors.BadRequest):
            return f"the exchange refused the order's amount or parameters{said}"
        return f"the exchange refused the order{said}"

    def _describe(self, exc: BaseException) -> str:
        """An error for logs: its class and the exchange's code and message, no URL."""
        code, message = exchange_error(exc)
        detail = f" {code}: {scrub(message or '', *self._secrets)}" if code or message else ""
        return f"{type(exc).__name__}{detail}"


# -- pure helpers ---------------------------------------------------------------------------
def _floor(value: Decimal, step: Decimal | None) -> Decimal:
    if step is None or step <= 0:
        return value
    return (value // step) * step


def _walk_base(levels: list[tuple[Decimal, Decimal]], qty: Decimal) -> tuple[Decimal, Decimal]:
    """(base taken, quote cost) of taking `qty` from the levels, best first."""
    filled = cost = Decimal(0)
    for price, available in levels:
        take = min(qty - filled, available)
        filled += take
        cost += take * price
        if filled >= qty:
            break
    return filled, cost


def _walk_quote(levels: list[tuple[Decimal, Decimal]], quote: Decimal) -> tuple[Decimal, Decimal]:
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


def _figures(order: Order, crypto: Decimal, fiat: Decimal) -> Figures:
    """Executed (or estimated) figures: crypto cut to the asset's decimals, fiat in full,
    price = fiat / crypto (to the default context's 28 digits)."""
    crypto = crypto.quantize(Decimal(1).scaleb(-order.decimals), rounding=ROUND_DOWN)
    price = fiat / crypto if crypto > 0 else Decimal(0)
    return Figures(crypto, fiat, price)


def _quoted(order: Order) -> Figures:
    """Figures of a working order with nothing executed yet: the quote's."""
    price = order.quoted_price or Decimal(0)
    if price <= 0:
        return Figures(None, None, Decimal(0))
    return derive_figures(order.fixed_leg, order.fixed_amount, price, order.decimals)


def _plain(value: Decimal) -> str:
    return f"{value.normalize():f}"


# -- crossing rates and the factory ------------------------------------------------------------
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


__all__ = [
    "ExchangeSettings",
    "ExchangeVenue",
    "Rate",
    "Route",
    "build",
    "exchange_for",
    "rate_from_fx",
    "rate_from_prices",
]
