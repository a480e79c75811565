"""A CoinGecko API v3 for the tests, on loopback: `url + "/api/v3"` is what
`WALLETCORE_COINGECKO_URL` takes. Paths and shapes are CoinGecko's:

- `GET /api/v3/ping`: `{"gecko_says": "(V3) To the Moon!"}`;
- `GET /api/v3/simple/price?ids=..&vs_currencies=..[&precision=full|0-18]
  [&include_last_updated_at=true]`: `{"bitcoin": {"usd": 65000.1, ..., "last_updated_at": t}}`;
  unknown ids and currencies are left out; no `vs_currencies` (or `ids`) is a 422
  `{"error": "Missing parameter vs_currencies"}`; without `precision` prices are rounded;
- `GET /api/v3/exchange_rates`: per-bitcoin rates, `{"rates": {"btc": {"name": "Bitcoin",
  "unit": "BTC", "value": 1.0, "type": "crypto"}, "usd": {...}, ...}}`, the fiats' taken from
  bitcoin's prices;
- given an `api_key`, every request must carry it (header `x-cg-<kind>-api-key`, or the
  query parameter `x_cg_<kind>_api_key`): none is a 401 `{"status": {"error_code": 10002,
  "error_message": "API Key Missing"}}`, a wrong one a 401 `... "Invalid API Key"`, the
  other plan's a 400 10010 / 10011 naming the other root URL; without one, any key passes.

Tests set prices (`set_price`, `move`, `remove`), inject faults (`delay`, `fail` for a 5xx,
`rate_limit` with `Retry-After`, `malformed`, `freeze` for a feed that stops moving) and read
`requests` (each request seen, faulted ones included) or `count(path)`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from email.message import Message
from http.server import BaseHTTPRequestHandler
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from walletcore.testing.http import LoopbackHttpServer

#: USD price of each coin the server knows, by CoinGecko id.
BASE_USD: dict[str, str] = {
    "bitcoin": "65000.123456789",
    "ethereum": "3200.5",
    "binancecoin": "580.25",
    "polygon-ecosystem-token": "0.451234",
    "solana": "150.75",
    "tron": "0.1612345",
    "tether": "1.0001",
    "usd-coin": "0.9999",
}
#: (name, unit, units per US dollar) of each fiat `vs_currencies` and `exchange_rates` know.
FIATS: dict[str, tuple[str, str, str]] = {
    "usd": ("US Dollar", "$", "1"),
    "eur": ("Euro", "€", "0.92"),
    "gbp": ("British Pound Sterling", "£", "0.79"),
    "cad": ("Canadian Dollar", "CA$", "1.36"),
    "aud": ("Australian Dollar", "A$", "1.52"),
    "sek": ("Swedish Krona", "kr", "10.6"),
    "dkk": ("Danish Krone", "kr.", "6.87"),
    "pln": ("Polish Zloty", "zł", "3.98"),
    "brl": ("Brazil Real", "R$", "5.05"),
    "aed": ("United Arab Emirates Dirham", "DH", "3.6725"),
    "jpy": ("Japanese Yen", "¥", "151.2"),
    "chf": ("Swiss Franc", "Fr.", "0.88"),
}
RATE_LIMITED = (
    "You've exceeded the Rate Limit. Please visit https://www.coingecko.com/en/api/pricing "
    "to subscribe to our API plans for higher rate limits."
)
_HOSTS = {"pro": "pro-api.coingecko.com", "demo": "api.coingecko.com"}
_CLOUDFLARE_5XX = (
    "<html>\r\n<head><title>{status} Service Temporarily Unavailable</title></head>\r\n<body>"
    "\r\n<center><h1>{status} Service Temporarily Unavailable</h1></center>\r\n<hr><center>"
    "cloudflare</center>\r\n</body>\r\n</html>\r\n"
)


@dataclass(frozen=True)
class SeenRequest:
    path: str
    params: dict[str, str]
    #: header names in lower case
    headers: dict[str, str]


@dataclass
class _Reply:
    status: int
    kind: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def _json(status: int, value: Any, **headers: str) -> _Reply:
    return _Reply(status, "application/json; charset=utf-8", _dumps(value).encode(), headers)


def _status(status: int, code: int, message: str) -> _Reply:
    return _json(status, {"status": {"error_code": code, "error_message": message}})


def _dumps(value: Any) -> str:
    """JSON with each Decimal written as the number it is (no float rounding)."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_dumps(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


class CoinGeckoTestServer(LoopbackHttpServer):
    methods = ("GET",)

    def __init__(
        self,
        *,
        api_key: str | None = None,
        key_kind: Literal["demo", "pro"] = "demo",
        now: Callable[[], float] = time.time,
    ) -> None:
        """`api_key` of plan `key_kind` is then required; `now` (unix seconds) stamps
        `last_updated_at` (pass the test's clock)."""
        self.api_key, self.key_kind, self._now = api_key, key_kind, now
        self._lock = threading.Lock()
        self._release = threading.Event()
        per_usd = {code: Decimal(rate) for code, (_, _, rate) in FIATS.items()}
        self.prices: dict[str, dict[str, Decimal]] = {
            coin: {code: Decimal(usd) * rate for code, rate in per_usd.items()}
            for coin, usd in BASE_USD.items()
        }
        self._frozen: dict[str, tuple[dict[str, Decimal], float]] = {}
        self.requests: list[SeenRequest] = []
        #: seconds each answer waits (cut short when the server stops)
        self.delay = 0.0
        self._fault: _Reply | None = None
        self._fault_times: int | None = None
        super().__init__()
        owner = self

        def serve(handler: BaseHTTPRequestHandler) -> None:
            owner._send(handler, owner._answer(handler.path, handler.headers))

        # the base's handler sends no header but the content's (`Retry-After` is ours)
        handler_class: Any = self._server.RequestHandlerClass
        handler_class.do_GET = serve

    # -- what the tests set ------------------------------------------------------------
    def set_price(self, coin: str, fiat: str, value: Decimal | str) -> None:
        with self._lock:
            self.prices.setdefault(coin, {})[fiat.lower()] = Decimal(value)

    def move(self, coin: str, percent: Decimal | str) -> None:
        """Every fiat price of `coin` moves by `percent` (negative: down)."""
        factor = 1 + Decimal(percent) / 100
        with self._lock:
            self.prices[coin] = {k: v * factor for k, v in self.prices[coin].items()}

    def remove(self, coin: str, fiat: str | None = None) -> None:
        """The coin (or one of its fiats) is no longer in any answer."""
        with self._lock:
            if fiat is None:
                self.prices.pop(coin, None)
            else:
                self.prices.get(coin, {}).pop(fiat.lower(), None)

    def freeze(self, *coins: str) -> None:
        """These coins (all without any) keep their prices and `last_updated_at` of now."""
        with self._lock:
            for coin in coins or tuple(self.prices):
                self._frozen[coin] = (dict(self.prices.get(coin, {})), self._now())

    def fail(self, status: int = 503, *, times: int | None = None) -> None:
        """Answer `status` (500: CoinGecko's JSON; others: Cloudflare's HTML page) to the next
        `times` requests (None: until `heal`)."""
        if status == 500:
            reply = _status(500, 500, "Internal Server Error")
        else:
            page = _CLOUDFLARE_5XX.format(status=status).encode()
            reply = _Reply(status, "text/html", page)
        self._set_fault(reply, times)

    def rate_limit(self, retry_after: int | str | None = 60, *, times: int | None = None) -> None:
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        reply = _status(429, 429, RATE_LIMITED)
        reply.headers.update(headers)
        self._set_fault(reply, times)

    def malformed(self, *, times: int | None = None) -> None:
        """A 200 whose JSON is cut short."""
        self._set_fault(_Reply(200, "application/json", b'{"bitcoin":{"usd":650'), times)

    def heal(self) -> None:
        """No fault, no delay, nothing frozen."""
        with self._lock:
            self._fault, self._fault_times, self.delay = None, None, 0.0
            self._frozen.clear()

    def _set_fault(self, reply: _Reply, times: int | None) -> None:
        with self._lock:
            self._fault, self._fault_times = reply, times

    def count(self, path: str = "/api/v3/simple/price") -> int:
        with self._lock:
            return sum(1 for r in self.requests if r.path == path)

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        super().__exit__(*exc)

    # -- HTTP --------------------------------------------------------------------------
    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, reply: _Reply) -> None:
        try:
            handler.send_response(reply.status)
            handler.send_header("Content-Type", reply.kind)
            handler.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting (a `delay`)

    def respond(
        self, method: str, path: str, headers: Message, body: bytes
    ) -> tuple[int, str, bytes]:
        reply = self._answer(path, headers)
        return reply.status, reply.kind, reply.body

    def _answer(self, target: str, headers: Message) -> _Reply:
        parts = urlsplit(target)
        path = parts.path.rstrip("/")
        params = dict(parse_qsl(parts.query))
        seen = SeenRequest(path, params, {k.lower(): v for k, v in headers.items()})
        with self._lock:
            self.requests.append(seen)
            delay, fault = self.delay, self._fault
            if fault is not None and self._fault_times is not None:
                self._fault_times -= 1
                if self._fault_times <= 0:
                    self._fault, self._fault_times = None, None
        if delay:
            self._release.wait(delay)
        if fault is not None:
            return fault
        refused = self._check_key(seen)
        if refused is not None:
            return refused
        if path == "/api/v3/ping":
            return _json(200, {"gecko_says": "(V3) To the Moon!"})
        if path == "/api/v3/simple/price":
            return self._simple_price(params)
        if path == "/api/v3/exchange_rates":
            return self._exchange_rates()
        return _json(404, {"error": "Incorrect path. Please check https://www.coingecko.com/api/"})

    def _check_key(self, seen: SeenRequest) -> _Reply | None:
        if self.api_key is None:
            return None
        sent = {
            kind: seen.headers.get(f"x-cg-{kind}-api-key")
            or seen.params.get(f"x_cg_{kind}_api_key")
            for kind in ("demo", "pro")
        }
        if sent[self.key_kind] == self.api_key:
            return None
        other = "pro" if self.key_kind == "demo" else "demo"
        if sent[other] and not sent[self.key_kind]:
            return _wrong_root(other)
        if not sent[self.key_kind]:
            return _status(401, 10002, "API Key Missing")
        return _status(401, 10002, "Invalid API Key")

    def _simple_price(self, params: Mapping[str, str]) -> _Reply:
        for name in ("ids", "vs_currencies"):
            if not params.get(name, "").strip():
                return _json(422, {"error": f"Missing parameter {name}"})
        ids = [i.strip().lower() for i in params["ids"].split(",") if i.strip()]
        wanted = [c.strip().lower() for c in params["vs_currencies"].split(",") if c.strip()]
        precision = params.get("precision")
        stamp = params.get("include_last_updated_at") == "true"
        answer: dict[str, dict[str, Any]] = {}
        with self._lock:
            now = int(self._now())
            for coin in dict.fromkeys(ids):
                prices, updated = self._frozen.get(coin, (self.prices.get(coin), now))
                if prices is None:
                    continue
                quotes: dict[str, Any] = {
                    c: _rounded(prices[c], precision) for c in wanted if c in prices
                }
                if stamp:
                    quotes["last_updated_at"] = int(updated)
                answer[coin] = quotes
        return _json(200, answer)

    def _exchange_rates(self) -> _Reply:
        with self._lock:
            btc = dict(self.prices.get("bitcoin", {}))
            eth_usd = self.prices.get("ethereum", {}).get("usd")
        rates: dict[str, dict[str, Any]] = {
            "btc": {"name": "Bitcoin", "unit": "BTC", "value": Decimal("1.0"), "type": "crypto"}
        }
        if eth_usd and "usd" in btc:
            value = (btc["usd"] / eth_usd).quantize(Decimal("0.001"))
            rates["eth"] = {"name": "Ether", "unit": "ETH", "value": value, "type": "crypto"}
        for code, (name, unit, _) in FIATS.items():
            if code in btc:
                value = btc[code].quantize(Decimal("0.001"))
                rates[code] = {"name": name, "unit": unit, "value": value, "type": "fiat"}
        return _json(200, {"rates": rates})


def _wrong_root(kind: str) -> _Reply:
    """A key of plan `kind` sent to the other plan's root URL."""
    code, other = (10010, "demo") if kind == "pro" else (10011, "pro")
    fix = f"please change your root URL from {_HOSTS[other]} to {_HOSTS[kind]}"
    return _status(400, code, f"If you are using {kind.title()} API key, {fix}")


def _rounded(price: Decimal, precision: str | None) -> Decimal:
    if precision == "full":
        return price
    if precision is not None and precision.isdigit() and int(precision) <= 18:
        return price.quantize(Decimal(1).scaleb(-int(precision)))
    return price.quantize(Decimal("0.01") if price >= 1 else Decimal("0.00000001"))


__all__ = ["CoinGeckoTestServer", "SeenRequest"]
