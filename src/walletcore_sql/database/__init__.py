"""`Database`: an engine per event loop, prepared lazily, and the units' connections.

Rules:
- The first use migrates (sandbox) or checks the schema (production): a CLI that never
  calls `start()` is safe.
- PostgreSQL (asyncpg): a read unit takes no transaction (each read is one autocommitted
  statement); a write unit is one BEGIN ... COMMIT on a pooled connection, or one
  autocommitted statement. The stores' units (`unit`) go straight to asyncpg on a pool of
  their own (`walletcore_sql.direct`); the rest (`transaction`: health checks, nonce
  floors, migrations) through SQLAlchemy's async engine.
- SQLite: statements run on the event loop's own thread, on a blocking pysqlite
  connection (`walletcore_sql.database.sqlite`); within the process, write units queue on
  an asyncio lock, and those that queue while one runs join its transaction (group
  commit, `walletcore_sql.database.sqlite_group`; docs/storage.md).
- With `direct=False` (the fast paths off) every unit is a connection of SQLAlchemy's
  async engine in its own transaction, on both databases (aiosqlite on SQLite, its
  transactions that write beginning with BEGIN IMMEDIATE): the plain path the storage
  contract checks the fast ones against.
- Driver errors leave as `StorageUnavailable` (503) or `StorageError` (500)
  (`walletcore_sql.errors`).
- A nonce lease holds a PostgreSQL connection for as long as it lives (a session-level
  advisory lock): those come from a pool of their own, so held leases can never starve
  the transactions a send needs meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from walletcore_sql.database.sqlite import InlineConnection, SqliteInline
from walletcore_sql.database.sqlite_group import WriteQueue
from walletcore_sql.database.units import Unit
from walletcore_sql.direct.plans import Positional
from walletcore_sql.direct.pool import DriverPool
from walletcore_sql.direct.postgres import execute_alone
from walletcore_sql.engine import (
    PG_POOL_OVERFLOW,
    PG_POOL_SIZE,
    PG_POOL_TIMEOUT,
    SQLITE_WRITE,
    is_sqlite,
    make_engine,
    redacted,
)
from walletcore_sql.errors import storage_errors
from walletcore_sql.migrate import check_schema_engine, upgrade_engine

#: SQLAlchemy's own pool on PostgreSQL, for what does not go through the units' pool
#: (`DriverPool`): health checks, nonce floors, the few statements the units cannot send
#: raw; connections kept, and how many more may open for a moment.
ENGINE_POOL_SIZE, ENGINE_POOL_OVERFLOW = 4, 4

#: The nonce leases' pool: connections kept idle, and how many more may open (one per
#: address with a send in flight in this process).
LEASE_POOL_SIZE, LEASE_POOL_OVERFLOW = 2, 48


@dataclass(slots=True)
class _Bound:
    """What belongs to one event loop: asyncpg connections, asyncio locks."""

    loop: asyncio.AbstractEventLoop
    engine: AsyncEngine | None  # PostgreSQL, and SQLAlchemy's path; SQLite: `Database.inline`
    writers: WriteQueue | None  # SQLite: this process's write units queue here
    prepare_lock: asyncio.Lock
    #: PostgreSQL: the connections of the stores' units (asyncpg's own pool)
    units: DriverPool | None = None
    #: PostgreSQL: the connections that hold nonce leases (made on first use)
    lease_engine: AsyncEngine | None = None


class Database:
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
        `direct`: the stores' units on the fast paths (module rules); False: through
        SQLAlchemy's engine, on both databases.
        """
        self.url = url
        self.migrate = migrate
        self.schema = schema
        self.is_sqlite = is_sqlite(url)
        self.direct = direct
        #: the stores' units go straight to asyncpg: their inserts combined in one
        #: statement, one sent alone autocommitted (`run_alone`), group commit
        self.pg_direct = direct and not self.is_sqlite
        # PostgreSQL: `pool_size` (+ `max_overflow`) and `pool_timeout` size the units'
        # pool (`DriverPool`); SQLAlchemy's engine keeps a small pool of its own for what
        # goes through it (health checks, nonce floors, the statements the units cannot
        # send raw, migrations)
        size = int(engine_options.pop("pool_size", PG_POOL_SIZE))
        size += max(int(engine_options.pop("max_overflow", PG_POOL_OVERFLOW)), 0)
        self.pool_size = max(size, 1)
        self.pool_timeout = float(engine_options.pop("pool_timeout", PG_POOL_TIMEOUT))
        if direct:
            engine_options.setdefault("pool_size", min(ENGINE_POOL_SIZE, self.pool_size))
            engine_options.setdefault("max_overflow", ENGINE_POOL_OVERFLOW)
        else:  # every unit goes through the engine: its pool is the units'
            engine_options.setdefault("pool_size", self.pool_size)
            engine_options.setdefault("max_overflow", 0)
        engine_options.setdefault("pool_timeout", self.pool_timeout)
        self._engine_options = engine_options
        self._bound: _Bound | None = None
        self._prepared = False
        #: SQLite: the blocking engine whose statements run on the loop's thread
        self.inline: SqliteInline | None = SqliteInline(url) if self.is_sqlite and direct else None

    def __repr__(self) -> str:
        plain = "" if self.direct else ", direct=False"
        return f"Database({redacted(self.url)!r}, migrate={self.migrate}{plain})"

    async def start(self) -> None:
        """Migrate (sandbox) or check the schema (production); raises `SchemaError`."""
        await self._ready()

    async def aclose(self) -> None:
        bound, self._bound = self._bound, None
        if self.inline is not None:
            await self.inline.aclose()
        if bound is not None:
            if bound.units is not None:
                await bound.units.aclose()
            if bound.engine is not None:
                await bound.engine.dispose()
            if bound.lease_engine is not None:
                await bound.lease_engine.dispose()

    @asynccontextmanager
    async def transaction(self, *, write: bool = False) -> AsyncIterator[Any]:
        """One transaction (a read on PostgreSQL: one autocommitted statement per read).

        Yields a connection with `await conn.execute(statement)`: an `AsyncConnection` on
        PostgreSQL (and on SQLite with the fast paths off: aiosqlite's, whose transactions
        that write take the write lock at BEGIN), an `InlineConnection` on SQLite.
        """
        bound = await self._ready()
        if self.inline is not None:
            assert bound.writers is not None
            async with self.inline.transaction(write, bound.writers) as inline:
                yield inline
            return
        assert bound.engine is not None
        with storage_errors():
            async with bound.engine.connect() as conn:
                if self.is_sqlite:  # the fast paths off (module rules)
                    if write:
                        conn = await conn.execution_options(**{SQLITE_WRITE: True})
                elif not write:
                    # A read is one SELECT, atomic on its own: no BEGIN/COMMIT round trips.
                    conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                    yield conn
                    return
                async with conn.begin():  # sent with the first statement (the adapter's)
                    yield conn

    def unit(self, *, write: bool) -> Unit:
        """The connection of a unit of the stores (`SqlStorage.read`/`.write`), straight on
        the driver (`walletcore_sql.direct`): `async with database.unit(write=...) as conn`.
        On PostgreSQL a `PgReader` (each read one autocommitted statement) or a `PgWriter`
        (BEGIN at the first statement or never, COMMIT at the end, ROLLBACK when it
        raises); on SQLite `InlineRaw` inside the unit's transaction
        (`SqliteInline.transaction`). With the fast paths off, `transaction`'s."""
        return Unit(self, write)

    async def run_alone(self, statement: Positional, values: Sequence[Any]) -> int:
        """PostgreSQL: a write unit of one statement, autocommitted (atomic on its own),
        its values in `statement.names` order; the rows it matched. What `async with
        unit(write=True) as conn: await conn.execute_alone(...)` does, in one coroutine
        (`direct.execute_alone`): every move of a trade, and a quote with its entry
        (`SqlStorage.swap_trade`, `.add_trade`). A statement with a batch form goes through
        its group commit (`direct.PgGroupCommit`): alone while a lane is free, else in the
        next batch, still answered for itself."""
        if not self.pg_direct:
            raise RuntimeError("run_alone is PostgreSQL's fast path: use a write unit")
        bound = self._ready_now() or await self._ready()
        assert bound.units is not None
        if statement.batch is not None:  # group commit (`direct.PgGroupCommit`)
            return await bound.units.group(statement).run(values)
        count: int = await execute_alone(bound.units, statement, values)
        return count

    async def submit(self, work: Callable[[Any], Awaitable[Any]]) -> Any:
        """One write unit handed over whole: `await work(conn)`, `conn` as `unit(write=True)`
        yields it, committed after; what `work` returned. On SQLite it may run from the
        write queue's runner, in a group's savepoint (`SqliteJobs.submit`), so `work`
        must only run statements on `conn`: it may run in another task than the caller's."""
        bound = await self._ready()
        if bound.writers is not None:
            return await bound.writers.jobs.submit(work)
        async with Unit(self, True) as conn:
            return await work(conn)

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
        return (sqlite_insert if self.is_sqlite else pg_insert)(table)

    def _ready_now(self) -> _Bound | None:
        """What `_ready` returns when it has nothing to do (bound on this loop, prepared),
        with no await; else None. A unit's way in: every unit starts with it."""
        bound = self._bound
        if bound is None or not self._prepared or bound.loop is not asyncio.get_running_loop():
            return None
        return bound

    async def _ready(self) -> _Bound:
        loop = asyncio.get_running_loop()
        bound = self._bound
        if bound is None or bound.loop is not loop:
            if bound is not None:  # made on another loop, most likely closed by now
                if bound.units is not None:
                    bound.units.forget()
                if bound.engine is not None:
                    await self._drop_engine(bound.engine)
                if bound.lease_engine is not None:
                    await self._drop_engine(bound.lease_engine)
            inline = self.inline
            engine = (
                None
                if inline is not None
                else make_engine(self.url, schema=self.schema, **self._engine_options)
            )
            bound = _Bound(
                loop,
                engine,
                None if inline is None else WriteQueue(inline),
                asyncio.Lock(),
                units=None
                if engine is None or not self.pg_direct
                else DriverPool(
                    engine,
                    size=self.pool_size,
                    timeout=self.pool_timeout,
                    server_settings=None if self.schema is None else {"search_path": self.schema},
                ),
            )
            self._bound = bound
        if not self._prepared:
            async with bound.prepare_lock:
                if not self._prepared:
                    await self._prepare(bound)
                    self._prepared = True
        return bound

    async def _prepare(self, bound: _Bound) -> None:
        if self.inline is not None:
            await (self.inline.upgrade() if self.migrate else self.inline.check())
            return
        assert bound.engine is not None
        if self.migrate:
            await upgrade_engine(bound.engine)
        else:
            await check_schema_engine(bound.engine)

    async def _drop_engine(self, engine: AsyncEngine) -> None:
        """Forget an async engine made on another event loop: its connections belong to
        that loop and cannot close from this one (call `aclose()` on the loop that used
        the storage)."""
        engine.sync_engine.dispose(close=False)


__all__ = ["Database", "InlineConnection", "SqliteInline", "Unit", "WriteQueue"]
