"""`WebhookStorageContract`: what every storage promises of `unit.webhooks`
(walletcore.ports.webhooks), as pytest tests; part of `StorageContract`.

The `storage` fixture is the contract's (an empty, ready Storage); `client_id` an api
client stored in it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
import pytest_asyncio

from walletcore.domain.clients import ApiClient
from walletcore.domain.events import EventPosition
from walletcore.domain.ids import new_id
from walletcore.domain.webhooks import (
    AttemptResult,
    DeliveryAttempt,
    DeliveryError,
    WebhookEndpoint,
)
from walletcore.ports.storage import Storage
from walletcore.testing.storage import autocommit

W0 = datetime(2026, 3, 1, 9, 30, 15, 250000, tzinfo=UTC)
#: A cursor as PostgreSQL makes them: a transaction id of 64 bits, a row number.
BIG = EventPosition(2**40 + 17, 9_000_000_001)


def endpoint(client_id: str, **changes: object) -> WebhookEndpoint:
    base = WebhookEndpoint(
        client_id=client_id,
        url="https://hooks.example.com/walletcore?token=x",
        secret=b"\x01sealed-current\x00\xff",
        created_at=W0,
        updated_at=W0,
        next_attempt_at=W0,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def attempt(client_id: str, event_id: str, n: int = 1, **changes: object) -> DeliveryAttempt:
    base = DeliveryAttempt(
        client_id=client_id,
        event_id=event_id,
        attempt=n,
        at=W0 + timedelta(seconds=n),
        status=503,
        error=None,
        seconds=0.125,
        result=AttemptResult.RETRYING,
        next_attempt_at=W0 + timedelta(minutes=5),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


class WebhookStorageContract:
    """The webhook cases of the storage contract (a mixin of `StorageContract`)."""

    pytestmark = pytest.mark.asyncio

    @pytest_asyncio.fixture
    async def other_client_id(self, storage: Storage) -> str:
        other = ApiClient(new_id(), "Other", "cd" * 32, created_at=W0)
        await autocommit(storage).clients.add(other)
        return other.client_id

    # -- endpoints ----------------------------------------------------------------------
    async def test_webhook_endpoint_round_trips_every_field(
        self, storage: Storage, client_id: str
    ) -> None:
        full = endpoint(
            client_id,
            previous_secret=b"\x01sealed-previous",
            previous_until=W0 + timedelta(hours=24),
            paused=True,
            disabled_reason="410 Gone at 2026-03-01T09:30:15.250Z",
            disabled_at=W0 + timedelta(seconds=1),
            cursor=BIG,
            attempts=4,
            next_attempt_at=W0 + timedelta(minutes=30),
            lease_owner="w" * 24,
            lease_until=W0 + timedelta(seconds=60),
        )
        db = autocommit(storage)
        assert await db.webhooks.get(client_id) is None
        await db.webhooks.put(full)
        assert await db.webhooks.get(client_id) == full
        bare = endpoint(client_id, cursor=None, next_attempt_at=None)
        other = ApiClient(new_id(), "Bare", "ef" * 32, created_at=W0)
        await db.clients.add(other)
        await db.webhooks.put(dataclasses.replace(bare, client_id=other.client_id))
        assert await db.webhooks.get(other.client_id) == dataclasses.replace(
            bare, client_id=other.client_id
        )

    async def test_put_over_a_stored_endpoint_keeps_its_delivery_state(
        self, storage: Storage, client_id: str
    ) -> None:
        db = autocommit(storage)
        stored = endpoint(client_id, cursor=EventPosition(0, 7), attempts=2, lease_owner="w1")
        await db.webhooks.put(stored)
        changed = dataclasses.replace(
            stored,
            url="https://other.example.com/",
            secret=b"\x01new",
            previous_secret=b"\x01sealed-current",
            previous_until=W0 + timedelta(hours=1),
            paused=True,
            updated_at=W0 + timedelta(minutes=1),
            # a stale copy's delivery state: never written by put
            cursor=None,
            attempts=0,
            next_attempt_at=None,
            lease_owner=None,
        )
        await db.webhooks.put(changed)
        assert await db.webhooks.get(client_id) == dataclasses.replace(
            changed,
            cursor=EventPosition(0, 7),
            attempts=2,
            next_attempt_at=W0,
            lease_owner="w1",
        )

    async def test_a_read_unit_cannot_change_an_endpoint(
        self, storage: Storage, client_id: str
    ) -> None:
        async with storage.read() as unit:
            with pytest.raises(RuntimeError):
                await unit.webhooks.put(endpoint(client_id))
            with pytest.raises(RuntimeError):
                await unit.webhooks.claim(W0, owner="w", until=W0, limit=1)
            with pytest.raises(RuntimeError):
                await unit.webhooks.record(attempt(client_id, "evt_0_1"))
        assert await autocommit(storage).webhooks.get(client_id) is None

    async def test_a_webhook_change_in_a_unit_that_raises_is_not_written(
        self, storage: Storage, client_id: str
    ) -> None:
        with pytest.raises(LookupError):
            async with storage.write() as unit:
                await unit.webhooks.put(endpoint(client_id))
                await unit.webhooks.record(attempt(client_id, "evt_0_1"))
                raise LookupError("refused")
        db = autocommit(storage)
        assert await db.webhooks.get(client_id) is None
        assert await db.webhooks.attempts(client_id, limit=10) == []

    # -- claims and leases ------------------------------------------------------------
    async def test_claim_leases_the_due_endpoints_longest_due_first(self, storage: Storage) -> None:
        db = autocommit(storage)
        ids = []
        cases: list[dict[str, object]] = [
            {"next_attempt_at": W0 - timedelta(seconds=5)},  # due
            {"next_attempt_at": W0 - timedelta(seconds=50)},  # due, longer
            {"next_attempt_at": W0 + timedelta(seconds=1)},  # not yet
            {"paused": True},
            {"disabled_reason": "410", "disabled_at": W0},
            {"lease_owner": "x", "lease_until": W0 + timedelta(seconds=1)},  # leased
            {"lease_owner": "x", "lease_until": W0},  # lapsed lease: due
        ]
        for changes in cases:
            c = ApiClient(new_id(), "C", "ab" * 32, created_at=W0)
            await db.clients.add(c)
            await db.webhooks.put(endpoint(c.client_id, **changes))
            ids.append(c.client_id)
        until = W0 + timedelta(seconds=60)
        async with storage.write() as unit:
            claimed = await unit.webhooks.claim(W0, owner="w1", until=until, limit=2)
        assert [e.client_id for e in claimed] == [ids[1], ids[0]]
        assert all((e.lease_owner, e.lease_until) == ("w1", until) for e in claimed)
        async with storage.write() as unit:
            rest = await unit.webhooks.claim(W0, owner="w2", until=until, limit=10)
        assert [e.client_id for e in rest] == [ids[6]]
        async with storage.write() as unit:
            assert await unit.webhooks.claim(W0, owner="w3", until=until, limit=10) == []
        stored = await db.webhooks.get(ids[1])
        assert (stored.lease_owner, stored.lease_until) == ("w1", until)

    async def test_claims_racing_never_lease_one_endpoint_twice(self, storage: Storage) -> None:
        db = autocommit(storage)
        for _ in range(6):
            c = ApiClient(new_id(), "C", "ab" * 32, created_at=W0)
            await db.clients.add(c)
            await db.webhooks.put(endpoint(c.client_id))

        async def claim(owner: str) -> list[str]:
            async with storage.write() as unit:
                found = await unit.webhooks.claim(
                    W0, owner=owner, until=W0 + timedelta(seconds=60), limit=4
                )
                await asyncio.sleep(0.01)  # the unit stays open while the others run
            return [e.client_id for e in found]

        results = await asyncio.gather(*(claim(f"w{i}") for i in range(4)))
        everyone = [c for found in results for c in found]
        assert len(everyone) == len(set(everyone)) == 6

    async def test_advance_is_a_compare_and_set_on_the_lease_and_cursor(
        self, storage: Storage, client_id: str
    ) -> None:
        db = autocommit(storage)
        await db.webhooks.put(endpoint(client_id, cursor=EventPosition(0, 3)))
        async with storage.write() as unit:
            [leased] = await unit.webhooks.claim(
                W0, owner="w1", until=W0 + timedelta(seconds=60), limit=1
            )
        moved = leased.delivered(EventPosition(0, 4), W0 + timedelta(seconds=1))
        # another owner, or a cursor no longer stored: nothing written
        for stale in (
            dataclasses.replace(leased, lease_owner="w2"),
            dataclasses.replace(leased, cursor=EventPosition(0, 2)),
            dataclasses.replace(leased, cursor=None),
        ):
            async with storage.write() as unit:
                assert await unit.webhooks.advance(stale, moved) is None
        assert await db.webhooks.get(client_id) == leased
        # the operator paused it meanwhile: the move applies, the pause stays
        await db.webhooks.put(dataclasses.replace(leased, paused=True))
        async with storage.write() as unit:
            stored = await unit.webhooks.advance(leased, moved)
        assert stored is not None and stored.paused
        assert stored == dataclasses.replace(moved, paused=True)
        assert await db.webhooks.get(client_id) == stored
        # released; a 410 disables through advance, and a later move never enables
        async with storage.write() as unit:
            released = await unit.webhooks.advance(stored, stored.released())
        assert released is not None and released.lease_owner is None
        gone = released.gone(W0 + timedelta(seconds=2), "410 Gone")
        async with storage.write() as unit:
            disabled = await unit.webhooks.advance(released, gone)
        assert disabled is not None and disabled.disabled_reason == "410 Gone"
        assert disabled.disabled_at == W0 + timedelta(seconds=2)
        async with storage.write() as unit:
            again = await unit.webhooks.advance(disabled, dataclasses.replace(disabled, attempts=1))
        assert again is not None and again.disabled and again.attempts == 1

    async def test_advance_from_no_cursor_and_no_lease(
        self, storage: Storage, client_id: str
    ) -> None:
        stored = endpoint(client_id, cursor=None)
        await autocommit(storage).webhooks.put(stored)
        async with storage.write() as unit:
            moved = await unit.webhooks.advance(stored, stored.failed(W0, timedelta(seconds=5)))
        assert moved is not None and moved.attempts == 1 and moved.cursor is None
        assert moved.next_attempt_at == W0 + timedelta(seconds=5)

    async def test_an_operators_change_read_for_update_keeps_a_racing_move(
        self, storage: Storage, client_id: str
    ) -> None:
        """`get` in a write unit reads for update: a worker's move waits for the
        operator's unit, and neither undoes the other."""
        db = autocommit(storage)
        await db.webhooks.put(endpoint(client_id, cursor=EventPosition(0, 1)))
        async with storage.write() as unit:
            [leased] = await unit.webhooks.claim(
                W0, owner="w1", until=W0 + timedelta(seconds=60), limit=1
            )
        read = asyncio.Event()

        async def operator() -> None:
            async with storage.write() as unit:
                stored = await unit.webhooks.get(client_id)
                read.set()
                await asyncio.sleep(0.05)
                assert stored is not None
                await unit.webhooks.put(dataclasses.replace(stored, url="https://new.example/"))

        async def worker() -> WebhookEndpoint | None:
            await read.wait()
            async with storage.write() as unit:
                return await unit.webhooks.advance(
                    leased, leased.delivered(EventPosition(0, 2), W0)
                )

        _, moved = await asyncio.gather(operator(), worker())
        assert moved is not None and moved.url == "https://new.example/"
        stored = await db.webhooks.get(client_id)
        assert stored.url == "https://new.example/" and stored.cursor == EventPosition(0, 2)

    # -- replay -----------------------------------------------------------------------
    async def test_replay_sets_the_cursor_back_only(self, storage: Storage, client_id: str) -> None:
        db = autocommit(storage)
        later = W0 + timedelta(hours=1)
        stored = endpoint(
            client_id,
            cursor=EventPosition(5, 10),
            attempts=3,
            next_attempt_at=W0 + timedelta(hours=2),
            lease_owner="w1",
            lease_until=W0 + timedelta(seconds=60),
        )
        await db.webhooks.put(stored)
        for ahead in (EventPosition(5, 10), EventPosition(5, 11), EventPosition(6, 0)):
            assert not await db.webhooks.replay(client_id, ahead, later)
        assert await db.webhooks.get(client_id) == stored
        assert await db.webhooks.replay(client_id, EventPosition(5, 9), later)
        assert await db.webhooks.get(client_id) == dataclasses.replace(
            stored,
            cursor=EventPosition(5, 9),
            attempts=0,
            next_attempt_at=later,
            lease_owner=None,
            lease_until=None,
        )
        assert await db.webhooks.replay(client_id, EventPosition(4, 2**40), later)
        assert await db.webhooks.replay(client_id, None, later)  # before every event
        replayed = await db.webhooks.get(client_id)
        assert replayed.cursor is None
        assert not await db.webhooks.replay(client_id, None, later)  # nothing further back
        assert not await db.webhooks.replay(new_id(), None, later)  # no endpoint

    # -- the delivery log -------------------------------------------------------------
    async def test_attempts_round_trip_newest_first_per_client_and_event(
        self, storage: Storage, client_id: str, other_client_id: str
    ) -> None:
        db = autocommit(storage)
        first = attempt(client_id, "evt_0_1", 1)
        second = attempt(
            client_id,
            "evt_0_1",
            2,
            status=None,
            error=DeliveryError.TIMEOUT,
            seconds=15.0,
        )
        third = attempt(
            client_id,
            "evt_0_1",
            3,
            status=200,
            result=AttemptResult.DELIVERED,
            next_attempt_at=None,
            seconds=0.042,
        )
        fourth = attempt(
            client_id,
            "evt_912_3",
            1,
            at=third.at,  # the same instant: the later write is the newer
            status=410,
            result=AttemptResult.DISABLED,
            next_attempt_at=None,
        )
        for a in (first, second, third, fourth):
            await db.webhooks.record(a)
        await db.webhooks.record(attempt(other_client_id, "evt_0_1"))
        assert await db.webhooks.attempts(client_id, limit=10) == [fourth, third, second, first]
        assert await db.webhooks.attempts(client_id, limit=2) == [fourth, third]
        assert await db.webhooks.attempts(client_id, event_id="evt_0_1", limit=10) == [
            third,
            second,
            first,
        ]
        assert await db.webhooks.attempts(client_id, event_id="evt_9_9", limit=10) == []
        assert len(await db.webhooks.attempts(other_client_id, limit=10)) == 1

    async def test_prune_deletes_the_oldest_attempts_in_batches(
        self, storage: Storage, client_id: str
    ) -> None:
        db = autocommit(storage)
        for n in range(1, 6):
            await db.webhooks.record(attempt(client_id, "evt_0_1", n))
        before = W0 + timedelta(seconds=4, milliseconds=500)  # attempts 1 to 4 are older
        assert await db.webhooks.prune(before, 3) == 3
        assert await db.webhooks.prune(before, 3) == 1
        assert await db.webhooks.prune(before, 3) == 0
        assert [a.attempt for a in await db.webhooks.attempts(client_id, limit=10)] == [5]


__all__ = ["WebhookStorageContract"]
