"""Fixtures of the core's unit tests: a sandbox core on a manual clock, a client, a user."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from walletcore import Caller, Container, Settings, create_container
from walletcore.clock import ManualClock
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient
from walletcore.domain.trade import Accepted, Fill, Order, OrderOutcome, Trade, TradeStatus
from walletcore.ports import Clock, Storage, TradeStore, TradeVenue, UnitOfWork
from walletcore.testing import CONTRACT_CATALOG, FixedHoldings, InMemoryStorage, autocommit
from walletcore_sandbox.prices import SandboxPriceSource
from walletcore_sandbox.venue import SandboxVenue


class _YieldingTrades:
    """A unit's trades that yield right after reading a trade, and count the reads of one
    trade and the compare-and-sets."""

    def __init__(self, inner: TradeStore, swaps: list[TradeStatus], reads: list[str]) -> None:
        self._inner = inner
        self._swaps = swaps
        self._reads = reads

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def get(self, client_id: str, user_id: str, trade_id: str) -> Trade | None:
        self._reads.append(trade_id)
        trade = await self._inner.get(client_id, user_id, trade_id)
        await asyncio.sleep(0)
        return trade

    async def swap(
        self, expected: TradeStatus, trade: Trade, *, entry: AuditEntry | None = None
    ) -> bool:
        self._swaps.append(expected)
        return await self._inner.swap(expected, trade, entry=entry)


class YieldingStorage(InMemoryStorage):
    """Yields to other tasks right after reading a trade, so concurrent requests interleave
    between their read and their compare-and-set, as they would against a database; every
    compare-and-set of a trade is counted in `swaps`, every read of one in `trade_reads`
    (its id)."""

    def __init__(self) -> None:
        super().__init__()
        self.swaps: list[TradeStatus] = []
        self.trade_reads: list[str] = []

    @asynccontextmanager
    async def read(self) -> AsyncIterator[UnitOfWork]:
        async with super().read() as unit:
            unit.trades = _YieldingTrades(unit.trades, self.swaps, self.trade_reads)  # type: ignore[assignment]
            yield unit

    @asynccontextmanager
    async def write(self) -> AsyncIterator[UnitOfWork]:
        async with super().write() as unit:
            unit.trades = _YieldingTrades(unit.trades, self.swaps, self.trade_reads)  # type: ignore[assignment]
            yield unit


class CountingVenue(TradeVenue):
    """Wraps a venue and counts the orders it was asked to execute."""

    def __init__(self, inner: TradeVenue | None = None, delay: float = 0.0) -> None:
        #: the sandbox venue on the core's prices unless given (`make_core` sets it)
        self.inner = inner
        self.delay = delay
        self.executed: list[Order] = []
        self.polled: list[Order] = []

    @property
    def venue(self) -> TradeVenue:
        assert self.inner is not None, "make_core hands the venue its prices"
        return self.inner

    async def execute(self, order: Order) -> Fill | Accepted:
        self.executed.append(order)
        if self.delay:
            await asyncio.sleep(self.delay)
        return await self.venue.execute(order)

    async def status(self, order: Order) -> OrderOutcome:
        self.polled.append(order)
        return await self.venue.status(order)

    async def cancel(self, order: Order) -> OrderOutcome:
        return await self.venue.cancel(order)


@dataclass
class Core:
    container: Container
    clock: ManualClock
    storage: InMemoryStorage
    venue: CountingVenue
    client: ApiClient
    api_key: str = field(repr=False)
    user_id: str = ""
    requests: list[str] = field(default_factory=list)

    @property
    def db(self) -> Any:
        """The storage, one unit per call (`walletcore.testing.autocommit`)."""
        return autocommit(self.storage)

    def caller(self, request_id: str | None = None) -> Caller:
        rid = request_id or f"req-{len(self.requests) + 1}"
        self.requests.append(rid)
        return Caller(self.client, rid)

    @property
    def trading(self) -> Any:
        return self.container.trading()

    @property
    def auth(self) -> Any:
        return self.container.auth()

    async def sell(self, **body: Any) -> Trade:
        body.setdefault("asset_id", 1)
        trade: Trade = await self.trading.sell(self.caller(), user_id=self.user_id, **body)
        return trade

    async def stored(self, trade: Trade) -> Trade:
        found = await self.db.trades.get(trade.client_id, trade.user_id, trade.trade_id)
        assert found is not None
        return found


CoreFactory = Callable[..., Awaitable[Core]]


@pytest.fixture
def make_core(
    settings: Settings,
    clock: ManualClock,
    make_user: Callable[[Storage, Clock, str], Awaitable[str]],
) -> CoreFactory:
    """`await make_core(storage=..., venue=..., prices=..., **settings changes)`."""

    async def build(
        *,
        storage: InMemoryStorage | None = None,
        venue: CountingVenue | None = None,
        prices: Any = None,
        assets: list[int] | None = None,
        holdings: Any = None,
        **changes: Any,
    ) -> Core:
        storage = storage if storage is not None else InMemoryStorage()
        venue = venue if venue is not None else CountingVenue()
        prices = (
            prices
            if prices is not None
            else SandboxPriceSource(clock, symbols=CONTRACT_CATALOG.symbols, interval_seconds=1)
        )
        if venue.inner is None:
            venue.inner = SandboxVenue(prices)
        container = create_container(
            settings.model_copy(update=changes),
            clock=clock,
            storage=storage,
            venue=venue,
            prices=prices,
            holdings=holdings if holdings is not None else FixedHoldings(storage=storage),
        )
        issued = await container.auth().create_client("Acme Pay", assets=assets)
        user_id = await make_user(storage, clock, issued.client.client_id)
        return Core(container, clock, storage, venue, issued.client, issued.api_key, user_id)

    return build


@pytest.fixture
async def core(make_core: CoreFactory) -> Core:
    return await make_core()
