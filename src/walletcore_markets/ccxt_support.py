"""What the venue and the ticker source share: a ccxt client, pointed at another host if
asked, its numbers as Decimals, what a ccxt error says without secrets, and the FxSource a
setting names. (What an error means for an order is the venue's:
`walletcore_markets.exchange.errors`.)

ccxt error texts may carry a request URL (a signed query string holds the signature and
timestamp) or a response body; only the exchange's own `code` and `msg` are ever shown.
"""

from __future__ import annotations

import json
import logging
import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from walletcore.secretfiles import ConfigurationError
from walletcore_markets.fx import FxSource

if TYPE_CHECKING:
    from ccxt.async_support.base.exchange import Exchange  # type: ignore[import-untyped]

#: ccxt's own logger for the clients built here: at DEBUG, ccxt writes every request's
#: headers (the API key) and signed URL; those records are dropped whatever the log level.
_CCXT_LOGGER = "walletcore.markets.ccxt"

#: Binance-style error bodies inside a ccxt error's text: `{"code":-2010,"msg":"..."}`.
_ERROR_BODY = re.compile(r"\{[^{}]*\"(?:msg|message)\"\s*:\s*\"[^\"]{0,300}\"[^{}]*\}")
#: what a plain message must not hold: a URL, a query string, a request or response dump
_UNSAFE = re.compile(r"://|[?&=]|\b(?:GET|POST|PUT|DELETE)\b|[{}\[\]]")


def make_exchange(
    exchange_id: str,
    *,
    api_key: str | None = None,
    secret: str | None = None,
    password: str | None = None,
    url: str | None = None,
    timeout_seconds: float = 10.0,
    sandbox: bool = False,
    adjust_for_time_difference: bool = False,
    rate_limit_ms: float | None = None,
    options: dict[str, Any] | None = None,
) -> Exchange:
    """An async ccxt client of `exchange_id` on its spot markets only.

    `url` moves every API URL of the exchange to that scheme and host, keeping each path
    (a testnet, a proxy, a loopback server in tests). `rate_limit_ms`: ccxt's throttle
    (milliseconds per unit of request weight); None keeps the exchange's default, 0 turns it
    off. Nothing is fetched here.
    """
    ccxt_async = ccxt_errors()
    factory = getattr(ccxt_async, exchange_id, None)
    if exchange_id not in ccxt_async.exchanges or factory is None:
        raise ConfigurationError(f"{exchange_id!r} is not an exchange id ccxt knows")
    config: dict[str, Any] = {
        "logger": _ccxt_logger(),
        "timeout": max(1, int(timeout_seconds * 1000)),
        "enableRateLimit": rate_limit_ms != 0,
        "options": {
            "defaultType": "spot",
            # spot only: no futures or margin endpoints at load time
            "fetchMarkets": {"types": ["spot"]},
            "fetchMargins": False,
            # binance's currencies are a private sapi call: markets carry what we need
            "fetchCurrencies": False,
            "adjustForTimeDifference": adjust_for_time_difference,
            **(options or {}),
        },
    }
    if rate_limit_ms:
        config["rateLimit"] = rate_limit_ms
    for name, value in (("apiKey", api_key), ("secret", secret), ("password", password)):
        if value:
            config[name] = value
    exchange: Exchange = factory(config)
    if sandbox:
        exchange.set_sandbox_mode(True)
    if url:
        point_at(exchange, url)
    return exchange


class _NoWireDumps(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.DEBUG


def _ccxt_logger() -> logging.Logger:
    logger = logging.getLogger(_CCXT_LOGGER)
    if not any(isinstance(f, _NoWireDumps) for f in logger.filters):
        logger.addFilter(_NoWireDumps())
    return logger


def point_at(exchange: Exchange, base_url: str) -> None:
    """Move each of the exchange's API URLs (`urls['api']`) to `base_url`'s scheme and host,
    keeping its path: `https://api.binance.com/api/v3` -> `<base_url>/api/v3`."""
    target = base_url.rstrip("/")

    def move(value: Any) -> Any:
        if isinstance(value, str) and "://" in value:
            return target + urlsplit(value).path
        if isinstance(value, dict):
            return {k: move(v) for k, v in value.items()}
        return value

    exchange.urls["api"] = move(exchange.urls.get("api"))


def dec(value: Any) -> Decimal | None:
    """A ccxt number (float, int or str) as a Decimal; None when absent or not finite."""
    if value is None:
        return None
    try:
        number = Decimal(str(value))
    except ArithmeticError:
        return None
    return number if number.is_finite() else None


def exchange_error(exc: BaseException) -> tuple[str | None, str | None]:
    """(code, message) the exchange answered with, read from a ccxt error's text: a JSON
    error body in it, or ccxt's `"<exchange id> <message>"` form of a message it matched.
    Text that may hold a URL or a request is never returned."""
    text = str(exc)
    found = _ERROR_BODY.search(text)
    if found is not None:
        try:
            body = json.loads(found.group(0))
        except ValueError:
            body = None
        if isinstance(body, dict):
            code = body.get("code")
            message = body.get("msg", body.get("message"))
            return (
                str(code) if code is not None else None,
                str(message)[:200] if message is not None else None,
            )
    _, _, message = text.partition(" ")
    if message and len(message) <= 200 and not _UNSAFE.search(message):
        return None, message
    return None, None


def ccxt_errors() -> Any:
    """ccxt's async package, where its error classes are (imported when first needed)."""
    import ccxt.async_support as ccxt_async  # type: ignore[import-untyped]

    return ccxt_async


def scrub(text: str, *secrets: str | None) -> str:
    """`text` with each secret (longer than 3 characters) replaced by `***`."""
    for secret in secrets:
        if secret and len(secret) > 3:
            text = text.replace(secret, "***")
    return text


def load_fx(name: str) -> FxSource:
    """The FxSource a setting names: `coingecko` (CoinGecko's `exchange_rates`, settings
    `WALLETCORE_COINGECKO_*`) or `module:factory` (called with no arguments). Imported only
    when named."""
    import importlib

    if name == "coingecko":
        from walletcore_markets.coingecko import CoinGeckoFx

        return CoinGeckoFx.from_settings()
    module_name, _, attribute = name.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"fx source {name!r}: use coingecko or module:factory")
    fx: FxSource = getattr(importlib.import_module(module_name), attribute)()
    return fx


async def close_quietly(resource: object) -> None:
    """`await resource.aclose()` when it has one (an FxSource with a connection pool)."""
    aclose = getattr(resource, "aclose", None)
    if aclose is not None:
        await aclose()


__all__ = [
    "ccxt_errors",
    "close_quietly",
    "dec",
    "exchange_error",
    "load_fx",
    "make_exchange",
    "point_at",
    "scrub",
]
