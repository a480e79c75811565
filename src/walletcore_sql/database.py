"""`Database`: an engine per event loop, prepared lazily, and one transaction at a time.

Rules:
- The first use migrates (sandbox) or checks the schema (production): a CLI that never
  calls `start()` is safe.
- PostgreSQL (asyncpg): a read unit takes no transaction (each read is one autocommitted
  statement); a write unit is one BEGIN ... COMMIT on a pooled connection.
- SQLite: statements run on the event loop's own thread, on a blocking pysqlite
  connection (`SqliteInline`). A statement on a local file takes microseconds, far less
  than the hop to a driver thread and back it replaces (aiosqlite cost ~9 of them per
  statement, each waiting up to the GIL's 5 ms switch interval under load). Nothing that
  can wait runs on the loop: a write unit's `BEGIN IMMEDIATE` is tried without waiting,
  and only when another process holds the write lock is it waited for in a worker thread;
  WAL checkpoints run in a worker thread too, never inside a commit. Within the process,
  write units queue on an asyncio lock. A commit's fsync (`synchronous = FULL`) stays on
  the loop: on a disk whose fsync is slow, run PostgreSQL (docs/storage.md).
- Driver errors leave as `StorageUnavailable` (503) or `StorageError` (500).
- A nonce lease holds a PostgreSQL connection for as long as it lives (a session-level
  advisory lock): those come from a pool of their own, so held leases can never starve
  the transactions a send needs meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from walletcore_sql.engine import (
    SQLITE_BUSY_TIMEOUT_MS,
    SQLITE_WRITE,
    is_sqlite,
    make_engine,
    redacted,
    sqlite_inline_engine,
)
from walletcore_sql.errors import storage_errors
from walletcore_sql.migrate import (
    check_schema_engine,
    check_schema_sync,
    upgrade_engine,
    upgrade_sync,
)

log = logging.getLogger("walletcore.sql")

#: The nonce leases' pool: connections kept idle, and how many more may open (one per
#: address with a send in flight in this process).
LEASE_POOL_SIZE, LEASE_POOL_OVERFLOW = 2, 48


#: Commits after which a WAL checkpoint is started in a worker thread (SQLite's own
#: automatic checkpoint, switched off on the inline connections, runs after ~1000 pages).
CHECKPOINT_EVERY = 200


class InlineConnection:
    """A blocking SQLAlchemy connection behind the `await conn.execute(...)` shape of
    `AsyncConnection`: the statement runs on the calling (event loop) thread."""

    __slots__ = ("sync",)

    def __init__(self, sync: Connection) -> None:
        self.sync = sync

    @property
    def dialect(self) -> Any:
        return self.sync.dialect

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        return self.sync.execute(statement, parameters)


class SqliteInline:
    """SQLite on the event loop's thread (module rules): one engine per `Database`."""

    def __init__(self, url: str) -> None:
        self.engine: Engine = sqlite_inline_engine(url)
        self._commits = 0
        self._checkpoint: asyncio.Future[None] | None = None

    @asynccontextmanager
    async def transaction(
        self, write: bool, write_lock: asyncio.Lock
    ) -> AsyncIterator[InlineConnection]:
        if not write:
            with storage_errors(), self.engine.connect() as conn, conn.begin():
                yield InlineConnection(conn)
            return
        async with write_lock:
            with storage_errors(), self.engine.connect() as conn:
                conn = conn.execution_options(**{SQLITE_WRITE: True})
                transaction = await self._begin_immediate(conn)
                with transaction:
                    yield InlineConnection(conn)
        self._committed()

    async def _begin_immediate(self, conn: Connection) -> Any:
        """BEGIN IMMEDIATE now if the write lock is free, else wait for it off the loop."""
        try:
            return conn.begin()
        except sa_exc.OperationalError as exc:
            if "locked" not in str(exc.orig) and "busy" not in str(exc.orig):
                raise
            if conn.in_transaction():  # pragma: no cover - BEGIN failed: nothing began
                conn.rollback()
        return await asyncio.to_thread(_begin_waiting, conn)

    def _committed(self) -> None:
        self._commits += 1
        if self._commits >= CHECKPOINT_EVERY and (
            self._checkpoint is None or self._checkpoint.done()
        ):
            self._commits = 0
            self._checkpoint = asyncio.ensure_future(asyncio.to_thread(self._run_checkpoint))

    def _run_checkpoint(self) -> None:
        try:
            with self.engine.connect() as conn:
                conn.exec_driver_sql(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
                conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
                conn.exec_driver_sql("PRAGMA busy_timeout = 0")
        except Exception:  # noqa: BLE001 - the next one tries again; SQLite stays correct
            log.warning("SQLite WAL checkpoint failed; retried after more commits")

    async def aclose(self) -> None:
        if self._checkpoint is not None:
            with contextlib.suppress(Exception):
                await self._checkpoint
        self.engine.dispose()

    def upgrade(self) -> Any:
        return asyncio.to_thread(upgrade_sync, self.engine)

    def check(self) -> Any:
        return asyncio.to_thread(check_schema_sync, self.engine)


def _begin_waiting(conn: Connection) -> Any:
    """In a worker thread: BEGIN IMMEDIATE, waiting up to the busy timeout for the lock."""
    raw = conn.connection.driver_connection
    raw.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    try:
        return conn.begin()
    finally:
        raw.execute("PRAGMA busy_timeout = 0")


@dataclass(slots=True)
class _Bound:
    """What belongs to one event loop: asyncpg connections, asyncio locks."""

    loop: asyncio.AbstractEventLoop
    engine: AsyncEngine | None  # PostgreSQL; SQLite runs on `Database.inline`
    write_lock: asyncio.Lock | None  # SQLite: this process's writers queue here
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
        #: SQLite: the blocking engine whose statements run on the loop's thread
        self.inline: SqliteInline | None = SqliteInline(url) if self.is_sqlite else None

    def __repr__(self) -> str:
        return f"Database({redacted(self.url)!r}, migrate={self.migrate})"

    async def start(self) -> None:
        """Migrate (sandbox) or check the schema (production); raises `SchemaError`."""
        await self._ready()

    async def aclose(self) -> None:
        bound, self._bound = self._bound, None
        if self.inline is not None:
            await self.inline.aclose()
        if bound is not None:
            if bound.engine is not None:
                await bound.engine.dispose()
            if bound.lease_engine is not None:
                await bound.lease_engine.dispose()

    @asynccontextmanager
    async def transaction(self, *, write: bool = False) -> AsyncIterator[Any]:
        """One transaction (a read on PostgreSQL: one autocommitted statement per read).

        Yields a connection with `await conn.execute(statement)`: an `AsyncConnection` on
        PostgreSQL, an `InlineConnection` on SQLite.
        """
        bound = await self._ready()
        if self.inline is not None:
            assert bound.write_lock is not None
            async with self.inline.transaction(write, bound.write_lock) as inline:
                yield inline
            return
        assert bound.engine is not None
        with storage_errors():
            async with bound.engine.connect() as conn:
                if not write:
                    # A read is one SELECT, atomic on its own: no BEGIN/COMMIT round trips.
                    conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                    yield conn
                    return
                async with conn.begin():
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
                if bound.engine is not None:
                    await self._drop_engine(bound.engine)
                if bound.lease_engine is not None:
                    await self._drop_engine(bound.lease_engine)
            bound = _Bound(
                loop,
                None
                if self.is_sqlite
                else make_engine(self.url, schema=self.schema, **self._engine_options),
                asyncio.Lock() if self.is_sqlite else None,
                asyncio.Lock(),
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
        """Forget an asyncpg engine made on another event loop: its connections belong to
        that loop and cannot close from this one (call `aclose()` on the loop that used
        the storage)."""
        engine.sync_engine.dispose(close=False)
