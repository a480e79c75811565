"""Webhooks end to end on each storage (memory, SQLite, PostgreSQL): events published on
the client's feed, delivered by the job through the httpx sender to a real loopback
receiver that checks every message with `standardwebhooks.Webhook(secret).verify`.

In order; a receiver down (connections refused), then answering 503, then back: every
event delivered once, in order; a 410 disables; a rotation signs with both secrets during
its overlap, each verifying on its own, then with the new one only; an inside target
refused unless allowed, when set and at send time; a replay delivers again; two workers
on one database never post one event twice."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from standardwebhooks.webhooks import WebhookVerificationError
from webhook_receiver import Received, WebhookReceiver

from walletcore.clock import SystemClock
from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import InvalidRequest
from walletcore.domain.events import EventNote, EventType
from walletcore.domain.ids import new_id
from walletcore.domain.webhooks import AttemptResult, DeliveryError, RetrySchedule
from walletcore.ports import Storage
from walletcore.services.audit import Auditor
from walletcore.services.webhooks import Webhooks
from walletcore.testing import autocommit
from walletcore_chains.keystore import SealedKeyStore
from walletcore_webhooks.sender import HttpxSender

#: Quick retries, many of them: the tests are about order and once-only, not the delays.
SCHEDULE = RetrySchedule.of_seconds([0] + [0.1] * 40)
MASTER_KEY = os.urandom(32)


class Worker:
    """One process's webhook service on `storage`, with its own sender."""

    def __init__(self, storage: Storage, *, allow_private: bool = True, **options: Any) -> None:
        self.storage = storage
        self.sender = HttpxSender(allow_private=allow_private, total_timeout=2.0)
        self.service = Webhooks(
            storage,
            SystemClock(),
            Auditor(storage, SystemClock()),
            SealedKeyStore(MASTER_KEY),
            sender=lambda: self.sender,
            schedule=options.pop("schedule", SCHEDULE),
            https_only=False,
            allow_private=allow_private,
            **options,
        )

    async def aclose(self) -> None:
        await self.service.aclose()


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


@pytest.fixture
async def client_id(storage: Storage) -> str:
    client = ApiClient(new_id(), "Acme", "ab" * 32)
    await autocommit(storage).clients.add(client)
    return client.client_id


@pytest.fixture
async def worker(storage: Storage) -> AsyncIterator[Worker]:
    running = Worker(storage)
    yield running
    await running.aclose()


async def publish(storage: Storage, client_id: str, n: int) -> list[str]:
    """`n` events on the client's feed, each in a unit of its own; their ids, in order."""
    async with storage.read() as unit:
        before = len((await unit.events.after(client_id, None, limit=10_000)).events)
    for i in range(n):
        async with storage.write() as unit:
            note = EventNote(EventType.SEND_PENDING, {"requestId": f"req-{i}", "n": i})
            await unit.events.publish(client_id, None, note, SystemClock().now())
    ids: list[str] = []
    for _ in range(200):  # PostgreSQL serves an event once no older transaction is open
        async with storage.read() as unit:
            page = await unit.events.after(client_id, None, limit=10_000)
        ids = [e.event_id for e in page.events]
        if len(ids) >= before + n:
            return ids[-n:]
        await asyncio.sleep(0.05)
    raise AssertionError(f"{n} events published, {len(ids) - before} served")


async def drive(workers: list[Worker], done: Callable[[], bool], seconds: float = 20) -> None:
    """Run the job (on every worker at once) until `done()`."""
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "the deliveries did not finish in time"
        await asyncio.gather(*(w.service.deliver() for w in workers))
        await asyncio.sleep(0.05)


def delivered(receiver: WebhookReceiver, answered: Callable[[Received], int]) -> list[str]:
    """The ids of the messages the receiver answered 2xx, in order."""
    return [r.headers["webhook-id"] for r in receiver.received if 200 <= answered(r) < 300]


async def test_events_arrive_in_order_and_every_one_verifies(
    storage: Storage, client_id: str, worker: Worker, receiver: WebhookReceiver
) -> None:
    secret = (await worker.service.set_url(client_id, receiver.url + "/hooks")).secret
    assert secret is not None
    ids = await publish(storage, client_id, 6)
    await drive([worker], lambda: len(receiver.received) >= 6)
    assert receiver.ids == ids
    for got, event_id in zip(receiver.received, ids, strict=True):
        payload = got.verify(secret.text)
        assert payload["id"] == event_id and payload["type"] == "send.pending"
        assert got.path == "/hooks"
    log = await worker.service.deliveries(client_id)
    assert [(a.event_id, a.status, a.result) for a in reversed(log)] == [
        (i, 200, AttemptResult.DELIVERED) for i in ids
    ]


async def test_a_receiver_down_then_failing_then_back_gets_everything_once_in_order(
    storage: Storage, client_id: str, worker: Worker, receiver: WebhookReceiver
) -> None:
    secret = (await worker.service.set_url(client_id, receiver.url)).secret
    assert secret is not None
    receiver.stop()  # down: connections refused
    ids = await publish(storage, client_id, 5)
    for _ in range(3):
        await worker.service.deliver()
        await asyncio.sleep(0.12)
    refused = await worker.service.deliveries(client_id)
    assert refused and all(a.error is DeliveryError.CONNECT for a in refused)
    assert {a.event_id for a in refused} == {ids[0]}  # the later ones wait behind it
    statuses: dict[int, int] = {}
    count = {"n": 0}

    def flaky(request: Received) -> int:  # up again, but failing for four answers
        count["n"] += 1
        status = 503 if count["n"] <= 4 else 200
        statuses[id(request)] = status
        return status

    receiver.respond = flaky
    receiver.start()
    await drive([worker], lambda: len(delivered(receiver, lambda r: statuses[id(r)])) >= 5)
    assert delivered(receiver, lambda r: statuses[id(r)]) == ids  # once each, in order
    for got in receiver.received:
        got.verify(secret.text)
    endpoint = await worker.service.show(client_id)
    assert endpoint.cursor is not None and endpoint.cursor.event_id == ids[-1]
    assert endpoint.attempts == 0 and endpoint.lease_owner is None


async def test_a_410_disables_the_endpoint(
    storage: Storage, client_id: str, worker: Worker, receiver: WebhookReceiver
) -> None:
    await worker.service.set_url(client_id, receiver.url)
    receiver.respond = lambda _: 410
    ids = await publish(storage, client_id, 2)
    await drive([worker], lambda: len(receiver.received) >= 1)
    for _ in range(3):
        await worker.service.deliver()
    assert receiver.ids == ids[:1]
    endpoint = await worker.service.show(client_id)
    assert endpoint.disabled and "410" in (endpoint.disabled_reason or "")
    [attempt] = await worker.service.deliveries(client_id)
    assert (attempt.status, attempt.result) == (410, AttemptResult.DISABLED)
    async with storage.read() as unit:
        actions = [e.action for e in await unit.audit.newest(10)]
    assert "webhook.disable" in actions


async def test_during_a_rotation_both_signatures_verify_each_with_its_secret(
    storage: Storage, client_id: str, receiver: WebhookReceiver
) -> None:
    worker = Worker(storage, rotation_overlap=timedelta(seconds=1))
    try:
        old = (await worker.service.set_url(client_id, receiver.url)).secret
        new = (await worker.service.rotate(client_id)).secret
        assert old is not None and new is not None
        (during,) = await publish(storage, client_id, 1)
        await drive([worker], lambda: len(receiver.received) >= 1)
        got = receiver.received[0]
        assert got.headers["webhook-id"] == during
        assert len(got.headers["webhook-signature"].split(" ")) == 2
        assert got.verify(new.text)["id"] == during
        assert got.verify(old.text)["id"] == during
        await asyncio.sleep(1.05)  # the overlap is over
        (after,) = await publish(storage, client_id, 1)
        await drive([worker], lambda: len(receiver.received) >= 2)
        late = receiver.received[1]
        assert late.verify(new.text)["id"] == after
        with pytest.raises(WebhookVerificationError):
            late.verify(old.text)
    finally:
        await worker.aclose()


async def test_an_inside_target_is_refused_unless_allowed(
    storage: Storage, client_id: str, receiver: WebhookReceiver
) -> None:
    strict = Worker(storage, allow_private=False)
    lenient = Worker(storage, allow_private=True)
    try:
        with pytest.raises(InvalidRequest, match="loopback"):
            await strict.service.set_url(client_id, receiver.url)
        await lenient.service.set_url(client_id, receiver.url)  # the sandbox's rule
        await publish(storage, client_id, 1)
        await strict.service.deliver()  # a deployment that does not allow it: nothing sent
        assert receiver.received == []
        [attempt] = await strict.service.deliveries(client_id)
        assert attempt.error is DeliveryError.FORBIDDEN_ADDRESS
        assert attempt.result is AttemptResult.RETRYING
    finally:
        await strict.aclose()
        await lenient.aclose()


async def test_replay_delivers_again_from_an_event(
    storage: Storage, client_id: str, worker: Worker, receiver: WebhookReceiver
) -> None:
    secret = (await worker.service.set_url(client_id, receiver.url)).secret
    assert secret is not None
    ids = await publish(storage, client_id, 4)
    await drive([worker], lambda: len(receiver.received) >= 4)
    with pytest.raises(InvalidRequest, match="not in this client's feed"):
        await worker.service.replay(client_id, "evt_0_999999")
    with pytest.raises(InvalidRequest, match="only goes back"):
        await worker.service.replay(client_id, (await publish(storage, client_id, 1))[0])
    ids_delivered = len(ids) + 1
    await drive([worker], lambda: len(receiver.received) >= ids_delivered)
    ids.append(receiver.ids[-1])
    await worker.service.replay(client_id, ids[1])
    await drive([worker], lambda: len(receiver.received) >= 9)
    assert receiver.ids == [*ids, *ids[1:]]
    for got in receiver.received:
        got.verify(secret.text)


async def test_two_workers_on_one_database_post_each_event_once(
    storages: list[Storage], client_id: str, receiver: WebhookReceiver
) -> None:
    workers = [Worker(s) for s in storages]
    try:
        other = ApiClient(new_id(), "Other", "cd" * 32)
        await autocommit(storages[0]).clients.add(other)
        with WebhookReceiver() as second:
            await workers[0].service.set_url(client_id, receiver.url)
            await workers[1].service.set_url(other.client_id, second.url)
            receiver.delay = second.delay = 0.02  # deliveries overlap between the workers
            ids = await publish(storages[0], client_id, 8)
            other_ids = await publish(storages[1], other.client_id, 8)
            await drive(workers, lambda: len(receiver.received) >= 8 and len(second.received) >= 8)
            await asyncio.gather(*(w.service.deliver() for w in workers))
            assert receiver.ids == ids and second.ids == other_ids
    finally:
        for worker in workers:
            await worker.aclose()
