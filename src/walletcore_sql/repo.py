"""`SqlRepo`: the Repo port on SQLAlchemy 2 (async), PostgreSQL or SQLite.

Rules:
- Every method is one transaction. `swap_trade` is one `UPDATE ... WHERE trade_id AND
  status = expected` (rowcount 1 wins; a loser's UPDATE matches no row and it re-reads
  nothing inside the transaction). `expire_lapsed` first looks for lapsed open quotes with
  a read, and writes only when it found some (the usual `/trades` call writes nothing).
- The audit entries a change carries (`audit=`) are inserted in the change's transaction,
  only when it applied: the audit log commits with the change or not at all.
- `begin_send` inserts or locks the (client, X-Request-Id) row in one transaction and lets
  `SendRecord.claim` decide; `advance_send` is a compare-and-set on (state, attempt).
- Connections, transactions, lazy migration and error mapping: `walletcore_sql.database`.
- Nonce leases (advisory locks on PostgreSQL, lock files on SQLite; floors in
  `nonce_floors`): `walletcore_sql.nonces`.
"""

from __future__ import annotations

import dataclasses
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
from walletcore.ports import AuditEntries, Lifecycle, NonceLeases, Repo
from walletcore.sandbox.nonceleases import WAIT_SECONDS
from walletcore.secretfiles import ConfigurationError
from walletcore_sql import rows
from walletcore_sql.database import Database
from walletcore_sql.engine import database_url, redacted
from walletcore_sql.nonces import nonce_leases
from walletcore_sql.tables import api_clients, audit_log, sends, trades, users, wallets


class SqlRepo(Repo, Lifecycle):
    def __init__(
        self,
        url: str,
        *,
        migrate: bool,
        schema: str | None = None,
        nonce_wait: float = WAIT_SECONDS,
        **engine_options: Any,
    ) -> None:
        """`migrate`: upgrade the schema on first use (sandbox); else only check it.

        `schema` (PostgreSQL): the search_path, for tests and side-by-side installs.
        `nonce_wait`: seconds a nonce lease is waited for (`WALLETCORE_NONCE_WAIT_SECONDS`).
        """
        self.database = Database(url, migrate=migrate, schema=schema, **engine_options)
        self._tx = self.database.transaction
        self._insert = self.database.insert
        self._nonce_leases = nonce_leases(self.database, wait=nonce_wait)

    def __repr__(self) -> str:
        return f"SqlRepo({redacted(self.database.url)!r}, migrate={self.database.migrate})"

    async def start(self) -> None:
        """Migrate (sandbox) or check the schema (production); raises `SchemaError`."""
        await self.database.start()

    async def aclose(self) -> None:
        await self.database.aclose()

    # -- api clients ----------------------------------------------------------------------
    async def add_client(self, client: ApiClient, *, audit: AuditEntries = ()) -> None:
        statement = self._insert(api_clients).values(rows.client_values(client))
        async with self._tx(write=True) as conn:
            result = await conn.execute(statement.on_conflict_do_nothing())
            if result.rowcount != 1:
                raise InvalidRequest("api client exists already")
            await _audit(conn, audit)

    async def get_client(self, client_id: str) -> ApiClient | None:
        async with self._tx() as conn:
            row = await _one(conn, select(api_clients).where(api_clients.c.client_id == client_id))
        return None if row is None else rows.client_from(row)

    async def list_clients(self) -> list[ApiClient]:
        """By creation time, then id."""
        query = select(api_clients).order_by(
            api_clients.c.created_at.asc().nulls_first(), api_clients.c.client_id
        )
        async with self._tx() as conn:
            result = await conn.execute(query)
            return [rows.client_from(r) for r in result.mappings()]

    async def update_client(self, client: ApiClient, *, audit: AuditEntries = ()) -> None:
        values = rows.client_values(client)
        statement = self._insert(api_clients).values(values)
        statement = statement.on_conflict_do_update(
            index_elements=[api_clients.c.client_id],
            set_={k: v for k, v in values.items() if k != "client_id"},
        )
        async with self._tx(write=True) as conn:
            await conn.execute(statement)
            await _audit(conn, audit)

    # -- users and wallets ------------------------------------------------------------------
    async def add_user_wallet(
        self,
        user: User,
        wallet: WalletRecord,
        *,
        request_id: str | None = None,
        audit: AuditEntries = (),
    ) -> bool:
        values = rows.user_values(user, request_id)
        async with self._tx(write=True) as conn:
            if request_id is None:
                await conn.execute(users.insert().values(values))
            else:
                # The unique (client_id, request_id) index decides a race between two
                # /create calls with one X-Request-Id: the second inserts nothing.
                insert = self._insert(users).values(values).on_conflict_do_nothing()
                if (await conn.execute(insert)).rowcount != 1:
                    return False
            await conn.execute(wallets.insert().values(rows.wallet_values(wallet)))
            await _audit(conn, audit)
            return True

    async def created_by_request(self, client_id: str, request_id: str) -> str | None:
        query = select(users.c.user_id).where(
            users.c.client_id == client_id, users.c.request_id == request_id
        )
        async with self._tx() as conn:
            found = (await conn.execute(query)).scalar_one_or_none()
        return None if found is None else str(found)

    async def get_user(self, client_id: str, user_id: str) -> User | None:
        query = select(users).where(users.c.client_id == client_id, users.c.user_id == user_id)
        async with self._tx() as conn:
            row = await _one(conn, query)
        return None if row is None else rows.user_from(row)

    async def add_wallet(self, wallet: WalletRecord, *, audit: AuditEntries = ()) -> bool:
        statement = self._insert(wallets).values(rows.wallet_values(wallet))
        async with self._tx(write=True) as conn:
            result = await conn.execute(statement.on_conflict_do_nothing())
            if result.rowcount != 1:
                return False
            await _audit(conn, audit)
            return True

    async def get_wallet(
        self, client_id: str, owner: WalletOwner, user_id: str | None
    ) -> WalletRecord | None:
        query = select(wallets).where(
            wallets.c.client_id == client_id,
            wallets.c.owner == owner.value,
            wallets.c.user_id.is_(None) if user_id is None else wallets.c.user_id == user_id,
        )
        async with self._tx() as conn:
            row = await _one(conn, query)
        return None if row is None else rows.wallet_from(row)

    async def update_wallet(self, wallet: WalletRecord, *, audit: AuditEntries = ()) -> None:
        """Replace the owner's wallet record (stored as new when there was none)."""
        values = rows.wallet_values(wallet)
        user_wallet = wallet.owner is WalletOwner.USER
        statement = self._insert(wallets).values(values)
        statement = statement.on_conflict_do_update(
            index_elements=["client_id", "user_id"] if user_wallet else ["client_id"],
            index_where=wallets.c.owner == wallet.owner.value,
            set_={k: values[k] for k in ("sealed", "addresses", "created_at", "updated_at")},
        )
        async with self._tx(write=True) as conn:
            await conn.execute(statement)
            await _audit(conn, audit)

    # -- trades ---------------------------------------------------------------------------
    async def add_trade(self, trade: Trade, *, audit: AuditEntries = ()) -> None:
        async with self._tx(write=True) as conn:
            await conn.execute(trades.insert().values(rows.trade_values(trade)))
            await _audit(conn, audit)

    async def get_trade(self, client_id: str, user_id: str, trade_id: str) -> Trade | None:
        query = select(trades).where(
            trades.c.trade_id == trade_id,
            trades.c.client_id == client_id,
            trades.c.user_id == user_id,
        )
        async with self._tx() as conn:
            row = await _one(conn, query)
        return None if row is None else rows.trade_from(row)

    async def list_trades(
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
        query = query.limit(max(limit, 0))
        async with self._tx() as conn:
            result = await conn.execute(query)
            return [rows.trade_from(r) for r in result.mappings()]

    async def swap_trade(
        self, expected: TradeStatus, trade: Trade, *, audit: AuditEntries = ()
    ) -> bool:
        values = rows.trade_values(trade)
        del values["trade_id"]
        statement = (
            update(trades)
            .where(trades.c.trade_id == trade.trade_id, trades.c.status == expected.value)
            .values(values)
        )
        async with self._tx(write=True) as conn:
            result = await conn.execute(statement)
            if result.rowcount != 1:
                return False
            await _audit(conn, audit)
            return True

    async def expire_lapsed(
        self, client_id: str, user_id: str, now: datetime, *, audit: AuditEntry | None = None
    ) -> int:
        """An unapproved quote expires at the instant it lapsed (as `Trade.expire` does).

        A read finds the lapsed open quotes first (the partial index `ix_trades_open_expiry`
        keeps it small); only then is there a write transaction, with one conditional
        UPDATE per quote, so a quote another request expired meanwhile counts nothing and
        carries no audit entry.
        """
        lapsed = select(trades.c.trade_id).where(
            trades.c.client_id == client_id,
            trades.c.user_id == user_id,
            trades.c.status == TradeStatus.OPEN.value,
            trades.c.quote_expires_at <= now,
        )
        async with self._tx() as conn:
            found = [str(t) for t in (await conn.execute(lapsed)).scalars()]
        if not found:
            return 0
        expired = 0
        async with self._tx(write=True) as conn:
            for trade_id in found:
                statement = (
                    update(trades)
                    .where(
                        trades.c.trade_id == trade_id,
                        trades.c.status == TradeStatus.OPEN.value,
                        trades.c.quote_expires_at <= now,
                    )
                    .values(
                        status=TradeStatus.EXPIRED.value, completed_at=trades.c.quote_expires_at
                    )
                )
                if (await conn.execute(statement)).rowcount != 1:
                    continue
                expired += 1
                if audit is not None:
                    await _audit(conn, [dataclasses.replace(audit, target=trade_id)])
        return expired

    # -- sends ----------------------------------------------------------------------------
    async def begin_send(
        self,
        client_id: str,
        request_id: str,
        fingerprint: str,
        now: datetime,
        *,
        lease: timedelta = SEND_LEASE,
        audit: AuditEntries = (),
    ) -> SendRecord:
        fresh = SendRecord.start(client_id, request_id, fingerprint, now, lease)
        key = (sends.c.client_id == client_id, sends.c.request_id == request_id)
        insert = self._insert(sends).values(rows.send_values(fresh)).on_conflict_do_nothing()
        async with self._tx(write=True) as conn:
            if (await conn.execute(insert)).rowcount == 1:
                await _audit(conn, audit)
                return fresh
            # Another request made it first: lock the row and let the domain decide.
            row = await _one(conn, select(sends).where(*key).with_for_update())
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
                await _audit(conn, audit)
            return claimed

    async def advance_send(
        self, current: SendRecord, new: SendRecord, *, audit: AuditEntries = ()
    ) -> bool:
        current.require_successor(new)
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
        async with self._tx(write=True) as conn:
            result = await conn.execute(statement)
            if result.rowcount != 1:
                return False
            await _audit(conn, audit)
            return True

    async def get_send(self, client_id: str, request_id: str) -> SendRecord | None:
        query = select(sends).where(
            sends.c.client_id == client_id, sends.c.request_id == request_id
        )
        async with self._tx() as conn:
            row = await _one(conn, query)
        return None if row is None else rows.send_from(row)

    # -- audit ------------------------------------------------------------------------------
    async def append_audit(self, entry: AuditEntry) -> None:
        async with self._tx(write=True) as conn:
            await conn.execute(audit_log.insert().values(rows.audit_values(entry)))

    async def list_audit(self, limit: int = 100) -> list[AuditEntry]:
        query = select(audit_log).order_by(audit_log.c.entry_id.desc()).limit(max(limit, 0))
        async with self._tx() as conn:
            result = await conn.execute(query)
            return [rows.audit_from(r) for r in result.mappings()]

    # -- nonces ---------------------------------------------------------------------------
    def nonce_leases(self) -> NonceLeases:
        return self._nonce_leases


_SEND_MUTABLE = ("state", "locked_until", "tx_hash", "raw_tx", "result", "updated_at")


async def _audit(conn: AsyncConnection, entries: AuditEntries) -> None:
    """Insert the entries a change carries, in the change's transaction."""
    if entries:
        await conn.execute(audit_log.insert(), [rows.audit_values(e) for e in entries])


async def _one(conn: AsyncConnection, query: Any) -> Any:
    result = await conn.execute(query)
    return result.mappings().one_or_none()


def build(*, settings: Any, clock: Any = None, **_: Any) -> SqlRepo:
    """Entry point `walletcore.repos: sql`.

    URL: `WALLETCORE_DATABASE_URL`, else the SQLite file `WALLETCORE_HOME/walletcore.db`.
    The sandbox profile migrates on start; production only checks the schema, and needs
    an explicit database URL.
    """
    production = str(getattr(settings, "profile", "sandbox")) == "production"
    if production and getattr(settings, "database_url", None) is None:
        raise ConfigurationError(
            "WALLETCORE_DATABASE_URL is required on the production profile "
            "(e.g. postgresql+asyncpg://user@host/db)"
        )
    return SqlRepo(
        database_url(settings),
        migrate=not production,
        nonce_wait=float(getattr(settings, "nonce_wait_seconds", WAIT_SECONDS)),
    )


__all__ = ["SqlRepo", "build"]
