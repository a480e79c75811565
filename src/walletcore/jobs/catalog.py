"""The deployment's background jobs, bound to its adapters: what an engine runs.

- `refresh_prices`: one fetch from the configured upstream price source (`fetch_table`),
  its usable prices saved to the shared table (`unit.prices`), which every process serves
  (`walletcore.pricing.SharedPriceSource`). A run that finds the table refreshed less than
  half an interval ago skips the fetch: a second engine, or a retried run, costs one read.
- `settle_trades`: every approved and executing trade (oldest first, a batch per run)
  asked of the venue through `TradingService.settle`, as `/trade` does when a client
  polls. Each move is a compare-and-set with its `trade.settle` entry, so a trade moves
  once however many runs ask about it.

Errors leave the run (an engine retries it); nothing here loops or sleeps.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from walletcore.domain.errors import PriceUnavailable
from walletcore.domain.ids import new_id
from walletcore.ports import Clock, Storage
from walletcore.pricing import PriceTable, usable_prices
from walletcore.services.trading import TradingService

log = logging.getLogger("walletcore.jobs")

#: Venue calls one settlement run makes at once.
SETTLE_CONCURRENCY = 8


class PriceFeed(Protocol):
    """An upstream price source the refresh job can fetch from (`RefreshingPriceSource`)."""

    async def fetch_table(self) -> PriceTable: ...


@dataclass(frozen=True, slots=True)
class PeriodicJob:
    name: str
    every_seconds: float
    run: Callable[[], Awaitable[object]]


class Jobs:
    """The job functions over the container's adapters. `feed` and `trading` are called
    on first use, so a process that never runs a job never builds the upstream feed."""

    def __init__(
        self,
        *,
        storage: Storage,
        clock: Clock,
        feed: Callable[[], Any],
        trading: Callable[[], TradingService],
        refresh_seconds: float,
        settle_seconds: float,
        settle_batch: int,
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._feed = feed
        self._trading = trading
        self.refresh_seconds = refresh_seconds
        self.settle_seconds = settle_seconds
        self._settle_batch = settle_batch
        self._built_feed: Any = None

    async def aclose(self) -> None:
        """Close the upstream feed if a refresh built it (its HTTP client, say)."""
        feed, self._built_feed = self._built_feed, None
        close = getattr(feed, "aclose", None)
        if close is not None:
            await close()

    def periodic(self) -> list[PeriodicJob]:
        return [
            PeriodicJob("refresh_prices", self.refresh_seconds, self.refresh_prices),
            PeriodicJob("settle_trades", self.settle_seconds, self.settle_trades),
        ]

    async def refresh_prices(self) -> bool:
        """Fetch and save the price table; False when it was fresh already (skipped)."""
        async with self._storage.read() as unit:
            stored = await unit.prices.load()
        newest = max((at for _, at in stored.values()), default=None)
        fresh = timedelta(seconds=self.refresh_seconds / 2)
        if newest is not None and self._clock.now() - newest < fresh:
            return False
        feed = self._built_feed = self._feed()
        fetch = getattr(feed, "fetch_table", None)
        if fetch is None:
            raise TypeError(
                f"the price source {type(feed).__name__} has no fetch_table(); the shared "
                "price refresh needs one (walletcore.pricing.RefreshingPriceSource has it)"
            )
        table = usable_prices(await fetch())
        if not table:
            raise PriceUnavailable("the upstream price source answered no usable price")
        async with self._storage.write() as unit:
            await unit.prices.save(table, self._clock.now())
        log.info("prices refreshed: %d pairs", len(table))
        return True

    async def settle_trades(self) -> int:
        """Ask the venue about the trades in flight; how many moved."""
        async with self._storage.read() as unit:
            in_flight = await unit.trades.in_flight(self._settle_batch)
        if not in_flight:
            return 0
        trading = self._trading()
        request_id = f"job-settle-{new_id()}"
        gate = asyncio.Semaphore(SETTLE_CONCURRENCY)

        async def settle(trade: Any) -> bool:
            async with gate:
                after = await trading.settle(trade, request_id=request_id)
            return after.status is not trade.status

        moved = sum(await asyncio.gather(*(settle(t) for t in in_flight)))
        log.info("settlement: %d of %d trades in flight moved", moved, len(in_flight))
        return moved


__all__ = ["Jobs", "PeriodicJob", "PriceFeed"]
