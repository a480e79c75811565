"""Shared by the job tests and their worker subprocess: counting fakes of the upstream
price feed and the venue (counts in files, so they add up across processes), trades to
settle, and containers on a database with the jobs wired."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from walletcore.container import Container, create_container
from walletcore.domain.assets import FeePayer, Fiat
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.ids import new_id
from walletcore.domain.trade import (
    Fill,
    FixedLeg,
    Order,
    OrderOutcome,
    Quote,
    Side,
    Trade,
    TradeStatus,
    derive_figures,
)
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.jobs import JobSettings, JobsMode
from walletcore.ports import Storage, TradeVenue
from walletcore.pricing import PriceTable
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore.testing.storage import autocommit

PRICE = Decimal("3000.5")


def count_lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _append(path: Path | None, line: str) -> None:
    if path is not None:
        with open(path, "a") as f:  # one short write per line: atomic with O_APPEND
            f.write(line + "\n")


class CountingFeed:
    """An upstream price source: every symbol at PRICE in USD and EUR (no GBP, no CAD);
    each fetch appends a line to `log` (and counts in `fetches`)."""

    def __init__(self, log: Path | None = None, price: Decimal = PRICE) -> None:
        self.log = log
        self.price = price
        self.fetches = 0

    async def fetch_table(self) -> PriceTable:
        self.fetches += 1
        _append(self.log, f"fetch {os.getpid()}")
        return {s: {Fiat.USD: self.price, Fiat.EUR: self.price} for s in CONTRACT_CATALOG.symbols}

    async def aclose(self) -> None:
        pass


class CountingVenue(TradeVenue):
    """Fills every order at PRICE when asked its status; each `status` appends
    `status <trade id>` to `log`. While the file `block` exists, a status call hangs."""

    def __init__(self, log: Path | None = None, block: Path | None = None) -> None:
        self.log = log
        self.block = block
        self.statuses: list[str] = []

    async def execute(self, order: Order) -> Any:  # pragma: no cover - not approved here
        raise AssertionError("the jobs never execute an order")

    async def status(self, order: Order) -> OrderOutcome:
        self.statuses.append(order.trade_id)
        _append(self.log, f"status {order.trade_id}")
        while self.block is not None and self.block.exists():
            await asyncio.sleep(0.05)
        figures = derive_figures(order.fixed_leg, order.fixed_amount, PRICE, order.decimals)
        return Fill(figures, reference=f"FILL-{order.trade_id[:8]}")

    async def cancel(self, order: Order) -> OrderOutcome:  # pragma: no cover
        return await self.status(order)


async def executing_trades(storage: Storage, n: int) -> list[Trade]:
    """A client, a user and `n` trades the venue was asked to execute (`executing`)."""
    t0 = datetime.now(UTC).replace(microsecond=0)
    client_id, user_id = new_id(), new_id()
    db = autocommit(storage)
    await db.clients.add(
        ApiClient(client_id, "Jobs", "ef" * 32, (1, 2), FeePayer.USER, {}, False, 1, t0)
    )
    wallet = WalletRecord(client_id, WalletOwner.USER, user_id, b"", {}, t0)
    await db.wallets.add_user(User(user_id, client_id, t0), wallet)
    made = []
    for k in range(n):
        created = t0 + timedelta(milliseconds=k)
        trade = Trade(
            trade_id=new_id(),
            client_id=client_id,
            user_id=user_id,
            side=Side.SELL,
            asset_id=2,
            symbol="ETH",
            fiat=Fiat.EUR,
            fixed_leg=FixedLeg.CRYPTO,
            quote=Quote(Decimal(1), PRICE, PRICE, created + timedelta(hours=1)),
            status=TradeStatus.OPEN,
            created_at=created,
        )
        trade = dataclasses.replace(trade, status=TradeStatus.EXECUTING, approved_at=created)
        await db.trades.add(trade)
        made.append(trade)
    return made


async def statuses(storage: Storage, trades: list[Trade]) -> list[TradeStatus]:
    db = autocommit(storage)
    found = [await db.trades.get(t.client_id, t.user_id, t.trade_id) for t in trades]
    return [t.status for t in found if t is not None]


async def settle_entries(storage: Storage) -> list[str]:
    """The targets of the `trade.settle` audit entries (one per move)."""
    entries = await autocommit(storage).audit.newest(10_000)
    return [e.target for e in entries if e.action == "trade.settle" and e.target]


def job_container(
    storage: Storage,
    *,
    home: Path,
    mode: JobsMode,
    feed: Any,
    venue: TradeVenue,
    database_url: str | None = None,
    refresh_seconds: float = 1.0,
    settle_seconds: float = 1.0,
    **settings: Any,
) -> Container:
    return create_container(
        Settings(
            home=home,
            repo="sql",
            database_url=database_url,
            price_refresh_seconds=refresh_seconds,
            **settings,
        ),
        storage=storage,
        price_feed=feed,
        venue=venue,
        job_settings=JobSettings(
            jobs=mode, jobs_settle_seconds=settle_seconds, jobs_price_cache_seconds=0
        ),
    )


@dataclasses.dataclass(frozen=True)
class PgSchema:
    """A migrated PostgreSQL schema of one test (`pg_schema`)."""

    url: str
    schema: str

    def storage(self) -> Any:
        from walletcore_sql.storage import SqlStorage

        return SqlStorage(self.url, migrate=False, schema=self.schema)
