"""PostgreSQL: the stores' units of work on asyncpg (`PgReader`, `PgWriter`), and a write
unit of one statement in one coroutine (`execute_alone`).

A read unit takes no transaction; a write unit begins one at its first statement, or
never (a unit of one statement is autocommitted, atomic on its own). The connection comes
from the units' pool (`walletcore_sql.direct.pool`); one left inside a transaction or a
cancelled statement is closed, never pooled. A driver error leaves as the port's
(`walletcore_sql.errors.port_error`; every pooled connection is replaced when the session
may be broken). A read it cannot send as is (an expanding `IN`, escaped bind names) goes
through SQLAlchemy, on a connection of the engine's own pool; a write unit refuses it
(its statements never split over two connections).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from walletcore.domain.errors import StorageError, StorageUnavailable
from walletcore_sql.direct.plans import Plan, Positional, plan_of
from walletcore_sql.direct.pool import DriverPool, is_open, raw_of
from walletcore_sql.direct.results import RawResult, result_of, rowcount
from walletcore_sql.errors import port_error, storage_errors


async def execute_alone(
    pool: DriverPool, statement: Positional, values: Sequence[Any], *, many: bool = False
) -> Any:
    """A write unit of one statement, autocommitted (atomic on its own), on a pooled
    connection, its values in `statement.names` order; the rows it matched (the command
    tag's count). With `many`, `values` is a list of such value sets, sent as a `Batch`
    (`PgGroupCommit`): the statement once per set, pipelined, in one implicit transaction;
    the rows they returned (asyncpg's records, unprocessed).

    What `PgWriter.execute_alone` does in a unit, in one coroutine: the plan found by the
    dialect alone, the arguments in the plan's order with their processors, and a
    connection that answered the statement kept as it is (it is open, and outside a
    transaction: no BEGIN was sent), with no check of its state. A failure or a
    cancellation goes the unit's way (`PgWriter`): the port's error, the connection
    dropped when it may be broken, else given back (closed first when not settled)."""
    plan, order = statement.plan(pool.dialect)
    if many:
        batch = [statement.arguments(order, one) for one in values]
    else:
        arguments = statement.arguments(order, values)
    driver = pool.take_kept() or await pool.acquire()
    raw = raw_of(driver)
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
    return status if many else rowcount(status)


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
        plan = plan_of(statement, self._pool.dialect, parameters)
        if plan is None:
            return await self._through_sqlalchemy(statement, parameters)
        return await self._run(plan, parameters)

    async def _connection(self) -> Any:
        """The connection the unit's statements are sent on (`_raw` of the pooled one)."""
        raw = self._raw
        if raw is None:
            driver = self._pool.take_kept() or await self._pool.acquire()
            self._driver, raw = driver, raw_of(driver)
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
        failure, broken = _port_failure(exc, driver)
        if broken:
            await self._invalidate()
        return failure

    async def _run(self, plan: Plan, parameters: Any) -> RawResult:
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
                return RawResult([], rowcount(status))
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
        return result_of(plan, records)

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

    def _plan_of(self, statement: Any, parameters: Mapping[str, Any] | None) -> Plan:
        plan = plan_of(statement, self._pool.dialect, parameters)
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


async def _begin(driver: Any) -> Any:
    transaction = driver.transaction()
    await transaction.start()
    return transaction


def _port_failure(exc: Exception, driver: Any) -> tuple[BaseException, bool]:
    """The port's error for an exception a call on `driver` raised (any of them is the
    driver's), and whether the connection may be broken: a transient error, or a
    connection that closed."""
    failure = port_error(exc)
    if isinstance(failure, StorageUnavailable) or not is_open(driver):
        return StorageUnavailable(), True
    return failure or StorageError(), False
