"""`SqlStorage`: the Storage port on SQLAlchemy 2 (async), PostgreSQL or SQLite.

Rules:
- A write unit is one transaction (`Database.unit(write=True)`): `BEGIN IMMEDIATE` on
  SQLite, queued within the process on one asyncio lock; it commits when the block ends
  cleanly and rolls back when it raises. A read unit is a transaction that cannot write
  (on PostgreSQL every read in it is one autocommitted statement).
- The fast paths (`direct`, the default): the units straight on the driver, a quote and
  a move of a trade each one statement, group commit (`walletcore_sql.direct`,
  `walletcore_sql.database`). `SqlStorage(..., direct=False)` sends everything through
  SQLAlchemy's engine instead, one transaction per unit: the plain path the storage
  contract checks the fast ones against, with the same results.
- The stores' statements: `walletcore_sql.stores`. Connections, lazy migration:
  `walletcore_sql.database`; the one map of driver errors: `walletcore_sql.errors`.
  Nonce leases (advisory locks on PostgreSQL, lock files on SQLite; floors in
  `nonce_floors`): `walletcore_sql.nonces`, entry point `walletcore.nonce_leases: sql`,
  built on this storage's `database`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from walletcore.domain.audit import AuditEntry
from walletcore.domain.trade import Trade, TradeStatus
from walletcore.ports.runtime import Lifecycle
from walletcore.ports.storage import Storage, UnitOfWork
from walletcore.secretfiles import ConfigurationError
from walletcore_sql import rows
from walletcore_sql.database import Database, Unit
from walletcore_sql.engine import database_url, is_sqlite, redacted
from walletcore_sql.stores import (
    TRADE_ADD_AUDITED,
    TRADE_SWAP_AUDITED,
    LazyWriter,
    SqlUnit,
    audited_add_values,
    audited_swap_values,
    insert_all,
)


class SqlStorage(Storage, Lifecycle):
    def __init__(
        self,
        url: str,
        *,
        migrate: bool,
        schema: str | None = None,
        direct: bool = True,
        **engine_options: Any,
    ) -> None:
        """`migrate`: upgrade the schema on first use (sandbox); else only check it.

        `schema` (PostgreSQL): the search_path, for tests and side-by-side installs.
        `direct`: the fast paths (module rules); False: everything through SQLAlchemy.
        """
        self.database = Database(
            url, migrate=migrate, schema=schema, direct=direct, **engine_options
        )
        #: this database's terminal trades, each built once (`rows.TradeRows`)
        self.trade_rows = rows.TradeRows()

    def __repr__(self) -> str:
        plain = "" if self.database.direct else ", direct=False"
        return (
            f"SqlStorage({redacted(self.database.url)!r}, migrate={self.database.migrate}{plain})"
        )

    async def start(self) -> None:
        """Migrate (sandbox) or check the schema (production); raises `SchemaError`."""
        await self.database.start()

    async def aclose(self) -> None:
        await self.database.aclose()

    async def check(self) -> None:
        """`walletcore.ports.HealthCheck`: one `SELECT 1` on a pooled connection."""
        from sqlalchemy import text

        async with self.database.transaction() as conn:
            await conn.execute(text("SELECT 1"))

    def write(self) -> AbstractAsyncContextManager[UnitOfWork]:
        if self.database.inline is None:
            return _UnitWrite(self)
        return self._sqlite_write()

    @asynccontextmanager
    async def _sqlite_write(self) -> AsyncIterator[UnitOfWork]:
        # SQLite: the transaction opens at the unit's first statement (`LazyWriter`); a
        # unit that only deferred inserts (a quote and its entry) is handed over whole
        # when it ends, and joins the group open then with no loop turn of its own.
        async with contextlib.AsyncExitStack() as stack:
            conn = LazyWriter(self.database, stack)
            unit = SqlUnit(self.database, conn, writable=True, trade_rows=self.trade_rows)
            yield unit
            if conn.opened:
                await unit.flush(last=True)
            else:
                pending = unit.take_pending()
                if pending:
                    await self.database.submit(functools.partial(insert_all, pending))

    async def swap_trade(self, expected: TradeStatus, trade: Trade, entry: AuditEntry) -> bool:
        """PostgreSQL: the compare-and-set, its entry and the entry's event as one
        autocommitted statement (atomic on its own; `stores.TRADE_SWAP_AUDITED`), in a batch with others when they
        queue (group commit, `direct.PgGroupCommit`); SQLite: a write unit handed over
        whole (`Database.submit`: its statements cost no round trip, and it joins the
        group open). With the fast paths off, a write unit holding `trades.swap`."""
        database = self.database
        if database.pg_direct:
            values = audited_swap_values(expected, trade, entry)
            return await database.run_alone(TRADE_SWAP_AUDITED, values) == 1
        if database.inline is None:
            async with self.write() as unit:
                return await unit.trades.swap(expected, trade, entry=entry)

        async def swap(conn: Any) -> bool:
            unit = SqlUnit(self.database, conn, writable=True, trade_rows=self.trade_rows)
            swapped = await unit.trades.swap(expected, trade, entry=entry)
            await unit.flush(last=True)
            return swapped

        return bool(await self.database.submit(swap))

    async def add_trade(self, trade: Trade, entry: AuditEntry) -> None:
        """PostgreSQL: the quote and its entry as one autocommitted statement
        (`stores.TRADE_ADD_AUDITED`, what a write unit of the two sends), with no unit of
        stores built around it, in a batch with others when they queue (group commit,
        `direct.PgGroupCommit`); elsewhere that write unit (on SQLite's fast path handed
        over whole when it ends). An entry that carries an event goes through the write
        unit everywhere: on PostgreSQL that is still one autocommitted statement (the
        quote, the entry and the event combined, `SqlUnit.flush`), outside the group."""
        if self.database.pg_direct and entry.event is None:
            await self.database.run_alone(TRADE_ADD_AUDITED, audited_add_values(trade, entry))
            return
        await super().add_trade(trade, entry)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[UnitOfWork]:
        async with self.database.unit(write=False) as conn:
            yield SqlUnit(self.database, conn, writable=False, trade_rows=self.trade_rows)


class _UnitWrite:
    """`SqlStorage.write()` on PostgreSQL (and with the fast paths off): the stores' unit on
    a `Database.unit`, its deferred inserts sent when it ends cleanly (on PostgreSQL's fast path
    autocommitted when they are all it sent). A class, not an `asynccontextmanager` generator, as
    `Database.unit` is: a quote enters one (docs/performance.md, "Fewer Python calls per request").
    An error in the block, or in the last flush, rolls the unit back and is raised as it was."""

    __slots__ = ("_storage", "_unit", "_work")

    def __init__(self, storage: SqlStorage) -> None:
        self._storage = storage
        self._unit: SqlUnit | None = None
        self._work: Unit | None = None

    async def __aenter__(self) -> UnitOfWork:
        storage = self._storage
        work = self._work = storage.database.unit(write=True)
        conn = await work.__aenter__()
        self._unit = SqlUnit(storage.database, conn, writable=True, trade_rows=storage.trade_rows)
        return self._unit

    async def __aexit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        work, unit = self._work, self._unit
        self._work = self._unit = None
        assert work is not None and unit is not None
        if exc is None:
            try:
                await unit.flush(last=True)
            except BaseException as failed:
                await work.__aexit__(type(failed), failed, failed.__traceback__)
                raise
        await work.__aexit__(kind, exc, traceback)


def build(*, settings: Any, clock: Any = None, **_: Any) -> SqlStorage:
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
    pool_size = getattr(settings, "db_pool_size", None)
    options: dict[str, Any] = {"pool_size": int(pool_size)} if pool_size else {}
    url = database_url(settings)
    return SqlStorage(url, migrate=not production, **({} if is_sqlite(url) else options))


__all__ = ["SqlStorage", "build"]
