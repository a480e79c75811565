"""The event feed: what happened to an api client's wallets, trades and sends, in order.

A change that clients should hear of publishes an `EventNote` on its audit entry
(`AuditEntry.event`): the storage writes the event in the same transaction as the change
and its entry (a transactional outbox), so an event exists if and only if its change
committed. The storage gives each event its place in the feed (`EventPosition`): a total
order that never gains an event behind a position already read, across processes and
instances (docs/events.md). The event's id is its position written out (`evt_<x>_<n>`):
stable, unique, and the cursor a reader passes back as `after`.

Readers: `POST /events` (by cursor) and the webhook deliveries (each event once per
endpoint, in feed order), both reading the same stored events.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from walletcore.domain.errors import InvalidRequest
from walletcore.domain.times import format_datetime
from walletcore.domain.wire import JsonValue


class EventType(StrEnum):
    DEPOSIT_SEEN = "deposit.seen"
    DEPOSIT_CONFIRMED = "deposit.confirmed"
    DEPOSIT_REVERSED = "deposit.reversed"
    SEND_PENDING = "send.pending"
    SEND_SUCCESS = "send.success"
    SEND_FAILED = "send.failed"
    SEND_REPLACED = "send.replaced"
    #: a withdrawal policy holds the transfer for operators' approval (nothing signed)
    SEND_AWAITING_APPROVAL = "send.awaiting_approval"
    #: its approvals are in: the next retry of its request signs it
    SEND_APPROVED = "send.approved"
    #: an operator rejected it, or its approval ran out of time: it is never signed
    SEND_REJECTED = "send.rejected"
    TRADE_APPROVED = "trade.approved"
    TRADE_COMPLETED = "trade.completed"
    TRADE_FAILED = "trade.failed"
    TRADE_EXPIRED = "trade.expired"
    TRADE_CANCELLED = "trade.cancelled"
    SETTLEMENT_RESERVED = "settlement.reserved"
    SETTLEMENT_AWAITING_PASSWORD = "settlement.awaiting_password"
    SETTLEMENT_SHORT = "settlement.short"
    SETTLEMENT_SENT = "settlement.sent"
    SETTLEMENT_SETTLED = "settlement.settled"
    SETTLEMENT_FAILED = "settlement.failed"
    SETTLEMENT_RELEASED = "settlement.released"


@dataclass(frozen=True, slots=True)
class EventNote:
    """What a change publishes: its type and the data an integrator acts on (ids, amounts
    as decimal strings, statuses), JSON only. The client, user and time are the audit
    entry's."""

    type: EventType
    data: Mapping[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, order=True)
class EventPosition:
    """An event's place in the feed: `(tx, seq)` ordered as a tuple. `tx` is the writing
    transaction's id where the database has one that orders the feed (PostgreSQL's
    `xid8`); 0 where commits are serial (SQLite, memory). `seq` is the row's own number."""

    tx: int
    seq: int

    @property
    def event_id(self) -> str:
        return f"evt_{self.tx}_{self.seq}"


_EVENT_ID = re.compile(r"evt_([0-9]{1,20})_([0-9]{1,20})")


def parse_cursor(raw: JsonValue) -> EventPosition | None:
    """`after` as a client sent it: None (or absent) for the feed's start, or an event id
    this feed gave; anything else is a 400."""
    if raw is None:
        return None
    if not isinstance(raw, str) or (match := _EVENT_ID.fullmatch(raw)) is None:
        raise InvalidRequest("Invalid cursor: after must be an event id from this feed")
    return EventPosition(int(match.group(1)), int(match.group(2)))


@dataclass(frozen=True, slots=True)
class Event:
    """A stored event, as the feed and the webhooks serve it."""

    position: EventPosition
    client_id: str
    #: The user it concerns; None for the platform wallet's.
    user_id: str | None
    type: str
    at: datetime
    data: Mapping[str, JsonValue]

    @property
    def event_id(self) -> str:
        return self.position.event_id

    def wire(self) -> dict[str, JsonValue]:
        """The event as the feed returns it and a webhook posts it (Standard Webhooks'
        `type`, `timestamp`, `data`, plus its id and user)."""
        return {
            "id": self.event_id,
            "type": self.type,
            "timestamp": format_datetime(self.at),
            "userId": self.user_id,
            "data": dict(self.data),
        }


@dataclass(frozen=True, slots=True)
class EventPage:
    """One read of the feed: the events after the cursor, oldest first."""

    events: list[Event]
    #: True when more events were there than the page held.
    more: bool


__all__ = [
    "Event",
    "EventNote",
    "EventPage",
    "EventPosition",
    "EventType",
    "parse_cursor",
]
