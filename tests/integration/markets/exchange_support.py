"""Shared by the exchange venue and ticker tests: a loopback Binance with known credentials,
fakes of the FxSource and the container's PriceSource, and `Order` values."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from walletcore.clock import ManualClock
from walletcore.domain.assets import Fiat
from walletcore.domain.ids import new_id
from walletcore.domain.trade import FixedLeg, Order, Side
from walletcore.ports import PriceMap
from walletcore_markets.exchange import (
    ExchangeSettings,
    ExchangeVenue,
    exchange_for,
    rate_from_prices,
)
from walletcore_markets.testing.binance_server import BinanceTestServer

API_KEY = "vmPUZE6mv9SD5VNHk4HlWFsOr6aKE2zvsw0MuIgwCIPy6utIco14y7Ju91duEh8A"
SECRET = "NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j"
#: units per USD of the fake FxSource
PER_USD: dict[Fiat, Decimal] = {
    Fiat.USD: Decimal(1),
    Fiat.EUR: Decimal("0.92"),
    Fiat.GBP: Decimal("0.79"),
    Fiat.CAD: Decimal("1.37"),
    Fiat.AUD: Decimal("1.52"),
    Fiat.SEK: Decimal("10.5"),
    Fiat.DKK: Decimal("6.86"),
    Fiat.PLN: Decimal("3.95"),
    Fiat.BRL: Decimal("5.6"),
    Fiat.AED: Decimal("3.6725"),
}


class FakeFx:
    """An FxSource answering fixed rates, or failing when told."""

    def __init__(self, rates: Mapping[Fiat, Decimal] | None = None) -> None:
        self.rates = dict(rates or PER_USD)
        self.fail = False
        self.calls = 0

    async def per_usd(self) -> Mapping[Fiat, Decimal]:
        self.calls += 1
        if self.fail:
            raise RuntimeError("fx upstream down")
        return dict(self.rates)


class FakePrices:
    """The container's PriceSource as the venue uses it: a USD stablecoin in each fiat."""

    def __init__(self, fx: FakeFx | None = None) -> None:
        self.fx = fx or FakeFx()

    async def price_map(self) -> PriceMap:
        return {}

    async def unit_price(self, symbol: str, fiat: Fiat) -> Decimal:
        assert symbol in ("USDT", "USDC"), symbol
        return (await self.fx.per_usd())[fiat]


def binance(**kwargs: Any) -> BinanceTestServer:
    return BinanceTestServer(api_key=API_KEY, secret=SECRET, **kwargs)


def venue_settings(server: BinanceTestServer, **overrides: Any) -> ExchangeSettings:
    values: dict[str, Any] = {
        "id": "binance",
        "api_key": API_KEY,
        "secret": SECRET,
        "url": server.url,
        "timeout_seconds": 0.5,
        "order_wait_seconds": 0,
        "adjust_for_time_difference": False,
        "rate_limit_ms": 0,  # ccxt's throttle would only slow the loopback down
        **overrides,
    }
    return ExchangeSettings(**values)


def make_venue(
    server: BinanceTestServer,
    *,
    clock: ManualClock | None = None,
    prices: FakePrices | None = None,
    max_slippage: str = "2",
    **overrides: Any,
) -> ExchangeVenue:
    settings = venue_settings(server, **overrides)
    return ExchangeVenue(
        exchange_for(settings),
        settings,
        clock=clock or ManualClock(),
        rate=rate_from_prices(prices or FakePrices()),
        max_slippage_percent=Decimal(max_slippage),
    )


def make_order(
    amount: str,
    *,
    side: Side = Side.BUY,
    symbol: str = "BTC",
    fiat: Fiat = Fiat.USD,
    fixed_leg: FixedLeg = FixedLeg.CRYPTO,
    quoted_price: str | None = None,
    decimals: int = 8,
    approved_at: datetime | None = None,
    trade_id: str | None = None,
) -> Order:
    return Order(
        trade_id=trade_id or new_id(),
        side=side,
        asset_id=1,
        symbol=symbol,
        decimals=decimals,
        fiat=fiat,
        fixed_leg=fixed_leg,
        fixed_amount=Decimal(amount),
        approved_at=approved_at or ManualClock().now(),
        quoted_price=Decimal(quoted_price) if quoted_price is not None else None,
    )


def order_posts(server: BinanceTestServer) -> int:
    """POST /api/v3/order requests the server saw (placed or refused)."""
    return sum(1 for r in server.requests if r == ("POST", "/api/v3/order"))
