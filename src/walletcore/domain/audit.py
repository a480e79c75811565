"""The append-only audit log: who did what, under which request id, with what outcome."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class AuditEntry:
    at: datetime
    client_id: str | None
    action: str
    request_id: str
    outcome: str  # "ok" or the error status, e.g. "409"
    user_id: str | None = None
    target: str | None = None
    detail: str | None = None  # a safe, secret-free note (an error message, never a body)
