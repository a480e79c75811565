"""How a followed send moves (docs/transfers.md): what the chain says of each transaction of
the transfer, and every move of its record, stored as a compare and set on the transfer's
current hash together with its audit entry. A move that lost (another run stored its move
first) changes nothing: `Followed.LOST`.

The moves every part of the lifecycle shares: marking a state (`pending`, `stuck`,
`dropped`) and settling the transfer (`success`, `failed`).
"""

from __future__ import annotations

import logging
from enum import Enum

from walletcore.domain.assets import Asset
from walletcore.domain.audit import AuditEntry
from walletcore.domain.catalog import Catalog
from walletcore.domain.events import EventNote, EventType
from walletcore.domain.sends import ChainStatus, SendRecord
from walletcore.ports import Clock, Storage
from walletcore.ports.follow import Sighting, TransferFollower
from walletcore.services.audit import Auditor
from walletcore.services.event_notes import send_note
from walletcore.services.send_record import Attempt, SignedSend

log = logging.getLogger("walletcore.transfers")

#: Audit actions of the lifecycle (the final move is `send.settle`, as before).
SEND_SETTLE = "send.settle"
SEND_REPLACE = "send.replace"
SEND_REBROADCAST = "send.rebroadcast"
SEND_RESIGN = "send.resign"


class Followed(Enum):
    SETTLED = "settled"  # final now, stored by this run
    MOVED = "moved"  # not final; its state or transaction changed (stored by this run)
    LOST = "lost"  # another run stored its move first
    PENDING = "pending"  # unchanged: asked again later
    SKIPPED = "skipped"  # cannot be asked about (no sender, chain not configured)


class Moves:
    """The record's moves, each stored with its audit entry (the module's docstring)."""

    def __init__(self, storage: Storage, clock: Clock, catalog: Catalog) -> None:
        self.storage = storage
        self.clock = clock
        self.catalog = catalog
        self._auditor = Auditor(storage, clock)

    async def sightings(
        self,
        chain_follower: TransferFollower,
        signed: SignedSend,
        asset: Asset,
        *,
        stop_at_pending: bool,
    ) -> list[tuple[Attempt, Sighting]]:
        """What the chain says of each transaction of the transfer, the current one first.
        A current one the node holds means no earlier one can land: they are not asked."""
        assert signed.sender is not None
        seen: list[tuple[Attempt, Sighting]] = []
        for attempt in signed.attempts:
            sighting = await chain_follower.sighting(signed.sender, asset, attempt.signed())
            seen.append((attempt, sighting))
            if sighting.is_final:
                break
            if stop_at_pending and sighting is Sighting.PENDING and not seen[:-1]:
                break
        return seen

    async def mark(
        self, record: SendRecord, signed: SignedSend, status: ChainStatus, request_id: str
    ) -> Followed:
        if record.chain_status is status:
            return Followed.PENDING  # `checked_chain` puts it behind the others
        entry = None
        if status is not ChainStatus.PENDING:
            entry = self.entry(
                record,
                signed,
                "send." + status.value,
                request_id,
                target=signed.tx_hash,
                detail=f"{record.chain_status} -> {status.value}",
            )
        return await self.move(record, record.tracked(status, self.clock.now()), entry)

    async def settle(
        self,
        record: SendRecord,
        signed: SignedSend,
        attempt: Attempt,
        sighting: Sighting,
        request_id: str,
    ) -> Followed:
        cancelled = attempt.kind == "cancel"
        status = (
            ChainStatus.SUCCESS
            if sighting is Sighting.SUCCESS and not cancelled
            else ChainStatus.FAILED
        )
        now = self.clock.now()
        moved = signed if attempt.tx_hash == signed.tx_hash else signed.moved_to(attempt, now)
        detail = f"{record.chain_status} -> {status.value}"
        if cancelled and sighting is Sighting.SUCCESS:
            detail += " (cancelled)"
        elif sighting is Sighting.CONFLICT:
            detail += " (its place was taken by a transaction this service did not send)"
        elif sighting is Sighting.EXPIRED:
            detail += " (expired: it can never land)"
        new = record.tracked(
            status,
            now,
            raw_tx=None if moved is signed else moved.to_bytes(),
            tx_hash=None if moved is signed else attempt.tx_hash,
        )
        entry = self.entry(
            record,
            signed,
            SEND_SETTLE,
            request_id,
            target=attempt.tx_hash,
            detail=detail,
            event=send_note(
                EventType.SEND_SUCCESS if status is ChainStatus.SUCCESS else EventType.SEND_FAILED,
                signed,
                record.request_id,
                self.catalog,
                tx_hash=attempt.tx_hash,
            ),
        )
        outcome = await self.move(record, new, entry)
        if outcome is Followed.MOVED:
            log.info(
                "send %s/%s: %s %s",
                record.client_id,
                record.request_id,
                attempt.tx_hash,
                status.value,
            )
            return Followed.SETTLED
        return outcome

    async def move(self, record: SendRecord, new: SendRecord, entry: AuditEntry | None) -> Followed:
        async with self.storage.write() as unit:
            moved = await unit.sends.track(record, new, entry=entry)
        if not moved:
            log.info("send %s/%s was moved by another run", record.client_id, record.request_id)
            return Followed.LOST
        return Followed.MOVED

    def entry(
        self,
        record: SendRecord,
        signed: SignedSend,
        action: str,
        request_id: str,
        *,
        target: str,
        detail: str,
        event: EventNote | None = None,
    ) -> AuditEntry:
        return self._auditor.entry(
            action,
            request_id,
            record.client_id,
            user_id=signed.user_id,
            target=target,
            detail=detail,
            event=event,
        )

    async def reload(self, record: SendRecord) -> SendRecord:
        async with self.storage.read() as unit:
            found = await unit.sends.get(record.client_id, record.request_id)
        return found or record


__all__ = ["SEND_REBROADCAST", "SEND_REPLACE", "SEND_RESIGN", "SEND_SETTLE", "Followed", "Moves"]
