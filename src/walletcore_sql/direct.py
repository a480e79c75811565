"""The stores' units of work sent straight to the driver: the statements SQLAlchemy
compiled, without its execution machinery.

Sent through SQLAlchemy's engine, one read of ten trades cost ~300 µs of Python over the
~100 µs asyncpg itself takes (a `Connection` with its event dispatch, the execution
context, the greenlet hop, the cursor emulation, the result proxy; docs/performance.md,
item 17). The units of `SqlStorage.read()` and `.write()` keep what matters of SQLAlchemy
and drop the rest:

- the SQL is SQLAlchemy's own compilation of the stores' statements for the engine's
  dialect (casts, `trimmed_money`, binds in order; an INSERT or UPDATE for the columns it
  is given), made once per statement;
- the parameters go through the same bind processors, the rows through the same result
  processors (picked, as SQLAlchemy picks them, by the column's type);
- PostgreSQL (`PgReader`, `PgWriter`): the connection comes from (and goes back to)
  asyncpg's own pool (`DriverPool`, which keeps one given back for the next unit a
  moment, docs/performance.md item 30), connected as SQLAlchemy's engine connects, and
  asyncpg's prepared-statement cache serves it. SQLAlchemy's pool ran its checkout and
  its return in a greenlet each (a 16 KiB Python stack mapped and unmapped each time)
  and through its pool events: about a sixth of a quote + approve's CPU in the process
  (docs/performance.md, item 28). A read unit takes no transaction; a write unit begins
  one at its first statement, or never (a unit of one statement is autocommitted). A
  connection left inside a transaction or a cancelled statement is closed, never pooled.
  A driver error leaves as the port's `StorageUnavailable` (503; every pooled connection
  is replaced when the session may be broken) or `StorageError` (500), as
  `storage_errors` does. A read it cannot send as is (an expanding `IN`, escaped bind
  names) goes through SQLAlchemy, on a connection of the engine's own pool; a write unit
  refuses it (its statements never split over two connections).
- SQLite (`InlineRaw`): the pysqlite connection of the unit, inside the transaction (or
  group-commit savepoint) SQLAlchemy opened for it; what the plan cannot send goes
  through that SQLAlchemy connection.

Everything else (nonce leases and floors, migrations, health checks) uses SQLAlchemy's
engine, with a small pool of its own.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import re
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from walletcore.domain.errors import StorageError, StorageUnavailable
from walletcore_sql.engine import driver_of
from walletcore_sql.errors import storage_errors

Processor = Callable[[Any], Any] | None

#: Statements compiled for the raw path (the stores' module-level statements: a few dozen).
#: Entries hold their statement, so an id is never reused while cached; past the bound a
#: statement is sent through SQLAlchemy instead.
_PLANS: dict[tuple[int, int, tuple[str, ...]], _Plan | None] = {}
_PLANS_MAX = 512


class _Plan:
    """One statement compiled for asyncpg: its SQL, how to order and process its
    parameters, and (after its first run) how to process each column of its rows."""

    __slots__ = ("binds", "compiled", "keys", "processors", "returns_rows", "sql", "statement")

    def __init__(self, statement: Any, compiled: Any) -> None:
        self.statement = statement  # held: the cache key is its id
        self.compiled = compiled
        self.sql: str = compiled.string
        processors = compiled._bind_processors
        self.binds: list[tuple[str, Processor]] = [
            (name, processors.get(name)) for name in (compiled.positiontup or ())
        ]
        self.keys: tuple[str, ...] = tuple(c.keyname for c in compiled._result_columns)
        self.returns_rows = bool(self.keys)
        self.processors: list[Processor] | None = None

    def arguments(self, parameters: Mapping[str, Any]) -> list[Any]:
        try:  # the usual case: the caller names every bind (a store's statements)
            return [
                parameters[name] if process is None else process(parameters[name])
                for name, process in self.binds
            ]
        except KeyError:  # binds with values of their own: SQLAlchemy fills them in
            given = self.compiled.construct_params(parameters, _check=False)
            return [
                given[name] if process is None else process(given[name])
                for name, process in self.binds
            ]

    def learn_columns(self, dialect: Any, type_oids: Sequence[int | None]) -> None:
        columns = self.compiled._result_columns
        self.processors = [
            column.type._cached_result_processor(dialect, oid)
            for column, oid in zip(columns, type_oids, strict=True)
        ]


def _plan(
    statement: Any, dialect: Any, parameters: Mapping[str, Any] | None = None
) -> _Plan | None:
    """The plan of `statement`; an INSERT or UPDATE is compiled, as SQLAlchemy compiles
    it, for the columns its parameters name (a column left out keeps its default).

    Keyed by the names in the order the caller wrote them, not sorted: a store builds each
    statement's parameters in one literal, so one order per call site (a second order
    would only compile the same plan once more). Sorting a quote's 32 names was half of
    the lookup: 1.7 -> 0.75 us, alone. The compilation itself takes them sorted."""
    if isinstance(parameters, Sequence):  # executemany: each set names the same columns
        parameters = parameters[0] if parameters else None
    columns = tuple(parameters) if parameters and statement.is_dml else ()
    key = (id(statement), id(dialect), columns)
    try:
        return _PLANS[key]
    except KeyError:
        pass
    if columns:
        compiled = statement.compile(dialect=dialect, column_keys=sorted(columns))
    else:
        compiled = statement.compile(dialect=dialect)
    sendable = (
        compiled.positiontup is not None
        and not compiled.escaped_bind_names
        and "POSTCOMPILE" not in compiled.string
    )
    plan = _Plan(statement, compiled) if sendable else None
    if len(_PLANS) < _PLANS_MAX:
        _PLANS[key] = plan
    return plan


class Positional:
    """One of the stores' statements sent with its values in a fixed order (`names`, each
    bind's name): its plan looked up once per dialect, with each bind's value index and
    processor, so a call builds no dict of parameters and looks none up by name
    (`execute_alone`; docs/performance.md, item 34)."""

    __slots__ = ("_bound", "batch", "names", "statement")

    def __init__(self, statement: Any, names: Sequence[str], *, batch: Batch | None = None) -> None:
        self.statement = statement
        self.names = tuple(names)
        if len(set(self.names)) != len(self.names):
            raise ValueError("a bind named twice")
        #: the form that sends many value sets of this statement as one (`GroupCommit`)
        self.batch = batch
        if batch is not None and batch.statement.names != self.names:
            raise ValueError("a batch form binds the statement's names, in its order")
        #: id(dialect) -> (the dialect, held so the id is not reused; the plan; per bind in
        #: the plan's order, the index of its value and its processor)
        self._bound: dict[int, tuple[Any, _Plan, list[tuple[int, Processor]]]] = {}

    def plan(self, dialect: Any) -> tuple[_Plan, list[tuple[int, Processor]]]:
        known = self._bound.get(id(dialect))
        if known is None:
            plan = _plan(self.statement, dialect, dict.fromkeys(self.names))
            if plan is None:
                raise RuntimeError(f"not a statement the raw path can send: {self.statement}")
            index = {name: n for n, name in enumerate(self.names)}
            missing = [name for name, _ in plan.binds if name not in index]
            if missing:
                raise RuntimeError(f"binds with no value in the order given: {missing}")
            order = [(index[name], process) for name, process in plan.binds]
            known = self._bound[id(dialect)] = (dialect, plan, order)
        return known[1], known[2]

    def check(self, values: Sequence[Any]) -> None:
        """`ValueError` unless `values` has one value per bind: refused before anything
        is sent (or queued)."""
        if len(values) != len(self.names):
            raise ValueError(f"{len(self.names)} values expected, {len(values)} given")

    def parameters(self, values: Sequence[Any]) -> dict[str, Any]:
        """The values by bind name: the statement as a unit's `execute` takes it."""
        return dict(zip(self.names, values, strict=True))


async def execute_alone(
    pool: DriverPool, statement: Positional, values: Sequence[Any], *, many: bool = False
) -> Any:
    """A write unit of one statement, autocommitted (atomic on its own), on a pooled
    connection, its values in `statement.names` order; the rows it matched (the command
    tag's count). With `many`, `values` is a list of such value sets, sent as a `Batch`
    (`GroupCommit`): the statement once per set, pipelined, in one implicit transaction;
    the rows they returned (asyncpg's records, unprocessed).

    What `PgWriter.execute_alone` does in a unit, in one coroutine: the plan found by the
    dialect alone, the arguments in the plan's order with their processors, and a
    connection that answered the statement kept as it is (it is open, and outside a
    transaction: no BEGIN was sent), with no check of its state. A failure or a
    cancellation goes the unit's way (`PgWriter`): the port's error, the connection
    dropped when it may be broken, else given back (closed first when not settled)."""
    plan, order = statement.plan(pool.dialect)
    if many:
        batch = [_arguments(statement, order, one) for one in values]
    else:
        arguments = _arguments(statement, order, values)
    driver = pool.take_kept() or await pool.acquire()
    raw = _raw(driver)
    try:
        if many:
            status = await raw.fetchmany(plan.sql, batch)
        else:
            status = await raw.execute(plan.sql, *arguments)
    except BaseException as exc:  # noqa: BLE001 - raised again: a failure as the port's error
        writer = PgWriter(pool)
        writer._driver, writer._raw = driver, raw
        try:
            if isinstance(exc, Exception):
                raise await writer._failure(exc, raw) from exc
            raise
        finally:
            await writer.close()
    if not pool.keep_answered(driver):
        await pool.release(driver)
    return status if many else _rowcount(status)


def _arguments(
    statement: Positional, order: list[tuple[int, Processor]], values: Sequence[Any]
) -> list[Any]:
    """The driver's arguments for `values` (in `statement.names` order): in the plan's
    order, each through its bind processor."""
    statement.check(values)
    return [values[n] if process is None else process(values[n]) for n, process in order]


class RawResult:
    """What the stores read of a result: `mappings().one_or_none()` / `.all()`, scalars."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[dict[str, Any]], rowcount: int | None = None) -> None:
        self._rows = rows
        #: rows matched (a SELECT's, or a RETURNING statement's, rows; else the server's count)
        self.rowcount = len(rows) if rowcount is None else rowcount

    def mappings(self) -> RawResult:
        return self

    def all(self) -> list[dict[str, Any]]:
        return self._rows

    def one_or_none(self) -> dict[str, Any] | None:
        if len(self._rows) > 1:
            raise sa_exc.MultipleResultsFound("more than one row where one or none was required")
        return self._rows[0] if self._rows else None

    def scalar_one_or_none(self) -> Any:
        row = self.one_or_none()
        return None if row is None else next(iter(row.values()))


class Batch:
    """How a `Positional` statement's value sets are sent many at once (`GroupCommit`):
    `statement` (the statement itself, or the same with a RETURNING) once per value set,
    pipelined in one round trip as one implicit transaction (asyncpg's `fetchmany`: the
    sets are stored together or not at all, under one commit), each run from the plan
    the statement has alone. `key` is the index of the value no two sets of one batch may
    share (a trade's id: a batch never holds two writes of one row); `matched`, when the
    statement may match no row (a compare-and-set that lost), tells from the rows the
    batch returned the keys of the sets that matched; None: every set writes its row, or
    the batch fails."""

    __slots__ = ("key", "matched", "statement")

    def __init__(
        self,
        statement: Positional,
        *,
        key: int,
        matched: Callable[[Sequence[Any]], Collection[Any]] | None = None,
    ) -> None:
        self.statement = statement
        self.key = key
        self.matched = matched


#: Batches of one statement in flight at once, per pool (`GroupCommit`): a write that
#: finds one free goes at once, alone.
GROUP_LANES = 4
#: The most value sets one batch sends.
GROUP_MOST = 64


class GroupCommit:
    """Group commit on PostgreSQL: the writes of one statement (a quote with its entry,
    a move of a trade with its entry) that arrive while `GROUP_LANES` are busy wait, and
    the next free lane sends them together (`Batch`): the same statement once for each,
    pipelined, in one transaction: one round trip and one commit for all of them.
    docs/storage.md, "Group commit on PostgreSQL".

    - A write that finds a lane free and none waiting is sent at once, alone, as before:
      no write waits for others to come, so one at a time costs what it did.
    - Each write is its own statement, with the plan it has alone: it is stored with its
      entry or not at all, and answered only once the transaction that holds it
      committed. One batch never holds two writes of one row (`Batch.key`; the second
      waits for the next batch), so each compare-and-set finds its row as no other write
      of the batch left it, and decides as it would alone.
    - A batch the server refused (a constraint, a deadlock, a bad value: the server
      answered with an error, so nothing of it was committed) is sent again write by
      write, so each gets its own answer and one bad write fails no other. A batch whose
      outcome is unknown (the session dropped, a timeout) is answered 503 to every write
      in it, and never sent again (it may have committed).
    - A caller cancelled while its write waits takes it out; once sent, its write
      commits or not with the batch, as a statement cancelled in flight may have.
    """

    __slots__ = (
        "_batch",
        "_busy",
        "_flights",
        "_pool",
        "_statement",
        "_waiting",
        "batched",
        "batches",
        "refused",
    )

    def __init__(self, pool: DriverPool, statement: Positional) -> None:
        if statement.batch is None:
            raise ValueError("a statement with no batch form")
        self._pool = pool
        self._statement = statement
        self._batch: Batch = statement.batch
        self._busy = 0  # lanes in use: writes sent alone and batches in flight
        self._waiting: collections.deque[tuple[Sequence[Any], asyncio.Future[int]]] = (
            collections.deque()
        )
        self._flights: set[asyncio.Task[None]] = set()
        #: batches of two writes or more sent, the writes they held, and those of them
        #: the server refused whole (then sent write by write)
        self.batches = 0
        self.batched = 0
        self.refused = 0

    async def run(self, values: Sequence[Any]) -> int:
        """Write `values` (in `statement.names` order); the rows it matched, 0 or 1."""
        if self._busy < GROUP_LANES and not self._waiting:
            self._busy += 1
            try:
                count: int = await execute_alone(self._pool, self._statement, values)
                return count
            finally:
                self._busy -= 1
                if self._waiting:
                    self._fly()
        self._statement.check(values)  # refused now, not in a batch
        answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting.append((values, answer))
        if self._busy < GROUP_LANES:
            self._fly()
        return await answer

    async def wait_idle(self) -> None:
        """Until no batch is in flight (a pool closing waits for them)."""
        while self._flights:
            await asyncio.wait(set(self._flights))

    def _fly(self) -> None:
        """A lane that sends what waits, batch after batch, until nothing does."""
        self._busy += 1
        flight = asyncio.get_running_loop().create_task(self._flush())
        self._flights.add(flight)
        flight.add_done_callback(self._flights.discard)

    async def _flush(self) -> None:
        batch: list[tuple[Sequence[Any], asyncio.Future[int]]] = []
        try:
            while self._waiting:
                batch = self._take()
                try:
                    await self._send(batch)
                except Exception as exc:  # noqa: BLE001 - a fault of this code: each write's answer
                    for _, answer in batch:
                        if not answer.done():
                            answer.set_exception(exc)
                batch = []
        finally:
            self._busy -= 1
            for _, answer in batch:  # this lane was cancelled with a batch in hand
                if not answer.done():
                    answer.set_exception(StorageUnavailable())
            if self._waiting and self._busy < GROUP_LANES:
                self._fly()

    def _take(self) -> list[tuple[Sequence[Any], asyncio.Future[int]]]:
        """The next batch: the writes waiting longest, up to `GROUP_MOST`, none of a row
        the batch has already (it waits for the next); those whose caller left, dropped."""
        waiting, key = self._waiting, self._batch.key
        batch: list[tuple[Sequence[Any], asyncio.Future[int]]] = []
        keys: set[Any] = set()
        later = []
        while waiting and len(batch) < GROUP_MOST:
            write = waiting.popleft()
            if write[1].done():  # cancelled while it waited: never sent
                continue
            if write[0][key] in keys:
                later.append(write)
                continue
            keys.add(write[0][key])
            batch.append(write)
        waiting.extendleft(reversed(later))
        return batch

    async def _send(self, batch: list[tuple[Sequence[Any], asyncio.Future[int]]]) -> None:
        if not batch:
            return
        if len(batch) == 1:
            await self._alone(batch)
            return
        matched = self._batch.matched
        self.batches += 1
        self.batched += len(batch)
        try:
            result = await execute_alone(
                self._pool, self._batch.statement, [values for values, _ in batch], many=True
            )
        except StorageUnavailable as exc:  # the outcome is unknown: it may have committed
            for _, answer in batch:
                if not answer.done():
                    answer.set_exception(_copy(exc))
            return
        except StorageError:  # refused whole, nothing committed: each on its own
            self.refused += 1
            await self._alone(batch)
            return
        won = None if matched is None else matched(result)
        key = self._batch.key
        for values, answer in batch:
            if not answer.done():
                answer.set_result(1 if won is None or values[key] in won else 0)

    async def _alone(self, batch: list[tuple[Sequence[Any], asyncio.Future[int]]]) -> None:
        """Each write of `batch` sent alone, in order (none of a caller that left)."""
        for values, answer in batch:
            if answer.done():  # its caller left: nothing of it was committed
                continue
            try:
                count = await execute_alone(self._pool, self._statement, values)
            except Exception as exc:  # noqa: BLE001 - that write's own answer
                if not answer.done():
                    answer.set_exception(exc)
                continue
            if not answer.done():
                answer.set_result(count)


def _copy(exc: StorageUnavailable) -> StorageUnavailable:
    """The same answer for each write of a batch: an exception of its own for each (one
    instance raised in many tasks would gather their tracebacks), with the cause kept."""
    fresh = type(exc)(exc.message)
    fresh.__cause__ = exc.__cause__
    return fresh


def _asyncpg_failure(exc: BaseException, driver: Any) -> tuple[BaseException, bool]:
    """The port's error for a driver's exception, and whether the connection may be broken."""
    import asyncpg

    broken = (
        asyncpg.PostgresConnectionError,
        asyncpg.InterfaceError,
        asyncpg.InternalClientError,  # the protocol lost its state (a dropped session)
        asyncpg.exceptions.OperatorInterventionError,  # admin shutdown, crash shutdown
        asyncpg.exceptions.InsufficientResourcesError,
        OSError,
        asyncio.TimeoutError,
    )
    if isinstance(exc, broken) or not _open(driver):
        return StorageUnavailable(), True
    return StorageError(), False


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
    connection (`_settled`: outside a transaction, no statement running) and the stores
    never change a session's settings; asyncpg's default (RESET ALL, UNLISTEN, CLOSE ALL,
    advisory unlocks) would cost a round trip per unit. SQLAlchemy's pool reset the same
    way (a ROLLBACK only when inside a transaction)."""


class DriverPool:
    """PostgreSQL: the connections of the stores' units (module rules), asyncpg's own pool.

    Sized by `size` (`WALLETCORE_DB_POOL_SIZE`): connections open on demand up to it and
    close after `IDLE_SECONDS` idle; past it a unit waits up to `timeout` seconds, then
    503.

    A connection given back settled is kept for the next unit (`_kept`, newest first)
    rather than returned to asyncpg's pool at once: asyncpg's checkout and return (its
    queue, a task to shield the return, a timer for the idle clock, the proxy) were about
    240 Python calls each, the largest single cost of a quote + approve (three checkouts;
    docs/performance.md, item 30). Kept connections are still checked out of asyncpg's
    pool, so its bound holds. Rules:
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
        self._groups: dict[int, GroupCommit] = {}

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

    def group(self, statement: Positional) -> GroupCommit:
        """The group commit of `statement` (which has a batch form) on this pool."""
        found = self._groups.get(id(statement))
        if found is None:
            found = self._groups[id(statement)] = GroupCommit(self, statement)
        return found

    def take_kept(self) -> Any:
        """The newest kept connection that is open (asyncpg's proxy of it), with no await;
        None when none is kept (`acquire` then waits for asyncpg's pool)."""
        kept = self._kept
        while kept:
            connection, _ = kept.pop()
            if _open(_raw(connection)):
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
        return _settled(_raw(connection)) and self.keep_answered(connection)

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
        if pool is None or not _settled(connection):
            _terminate(connection)
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
        _terminate(connection)
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


class PgReader:
    """A PostgreSQL read unit's connection (module rules): `await execute(statement,
    params)` like an `AsyncConnection` in autocommit mode."""

    __slots__ = ("_driver", "_fallback", "_pool", "_raw")

    def __init__(self, pool: DriverPool) -> None:
        self._pool = pool
        self._driver: Any = None  # the pooled asyncpg connection (its proxy), on first use
        self._raw: Any = None  # the connection behind that proxy (`_raw`): what is called
        self._fallback: AsyncConnection | None = None

    @property
    def dialect(self) -> Any:
        return self._pool.dialect

    @property
    def driver(self) -> Any:
        """The asyncpg connection the unit holds (None before its first statement)."""
        return self._driver

    async def execute(self, statement: Any, parameters: Mapping[str, Any] | None = None) -> Any:
        plan = _plan(statement, self._pool.dialect, parameters)
        if plan is None:
            return await self._through_sqlalchemy(statement, parameters)
        return await self._run(plan, parameters)

    async def _connection(self) -> Any:
        """The connection the unit's statements are sent on (`_raw` of the pooled one)."""
        raw = self._raw
        if raw is None:
            driver = self._pool.take_kept() or await self._pool.acquire()
            self._driver, raw = driver, _raw(driver)
            self._raw = raw
        return raw

    async def _guarded(
        self, driver: Any, operation: Callable[..., Awaitable[Any]], *arguments: Any
    ) -> Any:
        """`await operation(*arguments)`; a driver error as the port's error (`_failure`).
        Called inside: a connection whose session closed raises at the call itself."""
        try:
            return await operation(*arguments)
        except Exception as exc:
            raise await self._failure(exc, driver) from exc

    async def _failure(self, exc: Exception, driver: Any) -> BaseException:
        """The port's error for a driver error on `driver`; the connection dropped from the
        pool first when it may be broken."""
        failure, broken = _asyncpg_failure(exc, driver)
        if broken:
            await self._invalidate()
        return failure

    async def _run(self, plan: _Plan, parameters: Any) -> RawResult:
        raw = self._raw
        if raw is None:
            raw = await self._connection()
        if isinstance(parameters, Sequence):  # executemany (an upsert per row): no rows back
            if plan.returns_rows:
                raise RuntimeError("executemany of a statement that returns rows")
            batch = [plan.arguments(one) for one in parameters]
            await self._guarded(raw, raw.executemany, plan.sql, batch)
            return RawResult([], -1)
        arguments = plan.arguments(parameters or {})
        # The statement itself is awaited here, not through `_guarded`: one coroutine
        # fewer on every statement of every unit.
        try:
            if not plan.returns_rows:
                status = await raw.execute(plan.sql, *arguments)
                return RawResult([], _rowcount(status))
            if plan.processors is None:
                prepared = await raw.prepare(plan.sql)
                plan.learn_columns(
                    self._pool.dialect, [a.type.oid for a in prepared.get_attributes()]
                )
                records = await prepared.fetch(*arguments)
            else:
                records = await raw.fetch(plan.sql, *arguments)
        except Exception as exc:
            raise await self._failure(exc, raw) from exc
        return _result(plan, records)

    @property
    def in_transaction(self) -> bool:
        """A transaction is open on the unit's connection (`PgWriter`): `commit` or
        `rollback` has one to end. A read unit never has one."""
        return False

    async def commit(self) -> None:
        """A read unit takes no transaction: nothing to end (`PgWriter` has one)."""

    async def rollback(self) -> None:
        """A read unit takes no transaction: nothing to end (`PgWriter` has one)."""

    async def _through_sqlalchemy(self, statement: Any, parameters: Any) -> Any:
        with storage_errors():
            if self._fallback is None:
                conn = await self._pool.engine.connect()
                self._fallback = await conn.execution_options(isolation_level="AUTOCOMMIT")
            return await self._fallback.execute(statement, parameters)

    async def _invalidate(self) -> None:
        driver, self._driver, self._raw = self._driver, None, None
        if driver is not None:
            with contextlib.suppress(Exception):
                await self._pool.drop(driver)

    def close_kept(self) -> bool:
        """`close`, when it has nothing to await: no SQLAlchemy connection to close, and
        the pooled connection (if any) settled and kept for the next unit. False: `close`
        must run (it gives the connection back, or closes it, as it must)."""
        if self._fallback is not None:
            return False
        driver = self._driver
        if driver is not None:
            if not self._pool.keep_settled(driver):
                return False
            self._driver = self._raw = None
        return True

    async def close(self) -> None:
        driver, self._driver, self._raw = self._driver, None, None
        fallback, self._fallback = self._fallback, None
        try:
            if driver is not None:
                with storage_errors():
                    await self._pool.release(driver)
        finally:
            if fallback is not None:
                with storage_errors():
                    await fallback.close()


class PgWriter(PgReader):
    """A PostgreSQL write unit's connection (module rules): BEGIN at its first statement,
    or never (`execute_alone`: a unit of one statement is autocommitted, atomic on its
    own), COMMIT when the unit ends cleanly, ROLLBACK when it raises. Every statement must
    be one the raw path can send: a write unit never splits over two connections."""

    __slots__ = ("_alone", "_transaction")

    def __init__(self, pool: DriverPool) -> None:
        super().__init__(pool)
        self._transaction: Any = None
        self._alone = False

    async def execute(self, statement: Any, parameters: Mapping[str, Any] | None = None) -> Any:
        if self._alone:
            raise RuntimeError("a unit's statement alone was sent: nothing may follow it")
        plan = self._plan_of(statement, parameters)
        if self._transaction is None:
            raw = await self._connection()
            self._transaction = await self._guarded(raw, _begin, raw)
        return await self._run(plan, parameters)

    async def execute_alone(
        self, statement: Any, parameters: Mapping[str, Any] | None = None
    ) -> Any:
        """The last statement of the unit: autocommitted when it is the only one."""
        if self._transaction is not None:
            return await self.execute(statement, parameters)
        plan = self._plan_of(statement, parameters)
        self._alone = True
        return await self._run(plan, parameters)

    @property
    def in_transaction(self) -> bool:
        return self._transaction is not None

    def _plan_of(self, statement: Any, parameters: Mapping[str, Any] | None) -> _Plan:
        plan = _plan(statement, self._pool.dialect, parameters)
        if plan is None:
            raise RuntimeError(f"a write unit cannot send this statement raw: {statement}")
        return plan

    async def commit(self) -> None:
        transaction, self._transaction = self._transaction, None
        if transaction is not None:
            raw = self._raw
            if raw is None:  # dropped after a broken statement
                raise StorageUnavailable()
            await self._guarded(raw, transaction.commit)

    async def rollback(self) -> None:
        transaction, self._transaction = self._transaction, None
        raw = self._raw
        if transaction is not None and raw is not None:
            # A failed ROLLBACK never hides what made the unit roll back (an error, a
            # cancellation): the connection, still in its transaction or broken, is
            # dropped by `close`, never reused.
            with contextlib.suppress(StorageError, StorageUnavailable):
                await self._guarded(raw, transaction.rollback)


def _result(plan: _Plan, records: Sequence[Sequence[Any]]) -> RawResult:
    keys, processors = plan.keys, plan.processors
    assert processors is not None
    if not any(processors):
        return RawResult([dict(zip(keys, record, strict=True)) for record in records])
    return RawResult(
        [
            {
                key: value if process is None or value is None else process(value)
                for key, process, value in zip(keys, processors, record, strict=True)
            }
            for record in records
        ]
    )


class InlineRaw:
    """A SQLite unit of the stores (`Database.unit`) on the loop's pysqlite
    connection: the statements SQLAlchemy compiled for its SQLite dialect, with its bind
    and result processors, sent to the driver directly, inside the unit's transaction (or
    group commit savepoint) that SQLAlchemy opened. A statement the plan cannot send goes
    through the SQLAlchemy connection itself (the same connection)."""

    __slots__ = ("_dbapi", "_dialect", "sync")

    def __init__(self, sync: Any) -> None:
        self.sync = sync  # the SQLAlchemy `Connection`
        self._dialect = sync.dialect
        self._dbapi = driver_of(sync)

    @property
    def dialect(self) -> Any:
        return self._dialect

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        plan = _plan(statement, self._dialect, parameters)
        if plan is None:
            return self.sync.execute(statement, parameters)
        with storage_errors():
            if isinstance(parameters, Sequence):  # executemany
                batch = [plan.arguments(one) for one in parameters]
                self._dbapi.executemany(plan.sql, batch)
                return RawResult([], -1)
            cursor = self._dbapi.execute(plan.sql, plan.arguments(parameters or {}))
            if not plan.returns_rows:
                return RawResult([], cursor.rowcount)
            records = cursor.fetchall()
        if plan.processors is None:  # the driver reports no column types: as SQLAlchemy
            plan.learn_columns(self._dialect, [None] * len(plan.keys))
        return _result(plan, records)


def _settled(driver: Any) -> bool:
    """Fit to go back to the pool: open, outside a transaction, no statement running."""
    if not _open(driver) or driver.is_in_transaction():
        return False
    protocol = getattr(driver, "_protocol", None)
    cancelling = getattr(protocol, "_is_cancelling", None)
    return not (cancelling is not None and cancelling())


async def _begin(driver: Any) -> Any:
    transaction = driver.transaction()
    await transaction.start()
    return transaction


def _open(driver: Any) -> bool:
    """The connection is open (False too when its session closed and asyncpg's pool
    detached it from the proxy, whose every call then raises)."""
    try:
        return not driver.is_closed()
    except Exception:  # noqa: BLE001 - closed, and detached from the proxy by the pool
        return False


def _raw(connection: Any) -> Any:
    """The asyncpg `Connection` behind the pool's proxy `connection`, whose methods a unit
    calls directly: through the proxy, each call is a Python wrapper that checks the proxy
    is still attached, then looks the method up (about 15 a sell + approve). The proxy is
    what goes back to the pool (which detaches it then), and a unit calls nothing after
    giving it back. When the proxy is detached already (or holds its connection under
    another name), the proxy itself: its calls then raise as before."""
    con = getattr(connection, "_con", None)
    return connection if con is None else con


def _terminate(driver: Any) -> None:
    """Close the connection now (no-op when its session already closed and asyncpg
    detached it from the proxy)."""
    with contextlib.suppress(Exception):
        driver.terminate()


def _rowcount(status: str | None) -> int:
    """Rows a statement matched, from the server's command tag (as SQLAlchemy reads it)."""
    found = _COMMAND_TAG.match(status or "")
    return int(found.group(1)) if found else -1


_COMMAND_TAG = re.compile(r"(?:SELECT|UPDATE|DELETE|INSERT \d+) (\d+)")
