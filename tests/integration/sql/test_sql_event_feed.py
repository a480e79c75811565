"""The event feed's order on a real PostgreSQL (docs/storage.md, "The event feed"): events
are read in `(tx, seq)` order below the snapshot's horizon, so an event of a transaction
still open (which may hold a lower `seq`, or a lower `tx`, than events committed after it)
holds the feed back and is never skipped by a reader that moves its cursor to the last
event it got."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient
from walletcore.domain.events import Event, EventNote, EventPosition, EventType
from walletcore.domain.ids import new_id
from walletcore.testing import autocommit
from walletcore_sql.storage import SqlStorage

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
#: The longest another writer of the shared test server may hold the feed back.
SETTLE_SECONDS = 30.0


def _entry(client_id: str, n: int, *, event: bool = True) -> AuditEntry:
    note = EventNote(EventType.SEND_PENDING, {"n": n}) if event else None
    return AuditEntry(T0, client_id, "send", f"req-{n}", "ok", event=note)


async def _client(storage: SqlStorage) -> str:
    client = ApiClient(client_id=new_id(), name="feed", key_hash="00" * 32)
    await autocommit(storage).clients.add(client)
    return client.client_id


async def _feed(storage: SqlStorage, client_id: str) -> list[Event]:
    async with storage.read() as unit:
        return (await unit.events.after(client_id, None, limit=100)).events


async def _settled(storage: SqlStorage, client_id: str, count: int) -> list[Event]:
    """The feed once it shows `count` events (other writers of the server may hold it back
    a moment after the last commit)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_SECONDS
    while len(found := await _feed(storage, client_id)) < count and loop.time() < deadline:
        await asyncio.sleep(0.01)
    return found


async def _stored(storage: SqlStorage, client_id: str) -> list[EventPosition]:
    """Every committed event's position, read by a plain SELECT (no horizon)."""
    async with storage.database.transaction() as conn:
        found = await conn.execute(
            text("SELECT tx, seq FROM events WHERE client_id = :c ORDER BY seq"), {"c": client_id}
        )
        return [EventPosition(int(tx), int(seq)) for tx, seq in found]


async def test_an_open_transaction_holds_back_events_committed_after_it(
    pg_storage: SqlStorage,
) -> None:
    storage = pg_storage
    client_id = await _client(storage)
    async with storage.write() as first:
        await first.audit.append(_entry(client_id, 1))
        await first.clients.get(client_id)  # sends the deferred inserts: the row exists
        async with storage.write() as second:
            await second.audit.append(_entry(client_id, 2))
        # the second committed after the first took its place: it is stored, not served
        [second_at] = await _stored(storage, client_id)  # the first's is not visible yet
        async with storage.read() as unit:
            assert await unit.events.has(client_id, second_at)
        assert await _feed(storage, client_id) == []
        await asyncio.sleep(0.05)
        assert await _feed(storage, client_id) == []
    # the first committed: both, the first first
    events = await _settled(storage, client_id, 2)
    assert [e.data["n"] for e in events] == [1, 2]
    assert events[0].position < events[1].position == second_at


async def test_the_feed_is_in_transaction_order_not_row_order(pg_storage: SqlStorage) -> None:
    """The first transaction writes (takes its id) before the second, but inserts its event
    after the second's: its event has the higher `seq` and still comes first, and neither
    is served while the first is open."""
    storage = pg_storage
    client_id = await _client(storage)
    async with storage.write() as first:
        await first.audit.append(_entry(client_id, 0, event=False))
        await first.clients.get(client_id)  # the first has its transaction id now
        async with storage.write() as second:
            await second.audit.append(_entry(client_id, 2))
            await second.clients.get(client_id)  # the second's event: the lower seq
            await first.audit.append(_entry(client_id, 1))
            await first.clients.get(client_id)  # the first's event: the higher seq
        assert await _feed(storage, client_id) == []
    events = await _settled(storage, client_id, 2)
    assert [e.data["n"] for e in events] == [1, 2]
    assert events[0].position.tx < events[1].position.tx
    assert events[0].position.seq > events[1].position.seq


async def test_a_reader_that_keeps_its_cursor_misses_no_event_of_racing_writers(
    pg_storage: SqlStorage,
) -> None:
    """Writers commit in another order than they inserted (each holds its unit open a
    random while); a reader reads from its cursor all along and gets every event once,
    in increasing positions."""
    storage = pg_storage
    client_id = await _client(storage)
    writers = 40
    rng = random.Random(7)
    holds = [rng.uniform(0, 0.05) for _ in range(writers)]
    starts = [rng.uniform(0, 0.05) for _ in range(writers)]
    done = asyncio.Event()
    committed: list[int] = []

    async def write(n: int) -> None:
        await asyncio.sleep(starts[n])
        async with storage.write() as unit:
            await unit.audit.append(_entry(client_id, n))
            await unit.clients.get(client_id)
            await asyncio.sleep(holds[n])
        committed.append(n)

    async def read() -> list[Event]:
        got: list[Event] = []
        cursor: EventPosition | None = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_SECONDS
        while len(got) < writers and loop.time() < deadline:
            async with storage.read() as unit:
                page = await unit.events.after(client_id, cursor, limit=3)
            got.extend(page.events)
            if page.events:
                cursor = page.events[-1].position
            elif done.is_set():
                await asyncio.sleep(0.01)
            else:
                await asyncio.sleep(0.002)
        return got

    reader = asyncio.create_task(read())
    await asyncio.gather(*(write(n) for n in range(writers)))
    done.set()
    got = await reader
    assert sorted(e.data["n"] for e in got) == list(range(writers))  # each once
    positions = [e.position for e in got]
    assert positions == sorted(positions) and len(set(positions)) == writers
    # the writers committed in another order than their rows were numbered: a reader by
    # `seq` alone, moving its cursor past a committed row, would have skipped open ones
    by_seq = [e.data["n"] for e in sorted(got, key=lambda e: e.position.seq)]
    assert committed != by_seq
