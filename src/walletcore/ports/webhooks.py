"""Ports of the webhooks (walletcore.domain.webhooks): the sender that posts one signed
message, the store of the endpoints and their delivery log (`unit.webhooks`), and the
sealing of their secrets.

Rules every `WebhookStore` keeps (`walletcore.testing.contracts.WebhookStorageContract`):
- One endpoint per api client. `put` writes what the operator sets (URL, secrets, paused,
  disabled); the delivery state (cursor, attempts, next attempt, lease) is written only by
  `advance`, `claim` and `replay`, each a compare-and-set, so an operator's change never
  sets a cursor back and a worker's never undoes an operator's.
- In a write unit `get` reads the endpoint for update (PostgreSQL `FOR UPDATE`; SQLite's
  write unit holds the write lock): a delivery racing an operator's change waits for it.
- `claim` leases each due endpoint to one worker (compare-and-set on the lease): two
  workers never deliver to one endpoint at once. `advance` succeeds only for the lease's
  holder at the cursor it read; a replay in between (which drops the lease) makes it fail.
- The delivery log is append-only, newest first when read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from walletcore.domain.events import EventPosition
from walletcore.domain.webhooks import (
    DeliveryAttempt,
    DeliveryError,
    WebhookEndpoint,
    WebhookSecret,
)


@dataclass(frozen=True, slots=True)
class WebhookMessage:
    """One message to post: `webhook-id`, `webhook-timestamp` and the JSON body, signed as
    Standard Webhooks v1 says (`{id}.{timestamp}.{body}`)."""

    msg_id: str
    timestamp: datetime
    body: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class SendOutcome:
    """What one POST got: the HTTP status, or the error kind when there was none."""

    status: int | None
    error: DeliveryError | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def gone(self) -> bool:
        return self.status == 410


class WebhookSender(Protocol):
    """Posts signed messages (Standard Webhooks v1): `webhook-id`, `webhook-timestamp`
    (Unix seconds) and `webhook-signature` (`v1,<base64 HMAC-SHA256>` per secret, space
    separated), `Content-Type: application/json`.

    Never raises for what the endpoint or the network did: a timeout, a refused
    connection, a name that resolves inside (unless allowed), a TLS failure are outcomes
    (`SendOutcome.error`). Follows no redirect (a 3xx is a status like any other), reads
    no more of the answer than a small cap, and never logs the body or a secret.
    Adapters with connections implement `Lifecycle` too."""

    async def post(
        self, url: str, message: WebhookMessage, secrets: Sequence[WebhookSecret]
    ) -> SendOutcome: ...


@runtime_checkable
class SecretSealer(Protocol):
    """Seals secrets kept at rest under the deployment's master key (the sealed KeyStore
    implements it). Synchronous: no password, no key derivation, microseconds."""

    def seal_secret(self, secret: bytes) -> bytes:
        """The sealed record of `secret`."""
        ...

    def open_secret(self, sealed: bytes) -> bytes:
        """The secret of a record `seal_secret` made; an error (never the secret) for a
        damaged one or one sealed under another key."""
        ...


class WebhookStore(Protocol):
    """The api clients' webhook endpoints and their delivery log (module rules)."""

    async def get(self, client_id: str) -> WebhookEndpoint | None:
        """The client's endpoint; in a write unit, read for update."""
        ...

    async def put(self, endpoint: WebhookEndpoint) -> None:
        """Store the endpoint: a new one whole; over a stored one, what the operator sets
        (`url`, the secrets and `previous_until`, `paused`, `disabled_*`, `updated_at`),
        the stored delivery state kept."""
        ...

    async def claim(
        self, now: datetime, *, owner: str, until: datetime, limit: int
    ) -> list[WebhookEndpoint]:
        """Lease to `owner` until `until` at most `limit` endpoints due at `now` (active,
        next attempt due, no live lease), the longest due first; each by compare-and-set,
        so an endpoint another worker claimed first is left out. The endpoints as leased."""
        ...

    async def advance(
        self, current: WebhookEndpoint, new: WebhookEndpoint
    ) -> WebhookEndpoint | None:
        """Store `new`'s delivery state (cursor, attempts, next attempt, lease) and, for a
        `410 Gone`, its `disabled_*`, if the stored endpoint still has `current`'s lease
        owner and cursor. The stored endpoint after the move (with any change the operator
        made meanwhile), or None: the lease or the cursor moved on, nothing written."""
        ...

    async def replay(self, client_id: str, cursor: EventPosition | None, now: datetime) -> bool:
        """Set the cursor back to `cursor` (None: before every event), the head due at
        `now`, its attempts at 0 and the lease dropped, if the stored cursor is after it:
        only backwards. False (nothing written): no endpoint, or not behind its cursor."""
        ...

    async def record(self, attempt: DeliveryAttempt) -> None:
        """Append one attempt to the delivery log."""
        ...

    async def attempts(
        self, client_id: str, *, event_id: str | None = None, limit: int
    ) -> list[DeliveryAttempt]:
        """The client's attempts (at one event when `event_id` is given), newest first,
        at most `limit`."""
        ...

    async def prune(self, before: datetime, limit: int) -> int:
        """Delete at most `limit` attempts older than `before`, oldest first; how many."""
        ...


__all__ = [
    "SecretSealer",
    "SendOutcome",
    "WebhookMessage",
    "WebhookSender",
    "WebhookStore",
]
