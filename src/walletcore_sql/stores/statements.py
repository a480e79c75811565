"""What the stores' statements share: named binds, the inserts a unit defers and the one
statement several of them make, and the dialect's upserts, each built once.

Statements are built once, at import, with named bind parameters, and executed with the
values as parameters: SQLAlchemy then reuses the compiled form without rebuilding the
statement or its cache key per call (that cost more than SQLite ran the statement).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from typing import Any

from sqlalchemy import Table, bindparam, insert

from walletcore_sql.database import Database
from walletcore_sql.tables import audit_log, events, trades


def bind(name: str) -> Any:
    """The named bind `b_<name>` of a store's statement (its value given by that name)."""
    return bindparam(f"b_{name}")


#: The plain INSERT of each table whose inserts a unit may defer.
INSERTS = {table.name: table.insert() for table in (trades, audit_log, events)}

#: A dialect's statement (an upsert), built by its builder on first use per dialect.
Upsert = Callable[[Database], Any]
_UPSERTS: dict[tuple[bool, Upsert], Any] = {}


def upsert(database: Database, build: Upsert) -> Any:
    """`build(database)`, built once per dialect (`Database.insert` is the dialect's)."""
    key = (database.is_sqlite, build)
    statement = _UPSERTS.get(key)
    if statement is None:
        statement = _UPSERTS[key] = build(database)
    return statement


async def insert_all(pending: list[tuple[Table, dict[str, Any]]], conn: Any) -> None:
    """Deferred inserts (`SqlUnit.take_pending`) on `conn`, one statement each, in order."""
    for table, values in pending:
        await conn.execute(INSERTS[table.name], values)


#: (table, its columns) of each deferred insert -> the one statement that makes them all
#: (None: a table comes twice), and the binds of their values, in order.
_COMBINED: dict[tuple[tuple[Table, tuple[str, ...]], ...], tuple[Any, list[str]]] = {}


def combined(pending: list[tuple[Table, dict[str, Any]]]) -> tuple[Any, dict[str, Any]]:
    """One PostgreSQL statement for several inserts (data-modifying CTEs), built once per
    shape (the tables and the names of their values, in order); (None, {}) when a table
    comes twice (the order of its rows would be lost).

    The parameters are the values of each insert in order, under the binds of the shape
    (`p<n>_<column>`), zipped in one call: a quote's 32 were renamed one by one before,
    and its shape checked for a repeated table each time (6.1 -> 2.9 us, alone)."""
    if len(pending) == 1:
        table, values = pending[0]
        return INSERTS[table.name], values
    shape = tuple([(table, tuple(values)) for table, values in pending])
    known = _COMBINED.get(shape)
    if known is None:
        known = _COMBINED[shape] = build_combined(pending)
    statement, binds = known
    if statement is None:
        return None, {}
    return statement, dict(zip(binds, chain.from_iterable([v.values() for _, v in pending])))


def build_combined(pending: list[tuple[Table, dict[str, Any]]]) -> tuple[Any, list[str]]:
    """`combined`'s statement for the shape of `pending` (None when a table comes twice)
    and its binds, in the order of the values."""
    names = [table.name for table, _ in pending]
    if len(set(names)) != len(names):
        return None, []

    def insert_of(n: int, table: Table, keys: Any) -> Any:
        return insert(table).values(
            {key: bindparam(f"p{n}_{key}", type_=table.c[key].type) for key in sorted(keys)}
        )

    *first, last = list(enumerate(pending))
    statement = insert_of(last[0], last[1][0], last[1][1])
    for n, (table, values) in first:
        statement = statement.add_cte(insert_of(n, table, values).cte(f"w{n}"))
    binds = [f"p{n}_{key}" for n, (_, values) in enumerate(pending) for key in values]
    return statement, binds
