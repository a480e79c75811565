"""Money: the one parser (an asset's decimals) and the one formatter (cut to 6, trimmed)."""

from __future__ import annotations

import re
from decimal import Decimal, Inexact, Rounded, localcontext

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from walletcore.domain.errors import InvalidRequest
from walletcore.domain.money import (
    KEPT_PLACES,
    format_amount,
    format_balance,
    from_base_units,
    keep_places,
    parse_amount,
    to_base_units,
    truncate,
)

#: The wire form of the spec: at most 6 places, trailing zeros trimmed, no sign, no exponent.
WIRE = re.compile(r"\A(0|[1-9][0-9]*)(\.[0-9]{0,5}[1-9])?\Z")
MICRO = Decimal("0.000001")
DECIMALS = (6, 8, 9, 18)  # every asset's decimals in the catalog


def decimals_with_places(
    max_places: int = 24, max_int_digits: int = 24
) -> st.SearchStrategy[Decimal]:
    """Non-negative decimals with an exact number of places (no float noise)."""
    return st.builds(
        lambda whole, frac, places: (
            Decimal(f"{whole}.{frac % 10**places:0{places}d}") if places else Decimal(whole)
        ),
        st.integers(0, 10**max_int_digits),
        st.integers(0, 10**max_places),
        st.integers(0, max_places),
    )


# -- format ----------------------------------------------------------------------------------
@given(decimals_with_places())
@example(Decimal("100.00"))
@example(Decimal("0.0000009"))
@example(Decimal("0.9999999999"))
@example(Decimal("1E+3"))
@example(Decimal(0))
def test_format_cuts_to_six_places_never_rounds_up_and_trims(value: Decimal) -> None:
    text = format_amount(value)
    assert WIRE.match(text), text
    shown = Decimal(text)
    assert shown <= value  # never rounds up
    assert value - shown < MICRO  # and loses less than one millionth
    assert format_amount(shown) == text  # the wire form is a fixed point


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("100.00", "100"),
        ("0.0000009", "0"),
        ("1.2345678", "1.234567"),
        ("0.9999999", "0.999999"),
        ("2.5000000", "2.5"),
        ("1E+3", "1000"),
        ("1.10E+1", "11"),
        ("0.000001", "0.000001"),
        ("-0.0000001", "0"),
        ("33471.805715210", "33471.805715"),
    ],
)
def test_format_examples(value: str, text: str) -> None:
    assert format_amount(Decimal(value)) == text


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "sNaN"])
def test_format_refuses_non_finite(value: str) -> None:
    with pytest.raises(ValueError):
        format_amount(Decimal(value))


@given(decimals_with_places(), st.integers(0, 18))
def test_truncate_never_rounds_up(value: Decimal, places: int) -> None:
    cut = truncate(value, places)
    assert cut <= value and value - cut < Decimal(1).scaleb(-places)
    assert -cut.as_tuple().exponent <= places  # type: ignore[operator]


# -- parse -----------------------------------------------------------------------------------
@st.composite
def amount_strings(draw: st.DrawFn) -> tuple[str, int]:
    """A plain positive decimal string and decimals it fits in."""
    decimals = draw(st.sampled_from(DECIMALS))
    whole = draw(st.integers(0, 10**20))
    places = draw(st.integers(0, decimals))
    frac = draw(st.integers(0, 10**places - 1)) if places else 0
    if whole == 0 and frac == 0:
        frac, places = 1, max(places, 1)
    text = f"{whole}.{frac:0{places}d}" if places else str(whole)
    return text, decimals


@given(amount_strings())
def test_parse_round_trips_plain_decimal_strings(case: tuple[str, int]) -> None:
    text, decimals = case
    amount = parse_amount(text, decimals)
    assert isinstance(amount, Decimal)
    assert amount == Decimal(text) and amount > 0
    assert format(amount, "f") == text  # nothing gained or lost, not even a trailing zero


@given(decimals_with_places(max_places=12).filter(lambda d: d >= MICRO))
def test_the_wire_form_parses_back_to_itself(value: Decimal) -> None:
    text = format_amount(value)
    assert format_amount(parse_amount(text, 6)) == text


@pytest.mark.parametrize("decimals", DECIMALS)
def test_parse_accepts_exactly_the_assets_decimals(decimals: int) -> None:
    assert parse_amount("1." + "1" * decimals, decimals) == Decimal("1." + "1" * decimals)
    with pytest.raises(InvalidRequest) as raised:
        parse_amount("1." + "1" * (decimals + 1), decimals, "cryptoAmount")
    assert raised.value.status == 400 and "cryptoAmount" in raised.value.message


@given(st.sampled_from(DECIMALS), st.integers(1, 10), st.integers(1, 9))
def test_parse_rejects_any_significant_digit_past_the_decimals(
    decimals: int, extra: int, digit: int
) -> None:
    text = "0." + "0" * (decimals + extra - 1) + str(digit)
    with pytest.raises(InvalidRequest):
        parse_amount(text, decimals)


@given(amount_strings())
def test_parse_rejects_negatives(case: tuple[str, int]) -> None:
    with pytest.raises(InvalidRequest):
        parse_amount("-" + case[0], case[1])


@pytest.mark.parametrize(
    "text",
    [
        "0",
        "0.0",
        "000",
        "0.000000",
        "-0",  # zero
        "-1",
        "-0.5",  # negative
        "1e5",
        "1E5",
        "1e-5",
        "2.5e3",  # exponent
        "NaN",
        "nan",
        "Infinity",
        "-Infinity",
        "inf",
        "sNaN",  # not finite
        " 1",
        "1 ",
        "1\n",
        "\t1",
        "1 000",
        "1. 5",  # whitespace
        "",
        ".",
        "1.",
        ".5",
        "+1",
        "1,5",
        "1,000.00",
        "1_000",
        "0x10",
        "١",
        "1.2.3",
        "abc",
        "9" * 51,  # absurdly long
    ],
    ids=repr,
)
def test_parse_rejects_what_is_not_a_plain_positive_decimal(text: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        parse_amount(text, 18, "fiatAmount")
    assert raised.value.status == 400
    assert "fiatAmount" in raised.value.message


@pytest.mark.parametrize("value", [1, 1.5, 0.1, Decimal(1), None, True, b"1", ["1"]], ids=repr)
def test_parse_rejects_non_strings(value: object) -> None:
    with pytest.raises(InvalidRequest) as raised:
        parse_amount(value, 18, "cryptoAmount")
    assert "decimal string" in raised.value.message


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_parse_never_accepts_a_float(value: float) -> None:
    with pytest.raises(InvalidRequest):
        parse_amount(value, 18)


# -- base units ------------------------------------------------------------------------------
@given(st.integers(0, 10**40), st.sampled_from(DECIMALS))
def test_base_units_round_trip(units: int, decimals: int) -> None:
    amount = from_base_units(units, decimals)
    assert to_base_units(amount, decimals) == units
    balance = format_balance(units, decimals)
    assert Decimal(balance) == amount
    assert re.fullmatch(r"(0|[1-9][0-9]*)(\.[0-9]*[1-9])?", balance), balance  # full precision


def test_to_base_units_refuses_more_places_than_the_asset_has() -> None:
    with pytest.raises(InvalidRequest):
        to_base_units(Decimal("0.123456789"), 8)
    assert to_base_units(Decimal("0.12345678"), 8) == 12_345_678


def test_to_base_units_is_exact_beyond_28_digits() -> None:
    """Ten billion of an 18-decimal token is 29 digits of wei: not one may be rounded away."""
    amount = parse_amount("12345678901.123456789012345678", 18)
    assert to_base_units(amount, 18) == 12345678901_123456789012345678


@given(amount_strings(), st.integers(min_value=1, max_value=10))
def test_parse_amount_keeps_every_digit_whatever_the_context(
    case: tuple[str, int], precision: int
) -> None:
    """The string constructor is exact in any context: a caller's narrow precision (or
    traps) never rounds an amount as it is parsed."""
    text, decimals = case
    with localcontext() as narrow:
        narrow.prec = precision
        narrow.traps[Inexact] = narrow.traps[Rounded] = True
        amount = parse_amount(text, decimals)
    assert format(amount, "f") == text


def test_format_amount_matches_the_localcontext_form_it_replaced() -> None:
    """`format_amount` passes the 80-digit context to quantize instead of entering it: the
    same text for amounts of every size and precision, including 18-decimal token amounts."""
    import random
    from decimal import ROUND_DOWN, localcontext

    rng = random.Random(14)

    def old(value: Decimal) -> str:
        with localcontext() as ctx:
            ctx.prec = 80
            cut = value.quantize(Decimal("0.000001"), rounding=ROUND_DOWN)
        text = format(cut, "f")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text

    for _ in range(3000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 40)))
        value = Decimal(digits).scaleb(-rng.randrange(0, 24))
        assert format_amount(value) == old(value)
        assert format_amount(-value) == old(-value)


# -- keep_places: the places every store keeps -----------------------------------------------
@given(decimals_with_places(max_places=30, max_int_digits=40), st.booleans())
@example(Decimal("1.0000000000000000000"), False)  # 19 places, all zeros: cut to 18 too
@example(Decimal("0.0000000000000000009"), True)
@example(Decimal("-0E-30"), False)
@example(Decimal("1E+30"), False)
@example(Decimal("1.0E-18"), False)  # str() writes both in exponent form; compare the digits
def test_keep_places_cuts_toward_zero_to_18_places(value: Decimal, negative: bool) -> None:
    """Never rounded, toward zero; the very object when it has no more places, else
    exactly 18 of them (the form a store writes and a message may show)."""
    if negative:
        value = -value
    kept = keep_places(value)
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    if exponent >= -KEPT_PLACES:
        assert kept is value
    else:
        assert kept.as_tuple().exponent == -KEPT_PLACES
        with localcontext() as wide:
            wide.prec = 100
            assert abs(kept) <= abs(value) < abs(kept) + Decimal(1).scaleb(-KEPT_PLACES)
        assert kept.is_signed() == value.is_signed() or kept == 0
        shown = format(kept, "f")
        assert shown == format(value, "f")[: len(shown)] or kept == 0


@pytest.mark.parametrize("value", ["NaN", "sNaN", "Infinity", "-Infinity"])
def test_keep_places_refuses_non_finite(value: str) -> None:
    with pytest.raises(ValueError, match="finite"):
        keep_places(Decimal(value))
