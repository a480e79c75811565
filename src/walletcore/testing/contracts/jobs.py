"""The storage promises background jobs rely on: the shared price table
(`unit.prices`, walletcore.ports.prices) and the trades in flight (`trades.in_flight`).
Part of `StorageContract` (its base class)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from walletcore.domain.assets import FeePayer, Fiat
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.ids import new_id
from walletcore.domain.trade import FixedLeg, Quote, Side, Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports.storage import Storage
from walletcore.testing.storage import autocommit

T0 = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)


async def _user(storage: Storage) -> tuple[str, str]:
    client_id, user_id = new_id(), new_id()
    db = autocommit(storage)
    await db.clients.add(
        ApiClient(client_id, "Jobs", "cd" * 32, (1, 2), FeePayer.USER, {}, False, 1, T0)
    )
    wallet = WalletRecord(client_id, WalletOwner.USER, user_id, b"", {}, T0)
    await db.wallets.add_user(User(user_id, client_id, T0), wallet)
    return client_id, user_id


def _trade(client_id: str, user_id: str, status: TradeStatus, created_at: datetime) -> Trade:
    price = Decimal("3000.5")
    trade = Trade(
        trade_id=new_id(),
        client_id=client_id,
        user_id=user_id,
        side=Side.SELL,
        asset_id=2,
        symbol="ETH",
        fiat=Fiat.EUR,
        fixed_leg=FixedLeg.CRYPTO,
        quote=Quote(Decimal(1), price, price, created_at + timedelta(seconds=60)),
        status=TradeStatus.OPEN,
        created_at=created_at,
    )
    if status is TradeStatus.OPEN:
        return trade
    approved_at = created_at + timedelta(seconds=1)
    return dataclasses.replace(trade, status=status, approved_at=approved_at)


class JobStorageContract:
    """What the price refresh and the settlement jobs need of a `storage` fixture."""

    pytestmark = pytest.mark.asyncio

    # -- the shared price table ---------------------------------------------------------
    async def test_a_fresh_price_table_is_empty(self, storage: Storage) -> None:
        async with storage.read() as unit:
            assert await unit.prices.load() == {}

    async def test_saved_prices_round_trip_with_their_instant(self, storage: Storage) -> None:
        table = {
            ("BTC", Fiat.USD): Decimal("97000.123456789012345678"),
            ("ETH", Fiat.EUR): Decimal("3000.5"),
        }
        async with storage.write() as unit:
            await unit.prices.save(table, T0)
            assert (await unit.prices.load())[("ETH", Fiat.EUR)] == (Decimal("3000.5"), T0)
        async with storage.read() as unit:
            loaded = await unit.prices.load()
        assert loaded == {key: (price, T0) for key, price in table.items()}
        assert all(at.utcoffset() == timedelta(0) for _, at in loaded.values())

    async def test_a_partial_save_keeps_the_other_pairs(self, storage: Storage) -> None:
        later = T0 + timedelta(seconds=60)
        db = autocommit(storage)
        await db.prices.save({("BTC", Fiat.USD): Decimal(1), ("ETH", Fiat.USD): Decimal(2)}, T0)
        await db.prices.save({("BTC", Fiat.USD): Decimal(3)}, later)
        assert await db.prices.load() == {
            ("BTC", Fiat.USD): (Decimal(3), later),
            ("ETH", Fiat.USD): (Decimal(2), T0),
        }

    async def test_an_older_save_never_replaces_a_newer_price(self, storage: Storage) -> None:
        later = T0 + timedelta(seconds=60)
        db = autocommit(storage)
        await db.prices.save({("BTC", Fiat.USD): Decimal(3)}, later)
        await db.prices.save({("BTC", Fiat.USD): Decimal(1)}, T0)
        assert await db.prices.load() == {("BTC", Fiat.USD): (Decimal(3), later)}

    async def test_concurrent_saves_keep_the_newest(self, storage: Storage) -> None:
        pairs = [("BTC", Fiat.USD), ("ETH", Fiat.USD), ("SOL", Fiat.EUR)]

        async def save(n: int) -> None:
            async with storage.write() as unit:
                at = T0 + timedelta(seconds=n)
                await unit.prices.save({p: Decimal(n + 1) for p in pairs}, at)

        await asyncio.gather(*(save(n) for n in range(8)))
        loaded = await autocommit(storage).prices.load()
        assert loaded == {p: (Decimal(8), T0 + timedelta(seconds=7)) for p in pairs}

    async def test_prices_cannot_be_saved_in_a_read_unit(self, storage: Storage) -> None:
        async with storage.read() as unit:
            with pytest.raises(RuntimeError):
                await unit.prices.save({("BTC", Fiat.USD): Decimal(1)}, T0)
        assert await autocommit(storage).prices.load() == {}

    # -- trades in flight ---------------------------------------------------------------
    async def test_in_flight_lists_approved_and_executing_trades_of_every_client(
        self, storage: Storage
    ) -> None:
        db = autocommit(storage)
        first, second = await _user(storage), await _user(storage)
        made = []
        for n, status in enumerate(
            [
                TradeStatus.EXECUTING,
                TradeStatus.OPEN,
                TradeStatus.APPROVED,
                TradeStatus.COMPLETED,
                TradeStatus.FAILED,
                TradeStatus.EXECUTING,
            ]
        ):
            owner = first if n % 2 == 0 else second
            trade = _trade(*owner, status, T0 + timedelta(seconds=n))
            await db.trades.add(trade)
            made.append(trade)
        in_flight = await db.trades.in_flight(10)
        assert [t.trade_id for t in in_flight] == [
            made[0].trade_id,
            made[2].trade_id,
            made[5].trade_id,
        ]
        assert in_flight[0] == made[0]
        assert [t.trade_id for t in await db.trades.in_flight(2)] == [
            made[0].trade_id,
            made[2].trade_id,
        ]

    async def test_a_settled_trade_leaves_in_flight(self, storage: Storage) -> None:
        db = autocommit(storage)
        client_id, user_id = await _user(storage)
        trade = _trade(client_id, user_id, TradeStatus.EXECUTING, T0)
        await db.trades.add(trade)
        failed = dataclasses.replace(trade, status=TradeStatus.FAILED, completed_at=T0)
        assert await db.trades.swap(TradeStatus.EXECUTING, failed)
        assert await db.trades.in_flight(10) == []
