"""What a send keeps in its idempotency record: the signed transaction with the figures of
its answer, and the answer a finished record replays.

`SendRecord.raw_tx` holds a `SignedSend` (JSON): the gateway's signed bytes, the hash, and
the fee and fee payer of the result, so a send resumed after a crash or a timed-out
broadcast re-broadcasts the same bytes and answers the same figures without planning again.

Format 2 adds the sender's address and user (`sender`, `userId`): what the `follow_sends`
job asks the chain with (`ChainGateway.lookup(sender, asset, txHash)`) and audits. Format 1
records still read (`sender=None`); they are not followed.

Format 3 adds the transfer's lifecycle (docs/transfers.md): what it is (`recipient`,
`amount`, `feePayerAddress`: a re-signed transaction is built from them), what its current
transaction is (`kind`, `at`), the transactions it had before (`earlier`) and the rungs of
its pre-signed ladder not broadcast yet (`ladder`). `txHash`, `raw` and `fee` are always the
current transaction's: a replay answers them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from walletcore.domain.assets import Asset, Chain, FeePayer
from walletcore.domain.errors import DomainError, InvalidSendTransition
from walletcore.domain.sends import SendRecord
from walletcore.ports import SignedTransfer
from walletcore.services.send_plan import Plan, fee_text

FORMAT_VERSION = 3
#: Formats `from_bytes` reads: 1 has no sender (not followed on chain); 2 has no lifecycle
#: (no ladder; not re-signed: it lacks the transfer's recipient and amount).
READABLE_VERSIONS = frozenset({1, 2, 3})
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
class Attempt:
    """One transaction of a transfer: the first one (`send`), a rung of its pre-signed
    ladder (`bump`, `cancel`), or a re-signed one (`resign`). `at`: when it became the
    transfer's current transaction (None: a rung not broadcast yet)."""

    kind: str
    tx_hash: str
    raw: bytes = field(repr=False)
    fee_units: int
    at: datetime | None = None

    def signed(self) -> SignedTransfer:
        return SignedTransfer(self.raw, self.tx_hash)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "txHash": self.tx_hash,
            "raw": base64.b64encode(self.raw).decode("ascii"),
            "fee": self.fee_units,
            "at": None if self.at is None else self.at.isoformat(),
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Attempt:
        at = value.get("at")
        return cls(
            str(value["kind"]),
            str(value["txHash"]),
            base64.b64decode(value["raw"]),
            int(value["fee"]),
            None if at is None else datetime.fromisoformat(at),
        )


@dataclass(frozen=True, slots=True)
class SignedSend:
    chain: Chain
    asset_id: int
    #: The transfer's current transaction: its hash, bytes and most fee (native units).
    tx_hash: str
    raw: bytes = field(repr=False)
    fee_units: int
    fee_payer: FeePayer
    #: The sending wallet's address on the chain (None: a format 1 record).
    sender: str | None = None
    #: The sending user (None: the platform wallet, or a format 1 record).
    user_id: str | None = None
    # -- format 3: the transfer's lifecycle (docs/transfers.md) ---------------------------
    #: What the transfer is: a re-signed transaction is built from these.
    recipient: str | None = None
    amount_units: int | None = None
    #: The address whose native coin pays the fee (the sender, or the platform's).
    fee_payer_address: str | None = None
    #: What the current transaction is (`send`, `bump`, `cancel`, `resign`), and since when.
    kind: str = "send"
    at: datetime | None = None
    #: The transactions it had before, oldest first (each may still be the one mined).
    earlier: tuple[Attempt, ...] = ()
    #: The pre-signed rungs not broadcast yet, in order of rising fee.
    ladder: tuple[Attempt, ...] = field(default=(), repr=False)

    @classmethod
    def of(
        cls,
        plan: Plan,
        signed: SignedTransfer,
        *,
        at: datetime | None = None,
        ladder: tuple[Attempt, ...] = (),
    ) -> SignedSend:
        """The record of a transfer just signed (replacements: `moved_to`)."""
        return cls(
            plan.asset.chain,
            plan.asset.id,
            signed.tx_hash,
            signed.raw,
            plan.fee.native_units,
            plan.fee_payer,
            sender=plan.transfer.sender,
            user_id=plan.sender_wallet.user_id,
            recipient=plan.transfer.recipient,
            amount_units=plan.transfer.amount_units,
            fee_payer_address=plan.transfer.fee_payer,
            at=at,
            ladder=ladder,
        )

    @property
    def followable(self) -> bool:
        """Whether the chain can be asked about it (its sender is known)."""
        return self.sender is not None

    @property
    def current(self) -> Attempt:
        return Attempt(self.kind, self.tx_hash, self.raw, self.fee_units, self.at)

    @property
    def attempts(self) -> tuple[Attempt, ...]:
        """Every transaction it had, the current one first, then the newest earlier."""
        return (self.current, *reversed(self.earlier))

    @property
    def cancelled(self) -> bool:
        return self.kind == "cancel"

    def next_rung(self, kind: str) -> Attempt | None:
        """The cheapest pre-signed rung of `kind` left."""
        return next((r for r in self.ladder if r.kind == kind), None)

    def moved_to(self, attempt: Attempt, at: datetime) -> SignedSend:
        """The transfer with `attempt` as its current transaction: a rung of the ladder
        (it and the cheaper rungs leave the ladder), a re-signed transaction, or an
        earlier transaction found mined. The current one joins `earlier`."""
        earlier = tuple(e for e in (*self.earlier, self.current) if e.tx_hash != attempt.tx_hash)
        ladder = self.ladder
        if attempt in ladder:
            index = ladder.index(attempt)
            ladder = tuple(r for r in ladder[index + 1 :] if r.fee_units > attempt.fee_units)
        elif attempt.kind == "resign":
            ladder = ()  # a rung of another transaction cannot replace this one
        return replace(
            self,
            tx_hash=attempt.tx_hash,
            raw=attempt.raw,
            fee_units=attempt.fee_units,
            kind=attempt.kind,
            at=attempt.at or at,
            earlier=earlier,
            ladder=ladder,
        )

    def receipt(self, native: Asset, status: str = ACCEPTED_STATUS) -> SendReceipt:
        """The answer of the send; `native`: its chain's coin, the fee's unit."""
        fee = fee_text(self.fee_units, native)
        return SendReceipt(self.tx_hash, status, fee, self.fee_payer)

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
            "recipient": self.recipient,
            "amount": None if self.amount_units is None else str(self.amount_units),
            "feePayerAddress": self.fee_payer_address,
            "kind": self.kind,
            "at": None if self.at is None else self.at.isoformat(),
            "earlier": [a.to_json() for a in self.earlier],
            "ladder": [a.to_json() for a in self.ladder],
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
        amount, at = value.get("amount"), value.get("at")
        payer = value.get("feePayerAddress")
        recipient = value.get("recipient")
        return cls(
            Chain(value["chain"]),
            int(value["assetId"]),
            str(value["txHash"]),
            base64.b64decode(value["raw"]),
            int(value["fee"]),
            FeePayer(value["feePayer"]),
            sender=None if sender is None else str(sender),
            user_id=None if user_id is None else str(user_id),
            recipient=None if recipient is None else str(recipient),
            amount_units=None if amount is None else int(amount),
            fee_payer_address=None if payer is None else str(payer),
            kind=str(value.get("kind", "send")),
            at=None if at is None else datetime.fromisoformat(at),
            earlier=tuple(Attempt.from_json(a) for a in value.get("earlier", ())),
            ladder=tuple(Attempt.from_json(a) for a in value.get("ladder", ())),
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
