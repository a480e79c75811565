"""Sandbox prices: deterministic, plausible, moving slowly with time; no network.

Each symbol has a USD base price and drifts along a slow sine wave (a few percent over
hours; stablecoins within 0.1%). Other fiats follow fixed FX rates. The same instant gives
the same price on every machine, so the sandbox venue can re-price an order statelessly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

from walletcore.domain.assets import Fiat
from walletcore.domain.catalog import Catalog
from walletcore.ports import Clock
from walletcore.pricing import PriceTable, RefreshingPriceSource

BASE_USD: dict[str, float] = {
    "BTC": 65000.0,
    "ETH": 3200.0,
    "BNB": 580.0,
    "POL": 0.45,
    "SOL": 150.0,
    "TRX": 0.16,
    "USDT": 1.0,
    "USDC": 1.0,
}
#: Units of each fiat per US dollar.
FX_PER_USD: dict[Fiat, float] = {
    Fiat.USD: 1.0,
    Fiat.EUR: 0.92,
    Fiat.GBP: 0.79,
    Fiat.CAD: 1.36,
    Fiat.AUD: 1.52,
    Fiat.SEK: 10.60,
    Fiat.DKK: 6.87,
    Fiat.PLN: 3.98,
    Fiat.BRL: 5.05,
    Fiat.AED: 3.6725,
}
_STABLE = {"USDT", "USDC"}
_PERIOD_SECONDS = 6 * 3600.0


def sandbox_unit_price(symbol: str, fiat: Fiat, at: datetime) -> Decimal:
    """The sandbox price of one whole `symbol` in `fiat` at the minute of `at`."""
    minute = math.floor(at.timestamp() / 60.0)
    phase = (sum(map(ord, symbol)) % 97) / 97.0 * 2 * math.pi
    amplitude = 0.001 if symbol in _STABLE else 0.03
    drift = 1.0 + amplitude * math.sin(2 * math.pi * minute * 60.0 / _PERIOD_SECONDS + phase)
    value = BASE_USD[symbol] * drift * FX_PER_USD[fiat]
    return Decimal(repr(value)).quantize(Decimal("0.00000001"))


def sandbox_table(at: datetime, symbols: Iterable[str]) -> PriceTable:
    """The sandbox prices of `symbols` at `at` (a symbol without a base price is absent:
    not quotable)."""
    return {s: {f: sandbox_unit_price(s, f, at) for f in Fiat} for s in symbols if s in BASE_USD}


class SandboxPriceSource(RefreshingPriceSource):
    """The refreshing source fed by `sandbox_table` at the clock's time."""

    def __init__(
        self,
        clock: Clock,
        *,
        symbols: Iterable[str],
        interval_seconds: float = 60.0,
        timeout_seconds: float = 10.0,
        max_age_seconds: float = 900.0,
    ) -> None:
        symbols = tuple(symbols)

        async def fetch() -> PriceTable:
            return sandbox_table(clock.now(), symbols)

        super().__init__(
            fetch,
            clock,
            symbols=symbols,
            interval_seconds=interval_seconds,
            timeout_seconds=timeout_seconds,
            max_age_seconds=max_age_seconds,
        )


def build(*, clock: Clock, settings: Any, catalog: Catalog, **_: Any) -> SandboxPriceSource:
    """Entry point `walletcore.price_sources: sandbox`: the catalog's coins."""
    return SandboxPriceSource(
        clock,
        symbols=catalog.symbols,
        interval_seconds=settings.price_refresh_seconds,
        timeout_seconds=settings.price_timeout_seconds,
        max_age_seconds=settings.price_max_age_seconds,
    )
