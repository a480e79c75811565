"""The wire shapes of the API, each defined once: request bodies, results and envelopes.

Handlers decode bodies into these Structs and answer with them, and Litestar generates the
OpenAPI document from the same classes (`openapi.finish_openapi` adds only what a Struct
cannot carry: the headers the binding reads itself). The core knows nothing of the wire:
each result is built from domain objects by its `of` constructor, the one place that names
a field and formats its value (amounts and prices cut to 6 places on trades, datetimes
with milliseconds and `Z`).

Request bodies check JSON *types* and required fields (a 400 naming the field); the core
checks values, with its own messages. Patterns, enums and lengths on request fields are
documentation written to match the core's rules, so that a body the document calls valid
is one the core accepts: the schemathesis test holds them to it. The building blocks are
in `wire`; the wallet operations' shapes in `wallet_ops_schemas`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, ClassVar

import msgspec

from walletcore.domain.assets import FIAT_DECIMALS, AssetKind, Chain, FeePayer, Fiat
from walletcore.domain.catalog import chain_order
from walletcore.domain.money import (
    MAX_AMOUNT_CHARS,
    format_amount,
    format_balance,
    format_optional,
)
from walletcore.domain.settlement import Settlement, SettlementStatus
from walletcore.domain.times import format_datetime, format_optional_datetime
from walletcore.domain.trade import Quote, Side, Trade, TradeStatus
from walletcore.services import market, wallets
from walletcore.services.auth import IssuedToken
from walletcore.services.wallets import PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH
from walletcore_litestar.wire import (
    DATETIME_PATTERN,
    DECIMAL_PATTERN,
    HEX_ID_PATTERN,
    MAX_ASSET_DECIMALS,
    AssetIdIn,
    AssetIdNumber,
    Body,
    DateTime,
    DecimalsRule,
    DecimalString,
    Envelope,
    HexId,
    PasswordIn,
    Result,
    UserIdIn,
    amount_pattern,
    doc,
    hiding,
)

# -- values of the trading bodies -------------------------------------------------------------
TradeIdIn = Annotated[
    str, doc(pattern=HEX_ID_PATTERN, description="the trade, from /sell or /order (24 hex)")
]
FiatCode = Annotated[
    str, doc(schema_extra={"enum": [f.value for f in Fiat]}, description="default USD")
]
SideName = Annotated[str, doc(schema_extra={"enum": [s.value for s in Side]})]
StatusName = Annotated[str, doc(schema_extra={"enum": [s.value for s in TradeStatus]})]
CryptoAmountIn = Annotated[
    str,
    doc(
        pattern=amount_pattern(MAX_ASSET_DECIMALS),
        max_length=MAX_AMOUNT_CHARS,
        description="a decimal string greater than zero, with at most the asset's `decimals` "
        'places (see /config), e.g. "0.05"',
    ),
]
FiatAmountIn = Annotated[
    str,
    doc(
        pattern=amount_pattern(FIAT_DECIMALS),
        max_length=MAX_AMOUNT_CHARS,
        description=f"a decimal string greater than zero, at most {FIAT_DECIMALS} places",
    ),
]


class QuoteRequest(Body):
    """`/sell` and `/order`: exactly one of `cryptoAmount` and `fiatAmount`."""

    schema_extra: ClassVar[dict[str, Any]] = {
        "oneOf": [
            {"required": [name], "properties": {name: {"type": "string"}}}
            for name in ("cryptoAmount", "fiatAmount")
        ],
        "allOf": DecimalsRule("cryptoAmount"),
    }

    assetId: AssetIdIn
    userId: UserIdIn | None = None
    fiat: FiatCode | None = None
    cryptoAmount: CryptoAmountIn | None = None
    fiatAmount: FiatAmountIn | None = None


class TradeRequest(Body):
    """`/trade`, `/trade/approve`, `/trade/cancel`."""

    tradeId: TradeIdIn
    userId: UserIdIn | None = None


#: `/trade/approve`'s optional password: a secret, hidden in the request's repr, never logged
ApprovePasswordIn = Annotated[
    str,
    doc(
        min_length=1,
        max_length=PASSWORD_MAX_LENGTH,
        description="a sell only: the wallet password chosen at /create (the /send rules, "
        "checked before anything trades), to collect the sold coins to the desk as soon as "
        "the sell completes; without it they wait for /trade/collect. Never stored",
    ),
]
CollectPasswordIn = Annotated[
    str,
    doc(
        min_length=1,
        max_length=PASSWORD_MAX_LENGTH,
        description="the wallet password chosen at /create (the /send rules): it signs the "
        "collection; never stored",
    ),
]


class ApproveRequest(Body):
    """`/trade/approve`: `password` only on a sell, to collect its coins at once."""

    tradeId: TradeIdIn
    userId: UserIdIn | None = None
    password: ApprovePasswordIn | None = None

    __repr__ = hiding("password")


class CollectRequest(Body):
    """`/trade/collect`: a completed sell's coins moved to the desk."""

    tradeId: TradeIdIn
    password: CollectPasswordIn
    userId: UserIdIn | None = None

    __repr__ = hiding("password")


class TradesRequest(Body):
    """`/trades`: optional filters."""

    userId: UserIdIn | None = None
    side: SideName | None = None
    status: StatusName | None = None


class CreateWalletRequest(Body):
    password: Annotated[
        str,
        doc(
            min_length=PASSWORD_MIN_LENGTH,
            max_length=PASSWORD_MAX_LENGTH,
            description="the wallet password: it seals the keys and can never be recovered "
            "or changed",
        ),
    ]

    __repr__ = hiding("password")


class ExtendWalletRequest(Body):
    password: PasswordIn
    userId: UserIdIn | None = None

    __repr__ = hiding("password")


class UserRequest(Body):
    userId: UserIdIn | None = None


class AuthResult(Result):
    token: str
    expiresAt: DateTime

    __repr__ = hiding("token")

    @classmethod
    def of(cls, issued: IssuedToken) -> AuthResult:
        return cls(issued.token, format_datetime(issued.expires_at))


class FiatPrices(Result):
    """Indicative prices of one coin; a fiat with no recorded quote reads as 0."""

    USD: float
    EUR: float
    GBP: float
    CAD: float

    @classmethod
    def of(cls, prices: Mapping[str, float]) -> FiatPrices:
        get = prices.get
        return cls(get("USD", 0.0), get("EUR", 0.0), get("GBP", 0.0), get("CAD", 0.0))


def price_map(prices: Mapping[str, Mapping[str, float]]) -> dict[str, FiatPrices]:
    """`/prices`: coin symbol to its prices."""
    return {symbol: FiatPrices.of(by_fiat) for symbol, by_fiat in prices.items()}


class ConfigAsset(Result):
    assetId: AssetIdNumber
    #: a served chain's name (the document's `Chain`: `openapi.describe_catalog`)
    chain: str
    symbol: str
    kind: AssetKind
    decimals: int
    feePayer: FeePayer
    standard: str | msgspec.UnsetType = msgspec.UNSET  # tokens only

    @classmethod
    def of(cls, item: market.ConfigAsset) -> ConfigAsset:
        asset = item.asset
        standard = msgspec.UNSET if asset.standard is None else asset.standard
        return cls(
            asset.id,
            asset.chain.value,
            asset.symbol,
            asset.kind,
            asset.decimals,
            item.fee_payer,
            standard,
        )


class ClientConfig(Result):
    feePayer: FeePayer
    assets: list[ConfigAsset]

    @classmethod
    def of(cls, config: market.ClientConfig) -> ClientConfig:
        return cls(config.fee_payer, [ConfigAsset.of(a) for a in config.assets])


class TradeQuote(Result):
    cryptoAmount: DecimalString | None
    fiatAmount: DecimalString | None
    price: DecimalString
    expiresAt: DateTime

    @classmethod
    def of(cls, quote: Quote) -> TradeQuote:
        return cls(
            format_optional(quote.crypto_amount),
            format_optional(quote.fiat_amount),
            format_amount(quote.price),
            format_datetime(quote.expires_at),
        )


class SettlementView(Result):
    """A trade's crypto leg on chain (docs/settlement.md): a buy's delivery from the desk
    or a sell's collection to it. Absent on a trade that moves no coins (not approved)."""

    status: Annotated[
        SettlementStatus,
        doc(
            description="where the coins are: reserved (approved; a sell's coins held), "
            "awaiting_password (a sell completed: POST /trade/collect), queued (a buy "
            "completed, its delivery about to go), short (the desk cannot deliver yet: see "
            "reason), sent (on chain, followed), settled (moved: final), failed (the "
            "transfer failed on chain, nothing moved), released (the trade did not "
            "complete: nothing moves, final)"
        ),
    ]
    amount: Annotated[
        str,
        doc(
            pattern=DECIMAL_PATTERN,
            description="what moves, in the asset's units: the executed crypto amount once "
            "the trade completed, the quoted one before",
        ),
    ]
    updatedAt: Annotated[
        str, doc(pattern=DATETIME_PATTERN, description="when the status last changed (UTC)")
    ]
    txHash: (
        Annotated[
            str,
            doc(
                description="the transfer's current transaction, once signed (a bumped or "
                "re-signed replacement shows its new hash)"
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    reason: (
        Annotated[str, doc(description="why it waits or failed: never a secret")]
        | msgspec.UnsetType
    ) = msgspec.UNSET

    @classmethod
    def of(cls, settlement: Settlement, decimals: int) -> SettlementView:
        return cls(
            settlement.status,
            format_balance(settlement.units, decimals),
            format_datetime(settlement.updated_at),
            msgspec.UNSET if settlement.tx_hash is None else settlement.tx_hash,
            msgspec.UNSET if settlement.reason is None else settlement.reason,
        )


class TradeView(Result):
    """A trade: top-level figures are the best known (executed, else approved, else quoted);
    `quote` is the original quote. Amounts and prices are cut to 6 places."""

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
    reference: str | msgspec.UnsetType = msgspec.UNSET  # when the fill carried one
    failureReason: str | msgspec.UnsetType = msgspec.UNSET  # on a failed trade
    settlement: (
        Annotated[
            SettlementView,
            doc(
                description="the trade's coins on chain (docs/settlement.md): a buy's delivery "
                "from the desk, a sell's collection to it; absent on a trade never approved, "
                "or where trades move no coins"
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET

    @classmethod
    def of(cls, trade: Trade) -> TradeView:
        figures = trade.figures
        return cls(
            trade.trade_id,
            trade.side,
            trade.status,
            trade.asset_id,
            trade.symbol,
            trade.fiat,
            format_optional(figures.crypto_amount),
            format_optional(figures.fiat_amount),
            format_amount(figures.price),
            TradeQuote.of(trade.quote),
            format_datetime(trade.created_at),
            format_optional_datetime(trade.approved_at),
            format_optional_datetime(trade.completed_at),
            msgspec.UNSET if trade.reference is None else trade.reference,
            msgspec.UNSET if trade.failure_reason is None else trade.failure_reason,
        )


def address_order(chains: Iterable[Chain]) -> list[Chain]:
    """`chains` in the order a wallet's addresses are listed in: the catalog's (the
    contract's six chains in contract order), then any other chain by name."""
    return sorted(chains, key=chain_order)


class ChainAddresses(dict[str, str]):
    """Chain name to address, limited to chains with at least one enabled asset: an
    ordered mapping, in catalog order (`address_order`), so a chain a plugin adds is
    listed as the contract's are. Its OpenAPI schema names the served chains' properties
    (`walletcore_litestar.openapi.ChainAddressesSchema`)."""

    @classmethod
    def of(cls, addresses: Mapping[Chain, str]) -> ChainAddresses:
        return cls((str(chain), addresses[chain]) for chain in address_order(addresses))


class CreatedWallet(Result):
    userId: HexId
    addresses: ChainAddresses
    mnemonic: Annotated[str, doc(description="the seed phrase, shown this once and never again")]

    __repr__ = hiding("mnemonic")

    @classmethod
    def of(cls, created: wallets.CreatedWallet) -> CreatedWallet:
        return cls(created.user_id, ChainAddresses.of(created.addresses), created.mnemonic)


class WalletAddresses(Result):
    userId: HexId
    addresses: ChainAddresses

    @classmethod
    def of(cls, user_id: str, addresses: Mapping[Chain, str]) -> WalletAddresses:
        return cls(user_id, ChainAddresses.of(addresses))


class AuthEnvelope(Envelope):
    result: AuthResult


class PricesEnvelope(Envelope):
    result: dict[str, FiatPrices]


class ConfigEnvelope(Envelope):
    result: ClientConfig


class TradeEnvelope(Envelope):
    result: TradeView


class TradesEnvelope(Envelope):
    result: list[TradeView]


class CreatedWalletEnvelope(Envelope):
    result: CreatedWallet


class WalletAddressesEnvelope(Envelope):
    result: WalletAddresses


class AddressesEnvelope(Envelope):
    result: ChainAddresses
