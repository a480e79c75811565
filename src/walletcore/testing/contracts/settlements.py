"""The storage promises of trade settlements (`SettlementStore`) and of what a user's sends
in flight take (`SendStore.spending`): one settlement per trade, moves by compare-and-set
on (status, attempt) with their entry only when they applied, a sell's hold counted while
it holds, the jobs' due list and the desk's listing in their order, and the wallet
decisions made under `lock_wallet` one after the other. Part of `StorageContract` (its
base class)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from walletcore.domain.audit import AuditEntry
from walletcore.domain.ids import new_id
from walletcore.domain.sends import ChainStatus, SendRecord, Spend
from walletcore.domain.settlement import (
    DUE_STATUSES,
    HOLDING_STATUSES,
    RESERVED_REQUEST_PREFIX,
    Settlement,
    SettlementStatus,
    transfer_key,
)
from walletcore.domain.trade import Side
from walletcore.ports.storage import Storage
from walletcore.testing.contracts.deposits import HUGE, _client, _user
from walletcore.testing.storage import autocommit

S0 = datetime(2026, 2, 1, 8, 15, 0, 250000, tzinfo=UTC)
ETH, TOKEN, BTC = 2, 6, 1
Status = SettlementStatus


def _at(seconds: int) -> datetime:
    return S0 + timedelta(seconds=seconds)


def _settlement(
    client_id: str,
    user_id: str,
    *,
    side: Side = Side.SELL,
    status: SettlementStatus = Status.RESERVED,
    asset_id: int = ETH,
    units: int = 10**18,
    created_at: datetime = S0,
    trade_id: str | None = None,
    **changes: object,
) -> Settlement:
    base = Settlement(
        trade_id=trade_id or new_id(),
        client_id=client_id,
        user_id=user_id,
        side=side,
        asset_id=asset_id,
        units=units,
        status=status,
        created_at=created_at,
        updated_at=created_at,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _entry(settlement: Settlement, action: str) -> AuditEntry:
    return AuditEntry(
        settlement.updated_at,
        settlement.client_id,
        action,
        f"req-{new_id()}",
        "ok",
        settlement.user_id,
        target=settlement.trade_id,
    )


async def _actions(storage: Storage, client_id: str) -> list[str]:
    newest = await autocommit(storage).audit.newest(limit=50)
    return [e.action for e in reversed(newest) if e.client_id == client_id]


async def _send(
    storage: Storage,
    client_id: str,
    request_id: str,
    spend: Spend | None,
    *,
    to: str = "signed",
) -> SendRecord:
    """A send record moved to `to`: `signed`, `broadcast`, `error` (finished, nothing
    sent), `pending` (finished, followed), `stuck` or `success` (followed on chain)."""
    db = autocommit(storage)
    record: SendRecord = await db.sends.begin(client_id, request_id, "fp", S0)
    steps = ["signed", "broadcast", "pending", "stuck", "success"]
    signed = record.signed(b"raw", "0x" + new_id(), _at(1), spend=spend)
    assert await db.sends.advance(record, signed)
    record = signed
    if to == "error":
        finished = record.finish({"status": 500}, _at(2))
        assert await db.sends.advance(record, finished)
        return finished
    for step in steps[1 : steps.index(to) + 1]:
        if step == "broadcast":
            new = record.broadcast(_at(2))
            assert await db.sends.advance(record, new)
        elif step == "pending":
            new = record.finish({"txHash": record.tx_hash}, _at(3), follow=True)
            assert await db.sends.advance(record, new)
        else:
            new = record.tracked(ChainStatus(step), _at(4))
            assert await db.sends.track(record, new)
        record = new
    return record


class SettlementStorageContract:
    """Settlements and a send's spend (module docstring)."""

    # -- add, get, of_trades --------------------------------------------------------------
    async def test_a_settlement_round_trips_every_field_and_is_added_once(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        user_id = await _user(storage, client_id)
        first = _settlement(
            client_id,
            user_id,
            units=HUGE,
            fee_units=HUGE + 1,
            fee_asset_id=ETH,
            asset_id=TOKEN,
            attempt=2,
            tx_hash="0x" + "ab" * 32,
            reason="inventory short: é",
            due_at=_at(90),
            updated_at=_at(5),
        )
        db = autocommit(storage)
        assert await db.settlements.add(first, entry=_entry(first, "settlement.reserved"))
        stored = await db.settlements.get(client_id, first.trade_id)
        assert stored == first
        assert stored.units == HUGE and stored.due_at is not None and stored.due_at.tzinfo
        # a trade has one settlement: a second add writes nothing, nor its entry
        again = _settlement(client_id, user_id, trade_id=first.trade_id, side=Side.BUY)
        assert not await db.settlements.add(again, entry=_entry(again, "settlement.again"))
        assert await db.settlements.get(client_id, first.trade_id) == first
        assert await _actions(storage, client_id) == ["settlement.reserved"]
        # the key is the client's and the trade's
        assert await db.settlements.get(client_id, new_id()) is None
        other = await _client(storage)
        assert await db.settlements.get(other, first.trade_id) is None
        # a buy the desk pays for: no fee, no transfer yet
        buy = _settlement(client_id, user_id, side=Side.BUY, status=Status.QUEUED)
        assert await db.settlements.add(buy)
        stored_buy = await db.settlements.get(client_id, buy.trade_id)
        assert stored_buy == buy
        assert (stored_buy.fee_units, stored_buy.fee_asset_id, stored_buy.request_id) == (
            0,
            None,
            None,
        )

    async def test_of_trades_answers_the_settlements_of_the_trades_that_have_one(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        other = await _client(storage)
        user_id = await _user(storage, client_id)
        other_user = await _user(storage, other)
        db = autocommit(storage)
        one, two = (_settlement(client_id, user_id) for _ in range(2))
        theirs = _settlement(other, other_user)
        for settlement in (one, two, theirs):
            assert await db.settlements.add(settlement)
        unknown = new_id()
        found = await db.settlements.of_trades(
            client_id, [one.trade_id, unknown, theirs.trade_id, two.trade_id, one.trade_id]
        )
        assert found == {one.trade_id: one, two.trade_id: two}
        assert await db.settlements.of_trades(client_id, []) == {}
        assert await db.settlements.of_trades(other, [theirs.trade_id]) == {theirs.trade_id: theirs}

    # -- move -----------------------------------------------------------------------------
    async def test_a_move_is_a_compare_and_set_on_status_and_attempt(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        user_id = await _user(storage, client_id)
        db = autocommit(storage)
        queued = _settlement(client_id, user_id, side=Side.BUY, status=Status.QUEUED, due_at=_at(0))
        assert await db.settlements.add(queued)
        sent = queued.moved(Status.SENT, _at(1), due_at=_at(61), tx_hash="0x01", attempt=1)
        assert await db.settlements.move(queued, sent, entry=_entry(sent, "settlement.sent"))
        assert await db.settlements.get(client_id, queued.trade_id) == sent
        assert sent.request_id == transfer_key(Side.BUY, queued.trade_id, 1)
        # a stale mover (its status is gone) writes nothing, nor its entry
        short = queued.moved(Status.SHORT, _at(2), reason="no inventory", due_at=_at(62))
        assert not await db.settlements.move(queued, short, entry=_entry(short, "stale"))
        failed = sent.moved(Status.FAILED, _at(3), reason="reverted", due_at=_at(63))
        assert await db.settlements.move(sent, failed, entry=_entry(failed, "settlement.failed"))
        again = failed.moved(Status.SENT, _at(4), due_at=_at(64), tx_hash="0x02", attempt=2)
        assert await db.settlements.move(failed, again)
        # the same status at another attempt: stale too
        late = sent.moved(Status.SETTLED, _at(5))
        assert not await db.settlements.move(sent, late, entry=_entry(late, "stale"))
        stored = await db.settlements.get(client_id, queued.trade_id)
        assert stored == again
        assert (stored.attempt, stored.tx_hash, stored.reason, stored.due_at) == (
            2,
            "0x02",
            None,
            _at(64),
        )
        done = again.moved(Status.SETTLED, _at(6), units=queued.units - 1)
        assert await db.settlements.move(again, done, entry=_entry(done, "settlement.settled"))
        assert await db.settlements.get(client_id, queued.trade_id) == done
        assert await _actions(storage, client_id) == [
            "settlement.sent",
            "settlement.failed",
            "settlement.settled",
        ]
        # nothing to move: none stored
        missing = _settlement(client_id, user_id)
        assert not await db.settlements.move(missing, missing.moved(Status.RELEASED, _at(7)))
        assert await db.settlements.get(client_id, missing.trade_id) is None
        with pytest.raises(ValueError):
            await db.settlements.move(done, dataclasses.replace(done, trade_id=new_id()))

    async def test_of_two_racing_moves_one_wins(self, storage: Storage) -> None:
        client_id = await _client(storage)
        user_id = await _user(storage, client_id)
        reserved = _settlement(client_id, user_id)
        assert await autocommit(storage).settlements.add(reserved)

        async def move(to: SettlementStatus) -> bool:
            async with storage.write() as unit:
                new = reserved.moved(to, _at(1))
                return await unit.settlements.move(reserved, new, entry=_entry(new, to.value))

        won = await asyncio.gather(move(Status.AWAITING_PASSWORD), move(Status.RELEASED))
        assert sorted(won) == [False, True]
        stored = await autocommit(storage).settlements.get(client_id, reserved.trade_id)
        winner = Status.AWAITING_PASSWORD if won[0] else Status.RELEASED
        assert stored is not None and stored.status is winner
        assert await _actions(storage, client_id) == [winner.value]

    # -- held -----------------------------------------------------------------------------
    async def test_held_counts_a_users_holding_sells_and_their_fees(self, storage: Storage) -> None:
        client_id = await _client(storage)
        user_id = await _user(storage, client_id)
        neighbour = await _user(storage, client_id)
        db = autocommit(storage)
        for asset in (ETH, TOKEN, BTC):
            assert await db.settlements.held(client_id, user_id, asset) == 0
        holding = [
            # coins of ETH and their fee in ETH
            _settlement(client_id, user_id, units=HUGE, fee_units=7, fee_asset_id=ETH),
            # a token sell: its coins in the token, its fee in ETH
            _settlement(
                client_id,
                user_id,
                asset_id=TOKEN,
                units=700,
                fee_units=30,
                fee_asset_id=ETH,
                status=Status.AWAITING_PASSWORD,
            ),
            _settlement(client_id, user_id, units=1000, status=Status.SENT, attempt=1),
            _settlement(client_id, user_id, units=2000, status=Status.FAILED, attempt=1),
        ]
        not_holding = [
            _settlement(client_id, user_id, units=4000, status=Status.SETTLED),
            _settlement(client_id, user_id, units=8000, status=Status.RELEASED),
            # a buy comes into the wallet: it holds nothing there, whatever its status
            _settlement(client_id, user_id, side=Side.BUY, units=16000, status=Status.SENT),
            _settlement(client_id, user_id, side=Side.BUY, units=32000, status=Status.FAILED),
            _settlement(client_id, user_id, side=Side.BUY, units=64000, status=Status.QUEUED),
            # another user's
            _settlement(client_id, neighbour, units=128000, fee_units=1, fee_asset_id=ETH),
        ]
        for settlement in holding + not_holding:
            assert await db.settlements.add(settlement)
        assert await db.settlements.held(client_id, user_id, ETH) == HUGE + 7 + 30 + 1000 + 2000
        assert await db.settlements.held(client_id, user_id, TOKEN) == 700
        assert await db.settlements.held(client_id, user_id, BTC) == 0
        assert await db.settlements.held(client_id, neighbour, ETH) == 128001
        assert await db.settlements.held(await _client(storage), user_id, ETH) == 0
        # the hold ends with the collection, or with the trade
        first = holding[0]
        assert await db.settlements.move(first, first.moved(Status.RELEASED, _at(9)))
        assert await db.settlements.held(client_id, user_id, ETH) == 30 + 1000 + 2000
        assert {s.status for s in holding} <= HOLDING_STATUSES

    async def test_lock_wallet_makes_the_decisions_about_a_wallet_one_at_a_time(
        self, storage: Storage
    ) -> None:
        """Two write units each hold the coins only if none are held yet, each under
        `lock_wallet`: the second decides after the first committed, and holds nothing."""
        client_id = await _client(storage)
        user_id = await _user(storage, client_id)
        locked = asyncio.Event()

        async def hold(first: bool) -> bool:
            async with storage.write() as unit:
                await unit.settlements.lock_wallet(client_id, user_id)
                if await unit.settlements.held(client_id, user_id, ETH):
                    return False
                if first:
                    locked.set()
                    await asyncio.sleep(0.2)  # the other unit is deciding meanwhile
                return await unit.settlements.add(_settlement(client_id, user_id))

        async def second() -> bool:
            await locked.wait()
            return await hold(False)

        assert list(await asyncio.gather(hold(True), second())) == [True, False]
        assert await autocommit(storage).settlements.held(client_id, user_id, ETH) == 10**18
        with pytest.raises(RuntimeError):
            async with storage.read() as unit:
                await unit.settlements.lock_wallet(client_id, user_id)

    # -- due, listing -----------------------------------------------------------------------
    async def test_due_answers_what_the_jobs_work_on_the_earliest_first(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        other = await _client(storage)
        user_id = await _user(storage, client_id)
        other_user = await _user(storage, other)
        db = autocommit(storage)
        ids = sorted(new_id() for _ in range(3))
        due = [
            _settlement(other, other_user, side=Side.BUY, status=Status.QUEUED, due_at=_at(-60)),
            # at the same instant, by trade id
            _settlement(
                client_id,
                user_id,
                side=Side.BUY,
                status=Status.SHORT,
                due_at=_at(0),
                trade_id=ids[0],
            ),
            _settlement(client_id, user_id, status=Status.SENT, due_at=_at(0), trade_id=ids[1]),
            _settlement(
                client_id,
                user_id,
                side=Side.BUY,
                status=Status.FAILED,
                due_at=_at(10),
                trade_id=ids[2],
            ),
        ]
        not_due = [
            _settlement(client_id, user_id, side=Side.BUY, status=Status.QUEUED, due_at=_at(11)),
            _settlement(client_id, user_id, status=Status.FAILED),  # a sell's: not the jobs'
            _settlement(client_id, user_id, status=Status.RESERVED),  # no time set: not due
            _settlement(client_id, user_id, status=Status.AWAITING_PASSWORD, due_at=_at(0)),
            _settlement(client_id, user_id, status=Status.SETTLED, due_at=_at(0)),
            _settlement(client_id, user_id, status=Status.RELEASED, due_at=_at(0)),
        ]
        for settlement in reversed(due + not_due):
            assert await db.settlements.add(settlement)
        assert {s.status for s in due} <= DUE_STATUSES
        assert await db.settlements.due(_at(10), 10) == due
        assert await db.settlements.due(_at(10), 2) == due[:2]
        assert await db.settlements.due(_at(-61), 10) == []
        assert await db.settlements.due(_at(10), 0) == []
        assert [s.trade_id for s in await db.settlements.due(_at(11), 10)] == [
            s.trade_id for s in [*due, not_due[0]]
        ]

    async def test_listing_answers_a_clients_settlements_newest_first(
        self, storage: Storage
    ) -> None:
        client_id = await _client(storage)
        other = await _client(storage)
        user_id = await _user(storage, client_id)
        other_user = await _user(storage, other)
        db = autocommit(storage)
        ids = sorted(new_id() for _ in range(2))
        oldest = _settlement(client_id, user_id, created_at=_at(0), status=Status.SETTLED)
        token = _settlement(
            client_id, user_id, created_at=_at(5), asset_id=TOKEN, status=Status.RESERVED
        )
        # at the same instant, the greater trade id first
        tied = [
            _settlement(
                client_id,
                user_id,
                side=Side.BUY,
                created_at=_at(9),
                trade_id=trade_id,
                status=Status.QUEUED,
            )
            for trade_id in ids
        ]
        theirs = _settlement(other, other_user, created_at=_at(20))
        for settlement in (tied[0], theirs, oldest, tied[1], token):
            assert await db.settlements.add(settlement)
        newest_first = [tied[1], tied[0], token, oldest]
        assert await db.settlements.listing(client_id) == newest_first
        assert await db.settlements.listing(client_id, limit=2) == newest_first[:2]
        assert await db.settlements.listing(client_id, limit=0) == []
        assert await db.settlements.listing(client_id, asset_id=ETH) == [
            tied[1],
            tied[0],
            oldest,
        ]
        assert await db.settlements.listing(client_id, asset_id=BTC) == []
        assert await db.settlements.listing(
            client_id, statuses=frozenset({Status.SETTLED, Status.RESERVED})
        ) == [token, oldest]
        assert await db.settlements.listing(
            client_id, asset_id=ETH, statuses=frozenset({Status.QUEUED}), limit=1
        ) == [tied[1]]
        assert await db.settlements.listing(client_id, statuses=frozenset()) == []
        assert await db.settlements.listing(other) == [theirs]

    # -- a send's spend -----------------------------------------------------------------------
    async def test_a_sends_spend_round_trips_through_its_moves(self, storage: Storage) -> None:
        client_id = await _client(storage)
        user_id = await _user(storage, client_id)
        db = autocommit(storage)
        spend = Spend(user_id, TOKEN, HUGE)
        started = await db.sends.begin(client_id, "r-1", "fp", S0)
        assert started.spend is None
        signed = await _send(storage, client_id, "r-2", spend)
        assert signed.spend == spend
        assert await db.sends.get(client_id, "r-2") == signed
        followed = await _send(storage, client_id, "r-3", spend, to="stuck")
        stored = await db.sends.get(client_id, "r-3")
        assert stored == followed and stored.spend == spend
        assert [r.spend for r in await db.sends.following(10)] == [spend]
        assert (await db.sends.get(client_id, "r-1")).spend is None

    async def test_spending_counts_a_users_own_sends_in_flight(self, storage: Storage) -> None:
        client_id = await _client(storage)
        user_id = await _user(storage, client_id)
        neighbour = await _user(storage, client_id)
        db = autocommit(storage)
        assert await db.sends.spending(client_id, user_id, ETH) == 0
        counted = {
            "signed": HUGE,
            "broadcast": 200,
            "pending": 400,
            "stuck": 800,
        }
        for to, units in counted.items():
            await _send(storage, client_id, f"r-{to}", Spend(user_id, ETH, units), to=to)
        # finished without reaching the network, or final on chain: nothing in flight
        await _send(storage, client_id, "r-error", Spend(user_id, ETH, 1600), to="error")
        await _send(storage, client_id, "r-success", Spend(user_id, ETH, 3200), to="success")
        # the service's own transfers: held by their settlement, not counted here
        reserved = f"{RESERVED_REQUEST_PREFIX}collection:{new_id()}:1"
        await _send(storage, client_id, reserved, Spend(user_id, ETH, 6400))
        # a client's X-Request-Id that only looks like one (the prefix is exact)
        await _send(
            storage, client_id, RESERVED_REQUEST_PREFIX.upper() + "x", Spend(user_id, ETH, 3)
        )
        # another user's, another asset's, no spend
        await _send(storage, client_id, "r-neighbour", Spend(neighbour, ETH, 12800))
        await _send(storage, client_id, "r-token", Spend(user_id, TOKEN, 25600))
        await _send(storage, client_id, "r-none", None, to="broadcast")
        assert await db.sends.spending(client_id, user_id, ETH) == HUGE + 200 + 400 + 800 + 3
        assert await db.sends.spending(client_id, user_id, TOKEN) == 25600
        assert await db.sends.spending(client_id, user_id, BTC) == 0
        assert await db.sends.spending(client_id, neighbour, ETH) == 12800
        assert await db.sends.spending(await _client(storage), user_id, ETH) == 0
