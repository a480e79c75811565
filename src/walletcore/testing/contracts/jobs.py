"""The storage promises background jobs rely on: the shared price table
(`unit.prices`, walletcore.ports.prices), the trades in flight (`trades.in_flight`) and the
sends followed on chain (`sends.following`, `checked_chain`, `track`). Part of
`StorageContract` (its base class)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from walletcore.domain.assets import FeePayer, Fiat
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.errors import InvalidSendTransition
from walletcore.domain.ids import new_id
from walletcore.domain.sends import ChainStatus, SendRecord, SendState
from walletcore.domain.trade import FixedLeg, Quote, Side, Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports.storage import Storage
from walletcore.testing.storage import autocommit

T0 = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)


async def _user(storage: Storage) -> tuple[str, str]:
    client_id, user_id = new_id(), new_id()
    db = autocommit(storage)
    await db.clients.add(
        ApiClient(client_id, "Jobs", "cd" * 32, (1, 2), FeePayer.USER, {}, False, 1, T0)
    )
    wallet = WalletRecord(client_id, WalletOwner.USER, user_id, b"", {}, T0)
    await db.wallets.add_user(User(user_id, client_id, T0), wallet)
    return client_id, user_id


def _trade(client_id: str, user_id: str, status: TradeStatus, created_at: datetime) -> Trade:
    price = Decimal("3000.5")
    trade = Trade(
        trade_id=new_id(),
        client_id=client_id,
        user_id=user_id,
        side=Side.SELL,
        asset_id=2,
        symbol="ETH",
        fiat=Fiat.EUR,
        fixed_leg=FixedLeg.CRYPTO,
        quote=Quote(Decimal(1), price, price, created_at + timedelta(seconds=60)),
        status=TradeStatus.OPEN,
        created_at=created_at,
    )
    if status is TradeStatus.OPEN:
        return trade
    approved_at = created_at + timedelta(seconds=1)
    return dataclasses.replace(trade, status=status, approved_at=approved_at)


async def _finished_send(
    storage: Storage, client_id: str, request_id: str, at: datetime, *, follow: bool = True
) -> SendRecord:
    """A send record taken through its recovery points and finished at `at` (accepted by
    the network: followed on chain when `follow`)."""
    db = autocommit(storage)
    started = await db.sends.begin(client_id, request_id, "fp-" + request_id, at)
    signed = started.signed(b"raw-" + request_id.encode(), "0x" + request_id, at)
    assert await db.sends.advance(started, signed)
    sent = signed.broadcast(at)
    assert await db.sends.advance(signed, sent)
    result = {"txHash": "0x" + request_id, "status": "pending"}
    finished: SendRecord = sent.finish(result, at, follow=follow)
    assert await db.sends.advance(sent, finished)
    return finished


def _settle_entry(record: SendRecord, status: str, n: int = 0) -> AuditEntry:
    return AuditEntry(
        at=T0,
        client_id=record.client_id,
        action="send.settle",
        request_id=f"job-follow-{n}",
        outcome="ok",
        target=record.tx_hash,
        detail=f"pending -> {status}",
    )


async def _settle_entries(storage: Storage) -> list[AuditEntry]:
    entries = await autocommit(storage).audit.newest(1000)
    return [e for e in entries if e.action == "send.settle"]


class JobStorageContract:
    """What the price refresh and the settlement jobs need of a `storage` fixture."""

    pytestmark = pytest.mark.asyncio

    # -- the shared price table ---------------------------------------------------------
    async def test_a_fresh_price_table_is_empty(self, storage: Storage) -> None:
        async with storage.read() as unit:
            assert await unit.prices.load() == {}

    async def test_saved_prices_round_trip_with_their_instant(self, storage: Storage) -> None:
        table = {
            ("BTC", Fiat.USD): Decimal("97000.123456789012345678"),
            ("ETH", Fiat.EUR): Decimal("3000.5"),
        }
        async with storage.write() as unit:
            await unit.prices.save(table, T0)
            assert (await unit.prices.load())[("ETH", Fiat.EUR)] == (Decimal("3000.5"), T0)
        async with storage.read() as unit:
            loaded = await unit.prices.load()
        assert loaded == {key: (price, T0) for key, price in table.items()}
        assert all(at.utcoffset() == timedelta(0) for _, at in loaded.values())

    async def test_a_partial_save_keeps_the_other_pairs(self, storage: Storage) -> None:
        later = T0 + timedelta(seconds=60)
        db = autocommit(storage)
        await db.prices.save({("BTC", Fiat.USD): Decimal(1), ("ETH", Fiat.USD): Decimal(2)}, T0)
        await db.prices.save({("BTC", Fiat.USD): Decimal(3)}, later)
        assert await db.prices.load() == {
            ("BTC", Fiat.USD): (Decimal(3), later),
            ("ETH", Fiat.USD): (Decimal(2), T0),
        }

    async def test_an_older_save_never_replaces_a_newer_price(self, storage: Storage) -> None:
        later = T0 + timedelta(seconds=60)
        db = autocommit(storage)
        await db.prices.save({("BTC", Fiat.USD): Decimal(3)}, later)
        await db.prices.save({("BTC", Fiat.USD): Decimal(1)}, T0)
        assert await db.prices.load() == {("BTC", Fiat.USD): (Decimal(3), later)}

    async def test_concurrent_saves_keep_the_newest(self, storage: Storage) -> None:
        pairs = [("BTC", Fiat.USD), ("ETH", Fiat.USD), ("SOL", Fiat.EUR)]

        async def save(n: int) -> None:
            async with storage.write() as unit:
                at = T0 + timedelta(seconds=n)
                await unit.prices.save({p: Decimal(n + 1) for p in pairs}, at)

        await asyncio.gather(*(save(n) for n in range(8)))
        loaded = await autocommit(storage).prices.load()
        assert loaded == {p: (Decimal(8), T0 + timedelta(seconds=7)) for p in pairs}

    async def test_prices_cannot_be_saved_in_a_read_unit(self, storage: Storage) -> None:
        async with storage.read() as unit:
            with pytest.raises(RuntimeError):
                await unit.prices.save({("BTC", Fiat.USD): Decimal(1)}, T0)
        assert await autocommit(storage).prices.load() == {}

    # -- trades in flight ---------------------------------------------------------------
    async def test_in_flight_lists_approved_and_executing_trades_of_every_client(
        self, storage: Storage
    ) -> None:
        db = autocommit(storage)
        first, second = await _user(storage), await _user(storage)
        made = []
        for n, status in enumerate(
            [
                TradeStatus.EXECUTING,
                TradeStatus.OPEN,
                TradeStatus.APPROVED,
                TradeStatus.COMPLETED,
                TradeStatus.FAILED,
                TradeStatus.EXECUTING,
            ]
        ):
            owner = first if n % 2 == 0 else second
            trade = _trade(*owner, status, T0 + timedelta(seconds=n))
            await db.trades.add(trade)
            made.append(trade)
        in_flight = await db.trades.in_flight(10)
        assert [t.trade_id for t in in_flight] == [
            made[0].trade_id,
            made[2].trade_id,
            made[5].trade_id,
        ]
        assert in_flight[0] == made[0]
        assert [t.trade_id for t in await db.trades.in_flight(2)] == [
            made[0].trade_id,
            made[2].trade_id,
        ]

    async def test_a_settled_trade_leaves_in_flight(self, storage: Storage) -> None:
        db = autocommit(storage)
        client_id, user_id = await _user(storage)
        trade = _trade(client_id, user_id, TradeStatus.EXECUTING, T0)
        await db.trades.add(trade)
        failed = dataclasses.replace(trade, status=TradeStatus.FAILED, completed_at=T0)
        assert await db.trades.swap(TradeStatus.EXECUTING, failed)
        assert await db.trades.in_flight(10) == []

    # -- sends followed on chain --------------------------------------------------------
    async def test_a_send_finished_as_accepted_is_pending_on_chain(self, storage: Storage) -> None:
        client_id, _ = await _user(storage)
        finished = await _finished_send(storage, client_id, "s-1", T0)
        stored = await autocommit(storage).sends.get(client_id, "s-1")
        assert stored == finished
        assert stored.chain_status is ChainStatus.PENDING
        assert stored.chain_checked_at == T0 and stored.chain_final_at is None
        assert await autocommit(storage).sends.following(10) == [finished]

    async def test_a_send_not_followed_has_no_chain_status(self, storage: Storage) -> None:
        client_id, _ = await _user(storage)
        await _finished_send(storage, client_id, "s-1", T0, follow=False)
        db = autocommit(storage)
        await db.sends.begin(client_id, "in-flight", "fp", T0)  # started, never finished
        stored = await db.sends.get(client_id, "s-1")
        assert stored.state is SendState.FINISHED and stored.chain_status is None
        assert await db.sends.following(10) == []
        # neither moves on chain: the domain refuses the move before any store sees it
        for request_id in ("s-1", "in-flight"):
            with pytest.raises(InvalidSendTransition):
                (await db.sends.get(client_id, request_id)).tracked(ChainStatus.SUCCESS, T0)
        assert (await db.sends.get(client_id, "s-1")).chain_status is None

    async def test_following_lists_pending_sends_of_every_client_least_recently_checked_first(
        self, storage: Storage
    ) -> None:
        (first, _), (second, _) = await _user(storage), await _user(storage)
        a = await _finished_send(storage, second, "a", T0)
        b = await _finished_send(storage, first, "b", T0 + timedelta(seconds=1))
        c = await _finished_send(storage, second, "c", T0 + timedelta(seconds=2))
        d = await _finished_send(storage, first, "d", T0 + timedelta(seconds=3))
        db = autocommit(storage)
        assert await db.sends.track(c, c.tracked(ChainStatus.FAILED, T0))
        keys = [(r.client_id, r.request_id) for r in await db.sends.following(10)]
        assert keys == [(second, "a"), (first, "b"), (first, "d")]
        assert await db.sends.count_following() == 3  # every client's, the settled one not
        assert [r.request_id for r in await db.sends.following(2)] == ["a", "b"]
        # asked about and still pending: behind the others; a settled one is left alone
        later = T0 + timedelta(minutes=1)
        await db.sends.checked_chain([(second, "a"), (second, "c")], later)
        following = await db.sends.following(10)
        assert [r.request_id for r in following] == ["b", "d", "a"]
        assert following[-1] == dataclasses.replace(a, chain_checked_at=later)
        settled = await db.sends.get(second, "c")
        assert settled.chain_checked_at == T0 and settled.chain_status is ChainStatus.FAILED
        assert (b, d) == tuple(following[:2])
        assert c.chain_status is ChainStatus.PENDING  # as finished, before the move

    async def test_track_to_a_final_status_moves_once_with_its_entry(
        self, storage: Storage
    ) -> None:
        client_id, _ = await _user(storage)
        record = await _finished_send(storage, client_id, "s-1", T0)
        at = T0 + timedelta(seconds=30)
        settled = record.tracked(ChainStatus.SUCCESS, at)
        async with storage.write() as unit:
            entry = _settle_entry(record, "success")
            assert await unit.sends.track(record, settled, entry=entry)
            # the loser of a second move (it read the record pending) writes nothing, nor
            # its entry
            assert not await unit.sends.track(
                record, record.tracked(ChainStatus.FAILED, at), entry=_settle_entry(record, "x", 1)
            )
        stored = await autocommit(storage).sends.get(client_id, "s-1")
        assert (
            stored
            == settled
            == dataclasses.replace(
                record, chain_status=ChainStatus.SUCCESS, chain_checked_at=at, chain_final_at=at
            )
        )
        assert await _settle_entries(storage) == [entry]
        assert await autocommit(storage).sends.following(10) == []
        # and in a later unit too: final once (the domain refuses to move a final send;
        # the store, a move from a status it no longer has)
        with pytest.raises(InvalidSendTransition):
            settled.tracked(ChainStatus.FAILED, at)
        db = autocommit(storage)
        assert not await db.sends.track(
            record, record.tracked(ChainStatus.FAILED, at), entry=_settle_entry(record, "f", 2)
        )
        assert not await db.sends.track(settled, settled, entry=_settle_entry(record, "f", 3))
        assert await _settle_entries(storage) == [entry]
        assert await db.sends.get(client_id, "s-1") == settled

    async def test_concurrent_final_moves_of_one_send_move_it_once(self, storage: Storage) -> None:
        client_id, _ = await _user(storage)
        record = await _finished_send(storage, client_id, "s-1", T0)

        async def settle(n: int) -> bool:
            status = ChainStatus.SUCCESS if n % 2 else ChainStatus.FAILED
            async with storage.write() as unit:
                return await unit.sends.track(
                    record, record.tracked(status, T0), entry=_settle_entry(record, status, n)
                )

        won = await asyncio.gather(*(settle(n) for n in range(8)))
        assert sum(won) == 1
        (entry,) = await _settle_entries(storage)
        stored = await autocommit(storage).sends.get(client_id, "s-1")
        assert entry.detail == f"pending -> {stored.chain_status.value}"

    async def test_a_move_in_a_failed_unit_writes_nothing(self, storage: Storage) -> None:
        client_id, _ = await _user(storage)
        record = await _finished_send(storage, client_id, "s-1", T0)
        with pytest.raises(LookupError):
            async with storage.write() as unit:
                await unit.sends.track(
                    record,
                    record.tracked(ChainStatus.SUCCESS, T0),
                    entry=_settle_entry(record, "ok"),
                )
                raise LookupError("after the move")
        assert await autocommit(storage).sends.get(client_id, "s-1") == record
        assert await _settle_entries(storage) == []

    async def test_chain_moves_take_a_write_unit(self, storage: Storage) -> None:
        client_id, _ = await _user(storage)
        record = await _finished_send(storage, client_id, "s-1", T0)
        async with storage.read() as unit:
            with pytest.raises(RuntimeError):
                await unit.sends.track(record, record.tracked(ChainStatus.SUCCESS, T0))
            with pytest.raises(RuntimeError):
                await unit.sends.checked_chain([(client_id, "s-1")], T0)
        assert await autocommit(storage).sends.get(client_id, "s-1") == record

    # -- the transfer lifecycle (`track`, `by_hash`; docs/transfers.md) ------------------
    async def test_track_moves_a_followed_send_through_stuck_and_a_replacement(
        self, storage: Storage
    ) -> None:
        client_id, _ = await _user(storage)
        record = await _finished_send(storage, client_id, "s-1", T0)
        at = T0 + timedelta(seconds=40)
        stuck = record.tracked(ChainStatus.STUCK, at)
        async with storage.write() as unit:
            assert await unit.sends.track(record, stuck, entry=_settle_entry(record, "stuck"))
        db = autocommit(storage)
        assert await db.sends.get(client_id, "s-1") == stuck
        assert [r.request_id for r in await db.sends.following(10)] == ["s-1"]
        assert await db.sends.count_following() == 1
        # a bump replaces the transaction: the record keeps one hash, every hash finds it
        bumped = stuck.tracked(ChainStatus.STUCK, at, raw_tx=b"raw-bump", tx_hash="0xbump")
        assert await db.sends.track(stuck, bumped)
        assert await db.sends.get(client_id, "s-1") == bumped
        assert await db.sends.by_hash(client_id, "0xs-1") == bumped
        assert await db.sends.by_hash(client_id, "0xbump") == bumped
        assert await db.sends.by_hash(new_id(), "0xbump") is None  # another client's: none
        assert await db.sends.by_hash(client_id, "0xnone") is None
        # the loser of a race (it read the record before the bump) writes nothing
        assert not await db.sends.track(stuck, stuck.tracked(ChainStatus.DROPPED, at))
        final = bumped.tracked(ChainStatus.SUCCESS, at + timedelta(seconds=5))
        assert await db.sends.track(bumped, final)
        stored = await db.sends.get(client_id, "s-1")
        assert stored.chain_final_at == at + timedelta(seconds=5)
        assert stored.chain_status is ChainStatus.SUCCESS
        assert await db.sends.following(10) == []
        assert not await db.sends.track(final, final)  # final once: never moved again
        entries = await db.audit.newest(10)
        assert [e.detail for e in entries if e.action == "send.settle"] == ["pending -> stuck"]

    async def test_by_hash_finds_a_never_replaced_send_by_its_hash(self, storage: Storage) -> None:
        client_id, _ = await _user(storage)
        record = await _finished_send(storage, client_id, "s-1", T0)
        assert await autocommit(storage).sends.by_hash(client_id, "0xs-1") == record

    async def test_concurrent_replacements_of_one_send_store_one(self, storage: Storage) -> None:
        client_id, _ = await _user(storage)
        record = await _finished_send(storage, client_id, "s-1", T0)

        async def replace(n: int) -> bool:
            new = record.tracked(ChainStatus.PENDING, T0, raw_tx=b"r%d" % n, tx_hash=f"0x{n}")
            async with storage.write() as unit:
                return await unit.sends.track(record, new, entry=_settle_entry(record, str(n), n))

        won = await asyncio.gather(*(replace(n) for n in range(6)))
        assert sum(won) == 1
        stored = await autocommit(storage).sends.get(client_id, "s-1")
        assert stored.tx_hash == f"0x{won.index(True)}"
        assert len(await _settle_entries(storage)) == 1
