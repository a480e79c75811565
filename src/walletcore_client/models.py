"""The results of the walletcore API as frozen dataclasses.

Field names are the wire's (camelCase), so a field reads as the contract and the
OpenAPI document name it. Every amount, balance, fee and price is a `Decimal` (parsed
from the JSON text without passing through a float), every timestamp an aware
`datetime` (UTC). A field the wire may omit defaults to None. Fields that are not on the
wire (`request_id`) are marked `WIRE_NAME: False` in their metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

#: metadata key of a field that is not a wire field
WIRE = "wire"
_LOCAL: dict[str, Any] = {WIRE: False}

#: trade statuses after which nothing changes
TERMINAL_TRADE_STATUSES = frozenset({"completed", "failed", "expired", "cancelled"})


@dataclass(frozen=True)
class Token:
    """A bearer token from `/auth` (never shown in a repr)."""

    token: str = field(repr=False)
    expiresAt: datetime


@dataclass(frozen=True)
class FiatPrices:
    """Indicative prices of one coin (the `/prices` map's values)."""

    USD: Decimal
    EUR: Decimal
    GBP: Decimal
    CAD: Decimal


@dataclass(frozen=True)
class ConfigAsset:
    assetId: int
    chain: str
    symbol: str
    kind: str
    decimals: int
    feePayer: str
    standard: str | None = None


@dataclass(frozen=True)
class ClientConfig:
    feePayer: str
    assets: tuple[ConfigAsset, ...]


@dataclass(frozen=True)
class TradeQuote:
    cryptoAmount: Decimal | None
    fiatAmount: Decimal | None
    price: Decimal
    expiresAt: datetime


@dataclass(frozen=True)
class Settlement:
    """A trade's coins on chain (docs/settlement.md)."""

    status: str
    amount: Decimal
    updatedAt: datetime
    txHash: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Trade:
    tradeId: str
    side: str
    status: str
    assetId: int
    symbol: str
    fiat: str
    cryptoAmount: Decimal | None
    fiatAmount: Decimal | None
    price: Decimal
    quote: TradeQuote
    createdAt: datetime
    approvedAt: datetime | None
    completedAt: datetime | None
    reference: str | None = None
    failureReason: str | None = None
    settlement: Settlement | None = None

    @property
    def is_terminal(self) -> bool:
        """`completed`, `failed`, `expired` or `cancelled`: nothing changes any more."""
        return self.status in TERMINAL_TRADE_STATUSES


@dataclass(frozen=True)
class CreatedWallet:
    """`/create`'s answer. The mnemonic is shown once by the service; it is never in a repr."""

    userId: str
    addresses: dict[str, str]
    mnemonic: str = field(repr=False)


@dataclass(frozen=True)
class WalletAddresses:
    userId: str
    addresses: dict[str, str]


@dataclass(frozen=True)
class Transaction:
    """A transaction row (chain-agnostic)."""

    hash: str
    type: str | None
    amount: Decimal | None
    fee: Decimal
    status: str
    date: datetime | None


@dataclass(frozen=True)
class WalletInfo:
    address: str
    balance: Decimal
    transactions: tuple[Transaction, ...]


@dataclass(frozen=True)
class TronFee:
    bandwidth: int
    energy: int | None = None


@dataclass(frozen=True)
class SendResult:
    """A send the service signed and broadcast (or replayed: the same request id)."""

    txHash: str
    status: str
    fee: Decimal
    feePayer: str
    #: the `X-Request-Id` of the send: send again with it, never with a new one
    request_id: str = field(default="", metadata=_LOCAL)


@dataclass(frozen=True)
class HeldSend:
    """A send a withdrawal policy holds for operators' approval (`202`): nothing was
    signed. Sending the same request (same `request_id`, same body) again after the
    approval signs it once (`wait_for_send`)."""

    txHash: None
    status: str
    approvalId: str
    rule: str
    approvals: int
    required: int
    expiresAt: datetime
    request_id: str = field(default="", metadata=_LOCAL)


@dataclass(frozen=True)
class Event:
    """One event of the feed; `id` is its cursor. `data` is the event's JSON as served
    (its numbers as `Decimal`, its amounts as decimal strings)."""

    id: str
    type: str
    timestamp: datetime
    userId: str | None
    data: dict[str, Any]


@dataclass(frozen=True)
class EventPage:
    events: tuple[Event, ...]
    next: str | None
    hasMore: bool


@dataclass(frozen=True)
class Deposit:
    depositId: str
    userId: str | None
    wallet: str
    chain: str
    assetId: int
    amount: Decimal
    address: str
    txHash: str
    position: str
    sender: str | None
    status: str
    blockHeight: int | None
    seenAt: datetime
    confirmedAt: datetime | None
    reversedAt: datetime | None


@dataclass(frozen=True)
class Delivery:
    """One attempt to post an event to the client's webhook endpoint."""

    eventId: str
    attempt: int
    at: datetime
    status: int | None
    error: str | None
    result: str
    seconds: float
    nextAttemptAt: datetime | None


@dataclass(frozen=True)
class PolicyVersion:
    version: int
    setAt: datetime
    effectiveAt: datetime
    policy: dict[str, Any]


@dataclass(frozen=True)
class AllowlistEntry:
    chain: str
    address: str
    assetId: int | None
    label: str
    addedAt: datetime
    usableAt: datetime


@dataclass(frozen=True)
class Policy:
    inForce: PolicyVersion | None
    pending: tuple[PolicyVersion, ...]
    allowlist: tuple[AllowlistEntry, ...]


@dataclass(frozen=True)
class Approval:
    """A send held for approval, as the api client sees it (never the operators' names)."""

    id: str
    requestId: str
    status: str
    rule: str
    required: int
    approvals: int
    assetId: int
    amount: Decimal
    recipient: str
    createdAt: datetime
    expiresAt: datetime
    decidedAt: datetime | None
