"""Signed webhooks per api client (Standard Webhooks v1; docs/events.md, "Webhooks"): the
operator's use cases and the delivery job.

The operator (`walletcore webhooks ...`):
- `set_url`: the client's endpoint URL (checked: walletcore.domain.webhooks.check_url). A
  new endpoint gets a secret (`whsec_` + base64 of 32 random bytes), shown once in the
  answer, and starts at the end of the client's feed: it receives the events from then on
  (`replay` sends earlier ones). A new URL for a stored endpoint keeps its secret and its
  cursor, and enables it again if a `410` had disabled it.
- `rotate`: a new secret, shown once; the old one keeps signing for `rotation_overlap`
  (default 24 h): during the overlap each message carries both signatures in
  `webhook-signature`, space separated, so the integrator switches at its own pace.
- `pause` / `resume`: no delivery while paused (events wait, none is lost); `resume` also
  enables an endpoint a `410` disabled.
- `show`, `deliveries` (the delivery log, newest first), `replay` (the cursor set back
  to just before an event still in the feed: only backwards).
Each change is audited (`webhook.set`, `.rotate`, `.pause`, `.resume`, `.replay`) in the
unit that makes it; an entry names the URL's origin only (its path or query may hold a
token of the integrator's), never a secret. A secret is sealed before it is stored
(`SecretSealer`: the deployment's master key), and leaves this module in the clear only in
the answer to `set_url` (new endpoint) and `rotate`, and to the sender.

The job (`deliver`, run every `WALLETCORE_JOBS_WEBHOOK_SECONDS`):
- each due endpoint (active, next attempt due, no live lease) is leased to this run
  (`WebhookStore.claim`, a compare-and-set: two workers never deliver to one endpoint);
- its events after its cursor are posted one at a time, in feed order, each as
  `Event.wire()` JSON with `webhook-id` = the event id, `webhook-timestamp` = now and the
  signatures; the outcome of each attempt is logged (`WebhookStore.record`) and moves the
  cursor by compare-and-set (`WebhookStore.advance`, which also renews the lease):
  - 2xx: the cursor moves past the event, and the next one goes at once;
  - `410 Gone`: the endpoint is disabled (audited `webhook.disable`); its head waits;
  - anything else, a timeout or a refused connection: the next attempt at that event is
    scheduled by the retry schedule, and this endpoint's run stops (no later event
    overtakes it); past the schedule's last attempt the event is given up (audited
    `webhook.give_up`) and the cursor moves past it: it stays in the feed, and `replay`
    sends it again;
- a run ends for an endpoint when it caught up, failed, or posted `run_events`; the lease
  is dropped then. A worker that dies mid-run leaves its lease to lapse (`lease`): the next
  run posts the head again (delivery is at least once; the receiver keys on `webhook-id`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from walletcore.domain.errors import ApiClientNotFound, InvalidRequest
from walletcore.domain.events import Event, EventPosition, parse_cursor
from walletcore.domain.ids import is_id, new_id
from walletcore.domain.times import format_optional_datetime
from walletcore.domain.webhooks import (
    DEFAULT_SCHEDULE_SECONDS,
    AttemptResult,
    DeliveryAttempt,
    DeliveryError,
    RetrySchedule,
    WebhookEndpoint,
    WebhookNotFound,
    WebhookSecret,
    check_url,
    position_before,
    url_origin,
)
from walletcore.domain.wire import JsonValue
from walletcore.ports import Clock, Storage, UnitOfWork
from walletcore.ports.webhooks import SecretSealer, SendOutcome, WebhookMessage, WebhookSender
from walletcore.services.audit import Auditor
from walletcore.services.context import Caller

log = logging.getLogger("walletcore.webhooks")

#: Attempts a delivery log read returns by default, and the most it may ask for.
DEFAULT_LOG_LIMIT = 100
MAX_LOG_LIMIT = 1000
#: Events read from the feed at once by a delivery run.
FEED_PAGE = 100
_EVENT_ID = re.compile(r"evt_[0-9]{1,20}_[0-9]{1,20}")


class WebhookSettings(BaseSettings):
    """`WALLETCORE_WEBHOOK_...` (docs/events.md, "Webhooks"); the job's period is
    `WALLETCORE_JOBS_WEBHOOK_SECONDS` (walletcore.jobs.settings)."""

    model_config = SettingsConfigDict(env_prefix="WALLETCORE_", extra="ignore")

    #: Seconds before each attempt at one event, the first one included (0: at once),
    #: comma separated; past the last the event is given up.
    webhook_retry_schedule: Annotated[tuple[float, ...], NoDecode] = DEFAULT_SCHEDULE_SECONDS
    #: Hours the previous secret keeps signing after a rotation.
    webhook_rotation_overlap_hours: float = Field(default=24.0, ge=0, le=24 * 30)
    #: Endpoints on loopback, private, link-local... addresses are allowed (unset: on the
    #: sandbox profile only).
    webhook_allow_private: bool | None = None
    #: The sender (entry point group `walletcore.webhook_senders`).
    webhook_sender: str = "httpx"
    #: How long a run holds an endpoint without news (renewed at each attempt).
    webhook_lease_seconds: float = Field(default=60.0, ge=20, le=3600)
    #: Endpoints one run delivers to, and how many at once.
    webhook_batch: int = Field(default=100, ge=1, le=10_000)
    webhook_concurrency: int = Field(default=8, ge=1, le=256)
    #: Events one run posts to one endpoint at most (the rest next run).
    webhook_run_events: int = Field(default=500, ge=1, le=100_000)

    @field_validator("webhook_retry_schedule", mode="before")
    @classmethod
    def _seconds_list(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [float(part) for part in text.split(",") if part.strip()]
        return value

    @field_validator("webhook_retry_schedule")
    @classmethod
    def _schedule(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        RetrySchedule.of_seconds(value)  # at least one attempt, no negative delay
        return value

    @property
    def schedule(self) -> RetrySchedule:
        return RetrySchedule.of_seconds(self.webhook_retry_schedule)

    @property
    def rotation_overlap(self) -> timedelta:
        return timedelta(hours=self.webhook_rotation_overlap_hours)


class PlainSecrets(SecretSealer):
    """The `SecretSealer` of a deployment whose keystore seals nothing (no `chains` extra,
    a keystore of its own): the secret kept as it is, marked so (first byte 0). Anyone
    reading the database reads these secrets (docs/security.md)."""

    def seal_secret(self, secret: bytes) -> bytes:
        return b"\x00" + bytes(secret)

    def open_secret(self, sealed: bytes) -> bytes:
        if not sealed or sealed[0] != 0:
            raise ValueError(
                "this webhook secret was sealed under the master key; no sealing keystore "
                "here opens it"
            )
        return bytes(sealed[1:])


@dataclass(frozen=True, slots=True)
class WebhookSetup:
    """An endpoint as the operator changed it, and its secret when the change made one
    (a new endpoint, a rotation): shown once, to hand to the integrator."""

    endpoint: WebhookEndpoint
    secret: WebhookSecret | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """One run of the job."""

    endpoints: int = 0
    delivered: int = 0
    failed: int = 0
    given_up: int = 0
    disabled: int = 0


def describe(endpoint: WebhookEndpoint, now: datetime) -> dict[str, JsonValue]:
    """The operator's view of an endpoint: never a secret."""
    return {
        "clientId": endpoint.client_id,
        "url": endpoint.url,
        "paused": endpoint.paused,
        "disabled": endpoint.disabled,
        "disabledReason": endpoint.disabled_reason,
        "disabledAt": format_optional_datetime(endpoint.disabled_at),
        "cursor": None if endpoint.cursor is None else endpoint.cursor.event_id,
        "attempts": endpoint.attempts,
        "nextAttemptAt": format_optional_datetime(endpoint.next_attempt_at),
        "rotatingUntil": format_optional_datetime(endpoint.rotating_until(now)),
        "delivering": endpoint.lease_until is not None and endpoint.lease_until > now,
        "createdAt": format_optional_datetime(endpoint.created_at),
        "updatedAt": format_optional_datetime(endpoint.updated_at),
    }


def parse_log_limit(value: JsonValue) -> int:
    if value is None:
        return DEFAULT_LOG_LIMIT
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LOG_LIMIT:
        raise InvalidRequest(f"limit must be an integer from 1 to {MAX_LOG_LIMIT}")
    return value


def parse_event_id(value: JsonValue, name: str = "eventId") -> str:
    if not isinstance(value, str) or _EVENT_ID.fullmatch(value) is None:
        raise InvalidRequest(f"{name} must be an event id from this feed (evt_...)")
    return value


def message_body(event: Event) -> bytes:
    """The JSON a webhook posts: the event as the feed serves it, compact."""
    return json.dumps(event.wire(), separators=(",", ":"), ensure_ascii=False).encode()


class Webhooks:
    """The use cases (module rules). `sender`: called on the job's first run (so a process
    that never delivers never builds it); None when no sender is installed."""

    def __init__(
        self,
        storage: Storage,
        clock: Clock,
        auditor: Auditor,
        sealer: SecretSealer,
        *,
        sender: Callable[[], WebhookSender | None] | None = None,
        schedule: RetrySchedule,
        rotation_overlap: timedelta = timedelta(hours=24),
        https_only: bool = True,
        allow_private: bool = False,
        lease: timedelta = timedelta(seconds=60),
        batch: int = 100,
        concurrency: int = 8,
        run_events: int = 500,
        log_retention: timedelta = timedelta(days=30),
    ) -> None:
        self._storage = storage
        self._clock = clock
        self._auditor = auditor
        self._sealer = sealer
        self._sender_factory = sender
        self._sender: WebhookSender | None = None
        self.schedule = schedule
        self.rotation_overlap = rotation_overlap
        self.https_only = https_only
        self.allow_private = allow_private
        self.lease = lease
        self._batch = batch
        self._concurrency = concurrency
        self._run_events = run_events
        #: how long the delivery log keeps an attempt (the feed's retention)
        self.log_retention = log_retention
        self._warned_no_sender = False

    # -- the operator -------------------------------------------------------------------
    async def set_url(self, client_id: str, url: str, request_id: str = "operator") -> WebhookSetup:
        async with self._auditor.record("webhook.set", request_id, _audit_id(client_id)) as note:
            checked = check_url(url, https_only=self.https_only, allow_private=self.allow_private)
            _check_client_id(client_id)
            now = self._clock.now()
            secret: WebhookSecret | None = None
            async with self._storage.write() as unit:
                if await unit.clients.get(client_id) is None:
                    raise ApiClientNotFound()
                stored = await unit.webhooks.get(client_id)
                if stored is None:
                    secret = WebhookSecret.new()
                    endpoint = WebhookEndpoint(
                        client_id=client_id,
                        url=checked,
                        secret=self._sealer.seal_secret(secret.raw),
                        created_at=now,
                        updated_at=now,
                        cursor=await _feed_end(unit, client_id),
                        next_attempt_at=now,
                    )
                    detail = f"created for {url_origin(checked)}"
                elif stored.url == checked and not stored.disabled:
                    return WebhookSetup(stored)  # nothing to change: audited `replay`
                else:
                    endpoint = replace(
                        stored,
                        url=checked,
                        disabled_reason=None,
                        disabled_at=None,
                        updated_at=now,
                    )
                    detail = f"url set to {url_origin(checked)}"
                    if stored.disabled:
                        detail += " (enabled again)"
                entry = note.entry(target=url_origin(checked), detail=detail)
                await unit.webhooks.put(endpoint)
                await unit.audit.append(entry)
            note.carried(entry)
            return WebhookSetup(endpoint, secret)

    async def rotate(self, client_id: str, request_id: str = "operator") -> WebhookSetup:
        """A new secret; the current one signs too until the overlap ends (a rotation
        during another's overlap ends that one: two secrets sign at most)."""
        secret = WebhookSecret.new()
        sealed = self._sealer.seal_secret(secret.raw)
        overlap = self.rotation_overlap

        def change(stored: WebhookEndpoint, now: datetime) -> tuple[WebhookEndpoint, str]:
            if overlap <= timedelta(0):
                rotated = replace(stored, secret=sealed, previous_secret=None, previous_until=None)
                return rotated, "the previous secret stops now"
            until = now + overlap
            rotated = replace(
                stored, secret=sealed, previous_secret=stored.secret, previous_until=until
            )
            return rotated, f"the previous secret signs too until {format_optional_datetime(until)}"

        endpoint = await self._change("webhook.rotate", client_id, request_id, change)
        return WebhookSetup(endpoint, secret)

    async def pause(self, client_id: str, request_id: str = "operator") -> WebhookEndpoint:
        def change(stored: WebhookEndpoint, now: datetime) -> tuple[WebhookEndpoint, str]:
            return replace(stored, paused=True), "paused"

        return await self._change("webhook.pause", client_id, request_id, change)

    async def resume(self, client_id: str, request_id: str = "operator") -> WebhookEndpoint:
        """Deliveries go on from the cursor; an endpoint a `410` disabled is enabled."""

        def change(stored: WebhookEndpoint, now: datetime) -> tuple[WebhookEndpoint, str]:
            detail = "resumed" + (" (enabled again)" if stored.disabled else "")
            resumed = replace(stored, paused=False, disabled_reason=None, disabled_at=None)
            return resumed, detail

        return await self._change("webhook.resume", client_id, request_id, change)

    async def show(self, client_id: str) -> WebhookEndpoint:
        _check_client_id(client_id)
        async with self._storage.read() as unit:
            endpoint = await unit.webhooks.get(client_id)
        if endpoint is None:
            raise WebhookNotFound()
        return endpoint

    async def deliveries(
        self, client_id: str, *, event_id: str | None = None, limit: int = DEFAULT_LOG_LIMIT
    ) -> list[DeliveryAttempt]:
        """The client's delivery log, newest first (of one event when given)."""
        _check_client_id(client_id)
        wanted = None if event_id is None else parse_event_id(event_id, "--event")
        count = parse_log_limit(limit)
        async with self._storage.read() as unit:
            if await unit.clients.get(client_id) is None:
                raise ApiClientNotFound()
            return await unit.webhooks.attempts(client_id, event_id=wanted, limit=count)

    async def client_deliveries(
        self, caller: Caller, *, event_id: JsonValue = None, limit: JsonValue = None
    ) -> list[DeliveryAttempt]:
        """`POST /webhooks/deliveries`: the caller's own delivery log, newest first."""
        count = parse_log_limit(limit)
        wanted = None if event_id is None else parse_event_id(event_id)
        async with self._storage.read() as unit:
            return await unit.webhooks.attempts(caller.client_id, event_id=wanted, limit=count)

    async def replay(
        self, client_id: str, event_id: str, request_id: str = "operator"
    ) -> WebhookEndpoint:
        """Deliver again from `event_id` on (it included): the cursor set just before it.
        The event must be in the feed still, and at or before the cursor."""
        async with self._auditor.record("webhook.replay", request_id, _audit_id(client_id)) as note:
            _check_client_id(client_id)
            position = parse_cursor(parse_event_id(event_id, "--from"))
            assert position is not None  # an event id parses to a position
            now = self._clock.now()
            async with self._storage.write() as unit:
                stored = await unit.webhooks.get(client_id)
                if stored is None:
                    raise WebhookNotFound()
                if not await unit.events.has(client_id, position):
                    raise InvalidRequest(
                        f"{position.event_id} is not in this client's feed (never, or no "
                        "longer kept)"
                    )
                if not await unit.webhooks.replay(client_id, position_before(position), now):
                    raise InvalidRequest(
                        f"replay only goes back: {position.event_id} is not delivered yet"
                    )
                entry = note.entry(
                    target=position.event_id, detail=f"replay from {position.event_id}"
                )
                await unit.audit.append(entry)
                replayed = await unit.webhooks.get(client_id)
            note.carried(entry)
            assert replayed is not None
            return replayed

    async def _change(
        self,
        action: str,
        client_id: str,
        request_id: str,
        change: Callable[[WebhookEndpoint, datetime], tuple[WebhookEndpoint, str]],
    ) -> WebhookEndpoint:
        """Read, change and put the endpoint with its entry, in one write unit; a change
        that leaves it as it was writes nothing (audited `replay`)."""
        async with self._auditor.record(action, request_id, _audit_id(client_id)) as note:
            _check_client_id(client_id)
            now = self._clock.now()
            async with self._storage.write() as unit:
                stored = await unit.webhooks.get(client_id)
                if stored is None:
                    raise WebhookNotFound()
                changed, detail = change(stored, now)
                if changed == stored:
                    return stored
                changed = replace(changed, updated_at=now)
                entry = note.entry(target=url_origin(stored.url), detail=detail)
                await unit.webhooks.put(changed)
                await unit.audit.append(entry)
            note.carried(entry)
            return changed

    # -- the job ------------------------------------------------------------------------
    async def deliver(self) -> DeliveryReport:
        """One run: every due endpoint leased and delivered to (module rules)."""
        sender = self._built_sender()
        if sender is None:  # nothing to deliver with: no endpoint is leased
            return DeliveryReport()
        now = self._clock.now()
        owner = new_id()
        async with self._storage.write() as unit:
            claimed = await unit.webhooks.claim(
                now, owner=owner, until=now + self.lease, limit=self._batch
            )
        if not claimed:
            return DeliveryReport()
        gate = asyncio.Semaphore(self._concurrency)
        run_id = f"job-webhooks-{owner}"

        async def one(endpoint: WebhookEndpoint) -> _Tally:
            async with gate:
                try:
                    return await self._deliver_to(sender, endpoint, run_id)
                except Exception as exc:  # noqa: BLE001 - a store error: the lease lapses
                    log.warning(
                        "webhooks of client %s: run failed (%s); delivered again once the "
                        "lease lapses",
                        endpoint.client_id,
                        type(exc).__name__,
                    )
                    return _Tally()

        tallies = await asyncio.gather(*(one(e) for e in claimed))
        report = DeliveryReport(
            endpoints=len(claimed),
            delivered=sum(t.delivered for t in tallies),
            failed=sum(t.failed for t in tallies),
            given_up=sum(t.given_up for t in tallies),
            disabled=sum(t.disabled for t in tallies),
        )
        if report.delivered or report.failed or report.given_up or report.disabled:
            log.info(
                "webhooks: %d endpoints, %d delivered, %d failed, %d given up, %d disabled",
                report.endpoints,
                report.delivered,
                report.failed,
                report.given_up,
                report.disabled,
            )
        return report

    async def prune(self, batch: int = 10_000) -> int:
        """Delete the delivery log's attempts older than `log_retention`; how many."""
        before = self._clock.now() - self.log_retention
        total = 0
        while True:
            async with self._storage.write() as unit:
                done = await unit.webhooks.prune(before, batch)
            total += done
            if done < batch:
                return total

    async def aclose(self) -> None:
        sender, self._sender = self._sender, None
        close = getattr(sender, "aclose", None)
        if close is not None:
            await close()

    def _built_sender(self) -> WebhookSender | None:
        if self._sender is None and self._sender_factory is not None:
            self._sender = self._sender_factory()
        if self._sender is None and not self._warned_no_sender:
            self._warned_no_sender = True
            log.warning(
                "no webhook sender is installed: nothing is delivered "
                "(pip install 'walletcore[webhooks]')"
            )
        return self._sender

    async def _deliver_to(
        self, sender: WebhookSender, endpoint: WebhookEndpoint, run_id: str
    ) -> _Tally:
        """Post the endpoint's events after its cursor, in order, until it caught up, an
        attempt failed, or `run_events` went; then drop the lease."""
        tally = _Tally()
        current: WebhookEndpoint | None = endpoint
        while current is not None and tally.posted < self._run_events:
            async with self._storage.read() as unit:
                page = await unit.events.after(
                    current.client_id,
                    current.cursor,
                    limit=min(FEED_PAGE, self._run_events - tally.posted),
                )
            if not page.events:
                break
            for event in page.events:
                current, go_on = await self._attempt(sender, current, event, run_id, tally)
                if current is None or not go_on:
                    return tally  # the lease went with the last move, or another has it
        if current is not None:
            async with self._storage.write() as unit:
                await unit.webhooks.advance(current, current.released())
        return tally

    async def _attempt(
        self,
        sender: WebhookSender,
        endpoint: WebhookEndpoint,
        event: Event,
        run_id: str,
        tally: _Tally,
    ) -> tuple[WebhookEndpoint | None, bool]:
        """Post one event and store what came of it. (The endpoint as stored after, None
        when the lease was lost; whether to go on with the next event.)"""
        now = self._clock.now()
        outcome = await self._post(sender, endpoint, event, now)
        tally.posted += 1
        done = self._clock.now()
        number = endpoint.attempts + 1
        entry = None
        go_on = False
        if outcome.ok:
            moved = endpoint.delivered(event.position, done)
            result = AttemptResult.DELIVERED
            tally.delivered += 1
            go_on = True
        elif outcome.gone:
            reason = f"410 Gone at {format_optional_datetime(done)}"
            moved = endpoint.gone(done, reason).released()
            result = AttemptResult.DISABLED
            tally.disabled += 1
            entry = self._auditor.entry(
                "webhook.disable",
                run_id,
                endpoint.client_id,
                target=url_origin(endpoint.url),
                detail=f"the endpoint answered 410 Gone to {event.event_id}: disabled",
                at=done,
            )
        else:
            wait = self.schedule.after_failure(number)
            if wait is None:
                moved = endpoint.delivered(event.position, done).released()
                result = AttemptResult.GIVEN_UP
                tally.given_up += 1
                entry = self._auditor.entry(
                    "webhook.give_up",
                    run_id,
                    endpoint.client_id,
                    target=event.event_id,
                    detail=f"given up after {number} attempts ({_what(outcome)})",
                    at=done,
                )
            else:
                moved = endpoint.failed(done, wait).released()
                result = AttemptResult.RETRYING
                tally.failed += 1
        if go_on:  # the lease renewed for the next event
            assert endpoint.lease_owner is not None  # a claimed endpoint
            moved = moved.leased(endpoint.lease_owner, done + self.lease)
        attempt = DeliveryAttempt(
            client_id=endpoint.client_id,
            event_id=event.event_id,
            attempt=number,
            at=now,
            status=outcome.status,
            error=outcome.error,
            seconds=round(outcome.seconds, 3),
            result=result,
            next_attempt_at=moved.next_attempt_at if result is AttemptResult.RETRYING else None,
        )
        async with self._storage.write() as unit:
            await unit.webhooks.record(attempt)
            stored = await unit.webhooks.advance(endpoint, moved)
            if stored is not None and entry is not None:
                await unit.audit.append(entry)
        if stored is None:
            log.info(
                "webhooks of client %s: the cursor or lease moved during a delivery of %s "
                "(a replay, or a lapsed lease); this run stops",
                endpoint.client_id,
                event.event_id,
            )
            return None, False
        if result is not AttemptResult.DELIVERED:
            log.info(
                "webhooks of client %s: %s attempt %d %s (%s)",
                endpoint.client_id,
                event.event_id,
                number,
                result.value,
                _what(outcome),
            )
        # paused (or disabled) by the operator meanwhile: stop here; a change of URL or a
        # rotation is simply used from the next event on (`stored` has it)
        if go_on and not stored.active:
            async with self._storage.write() as unit:
                await unit.webhooks.advance(stored, stored.released())
            return None, False
        return stored, go_on

    async def _post(
        self, sender: WebhookSender, endpoint: WebhookEndpoint, event: Event, now: datetime
    ) -> SendOutcome:
        started = time.monotonic()
        try:
            secrets = [
                WebhookSecret(self._sealer.open_secret(s)) for s in endpoint.live_secrets(now)
            ]
        except Exception as exc:  # noqa: BLE001 - never its message: it may quote bytes
            log.error(
                "webhooks of client %s: the stored secret does not open (%s); nothing sent",
                endpoint.client_id,
                type(exc).__name__,
            )
            return SendOutcome(None, DeliveryError.SECRET, time.monotonic() - started)
        message = WebhookMessage(event.event_id, now, message_body(event))
        try:
            return await sender.post(endpoint.url, message, secrets)
        except Exception as exc:  # noqa: BLE001 - a sender that broke its promise
            log.warning(
                "webhooks of client %s: the sender failed (%s)",
                endpoint.client_id,
                type(exc).__name__,
            )
            return SendOutcome(None, DeliveryError.OTHER, time.monotonic() - started)


@dataclass(slots=True)
class _Tally:
    posted: int = 0
    delivered: int = 0
    failed: int = 0
    given_up: int = 0
    disabled: int = 0


def _what(outcome: SendOutcome) -> str:
    if outcome.status is not None:
        return f"HTTP {outcome.status}"
    return outcome.error.value if outcome.error is not None else "no answer"


async def _feed_end(unit: UnitOfWork, client_id: str) -> EventPosition | None:
    """The position of the client's newest event a reader can see now (None: none)."""
    position: EventPosition | None = None
    while True:
        page = await unit.events.after(client_id, position, limit=1000)
        if page.events:
            position = page.events[-1].position
        if not page.more:
            return position


def _check_client_id(client_id: str) -> None:
    if not is_id(client_id):
        raise ApiClientNotFound()


def _audit_id(client_id: str) -> str | None:
    """Only a well-formed id reaches the audit log."""
    return client_id if is_id(client_id) else None


__all__ = [
    "DeliveryReport",
    "PlainSecrets",
    "WebhookSettings",
    "WebhookSetup",
    "Webhooks",
    "describe",
    "message_body",
    "parse_event_id",
    "parse_log_limit",
]
