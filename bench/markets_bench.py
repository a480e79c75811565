#!/usr/bin/env python3
"""Markets over loopback: what one price refresh and one approval cost.

Starts the loopback CoinGecko and Binance servers (`walletcore_markets.testing`), builds the
adapters through their entry points from the environment as a deployer would, and prints
the median and p90 of:
- one refresh of the `coingecko` source (every coin in ten fiats, one call);
- one refresh of the `tickers` source (one `fetch_tickers`, plus CoinGecko's FX rates);
- one approval on the `exchange` venue (client order id lookup, order book, market order),
  with ccxt's throttle off and at its default.

    .venv/bin/python bench/markets_bench.py [--samples 50]

Loopback figures: a real provider adds its network round trips (tens of ms each).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from decimal import Decimal
from typing import Any

from walletcore import plugins
from walletcore.clock import SystemClock
from walletcore.domain.assets import Fiat
from walletcore.domain.ids import new_id
from walletcore.domain.trade import FixedLeg, Order, Side
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_markets.testing.binance_server import BinanceTestServer
from walletcore_markets.testing.coingecko_server import CoinGeckoTestServer


def figures(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[int(len(ordered) * 0.9) - 1]
    return f"{statistics.median(ordered) * 1000:8.2f} ms  {p90 * 1000:8.2f} ms"


async def time_refreshes(source: Any, samples: int) -> list[float]:
    took = []
    for _ in range(samples):
        started = time.perf_counter()
        assert await source.refresh(), "a refresh failed"
        took.append(time.perf_counter() - started)
    await source.aclose()
    return took


async def time_approvals(samples: int, rate_limit_ms: str | None) -> list[float]:
    if rate_limit_ms is None:
        os.environ.pop("WALLETCORE_EXCHANGE_RATE_LIMIT_MS", None)
    else:
        os.environ["WALLETCORE_EXCHANGE_RATE_LIMIT_MS"] = rate_limit_ms
    settings, clock = Settings(), SystemClock()
    prices = plugins.build(
        "walletcore.price_sources",
        "coingecko",
        settings=settings,
        clock=clock,
        catalog=CONTRACT_CATALOG,
    )
    venue = plugins.build(
        "walletcore.venues", "exchange", settings=settings, clock=clock, prices=prices
    )
    took = []
    try:
        for _ in range(samples + 1):
            order = Order(
                trade_id=new_id(), side=Side.SELL, asset_id=1, symbol="BTC", decimals=8,
                fiat=Fiat.USD, fixed_leg=FixedLeg.CRYPTO, fixed_amount=Decimal("0.001"),
                approved_at=clock.now(), quoted_price=Decimal(100_000),
            )  # fmt: skip
            started = time.perf_counter()
            await venue.execute(order)
            took.append(time.perf_counter() - started)
    finally:
        await venue.aclose()
        await prices.aclose()
    return took[1:]  # the first loads the markets


async def main(samples: int) -> None:
    with CoinGeckoTestServer() as gecko, BinanceTestServer() as exchange:
        os.environ.update({
            "WALLETCORE_COINGECKO_URL": f"{gecko.url}/api/v3",
            "WALLETCORE_TICKERS_URL": exchange.url,
            "WALLETCORE_TICKERS_FX": "coingecko",
            "WALLETCORE_TICKERS_RATE_LIMIT_MS": "0",
            "WALLETCORE_EXCHANGE_URL": exchange.url,
            "WALLETCORE_EXCHANGE_API_KEY": exchange.api_key,
            "WALLETCORE_EXCHANGE_SECRET": "loopback-secret",
            "WALLETCORE_EXCHANGE_ADJUST_FOR_TIME_DIFFERENCE": "false",
        })  # fmt: skip
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
            os.environ.pop(name, None)
        settings, clock = Settings(), SystemClock()
        rows = []
        for name in ("coingecko", "tickers"):
            source = plugins.build(
                "walletcore.price_sources",
                name,
                settings=settings,
                clock=clock,
                catalog=CONTRACT_CATALOG,
            )
            rows.append((f"refresh `{name}`", await time_refreshes(source, samples)))
        rows.append(("approve `exchange`, throttle off", await time_approvals(samples, "0")))
        rows.append(("approve `exchange`, ccxt's throttle", await time_approvals(10, None)))
        print(f"{'':38}{'p50':>11}  {'p90':>11}")
        for label, took in rows:
            print(f"{label:38}{figures(took)}")
        print(f"orders placed on the loopback exchange: {exchange.placed}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=50)
    asyncio.run(main(parser.parse_args().samples))
