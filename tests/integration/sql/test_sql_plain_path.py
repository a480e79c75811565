"""The SQL storage with its fast paths off (`SqlStorage(..., direct=False)`): every unit a
connection of SQLAlchemy's engine in its own transaction, every statement a plain one of
SQLAlchemy Core. The storage contract runs on it too
(`tests/integration/storage/test_storage_contract.py`); this checks that it is that path
the contract runs on, and not the fast one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from sql_helpers import QUOTED_AT, Db, open_quote
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection

from walletcore.domain.assets import Chain
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.ids import new_id
from walletcore.domain.trade import Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.testing import autocommit
from walletcore_sql.storage import SqlStorage


@pytest.fixture
async def storage(database: Db) -> AsyncIterator[SqlStorage]:
    plain = SqlStorage(database.url, migrate=True, schema=database.schema, direct=False)
    await plain.start()
    try:
        yield plain
    finally:
        await plain.aclose()


def _entry(action: str, trade: Trade) -> AuditEntry:
    return AuditEntry(
        QUOTED_AT, trade.client_id, action, new_id(), "ok", trade.user_id, trade.trade_id
    )


async def test_every_statement_goes_through_sqlalchemy_one_plain_statement_each(
    storage: SqlStorage,
) -> None:
    database = storage.database
    bound = database._bound
    assert bound is not None and bound.engine is not None
    # no fast path: no units' pool, no loop-thread SQLite, no write queue
    assert database.inline is None and bound.units is None and bound.writers is None
    sent: list[str] = []

    def record(*args: Any) -> None:
        sent.append(str(args[2]))  # the statement's SQL

    event.listen(bound.engine.sync_engine, "before_cursor_execute", record)
    client = ApiClient(client_id=new_id(), name="x", key_hash="00" * 32)
    await autocommit(storage).clients.add(client)
    uid = new_id()
    await autocommit(storage).wallets.add_user(
        User(uid, client.client_id, QUOTED_AT),
        WalletRecord(
            client.client_id, WalletOwner.USER, uid, b"s", {Chain.BITCOIN: "bc1q"}, QUOTED_AT
        ),
    )
    quote = open_quote(client.client_id, uid)
    executing = quote.start_approval(QUOTED_AT + timedelta(seconds=1))
    await storage.add_trade(quote, _entry("trade.sell", quote))
    assert await storage.swap_trade(TradeStatus.OPEN, executing, _entry("trade.approve", quote))
    # a lost compare-and-set writes nothing, its entry neither
    assert not await storage.swap_trade(TradeStatus.OPEN, executing, _entry("trade.cancel", quote))
    async with storage.read() as unit:
        assert isinstance(unit.conn, AsyncConnection)  # type: ignore[attr-defined]
        stored = await unit.trades.get(client.client_id, uid, quote.trade_id)
        entries = [e.action for e in await unit.audit.newest(10)]
    assert stored is not None and stored.status is TradeStatus.EXECUTING
    assert entries == ["trade.approve", "trade.sell"]
    # the quote and its entry, the move and its entry: each a statement of its own, none
    # of the fast path's combined forms (`WITH ... INSERT`)
    assert sum(s.startswith("INSERT INTO trades") for s in sent) == 1
    assert sum(s.startswith("INSERT INTO audit_log") for s in sent) == 2
    assert sum(s.startswith("UPDATE trades") for s in sent) == 2
    assert not [s for s in sent if s.lstrip().upper().startswith("WITH")]
