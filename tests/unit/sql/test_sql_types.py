"""The money and UTC column types bind each value with one function of the dialect
(docs/performance.md, "Fewer Python calls per request"): the very values their former
`process_bind_param` (written out here) gave through SQLAlchemy's composition with the
inner type's processor, on PostgreSQL (asyncpg) and SQLite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import ROUND_DOWN, Context, Decimal, localcontext
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from sqlalchemy.dialects import sqlite
from sqlalchemy.dialects.postgresql import asyncpg
from sqlalchemy.types import TypeDecorator

from walletcore_sql.types import Money, Units, UTCDateTime

DIALECTS = (asyncpg.dialect(), sqlite.dialect())
DECIMALS = st.decimals(allow_nan=False, allow_infinity=False, places=None).filter(
    lambda d: abs(d) < Decimal(10) ** 55
)
ZONES = st.sampled_from(
    [None, UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
)
INSTANTS = st.builds(
    lambda at, zone: at.replace(tzinfo=zone),
    st.datetimes(min_value=datetime(1971, 1, 2), max_value=datetime(9998, 12, 30)),
    ZONES,
)


def former_money(value: Any, dialect: Any) -> Any:
    """`Money.process_bind_param` as it was before the one-function bind."""
    if value is None:
        return None
    if not isinstance(value, Decimal):
        raise TypeError(f"money must be a Decimal, not {type(value).__name__}")
    if not value.is_finite():
        raise ValueError("a money column holds finite values only")
    if value.as_tuple().exponent < -18:  # type: ignore[operator]
        value = value.quantize(Decimal("1E-18"), ROUND_DOWN, Context(prec=100))
    if dialect.name == "sqlite":
        with localcontext() as ctx:
            ctx.prec = 88
            trimmed = (
                value.quantize(Decimal(1))
                if value == value.to_integral_value()
                else value.normalize()
            )
        return format(trimmed, "f")
    return value


def former_utc(value: Any, dialect: Any) -> Any:
    """`UTCDateTime.process_bind_param` as it was before the one-function bind."""
    if value is None:
        return None
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return aware.replace(tzinfo=None) if dialect.name == "sqlite" else aware


FORMER = {Money: former_money, UTCDateTime: former_utc}


def processors(column_type: TypeDecorator[Any], dialect: Any) -> tuple[Any, Any]:
    """(ours, the former rule composed as SQLAlchemy composes it) for the type adapted to
    the dialect."""
    adapted = column_type.dialect_impl(dialect)
    inner = adapted.impl_instance.bind_processor(dialect)
    rule = FORMER[type(column_type)]

    def former(value: Any) -> Any:
        ruled = rule(value, dialect)
        return ruled if inner is None else inner(ruled)

    return adapted.bind_processor(dialect), former


def same(ours: Any, theirs: Any) -> bool:
    return type(ours) is type(theirs) and ours == theirs and str(ours) == str(theirs)


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
@given(value=DECIMALS)
@example(value=Decimal("1.0000000000000000009"))
@example(value=Decimal("-0.0000000000000000001"))
@example(value=Decimal("100.500"))
@example(value=Decimal("1.0000000000000000000"))  # zeros past the 18th place
def test_money_binds_as_sqlalchemy_composes_it(dialect: Any, value: Decimal) -> None:
    """The same value in the same form (zeros past the 18th place cut too: a form can
    reach a message, such as a venue's refusal naming the amount)."""
    ours, theirs = processors(Money(), dialect)
    assert same(ours(value), theirs(value))


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
@given(value=INSTANTS)
def test_utc_binds_as_sqlalchemy_composes_it(dialect: Any, value: datetime) -> None:
    ours, theirs = processors(UTCDateTime(), dialect)
    assert same(ours(value), theirs(value))


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
def test_none_binds_as_null(dialect: Any) -> None:
    for column_type in (Money(), UTCDateTime()):
        ours, _ = processors(column_type, dialect)
        assert ours(None) is None


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
def test_process_bind_param_is_the_same_rule(dialect: Any) -> None:
    """SQLAlchemy's other users of a type (literal rendering, its own composition) get the
    rule the bind processor applies."""
    amount = Decimal("2.50000000000000000099")
    at = datetime(2026, 11, 28, 3, 0, tzinfo=timezone(timedelta(hours=2)))
    for column_type, value in ((Money(), amount), (UTCDateTime(), at)):
        adapted = column_type.dialect_impl(dialect)
        ours, former = processors(column_type, dialect)
        composed = TypeDecorator.bind_processor(adapted, dialect)
        assert same(composed(value), former(value)) and same(ours(value), former(value))


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
@pytest.mark.parametrize(
    ("value", "error"),
    [
        (1.5, TypeError),  # a float is never money
        ("1.5", TypeError),
        (Decimal("NaN"), ValueError),
        (Decimal("Infinity"), ValueError),
    ],
)
def test_money_refuses_what_is_not_a_finite_decimal(
    dialect: Any, value: object, error: type[Exception]
) -> None:
    ours, theirs = processors(Money(), dialect)
    with pytest.raises(error):
        ours(value)
    with pytest.raises(error):
        theirs(value)


def test_postgresql_cuts_toward_zero_and_keeps_an_aware_instant() -> None:
    """What NUMERIC(78, 18) and TIMESTAMPTZ are given: never rounded, never naive."""
    dialect = asyncpg.dialect()
    money, _ = processors(Money(), dialect)
    instant, _ = processors(UTCDateTime(), dialect)
    assert money(Decimal("0.1234567890123456789")) == Decimal("0.123456789012345678")
    at = datetime(2026, 11, 28, 3, 0, tzinfo=timezone(timedelta(hours=2)))
    assert instant(at) == at and instant(at).tzinfo is UTC
    utc_at = datetime(2026, 11, 28, tzinfo=UTC)
    assert instant(utc_at) is utc_at


# -- exact amounts in base units (`Units`: deposits) ----------------------------------------
@given(st.integers(min_value=0, max_value=2**256 - 1))
@example(2**63)
@example(2**256 - 1)
def test_units_keep_any_256_bit_amount_exactly(value: int) -> None:
    """NUMERIC(78, 0) on PostgreSQL (bound as the exact Decimal), the decimal text on
    SQLite; read back as the same int on both (a float would round past 2^53)."""
    pg, lite = DIALECTS
    sent_pg = Units().dialect_impl(pg).bind_processor(pg)(value)
    sent_lite = Units().dialect_impl(lite).bind_processor(lite)(value)
    assert sent_pg == Decimal(value) and isinstance(sent_pg, Decimal)
    assert sent_lite == str(value)
    assert Units().process_result_value(sent_pg, pg) == value
    assert Units().process_result_value(sent_lite, lite) == value


@pytest.mark.parametrize("bad", [1.0, True, Decimal("1.5"), "12"])
def test_units_refuse_anything_but_an_int(bad: Any) -> None:
    for dialect in DIALECTS:
        with pytest.raises(TypeError):
            Units().process_bind_param(bad, dialect)
    with pytest.raises(TypeError):
        Units().process_result_value(1.0, DIALECTS[1])
