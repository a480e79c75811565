"""PostgreSQL read units straight on asyncpg: the statement SQLAlchemy compiled, without its
execution machinery.

A read unit on PostgreSQL takes no transaction: each of its reads is one autocommitted
SELECT. Sent through SQLAlchemy's async engine, one such read of ten trades cost ~300 µs of
Python over the ~100 µs asyncpg itself takes (a `Connection` with its event dispatch, the
execution context, the greenlet hop, the cursor emulation, the result proxy;
docs/performance.md, item 17). `PgReader` keeps what matters of SQLAlchemy and drops the
rest:

- the SQL is SQLAlchemy's own compilation of the stores' statements for the engine's
  asyncpg dialect (casts, `trimmed_money`, named binds in order), made once per statement;
- the parameters go through the same bind processors, the rows through the same result
  processors (picked, as SQLAlchemy picks them, by the column's PostgreSQL type);
- the connection comes from (and goes back to) the engine's pool, so pool size, recycling
  and reset on return are unchanged; asyncpg's own prepared-statement cache serves it;
- a driver error leaves as the port's `StorageUnavailable` (503; the connection is
  invalidated when it may be broken) or `StorageError` (500), as `storage_errors` does.

A statement it cannot send as is (an expanding `IN`, escaped bind names) goes through
SQLAlchemy on a connection of the same pool.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.util import greenlet_spawn

from walletcore.domain.errors import StorageError, StorageUnavailable
from walletcore_sql.errors import storage_errors

Processor = Callable[[Any], Any] | None

#: Statements compiled for the raw path (the stores' module-level statements: a few dozen).
#: Entries hold their statement, so an id is never reused while cached; past the bound a
#: statement is sent through SQLAlchemy instead.
_PLANS: dict[tuple[int, int], _Plan | None] = {}
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
        values = self.compiled.construct_params(parameters, _check=False)
        out = []
        for name, process in self.binds:
            value = values[name]
            out.append(value if process is None else process(value))
        return out

    def learn_columns(self, dialect: Any, type_oids: Sequence[int]) -> None:
        columns = self.compiled._result_columns
        self.processors = [
            column.type._cached_result_processor(dialect, oid)
            for column, oid in zip(columns, type_oids, strict=True)
        ]


def _plan(statement: Any, dialect: Any) -> _Plan | None:
    key = (id(statement), id(dialect))
    try:
        return _PLANS[key]
    except KeyError:
        pass
    compiled = statement.compile(dialect=dialect)
    sendable = (
        compiled.positiontup is not None
        and not compiled.escaped_bind_names
        and "POSTCOMPILE" not in compiled.string
        and bool(compiled._result_columns)
    )
    plan = _Plan(statement, compiled) if sendable else None
    if len(_PLANS) < _PLANS_MAX:
        _PLANS[key] = plan
    return plan


class RawResult:
    """What the stores read of a result: `mappings().one_or_none()` / `.all()`, scalars."""

    __slots__ = ("_rows",)

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self._rows = rows

    @property
    def rowcount(self) -> int:
        return len(self._rows)

    def mappings(self) -> RawResult:
        return self

    def all(self) -> list[dict[str, Any]]:
        return self._rows

    def first(self) -> dict[str, Any] | None:
        return self._rows[0] if self._rows else None

    def one_or_none(self) -> dict[str, Any] | None:
        if len(self._rows) > 1:
            raise sa_exc.MultipleResultsFound("more than one row where one or none was required")
        return self.first()

    def one(self) -> dict[str, Any]:
        if len(self._rows) != 1:
            raise (sa_exc.NoResultFound if not self._rows else sa_exc.MultipleResultsFound)(
                "Exactly one row was required"
            )
        return self._rows[0]

    def scalar_one_or_none(self) -> Any:
        row = self.one_or_none()
        return None if row is None else next(iter(row.values()))

    def scalar(self) -> Any:
        row = self.first()
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
        dialect = self._engine.dialect
        plan = _plan(statement, dialect)
        if plan is None:
            return await self._through_sqlalchemy(statement, parameters)
        arguments = plan.arguments(parameters or {})
        if self._fairy is None:
            with storage_errors():
                self._fairy = await self._engine.raw_connection()
        driver = self._fairy.driver_connection
        try:
            if plan.processors is None:
                prepared = await driver.prepare(plan.sql)
                plan.learn_columns(dialect, [a.type.oid for a in prepared.get_attributes()])
                records = await prepared.fetch(*arguments)
            else:
                records = await driver.fetch(plan.sql, *arguments)
        except Exception as exc:
            failure, broken = _asyncpg_failure(exc, driver)
            if broken:
                await self._invalidate(exc)
            raise failure from exc
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
                await greenlet_spawn(fairy.close)  # back to the pool (reset on return)
            if fallback is not None:
                await fallback.close()
