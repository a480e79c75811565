"""Helpers of the SQL adapter's tests (imported by name: this directory is on sys.path)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import event, text

from walletcore.domain.assets import Fiat
from walletcore.domain.ids import new_id
from walletcore.domain.trade import (
    Accepted,
    Fill,
    FixedLeg,
    Order,
    OrderOutcome,
    Quote,
    Side,
    Trade,
    TradeStatus,
)
from walletcore.ports import Clock, PriceMap, PriceSource, Storage, TradeVenue
from walletcore.services.assets import AssetPolicy
from walletcore.services.audit import Auditor
from walletcore.services.trading import TradingService
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG, FixedHoldings
from walletcore_sandbox.prices import sandbox_unit_price
from walletcore_sandbox.venue import SandboxVenue
from walletcore_sql.engine import sqlite_url
from walletcore_sql.storage import SqlStorage


@dataclass(frozen=True)
class Db:
    """An empty database: `url` plus, on PostgreSQL, the schema to use."""

    kind: str
    url: str
    schema: str | None = None

    def storage(self, *, migrate: bool = False) -> SqlStorage:
        return SqlStorage(self.url, migrate=migrate, schema=self.schema)


class ClockPrices(PriceSource):
    """Sandbox prices at the clock's time, without the background refresh."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    async def price_map(self) -> PriceMap:
        return {}

    async def unit_price(self, symbol: str, fiat: Fiat) -> Decimal:
        return sandbox_unit_price(symbol, fiat, self._clock.now())


class CountingVenue(TradeVenue):
    """The sandbox venue, counting the orders it executes and taking a while to answer."""

    def __init__(self, clock: Clock, delay: float = 0.05) -> None:
        self.executed: Counter[str] = Counter()
        self._inner = SandboxVenue(ClockPrices(clock))
        self._delay = delay

    async def execute(self, order: Order) -> Fill | Accepted:
        self.executed[order.trade_id] += 1
        await asyncio.sleep(self._delay)
        return await self._inner.execute(order)

    async def status(self, order: Order) -> OrderOutcome:
        return await self._inner.status(order)

    async def cancel(self, order: Order) -> OrderOutcome:
        return await self._inner.cancel(order)


def trading_service(
    storage: Storage,
    clock: Clock,
    venue: TradeVenue,
    settings: Settings,
    prices: PriceSource | None = None,
) -> TradingService:
    """The trading service on `storage`, priced by `prices` (the clock's prices if None)."""
    return TradingService(
        storage,
        clock,
        prices if prices is not None else ClockPrices(clock),
        venue,
        AssetPolicy(CONTRACT_CATALOG, settings.limited_assets, settings.unavailable_assets),
        Auditor(storage, clock),
        holdings=FixedHoldings(storage=storage),
    )


# -- a SQLite storage with a table of marks (group commit and write-job tests) ----------
@asynccontextmanager
async def marks_storage(directory: Path) -> AsyncIterator[SqlStorage]:
    """A migrated SQLite storage under `directory`, with a `marks (name)` table."""
    opened = SqlStorage(sqlite_url(directory / "db" / "walletcore.db"), migrate=True)
    await opened.start()
    async with opened.database.transaction(write=True) as conn:
        await conn.execute(text("CREATE TABLE marks (name TEXT PRIMARY KEY)"))
    try:
        yield opened
    finally:
        await opened.aclose()


def count_commits(storage: SqlStorage) -> list[int]:
    """Counts the COMMITs on the SQLite writer's engine (in `[0]`)."""
    assert storage.database.inline is not None
    counted = [0]

    def listener(*_: Any) -> None:
        counted[0] += 1

    event.listen(storage.database.inline.engine, "commit", listener)
    return counted


def sqlite_path(storage: SqlStorage) -> str:
    return storage.database.url.split("///", 1)[1]


def committed_marks(storage: SqlStorage) -> set[str]:
    """The marks another connection (another process) sees on disk."""
    with sqlite3.connect(sqlite_path(storage)) as other:
        return {row[0] for row in other.execute("SELECT name FROM marks")}


#: When `open_quote`'s trades are made (their minutes count from it).
QUOTED_AT = datetime(2026, 3, 4, 5, 6, 7, 891234, tzinfo=UTC)


def open_quote(client_id: str, user_id: str, minutes: int = 0) -> Trade:
    """An open sell quote made `minutes` after `QUOTED_AT`, lapsing a minute after."""
    return Trade(
        trade_id=new_id(),
        client_id=client_id,
        user_id=user_id,
        side=Side.SELL,
        asset_id=1,
        symbol="BTC",
        fiat=Fiat.EUR,
        fixed_leg=FixedLeg.CRYPTO,
        quote=Quote(
            Decimal("0.0100"),
            Decimal("601.234567891"),
            Decimal("60123.4567891"),
            QUOTED_AT + timedelta(minutes=minutes + 1),
        ),
        status=TradeStatus.OPEN,
        created_at=QUOTED_AT + timedelta(minutes=minutes),
    )
