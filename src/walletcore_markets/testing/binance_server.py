"""A loopback Binance spot exchange: the real REST paths, shapes and error bodies ccxt's
`binance` calls, served from order books and balances kept in memory.

Point ccxt at it through its URL settings (`walletcore_markets.ccxt_support.point_at`, the
venue's and ticker source's `url` setting), never by patching ccxt:

- public: `GET /api/v3/ping`, `/time`, `/exchangeInfo` (symbols TRADING or BREAK, filters
  PRICE_FILTER, LOT_SIZE, NOTIONAL), `/depth`, `/ticker/24hr`, `/ticker/price`,
  `/ticker/bookTicker`;
- signed (`X-MBX-APIKEY`, HMAC-SHA256 `signature` over query string + body, `timestamp`
  within `recvWindow`): `POST /api/v3/order` (MARKET, `quantity` or `quoteOrderQty`,
  `newClientOrderId`, `newOrderRespType` ACK/RESULT/FULL), `GET /api/v3/order` (by
  `orderId` or `origClientOrderId`), `DELETE /api/v3/order`, `GET /api/v3/account`.

Refusals carry Binance's own codes and messages (`-1021`, `-1022`, `-2014`, `-2015`, `-1013`
filter failures and `Market is closed.`, `-1121`, `-2010`, `-2011`, `-2013`, `-1102`).

A market order walks the book (consumed levels stay consumed), debits and credits the
account, and charges `commission_rate` on what the order receives (base on a buy, quote on
a sell), as Binance does without BNB fee discounts. When the book runs out the rest of the
order expires (`EXPIRED`, `executedQty < origQty`), as a real market order does.

Test controls: `inject(method, path, Fault(...))` (delay, an HTTP status and body, applied
before or after the request acted, for a number of requests), `hold_orders(parts)` (orders
stay `NEW` and fill in `parts` slices, one per `tick()`), `fill_limit` (a market order
executes at most this base quantity; the rest expires), `set_status(symbol, "BREAK")`,
`time_offset_ms` (the server's clock skew), `placed` (orders placed so far).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, Decimal
from email.message import Message
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlsplit

from walletcore.testing.http import LoopbackHttpServer

#: One side of a book: (price, quantity), best first.
Levels = list[tuple[Decimal, Decimal]]

_SIGNATURE = re.compile(r"(^|&)signature=[^&]*")
_CLIENT_ORDER_ID = re.compile(r"^[\.A-Z\:/a-z0-9_-]{1,36}$")
_OPEN = ("NEW", "PARTIALLY_FILLED")


class BinanceError(Exception):
    """A refusal answered as Binance does: `{"code": ..., "msg": ...}` with an HTTP status."""

    def __init__(self, code: int, msg: str, status: int = 400) -> None:
        super().__init__(msg)
        self.code, self.msg, self.status = code, msg, status


def _d(value: Any) -> Decimal:
    return Decimal(str(value))


def _s(value: Decimal) -> str:
    """Binance writes quantities and prices with eight decimals."""
    return f"{value.quantize(Decimal('0.00000001'), rounding=ROUND_DOWN):f}"


@dataclass
class SymbolSpec:
    """One spot market: its filters and its book (bids high to low, asks low to high)."""

    base: str
    quote: str
    bids: Levels
    asks: Levels
    step: Decimal = Decimal("0.00001")
    min_qty: Decimal = Decimal("0.00001")
    max_qty: Decimal = Decimal(9000)
    tick: Decimal = Decimal("0.01")
    min_notional: Decimal = Decimal(5)
    status: str = "TRADING"
    last: Decimal | None = None

    @property
    def id(self) -> str:
        return f"{self.base}{self.quote}"

    def exchange_info(self) -> dict[str, Any]:
        return {
            "symbol": self.id,
            "status": self.status,
            "baseAsset": self.base,
            "baseAssetPrecision": 8,
            "quoteAsset": self.quote,
            "quotePrecision": 8,
            "quoteAssetPrecision": 8,
            "baseCommissionPrecision": 8,
            "quoteCommissionPrecision": 8,
            "orderTypes": [
                "LIMIT",
                "LIMIT_MAKER",
                "MARKET",
                "STOP_LOSS_LIMIT",
                "TAKE_PROFIT_LIMIT",
            ],
            "icebergAllowed": True,
            "ocoAllowed": True,
            "otoAllowed": True,
            "quoteOrderQtyMarketAllowed": True,
            "allowTrailingStop": True,
            "cancelReplaceAllowed": True,
            "isSpotTradingAllowed": True,
            "isMarginTradingAllowed": False,
            "filters": [
                {
                    "filterType": "PRICE_FILTER",
                    "minPrice": _s(self.tick),
                    "maxPrice": "1000000.00000000",
                    "tickSize": _s(self.tick),
                },
                {
                    "filterType": "LOT_SIZE",
                    "minQty": _s(self.min_qty),
                    "maxQty": _s(self.max_qty),
                    "stepSize": _s(self.step),
                },
                {
                    "filterType": "NOTIONAL",
                    "minNotional": _s(self.min_notional),
                    "applyMinToMarket": True,
                    "maxNotional": "9000000.00000000",
                    "applyMaxToMarket": False,
                    "avgPriceMins": 5,
                },
            ],
            "permissions": [],
            "permissionSets": [["SPOT"]],
            "defaultSelfTradePreventionMode": "EXPIRE_MAKER",
            "allowedSelfTradePreventionModes": ["EXPIRE_TAKER", "EXPIRE_MAKER", "EXPIRE_BOTH"],
        }

    def mid(self) -> Decimal | None:
        if self.bids and self.asks:
            return (self.bids[0][0] + self.asks[0][0]) / 2
        return self.last


def default_symbols() -> list[SymbolSpec]:
    """A small spot exchange: BTC, ETH, SOL, BNB, TRX, POL and USDC against USDT, BTC also
    against EUR (a direct fiat market); books a few levels deep."""

    def book(mid: str, spread: str, qty: str, levels: int = 5) -> tuple[Levels, Levels]:
        m, s, q = _d(mid), _d(spread), _d(qty)
        bids = [(m - s * (i + 1), q * (i + 1)) for i in range(levels)]
        asks = [(m + s * (i + 1), q * (i + 1)) for i in range(levels)]
        return bids, asks

    specs = []
    for base, quote, mid, spread, qty, step, tick in (
        ("BTC", "USDT", "100000", "10", "0.5", "0.00001", "0.01"),
        ("ETH", "USDT", "4000", "1", "5", "0.0001", "0.01"),
        ("SOL", "USDT", "200", "0.05", "100", "0.001", "0.01"),
        ("BNB", "USDT", "700", "0.1", "20", "0.001", "0.01"),
        ("TRX", "USDT", "0.25", "0.0001", "100000", "0.1", "0.0001"),
        ("POL", "USDT", "0.5", "0.0001", "100000", "0.1", "0.0001"),
        ("USDC", "USDT", "1.0001", "0.0001", "1000000", "1", "0.0001"),
        ("BTC", "EUR", "92000", "10", "0.5", "0.00001", "0.01"),
    ):
        bids, asks = book(mid, spread, qty)
        specs.append(
            SymbolSpec(base, quote, bids, asks, step=_d(step), min_qty=_d(step), tick=_d(tick))
        )
    return specs


@dataclass
class Fault:
    """What to do to the next requests of one method and path."""

    #: seconds before answering
    delay: float = 0.0
    #: answer with this HTTP status (and `body`) instead of the real answer
    status: int | None = None
    body: dict[str, Any] | str | None = None
    #: act first (place the order, ...), then delay or fail the answer
    after: bool = False
    #: how many requests it applies to; None: every one until cleared
    times: int | None = None


@dataclass
class _Order:
    symbol: SymbolSpec
    order_id: int
    client_order_id: str
    side: str
    orig_qty: Decimal
    orig_quote_qty: Decimal
    created_ms: int
    status: str = "NEW"
    executed: Decimal = Decimal(0)
    cost: Decimal = Decimal(0)
    fills: list[dict[str, Any]] = field(default_factory=list)
    updated_ms: int = 0
    #: slices left before a held order is filled
    parts: int = 0

    @property
    def by_quote(self) -> bool:
        return self.orig_qty == 0 and self.orig_quote_qty > 0

    def view(self) -> dict[str, Any]:
        return {
            "symbol": self.symbol.id,
            "orderId": self.order_id,
            "orderListId": -1,
            "clientOrderId": self.client_order_id,
            "price": "0.00000000",
            "origQty": _s(self.orig_qty),
            "executedQty": _s(self.executed),
            "cummulativeQuoteQty": _s(self.cost),
            "status": self.status,
            "timeInForce": "GTC",
            "type": "MARKET",
            "side": self.side,
            "stopPrice": "0.00000000",
            "icebergQty": "0.00000000",
            "time": self.created_ms,
            "updateTime": self.updated_ms or self.created_ms,
            "isWorking": True,
            "workingTime": self.created_ms,
            "origQuoteOrderQty": _s(self.orig_quote_qty),
            "selfTradePreventionMode": "EXPIRE_MAKER",
        }


class BinanceTestServer(LoopbackHttpServer):
    methods: ClassVar[tuple[str, ...]] = ("GET", "POST", "DELETE")

    def __init__(
        self,
        *,
        api_key: str = "loopback-api-key",
        secret: str = "loopback-secret",
        symbols: list[SymbolSpec] | None = None,
        balances: dict[str, Decimal] | None = None,
        commission_rate: Decimal = Decimal("0.001"),
    ) -> None:
        self.api_key, self._secret = api_key, secret
        self.symbols: dict[str, SymbolSpec] = {s.id: s for s in symbols or default_symbols()}
        self.balances: dict[str, Decimal] = dict(
            balances
            if balances is not None
            else {"USDT": _d(1_000_000), "EUR": _d(1_000_000), "BTC": _d(10), "ETH": _d(100)}
        )
        self.commission_rate = commission_rate
        self.time_offset_ms = 0
        #: a market order executes at most this base quantity; the rest expires
        self.fill_limit: Decimal | None = None
        self.placed = 0
        #: (method, path) of every request answered or dropped, in order
        self.requests: list[tuple[str, str]] = []
        self._orders: list[_Order] = []
        self._faults: dict[tuple[str, str], Fault] = {}
        self._hold_parts = 0
        self._next_id = 1000
        self._trade_id = 5000
        self._lock = threading.RLock()
        self._closing = threading.Event()
        super().__init__()
        # a short poll: the server stops in milliseconds, not the stdlib's half second
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __exit__(self, *exc: object) -> None:
        self._closing.set()  # releases delayed answers at once
        super().__exit__(*exc)

    # -- test controls --------------------------------------------------------------------
    def inject(self, method: str, path: str, fault: Fault) -> None:
        with self._lock:
            self._faults[(method.upper(), path)] = fault

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def hold_orders(self, parts: int = 1) -> None:
        """Orders placed from now on stay `NEW` and fill in `parts` slices, one per `tick`
        (0: fill at once again)."""
        with self._lock:
            self._hold_parts = parts

    def tick(self) -> None:
        """Work every held order one slice further."""
        with self._lock:
            for order in self._orders:
                if order.status in _OPEN and order.parts > 0:
                    self._work(order, final=order.parts == 1)
                    order.parts -= 1

    def set_status(self, symbol_id: str, status: str) -> None:
        with self._lock:
            self.symbols[symbol_id].status = status

    def orders(self) -> list[dict[str, Any]]:
        with self._lock:
            return [o.view() for o in self._orders]

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self.time_offset_ms

    # -- HTTP -----------------------------------------------------------------------------
    def respond(
        self, method: str, path: str, headers: Message, body: bytes
    ) -> tuple[int, str, bytes]:
        parts = urlsplit(path)
        route = parts.path
        with self._lock:
            self.requests.append((method, route))
            fault = self._take_fault(method, route)
        if fault is not None and not fault.after:
            answer = self._fault_answer(fault)
            if answer is not None:
                return answer
        try:
            status, payload = self._dispatch(method, route, parts.query, headers, body)
        except BinanceError as exc:
            status, payload = exc.status, {"code": exc.code, "msg": exc.msg}
        if fault is not None and fault.after:
            answer = self._fault_answer(fault)
            if answer is not None:
                return answer
        return status, "application/json;charset=UTF-8", _json(payload)

    def _take_fault(self, method: str, route: str) -> Fault | None:
        fault = self._faults.get((method, route))
        if fault is None:
            return None
        if fault.times is not None:
            fault.times -= 1
            if fault.times <= 0:
                del self._faults[(method, route)]
        return fault

    def _fault_answer(self, fault: Fault) -> tuple[int, str, bytes] | None:
        if fault.delay:
            self._closing.wait(fault.delay)
        if fault.status is None:
            return None
        body = fault.body if fault.body is not None else "<html><body>Server error</body></html>"
        if isinstance(body, str):
            return fault.status, "text/html", body.encode()
        return fault.status, "application/json;charset=UTF-8", _json(body)

    def _dispatch(
        self, method: str, route: str, query: str, headers: Message, body: bytes
    ) -> tuple[int, Any]:
        params = dict(parse_qsl(query, keep_blank_values=True))
        public: dict[tuple[str, str], Callable[[], Any]] = {
            ("GET", "/api/v3/ping"): dict,
            ("GET", "/api/v3/time"): lambda: {"serverTime": self.now_ms()},
            ("GET", "/api/v3/exchangeInfo"): self._exchange_info,
            ("GET", "/api/v3/depth"): lambda: self._depth(params),
            ("GET", "/api/v3/ticker/24hr"): lambda: self._tickers(params, self._ticker_24hr),
            ("GET", "/api/v3/ticker/price"): lambda: self._tickers(params, self._ticker_price),
            ("GET", "/api/v3/ticker/bookTicker"): lambda: self._tickers(params, self._book_ticker),
        }
        if (method, route) in public:
            with self._lock:
                return 200, public[(method, route)]()
        signed = {
            ("POST", "/api/v3/order"): self._new_order,
            ("GET", "/api/v3/order"): self._query_order,
            ("DELETE", "/api/v3/order"): self._cancel_order,
            ("GET", "/api/v3/account"): self._account,
        }
        handler = signed.get((method, route))
        if handler is None:
            return 404, {"code": -1, "msg": "Not found"}  # not a Binance path: its 404
        text = body.decode()
        params.update(parse_qsl(text, keep_blank_values=True))
        self._authenticate(headers, query, text, params)
        with self._lock:
            return 200, handler(params)

    # -- signing --------------------------------------------------------------------------
    def _authenticate(
        self, headers: Message, query: str, body: str, params: dict[str, str]
    ) -> None:
        key = headers.get("X-MBX-APIKEY")
        if not key or not key.isprintable() or " " in key:
            raise BinanceError(-2014, "API-key format invalid.", 401)
        if not hmac.compare_digest(key, self.api_key):
            raise BinanceError(-2015, "Invalid API-key, IP, or permissions for action.", 401)
        try:
            stamp = int(params["timestamp"])
            window = int(params.get("recvWindow", "5000"))
        except (KeyError, ValueError):
            raise BinanceError(
                -1102, "Mandatory parameter 'timestamp' was not sent, was empty/null, or malformed."
            ) from None
        if window > 60000:
            raise BinanceError(-1131, "recvWindow must be less than 60000")
        now = self.now_ms()
        if stamp >= now + 1000 or now - stamp > window:
            raise BinanceError(-1021, "Timestamp for this request is outside of the recvWindow.")
        signature = params.get("signature", "")
        payload = _SIGNATURE.sub("", query).lstrip("&") + _SIGNATURE.sub("", body).lstrip("&")
        expected = hmac.new(self._secret.encode(), payload.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(signature.lower(), expected):
            raise BinanceError(-1022, "Signature for this request is not valid.")

    # -- public ---------------------------------------------------------------------------
    def _exchange_info(self) -> dict[str, Any]:
        return {
            "timezone": "UTC",
            "serverTime": self.now_ms(),
            "rateLimits": [
                {
                    "rateLimitType": "REQUEST_WEIGHT",
                    "interval": "MINUTE",
                    "intervalNum": 1,
                    "limit": 6000,
                },
                {"rateLimitType": "ORDERS", "interval": "SECOND", "intervalNum": 10, "limit": 100},
            ],
            "exchangeFilters": [],
            "symbols": [s.exchange_info() for s in self.symbols.values()],
        }

    def _symbol(self, params: dict[str, str]) -> SymbolSpec:
        name = params.get("symbol")
        if not name:
            raise BinanceError(
                -1102, "Mandatory parameter 'symbol' was not sent, was empty/null, or malformed."
            )
        spec = self.symbols.get(name)
        if spec is None:
            raise BinanceError(-1121, "Invalid symbol.")
        return spec

    def _depth(self, params: dict[str, str]) -> dict[str, Any]:
        spec = self._symbol(params)
        limit = int(params.get("limit", "100"))
        return {
            "lastUpdateId": self._trade_id,
            "bids": [[_s(p), _s(q)] for p, q in spec.bids[:limit]],
            "asks": [[_s(p), _s(q)] for p, q in spec.asks[:limit]],
        }

    def _tickers(self, params: dict[str, str], shape: Any) -> Any:
        if "symbol" in params:
            return shape(self._symbol(params))
        if "symbols" in params:
            try:
                names = json.loads(params["symbols"])
            except ValueError:
                raise BinanceError(
                    -1100, "Illegal characters found in parameter 'symbols'."
                ) from None
            specs = []
            for name in names:
                if name not in self.symbols:
                    raise BinanceError(-1121, "Invalid symbol.")
                specs.append(self.symbols[name])
            return [shape(s) for s in specs]
        return [shape(s) for s in self.symbols.values()]

    def _ticker_24hr(self, spec: SymbolSpec) -> dict[str, Any]:
        bid = spec.bids[0] if spec.bids else (Decimal(0), Decimal(0))
        ask = spec.asks[0] if spec.asks else (Decimal(0), Decimal(0))
        last = spec.last if spec.last is not None else (spec.mid() or Decimal(0))
        now = self.now_ms()
        return {
            "symbol": spec.id,
            "priceChange": "0.00000000",
            "priceChangePercent": "0.000",
            "weightedAvgPrice": _s(last),
            "prevClosePrice": _s(last),
            "lastPrice": _s(last),
            "lastQty": "0.00100000",
            "bidPrice": _s(bid[0]),
            "bidQty": _s(bid[1]),
            "askPrice": _s(ask[0]),
            "askQty": _s(ask[1]),
            "openPrice": _s(last),
            "highPrice": _s(last),
            "lowPrice": _s(last),
            "volume": "1000.00000000",
            "quoteVolume": _s(last * 1000),
            "openTime": now - 86_400_000,
            "closeTime": now,
            "firstId": 1,
            "lastId": self._trade_id,
            "count": self._trade_id,
        }

    def _ticker_price(self, spec: SymbolSpec) -> dict[str, Any]:
        last = spec.last if spec.last is not None else (spec.mid() or Decimal(0))
        return {"symbol": spec.id, "price": _s(last)}

    def _book_ticker(self, spec: SymbolSpec) -> dict[str, Any]:
        bid = spec.bids[0] if spec.bids else (Decimal(0), Decimal(0))
        ask = spec.asks[0] if spec.asks else (Decimal(0), Decimal(0))
        return {
            "symbol": spec.id,
            "bidPrice": _s(bid[0]),
            "bidQty": _s(bid[1]),
            "askPrice": _s(ask[0]),
            "askQty": _s(ask[1]),
        }

    # -- trading --------------------------------------------------------------------------
    def _new_order(self, params: dict[str, str]) -> dict[str, Any]:
        spec = self._symbol(params)
        side = params.get("side", "")
        if side not in ("BUY", "SELL"):
            raise BinanceError(-1117, "Invalid side.")
        if params.get("type") != "MARKET":
            raise BinanceError(-1116, "Invalid orderType.")  # this server works MARKET only
        client_id = params.get("newClientOrderId") or f"loopback-{self._next_id}"
        if not _CLIENT_ORDER_ID.match(client_id):
            raise BinanceError(-1100, "Illegal characters found in parameter 'newClientOrderId'.")
        quantity, quote_qty = params.get("quantity"), params.get("quoteOrderQty")
        if (quantity is None) == (quote_qty is None):
            raise BinanceError(
                -1102, "Param 'quantity' or 'quoteOrderQty' must be sent, but both were empty/null!"
            )
        if spec.status != "TRADING":
            raise BinanceError(-1013, "Market is closed.")
        if any(o.client_order_id == client_id and o.status in _OPEN for o in self._orders):
            raise BinanceError(-2010, "Duplicate order sent.")
        book = spec.asks if side == "BUY" else spec.bids
        if quantity is not None:
            qty = self._number(quantity, "quantity")
            if qty < spec.min_qty or qty > spec.max_qty or (qty - spec.min_qty) % spec.step:
                raise BinanceError(-1013, "Filter failure: LOT_SIZE")
            walked_qty, walked_cost = _walk_base(book, qty)
            quote_amount = Decimal(0)
        else:
            quote_amount = self._number(quote_qty or "", "quoteOrderQty")
            walked_qty, walked_cost = _walk_quote(book, quote_amount, spec.step)
            qty = Decimal(0)
        reference = walked_cost / walked_qty if walked_qty else spec.mid() or Decimal(0)
        notional = quote_amount or (qty * reference)
        if notional < spec.min_notional:
            raise BinanceError(-1013, "Filter failure: NOTIONAL")
        # Binance reserves the whole order against the balance before matching
        need_asset, need = (
            (spec.quote, quote_amount or walked_cost)
            if side == "BUY"
            else (spec.base, qty or walked_qty)
        )
        if self.balances.get(need_asset, Decimal(0)) < need:
            raise BinanceError(-2010, "Account has insufficient balance for requested action.")
        now = self.now_ms()
        order = _Order(spec, self._next_id, client_id, side, qty, quote_amount, now)
        self._next_id += 1
        self._orders.append(order)
        self.placed += 1
        if self._hold_parts:
            order.parts = self._hold_parts
        else:
            self._work(order, final=True)
        return self._order_answer(order, params.get("newOrderRespType", "ACK"))

    def _work(self, order: _Order, *, final: bool) -> None:
        """Match `order` against the book: all that is left when `final`, else one slice;
        a final pass expires what the book (or `fill_limit`) could not fill."""
        spec = order.symbol
        book = spec.asks if order.side == "BUY" else spec.bids
        if order.by_quote:
            left_quote = order.orig_quote_qty - order.cost
            slice_quote = left_quote if final else left_quote / max(order.parts, 1)
            qty, _ = _walk_quote(book, slice_quote, spec.step)
        else:
            left = order.orig_qty - order.executed
            qty = left if final else _floor(left / max(order.parts, 1), spec.step)
        if self.fill_limit is not None:
            qty = min(qty, max(Decimal(0), self.fill_limit - order.executed))
        self._match(order, book, qty)
        order.updated_ms = self.now_ms()
        if order.by_quote:
            # done when what is left cannot buy one more step at the best price
            left = order.orig_quote_qty - order.cost
            capped = self.fill_limit is not None and order.executed >= self.fill_limit
            filled = not capped and bool(book) and left < book[0][0] * spec.step
        else:
            filled = order.executed >= order.orig_qty
        if filled:
            order.status = "FILLED"
        elif final:
            order.status = "EXPIRED"
        elif order.executed > 0:
            order.status = "PARTIALLY_FILLED"

    def _match(self, order: _Order, book: Levels, qty: Decimal) -> None:
        spec = order.symbol
        while qty > 0 and book:
            price, available = book[0]
            take = min(qty, available)
            cost = price * take
            if order.side == "BUY":
                commission, asset = take * self.commission_rate, spec.base
                self._credit(spec.quote, -cost)
                self._credit(spec.base, take - commission)
            else:
                commission, asset = cost * self.commission_rate, spec.quote
                self._credit(spec.base, -take)
                self._credit(spec.quote, cost - commission)
            self._trade_id += 1
            order.fills.append(
                {
                    "price": _s(price),
                    "qty": _s(take),
                    "commission": _s(commission),
                    "commissionAsset": asset,
                    "tradeId": self._trade_id,
                }
            )
            order.executed += take
            order.cost += cost
            spec.last = price
            qty -= take
            if take == available:
                book.pop(0)
            else:
                book[0] = (price, available - take)

    def _credit(self, asset: str, amount: Decimal) -> None:
        self.balances[asset] = self.balances.get(asset, Decimal(0)) + amount

    def _order_answer(self, order: _Order, kind: str) -> dict[str, Any]:
        ack = {
            "symbol": order.symbol.id,
            "orderId": order.order_id,
            "orderListId": -1,
            "clientOrderId": order.client_order_id,
            "transactTime": order.created_ms,
        }
        if kind == "ACK":
            return ack
        view = order.view()
        result = {
            **ack,
            **{k: view[k] for k in ("price", "origQty", "executedQty", "origQuoteOrderQty")},
            "cummulativeQuoteQty": view["cummulativeQuoteQty"],
            "status": view["status"],
            "timeInForce": "GTC",
            "type": "MARKET",
            "side": order.side,
            "workingTime": order.created_ms,
            "selfTradePreventionMode": "EXPIRE_MAKER",
        }
        if kind == "FULL":
            result["fills"] = list(order.fills)
        return result

    def _find(self, params: dict[str, str], code: int, msg: str) -> _Order:
        spec = self._symbol(params)
        order_id, client_id = params.get("orderId"), params.get("origClientOrderId")
        if order_id is None and client_id is None:
            raise BinanceError(
                -1102,
                "Param 'origClientOrderId' or 'orderId' must be sent, but both were empty/null!",
            )
        for order in reversed(self._orders):  # the most recent one with that client id
            if order.symbol is not spec:
                continue
            if (order_id is not None and str(order.order_id) == order_id) or (
                order_id is None and order.client_order_id == client_id
            ):
                return order
        raise BinanceError(code, msg)

    def _query_order(self, params: dict[str, str]) -> dict[str, Any]:
        return self._find(params, -2013, "Order does not exist.").view()

    def _cancel_order(self, params: dict[str, str]) -> dict[str, Any]:
        order = self._find(params, -2011, "Unknown order sent.")
        if order.status not in _OPEN:
            raise BinanceError(-2011, "Unknown order sent.")
        order.status = "CANCELED"
        order.updated_ms = self.now_ms()
        view = order.view()
        return {
            "symbol": order.symbol.id,
            "origClientOrderId": order.client_order_id,
            "orderId": order.order_id,
            "orderListId": -1,
            "clientOrderId": f"cancel-{order.order_id}",
            "transactTime": order.updated_ms,
            **{
                k: view[k]
                for k in (
                    "price",
                    "origQty",
                    "executedQty",
                    "cummulativeQuoteQty",
                    "status",
                    "timeInForce",
                    "type",
                    "side",
                    "selfTradePreventionMode",
                )
            },
        }

    def _account(self, params: dict[str, str]) -> dict[str, Any]:
        rate = int(self.commission_rate * 10000)
        return {
            "makerCommission": rate,
            "takerCommission": rate,
            "buyerCommission": 0,
            "sellerCommission": 0,
            "commissionRates": {
                "maker": _s(self.commission_rate),
                "taker": _s(self.commission_rate),
                "buyer": "0.00000000",
                "seller": "0.00000000",
            },
            "canTrade": True,
            "canWithdraw": True,
            "canDeposit": True,
            "brokered": False,
            "requireSelfTradePrevention": False,
            "preventSor": False,
            "updateTime": self.now_ms(),
            "accountType": "SPOT",
            "balances": [
                {"asset": asset, "free": _s(amount), "locked": "0.00000000"}
                for asset, amount in sorted(self.balances.items())
            ],
            "permissions": ["SPOT"],
            "uid": 354937868,
        }

    @staticmethod
    def _number(text: str, name: str) -> Decimal:
        try:
            value = Decimal(text)
        except ArithmeticError:
            raise BinanceError(-1100, f"Illegal characters found in parameter '{name}'.") from None
        if not value.is_finite() or value <= 0:
            raise BinanceError(-1013, "Invalid quantity.")
        if -value.as_tuple().exponent > 8:  # type: ignore[operator]
            raise BinanceError(-1111, "Precision is over the maximum defined for this asset.")
        return value


def _json(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()  # compact, as Binance writes


def _floor(value: Decimal, step: Decimal) -> Decimal:
    return (value // step) * step


def _walk_base(book: Levels, qty: Decimal) -> tuple[Decimal, Decimal]:
    """(base filled, quote cost) of taking `qty` from the book, without consuming it."""
    filled = cost = Decimal(0)
    for price, available in book:
        take = min(qty - filled, available)
        filled += take
        cost += take * price
        if filled >= qty:
            break
    return filled, cost


def _walk_quote(book: Levels, quote: Decimal, step: Decimal) -> tuple[Decimal, Decimal]:
    """(base, cost) that spends at most `quote` on the book, the base cut to `step`."""
    filled = cost = Decimal(0)
    for price, available in book:
        left = quote - cost
        if left <= 0:
            break
        take = min(available, _floor(left / price, step))
        if take <= 0:
            break
        filled += take
        cost += take * price
        if take < available:
            break
    return filled, cost


__all__ = ["BinanceError", "BinanceTestServer", "Fault", "SymbolSpec", "default_symbols"]
