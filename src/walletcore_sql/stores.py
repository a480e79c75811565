"""The five stores of `SqlStorage`, each over the connection of one unit of work.

Rules:
- Every statement runs in the unit's transaction; the unit commits or rolls back.
- `TradeStore.swap` is one `UPDATE ... WHERE trade_id AND status = expected` (rowcount 1
  wins; a loser's UPDATE matches no row and writes nothing). `lapsed` is one read of the
  partial index `ix_trades_open_expiry`.
- `SendStore.begin` inserts the (client, X-Request-Id) row or locks the stored one
  (`FOR UPDATE`) and lets `SendRecord.claim` decide; `advance` is a compare-and-set on
  (state, attempt).
- A write method in a read unit raises `RuntimeError` before any statement.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.sends import SEND_LEASE, SendRecord
from walletcore.domain.trade import Side, Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports.storage import (
    AuditStore,
    ClientStore,
    SendStore,
    TradeStore,
    UnitOfWork,
    WalletStore,
)
from walletcore_sql import rows
from walletcore_sql.database import Database
from walletcore_sql.tables import api_clients, audit_log, sends, trades, users, wallets


class SqlUnit(UnitOfWork):
    """The stores over one connection in one transaction."""

    def __init__(self, database: Database, conn: AsyncConnection, *, writable: bool) -> None:
        self.database = database
        self.conn = conn
        self.writable = writable
        self.clients: ClientStore = SqlClients(self)
        self.wallets: WalletStore = SqlWallets(self)
        self.trades: TradeStore = SqlTrades(self)
        self.sends: SendStore = SqlSends(self)
        self.audit: AuditStore = SqlAudit(self)

    def writer(self) -> AsyncConnection:
        """The connection, for a write; `RuntimeError` in a read unit."""
        if not self.writable:
            raise RuntimeError("a read unit cannot write; use storage.write()")
        return self.conn

    def insert(self, table: Any) -> Any:
        return self.database.insert(table)

    async def one(self, query: Any) -> Any:
        result = await self.conn.execute(query)
        return result.mappings().one_or_none()


class SqlClients(ClientStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def add(self, client: ApiClient) -> None:
        conn = self._unit.writer()
        statement = self._unit.insert(api_clients).values(rows.client_values(client))
        if (await conn.execute(statement.on_conflict_do_nothing())).rowcount != 1:
            raise InvalidRequest("api client exists already")

    async def get(self, client_id: str) -> ApiClient | None:
        row = await self._unit.one(select(api_clients).where(api_clients.c.client_id == client_id))
        return None if row is None else rows.client_from(row)

    async def all(self) -> list[ApiClient]:
        query = select(api_clients).order_by(
            api_clients.c.created_at.asc().nulls_first(), api_clients.c.client_id
        )
        result = await self._unit.conn.execute(query)
        return [rows.client_from(r) for r in result.mappings()]

    async def update(self, client: ApiClient) -> None:
        conn = self._unit.writer()
        values = rows.client_values(client)
        statement = self._unit.insert(api_clients).values(values)
        statement = statement.on_conflict_do_update(
            index_elements=[api_clients.c.client_id],
            set_={k: v for k, v in values.items() if k != "client_id"},
        )
        await conn.execute(statement)


class SqlWallets(WalletStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def add_user(
        self, user: User, wallet: WalletRecord, *, request_id: str | None = None
    ) -> bool:
        conn = self._unit.writer()
        values = rows.user_values(user, request_id)
        if request_id is None:
            await conn.execute(users.insert().values(values))
        else:
            # The unique (client_id, request_id) index decides a race between two /create
            # calls with one X-Request-Id: the second inserts nothing.
            insert = self._unit.insert(users).values(values).on_conflict_do_nothing()
            if (await conn.execute(insert)).rowcount != 1:
                return False
        await conn.execute(wallets.insert().values(rows.wallet_values(wallet)))
        return True

    async def created_by_request(self, client_id: str, request_id: str) -> str | None:
        query = select(users.c.user_id).where(
            users.c.client_id == client_id, users.c.request_id == request_id
        )
        found = (await self._unit.conn.execute(query)).scalar_one_or_none()
        return None if found is None else str(found)

    async def get_user(self, client_id: str, user_id: str) -> User | None:
        query = select(users).where(users.c.client_id == client_id, users.c.user_id == user_id)
        row = await self._unit.one(query)
        return None if row is None else rows.user_from(row)

    async def add(self, wallet: WalletRecord) -> bool:
        conn = self._unit.writer()
        statement = self._unit.insert(wallets).values(rows.wallet_values(wallet))
        return bool((await conn.execute(statement.on_conflict_do_nothing())).rowcount == 1)

    async def get(
        self, client_id: str, owner: WalletOwner, user_id: str | None
    ) -> WalletRecord | None:
        query = select(wallets).where(
            wallets.c.client_id == client_id,
            wallets.c.owner == owner.value,
            wallets.c.user_id.is_(None) if user_id is None else wallets.c.user_id == user_id,
        )
        row = await self._unit.one(query)
        return None if row is None else rows.wallet_from(row)

    async def update(self, wallet: WalletRecord) -> None:
        conn = self._unit.writer()
        values = rows.wallet_values(wallet)
        user_wallet = wallet.owner is WalletOwner.USER
        statement = self._unit.insert(wallets).values(values)
        statement = statement.on_conflict_do_update(
            index_elements=["client_id", "user_id"] if user_wallet else ["client_id"],
            index_where=wallets.c.owner == wallet.owner.value,
            set_={k: values[k] for k in ("sealed", "addresses", "created_at", "updated_at")},
        )
        await conn.execute(statement)


class SqlTrades(TradeStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def add(self, trade: Trade) -> None:
        await self._unit.writer().execute(trades.insert().values(rows.trade_values(trade)))

    async def get(self, client_id: str, user_id: str, trade_id: str) -> Trade | None:
        query = select(trades).where(
            trades.c.trade_id == trade_id,
            trades.c.client_id == client_id,
            trades.c.user_id == user_id,
        )
        row = await self._unit.one(query)
        return None if row is None else rows.trade_from(row)

    async def page(
        self,
        client_id: str,
        user_id: str,
        *,
        side: Side | None,
        status: TradeStatus | None,
        limit: int,
    ) -> list[Trade]:
        query = select(trades).where(trades.c.client_id == client_id, trades.c.user_id == user_id)
        if side is not None:
            query = query.where(trades.c.side == side.value)
        if status is not None:
            query = query.where(trades.c.status == status.value)
        query = query.order_by(trades.c.created_at.desc(), trades.c.trade_id.desc())
        result = await self._unit.conn.execute(query.limit(max(limit, 0)))
        return [rows.trade_from(r) for r in result.mappings()]

    async def swap(self, expected: TradeStatus, trade: Trade) -> bool:
        conn = self._unit.writer()
        values = rows.trade_values(trade)
        del values["trade_id"]
        statement = (
            update(trades)
            .where(trades.c.trade_id == trade.trade_id, trades.c.status == expected.value)
            .values(values)
        )
        return bool((await conn.execute(statement)).rowcount == 1)

    async def lapsed(self, client_id: str, user_id: str, now: datetime) -> list[Trade]:
        query = select(trades).where(
            trades.c.client_id == client_id,
            trades.c.user_id == user_id,
            trades.c.status == TradeStatus.OPEN.value,
            trades.c.quote_expires_at <= now,
        )
        result = await self._unit.conn.execute(query)
        return [rows.trade_from(r) for r in result.mappings()]


_SEND_MUTABLE = ("state", "locked_until", "tx_hash", "raw_tx", "result", "updated_at")


class SqlSends(SendStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def begin(
        self,
        client_id: str,
        request_id: str,
        fingerprint: str,
        now: datetime,
        *,
        lease: timedelta = SEND_LEASE,
    ) -> SendRecord:
        conn = self._unit.writer()
        fresh = SendRecord.start(client_id, request_id, fingerprint, now, lease)
        key = (sends.c.client_id == client_id, sends.c.request_id == request_id)
        insert = self._unit.insert(sends).values(rows.send_values(fresh)).on_conflict_do_nothing()
        if (await conn.execute(insert)).rowcount == 1:
            return fresh
        # Another request made it first: lock the row and let the domain decide.
        row = await self._unit.one(select(sends).where(*key).with_for_update())
        if row is None:  # pragma: no cover - rows are never deleted
            raise InvalidRequest("X-Request-Id record vanished; retry")
        stored = rows.send_from(row)
        claimed = stored.claim(fingerprint, now, lease)  # raises the 409 and 422 rows
        if claimed is not stored:
            await conn.execute(
                update(sends)
                .where(*key, sends.c.attempt == stored.attempt)
                .values(
                    attempt=claimed.attempt,
                    locked_until=claimed.locked_until,
                    updated_at=claimed.updated_at,
                )
            )
        return claimed

    async def advance(self, current: SendRecord, new: SendRecord) -> bool:
        current.require_successor(new)
        conn = self._unit.writer()
        values = rows.send_values(new)
        statement = (
            update(sends)
            .where(
                sends.c.client_id == current.client_id,
                sends.c.request_id == current.request_id,
                sends.c.state == current.state.value,
                sends.c.attempt == current.attempt,
            )
            .values({k: values[k] for k in _SEND_MUTABLE})
        )
        return bool((await conn.execute(statement)).rowcount == 1)

    async def get(self, client_id: str, request_id: str) -> SendRecord | None:
        query = select(sends).where(
            sends.c.client_id == client_id, sends.c.request_id == request_id
        )
        row = await self._unit.one(query)
        return None if row is None else rows.send_from(row)


class SqlAudit(AuditStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def append(self, entry: AuditEntry) -> None:
        await self._unit.writer().execute(audit_log.insert().values(rows.audit_values(entry)))

    async def newest(self, limit: int = 100) -> list[AuditEntry]:
        query = select(audit_log).order_by(audit_log.c.entry_id.desc()).limit(max(limit, 0))
        result = await self._unit.conn.execute(query)
        return [rows.audit_from(r) for r in result.mappings()]


__all__ = ["SqlUnit"]
