"""Price sources that keep the spec's rules: `RefreshingPriceSource`, a snapshot refreshed
in the background from any fetch function, and `SharedPriceSource`, the table a refresh
job saved once for the whole deployment (`walletcore.ports.prices`), read from storage.

Rules (the spec's `/prices` rules):
- values are refreshed in the background; the response carries no timestamp;
- the last known value of each symbol and fiat is kept while a refresh fails;
- a fiat with no recorded quote reads as 0;
- a quote needs a usable price: none recorded, or older than `max_age`, is a 502.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal

from walletcore.domain.assets import PRICE_FIATS, Fiat
from walletcore.domain.errors import OrderRejected, PriceUnavailable, PricingTimeout
from walletcore.domain.trade import Order, Side
from walletcore.ports import Clock, PriceMap, PriceSource, Storage, StoredPrices

log = logging.getLogger("walletcore.prices")

#: symbol -> fiat -> price, as an upstream delivers it (possibly partial).
PriceTable = Mapping[str, Mapping[Fiat, Decimal]]
Fetch = Callable[[], Awaitable[PriceTable]]


class _KnownPrices(PriceSource):
    """What both sources share: the recorded prices, `(symbol, fiat) -> (price, when)`, the
    `/prices` map built from them, their ages, and the quote rule (none recorded or older
    than `max_age`: 502). Subclasses bring the values up to date in `_fresh`. `symbols`:
    the coins the `/prices` map lists (the catalog's `symbols`)."""

    def __init__(
        self,
        clock: Clock,
        *,
        symbols: Iterable[str],
        max_age_seconds: float,
        timeout_seconds: float,
    ) -> None:
        self._clock = clock
        self.symbols: tuple[str, ...] = tuple(symbols)
        self._max_age = timedelta(seconds=max_age_seconds)
        self._timeout = timeout_seconds
        self._known: StoredPrices = {}
        #: The `/prices` map, rebuilt when the values change (callers must not mutate it).
        self._map: PriceMap = price_map_of({}, self.symbols)

    def _record(self, known: StoredPrices) -> None:
        self._known = dict(known)
        self._map = price_map_of(self._known, self.symbols)

    async def _fresh(self) -> None:
        """Bring the recorded values up to date if they are due (a refresh, a read)."""
        raise NotImplementedError

    def _current(self) -> bool:
        """True when `_fresh` would do nothing: a quote then waits on no task (a timeout
        around nothing cost a task per quote)."""
        return False

    def ages(self) -> dict[str, timedelta]:
        """symbol -> time since its newest recorded price (`walletcore.ports.PriceAges`);
        symbols never priced are absent. Read-only: it never refreshes nor reads."""
        newest: dict[str, datetime] = {}
        for (symbol, _), (_, at) in self._known.items():
            newest[symbol] = max(at, newest.get(symbol, at))
        now = self._clock.now()
        return {symbol: now - at for symbol, at in newest.items()}

    # -- the port -------------------------------------------------------------------------
    async def price_map(self) -> PriceMap:
        await self._fresh()
        return self._map

    async def unit_price(self, symbol: str, fiat: Fiat) -> Decimal:
        if not self._current():
            try:
                await asyncio.wait_for(self._fresh(), self._timeout)
            except TimeoutError:
                raise PricingTimeout() from None
        known = self._known.get((symbol, fiat))
        if known is None or self._clock.now() - known[1] > self._max_age:
            raise PriceUnavailable(f"No usable {symbol}/{fiat.value} price; retry with backoff")
        return known[0]


class RefreshingPriceSource(_KnownPrices):
    def __init__(
        self,
        fetch: Fetch,
        clock: Clock,
        *,
        symbols: Iterable[str],
        interval_seconds: float = 60.0,
        timeout_seconds: float = 10.0,
        max_age_seconds: float = 900.0,
    ) -> None:
        super().__init__(
            clock,
            symbols=symbols,
            max_age_seconds=max_age_seconds,
            timeout_seconds=timeout_seconds,
        )
        self._fetch = fetch
        self._interval = interval_seconds
        self._last_attempt: datetime | None = None
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

    async def fetch_table(self) -> PriceTable:
        """One fetch from the upstream, bounded by the refresh timeout, recording nothing
        here: what the refresh job saves to the shared store (walletcore.jobs.prices)."""
        return await asyncio.wait_for(self._fetch(), self._timeout)

    async def refresh(self) -> bool:
        """One refresh; False (and the old values kept) when the upstream failed."""
        async with self._refresh_lock:
            self._last_attempt = self._clock.now()
            try:
                table = await self.fetch_table()
            except Exception as exc:  # noqa: BLE001 - any upstream failure keeps the last values
                self.failures += 1
                log.warning(
                    "price refresh failed (%s); serving last known values", type(exc).__name__
                )
                return False
            now = self._clock.now()
            fresh = {pair: (price, now) for pair, price in usable_prices(table).items()}
            self._record({**self._known, **fresh})
            return True

    async def _fresh(self) -> None:
        """Without a background task (an embedder that never called start), refresh inline."""
        if not self._current():
            await self.refresh()

    def _current(self) -> bool:
        if self._task is not None:
            return True
        last = self._last_attempt
        return last is not None and self._clock.now() - last < timedelta(seconds=self._interval)


def usable_prices(table: PriceTable) -> dict[tuple[str, Fiat], Decimal]:
    """The pairs of an upstream table worth recording: finite, positive prices."""
    return {
        (symbol, Fiat(fiat)): price
        for symbol, by_fiat in table.items()
        for fiat, price in by_fiat.items()
        if price is not None and price.is_finite() and price > 0
    }


def price_map_of(known: StoredPrices, symbols: Iterable[str]) -> PriceMap:
    """The `/prices` map of recorded prices: every one of `symbols` (the catalog's, sorted),
    0 for a fiat never recorded."""
    return {
        symbol: {
            fiat.value: float(known[(symbol, fiat)][0]) if (symbol, fiat) in known else 0.0
            for fiat in PRICE_FIATS
        }
        for symbol in symbols
    }


#: Refreshes the shared table when it is due (an in-process job run inline, for a process
#: whose jobs were never started); None where another process refreshes it (a worker).
RefreshIfDue = Callable[[], Awaitable[object]]


class SharedPriceSource(_KnownPrices):
    """The PriceSource of every process of a deployment whose prices a job refreshes: it
    serves the table stored by `walletcore.jobs.prices.refresh_prices`, with the rules of
    `RefreshingPriceSource` (last known values; 0 for a fiat never recorded in the map; a
    quote on a price older than `max_age` or none is a 502).

    The stored table is read at most once per `cache_seconds` (per process and event
    loop: concurrent callers share one read); a read that fails keeps serving what was
    read last, and its age rules still apply.
    """

    def __init__(
        self,
        storage: Storage,
        clock: Clock,
        *,
        symbols: Iterable[str],
        max_age_seconds: float = 900.0,
        timeout_seconds: float = 10.0,
        cache_seconds: float = 1.0,
        refresh_if_due: RefreshIfDue | None = None,
    ) -> None:
        super().__init__(
            clock,
            symbols=symbols,
            max_age_seconds=max_age_seconds,
            timeout_seconds=timeout_seconds,
        )
        self._storage = storage
        self._cache_seconds = cache_seconds
        self._refresh_if_due = refresh_if_due
        self._loaded_at: float | None = None
        self._loading: asyncio.Future[None] | None = None
        self.loads = 0

    def __repr__(self) -> str:
        return f"SharedPriceSource({self._storage!r})"

    def _current(self) -> bool:
        loaded = self._loaded_at
        return loaded is not None and time.monotonic() - loaded < self._cache_seconds

    async def _fresh(self) -> None:
        if self._current():
            return
        loop = asyncio.get_running_loop()
        flight = self._loading
        if flight is None or flight.done() or flight.get_loop() is not loop:
            flight = self._loading = loop.create_task(self._load())
        await asyncio.shield(flight)

    async def _load(self) -> None:
        try:
            if self._refresh_if_due is not None:
                await self._refresh_if_due()
            async with self._storage.read() as unit:
                known = await unit.prices.load()
        except Exception as exc:  # noqa: BLE001 - the last values read stay served
            log.warning("stored prices unreadable (%s); serving the last read", type(exc).__name__)
            return
        finally:
            self._loaded_at = time.monotonic()
        self.loads += 1
        if known != self._known:
            self._record(known)


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
