"""`Database`: an engine per event loop, prepared lazily, and one transaction at a time.

Rules:
- The first use migrates (sandbox) or checks the schema (production): a CLI that never
  calls `start()` is safe.
- A writing transaction on SQLite takes the write lock at BEGIN (`BEGIN IMMEDIATE`) and,
  within the process, queues on an asyncio lock; a read on PostgreSQL is one autocommitted
  statement (no BEGIN/COMMIT round trips).
- Driver errors leave as `StorageUnavailable` (503) or `StorageError` (500).
- A nonce lease holds a PostgreSQL connection for as long as it lives (a session-level
  advisory lock): those come from a pool of their own, so held leases can never starve
  the transactions a send needs meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from walletcore_sql.engine import SQLITE_WRITE, is_sqlite, make_engine, redacted
from walletcore_sql.errors import storage_errors
from walletcore_sql.migrate import check_schema_engine, upgrade_engine

#: The nonce leases' pool: connections kept idle, and how many more may open (one per
#: address with a send in flight in this process).
LEASE_POOL_SIZE, LEASE_POOL_OVERFLOW = 2, 48


@dataclass(slots=True)
class _Bound:
    """The engine of one event loop (asyncpg and aiosqlite connections belong to a loop)."""

    loop: asyncio.AbstractEventLoop
    engine: AsyncEngine
    write_lock: asyncio.Lock | None  # SQLite: writers queue here rather than busy-wait
    prepare_lock: asyncio.Lock
    #: PostgreSQL: the connections that hold nonce leases (made on first use)
    lease_engine: AsyncEngine | None = None


class Database:
    def __init__(
        self, url: str, *, migrate: bool, schema: str | None = None, **engine_options: Any
    ) -> None:
        """`migrate`: upgrade the schema on first use (sandbox); else only check it.

        `schema` (PostgreSQL): the search_path, for tests and side-by-side installs.
        """
        self.url = url
        self.migrate = migrate
        self.schema = schema
        self.is_sqlite = is_sqlite(url)
        self._engine_options = engine_options
        self._bound: _Bound | None = None
        self._prepared = False

    def __repr__(self) -> str:
        return f"Database({redacted(self.url)!r}, migrate={self.migrate})"

    async def start(self) -> None:
        """Migrate (sandbox) or check the schema (production); raises `SchemaError`."""
        await self._ready()

    async def aclose(self) -> None:
        bound, self._bound = self._bound, None
        if bound is not None:
            await bound.engine.dispose()
            if bound.lease_engine is not None:
                await bound.lease_engine.dispose()

    @asynccontextmanager
    async def transaction(self, *, write: bool = False) -> AsyncIterator[AsyncConnection]:
        """One transaction (a read on PostgreSQL: one autocommitted statement)."""
        bound = await self._ready()
        with storage_errors():
            async with AsyncExitStack() as stack:
                if write and bound.write_lock is not None:
                    await stack.enter_async_context(bound.write_lock)
                conn = await stack.enter_async_context(bound.engine.connect())
                if self.is_sqlite:
                    if write:
                        conn = await conn.execution_options(**{SQLITE_WRITE: True})
                elif not write:
                    # A read is one SELECT, atomic on its own: no BEGIN/COMMIT round trips.
                    conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                await stack.enter_async_context(conn.begin())
                yield conn

    async def lease_connection(self) -> AsyncConnection:
        """A PostgreSQL connection for one nonce lease, from the leases' own pool; the
        caller closes it (or invalidates it: a closed session drops its advisory locks)."""
        if self.is_sqlite:
            raise RuntimeError("nonce leases on SQLite lock files, not connections")
        bound = await self._ready()
        if bound.lease_engine is None:
            bound.lease_engine = make_engine(
                self.url,
                schema=self.schema,
                pool_size=LEASE_POOL_SIZE,
                max_overflow=LEASE_POOL_OVERFLOW,
            )
        with storage_errors():
            return await bound.lease_engine.connect()

    def insert(self, table: Table) -> Any:
        """The dialect's INSERT, which has `on_conflict_do_nothing` / `_do_update`."""
        return (sqlite.insert if self.is_sqlite else postgresql.insert)(table)

    async def _ready(self) -> _Bound:
        loop = asyncio.get_running_loop()
        bound = self._bound
        if bound is None or bound.loop is not loop:
            if bound is not None:  # made on another loop, most likely closed by now
                await self._drop_engine(bound.engine)
                if bound.lease_engine is not None:
                    await self._drop_engine(bound.lease_engine)
            bound = _Bound(
                loop,
                make_engine(self.url, schema=self.schema, **self._engine_options),
                asyncio.Lock() if self.is_sqlite else None,
                asyncio.Lock(),
            )
            self._bound = bound
        if not self._prepared:
            async with bound.prepare_lock:
                if not self._prepared:
                    if self.migrate:
                        await upgrade_engine(bound.engine)
                    else:
                        await check_schema_engine(bound.engine)
                    self._prepared = True
        return bound

    async def _drop_engine(self, engine: AsyncEngine) -> None:
        """Dispose of an engine made on another event loop. aiosqlite's connections live in
        threads and close from any loop; asyncpg's belong to their loop and cannot, so that
        pool is only forgotten (call `aclose()` on the loop that used the storage)."""
        if self.is_sqlite:
            await engine.dispose()
        else:
            engine.sync_engine.dispose(close=False)
