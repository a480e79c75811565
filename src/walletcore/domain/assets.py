"""Chains, assets, fiats and assetId parsing, and the contract's sixteen assets
(`CONTRACT_ASSETS`). Which assets a deployment serves, in which order, is its catalog's to
say (`walletcore.domain.catalog.Catalog`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Self

from walletcore.domain.errors import InvalidRequest

#: A chain's name: ASCII upper-case letters and digits, starting with a letter, 2 to 24.
_CHAIN_FORM = re.compile(r"[A-Z][A-Z0-9]{1,23}")


class Chain(str):
    """A chain's name (`BITCOIN`, `ARBITRUM`): ASCII upper-case letters and digits,
    starting with a letter, 2 to 24 characters; anything else is a `ValueError`.

    Open: a chain plugin names its own chains. The contract's six are the constants below
    (`CONTRACT_CHAINS` in contract order). A `Chain` is its name: equal to, and hashing as,
    the plain string. Compare with `==`, never `is`. Which chains a deployment serves is
    its catalog's to say (`Catalog.chains`), not this type's.
    """

    __slots__ = ()

    BITCOIN: ClassVar[Chain]
    ETHEREUM: ClassVar[Chain]
    BSC: ClassVar[Chain]
    TRON: ClassVar[Chain]
    POLYGON: ClassVar[Chain]
    SOLANA: ClassVar[Chain]

    def __new__(cls, value: object) -> Self:
        if type(value) is cls:
            return value
        if not isinstance(value, str) or _CHAIN_FORM.fullmatch(value) is None:
            shown = repr(value)[:40]
            raise ValueError(
                f"{shown} is not a chain name (2 to 24 ASCII upper-case letters and digits, "
                "starting with a letter)"
            )
        return super().__new__(cls, value)

    @property
    def value(self) -> str:
        """The name as a plain `str`."""
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"Chain({str.__repr__(self)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Chain, (str.__str__(self),))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """A pydantic field of type `Chain`: a string of the form, kept as a `Chain`,
        serialised as the plain string (pydantic is imported only when a model asks)."""
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(
            cls,
            core_schema.str_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(str),
        )


Chain.BITCOIN = Chain("BITCOIN")
Chain.ETHEREUM = Chain("ETHEREUM")
Chain.BSC = Chain("BSC")
Chain.TRON = Chain("TRON")
Chain.POLYGON = Chain("POLYGON")
Chain.SOLANA = Chain("SOLANA")

#: The contract's six chains, in contract order.
CONTRACT_CHAINS: tuple[Chain, ...] = (
    Chain.BITCOIN,
    Chain.ETHEREUM,
    Chain.BSC,
    Chain.TRON,
    Chain.POLYGON,
    Chain.SOLANA,
)


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


#: The contract's sixteen assets, in contract order (the order `/config` lists them in):
#: the ones the six chains' plugins declare. What a deployment serves is its `Catalog`.
CONTRACT_ASSETS: tuple[Asset, ...] = (
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


def parse_asset_id(value: Any) -> int:
    """An int, or an all-digit string normalised to int; anything else is a 400.

    Parsing says nothing of whether the id names an asset: see `Catalog.asset_by_id`
    (walletcore.domain.catalog).
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
