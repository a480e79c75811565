"""The stores' units of work straight on the driver (`walletcore_sql.direct`: `PgReader`
and `PgWriter` on asyncpg, `InlineRaw` on SQLite's pysqlite): the same rows as SQLAlchemy
gives, the same errors, the same transactions, and no PostgreSQL connection given back to
the pool in a state the next unit could inherit."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from decimal import Decimal

import pytest
from sql_helpers import QUOTED_AT, Db, open_quote
from sqlalchemy import select, text

from walletcore.domain.assets import Chain
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.errors import StorageError, StorageUnavailable
from walletcore.domain.ids import new_id
from walletcore.domain.trade import Figures, Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports import UnitOfWork
from walletcore.testing import autocommit
from walletcore_sql import direct
from walletcore_sql.direct.plans import plan_of
from walletcore_sql.direct.pool import is_open, raw_of
from walletcore_sql.storage import SqlStorage
from walletcore_sql.stores import SqlUnit
from walletcore_sql.tables import trades

pytestmark = pytest.mark.postgres

T0 = QUOTED_AT


@pytest.fixture
def storage(pg_storage: SqlStorage) -> SqlStorage:
    return pg_storage


async def _client_and_user(storage: SqlStorage) -> tuple[str, str]:
    client = ApiClient(client_id=new_id(), name="x", key_hash="00" * 32)
    await autocommit(storage).clients.add(client)
    uid = new_id()
    await autocommit(storage).wallets.add_user(
        User(uid, client.client_id, T0),
        WalletRecord(
            client.client_id, WalletOwner.USER, uid, b"sealed", {Chain.BITCOIN: "bc1qexample"}, T0
        ),
    )
    return client.client_id, uid


async def _end_its_session(storage: SqlStorage, unit: UnitOfWork, client_id: str) -> None:
    """The server ends the session `unit` holds; the unit's next statement answers 503."""
    pid = unit.conn.driver.get_server_pid()  # type: ignore[attr-defined]
    async with storage.database.transaction(write=True) as other:
        await other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    with pytest.raises(StorageUnavailable) as caught:
        await unit.clients.get(client_id)
    assert caught.value.status == 503 and caught.value.message


def _open(client_id: str, user_id: str, minutes: int = 0) -> Trade:
    """An open quote made `minutes` after T0, lapsing a minute after."""
    return open_quote(client_id, user_id, minutes)


def _completed(client_id: str, user_id: str, minutes: int) -> Trade:
    return dataclasses.replace(
        _open(client_id, user_id, minutes),
        status=TradeStatus.COMPLETED,
        approved_at=T0 + timedelta(minutes=minutes, seconds=5),
        completed_at=T0 + timedelta(minutes=minutes, seconds=6),
        approved=Figures(Decimal("0.01"), Decimal("601.2"), Decimal(60120)),
        executed=Figures(Decimal("0.01"), Decimal("601.19"), Decimal(60119)),
        reference="SBX-1",
    )


@pytest.fixture
async def sqlite_storage(sqlite_database: Db) -> AsyncIterator[SqlStorage]:
    opened = sqlite_database.storage(migrate=True)
    await opened.start()
    try:
        yield opened
    finally:
        await opened.aclose()


async def test_the_raw_sqlite_units_answer_what_sqlalchemy_answers(
    sqlite_storage: SqlStorage,
) -> None:
    await _raw_and_sqlalchemy_agree(sqlite_storage, direct.InlineRaw)


async def test_the_raw_reads_answer_what_sqlalchemy_answers(storage: SqlStorage) -> None:
    await _raw_and_sqlalchemy_agree(storage, direct.PgReader)


async def _raw_and_sqlalchemy_agree(storage: SqlStorage, raw: type) -> None:
    client_id, uid = await _client_and_user(storage)
    stored = [_completed(client_id, uid, m) for m in range(3)]
    for trade in stored:
        await autocommit(storage).trades.add(trade)

    async with storage.read() as unit:  # the raw path
        assert isinstance(unit.conn, raw)  # type: ignore[attr-defined]
        raw_page = await unit.trades.page(client_id, uid, side=None, status=None, limit=10)
        raw_one = await unit.trades.get(client_id, uid, stored[1].trade_id)
        raw_wallet = await unit.wallets.get(client_id, WalletOwner.USER, uid)
        raw_client = await unit.clients.get(client_id)
    async with storage.database.transaction() as conn:  # SQLAlchemy's
        assert not isinstance(conn, raw)
        unit = SqlUnit(storage.database, conn, writable=False, trade_rows=storage.trade_rows)
        sa_page = await unit.trades.page(client_id, uid, side=None, status=None, limit=10)
        sa_one = await unit.trades.get(client_id, uid, stored[1].trade_id)
        sa_wallet = await unit.wallets.get(client_id, WalletOwner.USER, uid)
        sa_client = await unit.clients.get(client_id)

    assert raw_page == sa_page == list(reversed(stored))
    assert raw_one == sa_one == stored[1]
    assert raw_wallet == sa_wallet and raw_wallet is not None
    assert raw_client == sa_client and raw_client is not None
    # the values themselves: exact decimals without padding, aware UTC datetimes
    assert str(raw_page[0].quote.crypto_amount) == "0.01"
    assert (
        raw_page[0].created_at.tzinfo is not None and raw_page[0].created_at == stored[2].created_at
    )


async def test_a_statement_it_cannot_send_as_is_goes_through_sqlalchemy(
    storage: SqlStorage,
) -> None:
    client_id, uid = await _client_and_user(storage)
    trade = _completed(client_id, uid, 0)
    await autocommit(storage).trades.add(trade)
    expanding = select(trades.c.trade_id).where(trades.c.trade_id.in_([trade.trade_id, "x"]))
    async with storage.database.unit(write=False) as reader:
        assert plan_of(expanding, reader.dialect) is None
        rows = (await reader.execute(expanding)).all()
    assert [r[0] for r in rows] == [trade.trade_id]


async def test_a_bad_statement_is_a_500_and_the_connection_stays_usable(
    storage: SqlStorage,
) -> None:
    client_id, uid = await _client_and_user(storage)
    bad = select(text("1 / 0 AS boom")).select_from(trades)
    await autocommit(storage).trades.add(_completed(client_id, uid, 0))
    async with storage.database.unit(write=False) as reader:
        with pytest.raises(StorageError) as caught:
            await reader.execute(bad)
        assert caught.value.status == 500 and caught.value.message == "Internal error"
        assert caught.value.__cause__ is not None
    async with storage.read() as unit:
        assert await unit.clients.get(client_id) is not None


async def test_a_connection_the_server_dropped_is_a_503_then_a_fresh_one(
    storage: SqlStorage,
) -> None:
    client_id, _ = await _client_and_user(storage)
    async with storage.read() as unit:
        await unit.clients.get(client_id)  # the reader now holds a pooled connection
        await _end_its_session(storage, unit, client_id)
    for _ in range(3):  # the pool hands out working connections again
        async with storage.read() as unit:
            assert await unit.clients.get(client_id) is not None


async def _session_reaches(
    storage: SqlStorage, pid: int, reached: Callable[[str | None], bool]
) -> bool:
    """Whether the server session `pid` reaches a state (None: ended) that `reached`
    accepts, polled for up to 5 s (a session whose socket was closed ends a moment later)."""
    for _ in range(50):
        async with storage.database.transaction() as conn:
            found = await conn.execute(
                text("SELECT state FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
            )
            if reached(found.scalar_one_or_none()):
                return True
        await asyncio.sleep(0.1)
    return False


async def _left_in_transaction(storage: SqlStorage, pid: int) -> bool:
    """Whether the server session `pid` still sits inside a transaction after 5 s."""
    return not await _session_reaches(
        storage, pid, lambda state: state is None or not state.startswith("idle in transaction")
    )


async def _session_ended(storage: SqlStorage, pid: int) -> bool:
    """Whether the server session `pid` ended (polled for up to 5 s)."""
    return await _session_reaches(storage, pid, lambda state: state is None)


async def test_a_write_unit_that_raises_leaves_nothing(storage: SqlStorage) -> None:
    client_id, uid = await _client_and_user(storage)
    trade = _completed(client_id, uid, 0)
    with pytest.raises(ValueError, match="after the insert"):
        async with storage.write() as unit:
            await unit.trades.add(trade)
            await unit.clients.get(client_id)  # a read: the deferred insert is sent first
            pid = unit.conn.driver.get_server_pid()  # type: ignore[attr-defined]
            raise ValueError("after the insert")
    async with storage.read() as unit:
        assert await unit.trades.get(client_id, uid, trade.trade_id) is None
    assert not await _left_in_transaction(storage, pid)


async def test_a_write_unit_whose_last_insert_fails_leaves_nothing(storage: SqlStorage) -> None:
    """The inserts a unit deferred go out as it ends: when they fail (here a trade of a
    user nobody stored), what it sent before is rolled back too, the error is the
    port's, and the connection does not go back inside its transaction."""
    client_id, uid = await _client_and_user(storage)
    first, orphan = _completed(client_id, uid, 0), _completed(client_id, new_id(), 1)
    with pytest.raises(StorageError):
        async with storage.write() as unit:
            await unit.trades.add(first)
            await unit.clients.get(client_id)  # BEGIN and the first insert are sent
            pid = unit.conn.driver.get_server_pid()  # type: ignore[attr-defined]
            await unit.trades.add(orphan)  # deferred: sent when the block ends
    async with storage.read() as unit:
        assert await unit.trades.get(client_id, uid, first.trade_id) is None
    assert not await _left_in_transaction(storage, pid)
    async with storage.write() as unit:  # the pool still serves units
        await unit.trades.add(first)
    async with storage.read() as unit:
        assert await unit.trades.get(client_id, uid, first.trade_id) == first


async def test_a_unit_of_one_statement_takes_no_transaction(storage: SqlStorage) -> None:
    client_id, uid = await _client_and_user(storage)
    trade = _completed(client_id, uid, 0)
    async with storage.database.unit(write=True) as writer:
        unit = SqlUnit(storage.database, writer, writable=True, trade_rows=storage.trade_rows)
        await unit.trades.add(trade)
        await unit.flush(last=True)  # the one statement, autocommitted
        assert writer._transaction is None
        assert not writer.driver.is_in_transaction()
        with pytest.raises(RuntimeError, match="nothing may follow"):
            await unit.clients.get(client_id)
    async with storage.read() as unit:
        assert await unit.trades.get(client_id, uid, trade.trade_id) == trade


async def test_a_connection_left_in_a_transaction_never_goes_back_to_the_pool(
    storage: SqlStorage,
) -> None:
    client_id, _ = await _client_and_user(storage)
    writer = direct.PgWriter(storage.database._bound.units)  # type: ignore[union-attr,arg-type]
    await writer.execute(text("SELECT 1 AS one"))  # BEGIN, then the statement
    driver = writer.driver
    pid = driver.get_server_pid()
    assert driver.is_in_transaction()
    await writer.close()  # no COMMIT and no ROLLBACK: dropped, not pooled
    assert await _session_ended(storage, pid)
    assert not await _left_in_transaction(storage, pid)
    async with storage.read() as unit:
        assert await unit.clients.get(client_id) is not None


async def test_a_session_dropped_inside_a_write_unit_is_a_503_and_nothing_is_kept(
    storage: SqlStorage,
) -> None:
    client_id, uid = await _client_and_user(storage)
    trade = _completed(client_id, uid, 0)
    with pytest.raises(StorageUnavailable):
        async with storage.write() as unit:
            await unit.trades.add(trade)
            await unit.clients.get(client_id)  # BEGIN and the insert are sent
            pid = unit.conn.driver.get_server_pid()  # type: ignore[attr-defined]
            async with storage.database.transaction(write=True) as other:
                await other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            await unit.clients.get(client_id)
    async with storage.read() as unit:
        assert await unit.trades.get(client_id, uid, trade.trade_id) is None
        assert await unit.clients.get(client_id) is not None


async def test_a_write_unit_cancelled_mid_statement_stays_cancelled_and_leaves_nothing(
    storage: SqlStorage,
) -> None:
    client_id, uid = await _client_and_user(storage)
    trade = _completed(client_id, uid, 0)
    sent = asyncio.Event()

    async def unit_work() -> None:
        async with storage.write() as unit:
            await unit.trades.add(trade)
            await unit.clients.get(client_id)  # BEGIN and the insert are sent
            sent.set()
            await unit.conn.execute(text("SELECT pg_sleep(5)"))  # type: ignore[attr-defined]

    task = asyncio.create_task(unit_work())
    await sent.wait()
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):  # not turned into a storage error
        await task
    async with storage.read() as unit:
        assert await unit.trades.get(client_id, uid, trade.trade_id) is None
    for _ in range(3):  # the pool hands out working connections
        async with storage.read() as unit:
            assert await unit.clients.get(client_id) is not None


async def _pids(storage: SqlStorage, client_id: str, units: int) -> set[int]:
    """The server sessions of `units` read units held at the same time."""
    async with contextlib.AsyncExitStack() as stack:
        held = [await stack.enter_async_context(storage.read()) for _ in range(units)]
        for unit in held:
            assert await unit.clients.get(client_id) is not None
        return {unit.conn.driver.get_server_pid() for unit in held}  # type: ignore[attr-defined]


def _pg_storage(pg_database: Db, *, size: int, timeout: float) -> SqlStorage:
    return SqlStorage(
        pg_database.url,
        migrate=True,
        schema=pg_database.schema,
        pool_size=size,
        max_overflow=0,
        pool_timeout=timeout,
    )


async def test_the_units_pool_is_bounded_and_a_unit_past_it_waits_then_answers_503(
    pg_database: Db,
) -> None:
    storage = _pg_storage(pg_database, size=1, timeout=0.3)
    try:
        await storage.start()
        client_id, uid = await _client_and_user(storage)
        trade = _completed(client_id, uid, 0)
        async with storage.read() as holder:
            assert await holder.clients.get(client_id) is not None  # the one connection
            started = asyncio.get_running_loop().time()
            with pytest.raises(StorageUnavailable) as caught:
                async with storage.write() as unit:
                    await unit.trades.add(trade)
            waited = asyncio.get_running_loop().time() - started
            assert caught.value.status == 503 and caught.value.message
            assert 0.25 <= waited < 5
        async with storage.read() as unit:  # given back: served, and nothing was written
            assert await unit.trades.get(client_id, uid, trade.trade_id) is None
    finally:
        await storage.aclose()


async def test_a_connection_given_back_is_reused_without_a_reset(storage: SqlStorage) -> None:
    """Sequential units share one session, and nothing is sent when it is given back (no
    RESET ALL round trip): the last statement the session ran is the unit's own."""
    client_id, _ = await _client_and_user(storage)
    pids = set()
    for _ in range(5):
        pids |= await _pids(storage, client_id, 1)
    assert len(pids) == 1
    (pid,) = pids
    async with storage.database.transaction() as conn:
        found = await conn.execute(
            text("SELECT state, query FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
        )
        state, query = found.one()
    assert state == "idle" and query.lstrip().upper().startswith("SELECT API_CLIENTS.")


async def test_a_dropped_session_replaces_every_connection_then_pooled(
    storage: SqlStorage,
) -> None:
    """A unit that finds its session dropped answers 503, and the connections then idle
    in the pool (which may have lost theirs too: a restarted server) are replaced at their
    next checkout, as SQLAlchemy invalidated its pool on a disconnect."""
    client_id, _ = await _client_and_user(storage)
    before = await _pids(storage, client_id, 3)
    async with storage.read() as unit:
        assert await unit.clients.get(client_id) is not None
        await _end_its_session(storage, unit, client_id)
    after = await _pids(storage, client_id, 3)
    assert len(before) == 3 and len(after) == 3
    assert not before & after


async def test_a_unit_running_while_the_storage_closes_ends_cleanly(pg_database: Db) -> None:
    """Closing waits for the unit in flight (up to its bound), which gives its connection
    back to the closing pool; the pool then closes every connection."""
    storage = pg_database.storage(migrate=True)
    await storage.start()
    client_id, _ = await _client_and_user(storage)
    closing: asyncio.Task[None] | None = None
    async with storage.read() as unit:
        assert await unit.clients.get(client_id) is not None
        pid = unit.conn.driver.get_server_pid()  # type: ignore[attr-defined]
        closing = asyncio.create_task(storage.aclose())
        await asyncio.sleep(0.05)
        assert not closing.done()  # waiting for this unit's connection
        assert await unit.clients.get(client_id) is not None  # still served
    await asyncio.wait_for(closing, 10)
    watcher = pg_database.storage()
    try:
        assert await _session_ended(watcher, pid)
    finally:
        await watcher.aclose()


async def test_a_unit_calls_the_connection_behind_the_pools_proxy(storage: SqlStorage) -> None:
    """The units call asyncpg's `Connection` itself (`direct.pool.raw_of`), not its pool's proxy:
    if an asyncpg release named the proxy's connection otherwise, this fails here rather
    than every call quietly going through the proxy again. A proxy given back (detached)
    is its own `_raw`, so a call on it still raises as asyncpg's pool makes it."""
    import asyncpg

    client_id, _ = await _client_and_user(storage)
    async with storage.read() as unit:
        assert await unit.clients.get(client_id) is not None
        proxy = unit.conn.driver  # type: ignore[attr-defined]
        raw = unit.conn._raw  # type: ignore[attr-defined]
        assert isinstance(proxy, asyncpg.pool.PoolConnectionProxy)
        assert type(raw) is asyncpg.Connection and raw_of(proxy) is raw
        assert raw.get_server_pid() == proxy.get_server_pid()
    assert unit.conn._raw is None  # type: ignore[attr-defined]  # nothing kept past the unit
    pool = _units_pool(storage)
    while pool._kept:  # back to asyncpg's pool, which detaches the proxy
        kept, _ = pool._kept.pop()
        await pool._hand_back(kept)
    assert raw_of(proxy) is proxy
    with pytest.raises(asyncpg.InterfaceError, match="released back to the pool"):
        proxy.get_server_pid()


# -- connections kept for the next unit (`DriverPool`: `_kept`) --------------------------------
def _units_pool(storage: SqlStorage) -> direct.DriverPool:
    bound = storage.database._bound  # the pool the units draw on
    assert bound is not None and bound.units is not None
    return bound.units


async def test_a_connection_given_back_is_kept_and_the_next_unit_skips_asyncpgs_pool(
    storage: SqlStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    client_id, uid = await _client_and_user(storage)
    pool = _units_pool(storage)
    async with storage.read() as unit:
        assert await unit.clients.get(client_id) is not None
        first = unit.conn.driver  # type: ignore[attr-defined]
    assert [kept for kept, _ in pool._kept] == [first]
    checkouts = 0
    asyncpg_pool = type(pool._pool)  # asyncpg's own
    acquire = asyncpg_pool.acquire

    def counted(self: object, *args: object, **kwargs: object) -> object:
        nonlocal checkouts
        checkouts += 1
        return acquire(self, *args, **kwargs)

    monkeypatch.setattr(asyncpg_pool, "acquire", counted)
    for _ in range(5):
        async with storage.read() as unit:
            assert await unit.clients.get(client_id) is not None
            assert unit.conn.driver is first  # type: ignore[attr-defined]
        async with storage.write() as unit:  # its statement is sent at its end
            await unit.trades.add(_completed(client_id, uid, 0))
        assert [kept for kept, _ in pool._kept] == [first]
    assert checkouts == 0
    async with contextlib.AsyncExitStack() as stack:  # two at once: the second is asyncpg's
        held = [await stack.enter_async_context(storage.read()) for _ in range(2)]
        for unit in held:
            assert await unit.clients.get(client_id) is not None
    assert checkouts == 1 and len(pool._kept) == 2


async def test_a_unit_waiting_for_the_last_connection_gets_it_when_given_back(
    pg_database: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every connection out, a connection given back goes to the unit waiting in
    asyncpg's pool, never to the kept list (where the waiter would not see it)."""
    monkeypatch.setattr(direct.pool, "KEPT_SECONDS", 60.0)  # no trim comes to the rescue
    storage = _pg_storage(pg_database, size=1, timeout=10)
    try:
        await storage.start()
        client_id, _ = await _client_and_user(storage)
        pool = _units_pool(storage)
        waiter: asyncio.Task[float] | None = None

        async def wait_for_a_connection() -> float:
            async with storage.read() as unit:
                assert await unit.clients.get(client_id) is not None
                return asyncio.get_running_loop().time()

        async with storage.read() as holder:
            assert await holder.clients.get(client_id) is not None
            waiter = asyncio.create_task(wait_for_a_connection())
            await asyncio.sleep(0.1)
            assert not waiter.done() and pool._waiting == 1
            given_back = asyncio.get_running_loop().time()
        served = await asyncio.wait_for(waiter, 5)
        assert served - given_back < 5  # not at the pool's 10 s timeout
        assert pool._waiting == 0 and len(pool._kept) == 1
    finally:
        await storage.aclose()


async def test_a_kept_connection_unused_goes_back_to_asyncpgs_pool(
    storage: SqlStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `KEPT_SECONDS` unused it is asyncpg's again, whose idle clock closes it."""
    monkeypatch.setattr(direct.pool, "KEPT_SECONDS", 0.05)
    client_id, _ = await _client_and_user(storage)
    pool = _units_pool(storage)
    pids = await _pids(storage, client_id, 3)
    assert len(pool._kept) == 3
    for _ in range(250):  # up to 5 s
        if not pool._kept and pool._pool.get_idle_size() == 3:
            break
        await asyncio.sleep(0.02)
    assert not pool._kept and pool._trim is None
    assert pool._pool.get_idle_size() == 3 and not pool._leased
    assert await _pids(storage, client_id, 3) == pids  # the same sessions, from asyncpg


async def test_a_connection_out_past_its_lease_goes_back_through_asyncpgs_pool(
    storage: SqlStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    client_id, _ = await _client_and_user(storage)
    pool = _units_pool(storage)
    monkeypatch.setattr(direct.pool, "LEASE_SECONDS", 0.0)
    async with storage.read() as unit:
        assert await unit.clients.get(client_id) is not None
    assert not pool._kept and not pool._leased
    assert pool._pool.get_idle_size() == 1


async def test_a_kept_connection_the_server_closed_is_replaced_not_a_503(
    storage: SqlStorage,
) -> None:
    client_id, _ = await _client_and_user(storage)
    pool = _units_pool(storage)
    (pid,) = await _pids(storage, client_id, 1)
    ((kept, _),) = pool._kept
    async with storage.database.transaction(write=True) as other:
        await other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    for _ in range(250):  # the client sees its socket closed (asyncpg detaches the proxy)
        if not is_open(kept):
            break
        await asyncio.sleep(0.02)
    assert not is_open(kept)
    async with storage.read() as unit:
        assert await unit.clients.get(client_id) is not None
        assert unit.conn.driver.get_server_pid() != pid  # type: ignore[attr-defined]


async def test_a_connection_out_during_a_dropped_session_is_replaced_not_kept(
    storage: SqlStorage,
) -> None:
    """A unit that finds its session dropped expires every connection: one another unit
    held meanwhile goes back through asyncpg's pool when given back, which replaces it."""
    client_id, _ = await _client_and_user(storage)
    pool = _units_pool(storage)
    async with storage.read() as holder:
        assert await holder.clients.get(client_id) is not None
        held = holder.conn.driver.get_server_pid()  # type: ignore[attr-defined]
        async with storage.read() as unit:
            assert await unit.clients.get(client_id) is not None
            await _end_its_session(storage, unit, client_id)
    assert not pool._kept
    assert held not in await _pids(storage, client_id, 2)


def test_a_connection_kept_on_one_event_loop_is_never_handed_to_another(
    pg_database: Db,
) -> None:
    """A CLI runs one `asyncio.run` per command on the same storage: the second loop's
    units open their own connections; what the first loop kept is left to it."""
    storage = pg_database.storage(migrate=True)

    async def command() -> int:
        client_id, _ = await _client_and_user(storage)
        (pid,) = await _pids(storage, client_id, 1)
        assert len(_units_pool(storage)._kept) == 1
        return pid

    first = asyncio.run(command())
    second = asyncio.run(command())
    asyncio.run(storage.aclose())
    assert first != second


async def test_closing_hands_back_the_kept_connections_at_once(
    pg_database: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(direct.pool, "KEPT_SECONDS", 60.0)  # no trim comes to the rescue
    storage = pg_database.storage(migrate=True)
    await storage.start()
    client_id, _ = await _client_and_user(storage)
    pids = await _pids(storage, client_id, 3)
    assert len(_units_pool(storage)._kept) == 3
    started = asyncio.get_running_loop().time()
    await storage.aclose()
    assert asyncio.get_running_loop().time() - started < 5  # not at the close's 10 s bound
    watcher = pg_database.storage()
    try:
        for pid in pids:
            assert await _session_ended(watcher, pid)
    finally:
        await watcher.aclose()


# -- one statement alone (`direct.execute_alone`: `SqlStorage.add_trade`, `.swap_trade`) ---------
def _entry(action: str, client_id: str, user_id: str, target: str) -> AuditEntry:
    return AuditEntry(T0, client_id, action, new_id(), "ok", user_id, target, None)


async def _one_kept(storage: SqlStorage) -> tuple[str, str, direct.DriverPool, object]:
    """A client and user, the units' pool, and the one connection it keeps after a first
    quote sent alone."""
    client_id, uid = await _client_and_user(storage)
    pool = _units_pool(storage)
    await storage.add_trade(_open(client_id, uid), _entry("warm", client_id, uid, "-"))
    ((first, _),) = pool._kept
    return client_id, uid, pool, first


async def test_a_quote_alone_is_one_autocommitted_statement_on_a_kept_connection(
    storage: SqlStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    client_id, uid, pool, first = await _one_kept(storage)
    sent: list[str] = []
    execute = type(raw_of(first)).execute

    async def recorded(self: object, sql: str, *args: object) -> object:
        sent.append(sql)
        return await execute(self, sql, *args)

    monkeypatch.setattr(type(raw_of(first)), "execute", recorded)
    quote = _open(client_id, uid)
    entry = _entry("trade.sell", client_id, uid, quote.trade_id)
    await storage.add_trade(quote, entry)
    assert len(sent) == 1 and sent[0].startswith("WITH w0 AS")  # no BEGIN, no COMMIT
    assert [kept for kept, _ in pool._kept] == [first]  # answered: kept as it is
    assert not raw_of(first).is_in_transaction()
    async with storage.read() as unit:
        assert await unit.trades.get(client_id, uid, quote.trade_id) == quote
        assert (await unit.audit.newest(limit=1)) == [entry]


async def test_a_statement_alone_that_fails_is_a_500_and_its_connection_stays_usable(
    storage: SqlStorage,
) -> None:
    client_id, uid = await _client_and_user(storage)
    pool = _units_pool(storage)
    quote = _open(client_id, uid)
    await storage.add_trade(quote, _entry("trade.sell", client_id, uid, quote.trade_id))
    ((first, _),) = pool._kept
    with pytest.raises(StorageError) as caught:  # the same trade id again: nothing written
        await storage.add_trade(quote, _entry("again", client_id, uid, quote.trade_id))
    assert caught.value.status == 500 and "trades" not in caught.value.message
    assert [kept for kept, _ in pool._kept] == [first]  # settled: kept, not dropped
    async with storage.read() as unit:
        assert [e.action for e in await unit.audit.newest(limit=5)] == ["trade.sell"]
    moved = quote.start_approval(T0)
    assert await storage.swap_trade(
        TradeStatus.OPEN, moved, _entry("trade.approve", client_id, uid, quote.trade_id)
    )
    assert [kept for kept, _ in pool._kept] == [first]


async def test_a_statement_alone_on_a_dropped_session_is_a_503_then_a_fresh_connection(
    storage: SqlStorage,
) -> None:
    client_id, uid, pool, first = await _one_kept(storage)
    pid = raw_of(first).get_server_pid()
    async with storage.database.transaction(write=True) as other:
        await other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    await asyncio.sleep(0.2)  # the session's end reaches the client
    quote = _open(client_id, uid)
    try:
        await storage.add_trade(quote, _entry("trade.sell", client_id, uid, quote.trade_id))
    except StorageUnavailable as exc:  # the kept connection was taken before it closed
        assert exc.status == 503
    else:  # the pool saw it closed first and took another: the quote is stored
        async with storage.read() as unit:
            assert await unit.trades.get(client_id, uid, quote.trade_id) == quote
    assert all(raw_of(kept).get_server_pid() != pid for kept, _ in pool._kept)
    again = _open(client_id, uid)
    await storage.add_trade(again, _entry("trade.sell", client_id, uid, again.trade_id))
    async with storage.read() as unit:
        assert await unit.trades.get(client_id, uid, again.trade_id) == again


async def test_a_statement_alone_cancelled_mid_statement_is_never_kept(
    storage: SqlStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    client_id, uid, pool, first = await _one_kept(storage)
    pid = raw_of(first).get_server_pid()
    slow = direct.Positional(text("SELECT pg_sleep(5)"), ())
    task = asyncio.create_task(storage.database.run_alone(slow, ()))
    await asyncio.sleep(0.3)
    assert pool._kept == []  # the statement holds it
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pool._kept == []  # mid-statement: closed, never kept
    assert await _session_ended(storage, pid)
    quote = _open(client_id, uid)
    await storage.add_trade(quote, _entry("trade.sell", client_id, uid, quote.trade_id))
    async with storage.read() as unit:
        assert await unit.trades.get(client_id, uid, quote.trade_id) == quote
