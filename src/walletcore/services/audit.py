"""The audit log of the use cases: one entry per state change, written with the change, and
one per request that changed nothing; never a secret.

Rules:
- A change carries its entry: the use case builds it (`AuditNote.entry`) and appends it
  (`unit.audit.append`) in the write unit that makes the change, only when the change
  applied (a compare-and-set that lost, an add that found the record there, writes no
  entry); the unit commits both or neither. A process killed at any point leaves the
  change with its entry, or neither. Outcome `ok`. Once the unit committed, the use case
  tells the note (`AuditNote.carried`).
- A request that changed nothing gets an entry of its own, written when it ends:
  - a refusal (a `DomainError`, or an unexpected error as `500`): outcome the status,
    `detail` the safe message. A failure after a carried change is written too (an
    approval whose venue then refused is `ok` then `502`), unless a carried entry of the
    same action already recorded that very outcome (a send the network refused);
  - success without a change (a replayed approve or send, a cancel of a cancelled trade,
    an extend with nothing to add): outcome `replay`;
  - success of an action that never changes stored state (`/auth`, `mutating=False`):
    outcome `ok`.
- Entries hold ids, actions, outcomes and safe messages only: never a password, a seed
  phrase, an api key, a token or a key.
- A write of an entry of its own that fails is logged, never turned into a failed request;
  a carried entry that cannot be written fails its change (that is the point).
"""

from __future__ import annotations

import logging
from datetime import datetime

from walletcore.domain.audit import AuditEntry
from walletcore.domain.errors import DomainError
from walletcore.domain.events import EventNote
from walletcore.ports import Clock, Storage

log = logging.getLogger("walletcore.audit")

#: Outcome of a change (carried) and of a success of an action that changes nothing.
OK = "ok"
#: Outcome of a success that changed nothing: the stored result answered again.
REPLAY = "replay"

_UNSET: object = object()


class AuditNote:
    """Filled in by the use case while it runs: who and what it is about, and the entries
    committed with the changes this request made."""

    __slots__ = ("_auditor", "_carried", "action", "client_id", "request_id", "target", "user_id")

    def __init__(
        self,
        auditor: Auditor,
        action: str,
        request_id: str,
        client_id: str | None,
        user_id: str | None = None,
        target: str | None = None,
    ) -> None:
        self._auditor = auditor
        self.action = action
        self.request_id = request_id
        self.client_id = client_id
        self.user_id = user_id
        self.target = target
        self._carried: list[AuditEntry] = []

    def entry(
        self,
        *,
        action: str | None = None,
        outcome: str = OK,
        user_id: str | None | object = _UNSET,
        target: str | None | object = _UNSET,
        detail: str | None = None,
        at: datetime | None = None,
        event: EventNote | None = None,
    ) -> AuditEntry:
        """An entry of this request (its action, user and target unless given), to append
        in the unit that makes the change; then `carried(entry)` once that unit committed.
        `at`: the instant of the change, when the use case read the clock for it already
        (`Auditor.entry`)."""
        return self._auditor.entry(
            action or self.action,
            self.request_id,
            self.client_id,
            outcome=outcome,
            user_id=self.user_id if user_id is _UNSET else user_id,  # type: ignore[arg-type]
            target=self.target if target is _UNSET else target,  # type: ignore[arg-type]
            detail=detail,
            at=at,
            event=event,
        )

    def carried(self, *entries: AuditEntry) -> None:
        """The unit these entries were appended in committed: they are in the log."""
        self._carried.extend(entries)

    @property
    def changed(self) -> bool:
        """This request's action carried an entry: it changed something."""
        action = self.action
        for carried in self._carried:  # a loop, not `any` over a generator: every request
            if carried.action == action:
                return True
        return False

    def recorded(self, outcome: str) -> bool:
        """A carried entry of this request's action has `outcome` already."""
        return any(e.action == self.action and e.outcome == outcome for e in self._carried)


class Recording:
    """`Auditor.record`: the note of one use case, and the request's own entry when it
    ends (module rules). A class, not an `asynccontextmanager` generator: every use case
    enters one (docs/performance.md, "Fewer Python calls per request"). It never swallows
    the use case's error."""

    __slots__ = ("_auditor", "_mutating", "note")

    def __init__(self, auditor: Auditor, note: AuditNote, mutating: bool) -> None:
        self._auditor = auditor
        self._mutating = mutating
        self.note = note

    async def __aenter__(self) -> AuditNote:
        return self.note

    async def __aexit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        note = self.note
        if exc is None:
            if not note.changed:
                await self._auditor._own(note, REPLAY if self._mutating else OK, None)
        elif isinstance(exc, DomainError):
            outcome = str(exc.status)
            if not note.recorded(outcome):
                await self._auditor._own(note, outcome, exc.message)
        else:  # anything else, a cancellation too: the request failed as a 500
            await self._auditor._own(note, "500", "internal error")


class Auditor:
    def __init__(self, storage: Storage, clock: Clock) -> None:
        self._storage = storage
        self._clock = clock

    def entry(
        self,
        action: str,
        request_id: str,
        client_id: str | None,
        *,
        outcome: str = OK,
        user_id: str | None = None,
        target: str | None = None,
        detail: str | None = None,
        at: datetime | None = None,
        event: EventNote | None = None,
    ) -> AuditEntry:
        """An entry stamped now, to append in the unit of the change it records; or at
        `at`, the instant of that change when its use case read the clock for it (a quote's
        creation, an approval's, a settlement's): one reading for both, and the entry
        carries the very instant the trade does."""
        return AuditEntry(
            at=self._clock.now() if at is None else at,
            client_id=client_id,
            action=action,
            request_id=request_id,
            outcome=outcome,
            user_id=user_id,
            target=target,
            detail=detail,
            event=event,
        )

    def record(
        self,
        action: str,
        request_id: str,
        client_id: str | None,
        *,
        user_id: str | None = None,
        target: str | None = None,
        mutating: bool = True,
    ) -> Recording:
        """Around one use case (`async with auditor.record(...) as note`): writes the
        request's own entry when it changed nothing (see the module rules).
        `mutating=False`: the action never changes stored state, so its success is `ok`,
        not `replay`."""
        return Recording(
            self, AuditNote(self, action, request_id, client_id, user_id, target), mutating
        )

    async def event(
        self,
        action: str,
        request_id: str,
        client_id: str | None,
        *,
        outcome: str = OK,
        user_id: str | None = None,
        target: str | None = None,
        detail: str | None = None,
    ) -> None:
        """One entry on its own, for something that changed no stored state."""
        entry = self.entry(
            action,
            request_id,
            client_id,
            outcome=outcome,
            user_id=user_id,
            target=target,
            detail=detail,
        )
        try:
            async with self._storage.write() as unit:
                await unit.audit.append(entry)
        except Exception:  # the audit must not turn a success into a failure
            log.exception("audit write failed for %s (request %s)", action, request_id)

    async def _own(self, note: AuditNote, outcome: str, detail: str | None) -> None:
        await self.event(
            note.action,
            note.request_id,
            note.client_id,
            outcome=outcome,
            user_id=note.user_id,
            target=note.target,
            detail=detail,
        )


__all__ = ["OK", "REPLAY", "AuditNote", "Auditor"]
