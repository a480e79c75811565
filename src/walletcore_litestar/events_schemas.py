"""The wire shapes of the event feed (`POST /events`) and of the client's deposits
(`POST /deposits`); a webhook posts the very `EventView` a feed read returns.

An event's `data` depends on its `type` (walletcore.services.event_notes); the document
describes each shape, and the stored JSON is served as it was written.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import msgspec

from walletcore.domain.deposits import Deposit
from walletcore.domain.events import Event, EventPage, EventType
from walletcore.domain.money import format_balance
from walletcore.domain.policies import ApprovalStatus
from walletcore.domain.times import format_datetime, format_optional_datetime
from walletcore_litestar.wire import (
    Body,
    DateTime,
    DecimalString,
    Envelope,
    Result,
    UserIdIn,
    doc,
)

EventId = Annotated[
    str,
    doc(
        pattern=r"^evt_[0-9]{1,20}_[0-9]{1,20}$",
        description="the event's id: stable, unique, and the cursor to read on from",
    ),
]
LimitIn = Annotated[int, doc(ge=1, le=1000, description="events (deposits) per page, default 100")]

_TEXT = {"type": "string"}
_TEXT_OR_NULL = {"type": ["string", "null"]}
_INT = {"type": "integer"}
_DECIMAL = {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?$"}
_DECIMAL_OR_NULL = {"type": ["string", "null"], "pattern": r"^[0-9]+(\.[0-9]+)?$"}


def _shape(title: str, required: dict[str, Any], optional: dict[str, Any]) -> dict[str, Any]:
    return {
        "title": title,
        "type": "object",
        "required": sorted(required),
        "properties": {**required, **optional},
    }


#: `data` of each family of events (docs/events.md).
TRADE_DATA = _shape(
    "TradeEventData",
    {
        "tradeId": _TEXT,
        "side": {"type": "string", "enum": ["buy", "sell"]},
        "assetId": _INT,
        "symbol": _TEXT,
        "fiat": _TEXT,
        "status": _TEXT,
        "cryptoAmount": _DECIMAL_OR_NULL,
        "fiatAmount": _DECIMAL_OR_NULL,
        "price": _DECIMAL_OR_NULL,
        "approvedAt": _TEXT_OR_NULL,
        "completedAt": _TEXT_OR_NULL,
    },
    {"reference": _TEXT, "reason": _TEXT},
)
SEND_DATA = _shape(
    "SendEventData",
    {
        "requestId": _TEXT,
        "chain": _TEXT,
        "assetId": _INT,
        "txHash": _TEXT,
        "from": _TEXT_OR_NULL,
        "to": _TEXT_OR_NULL,
        "amount": _DECIMAL_OR_NULL,
        "maxFee": _DECIMAL,
        "feePayer": _TEXT,
        "wallet": {"type": "string", "enum": ["user", "platform"]},
    },
    {"replaces": _TEXT},
)
DEPOSIT_DATA = _shape(
    "DepositEventData",
    {
        "depositId": _TEXT,
        "chain": _TEXT,
        "assetId": _INT,
        "symbol": _TEXT_OR_NULL,
        "amount": _DECIMAL,
        "address": _TEXT,
        "wallet": {"type": "string", "enum": ["user", "platform"]},
        "txHash": _TEXT,
        "position": _TEXT,
        "from": _TEXT_OR_NULL,
        "status": {"type": "string", "enum": ["seen", "confirmed", "reversed"]},
        "blockHeight": {"type": ["integer", "null"]},
        "blockHash": _TEXT_OR_NULL,
    },
    {},
)

APPROVAL_DATA = _shape(
    "ApprovalEventData",
    {
        "approvalId": _TEXT,
        "requestId": _TEXT,
        "assetId": _INT,
        "amount": _DECIMAL,
        "recipient": _TEXT,
        "rule": _TEXT,
        "required": _INT,
        "approvals": _INT,
        "status": {"type": "string", "enum": [s.value for s in ApprovalStatus]},
    },
    {},
)


class EventsRequest(Body):
    """`/events`: read on after `after` (none: from the oldest event kept)."""

    after: EventId | None = None
    limit: LimitIn | None = None
    userId: (
        Annotated[
            str,
            doc(
                pattern=r"^[0-9a-fA-F]{24}$",
                description="only this user's events (or X-USER-ID); none: every user's and "
                "the platform wallet's",
            ),
        ]
        | None
    ) = None


class EventView(msgspec.Struct, gc=False):
    """One event: `type` says what happened, `data` carries what to act on."""

    schema_extra: ClassVar[dict[str, Any]] = {
        "properties": {
            "type": {"type": "string", "enum": [t.value for t in EventType]},
            "data": {"anyOf": [TRADE_DATA, SEND_DATA, DEPOSIT_DATA, APPROVAL_DATA]},
        }
    }

    id: EventId
    type: str
    timestamp: DateTime
    userId: Annotated[
        str | None,
        doc(description="the user the event concerns; null for the platform wallet's"),
    ]
    data: dict[str, Any]

    @classmethod
    def of(cls, event: Event) -> EventView:
        return cls(
            event.event_id, event.type, format_datetime(event.at), event.user_id, dict(event.data)
        )


class EventPageView(Result):
    events: list[EventView]
    #: The cursor to pass as `after` next: the last event's id (the one given when empty).
    next: Annotated[
        str | None,
        doc(description="pass as `after` to read on; null before the feed has any event"),
    ]
    hasMore: Annotated[bool, doc(description="more events are there now: read again at once")]

    @classmethod
    def of(cls, page: EventPage, after: str | None) -> EventPageView:
        events = [EventView.of(e) for e in page.events]
        return cls(events, events[-1].id if events else after, page.more)


class EventsEnvelope(Envelope):
    result: EventPageView


class DepositsRequest(Body):
    """`/deposits`: the newest deposits, of one user or of every wallet of the client."""

    userId: UserIdIn | None = None
    limit: LimitIn | None = None


class DepositView(Result):
    depositId: str
    userId: str | None
    wallet: str
    chain: str
    assetId: int
    amount: DecimalString
    address: str
    txHash: str
    position: str
    sender: str | None
    status: Annotated[str, doc(schema_extra={"enum": ["seen", "confirmed", "reversed"]})]
    blockHeight: int | None
    seenAt: DateTime
    confirmedAt: DateTime | None
    reversedAt: DateTime | None

    @classmethod
    def of(cls, deposit: Deposit, decimals: int) -> DepositView:
        return cls(
            deposit.deposit_id,
            deposit.user_id,
            deposit.owner.value,
            str(deposit.chain),
            deposit.asset_id,
            format_balance(deposit.amount_units, decimals),
            deposit.address,
            deposit.tx_hash,
            deposit.position,
            deposit.sender,
            deposit.status.value,
            None if deposit.block is None else deposit.block.height,
            format_datetime(deposit.seen_at),
            format_optional_datetime(deposit.confirmed_at),
            format_optional_datetime(deposit.reversed_at),
        )


class DepositsEnvelope(Envelope):
    result: list[DepositView]


__all__ = [
    "DepositView",
    "DepositsEnvelope",
    "DepositsRequest",
    "EventPageView",
    "EventView",
    "EventsEnvelope",
    "EventsRequest",
]
