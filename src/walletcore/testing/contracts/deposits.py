"""The storage promises of deposits and the event feed (`DepositStore`, `EventStore`, an
audit entry's event): each credit stored once, moves and cursors by compare-and-set, the
watch list in step with the wallets, and events that exist exactly when their change
committed, read in one order that never gains an event behind a position already read.
Part of `StorageContract` (its base class)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest

from walletcore.domain.assets import Chain, FeePayer
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.deposits import BlockRef, Deposit, DepositStatus, ScanCursor, Watched
from walletcore.domain.events import EventNote, EventPosition, EventType
from walletcore.domain.ids import new_id
from walletcore.domain.trade import TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports.storage import Storage
from walletcore.testing.contracts.jobs import _trade
from walletcore.testing.storage import autocommit

T0 = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
ETHEREUM, BITCOIN = Chain.ETHEREUM, Chain.BITCOIN
#: More than a signed 64-bit integer holds: an ERC-20 amount in base units.
HUGE = 2**200 + 12345
#: The longest a committed event may be held back behind other writers (`_settled`).
SETTLE_SECONDS = 30.0


def _at(n: int) -> datetime:
    return T0 + timedelta(seconds=n)


async def _client(storage: Storage) -> str:
    client_id = new_id()
    await autocommit(storage).clients.add(
        ApiClient(client_id, "Feed", "ef" * 32, (1, 2), FeePayer.USER, {}, False, 1, T0)
    )
    return client_id


async def _user(storage: Storage, client_id: str, addresses: dict[Chain, str] | None = None) -> str:
    user_id = new_id()
    wallet = WalletRecord(client_id, WalletOwner.USER, user_id, b"", addresses or {}, T0)
    assert await autocommit(storage).wallets.add_user(User(user_id, client_id, T0), wallet)
    return user_id


def _deposit(
    client_id: str,
    user_id: str | None,
    *,
    chain: Chain = ETHEREUM,
    tx_hash: str | None = None,
    position: str = "tx",
    seen_at: datetime = T0,
    block: BlockRef | None = None,
    amount: int = 10**18,
) -> Deposit:
    return Deposit(
        deposit_id=new_id(),
        client_id=client_id,
        owner=WalletOwner.PLATFORM if user_id is None else WalletOwner.USER,
        user_id=user_id,
        chain=chain,
        asset_id=2,
        address="0x" + "ab" * 20,
        tx_hash=tx_hash or "0x" + new_id(),
        position=position,
        amount_units=amount,
        sender=None,
        status=DepositStatus.SEEN,
        block=block,
        seen_at=seen_at,
    )


def _note(kind: EventType, **data: str | int | None) -> EventNote:
    return EventNote(kind, dict(data))


def _entry(
    client_id: str,
    user_id: str | None,
    action: str,
    *,
    event: EventNote | None = None,
    at: datetime = T0,
) -> AuditEntry:
    return AuditEntry(at, client_id, action, f"req-{new_id()}", "ok", user_id, event=event)


def _seen_entry(deposit: Deposit, n: int = 0) -> AuditEntry:
    note = _note(EventType.DEPOSIT_SEEN, depositId=deposit.deposit_id, n=n)
    return _entry(deposit.client_id, deposit.user_id, "deposit.seen", event=note, at=_at(n))


async def _publish(storage: Storage, client_id: str, user_id: str | None, n: int) -> None:
    """One event (`n` in its data, at `_at(n)`), with its entry, in a unit of its own."""
    note = _note(EventType.SEND_PENDING, n=n)
    await autocommit(storage).audit.append(
        _entry(client_id, user_id, "send", event=note, at=_at(n))
    )


async def _settled(storage: Storage, client_id: str, count: int) -> None:
    """Until the client's feed shows `count` events (at most `SETTLE_SECONDS`).

    PostgreSQL shows an event once no transaction that began before its own is still
    open, in any database of the server (docs/storage.md, "The event feed"): on a server
    other writers share, a committed event may be held back a moment. Reads are checked
    after this; an event that must not exist is checked by `has` and `oldest`, which
    see every stored event."""
    deadline = asyncio.get_running_loop().time() + SETTLE_SECONDS
    while True:
        async with storage.read() as unit:
            page = await unit.events.after(client_id, None, limit=count)
        if len(page.events) >= count or asyncio.get_running_loop().time() > deadline:
            return
        await asyncio.sleep(0.01)


async def _all_events(storage: Storage, client_id: str, user_id: str | None = None) -> list[int]:
    """The `n` of each of the client's events, in feed order (paged by 1: the cursor
    moved to each event read)."""
    found: list[int] = []
    position: EventPosition | None = None
    async with storage.read() as unit:
        while True:
            page = await unit.events.after(client_id, position, limit=1, user_id=user_id)
            if not page.events:
                assert not page.more
                return found
            [event] = page.events
            assert position is None or event.position > position
            found.append(int(event.data["n"]))  # type: ignore[arg-type]
            position = event.position


class DepositEventStorageContract:
    """Deposits, scan cursors, the watch list and the event feed (module docstring)."""

    # -- deposits ---------------------------------------------------------------------------
    async def test_a_deposit_round_trips_every_field(self, storage: Storage) -> None:
        client_id = await _client(storage)
        user_id = await _user(storage, client_id)
        mined = dataclasses.replace(
            _deposit(client_id, user_id, block=BlockRef(2**40, "0x" + "cd" * 32), amount=HUGE),
            sender="0x" + "01" * 20,
            position="log:7",
            seen_at=datetime(2026, 3, 1, 10, 0, 0, 123456, tzinfo=UTC),
        )
        mempool = _deposit(client_id, None, chain=BITCOIN, position="out:1", amount=1)
        db = autocommit(storage)
        for deposit in (mined, mempool):
            assert await db.deposits.add(deposit)
            assert (
                await db.deposits.get(deposit.chain, deposit.tx_hash, deposit.position) == deposit
            )
        assert await db.deposits.get(ETHEREUM, mined.tx_hash, "log:8") is None
        done = mined.confirm(_at(60))
        assert await db.deposits.move(mined, done)
        stored = await db.deposits.get(ETHEREUM, mined.tx_hash, "log:7")
        assert stored == done and stored.amount_units == HUGE
        assert stored.confirmed_at is not None and stored.confirmed_at.tzinfo is not None

    async def test_a_credit_is_stored_once_with_its_entry_and_event(self, storage: Storage) -> None:
        """`add` dedups by (chain, tx hash, position): the second finder (another id, a
        later time) stores nothing, and its entry and event are not written."""
        client_id = await _client(storage)
        user_id = await _user(storage, client_id)
        first = _deposit(client_id, user_id)
        again = dataclasses.replace(first, deposit_id=new_id(), seen_at=_at(5))
        db = autocommit(storage)
        assert await db.deposits.add(first, entry=_seen_entry(first, 1))
        assert not await db.deposits.add(again, entry=_seen_entry(again, 2))
        assert await db.deposits.get(ETHEREUM, first.tx_hash, "tx") == first
        # another position of the same transaction is another credit
        token = dataclasses.replace(first, deposit_id=new_id(), position="log:0")
        assert await db.deposits.add(token, entry=_seen_entry(token, 3))
        assert [e.action for e in await db.audit.newest()] == ["deposit.seen", "deposit.seen"]
        await _settled(storage, client_id, 2)
        assert await _all_events(storage, client_id) == [1, 3]
        page = await db.events.after(client_id, None, limit=10)
        assert [e.data["depositId"] for e in page.events] == [first.deposit_id, token.deposit_id]
        assert [(e.type, e.user_id, e.at) for e in page.events] == [
            ("deposit.seen", user_id, _at(1)),
            ("deposit.seen", user_id, _at(3)),
        ]

    async def test_a_move_is_a_compare_and_set_on_status_and_block(self, storage: Storage) -> None:
        client_id = await _client(storage)
        user_id = await _user(storage, client_id)
        seen = _deposit(client_id, user_id)  # in the mempool
        db = autocommit(storage)
        assert await db.deposits.add(seen)
        block = BlockRef(100, "0xaa")
        mined = seen.moved_to(block)
        assert await db.deposits.move(seen, mined, entry=_entry(client_id, user_id, "move"))
        # stale: still thought in the mempool, or in another block, or another status
        confirmed_note = _note(EventType.DEPOSIT_CONFIRMED, n=1)
        stale = [
            (seen, seen.confirm(_at(1))),
            (seen.moved_to(BlockRef(100, "0xbb")), mined.confirm(_at(1))),
            (mined.confirm(_at(1)), mined.reverse(_at(2))),
        ]
        for current, new in stale:
            lost = _entry(client_id, user_id, "lost", event=confirmed_note)
            assert not await db.deposits.move(current, new, entry=lost)
        assert await db.deposits.get(ETHEREUM, seen.tx_hash, "tx") == mined
        assert [e.action for e in await db.audit.newest()] == ["move"]
        assert await db.events.oldest(client_id) is None
        # the current state wins, once
        done = mined.confirm(_at(3))
        won = _entry(client_id, user_id, "confirm", event=confirmed_note)
        assert await db.deposits.move(mined, done, entry=won)
        assert not await db.deposits.move(mined, done, entry=won)
        assert await db.deposits.get(ETHEREUM, seen.tx_hash, "tx") == done
        await _publish(storage, client_id, None, 2)  # after the losers' would-be events
        await _settled(storage, client_id, 2)
        assert await _all_events(storage, client_id) == [1, 2]
        # reversed, then seen again (a later scan found it once more)
        gone = done.reverse(_at(4))
        assert await db.deposits.move(done, gone)
        back = gone.seen_again(BlockRef(101, "0xcc"))
        assert await db.deposits.move(gone, back)
        assert await db.deposits.get(ETHEREUM, seen.tx_hash, "tx") == back

    async def test_racing_moves_of_a_deposit_have_one_winner(self, storage: Storage) -> None:
        client_id = await _client(storage)
        seen = _deposit(client_id, None, block=BlockRef(5, "0x05"))
        await autocommit(storage).deposits.add(seen)

        async def settle(new: Deposit) -> bool:
            async with storage.write() as unit:
                await asyncio.sleep(0)
                return await unit.deposits.move(seen, new)

        outcomes = [seen.confirm(_at(1)), seen.reverse(_at(1)), seen.moved_to(BlockRef(6, "x"))]
        won = await asyncio.gather(*(settle(new) for new in outcomes))
        assert sum(won) == 1
        stored = await autocommit(storage).deposits.get(ETHEREUM, seen.tx_hash, "tx")
        assert stored == outcomes[won.index(True)]

    async def test_unsettled_are_a_chains_seen_deposits_oldest_first(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        db = autocommit(storage)
        late = _deposit(client_id, None, seen_at=_at(30), tx_hash="0x03")
        early_b = _deposit(client_id, None, seen_at=_at(10), tx_hash="0x02")
        early_a = _deposit(client_id, None, seen_at=_at(10), tx_hash="0x01", block=BlockRef(1, "h"))
        settled = _deposit(client_id, None, seen_at=_at(0), tx_hash="0x00")
        elsewhere = _deposit(client_id, None, seen_at=_at(0), chain=BITCOIN)
        for deposit in (late, early_b, settled, early_a, elsewhere):
            assert await db.deposits.add(deposit)
        assert await db.deposits.move(settled, settled.confirm(_at(1)))
        unsettled = await db.deposits.unsettled(ETHEREUM, 10)
        assert [d.tx_hash for d in unsettled] == ["0x01", "0x02", "0x03"]
        assert [d.tx_hash for d in await db.deposits.unsettled(ETHEREUM, 2)] == ["0x01", "0x02"]
        assert await db.deposits.unsettled(BITCOIN, 10) == [elsewhere]
        assert await db.deposits.unsettled(Chain.SOLANA, 10) == []

    async def test_a_clients_deposits_are_paged_newest_first(self, storage: Storage) -> None:
        client_id, other = await _client(storage), await _client(storage)
        alice, bob = await _user(storage, client_id), await _user(storage, client_id)
        db = autocommit(storage)
        mine = [
            _deposit(client_id, alice, seen_at=_at(1)),
            _deposit(client_id, None, seen_at=_at(2)),
            _deposit(client_id, bob, seen_at=_at(3)),
            _deposit(client_id, alice, seen_at=_at(4)),
        ]
        for deposit in [*mine, _deposit(other, None, seen_at=_at(5))]:
            assert await db.deposits.add(deposit)
        newest = list(reversed(mine))
        assert await db.deposits.page(client_id, None, limit=10) == newest
        assert await db.deposits.page(client_id, None, limit=2) == newest[:2]
        assert await db.deposits.page(client_id, alice, limit=10) == [mine[3], mine[0]]
        assert await db.deposits.page(client_id, bob, limit=10) == [mine[2]]
        assert await db.deposits.page(client_id, new_id(), limit=10) == []

    # -- the watch list ---------------------------------------------------------------------
    async def test_the_watchlist_follows_the_wallets_stored_in_a_unit(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        db = autocommit(storage)
        alice = await _user(storage, client_id, {ETHEREUM: "0xa1", BITCOIN: "bc1qa1"})
        platform = WalletRecord(client_id, WalletOwner.PLATFORM, None, b"", {ETHEREUM: "0xp"}, T0)
        # a unit that raises leaves no wallet and no watched address
        with pytest.raises(RuntimeError):
            async with storage.write() as unit:
                assert await unit.wallets.add(platform)
                raise RuntimeError("rolled back")
        assert "0xp" not in await db.deposits.watchlist(ETHEREUM)
        async with storage.write() as unit:
            assert await unit.wallets.add(platform)
            # a unit reads the addresses it stored
            assert "0xp" in await unit.deposits.watchlist(ETHEREUM)
        alice_is = Watched(client_id, WalletOwner.USER, alice)
        platform_is = Watched(client_id, WalletOwner.PLATFORM, None)
        assert await db.deposits.watchlist(ETHEREUM) == {"0xa1": alice_is, "0xp": platform_is}
        assert await db.deposits.watchlist(BITCOIN) == {"bc1qa1": alice_is}
        assert await db.deposits.watchlist(Chain.TRON) == {}
        # one address looked up: whose it is, on its chain only
        assert await db.deposits.whose(ETHEREUM, "0xp") == platform_is
        assert await db.deposits.whose(ETHEREUM, "0xa1") == alice_is
        assert await db.deposits.whose(BITCOIN, "0xa1") is None
        assert await db.deposits.whose(ETHEREUM, "0xnobody") is None
        # an updated wallet's new address is watched; the old one stays, still alice's
        wallet = await db.wallets.get(client_id, WalletOwner.USER, alice)
        assert wallet is not None
        await db.wallets.update(
            dataclasses.replace(wallet, addresses={ETHEREUM: "0xa2", Chain.TRON: "Ta1"})
        )
        assert await db.deposits.watchlist(ETHEREUM) == {
            "0xa1": alice_is,
            "0xa2": alice_is,
            "0xp": platform_is,
        }
        assert await db.deposits.watchlist(Chain.TRON) == {"Ta1": alice_is}
        # an address never changes owner: a later wallet with it does not take it over
        bob = await _user(storage, client_id, {ETHEREUM: "0xa1", BITCOIN: "bc1qb1"})
        watched = await db.deposits.watchlist(BITCOIN)
        assert watched["bc1qa1"] == alice_is
        assert watched["bc1qb1"] == Watched(client_id, WalletOwner.USER, bob)
        assert (await db.deposits.watchlist(ETHEREUM))["0xa1"] == alice_is

    # -- scan cursors -----------------------------------------------------------------------
    async def test_a_cursor_moves_by_compare_and_set(self, storage: Storage) -> None:
        db = autocommit(storage)
        one, two, three = BlockRef(10, "0x0a"), BlockRef(15, "0x0f"), BlockRef(20, "0x14")
        assert await db.deposits.cursor(ETHEREUM) is None
        assert not await db.deposits.advance(ETHEREUM, one, ScanCursor(ETHEREUM, two, _at(1)))
        assert await db.deposits.advance(ETHEREUM, None, ScanCursor(ETHEREUM, one, _at(1)))
        assert not await db.deposits.advance(ETHEREUM, None, ScanCursor(ETHEREUM, two, _at(2)))
        assert await db.deposits.cursor(ETHEREUM) == ScanCursor(ETHEREUM, one, _at(1))
        assert await db.deposits.advance(ETHEREUM, one, ScanCursor(ETHEREUM, two, _at(2)))
        # stale: the height it ended at, or the same height in another block
        for stale in (one, BlockRef(15, "0xff")):
            assert not await db.deposits.advance(
                ETHEREUM, stale, ScanCursor(ETHEREUM, three, _at(3))
            )
        assert await db.deposits.cursor(ETHEREUM) == ScanCursor(ETHEREUM, two, _at(2))
        assert await db.deposits.cursor(BITCOIN) is None
        # back (a reorg moved it down): a move like any other
        assert await db.deposits.advance(ETHEREUM, two, ScanCursor(ETHEREUM, one, _at(4)))
        assert await db.deposits.cursor(ETHEREUM) == ScanCursor(ETHEREUM, one, _at(4))

    @pytest.mark.parametrize("first", [True, False], ids=["first-cursor", "next-cursor"])
    async def test_two_racing_advances_from_one_cursor_store_one(
        self, storage: Storage, first: bool
    ) -> None:
        """Two scans of one range: the second's advance runs while the first's unit is
        still open (it waits, or queues, behind it), and loses with no error; what it
        found in its unit is rolled back with it."""
        client_id = await _client(storage)
        start = BlockRef(10, "0x0a")
        if not first:
            assert await autocommit(storage).deposits.advance(
                ETHEREUM, None, ScanCursor(ETHEREUM, start, T0)
            )
        expected = None if first else start
        advanced = asyncio.Event()

        async def scan(n: int, wait: Callable[[], Awaitable[object]]) -> bool:
            await wait()
            cursor = ScanCursor(ETHEREUM, BlockRef(20, f"0x{n}"), _at(n))
            async with storage.write() as unit:
                if not await unit.deposits.advance(ETHEREUM, expected, cursor):
                    return False
                found = _deposit(client_id, None, tx_hash=f"0xfound{n}")
                assert await unit.deposits.add(found, entry=_seen_entry(found, n))
                advanced.set()
                await asyncio.sleep(0.05)  # the other scan's advance goes meanwhile
            return True

        won = await asyncio.gather(scan(1, lambda: asyncio.sleep(0)), scan(2, advanced.wait))
        assert list(won) == [True, False]
        cursor = await autocommit(storage).deposits.cursor(ETHEREUM)
        assert cursor == ScanCursor(ETHEREUM, BlockRef(20, "0x1"), _at(1))
        assert [d.tx_hash for d in await autocommit(storage).deposits.page(
            client_id, None, limit=10
        )] == ["0xfound1"]  # fmt: skip
        await _publish(storage, client_id, None, 3)
        await _settled(storage, client_id, 2)
        assert await _all_events(storage, client_id) == [1, 3]

    # -- the event feed ---------------------------------------------------------------------
    async def test_an_event_is_written_only_when_its_change_commits(self, storage: Storage) -> None:
        client_id = await _client(storage)
        user_id = await _user(storage, client_id)
        deposit = _deposit(client_id, user_id)
        with pytest.raises(RuntimeError):
            async with storage.write() as unit:
                assert await unit.deposits.add(deposit, entry=_seen_entry(deposit, 1))
                await unit.events.publish(
                    client_id, user_id, _note(EventType.SEND_PENDING, n=2), T0
                )
                await unit.audit.append(
                    _entry(client_id, None, "x", event=_note(EventType.SEND_SUCCESS, n=3))
                )
                raise RuntimeError("rolled back")
        db = autocommit(storage)
        assert await db.deposits.get(ETHEREUM, deposit.tx_hash, "tx") is None
        assert await db.audit.newest() == []
        assert await db.events.oldest(client_id) is None
        # the same unit, committed: every event, in the order written
        async with storage.write() as unit:
            assert await unit.deposits.add(deposit, entry=_seen_entry(deposit, 1))
            await unit.events.publish(client_id, user_id, _note(EventType.SEND_PENDING, n=2), T0)
            await unit.audit.append(
                _entry(client_id, None, "x", event=_note(EventType.SEND_SUCCESS, n=3))
            )
        await _settled(storage, client_id, 3)
        assert await _all_events(storage, client_id) == [1, 2, 3]
        page = await db.events.after(client_id, None, limit=10)
        assert [(e.type, e.user_id) for e in page.events] == [
            ("deposit.seen", user_id),
            ("send.pending", user_id),
            ("send.success", None),
        ]
        # an entry without an event writes none
        await db.audit.append(_entry(client_id, user_id, "no-event"))
        await _publish(storage, client_id, None, 4)
        await _settled(storage, client_id, 4)
        assert await _all_events(storage, client_id) == [1, 2, 3, 4]

    async def test_an_event_needs_its_client(self, storage: Storage) -> None:
        """An entry whose event names no client fails its unit (`storable`), writing nothing."""
        client_id = await _client(storage)
        bad = AuditEntry(T0, None, "x", "req", "ok", event=_note(EventType.SEND_PENDING, n=1))
        deposit = _deposit(client_id, None)
        with pytest.raises(Exception):  # noqa: B017 - each store refuses it its own way
            async with storage.write() as unit:
                await unit.deposits.add(deposit, entry=bad)
        assert await autocommit(storage).deposits.get(ETHEREUM, deposit.tx_hash, "tx") is None
        assert await autocommit(storage).audit.newest() == []

    async def test_a_trades_move_writes_its_event_only_when_it_wins(self, storage: Storage) -> None:
        """`swap_trade` (a statement of its own on PostgreSQL) and `trades.swap` in a unit:
        the entry's event exists if and only if the compare-and-set won."""
        client_id = await _client(storage)
        user_id = await _user(storage, client_id)
        db = autocommit(storage)
        quote = _trade(client_id, user_id, TradeStatus.OPEN, T0)
        # a quote whose entry carries an event: stored together
        await storage.add_trade(
            quote, _entry(client_id, user_id, "sell", event=_note(EventType.SEND_PENDING, n=0))
        )

        def approval(n: int) -> AuditEntry:
            note = _note(EventType.TRADE_APPROVED, n=n, tradeId=quote.trade_id)
            return _entry(client_id, user_id, f"approve-{n}", event=note, at=_at(n))

        moves = [quote.start_approval(_at(n)) for n in range(1, 7)]
        won = await asyncio.gather(
            *(
                storage.swap_trade(TradeStatus.OPEN, move, approval(n))
                for n, move in enumerate(moves, start=1)
            )
        )
        assert sum(won) == 1
        winner = won.index(True) + 1
        await _settled(storage, client_id, 2)
        assert await _all_events(storage, client_id) == [0, winner]
        # a loser later: nothing
        assert not await storage.swap_trade(TradeStatus.OPEN, quote.cancel(T0), approval(10))
        # in a unit: the winner's event; a loser's none; a move without an event none
        executing = moves[winner - 1]
        async with storage.write() as unit:
            assert not await unit.trades.swap(TradeStatus.OPEN, executing, entry=approval(11))
            failed = dataclasses.replace(executing, status=TradeStatus.FAILED)
            assert await unit.trades.swap(TradeStatus.EXECUTING, failed, entry=approval(12))
        await _settled(storage, client_id, 3)
        page = await db.events.after(client_id, None, limit=10)
        assert [e.data["n"] for e in page.events] == [0, winner, 12]
        assert page.events[-1].at == _at(12) and page.events[-1].user_id == user_id
        plain = _trade(client_id, user_id, TradeStatus.OPEN, T0)
        await storage.add_trade(plain, _entry(client_id, user_id, "sell"))
        assert await storage.swap_trade(
            TradeStatus.OPEN, plain.cancel(T0), _entry(client_id, user_id, "cancel")
        )
        await _publish(storage, client_id, None, 13)
        await _settled(storage, client_id, 4)
        assert await _all_events(storage, client_id) == [0, winner, 12, 13]
        assert len(await db.audit.newest(limit=100)) == 6

    async def test_the_feed_pages_in_order_by_client_and_user(self, storage: Storage) -> None:
        client_id, other = await _client(storage), await _client(storage)
        alice, bob = await _user(storage, client_id), await _user(storage, client_id)
        owners = [alice, None, bob, alice, bob, alice]
        for n, user_id in enumerate(owners):
            await _publish(storage, client_id, user_id, n)
            await _publish(storage, other, None, 100 + n)
        await _settled(storage, client_id, 6)
        await _settled(storage, other, 6)
        db = autocommit(storage)
        first = await db.events.after(client_id, None, limit=4)
        assert [e.data["n"] for e in first.events] == [0, 1, 2, 3] and first.more
        rest = await db.events.after(client_id, first.events[-1].position, limit=4)
        assert [e.data["n"] for e in rest.events] == [4, 5] and not rest.more
        exact = await db.events.after(client_id, None, limit=6)
        assert len(exact.events) == 6 and not exact.more
        events = [*first.events, *rest.events]
        assert [e.position for e in events] == sorted({e.position for e in events})
        assert len({e.event_id for e in events}) == 6
        assert [e.user_id for e in events] == owners
        assert [(e.type, e.at) for e in events[:2]] == [
            ("send.pending", _at(0)),
            ("send.pending", _at(1)),
        ]
        wire = events[0].wire()
        assert (wire["id"], wire["userId"], wire["data"]) == (events[0].event_id, alice, {"n": 0})
        assert await _all_events(storage, client_id, alice) == [0, 3, 5]
        by_alice = await db.events.after(client_id, events[0].position, limit=1, user_id=alice)
        assert [e.data["n"] for e in by_alice.events] == [3] and by_alice.more
        assert await _all_events(storage, client_id, bob) == [2, 4]
        assert await _all_events(storage, other) == [100 + n for n in range(6)]
        assert (await db.events.after(client_id, events[-1].position, limit=5)).events == []
        assert (await db.events.after(new_id(), None, limit=5)).events == []

    async def test_kept_events_are_known_and_pruned_oldest_first(self, storage: Storage) -> None:
        client_id, other = await _client(storage), await _client(storage)
        for n in range(5):
            await _publish(storage, client_id, None, n)
        await _publish(storage, other, None, 9)
        await _settled(storage, client_id, 5)
        await _settled(storage, other, 1)
        db = autocommit(storage)
        events = (await db.events.after(client_id, None, limit=10)).events
        [theirs] = (await db.events.after(other, None, limit=10)).events
        assert await db.events.oldest(client_id) == events[0].position
        assert await db.events.oldest(new_id()) is None
        assert all([await db.events.has(client_id, e.position) for e in events])
        assert not await db.events.has(other, events[0].position)  # not theirs
        assert not await db.events.has(client_id, theirs.position)
        last = events[-1].position
        assert not await db.events.has(client_id, EventPosition(last.tx, last.seq + 1000))
        # older than _at(3): n = 0, 1, 2; at most 2 a call, the oldest first
        assert await db.events.prune(_at(3), 2) == 2
        assert not await db.events.has(client_id, events[1].position)
        assert await db.events.has(client_id, events[2].position)
        assert await db.events.oldest(client_id) == events[2].position
        assert await db.events.prune(_at(3), 2) == 1
        assert await db.events.prune(_at(3), 2) == 0
        assert await _all_events(storage, client_id) == [3, 4]
        assert await _all_events(storage, other) == [9]
        # a pruning unit that raises deletes nothing
        with pytest.raises(RuntimeError):
            async with storage.write() as unit:
                assert await unit.events.prune(_at(100), 100) == 3
                raise RuntimeError("rolled back")
        assert await _all_events(storage, client_id) == [3, 4]
        # everything pruned: a new event still comes after every position ever given
        assert await db.events.prune(_at(100), 100) == 3
        assert await db.events.oldest(client_id) is None
        await _publish(storage, client_id, None, 5)
        await _settled(storage, client_id, 1)
        [new] = (await db.events.after(client_id, None, limit=10)).events
        assert new.position > last and new.data == {"n": 5}
        assert (await db.events.after(client_id, last, limit=10)).events == [new]


__all__ = ["DepositEventStorageContract"]
