"""The bounds of a trade's amounts: per asset, the least and the most crypto a quote may
hold, and the floor under which no leg may go (what the wire would show as `0`).

Rules (docs/markets.md, "Trade amounts"):
- The bounds are of the crypto leg, in the asset: one asset trades in ten fiats, and its
  venue's limits are in the coin. A quote of either leg is held to them once the other leg
  is derived, so a `fiatAmount` quote is held to them through the crypto it buys or sells.
- Neither leg may be under `DISPLAY_FLOOR` (one unit of the contract's sixth place),
  whatever the settings say: a minimum set lower than that counts as that.
- A refusal is a 400 naming the field the client sent, the bound and the asset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_UP, Context, Decimal

from walletcore.domain.assets import FIAT_DECIMALS, Asset, Fiat
from walletcore.domain.catalog import Catalog
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.money import OUTPUT_PLACES
from walletcore.domain.trade import Figures, FixedLeg

#: The least a leg may be: the contract cuts every figure to 6 places, and a trade must not
#: read as `0` of anything.
DISPLAY_FLOOR = Decimal(1).scaleb(-OUTPUT_PLACES)

_STABLE_MINIMUM, _STABLE_MAXIMUM = Decimal(1), Decimal(10_000_000)
#: assetId -> the least crypto a trade may hold: at or above the lot minimum of a large spot
#: venue's market of the coin, a dollar or less at today's prices.
DEFAULT_TRADE_MINIMUMS: dict[int, Decimal] = {
    1: Decimal("0.00001"),  # BTC
    2: Decimal("0.0001"),  # ETH
    3: Decimal("0.001"),  # BNB
    4: Decimal(1),  # TRX
    5: Decimal(1),  # POL
    6: Decimal("0.001"),  # SOL
    **{a: _STABLE_MINIMUM for a in (21, 22, 31, 32, 41, 42, 51, 52, 61, 62)},
}
#: assetId -> the most crypto a trade may hold: round figures within the lot maxima of large
#: spot venues (what one order there may be), never under 504 of the coin (the sandbox
#: venue's trigger amounts stay quotable as crypto amounts).
DEFAULT_TRADE_MAXIMUMS: dict[int, Decimal] = {
    1: Decimal(1_000),  # BTC
    2: Decimal(10_000),  # ETH
    3: Decimal(10_000),  # BNB
    4: Decimal(10_000_000),  # TRX
    5: Decimal(10_000_000),  # POL
    6: Decimal(100_000),  # SOL
    **{a: _STABLE_MAXIMUM for a in (21, 22, 31, 32, 41, 42, 51, 52, 61, 62)},
}
#: The most crypto a trade of an asset without a default maximum may hold.
DEFAULT_MAXIMUM = _STABLE_MAXIMUM
_FIAT_QUANTUM = Decimal(1).scaleb(-FIAT_DECIMALS)
#: Wide enough for a bound times any price (the default context keeps 28 digits).
_WIDE = Context(prec=80)


def plain(value: Decimal) -> str:
    """A bound as a message shows it: every place it has, no exponent, no trailing zeros."""
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


@dataclass(frozen=True, slots=True)
class TradeBounds:
    """One asset's bounds of the crypto leg, the display floor applied."""

    minimum: Decimal
    maximum: Decimal


class TradeLimits:
    """The bounds of every asset of `catalog`: the defaults, with `minimums` and `maximums`
    (assetId -> crypto amount, `WALLETCORE_TRADE_MINIMUMS`, `_MAXIMUMS`) laid over them.

    An asset without a default (one a chain plugin adds) is bounded by `DISPLAY_FLOOR` and
    `DEFAULT_MAXIMUM` until the operator sets its bounds. Bounds that cannot hold are a
    `ValueError` naming the asset: an id the catalog does not serve, an amount not above
    zero, more places than the asset has, a minimum above its maximum.
    """

    def __init__(
        self,
        catalog: Catalog,
        minimums: Mapping[int, Decimal] | None = None,
        maximums: Mapping[int, Decimal] | None = None,
    ) -> None:
        _check_given(catalog, minimums or {})
        _check_given(catalog, maximums or {})
        low = {**DEFAULT_TRADE_MINIMUMS, **(minimums or {})}
        high = {**DEFAULT_TRADE_MAXIMUMS, **(maximums or {})}
        self._bounds = {
            a.id: TradeBounds(
                max(low.get(a.id, DISPLAY_FLOOR), DISPLAY_FLOOR), high.get(a.id, DEFAULT_MAXIMUM)
            )
            for a in catalog.assets
        }
        for asset_id, bounds in self._bounds.items():
            if bounds.minimum > bounds.maximum:
                raise ValueError(
                    f"asset {asset_id}: the minimum trade {plain(bounds.minimum)} is above the "
                    f"maximum {plain(bounds.maximum)}"
                )

    def bounds(self, asset: Asset) -> TradeBounds:
        return self._bounds[asset.id]

    def check(self, asset: Asset, fixed_leg: FixedLeg, figures: Figures, fiat: Fiat) -> None:
        """Refuse (400) a quote whose crypto leg is outside the asset's bounds, or whose
        fiat leg is under the display floor; `figures` hold both legs, the fixed one as the
        client sent it. Inside them (every quote but a refused one) it costs two lookups
        and three comparisons."""
        crypto, fiat_amount = figures.crypto_amount, figures.fiat_amount
        bounds = self._bounds[asset.id]
        if crypto is not None and not bounds.minimum <= crypto <= bounds.maximum:
            field = _field(fixed_leg)
            price = figures.price
            if crypto < bounds.minimum:
                raise InvalidRequest(
                    f"{field} is below the minimum trade of {plain(bounds.minimum)} "
                    f"{asset.symbol}" + _in_fiat(fixed_leg, bounds.minimum, price, fiat, ROUND_UP)
                )
            raise InvalidRequest(
                f"{field} is above the maximum trade of {plain(bounds.maximum)} {asset.symbol}"
                + _in_fiat(fixed_leg, bounds.maximum, price, fiat, ROUND_DOWN)
            )
        if fiat_amount is not None and fiat_amount < DISPLAY_FLOOR:
            raise InvalidRequest(
                f"{_field(fixed_leg)} is worth less than {plain(DISPLAY_FLOOR)} {fiat.value} "
                "at the quoted price, too little to trade"
            )


def _check_given(catalog: Catalog, given: Mapping[int, Decimal]) -> None:
    """Each bound set names a served asset, is above zero and has at most its places."""
    for asset_id, amount in given.items():
        asset = catalog.get(asset_id)
        if asset is None:
            raise ValueError(f"unknown asset id: {asset_id}")
        if not amount.is_finite() or amount <= 0:
            raise ValueError(f"asset {asset_id}: a trade bound is a positive amount")
        text = plain(amount)
        if "." in text and len(text.partition(".")[2]) > asset.decimals:
            raise ValueError(
                f"asset {asset_id}: {text} has more than the "
                f"{asset.decimals} decimal places of {asset.symbol}"
            )


def _field(fixed_leg: FixedLeg) -> str:
    """The field the client sent: the one a refusal names."""
    return "cryptoAmount" if fixed_leg is FixedLeg.CRYPTO else "fiatAmount"


def _in_fiat(fixed_leg: FixedLeg, bound: Decimal, price: Decimal, fiat: Fiat, rounding: str) -> str:
    """For a fiat-fixed quote, the bound in the client's fiat at the quoted price: the fiat
    amount (to its 2 places) that reaches it."""
    if fixed_leg is FixedLeg.CRYPTO:
        return ""
    value = _WIDE.multiply(bound, price).quantize(_FIAT_QUANTUM, rounding=rounding, context=_WIDE)
    return f" ({plain(value)} {fiat.value} at the quoted price)"


__all__ = [
    "DEFAULT_MAXIMUM",
    "DEFAULT_TRADE_MAXIMUMS",
    "DEFAULT_TRADE_MINIMUMS",
    "DISPLAY_FLOOR",
    "TradeBounds",
    "TradeLimits",
    "plain",
]
