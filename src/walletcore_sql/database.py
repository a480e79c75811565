"""`Database`: an engine per event loop, prepared lazily, and one transaction at a time.

Rules:
- The first use migrates (sandbox) or checks the schema (production): a CLI that never
  calls `start()` is safe.
- PostgreSQL (asyncpg): a read unit takes no transaction (each read is one autocommitted
  statement); a write unit is one BEGIN ... COMMIT on a pooled connection. The stores'
  units (`unit`) go straight to asyncpg (`walletcore_sql.direct`); the
  rest (`transaction`) through SQLAlchemy's async engine.
- SQLite: statements run on the event loop's own thread, on a blocking pysqlite
  connection (`SqliteInline`). A statement on a local file takes microseconds, far less
  than the hop to a driver thread and back it replaces (aiosqlite cost ~9 of them per
  statement, each waiting up to the GIL's 5 ms switch interval under load). Nothing that
  can wait runs on the loop: a write unit's `BEGIN IMMEDIATE` is tried without waiting,
  and while another process holds the write lock it is tried again every 0.5 to 1 ms
  (`await asyncio.sleep` in between) until the busy timeout;
  WAL checkpoints run in a worker thread too, never inside a commit. Within the process,
  write units queue on an asyncio lock, and those that queue while one runs join its
  transaction (group commit, each in a savepoint): one COMMIT, whose fsync
  (`synchronous = FULL`) runs in a worker thread with the lock held, makes the group
  durable, and each unit returns only then (docs/storage.md).
- Driver errors leave as `StorageUnavailable` (503) or `StorageError` (500).
- A nonce lease holds a PostgreSQL connection for as long as it lives (a session-level
  advisory lock): those come from a pool of their own, so held leases can never starve
  the transactions a send needs meanwhile.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from walletcore_sql.direct import (
    DriverPool,
    InlineRaw,
    PgReader,
    PgWriter,
    Positional,
    execute_alone,
)
from walletcore_sql.engine import (
    PG_POOL_OVERFLOW,
    PG_POOL_SIZE,
    PG_POOL_TIMEOUT,
    SQLITE_BUSY_TIMEOUT_MS,
    SQLITE_WRITE,
    driver_of,
    is_sqlite,
    make_engine,
    redacted,
    sqlite_inline_engine,
    waiting_for_locks,
)
from walletcore_sql.errors import storage_errors
from walletcore_sql.migrate import (
    check_schema_engine,
    check_schema_sync,
    upgrade_engine,
    upgrade_sync,
)

log = logging.getLogger("walletcore.sql")

#: SQLAlchemy's own pool on PostgreSQL, for what does not go through the units' pool
#: (`DriverPool`): health checks, nonce floors, the few statements the units cannot send
#: raw; connections kept, and how many more may open for a moment.
ENGINE_POOL_SIZE, ENGINE_POOL_OVERFLOW = 4, 4

#: The nonce leases' pool: connections kept idle, and how many more may open (one per
#: address with a send in flight in this process).
LEASE_POOL_SIZE, LEASE_POOL_OVERFLOW = 2, 48


#: Commits after which a WAL checkpoint is started in a worker thread (SQLite's own
#: automatic checkpoint, switched off on the inline connections, runs after ~1000 pages).
CHECKPOINT_EVERY = 200
#: SQLite: the first and the longest pause between two tries of a taken write lock (a
#: group holds it for about a millisecond; with pauses up to 4 ms, /sell on two workers
#: ran at 2,177 req/s with a p99 of 365 ms, with 1 ms at 2,692 req/s and 41 ms).
LOCK_RETRY_FIRST_SECONDS = 0.0005
LOCK_RETRY_MAX_SECONDS = 0.001
#: SQLite connections kept open for read units between uses.
IDLE_READERS = 4
#: SQLite group commit: at most this many write units share one transaction.
GROUP_COMMIT_MAX = 32


class WriteQueue:
    """SQLite, one per event loop: the process's write units queue on `lock` (FIFO);
    `batch` is the transaction open for them, `waiting` how many are queued. `jobs`:
    write units handed over whole (`SqliteInline.submit`), run one after another by the
    queue's runner while it holds the lock; `running`: that runner is alive."""

    __slots__ = ("batch", "jobs", "lock", "running", "waiting")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.waiting = 0
        self.batch: _Batch | None = None
        self.jobs: collections.deque[_Job] = collections.deque()
        self.running = False

    async def take(self) -> None:
        """The lock, counted as waiting meanwhile (an open group stays open for it)."""
        self.waiting += 1
        try:
            await self.lock.acquire()
        finally:
            self.waiting -= 1


class _Job:
    """A write unit handed over whole: `work(conn)` runs in its own savepoint of a group;
    `ran` gets what it returned with the group it joined (or what it raised)."""

    __slots__ = ("ran", "work")

    def __init__(self, work: Callable[[Any], Awaitable[Any]], ran: asyncio.Future[Any]) -> None:
        self.work = work
        self.ran = ran


class _Batch:
    """One SQLite transaction shared by the write units that queued while it was open."""

    __slots__ = ("closer", "conn", "done", "finishing", "members", "transaction")

    def __init__(self, conn: Connection, transaction: Any, done: asyncio.Future[None]) -> None:
        self.conn = conn
        self.transaction = transaction
        self.done = done  # the COMMIT's outcome
        self.members = 0  # units whose statements it holds
        self.closer: asyncio.Future[None] | None = None
        self.finishing: asyncio.Future[None] | None = None


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


class _Savepoint:
    """A unit's savepoint in its group's transaction, sent to the driver (pysqlite) directly,
    as the group's BEGIN IMMEDIATE is (`engine._sqlite_events`). SQLAlchemy's
    `begin_nested` sent SAVEPOINT and RELEASE through its whole execution path (statement
    compilation cache, events, an execution context): 8 % of a worker's CPU on `/sell`
    (docs/performance.md, item 26). The outer transaction stays SQLAlchemy's."""

    __slots__ = ("_dbapi", "_name")

    def __init__(self, conn: Connection, number: int) -> None:
        self._dbapi = driver_of(conn)
        self._name = f"walletcore_unit_{int(number)}"
        self._dbapi.execute(f"SAVEPOINT {self._name}")

    def commit(self) -> None:
        """RELEASE: the unit's statements stay in the group's transaction."""
        self._dbapi.execute(f"RELEASE SAVEPOINT {self._name}")

    def rollback(self) -> None:
        """The unit's statements undone; the group's transaction goes on."""
        self._dbapi.execute(f"ROLLBACK TO SAVEPOINT {self._name}")
        self._dbapi.execute(f"RELEASE SAVEPOINT {self._name}")


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
        #: group commits and closers running (held: the loop keeps only weak references)
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
        batch: _Batch | None = None
        joined = False
        try:
            batch = queue.batch or await self._open_batch(queue)
            # The first unit of a transaction needs no savepoint: if it fails, the whole
            # transaction (nothing but it) rolls back.
            with storage_errors():
                savepoint = _Savepoint(batch.conn, batch.members) if batch.members else None
            try:
                with storage_errors():  # the unit's driver errors too
                    yield InlineConnection(batch.conn)
            except BaseException:
                self._undo(queue, batch, savepoint)
                raise
            if savepoint is not None:
                with storage_errors():
                    savepoint.commit()  # RELEASE: its statements stay in the transaction
            batch.members += 1
            joined = True
        finally:
            self._hand_on(queue, batch)
        if joined:  # durable once the transaction it joined commits (shared by all its units)
            await asyncio.shield(batch.done)

    async def submit(self, queue: WriteQueue, work: Callable[[Any], Awaitable[Any]]) -> Any:
        """A write unit handed over whole: `await work(conn)` on the unit's `InlineRaw`,
        in a transaction of the process's writer; what it returned, once that is durable.

        With the lock free and nobody queued it runs at once, as `transaction` runs a
        unit. Else it is queued, and the queue's runner (one per queue, a unit itself on
        the lock) runs every job queued, one after another in its own savepoint, in the
        group open then, in one go: the write lock is not held across a loop turn per
        unit (units gathered on the lock resume one turn each, and a turn runs whatever
        else the loop had to do). A job that raises is undone alone (its savepoint); its
        caller gets the error. A caller cancelled while its job waits leaves it unrun."""
        if not (queue.lock.locked() or queue.waiting or queue.jobs):
            async with self.transaction(True, queue) as inline:
                return await work(InlineRaw(inline.sync))
        job = _Job(work, asyncio.get_running_loop().create_future())
        queue.jobs.append(job)
        if not queue.running:
            queue.running = True
            self._spawn(self._run_jobs(queue))
        result, batch = await job.ran
        await asyncio.shield(batch.done)  # durable once its group commits
        return result

    async def _run_jobs(self, queue: WriteQueue) -> None:
        """The queue's runner: while jobs are queued, takes the lock in turn (it counts as
        waiting, so an open group waits for it), joins the group open or opens one, runs
        the jobs (up to the group's bound) and hands on as a unit does."""
        try:
            while queue.jobs:
                await queue.take()
                batch: _Batch | None = None
                try:
                    if queue.jobs:
                        batch = queue.batch or await self._open_batch(queue)
                        await self._drain(queue, batch)
                except Exception as exc:  # noqa: BLE001 - no group opened: they fail alike
                    self._fail_jobs(queue, exc)
                finally:
                    self._hand_on(queue, batch)
        except BaseException:
            self._fail_jobs(queue, None)  # cancelled: the callers are, too
            raise
        finally:
            queue.running = False

    async def _drain(self, queue: WriteQueue, batch: _Batch) -> None:
        """Run the queued jobs in `batch`, each in a savepoint, while the group lasts."""
        while queue.jobs and queue.batch is batch and batch.members < GROUP_COMMIT_MAX:
            job = queue.jobs.popleft()
            if job.ran.done():  # its caller was cancelled while it waited
                continue
            try:
                with storage_errors():
                    savepoint = _Savepoint(batch.conn, batch.members)
            except Exception as exc:  # noqa: BLE001 - the connection failed: the group's
                job.ran.set_exception(exc)  # commit tells its units, the next group the rest
                return
            try:
                with storage_errors():
                    result = await job.work(InlineRaw(batch.conn))
                    savepoint.commit()  # RELEASE: its statements stay in the transaction
            except BaseException as exc:  # the job's own failure, for its caller
                if not job.ran.done():
                    if isinstance(exc, Exception):
                        job.ran.set_exception(exc)
                    else:  # the runner was cancelled while the job waited on something
                        job.ran.cancel()
                self._undo(queue, batch, savepoint)  # undone alone
                if not isinstance(exc, Exception):
                    raise
                continue
            batch.members += 1
            if not job.ran.done():
                job.ran.set_result((result, batch))

    @staticmethod
    def _fail_jobs(queue: WriteQueue, failure: BaseException | None) -> None:
        """Every queued job fails with `failure` (cancelled when None)."""
        while queue.jobs:
            job = queue.jobs.popleft()
            if job.ran.done():
                continue
            if failure is None:
                job.ran.cancel()
            else:
                job.ran.set_exception(failure)

    async def _open_batch(self, queue: WriteQueue) -> _Batch:
        """BEGIN IMMEDIATE on the writer connection: a new group of units."""
        with storage_errors():
            conn = self._writer or self.engine.connect().execution_options(**{SQLITE_WRITE: True})
        self._writer = None
        try:
            with storage_errors():
                transaction = await self._begin_immediate(conn)
        except BaseException:
            self._keep_writer(conn)
            raise
        queue.batch = _Batch(conn, transaction, asyncio.get_running_loop().create_future())
        return queue.batch

    def _undo(self, queue: WriteQueue, batch: _Batch, savepoint: _Savepoint | None) -> None:
        """A unit raised: its statements are undone, the group's earlier units stay (their
        savepoints were released into the transaction); a group whose first unit raised,
        or whose savepoint cannot be rolled back, ends rolled back."""
        if savepoint is not None:
            try:
                savepoint.rollback()
                return
            except Exception as exc:  # noqa: BLE001 - the connection is gone: all fail
                log.warning("SQLite savepoint rollback failed; the group is rolled back")
                failure: BaseException = exc
        else:
            failure = RuntimeError("the group's first unit raised")
        with contextlib.suppress(Exception):
            batch.transaction.rollback()
        self._end_batch(queue, batch, failure if batch.members else None)

    def _hand_on(self, queue: WriteQueue, batch: _Batch | None) -> None:
        """A unit is done: the group stays open for the units queued behind it (up to
        GROUP_COMMIT_MAX), else it commits now; the lock passes on either way, or, while
        the commit runs, is held by it."""
        if batch is None or queue.batch is not batch:  # not opened, or ended (rolled back)
            queue.lock.release()
            return
        if queue.waiting and batch.members < GROUP_COMMIT_MAX:
            if batch.closer is None:  # commits after the units queued now (the lock is FIFO)
                batch.closer = self._spawn(self._close_later(queue, batch))
            queue.lock.release()
            return
        batch.finishing = self._spawn(self._finish(queue, batch))

    def _spawn(self, work: Any) -> asyncio.Future[None]:
        task: asyncio.Future[None] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _close_later(self, queue: WriteQueue, batch: _Batch) -> None:
        await queue.lock.acquire()
        if queue.batch is batch and batch.finishing is None:
            batch.finishing = self._spawn(self._finish(queue, batch))
        else:
            queue.lock.release()

    async def _finish(self, queue: WriteQueue, batch: _Batch) -> None:
        """COMMIT (the fsync) in a worker thread, the lock held: the loop serves other
        requests meanwhile, and the units queuing form the next group."""
        failure: BaseException | None = None
        try:
            await asyncio.to_thread(self._commit, batch)
        except BaseException as exc:  # noqa: BLE001 - handed to every unit of the group
            failure = exc
        self._end_batch(queue, batch, failure)
        if failure is None:
            self._committed()
        queue.lock.release()

    @staticmethod
    def _commit(batch: _Batch) -> None:
        with storage_errors():
            batch.transaction.commit()

    def _end_batch(self, queue: WriteQueue, batch: _Batch, failure: BaseException | None) -> None:
        queue.batch = None
        if not batch.done.done():
            if failure is None:
                batch.done.set_result(None)
            else:
                batch.done.set_exception(failure)
                batch.done.exception()  # retrieved: a group with no unit waiting is fine
        self._keep_writer(batch.conn)

    def _keep_writer(self, conn: Connection) -> None:
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

    async def _begin_immediate(self, conn: Connection) -> Any:
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
                reason = str(getattr(exc, "orig", None) or exc)
                if ("locked" not in reason and "busy" not in reason) or loop.time() >= deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, LOCK_RETRY_MAX_SECONDS)

    def _committed(self) -> None:
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


@dataclass(slots=True)
class _Bound:
    """What belongs to one event loop: asyncpg connections, asyncio locks."""

    loop: asyncio.AbstractEventLoop
    engine: AsyncEngine | None  # PostgreSQL; SQLite runs on `Database.inline`
    writers: WriteQueue | None  # SQLite: this process's write units queue here
    prepare_lock: asyncio.Lock
    #: PostgreSQL: the connections of the stores' units (asyncpg's own pool)
    units: DriverPool | None = None
    #: PostgreSQL: the connections that hold nonce leases (made on first use)
    lease_engine: AsyncEngine | None = None


class Unit:
    """`Database.unit`: a class, not an `asynccontextmanager` generator, since every use
    case enters one or more (the generator's frames, its loop hooks and its weak set were
    about nine Python calls a unit; docs/performance.md, item 31)."""

    __slots__ = ("_conn", "_database", "_inline", "_write")

    def __init__(self, database: Database, write: bool) -> None:
        self._database = database
        self._write = write
        self._conn: PgReader | None = None
        self._inline: Any = None  # SQLite: the transaction's context manager, entered

    async def __aenter__(self) -> Any:
        database = self._database
        bound = database._ready_now() or await database._ready()
        if database.inline is not None:
            assert bound.writers is not None
            transaction = database.inline.transaction(self._write, bound.writers)
            inline = await transaction.__aenter__()
            self._inline = transaction
            try:
                return InlineRaw(inline.sync)
            except BaseException as exc:  # the transaction never outlives a failed entry
                self._inline = None
                await transaction.__aexit__(type(exc), exc, exc.__traceback__)
                raise
        assert bound.units is not None
        conn = self._conn = (PgWriter if self._write else PgReader)(bound.units)
        return conn

    async def __aexit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        """Never swallows the unit's exception (nor does the SQLite transaction)."""
        if self._inline is not None:
            transaction, self._inline = self._inline, None
            await transaction.__aexit__(kind, exc, traceback)
            return
        conn, self._conn = self._conn, None
        assert conn is not None
        try:
            if exc is not None:
                await conn.rollback()
            elif conn.in_transaction:  # else nothing to end (a read, or one autocommitted)
                await conn.commit()
        finally:
            if not conn.close_kept():  # its connection kept for the next unit, no await
                await conn.close()


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
        # PostgreSQL: `pool_size` (+ `max_overflow`) and `pool_timeout` size the units'
        # pool (`DriverPool`); SQLAlchemy's engine keeps a small pool of its own for what
        # goes through it (health checks, nonce floors, the statements the units cannot
        # send raw, migrations)
        size = int(engine_options.pop("pool_size", PG_POOL_SIZE))
        size += max(int(engine_options.pop("max_overflow", PG_POOL_OVERFLOW)), 0)
        self.pool_size = max(size, 1)
        self.pool_timeout = float(engine_options.pop("pool_timeout", PG_POOL_TIMEOUT))
        engine_options.setdefault("pool_size", min(ENGINE_POOL_SIZE, self.pool_size))
        engine_options.setdefault("max_overflow", ENGINE_POOL_OVERFLOW)
        engine_options.setdefault("pool_timeout", self.pool_timeout)
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
        PostgreSQL, an `InlineConnection` on SQLite.
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
                if not write:
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
        (`SqliteInline.transaction`)."""
        return Unit(self, write)

    async def run_alone(self, statement: Positional, values: Sequence[Any]) -> int:
        """PostgreSQL: a write unit of one statement, autocommitted (atomic on its own),
        its values in `statement.names` order; the rows it matched. What `async with
        unit(write=True) as conn: await conn.execute_alone(...)` does, in one coroutine
        (`direct.execute_alone`): every move of a trade, and a quote with its entry
        (`SqlStorage.swap_trade`, `.add_trade`). A statement with a batch form goes through
        its group commit (`direct.GroupCommit`): alone while a lane is free, else in the
        next batch, still answered for itself."""
        if self.inline is not None:
            raise RuntimeError("run_alone is PostgreSQL's: SQLite's units go through submit")
        bound = self._ready_now() or await self._ready()
        assert bound.units is not None
        if statement.batch is not None:  # group commit (`direct.GroupCommit`)
            return await bound.units.group(statement).run(values)
        count: int = await execute_alone(bound.units, statement, values)
        return count

    async def submit(self, work: Callable[[Any], Awaitable[Any]]) -> Any:
        """One write unit handed over whole: `await work(conn)`, `conn` as `unit(write=True)`
        yields it, committed after; what `work` returned. On SQLite it may run from the
        write queue's runner, in a group's savepoint (`SqliteInline.submit`), so `work`
        must only run statements on `conn`: it may run in another task than the caller's."""
        bound = await self._ready()
        if self.inline is not None:
            assert bound.writers is not None
            return await self.inline.submit(bound.writers, work)
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
        return (sqlite.insert if self.is_sqlite else postgresql.insert)(table)

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
            engine = (
                None
                if self.is_sqlite
                else make_engine(self.url, schema=self.schema, **self._engine_options)
            )
            bound = _Bound(
                loop,
                engine,
                WriteQueue() if self.is_sqlite else None,
                asyncio.Lock(),
                units=None
                if engine is None
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
        """Forget an asyncpg engine made on another event loop: its connections belong to
        that loop and cannot close from this one (call `aclose()` on the loop that used
        the storage)."""
        engine.sync_engine.dispose(close=False)
