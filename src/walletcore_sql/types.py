"""Column types that keep money and on-chain amounts exact and datetimes UTC on both
PostgreSQL and SQLite, and the feed's transaction id (`current_tx`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal, localcontext
from typing import Any, TypeVar

from sqlalchemy import BigInteger, DateTime, Numeric, String
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.functions import FunctionElement, GenericFunction
from sqlalchemy.types import TypeDecorator, TypeEngine

from walletcore.domain.money import KEPT_PLACES, keep_places
from walletcore.domain.times import utc

T = TypeVar("T")

#: Places kept after the point: the most any asset has (ETH, BNB, POL...), the domain's own.
MONEY_SCALE = KEPT_PLACES
#: Total digits: 60 before the point, more than any amount the parser accepts.
MONEY_PRECISION = 78
#: Widest text a money value takes on SQLite (digits, point, sign).
MONEY_TEXT_LENGTH = MONEY_PRECISION + 2


def trim_money(value: Decimal) -> Decimal:
    """Without trailing zeros after the point (and never in exponent form when printed)."""
    with localcontext() as ctx:
        ctx.prec = MONEY_PRECISION + 10
        if value == value.to_integral_value():
            return value.quantize(Decimal(1))
        return value.normalize()


class trimmed_money(GenericFunction[Decimal]):
    """A money column read without the zeros NUMERIC(78, 18) pads it with.

    PostgreSQL (13+) trims on the server (`trim_scale`), so reads cost no Python work;
    SQLite returns the text as written.
    """

    inherit_cache = True
    name = "trimmed_money"


@compiles(trimmed_money)
def _trimmed_money_default(element: trimmed_money, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(element.clauses, **kw)


@compiles(trimmed_money, "postgresql")
def _trimmed_money_pg(element: trimmed_money, compiler: SQLCompiler, **kw: Any) -> str:
    return f"trim_scale({compiler.process(element.clauses, **kw)})"


# -- the bind rules, one function per dialect ----------------------------------------------
def _money_exact(value: Decimal | None) -> Decimal | None:
    """PostgreSQL: the amount cut (never rounded) to the column's places, toward zero
    (NUMERIC would round the rest): the domain's own cut, `keep_places` (MONEY_SCALE is
    KEPT_PLACES), which refuses a value that is not finite. Amounts of assets and fiats
    never have more places; a derived fiat amount or a price may, and cutting it here
    changes no wire value (those are cut to 6 places anyway)."""
    if value is None:
        return None
    if not isinstance(value, Decimal):
        raise TypeError(f"money must be a Decimal, not {type(value).__name__}")
    return keep_places(value)


def _money_text(value: Decimal | None) -> str | None:
    """SQLite: the cut amount as its exact text, trimmed once here and read back as is."""
    cut = _money_exact(value)
    return None if cut is None else format(trim_money(cut), "f")


def _utc_aware(value: datetime | None) -> datetime | None:
    """PostgreSQL: the aware UTC instant."""
    if value is None or value.tzinfo is UTC:
        return value
    return utc(value)


def _utc_naive(value: datetime | None) -> datetime | None:
    """SQLite: fixed-width text without an offset, so it sorts and compares as time does."""
    if value is None:
        return None
    return utc(value).replace(tzinfo=None)


class _BoundByRule(TypeDecorator[T]):
    """A column type that binds a value with one function per database (`_rules`:
    PostgreSQL's, SQLite's), composed with the inner type's processor as
    `TypeDecorator.bind_processor` composes them: one Python call per value fewer, two for a null
    (docs/performance.md, "Fewer Python calls per request"). `process_bind_param` applies the same
    rule for SQLAlchemy's other uses."""

    #: (PostgreSQL's rule, SQLite's rule)
    _rules: tuple[Callable[[Any], Any], Callable[[Any], Any]]

    def _rule(self, dialect: Dialect) -> Callable[[Any], Any]:
        return self._rules[dialect.name == "sqlite"]

    def process_bind_param(self, value: T | None, dialect: Dialect) -> Any:
        return self._rule(dialect)(value)

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        rule, inner = self._rule(dialect), self.impl_instance.bind_processor(dialect)
        if inner is None:
            return rule

        def process(value: Any) -> Any:
            return inner(rule(value))

        return process


class Money(_BoundByRule[Decimal]):
    """NUMERIC(78, 18) on PostgreSQL; exact decimal text on SQLite.

    SQLite has no decimal type: a NUMERIC column there may turn a value into a float, so
    money is kept as its decimal string (TEXT affinity) and parsed back exactly.
    """

    impl = Numeric(MONEY_PRECISION, MONEY_SCALE, asdecimal=True)
    cache_ok = True
    _rules = (_money_exact, _money_text)

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(String(MONEY_TEXT_LENGTH))
        return dialect.type_descriptor(Numeric(MONEY_PRECISION, MONEY_SCALE, asdecimal=True))

    def column_expression(self, colexpr: ColumnElement[Any]) -> ColumnElement[Any]:
        return trimmed_money(colexpr, type_=self)

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        if isinstance(value, Decimal):  # PostgreSQL, trimmed by the server
            return value
        if isinstance(value, str):  # SQLite: the exact text written
            return Decimal(value)
        raise TypeError(f"a money column returned a {type(value).__name__}")  # a float: refuse


class UTCDateTime(_BoundByRule[datetime]):
    """TIMESTAMP WITH TIME ZONE on PostgreSQL; UTC text on SQLite. Reads are aware UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True
    _rules = (_utc_aware, _utc_naive)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is UTC:  # asyncpg's timestamptz
            return value
        if value.tzinfo is None:  # SQLite's text, written as UTC
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


#: Digits of an amount in base units: any unsigned 256-bit integer (an ERC-20 balance).
UNITS_PRECISION = 78


def _units_exact(value: int | None) -> Decimal | None:
    """PostgreSQL: the integer as a `Decimal` (NUMERIC(78, 0)), refused unless it is one."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"an amount in base units must be an int, not {type(value).__name__}")
    return Decimal(value)


def _units_text(value: int | None) -> str | None:
    """SQLite: the integer's decimal text (an INTEGER column holds 64 bits, a REAL would
    round), read back exactly."""
    exact = _units_exact(value)
    return None if exact is None else str(exact)


class Units(_BoundByRule[int]):
    """An exact integer amount in base units, which may exceed 2^63 (wei, token units):
    NUMERIC(78, 0) on PostgreSQL, its decimal text on SQLite. Reads are `int`."""

    impl = Numeric(UNITS_PRECISION, 0, asdecimal=True)
    cache_ok = True
    _rules = (_units_exact, _units_text)

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(String(UNITS_PRECISION + 1))
        return dialect.type_descriptor(Numeric(UNITS_PRECISION, 0, asdecimal=True))

    def process_result_value(self, value: Any, dialect: Dialect) -> int | None:
        if value is None:
            return None
        if isinstance(value, Decimal | str):  # PostgreSQL's NUMERIC, SQLite's text
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeError(f"an amount column returned a {type(value).__name__}")


class current_tx(FunctionElement[int]):
    """The writing transaction's id, as the event feed orders by it (`events.tx`'s
    default): PostgreSQL's `pg_current_xact_id()` (an `xid8`: epoch and xid, 64 bits, in
    a BIGINT as long as the epoch stays under 2^31: never, in practice); 0 on SQLite,
    whose writes are serial (docs/storage.md, "The event feed")."""

    type = BigInteger()
    inherit_cache = True
    name = "current_tx"


@compiles(current_tx)
def _current_tx_default(element: current_tx, compiler: SQLCompiler, **kw: Any) -> str:
    return "0"


@compiles(current_tx, "postgresql")
def _current_tx_pg(element: current_tx, compiler: SQLCompiler, **kw: Any) -> str:
    return "(pg_current_xact_id()::text::bigint)"


class feed_horizon(FunctionElement[int]):
    """The lowest transaction id still running when the statement's snapshot was taken
    (PostgreSQL: `pg_snapshot_xmin(pg_current_snapshot())`): every transaction below it
    has ended, so no event can still appear below it. The event feed reads only below it
    (`SqlEvents.after`). Not compiled elsewhere: SQLite's feed needs no horizon."""

    type = BigInteger()
    inherit_cache = True
    name = "feed_horizon"


@compiles(feed_horizon, "postgresql")
def _feed_horizon_pg(element: feed_horizon, compiler: SQLCompiler, **kw: Any) -> str:
    return "(pg_snapshot_xmin(pg_current_snapshot())::text::bigint)"
