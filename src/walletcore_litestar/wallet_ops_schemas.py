"""Wire shapes of the wallet operations (`/balance` ... `/send`, `/platform/...`) for OpenAPI.

Same rules as `schemas.py`: request bodies check JSON types only (the core checks values and
answers clear 400s); result Structs describe the dicts of `walletcore.views`.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar.openapi.datastructures import ResponseSpec

from walletcore_litestar.schemas import (
    _BODY,
    AssetIdNumber,
    AssetIdString,
    DateTime,
    DecimalString,
    ErrorEnvelope,
    RequestId,
    UserIdIn,
    doc,
)

AssetIdIn = AssetIdNumber | AssetIdString
Address = Annotated[
    str,
    doc(
        max_length=128,
        description="an address on the asset's chain, checked per chain (checksum, network)",
    ),
]
TxHash = Annotated[str, doc(max_length=128, description="a transaction hash of the chain")]
Password = Annotated[
    str, doc(max_length=256, description="the wallet password chosen at /create; never stored")
]
TxType = Annotated[str, doc(schema_extra={"enum": ["send", "receive"]})]
TxStatus = Annotated[str, doc(schema_extra={"enum": ["pending", "success", "failed"]})]
FeePayerName = Annotated[str, doc(schema_extra={"enum": ["USER", "PLATFORM"]})]


# -- request bodies --------------------------------------------------------------------------
class WalletAssetRequest(msgspec.Struct, **_BODY):
    """`/balance`, `/info`, `/transactions`."""

    userId: UserIdIn | None = None
    assetId: AssetIdIn | None = None


class WalletTxRequest(msgspec.Struct, **_BODY):
    """`/txid`."""

    userId: UserIdIn | None = None
    assetId: AssetIdIn | None = None
    txHash: TxHash | None = None


class WalletFeeRequest(msgspec.Struct, **_BODY):
    """`/fee`: the fee of the send that would follow."""

    userId: UserIdIn | None = None
    assetId: AssetIdIn | None = None
    recipient: Address | None = None
    amount: DecimalString | None = None


class WalletSendRequest(msgspec.Struct, **_BODY):
    """`/send`."""

    userId: UserIdIn | None = None
    assetId: AssetIdIn | None = None
    recipient: Address | None = None
    amount: DecimalString | None = None
    password: Password | None = None


class PlatformAssetRequest(msgspec.Struct, **_BODY):
    """`/platform/balance`, `/platform/info`, `/platform/transactions`."""

    assetId: AssetIdIn | None = None


class PlatformTxRequest(msgspec.Struct, **_BODY):
    assetId: AssetIdIn | None = None
    txHash: TxHash | None = None


class PlatformFeeRequest(msgspec.Struct, **_BODY):
    """`sender` is accepted and ignored: the sender is the platform wallet."""

    assetId: AssetIdIn | None = None
    recipient: Address | None = None
    sender: (
        Annotated[str, doc(description="ignored; the sender is resolved server-side")] | None
    ) = None


class PlatformSendRequest(msgspec.Struct, **_BODY):
    assetId: AssetIdIn | None = None
    recipient: Address | None = None
    amount: DecimalString | None = None


REQUEST_BODY_SCHEMAS = (
    "WalletAssetRequest",
    "WalletTxRequest",
    "WalletFeeRequest",
    "WalletSendRequest",
    "PlatformAssetRequest",
    "PlatformTxRequest",
    "PlatformFeeRequest",
    "PlatformSendRequest",
)


# -- results ---------------------------------------------------------------------------------
class TransactionRow(msgspec.Struct):
    """The chain-agnostic transaction row; `fee` in the chain's native coin."""

    hash: str
    type: TxType | None
    amount: DecimalString | None
    fee: DecimalString
    status: TxStatus
    date: DateTime | None


class WalletInfo(msgspec.Struct):
    address: str
    balance: DecimalString
    transactions: list[TransactionRow]


class TronFee(msgspec.Struct):
    """TRON's fee: bandwidth, and energy for TRC20 transfers only."""

    bandwidth: int
    energy: int | msgspec.UnsetType = msgspec.UNSET


class SendResult(msgspec.Struct):
    txHash: str
    status: TxStatus
    fee: Annotated[str, doc(pattern=r"^[0-9]+(\.[0-9]+)?$", description="in the native coin")]
    feePayer: FeePayerName


class BalanceEnvelope(msgspec.Struct):
    result: DecimalString
    requestId: RequestId


class WalletInfoEnvelope(msgspec.Struct):
    result: WalletInfo
    requestId: RequestId


class TransactionsEnvelope(msgspec.Struct):
    result: list[TransactionRow]
    requestId: RequestId


class TransactionEnvelope(msgspec.Struct):
    result: TransactionRow
    requestId: RequestId


class FeeEnvelope(msgspec.Struct):
    result: DecimalString | TronFee
    requestId: RequestId


class SendEnvelope(msgspec.Struct):
    result: SendResult
    requestId: RequestId


# -- error responses ---------------------------------------------------------------------------
_ERROR_MEANING = {
    400: "Invalid request (body, headers, recipient address, amount, balance, Bitcoin wrong "
    "password); the message says which",
    401: "`Missing or expired token`; on /send a wrong wallet password (`Invalid credentials` "
    "on EVM and TRON, `Invalid password` on SOLANA)",
    403: "Asset not enabled for the api client (permanent, do not retry)",
    404: "No such user; no platform wallet yet; no such transaction; on Bitcoin balance, the "
    "address is unknown to the indexer",
    409: "A send with this X-Request-Id is still in progress; retry it later",
    422: "This X-Request-Id was already used with a different request",
    502: "The network refused the transfer; nothing was sent",
    503: "Asset not available on this endpoint (permanent), or history unreadable now "
    "(transient); the message says which",
    504: "Broadcast outcome unknown: retry with the same X-Request-Id (the same transaction "
    "is sent again, never a new one)",
}


def wallet_errors(*statuses: int) -> dict[int, ResponseSpec]:
    return {
        status: ResponseSpec(data_container=ErrorEnvelope, description=_ERROR_MEANING[status])
        for status in sorted({400, *statuses})
    }
