"""`SqlUnit`: the stores over the connection of one unit of work, and the unit's deferred
inserts; `LazyWriter`, SQLite's write unit that opens its transaction at its first
statement.

Rules:
- Every statement runs in the unit's transaction; the unit commits or rolls back.
- A write method in a read unit raises `RuntimeError` before any statement.
"""

from __future__ import annotations

import contextlib
from typing import Any

from sqlalchemy import Table

from walletcore.ports.policies import PolicyStore
from walletcore.ports.prices import PriceRecords
from walletcore.ports.storage import (
    AuditStore,
    ClientStore,
    DepositStore,
    DeskPauseStore,
    EventStore,
    SendStore,
    SettlementStore,
    UnitOfWork,
    WalletStore,
)
from walletcore.ports.webhooks import WebhookStore
from walletcore_sql import rows
from walletcore_sql.database import Database
from walletcore_sql.stores.audit import SqlAudit
from walletcore_sql.stores.clients import SqlClients
from walletcore_sql.stores.deposits import SqlDeposits
from walletcore_sql.stores.desk import SqlDeskPauses
from walletcore_sql.stores.events import SqlEvents
from walletcore_sql.stores.policies import SqlPolicies
from walletcore_sql.stores.prices import SqlPrices
from walletcore_sql.stores.sends import SqlSends
from walletcore_sql.stores.settlements import SqlSettlements
from walletcore_sql.stores.statements import Upsert, combined, insert_all, upsert
from walletcore_sql.stores.trades import SqlTrades
from walletcore_sql.stores.wallets import SqlWallets
from walletcore_sql.stores.webhooks import SqlWebhooks


class SqlUnit(UnitOfWork):
    """The stores over one connection in one transaction.

    Write units defer the inserts that answer nothing (`trades.add`, `audit.append` and
    the event its entry carries, `events.publish`):
    they are sent before the next statement of the unit or when it ends (`flush`). On
    PostgreSQL's fast path together, as one statement: a unit that wrote only those (a
    quote and its entry) is then one autocommitted statement, no BEGIN, no COMMIT round
    trips. Elsewhere one by one; on SQLite's fast path a unit that wrote only those is
    handed to the write queue whole when it ends (`SqlStorage.write`).
    """

    def __init__(
        self,
        database: Database,
        conn: Any,
        *,
        writable: bool,
        trade_rows: rows.TradeRows,
    ) -> None:
        self.database = database
        #: trades from rows (`SqlStorage.trade_rows`: the database's terminal trades built once)
        self.trade_rows = trade_rows
        self.conn = conn
        self.writable = writable
        self._pending: list[tuple[Table, dict[str, Any]]] = []
        self.clients: ClientStore = SqlClients(self)
        self.wallets: WalletStore = SqlWallets(self)
        self.trades: SqlTrades = SqlTrades(self)
        self.sends: SendStore = SqlSends(self)
        self.audit: AuditStore = SqlAudit(self)
        self.deposits: DepositStore = SqlDeposits(self)
        self.events: EventStore = SqlEvents(self)
        self.settlements: SettlementStore = SqlSettlements(self)
        self.desk_pauses: DeskPauseStore = SqlDeskPauses(self)
        self.webhooks: WebhookStore = SqlWebhooks(self)
        self.prices: PriceRecords = SqlPrices(self)
        self.policies: PolicyStore = SqlPolicies(self)

    def writer(self) -> Any:
        """The connection, for a write; `RuntimeError` in a read unit."""
        if not self.writable:
            raise RuntimeError("a read unit cannot write; use storage.write()")
        return self.conn

    def upsert(self, build: Upsert) -> Any:
        """The dialect's statement `build` makes (an upsert), built once per dialect."""
        return upsert(self.database, build)

    def take_pending(self) -> list[tuple[Table, dict[str, Any]]]:
        """The deferred inserts, no longer the unit's to send (`insert_all` sends them)."""
        pending, self._pending = self._pending, []
        return pending

    async def run(self, statement: Any, params: dict[str, Any]) -> Any:
        """Execute one statement of the unit, after the inserts deferred before it."""
        if self._pending:
            await self.flush()
        return await self.conn.execute(statement, params)

    def defer(self, table: Table, values: dict[str, Any]) -> None:
        """An insert that answers nothing: deferred (class docstring), with no await."""
        self.writer()
        self._pending.append((table, values))

    async def flush(self, *, last: bool = False) -> None:
        """Send the deferred inserts: on PostgreSQL's fast path as one statement, which
        `last` (the unit ends cleanly) autocommits when it is all the unit sent
        (`execute_alone`; a single statement is atomic on its own); else one by one."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        if not self.database.pg_direct:
            await insert_all(pending, self.conn)
            return
        statement, params = combined(pending)
        if statement is None:  # a table twice: one statement each, in order
            await insert_all(pending, self.conn)
        elif last:
            await self.conn.execute_alone(statement, params)
        else:
            await self.conn.execute(statement, params)

    async def one(self, query: Any, params: dict[str, Any]) -> Any:
        result = await self.run(query, params)
        return result.mappings().one_or_none()

    async def all(self, query: Any, params: dict[str, Any]) -> Any:
        result = await self.run(query, params)
        return result.mappings().all()


class LazyWriter:
    """SQLite: a write unit's connection that opens the unit's transaction
    (`Database.unit(write=True)`, entered on `stack`) at its first statement; until then
    the unit holds no lock (`SqlStorage.write`)."""

    __slots__ = ("_conn", "_database", "_stack")

    def __init__(self, database: Database, stack: contextlib.AsyncExitStack) -> None:
        self._database = database
        self._stack = stack
        self._conn: Any = None

    @property
    def opened(self) -> bool:
        return self._conn is not None

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        conn = self._conn
        if conn is None:
            conn = self._conn = await self._stack.enter_async_context(
                self._database.unit(write=True)
            )
        return await conn.execute(statement, parameters)
