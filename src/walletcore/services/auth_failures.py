"""Refused `/auth` of known api clients, counted off the request path: tallied per client in
this process, then added to each client's record in place (`ClientStore.add_auth_failures`).

Rules:
- A refusal never waits for a write. A write that changes a row ends in a commit that
  flushes to disk (SQLite `synchronous = FULL`, PostgreSQL `synchronous_commit`), which an
  unknown id has nothing to flush for: a refusal that waited for it would answer a known
  id measurably later (three times as long, `bench/auth_refusal_bench.py`), and tell an
  attacker which ids exist.
- One tally per client waits (a count, the first refusal, the latest): memory is bounded
  by the clients, not by the refusals, and a flood of wrong keys costs one write per
  client per round of the writer, however fast it comes.
- One writer task at a time per process takes every tally waiting and writes each in a
  unit of its own; the first refusal of a tally carries the audit entry the store appends
  when the tally begins a run. A write the storage refuses is logged and dropped.
- A successful `/auth` takes its client's waiting tally (`take`) and writes it in its own
  unit before it ends the run, so the refusals just before it count in that run.
- A process killed (not stopped) loses the refusals of its last round; the metrics
  (`Observer.auth_failure`) counted them already. `settled()` waits for the writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime

from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import AuthFailures
from walletcore.domain.errors import DomainError, InvalidCredentials
from walletcore.ports import Storage
from walletcore.services.audit import Auditor

log = logging.getLogger("walletcore.auth")

#: Seconds the writer waits before a round: the refusal that woke it is answered before
#: its write takes the event loop or the database, and a flood's refusals within it are
#: one write per client.
WRITE_DELAY_SECONDS = 0.05

#: How a refusal's reason reads in the audit entry of a run's first refusal.
REASON_WORDS = {"wrong_key": "wrong key", "disabled": "disabled"}
_RUN_BEGINS = "the first failed /auth since the last successful one"


@dataclass(slots=True)
class _Tally:
    """The refusals of one client waiting for the writer; the first one's request."""

    count: int
    first_at: datetime
    last_at: datetime
    request_id: str
    reason: str


class AuthFailureTally:
    def __init__(
        self, storage: Storage, auditor: Auditor, *, delay: float = WRITE_DELAY_SECONDS
    ) -> None:
        self._storage = storage
        self._auditor = auditor
        self._delay = delay
        self._waiting: dict[str, _Tally] = {}
        self._writer: asyncio.Task[None] | None = None
        #: set by `settled`: the writer's rounds wait no more
        self._hurry: asyncio.Event | None = None

    def add(self, client_id: str, at: datetime, request_id: str, reason: str) -> None:
        """One refusal of a known client (`reason`: `wrong_key` or `disabled`), with no
        await: the caller answers at once."""
        tally = self._waiting.get(client_id)
        if tally is None:
            self._waiting[client_id] = _Tally(1, at, at, request_id, reason)
        else:
            tally.count += 1
            tally.last_at = at
        writer = self._writer
        loop = asyncio.get_running_loop()
        # a writer of a loop that closed is no writer (tests run one loop after another)
        if writer is None or writer.done() or writer.get_loop() is not loop:
            self._hurry = asyncio.Event()
            self._writer = loop.create_task(self._write(self._hurry))

    def take(self, client_id: str) -> tuple[AuthFailures, AuditEntry] | None:
        """The client's tally waiting for the writer, no longer the writer's to write, with
        the entry of its first refusal: a successful `/auth` writes it in its own unit, so
        the refusals just before it count in the run it ends."""
        tally = self._waiting.pop(client_id, None)
        return None if tally is None else self._written(client_id, tally)

    async def settled(self) -> None:
        """Until the writer has written what was waiting (and what came meanwhile), with
        no more delay: tests, and a server that stops."""
        while (writer := self._writer) is not None and not writer.done():
            if writer.get_loop() is not asyncio.get_running_loop():
                return
            if self._hurry is not None:
                self._hurry.set()
            await asyncio.shield(writer)

    async def _write(self, hurry: asyncio.Event) -> None:
        while self._waiting:
            if not hurry.is_set():  # the refusal that woke the writer is answered first
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(hurry.wait(), self._delay)
            waiting, self._waiting = self._waiting, {}
            for client_id, tally in waiting.items():
                await self._write_one(client_id, tally)

    def _written(self, client_id: str, tally: _Tally) -> tuple[AuthFailures, AuditEntry]:
        """What a tally adds to the client's record, and the entry its first refusal gets
        if it begins a run."""
        reason = REASON_WORDS.get(tally.reason, tally.reason)
        entry = self._auditor.entry(
            "auth",
            tally.request_id,
            client_id,
            outcome="401",
            detail=f"{InvalidCredentials.default_message} ({reason}): {_RUN_BEGINS}",
            at=tally.first_at,
        )
        return AuthFailures(tally.count, tally.first_at, tally.last_at), entry

    async def _write_one(self, client_id: str, tally: _Tally) -> None:
        failures, entry = self._written(client_id, tally)
        try:
            async with self._storage.write() as unit:
                await unit.clients.add_auth_failures(client_id, failures, entry=entry)
        except DomainError as exc:  # the storage refused (down, busy): the metrics still count
            log.warning(
                "%d refused /auth of client %s not counted: %s", tally.count, client_id, exc.message
            )
        except Exception:  # a bug: seen, and the writer goes on with the others
            log.exception("%d refused /auth of client %s not counted", tally.count, client_id)


__all__ = ["REASON_WORDS", "WRITE_DELAY_SECONDS", "AuthFailureTally"]
