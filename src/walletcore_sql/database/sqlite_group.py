"""SQLite's group commit: the process's write queue, the groups (one transaction shared by
the write units that queued while it was open), their savepoints, and the units handed
over whole (docs/storage.md, "SQLite").

Rules:
- Within the process, write units queue on one asyncio lock (`WriteQueue`, FIFO). Those
  that queue while one runs join its transaction (`Group`): the first as a plain
  transaction, each next one in a savepoint sent to the driver directly (`Savepoint`; a
  unit that raises is rolled back to it, the others stay).
- When no unit waits any more (or `GROUP_COMMIT_MAX` have joined), one COMMIT makes the
  group durable, in a worker thread with the lock held, so the loop serves other requests
  during the fsync and the units queuing meanwhile form the next group. Every unit
  returns only once its group committed; a failed COMMIT fails every unit of the group.
  A unit that left the group open for units queued behind it also queues a closer, so a
  queued unit that is cancelled never leaves the group (and the write lock) open.
- Units handed over whole (`SqliteJobs`, on the group commit both dialects share,
  `walletcore_sql.direct.group`): run at once when the lock is free; else queued, and the
  queue's runner (itself a unit on the lock, so the open group waits for it) runs each
  one after another in its own savepoint of the group, with no loop turn of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from walletcore_sql.direct.group import GroupCommit, answer, refuse
from walletcore_sql.direct.sqlite import InlineRaw
from walletcore_sql.engine import driver_of
from walletcore_sql.errors import storage_errors

if TYPE_CHECKING:
    from walletcore_sql.database.sqlite import SqliteInline

log = logging.getLogger("walletcore.sql")

#: At most this many write units share one transaction.
GROUP_COMMIT_MAX = 32

#: A write unit handed over whole: `await work(conn)` on the unit's `InlineRaw`.
Work = Callable[[Any], Awaitable[Any]]


class Group:
    """One SQLite transaction shared by the write units that queued while it was open."""

    __slots__ = ("closer", "conn", "done", "finishing", "members", "transaction")

    def __init__(self, conn: Connection, transaction: Any, done: asyncio.Future[None]) -> None:
        self.conn = conn
        self.transaction = transaction
        self.done = done  # the COMMIT's outcome
        self.members = 0  # units whose statements it holds
        self.closer: asyncio.Future[None] | None = None
        self.finishing: asyncio.Future[None] | None = None


class Savepoint:
    """A unit's savepoint in its group's transaction, sent to the driver (pysqlite) directly,
    as the group's BEGIN IMMEDIATE is (`engine._sqlite_events`). SQLAlchemy's
    `begin_nested` sent SAVEPOINT and RELEASE through its whole execution path (statement
    compilation cache, events, an execution context): 8 % of a worker's CPU on `/sell`
    (docs/performance.md, "SQLite's write queue"). The outer transaction stays SQLAlchemy's."""

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


class WriteQueue:
    """SQLite, one per event loop: the process's write units queue on `lock` (FIFO);
    `group` is the transaction open for them, `waiting` how many are queued; `jobs` the
    write units handed over whole. The groups' connection and its BEGIN IMMEDIATE are
    `inline`'s (`SqliteInline`)."""

    __slots__ = ("group", "inline", "jobs", "lock", "waiting")

    def __init__(self, inline: SqliteInline) -> None:
        self.inline = inline
        self.lock = asyncio.Lock()
        self.waiting = 0
        self.group: Group | None = None
        self.jobs = SqliteJobs(self)

    async def take(self) -> None:
        """The lock, counted as waiting meanwhile (an open group stays open for it)."""
        self.waiting += 1
        try:
            await self.lock.acquire()
        finally:
            self.waiting -= 1

    async def open(self) -> Group:
        """BEGIN IMMEDIATE on the writer connection: a new group of units."""
        inline = self.inline
        conn = inline.take_writer()
        try:
            with storage_errors():
                transaction = await inline.begin_immediate(conn)
        except BaseException:
            inline.keep_writer(conn)
            raise
        self.group = Group(conn, transaction, asyncio.get_running_loop().create_future())
        return self.group

    def undo(self, group: Group, savepoint: Savepoint | None) -> None:
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
            group.transaction.rollback()
        self._end(group, failure if group.members else None)

    def hand_on(self, group: Group | None) -> None:
        """A unit is done: the group stays open for the units queued behind it (up to
        GROUP_COMMIT_MAX), else it commits now; the lock passes on either way, or, while
        the commit runs, is held by it."""
        if group is None or self.group is not group:  # not opened, or ended (rolled back)
            self.lock.release()
            return
        if self.waiting and group.members < GROUP_COMMIT_MAX:
            if group.closer is None:  # commits after the units queued now (the lock is FIFO)
                group.closer = self.inline.spawn(self._close_later(group))
            self.lock.release()
            return
        group.finishing = self.inline.spawn(self._finish(group))

    async def _close_later(self, group: Group) -> None:
        await self.lock.acquire()
        if self.group is group and group.finishing is None:
            group.finishing = self.inline.spawn(self._finish(group))
        else:
            self.lock.release()

    async def _finish(self, group: Group) -> None:
        """COMMIT (the fsync) in a worker thread, the lock held: the loop serves other
        requests meanwhile, and the units queuing form the next group."""
        failure: BaseException | None = None
        try:
            await asyncio.to_thread(self._commit, group)
        except BaseException as exc:  # noqa: BLE001 - handed to every unit of the group
            failure = exc
        self._end(group, failure)
        if failure is None:
            self.inline.committed()
        self.lock.release()

    @staticmethod
    def _commit(group: Group) -> None:
        with storage_errors():
            group.transaction.commit()

    def _end(self, group: Group, failure: BaseException | None) -> None:
        self.group = None
        if not group.done.done():
            if failure is None:
                group.done.set_result(None)
            else:
                group.done.set_exception(failure)
                group.done.exception()  # retrieved: a group with no unit waiting is fine
        self.inline.keep_writer(group.conn)


class SqliteJobs(GroupCommit[Work, tuple[Any, Group]]):
    """The write units handed over whole (`Database.submit`; module rules): one lane, the
    queue's runner. A job that raises is undone alone (its savepoint) and its caller gets
    the error; a caller cancelled while its job waits leaves it unrun; when no group can be
    opened (another process held the lock past the busy timeout) every queued job fails
    alike; a runner cancelled cancels its job and the jobs still queued."""

    __slots__ = ("_queue",)

    def __init__(self, queue: WriteQueue) -> None:
        super().__init__(lanes=1)
        self._queue = queue

    def free(self) -> bool:
        """Run it now, as a unit: the lock is free and nobody is queued."""
        queue = self._queue
        return not (queue.lock.locked() or queue.waiting or self.waiting)

    def spawn(self, flight: Coroutine[Any, Any, None]) -> asyncio.Future[None]:
        return self._queue.inline.spawn(flight)  # closed with the storage (`aclose`)

    async def submit(self, work: Work) -> Any:
        """`await work(conn)` in a transaction of the process's writer, `conn` an
        `InlineRaw`; what it returned, once that is durable."""
        queue = self._queue
        if self.free():
            async with queue.inline.transaction(True, queue) as inline:
                return await work(InlineRaw(inline.sync))
        result, group = await self.queued(work)
        await asyncio.shield(group.done)  # durable once its group commits
        return result

    async def flush(self) -> None:
        """The queue's runner: while jobs are queued, takes the lock in turn (it counts as
        waiting, so an open group waits for it), joins the group open or opens one, runs
        the jobs (up to the group's bound) and hands on as a unit does."""
        queue = self._queue
        try:
            while self.waiting:
                await queue.take()
                group: Group | None = None
                try:
                    if self.waiting:
                        group = queue.group or await queue.open()
                        await self._drain(group)
                except Exception as exc:  # noqa: BLE001 - no group opened: they fail alike
                    self.waiting.fail_all(exc)
                finally:
                    queue.hand_on(group)
        except BaseException:
            self.waiting.fail_all(None)  # cancelled: the callers are, too
            raise

    async def _drain(self, group: Group) -> None:
        """Run the queued jobs in `group`, each in a savepoint, while the group lasts."""
        queue = self._queue
        while queue.group is group and group.members < GROUP_COMMIT_MAX:
            job = self.waiting.next()  # none of a caller cancelled while it waited
            if job is None:
                return
            work, ran = job
            try:
                with storage_errors():
                    savepoint = Savepoint(group.conn, group.members)
            except Exception as exc:  # noqa: BLE001 - the connection failed: the group's
                refuse(ran, exc)  # commit tells its units, the next group the rest
                return
            try:
                with storage_errors():
                    result = await work(InlineRaw(group.conn))
                    savepoint.commit()  # RELEASE: its statements stay in the transaction
            except BaseException as exc:  # the job's own failure, for its caller
                # cancelled when the runner was, while the job waited on something
                refuse(ran, exc if isinstance(exc, Exception) else None)
                queue.undo(group, savepoint)  # undone alone
                if not isinstance(exc, Exception):
                    raise
                continue
            group.members += 1
            answer(ran, (result, group))
