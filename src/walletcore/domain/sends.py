"""The idempotency record of a send: one per (api client, X-Request-Id), moved through
recovery points so a retried or crashed send never signs or broadcasts twice.

States (recovery points), each committed before the next side effect:

    started --sign, commit raw tx + hash--> signed --broadcast--> broadcast --> finished
       \\______________________________________________________________________/^
                         (any state may finish, e.g. with an error result)

- The record of a request in flight carries a lease (`locked_until`). A second request with
  the same X-Request-Id while the lease is live is a 409 (`IdempotencyConflict`); after the
  lease lapsed (the first process crashed) it takes the record over and resumes from the
  last recovery point.
- `attempt` is the fencing token: every takeover bumps it, and a record only advances
  while the stored attempt is the caller's, so a slow process that lost its lease cannot
  store a second signed transaction.
- A different request under a used X-Request-Id is a 422 (`IdempotencyKeyReused`).
- A finished record is returned as it is: the caller replays its stored `result`.
- A send finished with the network's acceptance is followed on chain (`chain_status`):
  `pending` (or `stuck`, `dropped`), then once `success` or `failed` (the `follow_sends`
  job, walletcore.jobs, by compare-and-set: `tracked`, stored by `SendStore.track`).
  Separate from `state`, which is about the request: a finished request's transaction may
  still be pending on chain.

See docs/idempotency.md for the design and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from walletcore.domain.errors import (
    IdempotencyConflict,
    IdempotencyKeyReused,
    InvalidRequest,
    InvalidSendTransition,
)

#: How long a request may hold a send record before another request may take it over.
#: Safety does not depend on it (see `attempt`); only how soon a crashed send resumes.
SEND_LEASE = timedelta(seconds=60)
#: Longest X-Request-Id (and fingerprint) kept; longer ones are a 400.
MAX_REQUEST_ID_LENGTH = 255
MAX_FINGERPRINT_LENGTH = 128


class ChainStatus(StrEnum):
    """Where a followed send stands on chain (docs/transfers.md).

    `pending`, `success` and `failed` are the spec's transaction statuses; `stuck` (pending
    longer than the chain's time: bumped when a rung is left) and `dropped` (the node lost
    it, or it expired: re-broadcast, re-filled or re-signed) are internal and read as
    `pending` on the wire (`public`)."""

    PENDING = "pending"
    STUCK = "stuck"
    DROPPED = "dropped"
    SUCCESS = "success"
    FAILED = "failed"

    @property
    def is_final(self) -> bool:
        return self is ChainStatus.SUCCESS or self is ChainStatus.FAILED

    @property
    def public(self) -> str:
        """The spec's status it reads as: `pending`, `success` or `failed`."""
        return self.value if self.is_final else ChainStatus.PENDING.value


class SendState(StrEnum):
    STARTED = "started"
    SIGNED = "signed"
    BROADCAST = "broadcast"
    FINISHED = "finished"


_NEXT: dict[SendState, frozenset[SendState]] = {
    SendState.STARTED: frozenset({SendState.SIGNED, SendState.FINISHED}),
    SendState.SIGNED: frozenset({SendState.BROADCAST, SendState.FINISHED}),
    SendState.BROADCAST: frozenset({SendState.FINISHED}),
    SendState.FINISHED: frozenset(),
}


@dataclass(frozen=True, slots=True)
class Spend:
    """What a user's send takes out of the wallet: `units` of `asset_id` (the amount; a
    USER native send's fee is inside it)."""

    user_id: str
    asset_id: int
    units: int


@dataclass(frozen=True, slots=True)
class SendRecord:
    client_id: str
    request_id: str
    #: A digest of the request (endpoint, user, asset, recipient, amount...), never of a
    #: secret: the same X-Request-Id with another fingerprint is a different request.
    fingerprint: str
    state: SendState
    created_at: datetime
    updated_at: datetime
    #: The lease of the request working on it; None once finished or released.
    locked_until: datetime | None
    #: Fencing token: bumped by every takeover of the lease.
    attempt: int = 1
    tx_hash: str | None = None
    #: The signed transaction, kept so a resumed send re-broadcasts it instead of signing
    #: another one.
    raw_tx: bytes | None = field(default=None, repr=False)
    #: The stored outcome (a JSON object) a finished record replays.
    result: Mapping[str, Any] | None = None
    #: The transaction on chain: `pending` from the finish of a send the network accepted,
    #: then `success` or `failed` once (the `follow_sends` job); None: not followed (an
    #: error result, or a record without its sender's address: signed before format 2).
    chain_status: ChainStatus | None = None
    #: When the job last asked the chain about it (the finish, at first): the job asks
    #: the least recently checked first, so sends that stay pending do not starve others.
    chain_checked_at: datetime | None = None
    #: When it reached `success` or `failed`.
    chain_final_at: datetime | None = None
    #: What a user's send takes out of the wallet (set when signed): counted against a
    #: sell's approval while the transfer is in flight (walletcore.domain.settlement)
    spend: Spend | None = None

    @classmethod
    def start(
        cls,
        client_id: str,
        request_id: str,
        fingerprint: str,
        now: datetime,
        lease: timedelta = SEND_LEASE,
    ) -> SendRecord:
        """A new record, leased to the request that creates it."""
        if not request_id:
            raise InvalidRequest("X-Request-Id is required")
        if len(request_id) > MAX_REQUEST_ID_LENGTH:
            raise InvalidRequest(f"X-Request-Id is longer than {MAX_REQUEST_ID_LENGTH} characters")
        if not fingerprint or len(fingerprint) > MAX_FINGERPRINT_LENGTH:
            raise InvalidSendTransition()  # the service computes it: a bug, not a 400
        return cls(
            client_id=client_id,
            request_id=request_id,
            fingerprint=fingerprint,
            state=SendState.STARTED,
            created_at=now,
            updated_at=now,
            locked_until=now + lease,
        )

    # -- reading ---------------------------------------------------------------------
    @property
    def is_finished(self) -> bool:
        return self.state is SendState.FINISHED

    def is_locked(self, now: datetime) -> bool:
        """A request holds the lease: another one with this X-Request-Id must wait."""
        return self.locked_until is not None and now < self.locked_until

    # -- what begin_send does with a stored record -------------------------------------
    def claim(self, fingerprint: str, now: datetime, lease: timedelta = SEND_LEASE) -> SendRecord:
        """The record a new request with this X-Request-Id gets.

        Finished: itself (replay its result). In flight: 409. Lease lapsed or released:
        taken over with the next attempt, to resume from `state`.
        """
        if fingerprint != self.fingerprint:
            raise IdempotencyKeyReused()
        if self.is_finished:
            return self
        if self.is_locked(now):
            raise IdempotencyConflict()
        return replace(self, attempt=self.attempt + 1, locked_until=now + lease, updated_at=now)

    # -- recovery points ---------------------------------------------------------------
    def signed(
        self,
        raw_tx: bytes,
        tx_hash: str,
        now: datetime,
        lease: timedelta = SEND_LEASE,
        *,
        spend: Spend | None = None,
    ) -> SendRecord:
        """started -> signed: commit this before broadcasting."""
        self._require(SendState.SIGNED)
        return replace(
            self,
            state=SendState.SIGNED,
            raw_tx=raw_tx,
            tx_hash=tx_hash,
            updated_at=now,
            locked_until=now + lease,
            spend=spend,
        )

    def broadcast(self, now: datetime, lease: timedelta = SEND_LEASE) -> SendRecord:
        """signed -> broadcast: the node accepted (or already knew) the transaction."""
        self._require(SendState.BROADCAST)
        return replace(self, state=SendState.BROADCAST, updated_at=now, locked_until=now + lease)

    def finish(
        self, result: Mapping[str, Any], now: datetime, *, follow: bool = False
    ) -> SendRecord:
        """-> finished with the result every later request with this X-Request-Id replays.

        `follow`: the network accepted the transaction; its chain status starts `pending`,
        for the `follow_sends` job to move to `success` or `failed`."""
        self._require(SendState.FINISHED)
        return replace(
            self,
            state=SendState.FINISHED,
            result=dict(result),
            updated_at=now,
            locked_until=None,
            chain_status=ChainStatus.PENDING if follow else None,
            chain_checked_at=now if follow else None,
        )

    @property
    def is_followed(self) -> bool:
        """Followed on chain and not final yet (pending, stuck or dropped)."""
        return self.chain_status is not None and not self.chain_status.is_final

    def tracked(
        self,
        status: ChainStatus,
        at: datetime,
        *,
        raw_tx: bytes | None = None,
        tx_hash: str | None = None,
    ) -> SendRecord:
        """A followed send's move on chain (`SendStore.track`): its status now, and with
        `raw_tx` and `tx_hash` its transaction replaced (a bump, a cancel, a re-signed
        transfer: the same transfer under the same X-Request-Id). Final once only."""
        if not self.is_followed or self.state is not SendState.FINISHED:
            raise InvalidSendTransition()
        if (raw_tx is None) != (tx_hash is None):
            raise InvalidSendTransition()
        return replace(
            self,
            chain_status=status,
            chain_checked_at=at,
            chain_final_at=at if status.is_final else None,
            raw_tx=self.raw_tx if raw_tx is None else raw_tx,
            tx_hash=self.tx_hash if tx_hash is None else tx_hash,
        )

    def release(self, now: datetime) -> SendRecord:
        """Give the lease up without moving on (an error after which a retry is safe, such
        as a wrong wallet password before signing): the next request resumes at once."""
        if self.is_finished:
            raise InvalidSendTransition()
        return replace(self, updated_at=now, locked_until=None)

    def require_successor(self, new: SendRecord) -> None:
        """`advance_send` moves one record: same key, fingerprint and attempt."""
        mine = (self.client_id, self.request_id, self.fingerprint, self.attempt)
        if (new.client_id, new.request_id, new.fingerprint, new.attempt) != mine:
            raise InvalidSendTransition()

    def _require(self, target: SendState) -> None:
        if target not in _NEXT[self.state]:
            raise InvalidSendTransition()


__all__ = [
    "MAX_FINGERPRINT_LENGTH",
    "MAX_REQUEST_ID_LENGTH",
    "SEND_LEASE",
    "ChainStatus",
    "SendRecord",
    "SendState",
]
