"""Wire shapes of the wallet operations (`/balance` ... `/send`, and `/platform/...`).

Same rules as `schemas`; the building blocks are in `wire`. A user's body is the platform body plus `userId` (optional: the
`X-USER-ID` header can carry it); `/send` adds the wallet password. Chain amounts keep full
precision (the 6-place cut is for trades): balances and amounts in the asset, fees in the
chain's native coin.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import msgspec

from walletcore.domain.assets import Asset, FeePayer
from walletcore.domain.chains import FeeWire
from walletcore.domain.money import MAX_AMOUNT_CHARS, format_balance
from walletcore.domain.times import format_optional_datetime
from walletcore.domain.wallet import TxRow
from walletcore.ports import FeeQuote
from walletcore.services.send_plan import fee_text
from walletcore.services.send_record import SendReceipt
from walletcore.services.sends import HeldReceipt
from walletcore.services.wallet_reads import MAX_TX_HASH_CHARS
from walletcore.services.wallet_reads import WalletInfo as Info
from walletcore_litestar.wire import (
    DECIMAL_PATTERN,
    MAX_ASSET_DECIMALS,
    AssetIdIn,
    Body,
    DateTime,
    DecimalsRule,
    DecimalString,
    Envelope,
    PasswordIn,
    Result,
    UserIdIn,
    amount_pattern,
    doc,
    hiding,
)

Address = Annotated[
    str,
    doc(
        min_length=1,
        max_length=128,
        description="an address on the asset's chain, checked per chain (format, checksum, "
        "network): BITCOIN bech32/bech32m or base58, EVM `0x` + 40 hex (EIP-55 when mixed "
        "case), TRON `T...` base58check, SOLANA base58",
    ),
]
TxHash = Annotated[
    str,
    doc(
        pattern="^[0-9A-Za-z]+$",
        max_length=MAX_TX_HASH_CHARS,
        description="a transaction hash (or SOLANA signature) of the chain",
    ),
]
AmountIn = Annotated[
    str,
    doc(
        pattern=amount_pattern(MAX_ASSET_DECIMALS),
        max_length=MAX_AMOUNT_CHARS,
        description="a decimal string in the asset, greater than zero, with at most the "
        "asset's `decimals` places (see /config)",
    ),
]
NativeFee = Annotated[
    str, doc(pattern=DECIMAL_PATTERN, description="a decimal string in the chain's native coin")
]
TxType = Annotated[str, doc(schema_extra={"enum": ["send", "receive"]})]
TxStatus = Annotated[str, doc(schema_extra={"enum": ["pending", "success", "failed"]})]


# -- request bodies --------------------------------------------------------------------------
class PlatformAssetRequest(Body):
    """`/platform/balance`, `/platform/info`, `/platform/transactions`."""

    assetId: AssetIdIn


class PlatformTxRequest(Body):
    """`/platform/txid`."""

    assetId: AssetIdIn
    txHash: TxHash


class PlatformFeeRequest(Body):
    """`/platform/fee`. `sender` is accepted and ignored: the sender is the platform wallet."""

    assetId: AssetIdIn
    recipient: Address
    sender: Annotated[str, doc(description="ignored; resolved server-side")] | None = None


class PlatformSendRequest(Body):
    """`/platform/send`."""

    schema_extra: ClassVar[dict[str, Any]] = {"allOf": DecimalsRule("amount")}

    assetId: AssetIdIn
    recipient: Address
    amount: AmountIn


class WalletAssetRequest(PlatformAssetRequest):
    """`/balance`, `/info`, `/transactions`."""

    userId: UserIdIn | None = None


class WalletTxRequest(PlatformTxRequest):
    """`/txid`."""

    userId: UserIdIn | None = None


class WalletFeeRequest(Body):
    """`/fee`: the fee of the send that would follow (`amount` refines it where it matters)."""

    schema_extra: ClassVar[dict[str, Any]] = {"allOf": DecimalsRule("amount")}

    assetId: AssetIdIn
    recipient: Address
    amount: AmountIn | None = None
    userId: UserIdIn | None = None


class WalletSendRequest(PlatformSendRequest):
    """`/send`."""

    password: PasswordIn
    userId: UserIdIn | None = None

    __repr__ = hiding("password")


# -- results ---------------------------------------------------------------------------------
class TransactionRow(Result):
    """The chain-agnostic transaction row. `type` and `amount` are null on an EVM token
    lookup whose receipt has no matching Transfer log; `date` is null while unconfirmed."""

    hash: str
    type: TxType | None
    amount: DecimalString | None
    fee: NativeFee
    status: TxStatus
    date: DateTime | None

    @classmethod
    def of(cls, row: TxRow, asset: Asset, native: Asset) -> TransactionRow:
        amount = (
            None if row.amount_units is None else format_balance(row.amount_units, asset.decimals)
        )
        return cls(
            row.hash,
            row.type,
            amount,
            fee_text(row.fee_units, native),
            row.status,
            format_optional_datetime(row.date),
        )


def transaction_rows(found: list[TxRow], asset: Asset, native: Asset) -> list[TransactionRow]:
    return [TransactionRow.of(row, asset, native) for row in found]


class WalletInfo(Result):
    address: str
    balance: DecimalString
    transactions: list[TransactionRow]

    @classmethod
    def of(cls, info: Info) -> WalletInfo:
        asset = info.asset
        return cls(
            info.address,
            format_balance(info.units, asset.decimals),
            transaction_rows(info.transactions, asset, info.native),
        )


class TronFee(Result):
    """TRON's fee: bandwidth, and energy for TRC20 transfers only."""

    bandwidth: int
    energy: int | msgspec.UnsetType = msgspec.UNSET


def fee_result(quote: FeeQuote, asset: Asset, native: Asset, fee_wire: FeeWire) -> str | TronFee:
    """`/fee`: a decimal string in `native`, the chain's coin (`fee_wire` `decimal`); the
    resources object (`resources`: TRON's bandwidth, and energy for a token) otherwise."""
    if fee_wire == "resources":
        energy = msgspec.UNSET if asset.is_native else quote.energy or 0
        return TronFee(quote.bandwidth or 0, energy)
    return fee_text(quote.native_units, native)


class SendResult(Result):
    txHash: str
    status: TxStatus
    fee: NativeFee
    feePayer: FeePayer

    @classmethod
    def of(cls, receipt: SendReceipt) -> SendResult:
        return cls(receipt.tx_hash, receipt.status, receipt.fee, receipt.fee_payer)


class HeldResult(Result):
    """A send a withdrawal policy holds for operators' approval (answered `202`): nothing
    is signed; the same request (its X-Request-Id), sent again once approved, signs and
    sends it once and answers `200` with its `txHash`."""

    txHash: Annotated[None, doc(description="null: nothing is signed yet")]
    status: Annotated[
        str,
        doc(
            schema_extra={"enum": ["awaiting_approval"]},
            description="`awaiting_approval`: retry the same request once approved",
        ),
    ]
    approvalId: Annotated[str, doc(description="the approval the operators decide (apr_...)")]
    rule: Annotated[str, doc(description="the withdrawal policy rule that holds the send")]
    approvals: Annotated[
        int, doc(schema_extra={"minimum": 0}, description="operators who approved it so far")
    ]
    required: Annotated[int, doc(ge=1, description="operators who must approve it")]
    #: when it is refused unless approved
    expiresAt: DateTime

    @classmethod
    def of(cls, receipt: HeldReceipt) -> HeldResult:
        return msgspec.convert(receipt.as_result(), cls)


class BalanceEnvelope(Envelope):
    result: DecimalString


class WalletInfoEnvelope(Envelope):
    result: WalletInfo


class TransactionsEnvelope(Envelope):
    result: list[TransactionRow]


class TransactionEnvelope(Envelope):
    result: TransactionRow


class FeeEnvelope(Envelope):
    result: DecimalString | TronFee


class SendEnvelope(Envelope):
    result: SendResult


class HeldEnvelope(Envelope):
    """`/send`'s `202`: the send waits for operators' approval."""

    result: HeldResult
