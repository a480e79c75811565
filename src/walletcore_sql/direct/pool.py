"""PostgreSQL: the pool of the stores' units' connections (asyncpg's own), and what a unit
asks of a connection (open, settled, the driver's connection behind the pool's proxy).

The connections are asyncpg's, connected as SQLAlchemy's engine connects (the URL's
arguments, the schema's `search_path`, its JSON codecs); one given back settled is kept
for the next unit a moment (`DriverPool`'s rules). The units on them:
`walletcore_sql.direct.postgres`; their group commits: `walletcore_sql.direct.pg_group`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine

from walletcore.domain.errors import StorageUnavailable

if TYPE_CHECKING:
    from walletcore_sql.direct.pg_group import PgGroupCommit
    from walletcore_sql.direct.plans import Positional


#: Seconds a pooled connection may sit idle before asyncpg closes it (another is opened on
#: demand): idle ones never outlive a firewall's or pgbouncer's timeout.
IDLE_SECONDS = 300.0
#: Seconds a connection given back stays with the units (`DriverPool`, "kept") before it
#: goes back to asyncpg's pool, whose idle clock then starts.
KEPT_SECONDS = 1.0
#: Seconds a connection may stay out of asyncpg's pool, going from unit to unit, before it
#: goes back through it (asyncpg's checks at a return: its `max_queries`, an expiry).
LEASE_SECONDS = 10.0


class _Adapted:
    """What SQLAlchemy's asyncpg dialect sets its codecs up on (`setup_asyncpg_json_codec`
    reads the driver's connection from `_connection`)."""

    __slots__ = ("_connection",)

    def __init__(self, connection: Any) -> None:
        self._connection = connection


async def _kept_as_is(connection: Any) -> None:
    """asyncpg's reset on release: nothing more. A unit gives back only a settled
    connection (`settled`: outside a transaction, no statement running) and the stores
    never change a session's settings; asyncpg's default (RESET ALL, UNLISTEN, CLOSE ALL,
    advisory unlocks) would cost a round trip per unit. SQLAlchemy's pool reset the same
    way (a ROLLBACK only when inside a transaction)."""


class DriverPool:
    """PostgreSQL: the connections of the stores' units, asyncpg's own pool.

    Sized by `size` (`WALLETCORE_DB_POOL_SIZE`): connections open on demand up to it and
    close after `IDLE_SECONDS` idle; past it a unit waits up to `timeout` seconds, then
    503.

    A connection given back settled is kept for the next unit (`_kept`, newest first) rather than
    returned to asyncpg's pool at once: asyncpg's checkout and return (its queue, a task to shield
    the return, a timer for the idle clock, the proxy) were about 240 Python calls each, the largest
    single cost of a quote + approve (three checkouts; docs/performance.md, "The stores on the
    driver"). Kept connections are still checked out of asyncpg's pool, so its bound holds. Rules:
    - a unit takes the newest kept connection that is open, with no await; else it waits
      for asyncpg's pool as before (counted in `_waiting`);
    - a connection is handed back to asyncpg's pool, not kept, while a unit waits there
      (so the waiter gets it), when the pool closes, and once it has been out of asyncpg's
      pool `LEASE_SECONDS` (its checks at a return then run: `max_queries`, an expiry);
    - a kept connection unused for `KEPT_SECONDS` goes back to asyncpg's pool (one timer
      while any is kept), whose idle clock then closes it after `IDLE_SECONDS`;
    - `drop` and `aclose` hand every kept connection back (an expiry then replaces them;
      a close closes them), and a connection out of asyncpg's pool since before a `drop`
      (no lease in `_leased`) goes back through it when given back, never kept.

    Connected as SQLAlchemy's engine connects (the URL's arguments by its dialect, the
    engine's `server_settings`, its JSON codecs), so the compiled statements and their
    processors see what they saw through it. A unit that finds its session dropped expires
    every pooled connection (each is replaced at its next checkout), as SQLAlchemy
    invalidated its pool on a disconnect.
    """

    __slots__ = (
        "_groups",
        "_handing",
        "_kept",
        "_leased",
        "_options",
        "_pool",
        "_trim",
        "_waiting",
        "dialect",
        "engine",
        "size",
        "timeout",
    )

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        size: int,
        timeout: float,
        server_settings: Mapping[str, str] | None = None,
    ) -> None:
        self.engine = engine
        self.dialect: Any = engine.dialect  # the asyncpg dialect: its codec setup
        self.size = size
        self.timeout = timeout
        _, options = self.dialect.create_connect_args(engine.url)
        cache = options.pop("prepared_statement_cache_size", None)
        if cache is not None:  # SQLAlchemy's name for it (pgbouncer: 0), asyncpg's own
            options.setdefault("statement_cache_size", int(cache))
        options.pop("prepared_statement_name_func", None)
        options.pop("async_creator_fn", None)
        if server_settings:
            options["server_settings"] = {**options.get("server_settings", {}), **server_settings}
        self._options = options
        self._pool: Any = None
        #: connections given back, ready for the next unit: (connection, kept at), the
        #: oldest first (a unit takes the last)
        self._kept: list[tuple[Any, float]] = []
        #: id of each connection out of asyncpg's pool -> when it left it (none for those
        #: out since the last `drop`: they go back through asyncpg's pool, never kept)
        self._leased: dict[int, float] = {}
        self._waiting = 0  # units waiting for asyncpg's pool
        self._trim: asyncio.TimerHandle | None = None
        self._handing: set[asyncio.Task[None]] = set()  # returns in flight (`_return`)
        #: id of a statement with a batch form -> its group commit on this pool
        self._groups: dict[int, PgGroupCommit] = {}

    def __repr__(self) -> str:  # never the URL's password
        return f"DriverPool(size={self.size}, timeout={self.timeout})"

    async def _codecs(self, connection: Any) -> None:
        adapted = _Adapted(connection)
        await self.dialect.setup_asyncpg_json_codec(adapted)
        await self.dialect.setup_asyncpg_jsonb_codec(adapted)

    async def _opened(self) -> Any:
        pool = self._pool
        if pool is None:
            import asyncpg

            pool = self._pool = asyncpg.create_pool(
                min_size=0,
                max_size=self.size,
                max_inactive_connection_lifetime=IDLE_SECONDS,
                init=self._codecs,
                reset=_kept_as_is,
                **self._options,
            )
            # min_size=0: opens no connection, so this never waits (a second unit never
            # finds the pool half made)
            await pool
        return pool

    def group(self, statement: Positional) -> PgGroupCommit:
        """The group commit of `statement` (which has a batch form) on this pool."""
        found = self._groups.get(id(statement))
        if found is None:
            from walletcore_sql.direct.pg_group import PgGroupCommit  # it sends on this pool

            found = self._groups[id(statement)] = PgGroupCommit(self, statement)
        return found

    def take_kept(self) -> Any:
        """The newest kept connection that is open (asyncpg's proxy of it), with no await;
        None when none is kept (`acquire` then waits for asyncpg's pool)."""
        kept = self._kept
        while kept:
            connection, _ = kept.pop()
            if is_open(raw_of(connection)):
                return connection
            self._return(connection)  # closed while kept: asyncpg replaces it
        return None

    async def acquire(self) -> Any:
        """A pooled connection (asyncpg's proxy of it); 503 when none comes in time or the
        server cannot be reached."""
        connection = self.take_kept()
        if connection is not None:
            return connection
        try:
            pool = await self._opened()
            self._waiting += 1
            try:
                async with asyncio.timeout(self.timeout):
                    connection = await pool.acquire()
            finally:
                self._waiting -= 1
        except Exception as exc:  # refused, reset, too many connections, no slot in time
            raise StorageUnavailable() from exc
        self._leased[id(connection)] = time.monotonic()
        return connection

    async def release(self, connection: Any) -> None:
        """Back to the pool: only a settled connection is kept; any other is closed first
        (a transaction or a statement left open on it is never inherited)."""
        if not self.keep_settled(connection):
            await self._hand_back(connection)  # closed first when not settled

    def keep_settled(self, connection: Any) -> bool:
        """`release`'s own case, with no await: keep `connection` for the next unit when
        it is settled, leased recently and nobody waits for asyncpg's pool; False when it
        must go back through asyncpg's pool (`release` does that)."""
        return settled(raw_of(connection)) and self.keep_answered(connection)

    def keep_answered(self, connection: Any) -> bool:
        """`keep_settled` for a connection known to be settled: it just answered an
        autocommitted statement, with no await since (`execute_alone`)."""
        pool, leased_at = self._pool, self._leased.get(id(connection))
        if pool is not None and leased_at is not None and not self._waiting:
            now = time.monotonic()
            if now - leased_at < LEASE_SECONDS and not pool.is_closing():
                self._keep(connection, now)
                return True
        return False

    def _keep(self, connection: Any, now: float) -> None:
        self._kept.append((connection, now))
        if self._trim is None:
            self._trim = asyncio.get_running_loop().call_later(KEPT_SECONDS, self._trim_kept)

    def _trim_kept(self) -> None:
        """Hand back the connections kept `KEPT_SECONDS` unused (the oldest first in
        `_kept`); the timer runs again while any is kept."""
        self._trim = None
        kept = self._kept
        due = time.monotonic() - KEPT_SECONDS
        stale = 0
        while stale < len(kept) and kept[stale][1] <= due:
            stale += 1
        for connection, _ in kept[:stale]:
            self._return(connection)
        del kept[:stale]
        if kept:
            wait = kept[0][1] + KEPT_SECONDS - time.monotonic()
            self._trim = asyncio.get_running_loop().call_later(max(wait, 0.0), self._trim_kept)

    async def _hand_back(self, connection: Any) -> None:
        """Back to asyncpg's pool (closed first when not settled)."""
        self._leased.pop(id(connection), None)
        pool = self._pool
        if pool is None or not settled(connection):
            terminate(connection)
        if pool is not None:  # also while it closes: its close waits for this
            await pool.release(connection)

    def _return(self, connection: Any) -> None:
        """`_hand_back` in a task of its own: a caller cancelled meanwhile leaves no
        connection out of asyncpg's pool, and a failure (a connection already broken)
        is nobody's to answer."""
        task = asyncio.get_running_loop().create_task(self._hand_back_quietly(connection))
        self._handing.add(task)
        task.add_done_callback(self._handing.discard)

    async def _hand_back_quietly(self, connection: Any) -> None:
        with contextlib.suppress(Exception):
            await self._hand_back(connection)

    def _return_kept(self) -> None:
        """Every kept connection on its way back to asyncpg's pool (`_return`)."""
        if self._trim is not None:
            self._trim.cancel()
            self._trim = None
        kept, self._kept = self._kept, []
        for connection, _ in kept:
            self._return(connection)

    async def drop(self, connection: Any) -> None:
        """A connection whose session may be broken: closed, and every other pooled one
        (the kept ones too) replaced at its next checkout."""
        pool = self._pool
        terminate(connection)
        self._leased.clear()  # those out now go back through asyncpg's pool when given back
        if pool is not None:
            await pool.expire_connections()
            self._return_kept()  # expired: asyncpg closes them as they come back
            await pool.release(connection)

    async def aclose(self, wait: float = 10.0) -> None:
        """Close the pool: its connections once given back, or after `wait` seconds
        whatever holds them. A unit still running gives its connection back to the
        closing pool; none is acquired after."""
        pool = self._pool
        if pool is None or pool.is_closing():
            return
        try:
            await asyncio.wait_for(self._close(pool), wait)
        except (TimeoutError, Exception):  # noqa: BLE001 - closed either way
            with contextlib.suppress(Exception):
                pool.terminate()

    async def _close(self, pool: Any) -> None:
        for group in list(self._groups.values()):  # batches in flight answered first
            await group.wait_idle()
        self._return_kept()
        if self._handing:  # back before the close waits for them
            await asyncio.wait(set(self._handing))
        await pool.close()

    def forget(self) -> None:
        """Made on another event loop (most likely closed by now): its connections cannot
        close from this one. Left to the garbage collector; one still held is closed when
        given back."""
        self._pool = None
        self._kept.clear()
        self._leased.clear()
        self._groups.clear()  # their waiting writes and flights belong to that loop
        if self._trim is not None:  # that loop's timer: it must not touch this loop's list
            self._trim.cancel()
            self._trim = None


def settled(driver: Any) -> bool:
    """Fit to go back to the pool: open, outside a transaction, no statement running."""
    if not is_open(driver) or driver.is_in_transaction():
        return False
    protocol = getattr(driver, "_protocol", None)
    cancelling = getattr(protocol, "_is_cancelling", None)
    return not (cancelling is not None and cancelling())


def is_open(driver: Any) -> bool:
    """The connection is open (False too when its session closed and asyncpg's pool
    detached it from the proxy, whose every call then raises)."""
    try:
        return not driver.is_closed()
    except Exception:  # noqa: BLE001 - closed, and detached from the proxy by the pool
        return False


def raw_of(connection: Any) -> Any:
    """The asyncpg `Connection` behind the pool's proxy `connection`, whose methods a unit
    calls directly: through the proxy, each call is a Python wrapper that checks the proxy
    is still attached, then looks the method up (about 15 a sell + approve). The proxy is
    what goes back to the pool (which detaches it then), and a unit calls nothing after
    giving it back. When the proxy is detached already (or holds its connection under
    another name), the proxy itself: its calls then raise as before."""
    con = getattr(connection, "_con", None)
    return connection if con is None else con


def terminate(driver: Any) -> None:
    """Close the connection now (no-op when its session already closed and asyncpg
    detached it from the proxy)."""
    with contextlib.suppress(Exception):
        driver.terminate()
