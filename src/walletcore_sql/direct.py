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
- PostgreSQL (`PgReader`, `PgWriter`): the connection comes from (and goes back to) the
  engine's pool, so pool size, recycling and reset on return are unchanged, and asyncpg's
  own prepared-statement cache serves it. A read unit takes no transaction; a write unit
  begins one at its first statement, or never (a unit of one statement is autocommitted).
  A connection left inside a transaction or a cancelled statement is dropped, never
  pooled. A driver error leaves as the port's `StorageUnavailable` (503; the pool is
  invalidated when the session may be broken) or `StorageError` (500), as
  `storage_errors` does. A read it cannot send as is (an expanding `IN`, escaped bind
  names) goes through SQLAlchemy on a connection of the same pool; a write unit refuses
  it (its statements never split over two connections).
- SQLite (`InlineRaw`): the pysqlite connection of the unit, inside the transaction (or
  group-commit savepoint) SQLAlchemy opened for it; what the plan cannot send goes
  through that SQLAlchemy connection.

Everything else (nonce leases, migrations, health checks) uses SQLAlchemy as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.util import greenlet_spawn

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

    __slots__ = ("binds", "compiled", "keys", "processors", "sql", "statement")

    def __init__(self, statement: Any, compiled: Any) -> None:
        self.statement = statement  # held: the cache key is its id
        self.compiled = compiled
        self.sql: str = compiled.string
        processors = compiled._bind_processors
        self.binds: list[tuple[str, Processor]] = [
            (name, processors.get(name)) for name in (compiled.positiontup or ())
        ]
        self.keys: tuple[str, ...] = tuple(c.keyname for c in compiled._result_columns)
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

    @property
    def returns_rows(self) -> bool:
        return bool(self.keys)

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
    it, for the columns its parameters name (a column left out keeps its default)."""
    if isinstance(parameters, Sequence):  # executemany: each set names the same columns
        parameters = parameters[0] if parameters else None
    columns = tuple(sorted(parameters)) if parameters and statement.is_dml else ()
    key = (id(statement), id(dialect), columns)
    try:
        return _PLANS[key]
    except KeyError:
        pass
    if columns:
        compiled = statement.compile(dialect=dialect, column_keys=list(columns))
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
    if isinstance(exc, broken) or driver.is_closed():
        return StorageUnavailable(), True
    return StorageError(), False


class PgReader:
    """A PostgreSQL read unit's connection (module rules): `await execute(statement,
    params)` like an `AsyncConnection` in autocommit mode."""

    __slots__ = ("_engine", "_fairy", "_fallback")

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._fairy: Any = None  # the pooled DBAPI connection, on first use
        self._fallback: AsyncConnection | None = None

    @property
    def dialect(self) -> Any:
        return self._engine.dialect

    async def execute(self, statement: Any, parameters: Mapping[str, Any] | None = None) -> Any:
        plan = _plan(statement, self._engine.dialect, parameters)
        if plan is None:
            return await self._through_sqlalchemy(statement, parameters)
        return await self._run(plan, parameters)

    async def _driver(self) -> Any:
        if self._fairy is None:
            with storage_errors():
                self._fairy = await self._engine.raw_connection()
        return self._fairy.driver_connection

    async def _guarded(self, driver: Any, operation: Awaitable[Any]) -> Any:
        """`operation`'s result; a driver error as the port's error (the connection
        dropped from the pool when it may be broken)."""
        try:
            return await operation
        except Exception as exc:
            failure, broken = _asyncpg_failure(exc, driver)
            if broken:
                await self._invalidate(exc)
            raise failure from exc

    async def _run(self, plan: _Plan, parameters: Any) -> RawResult:
        driver = await self._driver()
        if isinstance(parameters, Sequence):  # executemany (an upsert per row): no rows back
            if plan.returns_rows:
                raise RuntimeError("executemany of a statement that returns rows")
            batch = [plan.arguments(one) for one in parameters]
            await self._guarded(driver, driver.executemany(plan.sql, batch))
            return RawResult([], -1)
        arguments = plan.arguments(parameters or {})
        if not plan.returns_rows:
            status = await self._guarded(driver, driver.execute(plan.sql, *arguments))
            return RawResult([], _rowcount(status))
        if plan.processors is None:
            prepared = await self._guarded(driver, driver.prepare(plan.sql))
            plan.learn_columns(
                self._engine.dialect, [a.type.oid for a in prepared.get_attributes()]
            )
            records = await self._guarded(driver, prepared.fetch(*arguments))
        else:
            records = await self._guarded(driver, driver.fetch(plan.sql, *arguments))
        return _result(plan, records)

    async def commit(self) -> None:
        """A read unit takes no transaction: nothing to end (`PgWriter` has one)."""

    async def rollback(self) -> None:
        """A read unit takes no transaction: nothing to end (`PgWriter` has one)."""

    async def _through_sqlalchemy(self, statement: Any, parameters: Any) -> Any:
        with storage_errors():
            if self._fallback is None:
                conn = await self._engine.connect()
                self._fallback = await conn.execution_options(isolation_level="AUTOCOMMIT")
            return await self._fallback.execute(statement, parameters)

    async def _invalidate(self, exc: BaseException) -> None:
        fairy, self._fairy = self._fairy, None
        if fairy is not None:
            with storage_errors(), contextlib.suppress(Exception):
                await greenlet_spawn(self._drop, fairy, exc)

    def _drop(self, fairy: Any, exc: BaseException) -> None:
        pool = self._engine.sync_engine.pool
        try:
            # as SQLAlchemy does on a disconnect: every older pooled connection is
            # replaced on its next checkout, not only this one
            pool._invalidate(fairy, exc)
        except Exception:  # noqa: BLE001 - the connection alone, then
            fairy.invalidate(exc)
        fairy.close()

    async def close(self) -> None:
        fairy, self._fairy = self._fairy, None
        fallback, self._fallback = self._fallback, None
        with storage_errors():
            if fairy is not None:
                if _settled(fairy.driver_connection):
                    await greenlet_spawn(fairy.close)  # back to the pool (reset on return)
                else:  # a transaction or a statement still open on it: never reused
                    self._fairy = fairy
                    await self._invalidate(RuntimeError("closed while in use"))
            if fallback is not None:
                await fallback.close()


class PgWriter(PgReader):
    """A PostgreSQL write unit's connection (module rules): BEGIN at its first statement,
    or never (`execute_alone`: a unit of one statement is autocommitted, atomic on its
    own), COMMIT when the unit ends cleanly, ROLLBACK when it raises. Every statement must
    be one the raw path can send: a write unit never splits over two connections."""

    __slots__ = ("_alone", "_transaction")

    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        self._transaction: Any = None
        self._alone = False

    async def execute(self, statement: Any, parameters: Mapping[str, Any] | None = None) -> Any:
        if self._alone:
            raise RuntimeError("a unit's statement alone was sent: nothing may follow it")
        plan = self._plan_of(statement, parameters)
        if self._transaction is None:
            driver = await self._driver()
            transaction = driver.transaction()
            await self._guarded(driver, transaction.start())
            self._transaction = transaction
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

    def _plan_of(self, statement: Any, parameters: Mapping[str, Any] | None) -> _Plan:
        plan = _plan(statement, self._engine.dialect, parameters)
        if plan is None:
            raise RuntimeError(f"a write unit cannot send this statement raw: {statement}")
        return plan

    async def commit(self) -> None:
        transaction, self._transaction = self._transaction, None
        if transaction is not None:
            if self._fairy is None:  # dropped after a broken statement
                raise StorageUnavailable()
            driver = self._fairy.driver_connection
            await self._guarded(driver, transaction.commit())

    async def rollback(self) -> None:
        transaction, self._transaction = self._transaction, None
        if transaction is not None and self._fairy is not None:
            driver = self._fairy.driver_connection
            # A failed ROLLBACK never hides what made the unit roll back (an error, a
            # cancellation): the connection, still in its transaction or broken, is
            # dropped by `close`, never reused.
            with contextlib.suppress(StorageError, StorageUnavailable):
                await self._guarded(driver, transaction.rollback())


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
    if driver.is_closed() or driver.is_in_transaction():
        return False
    protocol = getattr(driver, "_protocol", None)
    cancelling = getattr(protocol, "_is_cancelling", None)
    return not (cancelling is not None and cancelling())


def _rowcount(status: str | None) -> int:
    """Rows a statement matched, from the server's command tag (as SQLAlchemy reads it)."""
    found = _COMMAND_TAG.match(status or "")
    return int(found.group(1)) if found else -1


_COMMAND_TAG = re.compile(r"(?:SELECT|UPDATE|DELETE|INSERT \d+) (\d+)")
