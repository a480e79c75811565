"""The append-only audit log: who did what, under which request id, with what outcome.

An entry is written with the change it records, in the same transaction (the use case
appends it in the change's unit of work, `walletcore.ports.storage`), so the log holds it
if and only if the change happened; in commit order, it can be read as an outbox of what
changed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from walletcore.domain.events import EventNote

#: The fields that hold text; the first three are required.
_REQUIRED = ("action", "request_id", "outcome")
_OPTIONAL = ("client_id", "user_id", "target", "detail")


@dataclass(frozen=True, slots=True)
class AuditEntry:
    at: datetime
    client_id: str | None
    action: str
    request_id: str
    #: "ok" (a change), "replay" (a success that changed nothing), or the error status
    outcome: str
    user_id: str | None = None
    target: str | None = None
    detail: str | None = None  # a safe, secret-free note (an error message, never a body)
    #: The event this change publishes on the client's feed (walletcore.domain.events),
    #: written by the storage with the entry, in the same transaction; None: no event.
    event: EventNote | None = None


def storable(entries: Iterable[AuditEntry]) -> tuple[AuditEntry, ...]:
    """The entries, or `TypeError` for one no store could keep (what a database's column
    types and NOT NULL refuse): stores without a schema check with this, so a change with
    a bad entry fails everywhere alike, before anything is applied."""
    checked = tuple(entries)
    for entry in checked:
        if not isinstance(entry, AuditEntry) or not isinstance(entry.at, datetime):
            raise TypeError("an audit entry needs its time")
        for name in _REQUIRED:
            if not isinstance(getattr(entry, name), str):
                raise TypeError(f"audit entry field {name} must be text")
        for name in _OPTIONAL:
            value = getattr(entry, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"audit entry field {name} must be text or None")
        if entry.event is not None and (
            not isinstance(entry.event, EventNote) or entry.client_id is None
        ):
            raise TypeError("an audit entry's event needs its client and an EventNote")
    return checked
