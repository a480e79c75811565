"""Wire shapes for OpenAPI: request bodies, result payloads and the two envelopes.

Request bodies are msgspec Structs that check JSON *types* only (a wrong type, an unknown
field or a non-object body is a 400 envelope); value rules (ids, amounts, assetIds, enums)
are the core's, which raises 400s with clear messages. Patterns and enums on request
fields are therefore documentation (`KwargDefinition`), not msgspec constraints, so the
message a client sees comes from one place.

Result Structs describe the dicts of `walletcore.views`; handlers return those dicts.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar.params import KwargDefinition

from walletcore.domain.assets import ASSET_IDS, Chain, Fiat
from walletcore.domain.trade import Side, TradeStatus

# -- documented constraints -----------------------------------------------------------------
HEX_ID_PATTERN = r"^[0-9a-fA-F]{24}$"
DECIMAL_PATTERN = r"^[0-9]+(\.[0-9]+)?$"
DATETIME_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$"
ASSET_ID_STRING_PATTERN = r"^[0-9]{1,9}$"
ERROR_STATUS_PATTERN = r"^[45][0-9]{2}$"


class _Doc(KwargDefinition):
    """A KwargDefinition usable inside a Union (its `schema_extra` dict is not hashable)."""

    def __hash__(self) -> int:
        return id(self)


def doc(**kwargs: Any) -> KwargDefinition:
    """Schema-only metadata: Litestar puts it in OpenAPI, msgspec does not enforce it."""
    return _Doc(**kwargs)


HexId = Annotated[str, doc(pattern=HEX_ID_PATTERN, description="24-character hex id")]
DecimalString = Annotated[
    str, doc(pattern=DECIMAL_PATTERN, max_length=50, description='decimal string, e.g. "1.5"')
]
DateTime = Annotated[
    str, doc(pattern=DATETIME_PATTERN, description="ISO 8601 UTC with milliseconds and Z")
]
AssetIdNumber = Annotated[
    int, doc(schema_extra={"enum": list(ASSET_IDS)}, description="asset id (see /config)")
]
AssetIdString = Annotated[
    str,
    doc(pattern=ASSET_ID_STRING_PATTERN, description="an all-digit asset id, normalised to int"),
]
FiatCode = Annotated[str, doc(schema_extra={"enum": [f.value for f in Fiat]})]
SideName = Annotated[str, doc(schema_extra={"enum": [s.value for s in Side]})]
StatusName = Annotated[str, doc(schema_extra={"enum": [s.value for s in TradeStatus]})]
UserIdIn = Annotated[
    str,
    doc(
        pattern=HEX_ID_PATTERN,
        description="the end user (24 hex); required unless the X-USER-ID header is sent, "
        "which overrides it",
    ),
]

_BODY = {"forbid_unknown_fields": True, "kw_only": True}


# -- request bodies --------------------------------------------------------------------------
class QuoteRequest(msgspec.Struct, **_BODY):
    """`/sell` and `/order`: exactly one of `cryptoAmount` and `fiatAmount`."""

    assetId: AssetIdNumber | AssetIdString | None = None
    userId: UserIdIn | None = None
    fiat: FiatCode | None = None
    cryptoAmount: DecimalString | None = None
    fiatAmount: DecimalString | None = None


class TradeRequest(msgspec.Struct, **_BODY):
    """`/trade`, `/trade/approve`, `/trade/cancel`."""

    tradeId: Annotated[str, doc(pattern=HEX_ID_PATTERN)] | None = None
    userId: UserIdIn | None = None


class TradesRequest(msgspec.Struct, **_BODY):
    """`/trades`: optional filters."""

    userId: UserIdIn | None = None
    side: SideName | None = None
    status: StatusName | None = None


class CreateWalletRequest(msgspec.Struct, **_BODY):
    password: (
        Annotated[
            str,
            doc(min_length=8, max_length=256, description="the wallet password; unrecoverable"),
        ]
        | None
    ) = None


class ExtendWalletRequest(msgspec.Struct, **_BODY):
    userId: UserIdIn | None = None
    password: (
        Annotated[str, doc(max_length=256, description="the wallet password chosen at /create")]
        | None
    ) = None


class UserRequest(msgspec.Struct, **_BODY):
    userId: UserIdIn | None = None


# -- results ---------------------------------------------------------------------------------
class AuthResult(msgspec.Struct):
    token: str
    expiresAt: DateTime


class FiatPrices(msgspec.Struct):
    """Indicative prices of one coin; a fiat with no recorded quote reads as 0."""

    USD: float
    EUR: float
    GBP: float
    CAD: float


class ConfigAsset(msgspec.Struct):
    assetId: AssetIdNumber
    chain: Chain
    symbol: str
    kind: Annotated[str, doc(schema_extra={"enum": ["NATIVE", "TOKEN"]})]
    decimals: int
    feePayer: Annotated[str, doc(schema_extra={"enum": ["USER", "PLATFORM"]})]
    standard: str | msgspec.UnsetType = msgspec.UNSET


class ClientConfig(msgspec.Struct):
    feePayer: Annotated[str, doc(schema_extra={"enum": ["USER", "PLATFORM"]})]
    assets: list[ConfigAsset]


class TradeQuote(msgspec.Struct):
    cryptoAmount: DecimalString | None
    fiatAmount: DecimalString | None
    price: DecimalString
    expiresAt: DateTime


class TradeView(msgspec.Struct):
    tradeId: HexId
    side: Side
    status: TradeStatus
    assetId: AssetIdNumber
    symbol: str
    fiat: Fiat
    cryptoAmount: DecimalString | None
    fiatAmount: DecimalString | None
    price: DecimalString
    quote: TradeQuote
    createdAt: DateTime
    approvedAt: DateTime | None
    completedAt: DateTime | None
    reference: str | msgspec.UnsetType = msgspec.UNSET
    failureReason: str | msgspec.UnsetType = msgspec.UNSET


class ChainAddresses(msgspec.Struct, forbid_unknown_fields=True):
    """Chain name to address, limited to chains with at least one enabled asset."""

    BITCOIN: str | msgspec.UnsetType = msgspec.UNSET
    ETHEREUM: str | msgspec.UnsetType = msgspec.UNSET
    BSC: str | msgspec.UnsetType = msgspec.UNSET
    TRON: str | msgspec.UnsetType = msgspec.UNSET
    POLYGON: str | msgspec.UnsetType = msgspec.UNSET
    SOLANA: str | msgspec.UnsetType = msgspec.UNSET


class CreatedWallet(msgspec.Struct):
    userId: HexId
    addresses: ChainAddresses
    mnemonic: Annotated[str, doc(description="the seed phrase, shown this once and never again")]


class WalletAddresses(msgspec.Struct):
    userId: HexId
    addresses: ChainAddresses


# -- envelopes -------------------------------------------------------------------------------
RequestId = Annotated[
    str, doc(min_length=1, max_length=128, description="the X-Request-Id echoed, or generated")
]


class ErrorEnvelope(msgspec.Struct):
    message: Annotated[str, doc(description="safe, client-facing")]
    error: Annotated[str, doc(pattern=ERROR_STATUS_PATTERN, description="the HTTP status")]
    requestId: RequestId


class AuthEnvelope(msgspec.Struct):
    result: AuthResult
    requestId: RequestId


class PricesEnvelope(msgspec.Struct):
    result: dict[str, FiatPrices]
    requestId: RequestId


class ConfigEnvelope(msgspec.Struct):
    result: ClientConfig
    requestId: RequestId


class TradeEnvelope(msgspec.Struct):
    result: TradeView
    requestId: RequestId


class TradesEnvelope(msgspec.Struct):
    result: list[TradeView]
    requestId: RequestId


class CreatedWalletEnvelope(msgspec.Struct):
    result: CreatedWallet
    requestId: RequestId


class WalletAddressesEnvelope(msgspec.Struct):
    result: WalletAddresses
    requestId: RequestId


class AddressesEnvelope(msgspec.Struct):
    result: ChainAddresses
    requestId: RequestId
