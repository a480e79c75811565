"""Money: the one parser that enforces an asset's decimals, and the one formatter.

Money is `Decimal` end to end; floats appear only in the `/prices` map.
"""

from __future__ import annotations

import re
from decimal import ROUND_DOWN, Context, Decimal, localcontext

from walletcore.domain.errors import InvalidRequest
from walletcore.domain.wire import JsonValue

#: A plain, unsigned decimal: digits, optionally a point and more digits. No sign, no
#: exponent, no whitespace, no thousands separators, no NaN or Infinity.
_DECIMAL_RE = re.compile(r"\A(?P<int>[0-9]+)(?:\.(?P<frac>[0-9]+))?\Z")
#: Larger than any real balance of any asset (18 decimals + 30 integer digits).
MAX_AMOUNT_CHARS = 50
#: Places every store keeps of an amount or a price: the most any asset has (ETH, BNB,
#: POL...). A quote's figures are cut to them when it is made (`keep_places`), so the trade a
#: quote answers is, value for value, the trade every store gives back.
KEPT_PLACES = 18
_KEPT_QUANTUM = Decimal(1).scaleb(-KEPT_PLACES)
#: Wide enough to cut any finite amount a column could hold (78 digits) and more.
_KEEP = Context(prec=100)
#: Places kept by the output formatter.
OUTPUT_PLACES = 6
_OUTPUT_QUANTUM = Decimal(1).scaleb(-OUTPUT_PLACES)
#: 80 digits: wide enough for any amount `parse_amount` accepts (the default keeps 28).
_WIDE = Context(prec=80)


def parse_amount(value: JsonValue, decimals: int, field: str = "amount") -> Decimal:
    """Parse a decimal string into a positive `Decimal` with at most `decimals` places.

    Rejects non-strings, negatives, zero, exponents, NaN/Infinity and too many places,
    each with a message naming the field.
    """
    if not isinstance(value, str):
        raise InvalidRequest(f"{field} must be a decimal string")
    if len(value) > MAX_AMOUNT_CHARS:
        raise InvalidRequest(f"{field} is too long")
    match = _DECIMAL_RE.match(value)
    if match is None:
        raise InvalidRequest(f'{field} must be a plain positive decimal string such as "1.5"')
    frac = match.group("frac") or ""
    if len(frac.rstrip("0")) > decimals:
        raise InvalidRequest(f"{field} has more than {decimals} decimal places")
    # Exact in any context: the constructor keeps every digit of a string (the context's
    # precision applies to arithmetic, not here), so no `localcontext()` (1.4 -> 0.15 us).
    amount = Decimal(value)
    if amount == 0:
        raise InvalidRequest(f"{field} must be greater than zero")
    return amount


def truncate(value: Decimal, places: int) -> Decimal:
    """Cut (never round) to `places` decimal places, toward zero."""
    with localcontext() as ctx:
        ctx.prec = 80
        return value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_DOWN)


def keep_places(value: Decimal) -> Decimal:
    """`value` cut (never rounded) to `KEPT_PLACES`, toward zero; unchanged (the same
    object) when it has no more places than that, else with exactly that many (zeros
    past them are cut too). `ValueError` for a value that is not finite."""
    exponent = value.as_tuple().exponent
    if isinstance(exponent, str):  # "n", "N", "F": a Decimal, but NaN, sNaN or Infinity
        raise ValueError("only a finite value has places to keep")  # noqa: TRY004
    if exponent >= -KEPT_PLACES:
        return value
    return value.quantize(_KEPT_QUANTUM, rounding=ROUND_DOWN, context=_KEEP)


def format_amount(value: Decimal) -> str:
    """The wire form of an amount or price: cut to 6 places, trailing zeros trimmed.

    `100.00` -> `100`, `0.0000009` -> `0`, `1.2345678` -> `1.234567`.
    """
    if not value.is_finite():
        raise ValueError("cannot format a non-finite amount")
    # An explicit context rather than `localcontext()`: the same quantize, without entering
    # and leaving a context for each of the ten figures of every trade on the wire.
    cut = value.quantize(_OUTPUT_QUANTUM, rounding=ROUND_DOWN, context=_WIDE)
    text = format(cut, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text in ("-0", ""):
        text = "0"
    return text


def format_optional(value: Decimal | None) -> str | None:
    return None if value is None else format_amount(value)


def to_base_units(amount: Decimal, decimals: int) -> int:
    """Whole base units (satoshi, wei, lamports ...) of an amount with at most `decimals` places."""
    # The default context keeps 28 digits: 10**10 of an 18-decimal token would be rounded
    # silently. Scale in a context wide enough for any amount `parse_amount` accepts.
    with localcontext() as ctx:
        ctx.prec = 80
        scaled = amount.scaleb(decimals)
    if scaled != scaled.to_integral_value():
        raise InvalidRequest(f"amount has more than {decimals} decimal places")
    return int(scaled)


def from_base_units(units: int, decimals: int) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 80
        return Decimal(units).scaleb(-decimals)


def format_balance(units: int, decimals: int) -> str:
    """A balance in full precision (balances are not cut to 6 places)."""
    text = format(from_base_units(units, decimals), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"
