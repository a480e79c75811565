"""The asset catalog of the spec, chains, fiats, and assetId parsing."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from walletcore.domain.errors import InvalidRequest, UnknownAsset


class Chain(StrEnum):
    BITCOIN = "BITCOIN"
    ETHEREUM = "ETHEREUM"
    BSC = "BSC"
    TRON = "TRON"
    POLYGON = "POLYGON"
    SOLANA = "SOLANA"


class AssetKind(StrEnum):
    NATIVE = "NATIVE"
    TOKEN = "TOKEN"


class FeePayer(StrEnum):
    USER = "USER"
    PLATFORM = "PLATFORM"


class Fiat(StrEnum):
    """Fiats a trade accepts and returns."""

    USD = "USD"
    EUR = "EUR"
    GBP = "GBP"
    CAD = "CAD"
    AUD = "AUD"
    SEK = "SEK"
    DKK = "DKK"
    PLN = "PLN"
    BRL = "BRL"
    AED = "AED"


DEFAULT_FIAT = Fiat.USD
#: The only fiats the `/prices` map covers, in the spec's order.
PRICE_FIATS: tuple[Fiat, ...] = (Fiat.USD, Fiat.EUR, Fiat.GBP, Fiat.CAD)
#: Decimal places accepted in a fiat amount (all ten trade fiats have two minor units).
FIAT_DECIMALS = 2


@dataclass(frozen=True, slots=True)
class Asset:
    id: int
    chain: Chain
    symbol: str
    kind: AssetKind
    standard: str | None
    decimals: int

    @property
    def is_native(self) -> bool:
        return self.kind is AssetKind.NATIVE


def _native(asset_id: int, chain: Chain, symbol: str, decimals: int) -> Asset:
    return Asset(asset_id, chain, symbol, AssetKind.NATIVE, None, decimals)


def _token(asset_id: int, chain: Chain, symbol: str, standard: str, decimals: int) -> Asset:
    return Asset(asset_id, chain, symbol, AssetKind.TOKEN, standard, decimals)


#: The 16 assets, in catalog order (the order `/config` lists them in).
CATALOG: tuple[Asset, ...] = (
    _native(1, Chain.BITCOIN, "BTC", 8),
    _native(2, Chain.ETHEREUM, "ETH", 18),
    _token(21, Chain.ETHEREUM, "USDT", "ERC20", 6),
    _token(22, Chain.ETHEREUM, "USDC", "ERC20", 6),
    _native(3, Chain.BSC, "BNB", 18),
    _token(31, Chain.BSC, "USDT", "BEP20", 18),
    _token(32, Chain.BSC, "USDC", "BEP20", 18),
    _native(4, Chain.TRON, "TRX", 6),
    _token(41, Chain.TRON, "USDT", "TRC20", 6),
    _token(42, Chain.TRON, "USDC", "TRC20", 6),
    _native(5, Chain.POLYGON, "POL", 18),
    _token(51, Chain.POLYGON, "USDT", "ERC20", 6),
    _token(52, Chain.POLYGON, "USDC", "ERC20", 6),
    _native(6, Chain.SOLANA, "SOL", 9),
    _token(61, Chain.SOLANA, "USDT", "SPL", 6),
    _token(62, Chain.SOLANA, "USDC", "SPL", 6),
)

ASSETS_BY_ID: dict[int, Asset] = {a.id: a for a in CATALOG}
ASSET_IDS: tuple[int, ...] = tuple(a.id for a in CATALOG)
#: Coin symbols of the `/prices` map, sorted as the spec lists them.
SYMBOLS: tuple[str, ...] = tuple(sorted({a.symbol for a in CATALOG}))


def native_asset(chain: Chain) -> Asset:
    """The chain's own coin."""
    return next(a for a in CATALOG if a.chain is chain and a.is_native)


def parse_asset_id(value: Any) -> int:
    """An int, or an all-digit string normalised to int; anything else is a 400.

    Parsing says nothing of whether the id names an asset: see `asset_by_id`.
    """
    if isinstance(value, bool):
        raise InvalidRequest("assetId must be an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 9:
        return int(value)
    if value is None:
        raise InvalidRequest("assetId is required")
    raise InvalidRequest("assetId must be an integer or an all-digit string")


def asset_by_id(asset_id: int) -> Asset:
    try:
        return ASSETS_BY_ID[asset_id]
    except KeyError:
        raise UnknownAsset() from None


def parse_fiat(value: Any) -> Fiat:
    """A trade fiat; absent (None) means the default, USD."""
    if value is None:
        return DEFAULT_FIAT
    if isinstance(value, str):
        try:
            return Fiat(value)
        except ValueError:
            pass
    allowed = ", ".join(f.value for f in Fiat)
    raise InvalidRequest(f"fiat must be one of {allowed}")
