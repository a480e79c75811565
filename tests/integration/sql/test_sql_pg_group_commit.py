"""Group commit on PostgreSQL (`walletcore_sql.direct.PgGroupCommit`, docs/storage.md):
quotes and moves of trades that arrive while every lane is busy are sent together, each
still stored with its entry or not at all, answered only once committed, and decided as it
would be alone.

The lanes are made busy for real: a transaction of the test's holds a user's row (a quote
of that user waits for it: the trade's foreign key) or a trade's row (a move of it waits),
so the writes sent alone wait on the server and the next ones queue behind them."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from sql_helpers import QUOTED_AT, open_quote
from sqlalchemy import text

from walletcore.domain.assets import Chain
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.errors import StorageError, StorageUnavailable
from walletcore.domain.events import EventNote, EventType
from walletcore.domain.ids import new_id
from walletcore.domain.trade import Figures, Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.testing import autocommit
from walletcore_sql import direct
from walletcore_sql.storage import SqlStorage
from walletcore_sql.stores import TRADE_ADD_AUDITED, TRADE_SWAP_AUDITED

pytestmark = pytest.mark.postgres

T0 = QUOTED_AT


@pytest.fixture
def storage(pg_storage: SqlStorage) -> SqlStorage:
    return pg_storage


async def _client(storage: SqlStorage) -> str:
    client = ApiClient(client_id=new_id(), name="x", key_hash="00" * 32)
    await autocommit(storage).clients.add(client)
    return client.client_id


async def _user(storage: SqlStorage, client_id: str) -> str:
    uid = new_id()
    await autocommit(storage).wallets.add_user(
        User(uid, client_id, T0),
        WalletRecord(client_id, WalletOwner.USER, uid, b"sealed", {Chain.BITCOIN: "bc1q"}, T0),
    )
    return uid


def _quote(client_id: str, user_id: str, trade_id: str | None = None) -> Trade:
    quote = open_quote(client_id, user_id)
    return quote if trade_id is None else dataclasses.replace(quote, trade_id=trade_id)


def _entry(action: str, trade: Trade, *, event: bool = False) -> AuditEntry:
    """The entry of `action` on `trade`; with `event`, carrying a feed event that names it."""
    note = EventNote(EventType.TRADE_APPROVED, {"tradeId": trade.trade_id, "action": action})
    return AuditEntry(
        T0,
        trade.client_id,
        action,
        new_id(),
        "ok",
        trade.user_id,
        trade.trade_id,
        event=note if event else None,
    )


def _executing(trade: Trade) -> Trade:
    return trade.start_approval(T0 + timedelta(seconds=1))


def _completed(trade: Trade) -> Trade:
    executing = _executing(trade)
    return dataclasses.replace(
        executing,
        status=TradeStatus.COMPLETED,
        completed_at=T0 + timedelta(seconds=2),
        executed=Figures(Decimal("0.01"), Decimal("601.2"), Decimal(60120)),
        reference="SBX-1",
    )


def _group(storage: SqlStorage, statement: direct.Positional) -> direct.PgGroupCommit:
    bound = storage.database._bound
    assert bound is not None and bound.units is not None
    return bound.units.group(statement)


@contextlib.asynccontextmanager
async def _holding(storage: SqlStorage, lock: str, **params: Any) -> AsyncIterator[int]:
    """A transaction of its own holding the rows `lock` selects FOR UPDATE until the block
    ends (then rolled back: it wrote nothing); its session's pid."""
    async with storage.database.transaction(write=True) as conn:
        await conn.execute(text(lock), params)
        yield (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()


async def _waiting_on_locks(storage: SqlStorage, blocker: int, sessions: int) -> None:
    """Until `sessions` statements wait, on the server, behind `blocker`'s locks."""
    for _ in range(200):
        if len(await _lock_waiters(storage, blocker)) >= sessions:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{sessions} statements never waited on a lock")


async def _queued(group: direct.PgGroupCommit, writes: int) -> None:
    for _ in range(200):
        if len(group.waiting) >= writes:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{writes} writes never queued")


async def _lanes_busy_with_quotes(
    storage: SqlStorage, client_id: str, held_user: str, blocker: int
) -> list[asyncio.Task[None]]:
    """`GROUP_LANES` quotes of `held_user` (whose row the caller holds) sent alone and
    waiting on the server: every lane of the quotes' group commit busy."""
    tasks = []
    for _ in range(direct.GROUP_LANES):
        quote = _quote(client_id, held_user)
        tasks.append(asyncio.create_task(storage.add_trade(quote, _entry("trade.sell", quote))))
    await _waiting_on_locks(storage, blocker, direct.GROUP_LANES)
    return tasks


async def _stored(storage: SqlStorage, trade: Trade) -> Trade | None:
    async with storage.read() as unit:
        return await unit.trades.get(trade.client_id, trade.user_id, trade.trade_id)


async def _entries_for(storage: SqlStorage, trade_id: str) -> list[str]:
    async with storage.read() as unit:
        return [e.action for e in await unit.audit.newest(limit=500) if e.target == trade_id]


async def _events_for(storage: SqlStorage, trade_id: str) -> list[str]:
    """The actions named by the events stored for `trade_id`, by row (a plain SELECT: the
    feed's horizon plays no part in what is stored)."""
    async with storage.database.transaction(write=False) as conn:
        found = await conn.execute(text("SELECT data FROM events ORDER BY seq"))
        return [d["action"] for (d,) in found if d["tradeId"] == trade_id]


async def _answers(*calls: Awaitable[Any]) -> list[Any]:
    return list(await asyncio.gather(*calls, return_exceptions=True))


# -- quotes -------------------------------------------------------------------------------
async def test_one_quote_at_a_time_goes_alone_as_before(storage: SqlStorage) -> None:
    client_id = await _client(storage)
    uid = await _user(storage, client_id)
    for _ in range(3):
        quote = _quote(client_id, uid)
        await storage.add_trade(quote, _entry("trade.sell", quote))
        assert await _stored(storage, quote) == quote
    group = _group(storage, TRADE_ADD_AUDITED)
    assert (group.batches, group.batched) == (0, 0)  # nothing waited: no batch


async def test_quotes_arriving_while_the_lanes_are_busy_are_stored_together(
    storage: SqlStorage,
) -> None:
    client_id = await _client(storage)
    held, other = await _user(storage, client_id), await _user(storage, client_id)
    quotes = [_quote(client_id, other) for _ in range(6)]
    group = _group(storage, TRADE_ADD_AUDITED)
    async with _holding(
        storage, "SELECT 1 FROM users WHERE user_id = :u FOR UPDATE", u=held
    ) as blocker:
        busy = await _lanes_busy_with_quotes(storage, client_id, held, blocker)
        queued = [
            asyncio.create_task(storage.add_trade(q, _entry("trade.sell", q))) for q in quotes
        ]
        await _queued(group, len(quotes))
        assert not any(task.done() for task in queued)  # nothing answered before it commits
    assert await _answers(*busy, *queued) == [None] * (direct.GROUP_LANES + len(quotes))
    assert group.batches == 1 and group.batched == len(quotes) and group.refused == 0
    for quote in quotes:
        assert await _stored(storage, quote) == quote
        assert await _entries_for(storage, quote.trade_id) == ["trade.sell"]


async def test_a_batch_the_server_refuses_is_sent_again_quote_by_quote(
    storage: SqlStorage,
) -> None:
    """One quote of the batch has a trade id stored already: it alone fails (500), with no
    entry; every other quote of the batch is stored with its entry."""
    client_id = await _client(storage)
    held, other = await _user(storage, client_id), await _user(storage, client_id)
    first = _quote(client_id, other)
    await storage.add_trade(first, _entry("trade.sell", first))
    good = [_quote(client_id, other) for _ in range(4)]
    again = _quote(client_id, other, trade_id=first.trade_id)
    group = _group(storage, TRADE_ADD_AUDITED)
    async with _holding(
        storage, "SELECT 1 FROM users WHERE user_id = :u FOR UPDATE", u=held
    ) as blocker:
        busy = await _lanes_busy_with_quotes(storage, client_id, held, blocker)
        calls = [*good[:2], again, *good[2:]]
        queued = [
            asyncio.create_task(storage.add_trade(q, _entry(f"sell-{n}", q)))
            for n, q in enumerate(calls)
        ]
        await _queued(group, len(calls))
    answers = await _answers(*queued)
    await _answers(*busy)
    assert isinstance(answers[2], StorageError) and answers[2].status == 500
    assert answers[:2] + answers[3:] == [None] * 4
    assert group.batches == 1 and group.refused == 1
    for quote in good:
        assert await _stored(storage, quote) == quote
    assert await _stored(storage, first) == first  # the stored trade is untouched
    assert await _entries_for(storage, first.trade_id) == ["trade.sell"]  # not "sell-2"


async def test_a_quote_whose_caller_left_while_it_waited_is_never_sent(
    storage: SqlStorage,
) -> None:
    client_id = await _client(storage)
    held, other = await _user(storage, client_id), await _user(storage, client_id)
    left, kept = _quote(client_id, other), _quote(client_id, other)
    group = _group(storage, TRADE_ADD_AUDITED)
    async with _holding(
        storage, "SELECT 1 FROM users WHERE user_id = :u FOR UPDATE", u=held
    ) as blocker:
        busy = await _lanes_busy_with_quotes(storage, client_id, held, blocker)
        leaving = asyncio.create_task(storage.add_trade(left, _entry("trade.sell", left)))
        staying = asyncio.create_task(storage.add_trade(kept, _entry("trade.sell", kept)))
        await _queued(group, 2)
        leaving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await leaving
    await _answers(*busy)
    await staying
    assert await _stored(storage, left) is None
    assert await _entries_for(storage, left.trade_id) == []
    assert await _stored(storage, kept) == kept


async def test_a_batch_whose_session_ends_in_flight_is_a_503_to_each_and_never_resent(
    storage: SqlStorage,
) -> None:
    """The batch waits on a row lock and its session is ended on the server: its outcome
    is unknown to the client, so each of its quotes answers 503 and none is sent again (the
    server rolled it back: none is stored, also once the lock is released)."""
    client_id = await _client(storage)
    held, waits = await _user(storage, client_id), await _user(storage, client_id)
    quotes = [_quote(client_id, waits) for _ in range(3)]
    group = _group(storage, TRADE_ADD_AUDITED)
    async with _holding(
        storage, "SELECT 1 FROM users WHERE user_id IN (:a, :b) FOR UPDATE", a=held, b=waits
    ) as blocker:
        busy = await _lanes_busy_with_quotes(storage, client_id, held, blocker)
        lanes = await _lock_waiters(storage, blocker)
        queued = [
            asyncio.create_task(storage.add_trade(q, _entry("trade.sell", q))) for q in quotes
        ]
        await _queued(group, len(quotes))
        await _terminate(storage, min(lanes))  # that lane's quote: 503; it sends the batch
        batch = await _new_lock_waiter(storage, blocker, lanes)
        await _terminate(storage, batch)
        answers = await _answers(*queued)
    lone = await _answers(*busy)
    assert sum(isinstance(a, StorageUnavailable) for a in lone) == 1  # the ended lane's
    assert all(isinstance(a, StorageUnavailable) and a.status == 503 for a in answers)
    assert group.batches == 1 and group.batched == 3 and group.refused == 0
    for quote in quotes:
        assert await _stored(storage, quote) is None
        assert await _entries_for(storage, quote.trade_id) == []
    again = _quote(client_id, waits)  # and the next quote is stored as usual
    await storage.add_trade(again, _entry("trade.sell", again))
    assert await _stored(storage, again) == again


async def _lock_waiters(storage: SqlStorage, blocker: int) -> set[int]:
    """The sessions waiting behind `blocker`'s locks: on them, or on a session that does
    (a row's later waiters queue behind its first). Other tests' sessions (the database
    is shared, a schema each) are not counted."""
    async with storage.database.transaction(write=False) as conn:
        found = await conn.execute(
            text(
                "SELECT pid, pg_blocking_pids(pid) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
        )
        blocked = {pid: set(by) for pid, by in found.all()}
    behind: set[int] = set()
    while True:
        more = {pid for pid, by in blocked.items() if by & (behind | {blocker})} - behind
        if not more:
            return behind
        behind |= more


async def _new_lock_waiter(storage: SqlStorage, blocker: int, known: set[int]) -> int:
    for _ in range(200):
        new = await _lock_waiters(storage, blocker) - known
        if new:
            return new.pop()
        await asyncio.sleep(0.02)
    raise AssertionError("no new session waited on a lock")


async def _terminate(storage: SqlStorage, pid: int) -> None:
    async with storage.database.transaction(write=True) as conn:
        await conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})


# -- moves of trades ------------------------------------------------------------------------
async def test_moves_in_one_batch_each_decide_against_the_row_as_it_was(
    storage: SqlStorage,
) -> None:
    """A batch of compare-and-sets: each that still finds its expected status moves its
    trade with its entry and the entry's event; one that does not writes nothing (no
    entry, no event) and answers False; two moves of one trade never share a batch, so
    exactly one of them wins."""
    client_id = await _client(storage)
    uid = await _user(storage, client_id)
    held, won, lost, raced = (_quote(client_id, uid) for _ in range(4))
    for trade in (held, won, lost, raced):
        await storage.add_trade(trade, _entry("trade.sell", trade))
    group = _group(storage, TRADE_SWAP_AUDITED)
    async with _holding(
        storage, "SELECT 1 FROM trades WHERE trade_id = :t FOR UPDATE", t=held.trade_id
    ) as blocker:
        busy = [
            asyncio.create_task(
                storage.swap_trade(
                    TradeStatus.OPEN, _executing(held), _entry("trade.approve", held, event=True)
                )
            )
            for _ in range(direct.GROUP_LANES)
        ]
        await _waiting_on_locks(storage, blocker, direct.GROUP_LANES)
        moves = [
            storage.swap_trade(
                TradeStatus.OPEN, _executing(won), _entry("trade.approve", won, event=True)
            ),
            storage.swap_trade(  # expects a status the trade does not have
                TradeStatus.EXECUTING, _completed(lost), _entry("trade.settle", lost, event=True)
            ),
            storage.swap_trade(
                TradeStatus.OPEN, _executing(raced), _entry("trade.approve", raced, event=True)
            ),
            storage.swap_trade(
                TradeStatus.OPEN, _executing(raced), _entry("trade.approve", raced, event=True)
            ),
        ]
        queued = [asyncio.create_task(move) for move in moves]  # type: ignore[arg-type]
        await _queued(group, len(queued))
    assert sorted(await _answers(*busy)) == [False] * (direct.GROUP_LANES - 1) + [True]
    answers = await _answers(*queued)
    assert answers[:2] == [True, False]
    assert sorted(answers[2:]) == [False, True]  # the second waited for the next batch
    assert group.batches >= 1 and group.refused == 0
    assert await _stored(storage, won) == _executing(won)
    assert await _stored(storage, lost) == lost
    assert await _stored(storage, raced) == _executing(raced)
    assert await _entries_for(storage, won.trade_id) == ["trade.approve", "trade.sell"]
    assert await _entries_for(storage, lost.trade_id) == ["trade.sell"]
    assert await _entries_for(storage, raced.trade_id) == ["trade.approve", "trade.sell"]
    # the event of each move that won, and of none that lost
    assert await _events_for(storage, held.trade_id) == ["trade.approve"]
    assert await _events_for(storage, won.trade_id) == ["trade.approve"]
    assert await _events_for(storage, lost.trade_id) == []
    assert await _events_for(storage, raced.trade_id) == ["trade.approve"]


async def test_a_busy_process_stores_every_quote_and_move_exactly_once(
    storage: SqlStorage,
) -> None:
    """Many quote + approve + settle in flight at once (what the write path bench does):
    every trade ends completed, with exactly its three entries and the two events its
    moves carry, whatever went in batches."""
    client_id = await _client(storage)
    users = [await _user(storage, client_id) for _ in range(8)]

    async def lifecycle(n: int) -> None:
        quote = _quote(client_id, users[n % len(users)])
        await storage.add_trade(quote, _entry("trade.sell", quote))
        executing = _executing(quote)
        approve = _entry("trade.approve", quote, event=True)
        assert await storage.swap_trade(TradeStatus.OPEN, executing, approve)
        assert await storage.swap_trade(
            TradeStatus.EXECUTING, _completed(quote), _entry("trade.settle", quote, event=True)
        )
        assert not await storage.swap_trade(  # a replay of the approval: nothing moves
            TradeStatus.OPEN, executing, _entry("trade.approve", quote, event=True)
        )
        assert await _stored(storage, quote) == _completed(quote)

    await asyncio.gather(*(lifecycle(n) for n in range(120)))
    async with storage.database.transaction(write=False) as conn:
        counts = (
            await conn.execute(
                text(
                    "SELECT count(*), count(DISTINCT trade_id) FILTER (WHERE status = 'completed')"
                    " FROM trades"
                )
            )
        ).one()
        entries = (
            await conn.execute(
                text("SELECT action, count(*) FROM audit_log GROUP BY action ORDER BY action")
            )
        ).all()
        published = (
            await conn.execute(
                text(
                    "SELECT count(*), count(DISTINCT data->>'tradeId'),"
                    " count(*) FILTER (WHERE data->>'action' = 'trade.settle') FROM events"
                )
            )
        ).one()
    assert tuple(counts) == (120, 120)
    assert [tuple(e) for e in entries] == [
        ("trade.approve", 120),
        ("trade.sell", 120),
        ("trade.settle", 120),
    ]
    assert tuple(published) == (240, 120, 120)
