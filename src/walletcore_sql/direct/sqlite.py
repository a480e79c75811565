"""SQLite: the stores' statements sent to the unit's pysqlite connection directly (`InlineRaw`).

The statements SQLAlchemy compiled for its SQLite dialect, with its bind and result
processors, inside the unit's transaction (or group-commit savepoint) that SQLAlchemy
opened (`walletcore_sql.database.sqlite`); what a plan cannot send goes through the
SQLAlchemy connection itself (the same connection).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from walletcore_sql.direct.plans import plan_of
from walletcore_sql.direct.results import RawResult, result_of
from walletcore_sql.engine import driver_of
from walletcore_sql.errors import storage_errors


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
        plan = plan_of(statement, self._dialect, parameters)
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
        return result_of(plan, records)
