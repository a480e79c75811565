"""SQLite on the event loop's own thread: the blocking engine, its kept connections, the
units' transactions, BEGIN IMMEDIATE without waiting on the loop, WAL checkpoints.

A statement on a local file takes microseconds, far less than the hop to a driver thread
and back it replaces (aiosqlite cost ~9 of them per statement, each waiting up to the
GIL's 5 ms switch interval under load). Nothing that can wait runs on the loop: a write
unit's `BEGIN IMMEDIATE` is tried without waiting, and while another process holds the
write lock it is tried again every 0.5 to 1 ms (`await asyncio.sleep` in between) until
the busy timeout; WAL checkpoints run in a worker thread, never inside a commit. The
write units' queue and group commit: `walletcore_sql.database.sqlite_group`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from walletcore_sql.database.sqlite_group import Group, Savepoint, WriteQueue
from walletcore_sql.engine import (
    SQLITE_BUSY_TIMEOUT_MS,
    SQLITE_WRITE,
    driver_of,
    sqlite_inline_engine,
    waiting_for_locks,
)
from walletcore_sql.errors import sqlite_locked, storage_errors
from walletcore_sql.migrate import check_schema_sync, upgrade_sync

log = logging.getLogger("walletcore.sql")

#: Commits after which a WAL checkpoint is started in a worker thread (SQLite's own
#: automatic checkpoint, switched off on the inline connections, runs after ~1000 pages).
CHECKPOINT_EVERY = 200
#: The first and the longest pause between two tries of a taken write lock (a group holds
#: it for about a millisecond; with pauses up to 4 ms, /sell on two workers ran at 2,177
#: req/s with a p99 of 365 ms, with 1 ms at 2,692 req/s and 41 ms).
LOCK_RETRY_FIRST_SECONDS = 0.0005
LOCK_RETRY_MAX_SECONDS = 0.001
#: Connections kept open for read units between uses.
IDLE_READERS = 4


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
        #: Connections kept open between units (a pool checkout per unit cost more than
        #: a read): the writer's, and idle readers'.
        self._writer: Connection | None = None
        self._readers: list[Connection] = []
        #: group commits, closers and job runners running (held: the loop keeps only
        #: weak references)
        self._tasks: set[asyncio.Future[None]] = set()

    @asynccontextmanager
    async def transaction(self, write: bool, queue: WriteQueue) -> AsyncIterator[InlineConnection]:
        if not write:
            with storage_errors():
                conn = self._readers.pop() if self._readers else self.engine.connect()
            try:
                with storage_errors(), conn.begin():
                    yield InlineConnection(conn)
            finally:
                self._idle(conn)
            return
        await queue.take()
        group: Group | None = None
        joined = False
        try:
            group = queue.group or await queue.open()
            # The first unit of a transaction needs no savepoint: if it fails, the whole
            # transaction (nothing but it) rolls back.
            with storage_errors():
                savepoint = Savepoint(group.conn, group.members) if group.members else None
            try:
                with storage_errors():  # the unit's driver errors too
                    yield InlineConnection(group.conn)
            except BaseException:
                queue.undo(group, savepoint)
                raise
            if savepoint is not None:
                with storage_errors():
                    savepoint.commit()  # RELEASE: its statements stay in the transaction
            group.members += 1
            joined = True
        finally:
            queue.hand_on(group)
        if joined:  # durable once the transaction it joined commits (shared by all its units)
            await asyncio.shield(group.done)

    def spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Future[None]:
        """A task of the write queue's (a commit, a closer, a job runner), held until done
        and awaited by `aclose`."""
        task: asyncio.Future[None] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def take_writer(self) -> Connection:
        """The writer's connection, for a new group (`WriteQueue.open`): the one kept, or
        a new one whose transactions take the write lock at BEGIN."""
        with storage_errors():
            conn = self._writer or self.engine.connect().execution_options(**{SQLITE_WRITE: True})
        self._writer = None
        return conn

    def keep_writer(self, conn: Connection) -> None:
        """The writer's connection back after its group, kept when it is still usable."""
        if self._usable(conn):
            self._writer = conn
        else:
            with contextlib.suppress(Exception):
                conn.close()

    def _idle(self, conn: Connection) -> None:
        if len(self._readers) < IDLE_READERS and self._usable(conn):
            self._readers.append(conn)
        else:
            with contextlib.suppress(Exception):
                conn.close()

    @staticmethod
    def _usable(conn: Connection) -> bool:
        """Fit to keep for the next unit: valid, and its transaction ended (a unit that
        raised was rolled back by its `begin()` block)."""
        return not conn.invalidated and not conn.closed and not conn.in_transaction()

    async def begin_immediate(self, conn: Connection) -> Any:
        """BEGIN IMMEDIATE now if the write lock is free; else tried again every 0.5 to 1
        ms, on the loop, until the busy timeout: another process holds the lock
        for one short transaction. (SQLite's own busy handler, waited for in a worker
        thread, slept up to 100 ms between tries and cost a thread hop: with two workers
        writing, /sell's p99 was 259 ms; docs/performance.md.)"""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SQLITE_BUSY_TIMEOUT_MS / 1000
        delay = LOCK_RETRY_FIRST_SECONDS
        while True:
            try:
                return conn.begin()
            except (sa_exc.OperationalError, sqlite3.OperationalError) as exc:
                if not sqlite_locked(exc) or loop.time() >= deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, LOCK_RETRY_MAX_SECONDS)

    def committed(self) -> None:
        """A group committed: every `CHECKPOINT_EVERY`, a WAL checkpoint in a worker thread."""
        self._commits += 1
        if self._commits >= CHECKPOINT_EVERY and (
            self._checkpoint is None or self._checkpoint.done()
        ):
            self._commits = 0
            self._checkpoint = asyncio.ensure_future(asyncio.to_thread(self._run_checkpoint))

    def _run_checkpoint(self) -> None:
        try:
            with (
                self.engine.connect() as conn,
                waiting_for_locks(driver_of(conn)),
            ):
                conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
        except Exception:  # noqa: BLE001 - the next one tries again; SQLite stays correct
            log.warning("SQLite WAL checkpoint failed; retried after more commits")

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        for task in list(self._tasks):  # a group still committing ends first
            if task.get_loop() is loop:
                with contextlib.suppress(Exception):
                    await task
        checkpoint, self._checkpoint = self._checkpoint, None
        if checkpoint is not None and checkpoint.get_loop() is asyncio.get_running_loop():
            with contextlib.suppress(Exception):
                await checkpoint  # one started on another loop finishes in its thread
        for conn in [*self._readers, *([self._writer] if self._writer else [])]:
            with contextlib.suppress(Exception):
                conn.close()
        self._readers.clear()
        self._writer = None
        self.engine.dispose()

    def upgrade(self) -> Any:
        return asyncio.to_thread(upgrade_sync, self.engine)

    def check(self) -> Any:
        return asyncio.to_thread(check_schema_sync, self.engine)
