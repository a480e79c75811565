"""What a send keeps in its idempotency record: the signed transaction with the figures of
its answer, and the answer a finished record replays.

`SendRecord.raw_tx` holds a `SignedSend` (JSON): the gateway's signed bytes, the hash, and
the fee and fee payer of the result, so a send resumed after a crash or a timed-out
broadcast re-broadcasts the same bytes and answers the same figures without planning again.

Format 2 adds the sender's address and user (`sender`, `userId`): what the `follow_sends`
job asks the chain with (`ChainGateway.lookup(sender, asset, txHash)`) and audits. Format 1
records still read (`sender=None`); they are not followed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from walletcore.domain.assets import Chain, FeePayer, asset_by_id
from walletcore.domain.errors import DomainError, InvalidSendTransition
from walletcore.domain.sends import SendRecord
from walletcore.ports import SignedTransfer
from walletcore.services.send_plan import Plan, fee_text

FORMAT_VERSION = 2
#: Formats `from_bytes` reads: 1 has no sender (not followed on chain).
READABLE_VERSIONS = frozenset({1, 2})
#: A send's status once the network accepted it; `/txid` follows it to `success`.
ACCEPTED_STATUS = "pending"


@dataclass(frozen=True, slots=True)
class SendReceipt:
    """The result of a send: `{txHash, status, fee, feePayer}` (fee in the native coin)."""

    tx_hash: str
    status: str
    fee: str
    fee_payer: FeePayer

    def as_result(self) -> dict[str, str]:
        return {
            "txHash": self.tx_hash,
            "status": self.status,
            "fee": self.fee,
            "feePayer": self.fee_payer.value,
        }

    @classmethod
    def from_result(cls, result: Mapping[str, Any]) -> SendReceipt:
        return cls(
            str(result["txHash"]),
            str(result["status"]),
            str(result["fee"]),
            FeePayer(result["feePayer"]),
        )


@dataclass(frozen=True, slots=True)
class SignedSend:
    chain: Chain
    asset_id: int
    tx_hash: str
    raw: bytes = field(repr=False)
    fee_units: int
    fee_payer: FeePayer
    #: The sending wallet's address on the chain (None: a format 1 record).
    sender: str | None = None
    #: The sending user (None: the platform wallet, or a format 1 record).
    user_id: str | None = None

    @classmethod
    def of(cls, plan: Plan, signed: SignedTransfer) -> SignedSend:
        return cls(
            plan.asset.chain,
            plan.asset.id,
            signed.tx_hash,
            signed.raw,
            plan.fee.native_units,
            plan.fee_payer,
            sender=plan.transfer.sender,
            user_id=plan.sender_wallet.user_id,
        )

    @property
    def followable(self) -> bool:
        """Whether the chain can be asked about it (its sender is known)."""
        return self.sender is not None

    def receipt(self) -> SendReceipt:
        fee = fee_text(self.fee_units, asset_by_id(self.asset_id))
        return SendReceipt(self.tx_hash, ACCEPTED_STATUS, fee, self.fee_payer)

    def to_bytes(self) -> bytes:
        value = {
            "v": FORMAT_VERSION,
            "chain": self.chain.value,
            "assetId": self.asset_id,
            "txHash": self.tx_hash,
            "raw": base64.b64encode(self.raw).decode("ascii"),
            "fee": self.fee_units,
            "feePayer": self.fee_payer.value,
            "sender": self.sender,
            "userId": self.user_id,
        }
        return json.dumps(value, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes | None) -> SignedSend:
        if data is None:
            raise InvalidSendTransition()  # a signed record without its transaction: a bug
        value = json.loads(data)
        if value.get("v") not in READABLE_VERSIONS:
            raise InvalidSendTransition()
        sender, user_id = value.get("sender"), value.get("userId")
        return cls(
            Chain(value["chain"]),
            int(value["assetId"]),
            str(value["txHash"]),
            base64.b64decode(value["raw"]),
            int(value["fee"]),
            FeePayer(value["feePayer"]),
            sender=None if sender is None else str(sender),
            user_id=None if user_id is None else str(user_id),
        )


class ReplayedFailure(DomainError):
    """The error a finished send answered first, answered again."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def failure_result(error: DomainError) -> dict[str, Any]:
    return {"error": {"status": error.status, "message": error.message}}


def replay(record: SendRecord) -> SendReceipt:
    """The first answer of a finished send: its receipt, or its error raised again."""
    result = record.result or {}
    error = result.get("error")
    if isinstance(error, Mapping):
        raise ReplayedFailure(int(error["status"]), str(error["message"]))
    return SendReceipt.from_result(result)


__all__ = ["ReplayedFailure", "SendReceipt", "SignedSend", "failure_result", "replay"]
