"""What the SQL stores add to the Storage contract: referential integrity, an append-only
audit log, driver errors turned into port-level errors, SQLite's concurrency settings."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from sql_helpers import Db
from sqlalchemy import text

from walletcore.domain.assets import Fiat
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import StorageError, StorageUnavailable
from walletcore.domain.ids import new_id
from walletcore.domain.trade import FixedLeg, Quote, Side, Trade, TradeStatus
from walletcore.testing import autocommit
from walletcore_sql.storage import SqlStorage

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)


@pytest.fixture
async def storage(database: Db) -> AsyncIterator[SqlStorage]:
    r = database.storage(migrate=True)
    await r.start()
    try:
        yield r
    finally:
        await r.aclose()


def _trade(client_id: str, user_id: str) -> Trade:
    return Trade(
        trade_id=new_id(),
        client_id=client_id,
        user_id=user_id,
        side=Side.BUY,
        asset_id=1,
        symbol="BTC",
        fiat=Fiat.USD,
        fixed_leg=FixedLeg.FIAT,
        quote=Quote(Decimal("0.001"), Decimal(65), Decimal(65000), T0 + timedelta(minutes=1)),
        status=TradeStatus.OPEN,
        created_at=T0,
    )


async def test_a_trade_of_an_unknown_user_is_refused(storage: SqlStorage) -> None:
    client = ApiClient(client_id=new_id(), name="x", key_hash="00" * 32)
    await autocommit(storage).clients.add(client)
    with pytest.raises(StorageError) as caught:
        await autocommit(storage).trades.add(_trade(client.client_id, new_id()))
    assert caught.value.status == 500 and caught.value.message == "Internal error"
    assert caught.value.__cause__ is not None  # the driver's error, for the log only


async def test_the_audit_log_is_append_only(storage: SqlStorage) -> None:
    await autocommit(storage).audit.append(
        AuditEntry(T0, None, "auth", "r1", "401", detail="Invalid credentials")
    )
    for statement in ("UPDATE audit_log SET outcome = 'ok'", "DELETE FROM audit_log"):
        with pytest.raises(StorageError):
            async with storage.database.transaction(write=True) as conn:
                await conn.execute(text(statement))
    assert [e.outcome for e in await autocommit(storage).audit.newest()] == ["401"]


async def test_an_unreachable_database_is_a_503() -> None:
    storage = SqlStorage("postgresql+asyncpg://postgres@127.0.0.1:1/test", migrate=False)
    with pytest.raises(StorageUnavailable) as caught:
        await autocommit(storage).clients.get(new_id())
    assert caught.value.status == 503
    await storage.aclose()


async def test_sqlite_runs_in_wal_mode_and_never_waits_on_the_loop(sqlite_database: Db) -> None:
    """Statements run on the loop's thread, so its connections wait for no lock (busy
    timeout 0) and checkpoint nothing on commit; a lock is waited for off the loop."""
    storage = sqlite_database.storage(migrate=True)
    try:
        async with storage.database.transaction() as conn:
            mode = (await conn.execute(text("PRAGMA journal_mode"))).scalar_one()
            timeout = (await conn.execute(text("PRAGMA busy_timeout"))).scalar_one()
            keys = (await conn.execute(text("PRAGMA foreign_keys"))).scalar_one()
            sync = (await conn.execute(text("PRAGMA synchronous"))).scalar_one()
            checkpoint = (await conn.execute(text("PRAGMA wal_autocheckpoint"))).scalar_one()
        assert (mode, keys, timeout, sync, checkpoint) == ("wal", 1, 0, 2, 0)
    finally:
        await storage.aclose()


async def test_a_sqlite_writer_waits_for_another_process_lock_without_blocking_the_loop(
    sqlite_database: Db,
) -> None:
    """Another connection (as another process would) holds the write lock for 0.4 s: the
    write unit waits for it and then commits, and the loop serves reads meanwhile."""
    storage = sqlite_database.storage(migrate=True)
    try:
        await storage.start()
        path = storage.database.url.split("///", 1)[1]
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")
        released = asyncio.get_running_loop().call_later(0.4, holder.execute, "COMMIT")
        client = ApiClient(client_id=new_id(), name="waits", key_hash="00" * 32)
        started = time.monotonic()
        write = asyncio.create_task(autocommit(storage).clients.add(client))
        reads = 0
        while not write.done():
            found = await autocommit(storage).clients.get(client.client_id)
            if found is None:
                reads += 1
            else:  # committed (its group's COMMIT returned) before the writer resumed
                assert found == client and time.monotonic() - started >= 0.35
            await asyncio.sleep(0.01)
        await write
        assert time.monotonic() - started >= 0.35
        assert reads >= 10  # the loop went on while the writer waited
        assert await autocommit(storage).clients.get(client.client_id) == client
        released.cancel()
        holder.close()
    finally:
        await storage.aclose()


async def test_sqlite_keeps_money_as_exact_text(sqlite_database: Db) -> None:
    storage = sqlite_database.storage(migrate=True)
    try:
        client = ApiClient(client_id=new_id(), name="x", key_hash="00" * 32)
        await autocommit(storage).clients.add(client)
        from walletcore.domain.clients import User
        from walletcore.domain.wallet import WalletOwner, WalletRecord

        uid = new_id()
        await autocommit(storage).wallets.add_user(
            User(uid, client.client_id, T0),
            WalletRecord(client.client_id, WalletOwner.USER, uid, b"", {}, T0),
        )
        t = _trade(client.client_id, uid)
        await autocommit(storage).trades.add(t)
        async with storage.database.transaction() as conn:
            row = (
                await conn.execute(
                    text("SELECT typeof(quote_price), quote_price, typeof(created_at) FROM trades")
                )
            ).one()
        assert tuple(row) == ("text", "65000", "text")
    finally:
        await storage.aclose()


async def test_amounts_read_back_without_padding_zeros(storage: SqlStorage) -> None:
    from walletcore.domain.clients import User
    from walletcore.domain.wallet import WalletOwner, WalletRecord

    client = ApiClient(client_id=new_id(), name="x", key_hash="00" * 32)
    await autocommit(storage).clients.add(client)
    uid = new_id()
    await autocommit(storage).wallets.add_user(
        User(uid, client.client_id, T0),
        WalletRecord(client.client_id, WalletOwner.USER, uid, b"", {}, T0),
    )
    t = _trade(client.client_id, uid)
    t = Trade(
        **{
            **{f: getattr(t, f) for f in t.__slots__},
            "quote": Quote(  # type: ignore[arg-type]
                Decimal("1.50"),
                Decimal("100.00"),
                Decimal("0.000000000000000001"),
                t.quote.expires_at,
            ),
        }
    )
    await autocommit(storage).trades.add(t)
    got = await autocommit(storage).trades.get(client.client_id, uid, t.trade_id)
    assert got is not None
    assert [str(got.quote.crypto_amount), str(got.quote.fiat_amount)] == ["1.5", "100"]
    assert got.quote.price == Decimal("1E-18")


def test_the_settlement_statuses_of_the_schema_are_the_domains() -> None:
    """The CHECK and the partial indexes' conditions spell the domain's sets out."""
    import re

    from walletcore.domain.settlement import DUE_STATUSES, HOLDING_STATUSES, SettlementStatus
    from walletcore_sql import tables

    def named(condition: str) -> set[str]:
        return set(re.findall(r"'([a-z_]+)'", condition.split("status IN", 1)[1]))

    assert named(f"status IN {tables.SETTLEMENT_STATUSES}") == {s.value for s in SettlementStatus}
    assert named(tables.SETTLEMENT_DUE) == {s.value for s in DUE_STATUSES}
    assert named(tables.SETTLEMENT_HOLDING) == {s.value for s in HOLDING_STATUSES}


def test_every_sqlite_read_of_a_request_searches_an_index(tmp_path: Path) -> None:
    """SQLite statements run on the event loop's thread, where nothing may wait: none may
    scan a table that grows with use. The plans of the per-request reads name an index."""
    from walletcore_sql import migrate
    from walletcore_sql.engine import sqlite_inline_engine, sqlite_url
    from walletcore_sql.stores import (
        clients,
        deposits,
        events,
        sends,
        settlements,
        trades,
        wallets,
    )

    engine = sqlite_inline_engine(sqlite_url(tmp_path / "plans.db"))
    migrate.upgrade_sync(engine)
    now = datetime.now(UTC)
    ids = {"b_client_id": "c" * 24, "b_user_id": "u" * 24}
    reads = {
        "client": (clients._CLIENT_GET, {"b_client_id": "c" * 24}),
        "user": (wallets._USER_GET, ids),
        "wallet": (wallets._WALLET_GET_USER, {**ids, "b_owner": "user"}),
        "trade": (trades._TRADE_GET, {**ids, "b_trade_id": "t" * 24}),
        "lapsed": (trades._TRADE_LAPSED, {**ids, "b_now": now}),
        "send": (sends._SEND_GET, {"b_client_id": "c" * 24, "b_request_id": "r"}),
    }
    for (side, status), page in trades._TRADE_PAGES.items():
        params = {**ids, "b_limit": 10, "b_side": "sell", "b_status": "open"}
        reads[f"page side={side} status={status}"] = (page, params)
    # the feed, deposits, and what the deposit job reads each run
    key = {"b_chain": "ETHEREUM", "b_tx_hash": "0x1", "b_position": "tx"}
    feed = {**ids, "b_tx": 0, "b_seq": 10, "b_limit": 100}
    reads.update(
        {
            "feed": (events._AFTER[(False, False)], feed),
            "feed of a user": (events._AFTER[(False, True)], feed),
            "event kept": (events._HAS, feed),
            "oldest event": (events._OLDEST, ids),
            "prune": (events._PRUNE, {"b_before": now, "b_limit": 1000}),
            "deposits": (deposits._PAGE[False], {**ids, "b_limit": 100}),
            "deposits of a user": (deposits._PAGE[True], {**ids, "b_limit": 100}),
            "deposit": (deposits._DEPOSIT_GET, key),
            "unsettled": (deposits._UNSETTLED, {**key, "b_limit": 200}),
            "watchlist": (deposits._WATCHLIST, key),
            "cursor": (deposits._CURSOR, key),
        }
    )
    # what a sell or a send reads of a wallet, and the settlement job and the desk's reads
    spend = {**ids, "b_asset_id": 2}
    reads.update(
        {
            "settlement": (settlements._GET, {**ids, "b_trade_id": "t" * 24}),
            "held": (settlements._HELD_ROWS, spend),
            "spending": (sends._SEND_SPENDING_ROWS, spend),
            "due settlements": (settlements._DUE, {"b_now": now, "b_limit": 100}),
            "settlements": (settlements._LISTING[False, False], {**ids, "b_limit": 100}),
            "settlements of an asset": (
                settlements._LISTING[True, False],
                {**spend, "b_limit": 100},
            ),
        }
    )
    try:
        with engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            for name, (query, params) in reads.items():
                compiled = query.compile(dialect=engine.dialect)
                values = compiled.construct_params(params)
                bound = tuple(values[k] for k in compiled.positiontup or [])
                binds = bound if compiled.positional else values
                plan = " | ".join(
                    r[3] for r in raw.execute(f"EXPLAIN QUERY PLAN {compiled}", binds)
                )
                assert "SEARCH" in plan and "SCAN" not in plan, f"{name}: {plan}"
    finally:
        engine.dispose()
