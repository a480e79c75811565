"""The webhooks on the core's fakes (walletcore.services.webhooks): the operator's use cases,
and the delivery job with a FAKE sender (`RecordingSender`) on a manual clock: events in
feed order, one at a time; a failure holds the later events back and is retried by the
schedule; a `410` disables; past the schedule an event is given up and the cursor moves
past it; pause, resume, rotation (both secrets during the overlap), replay (only
backwards); two runs at once never post to one endpoint; and no secret in an audit entry,
a log line or a repr."""

from __future__ import annotations

import asyncio
import logging
import os
from datetime import timedelta
from typing import Any

import pytest

from walletcore.clock import ManualClock
from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import ApiClientNotFound, InvalidRequest
from walletcore.domain.events import (
    EventNote,
    EventType,
    parse_cursor,
)
from walletcore.domain.ids import new_id
from walletcore.domain.webhooks import (
    AttemptResult,
    DeliveryError,
    RetrySchedule,
    WebhookNotFound,
    WebhookSecret,
    position_before,
)
from walletcore.services.audit import Auditor
from walletcore.services.context import Caller
from walletcore.services.webhooks import PlainSecrets, Webhooks, describe
from walletcore.testing import InMemoryStorage, RecordingSender, autocommit
from walletcore_chains.keystore import SealedKeyStore

URL = "https://hooks.example.com/walletcore?token=integrator-token"
SCHEDULE = RetrySchedule.of_seconds([0, 5, 300])


class Hooks:
    """One api client, its events, the service and the fake sender."""

    def __init__(self, clock: ManualClock, **options: Any) -> None:
        self.clock = clock
        self.storage = InMemoryStorage()
        self.sender = RecordingSender()
        self.sealer = SealedKeyStore(os.urandom(32))
        self.client_id = new_id()
        self.service = Webhooks(
            self.storage,
            clock,
            Auditor(self.storage, clock),
            options.pop("sealer", self.sealer),
            sender=lambda: self.sender,
            schedule=options.pop("schedule", SCHEDULE),
            **options,
        )

    async def start(self) -> Hooks:
        await autocommit(self.storage).clients.add(
            ApiClient(self.client_id, "Acme", "ab" * 32, created_at=self.clock.now())
        )
        return self

    async def event(self, n: int = 1, client_id: str | None = None) -> list[str]:
        """`n` events on the client's feed; their ids."""
        ids = []
        for i in range(n):
            async with self.storage.write() as unit:
                note = EventNote(EventType.SEND_PENDING, {"requestId": f"req-{i}", "n": i})
                await unit.events.publish(client_id or self.client_id, None, note, self.clock.now())
            async with self.storage.read() as unit:
                page = await unit.events.after(client_id or self.client_id, None, limit=10_000)
            ids.append(page.events[-1].event_id)
        return ids

    async def audit(self) -> list[Any]:
        async with self.storage.read() as unit:
            return list(reversed(await unit.audit.newest(1000)))

    async def log(self, event_id: str | None = None) -> list[Any]:
        return await self.service.deliveries(self.client_id, event_id=event_id)

    async def endpoint(self) -> Any:
        return await self.service.show(self.client_id)


@pytest.fixture
async def hooks(clock: ManualClock) -> Hooks:
    return await Hooks(clock).start()


# -- the operator ---------------------------------------------------------------------------
async def test_set_url_makes_a_secret_shown_once_and_stores_it_sealed(hooks: Hooks) -> None:
    setup = await hooks.service.set_url(hooks.client_id, URL)
    assert setup.secret is not None and setup.secret.text.startswith("whsec_")
    endpoint = await hooks.endpoint()
    assert endpoint.url == URL and endpoint.active
    # stored sealed under the master key: neither the bytes nor the text are at rest
    assert setup.secret.raw not in endpoint.secret
    assert setup.secret.text.encode() not in endpoint.secret
    assert hooks.sealer.open_secret(endpoint.secret) == setup.secret.raw
    view = describe(endpoint, hooks.clock.now())
    assert "secret" not in " ".join(view).lower()
    assert setup.secret.text not in repr(view) and setup.secret.text not in repr(setup)
    # setting the same URL again changes nothing and shows no secret
    again = await hooks.service.set_url(hooks.client_id, URL)
    assert again.secret is None and again.endpoint == endpoint
    # a new URL keeps the secret and the cursor
    moved = await hooks.service.set_url(hooks.client_id, "https://other.example.com/hook")
    assert moved.secret is None and moved.endpoint.secret == endpoint.secret
    actions = [(e.action, e.outcome) for e in await hooks.audit()]
    assert actions == [("webhook.set", "ok"), ("webhook.set", "replay"), ("webhook.set", "ok")]


async def test_the_operator_is_told_why_a_url_or_client_is_refused(hooks: Hooks) -> None:
    with pytest.raises(InvalidRequest, match="loopback"):
        await hooks.service.set_url(hooks.client_id, "https://127.0.0.1/hook")
    with pytest.raises(InvalidRequest, match="https"):
        await hooks.service.set_url(hooks.client_id, "http://hooks.example.com/")
    with pytest.raises(ApiClientNotFound):
        await hooks.service.set_url(new_id(), URL)
    with pytest.raises(ApiClientNotFound):
        await hooks.service.set_url("not-an-id", URL)
    for change in (hooks.service.rotate, hooks.service.pause, hooks.service.resume):
        with pytest.raises(WebhookNotFound):
            await change(hooks.client_id)
    with pytest.raises(WebhookNotFound):
        await hooks.service.show(hooks.client_id)
    assert [e.outcome for e in await hooks.audit()] == ["400", "400", "404", "404", *["404"] * 3]


async def test_the_sandbox_takes_plain_http_and_private_targets(clock: ManualClock) -> None:
    hooks = await Hooks(clock, https_only=False, allow_private=True).start()
    setup = await hooks.service.set_url(hooks.client_id, "http://127.0.0.1:9/hook")
    assert setup.endpoint.url == "http://127.0.0.1:9/hook"


async def test_a_new_endpoint_starts_at_the_end_of_the_feed(hooks: Hooks) -> None:
    before = await hooks.event(2)
    await hooks.service.set_url(hooks.client_id, URL)
    assert (await hooks.endpoint()).cursor.event_id == before[-1]
    after = await hooks.event(2)
    report = await hooks.service.deliver()
    assert hooks.sender.ids == after
    assert report.delivered == 2 and report.endpoints == 1


# -- delivery -------------------------------------------------------------------------------
async def test_events_are_posted_in_feed_order_as_the_feed_serves_them(hooks: Hooks) -> None:
    import json

    await hooks.service.set_url(hooks.client_id, URL)
    ids = await hooks.event(5)
    other = new_id()
    await autocommit(hooks.storage).clients.add(ApiClient(other, "Other", "cd" * 32))
    await hooks.event(1, client_id=other)  # another client's: not posted here
    await hooks.service.deliver()
    assert hooks.sender.ids == ids
    first = hooks.sender.posted[0]
    assert first.url == URL
    body = json.loads(first.body)
    assert body["id"] == ids[0] and body["type"] == "send.pending"
    assert set(body) == {"id", "type", "timestamp", "userId", "data"}
    assert first.timestamp == hooks.clock.now()
    endpoint = await hooks.endpoint()
    assert endpoint.cursor.event_id == ids[-1] and endpoint.lease_owner is None
    log = await hooks.log()
    assert [(a.event_id, a.attempt, a.status, a.result) for a in log] == [
        (i, 1, 200, AttemptResult.DELIVERED) for i in reversed(ids)
    ]
    # caught up: the next run posts nothing
    await hooks.service.deliver()
    assert len(hooks.sender.posted) == 5


async def test_a_failure_holds_later_events_back_until_its_retry_succeeds(hooks: Hooks) -> None:
    await hooks.service.set_url(hooks.client_id, URL)
    a, b, c = await hooks.event(3)
    hooks.sender.script(200, 503)  # a delivered, b fails
    report = await hooks.service.deliver()
    assert hooks.sender.ids == [a, b] and report.failed == 1
    endpoint = await hooks.endpoint()
    assert endpoint.cursor.event_id == a and endpoint.attempts == 1
    assert endpoint.next_attempt_at == hooks.clock.now() + timedelta(seconds=5)
    # not due yet: nothing posted
    hooks.clock.advance(4)
    await hooks.service.deliver()
    assert hooks.sender.ids == [a, b]
    # due: b again (times out), then 300 s later b and c
    hooks.clock.advance(1)
    hooks.sender.script(DeliveryError.TIMEOUT)
    await hooks.service.deliver()
    assert hooks.sender.ids == [a, b, b]
    assert (await hooks.endpoint()).attempts == 2
    hooks.clock.advance(300)
    await hooks.service.deliver()
    assert hooks.sender.ids == [a, b, b, b, c]
    log = await hooks.log(b)
    assert [(x.attempt, x.status, x.error, x.result) for x in log] == [
        (3, 200, None, AttemptResult.DELIVERED),
        (2, None, DeliveryError.TIMEOUT, AttemptResult.RETRYING),
        (1, 503, None, AttemptResult.RETRYING),
    ]
    assert log[2].next_attempt_at is not None
    assert (await hooks.endpoint()).attempts == 0


async def test_past_the_last_attempt_an_event_is_given_up_and_the_next_goes(hooks: Hooks) -> None:
    await hooks.service.set_url(hooks.client_id, URL)
    a, b = await hooks.event(2)
    hooks.sender.script(500, 500, 500)
    await hooks.service.deliver()
    hooks.clock.advance(5)
    await hooks.service.deliver()
    hooks.clock.advance(300)
    report = await hooks.service.deliver()  # a's third and last attempt: given up
    assert report.given_up == 1
    assert hooks.sender.ids == [a, a, a]
    endpoint = await hooks.endpoint()
    assert endpoint.cursor.event_id == a and endpoint.attempts == 0
    assert next(x.result for x in await hooks.log(a)) is AttemptResult.GIVEN_UP
    give_up = [e for e in await hooks.audit() if e.action == "webhook.give_up"]
    assert len(give_up) == 1 and give_up[0].target == a
    assert "after 3 attempts (HTTP 500)" in give_up[0].detail
    await hooks.service.deliver()  # the next event goes at once
    assert hooks.sender.ids == [a, a, a, b]


async def test_a_410_disables_the_endpoint_until_it_is_resumed(hooks: Hooks) -> None:
    await hooks.service.set_url(hooks.client_id, URL)
    a, b = await hooks.event(2)
    hooks.sender.script(410)
    report = await hooks.service.deliver()
    assert report.disabled == 1 and hooks.sender.ids == [a]
    endpoint = await hooks.endpoint()
    assert endpoint.disabled and "410" in endpoint.disabled_reason and endpoint.cursor is None
    assert (await hooks.log())[0].result is AttemptResult.DISABLED
    disabled = [e for e in await hooks.audit() if e.action == "webhook.disable"]
    assert len(disabled) == 1 and disabled[0].target == "https://hooks.example.com"
    hooks.clock.advance(3600)
    await hooks.service.deliver()
    assert hooks.sender.ids == [a]  # disabled: nothing
    await hooks.service.resume(hooks.client_id)
    await hooks.service.deliver()
    assert hooks.sender.ids == [a, a, b]


async def test_pause_holds_every_delivery_and_resume_goes_on(hooks: Hooks) -> None:
    await hooks.service.set_url(hooks.client_id, URL)
    await hooks.service.pause(hooks.client_id)
    ids = await hooks.event(3)
    await hooks.service.deliver()
    assert hooks.sender.posted == []
    paused_again = await hooks.service.pause(hooks.client_id)
    assert paused_again.paused
    await hooks.service.resume(hooks.client_id)
    await hooks.service.deliver()
    assert hooks.sender.ids == ids
    actions = [(e.action, e.outcome) for e in await hooks.audit()][1:]
    assert actions == [
        ("webhook.pause", "ok"),
        ("webhook.pause", "replay"),
        ("webhook.resume", "ok"),
    ]


async def test_a_pause_during_a_run_stops_it_after_the_event_in_flight(hooks: Hooks) -> None:
    await hooks.service.set_url(hooks.client_id, URL)
    ids = await hooks.event(3)
    hooks.sender.gate = asyncio.Event()
    run = asyncio.create_task(hooks.service.deliver())
    while hooks.sender.in_flight == 0:
        await asyncio.sleep(0)
    await hooks.service.pause(hooks.client_id)
    hooks.sender.gate.set()
    await run
    assert hooks.sender.ids == ids[:1]
    endpoint = await hooks.endpoint()
    assert endpoint.cursor.event_id == ids[0] and endpoint.lease_owner is None


async def test_during_a_rotation_both_secrets_sign(hooks: Hooks) -> None:
    first = (await hooks.service.set_url(hooks.client_id, URL)).secret
    rotated = await hooks.service.rotate(hooks.client_id)
    second = rotated.secret
    assert first is not None and second is not None and first != second
    assert rotated.endpoint.rotating_until(hooks.clock.now()) == hooks.clock.now() + timedelta(
        hours=24
    )
    await hooks.event(1)
    await hooks.service.deliver()
    assert hooks.sender.posted[-1].secrets == (second, first)
    hooks.clock.advance(24 * 3600)
    await hooks.event(1)
    await hooks.service.deliver()
    assert hooks.sender.posted[-1].secrets == (second,)
    rotate = next(e for e in await hooks.audit() if e.action == "webhook.rotate")
    assert "until" in rotate.detail


async def test_a_rotation_without_overlap_stops_the_old_secret_at_once(clock: ManualClock) -> None:
    hooks = await Hooks(clock, rotation_overlap=timedelta(0)).start()
    await hooks.service.set_url(hooks.client_id, URL)
    second = (await hooks.service.rotate(hooks.client_id)).secret
    await hooks.event(1)
    await hooks.service.deliver()
    assert hooks.sender.posted[-1].secrets == (second,)


async def test_replay_delivers_again_from_an_event_only_backwards(hooks: Hooks) -> None:
    await hooks.service.set_url(hooks.client_id, URL)
    a, b, c = await hooks.event(3)
    hooks.sender.script(200, 503)
    await hooks.service.deliver()  # a delivered, b waits for its retry
    with pytest.raises(InvalidRequest, match="only goes back"):
        await hooks.service.replay(hooks.client_id, c)
    with pytest.raises(InvalidRequest, match="only goes back"):
        await hooks.service.replay(hooks.client_id, b)  # b is the head: not delivered yet
    with pytest.raises(InvalidRequest, match="not in this client's feed"):
        await hooks.service.replay(hooks.client_id, "evt_0_999")
    with pytest.raises(InvalidRequest, match="event id"):
        await hooks.service.replay(hooks.client_id, "nonsense")
    replayed = await hooks.service.replay(hooks.client_id, a)
    assert replayed.cursor == position_before(parse_cursor(a))
    assert replayed.attempts == 0 and replayed.next_attempt_at == hooks.clock.now()
    await hooks.service.deliver()  # at once, the retry schedule reset
    assert hooks.sender.ids == [a, b, a, b, c]
    entry = [e for e in await hooks.audit() if e.action == "webhook.replay"]
    assert [(e.outcome, e.target) for e in entry] == [
        ("400", None),
        ("400", None),
        ("400", None),
        ("400", None),
        ("ok", a),
    ]


async def test_two_runs_at_once_never_post_to_one_endpoint_twice(hooks: Hooks) -> None:
    await hooks.service.set_url(hooks.client_id, URL)
    ids = await hooks.event(4)
    hooks.sender.gate = asyncio.Event()
    runs = [asyncio.create_task(hooks.service.deliver()) for _ in range(3)]
    while hooks.sender.in_flight == 0:
        await asyncio.sleep(0)
    for _ in range(20):
        await asyncio.sleep(0)
    hooks.sender.gate.set()
    reports = await asyncio.gather(*runs)
    assert hooks.sender.ids == ids  # each once, in order
    assert hooks.sender.most_in_flight == 1
    assert sorted(r.endpoints for r in reports) == [0, 0, 1]


async def test_a_lapsed_lease_is_claimed_again(hooks: Hooks) -> None:
    """A worker that died mid-run: its lease lapses, and the next run posts the head."""
    await hooks.service.set_url(hooks.client_id, URL)
    (a,) = await hooks.event(1)
    now = hooks.clock.now()
    async with hooks.storage.write() as unit:
        claimed = await unit.webhooks.claim(
            now, owner="dead-worker", until=now + timedelta(seconds=60), limit=10
        )
    assert len(claimed) == 1
    await hooks.service.deliver()
    assert hooks.sender.posted == []
    hooks.clock.advance(60)
    await hooks.service.deliver()
    assert hooks.sender.ids == [a]


async def test_a_replay_during_a_run_stops_that_run(hooks: Hooks) -> None:
    await hooks.service.set_url(hooks.client_id, URL)
    ids = await hooks.event(3)
    await hooks.service.deliver()
    more = await hooks.event(2)
    hooks.sender.gate = asyncio.Event()
    run = asyncio.create_task(hooks.service.deliver())
    while hooks.sender.in_flight == 0:
        await asyncio.sleep(0)
    await hooks.service.replay(hooks.client_id, ids[1])
    hooks.sender.gate.set()
    await run
    assert hooks.sender.ids == [*ids, more[0]]  # the run stopped after the one in flight
    hooks.sender.gate = None
    await hooks.service.deliver()
    assert hooks.sender.ids == [*ids, more[0], ids[1], ids[2], *more]


async def test_a_run_posts_at_most_run_events_to_one_endpoint(clock: ManualClock) -> None:
    hooks = await Hooks(clock, run_events=3).start()
    await hooks.service.set_url(hooks.client_id, URL)
    ids = await hooks.event(7)
    await hooks.service.deliver()
    assert hooks.sender.ids == ids[:3]
    assert (await hooks.endpoint()).lease_owner is None
    await hooks.service.deliver()
    await hooks.service.deliver()
    assert hooks.sender.ids == ids


async def test_no_sender_installed_delivers_nothing_and_says_so(
    hooks: Hooks, caplog: pytest.LogCaptureFixture
) -> None:
    service = Webhooks(
        hooks.storage,
        hooks.clock,
        Auditor(hooks.storage, hooks.clock),
        PlainSecrets(),
        sender=lambda: None,
        schedule=SCHEDULE,
    )
    await service.set_url(hooks.client_id, URL)
    await hooks.event(1)
    with caplog.at_level(logging.WARNING, logger="walletcore.webhooks"):
        assert (await service.deliver()).endpoints == 0
        await service.deliver()
    assert [r.getMessage() for r in caplog.records].count(
        "no webhook sender is installed: nothing is delivered (pip install 'walletcore[webhooks]')"
    ) == 1


async def test_a_secret_that_does_not_open_is_a_failed_attempt(hooks: Hooks) -> None:
    await hooks.service.set_url(hooks.client_id, URL)
    (a,) = await hooks.event(1)
    other = Webhooks(
        hooks.storage,
        hooks.clock,
        Auditor(hooks.storage, hooks.clock),
        SealedKeyStore(os.urandom(32)),  # another master key
        sender=lambda: hooks.sender,
        schedule=SCHEDULE,
    )
    report = await other.deliver()
    assert report.failed == 1 and hooks.sender.posted == []
    assert (await hooks.log(a))[0].error is DeliveryError.SECRET


async def test_plain_secrets_where_the_keystore_seals_none(clock: ManualClock) -> None:
    hooks = await Hooks(clock, sealer=PlainSecrets()).start()
    secret = (await hooks.service.set_url(hooks.client_id, URL)).secret
    assert secret is not None
    assert (await hooks.endpoint()).secret == b"\x00" + secret.raw
    await hooks.event(1)
    await hooks.service.deliver()
    assert hooks.sender.posted[0].secrets == (secret,)
    # the sealed keystore opens such a record too (a deployment that gained one)
    assert hooks.sealer.open_secret(b"\x00" + secret.raw) == secret.raw


async def test_no_secret_reaches_the_audit_log_or_the_logs(
    hooks: Hooks, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secrets: list[WebhookSecret] = []
    setup = await hooks.service.set_url(hooks.client_id, URL)
    secrets.append(setup.secret)
    await hooks.event(2)
    hooks.sender.script(500, 410)
    await hooks.service.deliver()
    hooks.clock.advance(5)
    await hooks.service.deliver()
    secrets.append((await hooks.service.rotate(hooks.client_id)).secret)
    await hooks.service.resume(hooks.client_id)
    text = repr(await hooks.audit()) + caplog.text + repr(await hooks.log())
    text += repr(await hooks.endpoint()) + repr(hooks.sender.posted)
    for secret in secrets:
        assert secret is not None
        assert secret.text not in text and secret.text.removeprefix("whsec_") not in text
    assert "integrator-token" not in repr(await hooks.audit()) + caplog.text


# -- the client's delivery log --------------------------------------------------------------
async def test_the_client_reads_its_own_delivery_log(hooks: Hooks) -> None:
    await hooks.service.set_url(hooks.client_id, URL)
    a, b = await hooks.event(2)
    await hooks.service.deliver()
    client = ApiClient(hooks.client_id, "Acme", "ab" * 32)
    caller = Caller(client, "req-1")
    assert [x.event_id for x in await hooks.service.client_deliveries(caller)] == [b, a]
    assert [x.event_id for x in await hooks.service.client_deliveries(caller, limit=1)] == [b]
    one = await hooks.service.client_deliveries(caller, event_id=a)
    assert [x.event_id for x in one] == [a]
    stranger = Caller(ApiClient(new_id(), "Other", "cd" * 32), "req-2")
    assert await hooks.service.client_deliveries(stranger) == []
    for bad in ({"limit": 0}, {"limit": 1001}, {"limit": "5"}, {"limit": True}):
        with pytest.raises(InvalidRequest, match="limit must be an integer from 1 to 1000"):
            await hooks.service.client_deliveries(caller, **bad)
    for bad_id in ("evt_x", 7, "", "evt_1"):
        with pytest.raises(InvalidRequest, match="eventId must be an event id"):
            await hooks.service.client_deliveries(caller, event_id=bad_id)


async def test_the_delivery_log_is_pruned_after_the_feeds_retention(clock: ManualClock) -> None:
    hooks = await Hooks(clock, log_retention=timedelta(days=30)).start()
    await hooks.service.set_url(hooks.client_id, URL)
    await hooks.event(2)
    await hooks.service.deliver()
    clock.advance(days=29)
    (c,) = await hooks.event(1)
    await hooks.service.deliver()
    clock.advance(days=2)
    assert await hooks.service.prune() == 2
    assert [x.event_id for x in await hooks.log()] == [c]
