"""Races against the real stores: concurrent approves, approve against cancel, concurrent
sends under one X-Request-Id. Several storages (engines) share one database, as several
server processes would."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from decimal import Decimal
from typing import Any

import pytest
from sql_helpers import CountingVenue, Db, trading_service
from sqlalchemy import func, select

from walletcore.clock import ManualClock
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import IdempotencyConflict, TradeNotApprovable, TradeNotCancellable
from walletcore.domain.ids import new_id
from walletcore.domain.sends import SEND_LEASE, SendState
from walletcore.domain.trade import Trade, TradeStatus
from walletcore.ports import Storage, UnitOfWork
from walletcore.services.context import Caller
from walletcore.services.trading import TradingService
from walletcore.testing import autocommit
from walletcore.testing.markets import FixedPrices, InstantVenue
from walletcore_sql.storage import SqlStorage
from walletcore_sql.tables import sends

MakeTrading = Callable[[Storage, ManualClock, CountingVenue], TradingService]
PROCESSES = 5
CONCURRENCY = 50
SMALL_POOL = {"pool_size": 3, "max_overflow": 3}
PROCESS_POOL = {"pool_size": 8, "max_overflow": 0}


@pytest.fixture
async def storages(database: Db) -> AsyncIterator[list[SqlStorage]]:
    """`PROCESSES` storages on one database, each with the pool of a small process: the
    fifty racing units use at most 40 PostgreSQL connections (the server allows 100, shared
    with the tests running beside these)."""
    first = SqlStorage(database.url, migrate=True, schema=database.schema, **PROCESS_POOL)
    await first.start()
    others = [
        SqlStorage(database.url, migrate=False, schema=database.schema, **PROCESS_POOL)
        for _ in range(PROCESSES - 1)
    ]
    for r in others:
        await r.start()
    try:
        yield [first, *others]
    finally:
        for r in (first, *others):
            await r.aclose()


@pytest.fixture
async def small_storages(database: Db) -> AsyncIterator[list[SqlStorage]]:
    """`storages` with small connection pools: 200 requests queue for connections instead of
    opening more than the server allows."""
    first = SqlStorage(database.url, migrate=True, schema=database.schema, **SMALL_POOL)
    await first.start()
    others = [
        SqlStorage(database.url, migrate=False, schema=database.schema, **SMALL_POOL)
        for _ in range(PROCESSES - 1)
    ]
    try:
        yield [first, *others]
    finally:
        for r in (first, *others):
            await r.aclose()


async def _seed(
    storage: Storage, clock: ManualClock, make_user: Callable[..., object]
) -> tuple[Caller, str]:
    client = ApiClient(client_id=new_id(), name="racer", key_hash="00" * 32, created_at=clock.now())
    await autocommit(storage).clients.add(client)
    user_id: str = await make_user(storage, clock, client.client_id)  # type: ignore[misc]
    return Caller(client, new_id()), user_id


async def test_fifty_concurrent_approves_execute_one_order(
    storages: list[SqlStorage],
    clock: ManualClock,
    make_user: Callable[..., object],
    make_trading: MakeTrading,
) -> None:
    caller, user_id = await _seed(storages[0], clock, make_user)
    venue = CountingVenue(clock)
    services = [make_trading(r, clock, venue) for r in storages]
    quoted = await services[0].sell(caller, user_id=user_id, asset_id=2, crypto_amount="1.5")

    results = await asyncio.gather(
        *(
            services[i % PROCESSES].approve(caller, user_id=user_id, trade_id=quoted.trade_id)
            for i in range(CONCURRENCY)
        ),
        return_exceptions=True,
    )

    assert venue.executed == {quoted.trade_id: 1}
    final = await autocommit(storages[0]).trades.get(caller.client_id, user_id, quoted.trade_id)
    assert final is not None and final.status is TradeStatus.COMPLETED
    won = [r for r in results if isinstance(r, Trade)]
    lost = [r for r in results if not isinstance(r, Trade)]
    assert won and all(t == final for t in won)  # the executor, and replays of its result
    assert all(isinstance(e, TradeNotApprovable) for e in lost), lost
    audit = [
        e
        for e in await autocommit(storages[0]).audit.newest(limit=500)
        if e.action == "trade.approve"
    ]
    assert len(audit) == CONCURRENCY
    # One execution, one `ok`; the 200s that answered the stored trade are `replay`.
    assert Counter(e.outcome for e in audit) == Counter(
        {"ok": 1, "replay": len(won) - 1, "409": len(lost)}
    )
    [executed] = [e for e in audit if e.outcome == "ok"]
    assert executed.target == quoted.trade_id


async def test_a_quote_lapsing_under_many_pollers_is_expired_by_one_write(
    small_storages: list[SqlStorage],
    clock: ManualClock,
    make_user: Callable[..., object],
    make_trading: MakeTrading,
) -> None:
    """200 polls over five processes read the quote `open` past its expiry: at most one
    write attempt per process, one of which wins; the rest read."""
    storages = small_storages
    caller, user_id = await _seed(storages[0], clock, make_user)
    services = [make_trading(r, clock, CountingVenue(clock)) for r in storages]
    quoted = await services[0].sell(caller, user_id=user_id, asset_id=2, crypto_amount="1")
    clock.advance(61)
    attempts: list[bool] = []
    for storage in storages:
        _count_swaps(storage, attempts)

    answers = await asyncio.gather(
        *(
            services[i % PROCESSES].get(caller, user_id=user_id, trade_id=quoted.trade_id)
            for i in range(200)
        )
    )

    final = await autocommit(storages[0]).trades.get(caller.client_id, user_id, quoted.trade_id)
    assert final is not None and final.status is TradeStatus.EXPIRED
    assert all(a == final for a in answers)
    assert 1 <= len(attempts) <= PROCESSES and attempts.count(True) == 1
    expiries = [
        e
        for e in await autocommit(storages[0]).audit.newest(limit=500)
        if e.action == "trade.expire"
    ]
    assert [(e.outcome, e.target) for e in expiries] == [("ok", quoted.trade_id)]


async def test_trades_lists_write_only_when_a_quote_lapsed(
    small_storages: list[SqlStorage],
    clock: ManualClock,
    make_user: Callable[..., object],
    make_trading: MakeTrading,
) -> None:
    storages = small_storages
    caller, user_id = await _seed(storages[0], clock, make_user)
    services = [make_trading(r, clock, CountingVenue(clock)) for r in storages]
    quoted = await services[0].sell(caller, user_id=user_id, asset_id=2, crypto_amount="1")
    writes: list[int] = []
    for storage in storages:
        _count_write_transactions(storage, writes)

    listed = await asyncio.gather(
        *(services[i % PROCESSES].list(caller, user_id=user_id) for i in range(50))
    )
    assert all([t.trade_id for t in found] == [quoted.trade_id] for found in listed)
    assert writes == []  # nothing lapsed: reads only

    clock.advance(61)
    listed = await asyncio.gather(
        *(services[i % PROCESSES].list(caller, user_id=user_id) for i in range(50))
    )
    assert all(found[0].status is TradeStatus.EXPIRED for found in listed)
    expiries = [
        e
        for e in await autocommit(storages[0]).audit.newest(limit=500)
        if e.action == "trade.expire"
    ]
    assert [(e.outcome, e.target) for e in expiries] == [("ok", quoted.trade_id)]
    assert 1 <= len(writes) <= 50
    writes.clear()
    await services[0].list(caller, user_id=user_id)
    assert writes == []


def _count_swaps(storage: SqlStorage, attempts: list[bool]) -> None:
    """Record the outcome of every compare-and-set of a trade made through `storage`."""
    real = storage.write

    @asynccontextmanager
    async def write() -> AsyncIterator[UnitOfWork]:
        async with real() as unit:
            swap_of_unit = unit.trades.swap

            async def swap(
                expected: TradeStatus, trade: Trade, *, entry: AuditEntry | None = None
            ) -> bool:
                won = await swap_of_unit(expected, trade, entry=entry)
                attempts.append(won)
                return won

            unit.trades.swap = swap  # type: ignore[method-assign]
            yield unit

    real_swap_trade = storage.swap_trade

    async def swap_trade(expected: TradeStatus, trade: Trade, entry: AuditEntry) -> bool:
        won = await real_swap_trade(expected, trade, entry)
        attempts.append(won)
        return won

    storage.write = write  # type: ignore[method-assign]
    storage.swap_trade = swap_trade  # type: ignore[method-assign]


def _count_write_transactions(storage: SqlStorage, writes: list[int]) -> None:
    real = storage.write
    real_swap_trade = storage.swap_trade

    def write() -> Any:
        writes.append(1)
        return real()

    async def swap_trade(expected: TradeStatus, trade: Trade, entry: AuditEntry) -> bool:
        writes.append(1)
        return await real_swap_trade(expected, trade, entry)

    storage.write = write  # type: ignore[method-assign]
    storage.swap_trade = swap_trade  # type: ignore[method-assign]


async def test_approve_racing_cancel_ends_in_exactly_one(
    storages: list[SqlStorage],
    clock: ManualClock,
    make_user: Callable[..., object],
    make_trading: MakeTrading,
) -> None:
    caller, user_id = await _seed(storages[0], clock, make_user)
    venue = CountingVenue(clock, delay=0.01)
    services = [make_trading(r, clock, venue) for r in storages]
    rng = random.Random(5)
    outcomes = []
    for _ in range(20):
        quoted = await services[0].sell(caller, user_id=user_id, asset_id=1, crypto_amount="0.01")
        a, b = rng.sample(services, 2)
        approve = a.approve(caller, user_id=user_id, trade_id=quoted.trade_id)
        cancel = b.cancel(caller, user_id=user_id, trade_id=quoted.trade_id)
        pair = [approve, cancel] if rng.random() < 0.5 else [cancel, approve]
        results = dict(
            zip(("first", "second"), await asyncio.gather(*pair, return_exceptions=True))
        )
        approved, cancelled = (
            (results["first"], results["second"])
            if pair[0] is approve
            else (results["second"], results["first"])
        )
        final = await autocommit(storages[0]).trades.get(caller.client_id, user_id, quoted.trade_id)
        assert final is not None
        if isinstance(approved, Trade):
            assert isinstance(cancelled, TradeNotCancellable), cancelled
            assert final.status is TradeStatus.COMPLETED
            assert venue.executed[quoted.trade_id] == 1
            outcomes.append("approved")
        else:
            assert isinstance(approved, TradeNotApprovable), approved
            assert isinstance(cancelled, Trade) and cancelled.status is TradeStatus.CANCELLED
            assert final.status is TradeStatus.CANCELLED
            assert venue.executed[quoted.trade_id] == 0
            outcomes.append("cancelled")
    assert len(outcomes) == 20


async def test_fifty_concurrent_sends_under_one_request_id_make_one_record(
    storages: list[SqlStorage], clock: ManualClock, make_user: Callable[..., object]
) -> None:
    caller, _ = await _seed(storages[0], clock, make_user)
    now = clock.now()

    results = await asyncio.gather(
        *(
            autocommit(storages[i % PROCESSES]).sends.begin(caller.client_id, "req-dup", "fp", now)
            for i in range(CONCURRENCY)
        ),
        return_exceptions=True,
    )

    leased = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(leased) == 1 and leased[0].state is SendState.STARTED and leased[0].attempt == 1
    assert len(refused) == CONCURRENCY - 1
    assert all(isinstance(e, IdempotencyConflict) for e in refused), refused
    assert await _count_sends(storages[0]) == 1

    # The first process dies; after its lease exactly one of fifty retries takes over.
    later = now + SEND_LEASE
    retries = await asyncio.gather(
        *(
            autocommit(storages[i % PROCESSES]).sends.begin(
                caller.client_id, "req-dup", "fp", later
            )
            for i in range(CONCURRENCY)
        ),
        return_exceptions=True,
    )
    taken = [r for r in retries if not isinstance(r, BaseException)]
    assert len(taken) == 1 and taken[0].attempt == 2
    assert all(isinstance(e, IdempotencyConflict) for e in retries if isinstance(e, BaseException))
    assert await _count_sends(storages[0]) == 1


async def _count_sends(storage: SqlStorage) -> int:
    async with storage.database.transaction() as conn:
        return int((await conn.execute(select(func.count()).select_from(sends))).scalar_one())


async def test_the_quoting_process_approves_unread_and_answers_what_is_stored(
    storages: list[SqlStorage],
    clock: ManualClock,
    make_user: Callable[..., object],
    settings: Any,
) -> None:
    """A price with more places than the money columns keep: the quote is cut when made, so
    the quote that `/sell` answered, the one its process remembers and approves without
    reading (walletcore.services.trading), and the row stored are the same, value for
    value; and the venue is asked the order another process would have asked."""
    caller, user_id = await _seed(storages[0], clock, make_user)
    prices = FixedPrices(default=Decimal("3000." + "123456789" * 4))
    venues = [InstantVenue(prices) for _ in storages[:2]]
    here, there = (
        trading_service(storage, clock, venue, settings, prices)
        for storage, venue in zip(storages[:2], venues, strict=True)
    )
    db = autocommit(storages[0])
    mine = await here.sell(caller, user_id=user_id, asset_id=2, crypto_amount="1.5")
    theirs = await here.sell(caller, user_id=user_id, asset_id=2, crypto_amount="1.5")
    assert await db.trades.get(caller.client_id, user_id, mine.trade_id) == mine

    unread = await here.approve(caller, user_id=user_id, trade_id=mine.trade_id)
    read = await there.approve(caller, user_id=user_id, trade_id=theirs.trade_id)

    assert unread == await db.trades.get(caller.client_id, user_id, mine.trade_id)
    assert read == await db.trades.get(caller.client_id, user_id, theirs.trade_id)
    assert unread.status is read.status is TradeStatus.COMPLETED
    assert (unread.quote, unread.approved, unread.executed) == (
        read.quote,
        read.approved,
        read.executed,
    )
    [asked_here], [asked_there] = venues[0].filled, venues[1].filled
    assert (asked_here.fixed_amount, asked_here.quoted_price) == (
        asked_there.fixed_amount,
        asked_there.quoted_price,
    )
