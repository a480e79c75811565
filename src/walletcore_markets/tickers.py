"""Indicative prices from an exchange's tickers through ccxt (`WALLETCORE_PRICES=tickers`,
settings `WALLETCORE_TICKERS_*`).

Rules:
- One `fetch_tickers` per refresh, for every market the prices need (the markets are
  loaded once); a ticker's price is the middle of its best bid and ask, else its last trade.
- Crossing: a coin's price in a fiat is its direct market `SYMBOL/FIAT` when the exchange
  lists one; otherwise its USD value times the fiat's units per USD (`FxSource.per_usd`).
  A coin's USD value is `SYMBOL/USD` when listed, else `SYMBOL/<usd_quote>` (USDT) times
  the USD value of the quote; the quote's own USD value is its `USDT/USD` market when
  listed, else 1 (par). USDC is priced the same way (`USDC/USD`, else `USDC/USDT` crossed).
- A failed ticker fetch keeps every last value (`RefreshingPriceSource`); a failed fx fetch
  still refreshes the direct markets and USD, and keeps the last crossed values.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from walletcore.domain.assets import Fiat
from walletcore.domain.catalog import Catalog
from walletcore.ports import Clock
from walletcore.pricing import PriceTable, RefreshingPriceSource
from walletcore_markets.ccxt_support import close_quietly, dec, load_fx, make_exchange
from walletcore_markets.fx import FxSource

if TYPE_CHECKING:
    from ccxt.async_support.base.exchange import Exchange  # type: ignore[import-untyped]

log = logging.getLogger("walletcore.prices.tickers")


class TickerSettings(BaseSettings):
    """Settings of the ticker price source (`WALLETCORE_TICKERS_` + the field's name)."""

    model_config = SettingsConfigDict(env_prefix="WALLETCORE_TICKERS_", extra="ignore")

    #: ccxt's id of the exchange
    id: str = "binance"
    #: another scheme and host for every API URL of the exchange (each keeps its path)
    url: str | None = None
    #: the USD stable quote coins without a USD market are crossed through
    usd_quote: str = "USDT"
    #: the FxSource fiats without a direct market are crossed with: `coingecko`,
    #: `module:factory`, or `none` (direct markets and USD only)
    fx: str = "coingecko"
    #: how long one exchange request may take (the refresh itself is bounded by
    #: `WALLETCORE_PRICE_TIMEOUT_SECONDS`)
    timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    #: ccxt's client-side throttle, milliseconds per unit of request weight; unset: ccxt's
    rate_limit_ms: float | None = Field(default=None, ge=0)


class ExchangeTickerPriceSource(RefreshingPriceSource):
    def __init__(
        self,
        exchange: Exchange,
        fx: FxSource | None,
        clock: Clock,
        *,
        symbols: Iterable[str],
        usd_quote: str = "USDT",
        interval_seconds: float = 60.0,
        timeout_seconds: float = 10.0,
        max_age_seconds: float = 900.0,
    ) -> None:
        super().__init__(
            self._fetch_table,
            clock,
            symbols=symbols,
            interval_seconds=interval_seconds,
            timeout_seconds=timeout_seconds,
            max_age_seconds=max_age_seconds,
        )
        self._exchange = exchange
        self._fx = fx
        self._usd_quote = usd_quote
        self._wanted: list[str] | None = None

    async def aclose(self) -> None:
        await super().aclose()
        await self._exchange.close()
        await close_quietly(self._fx)

    async def _markets_wanted(self) -> list[str]:
        if self._wanted is None:
            markets = await self._exchange.load_markets()
            quotes = [f.value for f in Fiat] + ["USD", self._usd_quote]
            names = {f"{s}/{q}" for s in self.symbols for q in quotes if s != q}
            names.add(f"{self._usd_quote}/USD")
            self._wanted = sorted(n for n in names if n in markets and markets[n].get("spot", True))
        return self._wanted

    async def _fetch_table(self) -> PriceTable:
        wanted = await self._markets_wanted()
        tickers = await self._exchange.fetch_tickers(wanted) if wanted else {}
        prices = {name: p for name, t in tickers.items() if (p := _ticker_price(t)) is not None}
        per_usd: Mapping[Fiat, Decimal] = {Fiat.USD: Decimal(1)}
        if self._fx is not None:
            try:
                per_usd = {**await self._fx.per_usd(), Fiat.USD: Decimal(1)}
            except Exception as exc:  # noqa: BLE001 - direct markets and USD still refresh
                log.warning(
                    "fx rates unavailable (%s); crossed prices keep their last values",
                    type(exc).__name__,
                )
        table: dict[str, dict[Fiat, Decimal]] = {}
        for symbol in self.symbols:
            usd = self._usd_value(symbol, prices)
            row: dict[Fiat, Decimal] = {}
            for fiat in Fiat:
                direct = prices.get(f"{symbol}/{fiat.value}")
                if direct is not None:
                    row[fiat] = direct
                elif usd is not None and fiat in per_usd:
                    row[fiat] = usd * per_usd[fiat]
            table[symbol] = row
        return table

    def _usd_value(self, symbol: str, prices: Mapping[str, Decimal]) -> Decimal | None:
        direct = prices.get(f"{symbol}/USD")
        if direct is not None:
            return direct
        quote_usd = prices.get(f"{self._usd_quote}/USD", Decimal(1))
        if symbol == self._usd_quote:
            return quote_usd
        via_quote = prices.get(f"{symbol}/{self._usd_quote}")
        return via_quote * quote_usd if via_quote is not None else None


def _ticker_price(ticker: Mapping[str, Any]) -> Decimal | None:
    bid, ask = dec(ticker.get("bid")), dec(ticker.get("ask"))
    if bid is not None and ask is not None and bid > 0 and ask > 0:
        return (bid + ask) / 2
    last = dec(ticker.get("last"))
    return last if last is not None and last > 0 else None


def build(*, clock: Clock, settings: Any, catalog: Catalog, **_: Any) -> ExchangeTickerPriceSource:
    """Entry point `walletcore.price_sources: tickers`: the catalog's coins."""
    tickers = TickerSettings()
    fx = None if tickers.fx == "none" else load_fx(tickers.fx)
    exchange = make_exchange(
        tickers.id,
        url=tickers.url,
        timeout_seconds=tickers.timeout_seconds,
        rate_limit_ms=tickers.rate_limit_ms,
    )
    return ExchangeTickerPriceSource(
        exchange,
        fx,
        clock,
        symbols=catalog.symbols,
        usd_quote=tickers.usd_quote,
        interval_seconds=settings.price_refresh_seconds,
        timeout_seconds=settings.price_timeout_seconds,
        max_age_seconds=settings.price_max_age_seconds,
    )


__all__ = ["ExchangeTickerPriceSource", "TickerSettings", "build"]
