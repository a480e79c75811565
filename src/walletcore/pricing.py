"""A PriceSource that serves a snapshot refreshed in the background from any fetch function.

Rules (the spec's `/prices` rules):
- values are refreshed in the background; the response carries no timestamp;
- the last known value of each symbol and fiat is kept while a refresh fails;
- a fiat with no recorded quote reads as 0;
- a quote needs a usable price: none recorded, or older than `max_age`, is a 502.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal

from walletcore.domain.assets import PRICE_FIATS, SYMBOLS, Fiat
from walletcore.domain.errors import OrderRejected, PriceUnavailable, PricingTimeout
from walletcore.domain.trade import Order, Side
from walletcore.ports import Clock, PriceMap, PriceSource

log = logging.getLogger("walletcore.prices")

#: symbol -> fiat -> price, as an upstream delivers it (possibly partial).
PriceTable = Mapping[str, Mapping[Fiat, Decimal]]
Fetch = Callable[[], Awaitable[PriceTable]]


class RefreshingPriceSource(PriceSource):
    def __init__(
        self,
        fetch: Fetch,
        clock: Clock,
        *,
        interval_seconds: float = 60.0,
        timeout_seconds: float = 10.0,
        max_age_seconds: float = 900.0,
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._interval = interval_seconds
        self._timeout = timeout_seconds
        self._max_age = timedelta(seconds=max_age_seconds)
        #: (symbol, fiat) -> (price, when it was recorded)
        self._known: dict[tuple[str, Fiat], tuple[Decimal, datetime]] = {}
        self._last_attempt: datetime | None = None
        #: The `/prices` map, rebuilt once per successful refresh (callers must not mutate it).
        self._map: PriceMap = self._build_map()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._refresh_lock = asyncio.Lock()
        self.failures = 0

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        await self.refresh()
        if self._task is None:
            self._closing = False
            self._task = asyncio.create_task(self._loop(), name="walletcore-price-refresh")

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        # On Python 3.11, `asyncio.wait_for` swallows a cancel that lands just as the fetch
        # completes; the loop would then run on and this await would never return. The flag
        # ends the loop at its next turn whether or not the cancel got through.
        self._closing = True
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def _loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self._interval)
            if not self._closing:
                await self.refresh()

    async def refresh(self) -> bool:
        """One refresh; False (and the old values kept) when the upstream failed."""
        async with self._refresh_lock:
            self._last_attempt = self._clock.now()
            try:
                table = await asyncio.wait_for(self._fetch(), self._timeout)
            except Exception as exc:  # noqa: BLE001 - any upstream failure keeps the last values
                self.failures += 1
                log.warning(
                    "price refresh failed (%s); serving last known values", type(exc).__name__
                )
                return False
            now = self._clock.now()
            for symbol, by_fiat in table.items():
                for fiat, price in by_fiat.items():
                    if price is not None and price.is_finite() and price > 0:
                        self._known[(symbol, Fiat(fiat))] = (price, now)
            self._map = self._build_map()
            return True

    async def _refresh_if_due(self) -> None:
        """Without a background task (an embedder that never called start), refresh inline."""
        if self._task is not None:
            return
        last = self._last_attempt
        if last is None or self._clock.now() - last >= timedelta(seconds=self._interval):
            await self.refresh()

    # -- the port -------------------------------------------------------------------------
    async def price_map(self) -> PriceMap:
        await self._refresh_if_due()
        return self._map

    def _build_map(self) -> PriceMap:
        return {
            symbol: {
                fiat.value: float(self._known[(symbol, fiat)][0])
                if (symbol, fiat) in self._known
                else 0.0
                for fiat in PRICE_FIATS
            }
            for symbol in SYMBOLS
        }

    async def unit_price(self, symbol: str, fiat: Fiat) -> Decimal:
        try:
            await asyncio.wait_for(self._refresh_if_due(), self._timeout)
        except TimeoutError:
            raise PricingTimeout() from None
        known = self._known.get((symbol, fiat))
        if known is None or self._clock.now() - known[1] > self._max_age:
            raise PriceUnavailable(f"No usable {symbol}/{fiat.value} price; retry with backoff")
        return known[0]


def slippage_percent(order: Order, price: Decimal) -> Decimal:
    """How far (percent, positive) `price` moved against the order's side from its quote:
    down for a sell, up for a buy; 0 when it moved in the user's favour or was not quoted."""
    quoted = order.quoted_price
    if quoted is None or quoted <= 0:
        return Decimal(0)
    moved = (quoted - price) if order.side is Side.SELL else (price - quoted)
    return max(Decimal(0), moved * 100 / quoted)


def check_slippage(order: Order, price: Decimal, limit_percent: Decimal) -> None:
    """Refuse (`OrderRejected`: nothing placed, the trade `failed`) an order re-priced at
    `price` that moved against the user more than `limit_percent` from its quote. A move in
    the user's favour passes whatever its size."""
    moved = slippage_percent(order, price)
    if moved > limit_percent:
        raise OrderRejected(
            f"the price moved {moved.quantize(Decimal('0.01'))}% against the quote, over the "
            f"slippage limit of {limit_percent}%; request a new quote"
        )
