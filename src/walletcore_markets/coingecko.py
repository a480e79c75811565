"""CoinGecko over HTTP: the `coingecko` price source (`simple/price`) and `CoinGeckoFx`, the
FX rates of `exchange_rates` (`walletcore_markets.fx.FxSource`).

Rules:
- one `simple/price` call per refresh prices every symbol in all ten trade fiats
  (`precision=full`, read as Decimal); refreshing, keeping the last values and ageing them
  into a 502 are `walletcore.pricing.RefreshingPriceSource`'s;
- a refresh fails (the last values kept, `failures` counted) on any HTTP error (429, a bad
  key's 400/401/403, 5xx), a timeout, a body not of CoinGecko's shape, or an answer without
  one usable price;
- a coin or fiat absent from an answer is not updated, nor is a coin whose
  `last_updated_at` is older than `max_age` or the same as in the answer its prices were
  taken from (so a frozen upstream ages into a 502 like a failing one);
- after a 429 nothing is asked before its `Retry-After` (at most an hour);
- the key travels in the `x-cg-demo-api-key` / `x-cg-pro-api-key` header; neither it nor the
  URL (a proxy's may carry credentials) is in a log, a repr or an error message, and no
  upstream body is logged (an error body may echo what it was sent).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from email.utils import parsedate_to_datetime
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.clock import SystemClock
from walletcore.domain.assets import Fiat
from walletcore.domain.catalog import Catalog
from walletcore.ports import Clock
from walletcore.pricing import PriceTable, RefreshingPriceSource
from walletcore.secretfiles import ConfigurationError

log = logging.getLogger("walletcore.prices.coingecko")

PUBLIC_URL = "https://api.coingecko.com/api/v3"
PRO_URL = "https://pro-api.coingecko.com/api/v3"
KEY_HEADERS: dict[str, str] = {"demo": "x-cg-demo-api-key", "pro": "x-cg-pro-api-key"}
#: Symbol -> CoinGecko coin id (POL is `polygon-ecosystem-token`, no longer `matic-network`).
DEFAULT_IDS: dict[str, str] = {
    "BTC": "bitcoin",
    "ETH": "ethereum",
    "BNB": "binancecoin",
    "POL": "polygon-ecosystem-token",
    "SOL": "solana",
    "TRX": "tron",
    "USDT": "tether",
    "USDC": "usd-coin",
}
#: CoinGecko's code of each trade fiat.
VS_CURRENCIES: dict[Fiat, str] = {fiat: fiat.value.lower() for fiat in Fiat}
MAX_RETRY_AFTER_SECONDS = 3600.0


class CoinGeckoSettings(BaseSettings):
    """Settings of the `coingecko` price source and of `CoinGeckoFx`
    (`WALLETCORE_COINGECKO_` + the field's name in capitals)."""

    model_config = SettingsConfigDict(env_prefix="WALLETCORE_COINGECKO_", extra="ignore")

    #: the API root, e.g. `https://api.coingecko.com/api/v3` (a secret); unset: the public
    #: root, or the Pro one (`https://pro-api.coingecko.com/api/v3`) with a pro key
    url: SecretStr | None = None
    #: a Demo or Pro API key (none: the keyless public API, rate-limited per IP)
    api_key: SecretStr | None = None
    #: which plan the key is of: its header is `x-cg-demo-api-key` or `x-cg-pro-api-key`
    api_key_kind: Literal["demo", "pro"] = "demo"
    #: symbol -> CoinGecko coin id; in the environment a JSON object, laid over the defaults
    #: (`{"POL": "matic-network"}` changes POL only)
    ids: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_IDS))
    #: seconds one HTTP request may take
    timeout_seconds: float = Field(default=10.0, gt=0, le=300)

    @field_validator("ids")
    @classmethod
    def _known_symbols(cls, value: dict[str, str]) -> dict[str, str]:
        given = {k.strip().upper(): v.strip() for k, v in value.items()}
        if not all(given.values()):
            raise ValueError("a coin id cannot be empty")
        return {**DEFAULT_IDS, **given}

    @property
    def base_url(self) -> str:
        if self.url is not None:
            return self.url.get_secret_value().rstrip("/")
        pro = self.api_key is not None and self.api_key_kind == "pro"
        return PRO_URL if pro else PUBLIC_URL


class CoinGeckoError(Exception):
    """A failed CoinGecko call. Its message names the path, the HTTP status and CoinGecko's
    `error_code`: never the URL, the key or the upstream's words."""


class _Api:
    """GETs under the API root with the key, each failure a `CoinGeckoError`."""

    def __init__(
        self, settings: CoinGeckoSettings, client: httpx.AsyncClient | None, clock: Clock
    ) -> None:
        self._root = settings.base_url
        self._headers = {"accept": "application/json"}
        if settings.api_key is not None:
            key = settings.api_key.get_secret_value()
            self._headers[KEY_HEADERS[settings.api_key_kind]] = key
        self._owned = client is None
        self._client = client or httpx.AsyncClient(timeout=settings.timeout_seconds)
        self._clock = clock
        self._quiet_until: datetime | None = None

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        if self._quiet_until is not None and self._clock.now() < self._quiet_until:
            raise _failed(f"{path}: rate limited, not asked again before its Retry-After")
        try:
            response = await self._client.get(
                self._root + path, params=params, headers=self._headers
            )
        except httpx.HTTPError as exc:
            raise _failed(f"{path}: {type(exc).__name__}") from None
        if response.status_code == 429:
            wait = _retry_after(response.headers.get("retry-after"), self._clock.now())
            self._quiet_until = self._clock.now() + timedelta(seconds=wait)
        if response.status_code != 200:
            raise _failed(f"{path}: HTTP {response.status_code}{_error_code(response)}")
        try:
            return json.loads(response.content, parse_float=Decimal)
        except ValueError:
            raise _failed(f"{path}: the body is not JSON") from None

    async def aclose(self) -> None:
        if self._owned:
            await self._client.aclose()


def _failed(message: str) -> CoinGeckoError:
    log.warning("CoinGecko %s", message)
    return CoinGeckoError(message)


def _retry_after(value: str | None, now: datetime) -> float:
    """Seconds to wait from a `Retry-After` (seconds or an HTTP date); 0 without one."""
    if not value:
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - now).total_seconds()
        except (TypeError, ValueError):
            return 0.0
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)


def _error_code(response: httpx.Response) -> str:
    """` (error_code N)` from a `{"status": {"error_code": N, ...}}` body, else nothing."""
    try:
        code = json.loads(response.content)["status"]["error_code"]
    except (ValueError, TypeError, KeyError):
        return ""
    return f" (error_code {code})" if isinstance(code, int) else ""


def _price(value: object) -> Decimal | None:
    """A usable price from a JSON number (a Decimal or an int), else None."""
    if isinstance(value, bool) or not isinstance(value, Decimal | int):
        return None
    price = Decimal(value)
    return price if price.is_finite() and price > 0 else None


def _timestamp(value: object, now: datetime) -> datetime | None:
    """A `last_updated_at` (unix seconds) in `now`'s time zone, else None."""
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        return None
    try:
        return datetime.fromtimestamp(float(value), now.tzinfo)
    except (OverflowError, OSError, ValueError):
        return None


class CoinGeckoPriceSource(RefreshingPriceSource):
    """The refreshing source fed by CoinGecko's `simple/price` (see the module's rules)."""

    def __init__(
        self,
        settings: CoinGeckoSettings,
        clock: Clock,
        *,
        symbols: Iterable[str],
        client: httpx.AsyncClient | None = None,
        interval_seconds: float = 60.0,
        timeout_seconds: float = 10.0,
        max_age_seconds: float = 900.0,
    ) -> None:
        symbols = tuple(symbols)
        unknown = sorted(set(settings.ids) - set(symbols) - set(DEFAULT_IDS))
        if unknown:  # a coin id set for a coin no served asset is
            raise ValueError(f"unknown symbols {unknown}; symbols: {', '.join(symbols)}")
        self._api = _Api(settings, client, clock)
        #: symbol -> coin id, of the served coins (a default of a coin not served: unasked)
        self._ids = {s: coin for s, coin in settings.ids.items() if s in symbols}
        self._oldest = timedelta(seconds=max_age_seconds)
        #: coin id -> the `last_updated_at` of the prices last taken
        self._updated: dict[str, datetime] = {}
        self._params = {
            "ids": ",".join(dict.fromkeys(self._ids.values())),
            "vs_currencies": ",".join(VS_CURRENCIES.values()),
            "precision": "full",
            "include_last_updated_at": "true",
        }
        super().__init__(
            self._fetch_prices,
            clock,
            symbols=symbols,
            interval_seconds=interval_seconds,
            timeout_seconds=timeout_seconds,
            max_age_seconds=max_age_seconds,
        )

    async def _fetch_prices(self) -> PriceTable:
        body = await self._api.get("/simple/price", self._params)
        if not isinstance(body, dict):
            raise _failed("/simple/price: the body is not CoinGecko's shape")
        now = self._clock.now()
        table: dict[str, dict[Fiat, Decimal]] = {}
        unchanged: set[str] = set()
        stamps: dict[str, datetime] = {}
        for symbol, coin in self._ids.items():
            quotes = body.get(coin)
            if not isinstance(quotes, dict):
                continue
            updated = _timestamp(quotes.get("last_updated_at"), now)
            if updated is not None and now - updated > self._oldest:
                continue
            if updated is not None and updated == self._updated.get(coin):
                unchanged.add(symbol)  # nothing newer: its recorded age goes on
                continue
            prices = {
                fiat: price
                for fiat, code in VS_CURRENCIES.items()
                if (price := _price(quotes.get(code))) is not None
            }
            if prices:
                table[symbol] = prices
                if updated is not None:
                    stamps[coin] = updated
        if not table and not unchanged:
            raise _failed("/simple/price: no current price in the answer")
        self._updated.update(stamps)
        missing = sorted(set(self._ids) - set(table) - unchanged)
        if missing:
            log.warning("CoinGecko gave no current price for %s", ", ".join(missing))
        return table

    async def aclose(self) -> None:
        await super().aclose()
        await self._api.aclose()


class CoinGeckoFx:
    """`FxSource` on CoinGecko's `exchange_rates`: one call per `per_usd()` prices all ten
    trade fiats (the rates are per bitcoin; each fiat's is divided by the dollar's).

    Build it with `CoinGeckoFx(CoinGeckoSettings(...))`, or `CoinGeckoFx.from_settings()` for
    the environment's `WALLETCORE_COINGECKO_*`; `client=` shares an `httpx.AsyncClient` (then
    left open here); `await fx.aclose()` when done. It keeps nothing between calls: the caller
    caches, and keeps its last rates when `per_usd()` raises `CoinGeckoError`.
    """

    def __init__(
        self,
        settings: CoinGeckoSettings | None = None,
        *,
        client: httpx.AsyncClient | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._api = _Api(settings or CoinGeckoSettings(), client, clock or SystemClock())

    @classmethod
    def from_settings(cls) -> CoinGeckoFx:
        return cls(CoinGeckoSettings())

    async def per_usd(self) -> dict[Fiat, Decimal]:
        body = await self._api.get("/exchange_rates")
        rates = body.get("rates") if isinstance(body, dict) else None
        if not isinstance(rates, dict):
            raise _failed("/exchange_rates: the body is not CoinGecko's shape")

        def rate(code: str) -> Decimal | None:
            entry = rates.get(code)
            return _price(entry.get("value")) if isinstance(entry, dict) else None

        usd = rate("usd")
        if usd is None:
            raise _failed("/exchange_rates: no usable USD rate")
        found = {fiat: rate(code) for fiat, code in VS_CURRENCIES.items()}
        per_usd = {fiat: value / usd for fiat, value in found.items() if value is not None}
        per_usd[Fiat.USD] = Decimal(1)
        return per_usd

    async def aclose(self) -> None:
        await self._api.aclose()


def build(*, clock: Clock, settings: Any, catalog: Catalog, **_: Any) -> CoinGeckoPriceSource:
    """Entry point `walletcore.price_sources: coingecko`: `CoinGeckoSettings` from the
    environment, the catalog's coins; refresh, timeout and max age from the core's
    settings."""
    try:
        return CoinGeckoPriceSource(
            CoinGeckoSettings(),
            clock,
            symbols=catalog.symbols,
            interval_seconds=settings.price_refresh_seconds,
            timeout_seconds=settings.price_timeout_seconds,
            max_age_seconds=settings.price_max_age_seconds,
        )
    except ValueError as exc:
        raise ConfigurationError(f"WALLETCORE_COINGECKO_IDS: {exc}") from None


__all__ = [
    "CoinGeckoError",
    "CoinGeckoFx",
    "CoinGeckoPriceSource",
    "CoinGeckoSettings",
    "build",
]
