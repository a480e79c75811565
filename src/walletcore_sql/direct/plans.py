"""Statement plans: the stores' statements as SQLAlchemy compiled them, ready for the driver.

A plan holds a statement's SQL for one dialect, how to order and process its parameters
(SQLAlchemy's bind processors, picked by the column's type) and, after its first run, how
to process each column of its rows (the result processors). `Positional` is a statement
sent with its values in a fixed order, and `Batch` how such a statement's value sets are
sent many at once (group commit, `walletcore_sql.direct.group`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

Processor = Callable[[Any], Any] | None

#: Statements compiled for the raw path (the stores' module-level statements: a few dozen).
#: Entries hold their statement, so an id is never reused while cached; past the bound a
#: statement is sent through SQLAlchemy instead.
_PLANS: dict[tuple[int, int, tuple[str, ...]], Plan | None] = {}
_PLANS_MAX = 512


class Plan:
    """One statement compiled for the driver: its SQL, how to order and process its
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


def plan_of(
    statement: Any, dialect: Any, parameters: Mapping[str, Any] | None = None
) -> Plan | None:
    """The plan of `statement`; an INSERT or UPDATE is compiled, as SQLAlchemy compiles
    it, for the columns its parameters name (a column left out keeps its default). None:
    a statement the driver cannot be sent as is (an expanding `IN`, escaped bind names).

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
    plan = Plan(statement, compiled) if sendable else None
    if len(_PLANS) < _PLANS_MAX:
        _PLANS[key] = plan
    return plan


class Positional:
    """One of the stores' statements sent with its values in a fixed order (`names`, each
    bind's name): its plan looked up once per dialect, with each bind's value index and
    processor, so a call builds no dict of parameters and looks none up by name
    (`execute_alone`; docs/performance.md, "The stores on the driver")."""

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
        self._bound: dict[int, tuple[Any, Plan, list[tuple[int, Processor]]]] = {}

    def plan(self, dialect: Any) -> tuple[Plan, list[tuple[int, Processor]]]:
        known = self._bound.get(id(dialect))
        if known is None:
            plan = plan_of(self.statement, dialect, dict.fromkeys(self.names))
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

    def arguments(self, order: list[tuple[int, Processor]], values: Sequence[Any]) -> list[Any]:
        """The driver's arguments for `values` (in `names` order): in the plan's order
        (`order`, from `plan`), each through its bind processor."""
        self.check(values)
        return [values[n] if process is None else process(values[n]) for n, process in order]

    def parameters(self, values: Sequence[Any]) -> dict[str, Any]:
        """The values by bind name: the statement as a unit's `execute` takes it."""
        return dict(zip(self.names, values, strict=True))


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
