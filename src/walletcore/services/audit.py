"""Writes one audit entry per state-changing use case, success or failure, never a secret."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from walletcore.domain.audit import AuditEntry
from walletcore.domain.errors import DomainError
from walletcore.ports import Clock, Repo

log = logging.getLogger("walletcore.audit")


@dataclass(slots=True)
class AuditNote:
    """Filled in by the use case while it runs (the id it created, say)."""

    user_id: str | None = None
    target: str | None = None


class Auditor:
    def __init__(self, repo: Repo, clock: Clock) -> None:
        self._repo = repo
        self._clock = clock

    @asynccontextmanager
    async def record(
        self,
        action: str,
        request_id: str,
        client_id: str | None,
        *,
        user_id: str | None = None,
        target: str | None = None,
    ) -> AsyncIterator[AuditNote]:
        note = AuditNote(user_id=user_id, target=target)
        outcome, detail = "ok", None
        try:
            yield note
        except DomainError as exc:
            outcome, detail = str(exc.status), exc.message
            raise
        except BaseException:
            outcome, detail = "500", "internal error"
            raise
        finally:
            await self.event(
                action,
                request_id,
                client_id,
                outcome=outcome,
                user_id=note.user_id,
                target=note.target,
                detail=detail,
            )

    async def event(
        self,
        action: str,
        request_id: str,
        client_id: str | None,
        *,
        outcome: str = "ok",
        user_id: str | None = None,
        target: str | None = None,
        detail: str | None = None,
    ) -> None:
        """One entry for something that happened outside a `record` block (a settlement
        seen on a poll, say)."""
        entry = AuditEntry(
            at=self._clock.now(),
            client_id=client_id,
            action=action,
            request_id=request_id,
            outcome=outcome,
            user_id=user_id,
            target=target,
            detail=detail,
        )
        try:
            await self._repo.append_audit(entry)
        except Exception:  # the audit must not turn a success into a failure
            log.exception("audit write failed for %s (request %s)", action, request_id)
