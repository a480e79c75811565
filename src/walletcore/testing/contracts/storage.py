"""`StorageContract`: what every `walletcore.ports.Storage` promises, as pytest tests.

    from walletcore.testing.contracts import StorageContract

    class TestMyStorage(StorageContract):
        @pytest.fixture
        async def storage(self):
            store = MyStorage(...)          # empty, migrated, started
            yield store
            await store.aclose()

The `storage` fixture may live in the class, the module or a conftest. Needs pytest and
pytest-asyncio (the tests are marked `asyncio`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
import pytest_asyncio

from walletcore.domain.assets import Chain, FeePayer, Fiat
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, User
from walletcore.domain.errors import (
    IdempotencyConflict,
    IdempotencyKeyReused,
    InvalidRequest,
    InvalidSendTransition,
)
from walletcore.domain.ids import new_id
from walletcore.domain.money import format_amount, truncate
from walletcore.domain.sends import SEND_LEASE, SendState
from walletcore.domain.trade import Figures, Fill, FixedLeg, Quote, Side, Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports.storage import Storage
from walletcore.testing.contracts.auth_failures import AuthFailureStorageContract
from walletcore.testing.contracts.deposits import DepositEventStorageContract
from walletcore.testing.contracts.desk import DeskPauseStorageContract
from walletcore.testing.contracts.jobs import JobStorageContract
from walletcore.testing.contracts.policies import PolicyStorageContract
from walletcore.testing.contracts.settlements import SettlementStorageContract
from walletcore.testing.contracts.webhooks import WebhookStorageContract
from walletcore.testing.storage import autocommit

T0 = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
RID = "req-7f3a"


def client(client_id: str | None = None, **changes: Any) -> ApiClient:
    base = ApiClient(
        client_id=client_id or new_id(),
        name="Acme Pay",
        key_hash="ab" * 32,
        enabled_assets=(1, 2, 21, 6),
        fee_payer=FeePayer.USER,
        asset_fee_payers={21: FeePayer.PLATFORM},
        disabled=False,
        key_generation=3,
        created_at=T0,
    )
    return dataclasses.replace(base, **changes)


def user_and_wallet(client_id: str, **wallet: Any) -> tuple[User, WalletRecord]:
    uid = new_id()
    record = WalletRecord(client_id, WalletOwner.USER, uid, b"", {}, T0)
    return User(uid, client_id, T0), dataclasses.replace(record, **wallet)


def trade(
    client_id: str,
    user_id: str,
    *,
    created_at: datetime = T0,
    side: Side = Side.SELL,
    status: TradeStatus = TradeStatus.OPEN,
    crypto: Decimal = Decimal("1.5"),
    ttl: timedelta = timedelta(seconds=60),
    trade_id: str | None = None,
) -> Trade:
    price = Decimal("3000.12345678")
    return Trade(
        trade_id=trade_id or new_id(),
        client_id=client_id,
        user_id=user_id,
        side=side,
        asset_id=2,
        symbol="ETH",
        fiat=Fiat.EUR,
        fixed_leg=FixedLeg.CRYPTO,
        quote=Quote(crypto, crypto * price, price, created_at + ttl),
        status=status,
        created_at=created_at,
    )


def entry(action: str, request_id: str = "req-a", **changes: Any) -> AuditEntry:
    return dataclasses.replace(AuditEntry(T0, None, action, request_id, "ok"), **changes)


class StorageContract(
    JobStorageContract,
    AuthFailureStorageContract,
    DepositEventStorageContract,
    WebhookStorageContract,
    SettlementStorageContract,
    DeskPauseStorageContract,
    PolicyStorageContract,
):
    """The contract; a subclass brings the `storage` fixture: an empty, ready Storage."""

    pytestmark = pytest.mark.asyncio

    @pytest_asyncio.fixture
    async def client_id(self, storage: Storage) -> str:
        c = client()
        await autocommit(storage).clients.add(c)
        return c.client_id

    @pytest_asyncio.fixture
    async def user_id(self, storage: Storage, client_id: str) -> str:
        user, wallet = user_and_wallet(client_id)
        assert await autocommit(storage).wallets.add_user(user, wallet)
        return user.user_id

    # -- units of work -----------------------------------------------------------------
    async def test_a_write_unit_commits_when_it_ends_cleanly(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        c, t = client(), trade(client_id, user_id)
        async with storage.write() as unit:
            await unit.clients.add(c)
            await unit.trades.add(t)
            await unit.audit.append(entry("trade.sell"))
            # the unit reads its own writes
            assert await unit.clients.get(c.client_id) == c
            assert await unit.trades.get(client_id, user_id, t.trade_id) == t
            assert [e.action for e in await unit.audit.newest()] == ["trade.sell"]
        async with storage.read() as unit:
            assert await unit.clients.get(c.client_id) == c
            assert await unit.trades.get(client_id, user_id, t.trade_id) == t
            assert [e.action for e in await unit.audit.newest()] == ["trade.sell"]

    async def test_a_write_unit_that_raises_writes_nothing(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        t = trade(client_id, user_id)
        await autocommit(storage).trades.add(t)
        c = client()
        with pytest.raises(LookupError):
            async with storage.write() as unit:
                await unit.clients.add(c)
                assert await unit.trades.swap(TradeStatus.OPEN, t.cancel(T0))
                await unit.audit.append(entry("trade.cancel"))
                raise LookupError("the use case refused after writing")
        db = autocommit(storage)
        assert await db.clients.get(c.client_id) is None
        assert await db.trades.get(client_id, user_id, t.trade_id) == t
        assert await db.audit.newest() == []

    async def test_a_read_unit_cannot_write(self, storage: Storage, client_id: str) -> None:
        c = client()
        with pytest.raises(RuntimeError):
            async with storage.read() as unit:
                await unit.clients.add(c)
        with pytest.raises(RuntimeError):
            async with storage.read() as unit:
                await unit.audit.append(entry("refused"))
        db = autocommit(storage)
        assert await db.clients.get(c.client_id) is None
        assert await db.audit.newest() == []

    async def test_a_unit_sees_no_changes_of_another_before_they_commit(
        self, storage: Storage
    ) -> None:
        c = client()
        async with storage.write() as unit:
            await unit.clients.add(c)
            async with storage.read() as other:
                assert await other.clients.get(c.client_id) is None
        assert await autocommit(storage).clients.get(c.client_id) == c

    async def test_concurrent_write_units_compare_and_set_one_winner(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        t = trade(client_id, user_id)
        await autocommit(storage).trades.add(t)

        async def approve(n: int) -> bool:
            executing = t.start_approval(T0 + timedelta(seconds=n))
            async with storage.write() as unit:
                stored = await unit.trades.get(client_id, user_id, t.trade_id)
                assert stored is not None
                await asyncio.sleep(0)  # let the others read it open too
                if not await unit.trades.swap(TradeStatus.OPEN, executing):
                    return False
                await unit.audit.append(entry("trade.approve", target=t.trade_id))
                return True

        won = await asyncio.gather(*(approve(n) for n in range(8)))
        assert sum(won) == 1
        assert [e.action for e in await autocommit(storage).audit.newest()] == ["trade.approve"]

    # -- api clients -------------------------------------------------------------------
    async def test_client_round_trips_every_field(self, storage: Storage) -> None:
        db = autocommit(storage)
        c = client(disabled=True, fee_payer=FeePayer.PLATFORM, asset_fee_payers={1: FeePayer.USER})
        await db.clients.add(c)
        got = await db.clients.get(c.client_id)
        assert got == c
        assert got.created_at is not None and got.created_at.tzinfo is not None
        assert got.asset_fee_payers == {1: FeePayer.USER}
        assert isinstance(got.enabled_assets, tuple)

    async def test_unknown_client_is_none(self, storage: Storage) -> None:
        assert await autocommit(storage).clients.get(new_id()) is None

    async def test_adding_a_client_twice_is_refused(self, storage: Storage) -> None:
        db = autocommit(storage)
        c = client()
        await db.clients.add(c)
        with pytest.raises(InvalidRequest):
            await db.clients.add(dataclasses.replace(c, name="other"))
        assert await db.clients.get(c.client_id) == c

    async def test_all_clients(self, storage: Storage) -> None:
        db = autocommit(storage)
        a, b = client(), client(created_at=None)
        await db.clients.add(a)
        await db.clients.add(b)
        assert {c.client_id: c for c in await db.clients.all()} == {
            a.client_id: a,
            b.client_id: b,
        }

    async def test_update_client_replaces_it(self, storage: Storage) -> None:
        db = autocommit(storage)
        c = client()
        await db.clients.add(c)
        rotated = dataclasses.replace(
            c, key_hash="cd" * 32, key_generation=4, enabled_assets=(2,), asset_fee_payers={}
        )
        await db.clients.update(rotated)
        assert await db.clients.get(c.client_id) == rotated

    async def test_update_client_changes_its_assets_and_fee_payers_only(
        self, storage: Storage
    ) -> None:
        """`walletcore clients update` / `enable`: the other clients stay as they were."""
        db = autocommit(storage)
        c, other = client(disabled=True), client()
        await db.clients.add(c)
        await db.clients.add(other)
        changed = dataclasses.replace(
            c,
            name="Acme Pay EU",
            enabled_assets=(1, 6, 61),
            fee_payer=FeePayer.PLATFORM,
            asset_fee_payers={1: FeePayer.USER, 61: FeePayer.USER},
            disabled=False,
        )
        await db.clients.update(changed)
        assert await db.clients.get(c.client_id) == changed
        assert await db.clients.get(other.client_id) == other

    # -- users and wallets -----------------------------------------------------------------
    async def test_user_and_wallet_are_stored_together(
        self, storage: Storage, client_id: str
    ) -> None:
        db = autocommit(storage)
        user, wallet = user_and_wallet(
            client_id,
            sealed=b"\x00sealed\xff" * 10,
            addresses={Chain.ETHEREUM: "0xabc", Chain.BITCOIN: "bc1q"},
        )
        assert await db.wallets.add_user(user, wallet)
        assert await db.wallets.get_user(client_id, user.user_id) == user
        assert await db.wallets.get(client_id, WalletOwner.USER, user.user_id) == wallet
        assert await db.wallets.get(client_id, WalletOwner.PLATFORM, None) is None

    async def test_users_of_another_client_are_invisible(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        other = client()
        await db.clients.add(other)
        assert await db.wallets.get_user(other.client_id, user_id) is None
        assert await db.wallets.get(other.client_id, WalletOwner.USER, user_id) is None
        assert await db.wallets.get_user(client_id, new_id()) is None

    async def test_one_platform_wallet_per_client(self, storage: Storage, client_id: str) -> None:
        db = autocommit(storage)
        wallet = WalletRecord(client_id, WalletOwner.PLATFORM, None, b"k", {Chain.TRON: "T1"}, T0)
        assert await db.wallets.add(wallet) is True
        assert await db.wallets.add(dataclasses.replace(wallet, sealed=b"other")) is False
        assert await db.wallets.get(client_id, WalletOwner.PLATFORM, None) == wallet
        other = client()
        await db.clients.add(other)
        assert await db.wallets.get(other.client_id, WalletOwner.PLATFORM, None) is None
        theirs = dataclasses.replace(wallet, client_id=other.client_id)
        assert await db.wallets.add(theirs) is True

    async def test_add_refuses_a_second_user_wallet(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        existing = await db.wallets.get(client_id, WalletOwner.USER, user_id)
        assert existing is not None
        assert await db.wallets.add(dataclasses.replace(existing, sealed=b"second")) is False
        assert await db.wallets.get(client_id, WalletOwner.USER, user_id) == existing

    async def test_update_replaces_seal_and_addresses(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        existing = await db.wallets.get(client_id, WalletOwner.USER, user_id)
        assert existing is not None
        extended = dataclasses.replace(
            existing,
            sealed=b"resealed",
            addresses={Chain.SOLANA: "So1", Chain.POLYGON: "0xp"},
            updated_at=T0 + timedelta(hours=1),
        )
        await db.wallets.update(extended)
        assert await db.wallets.get(client_id, WalletOwner.USER, user_id) == extended
        platform = WalletRecord(client_id, WalletOwner.PLATFORM, None, b"p", {}, T0)
        await db.wallets.add(platform)
        await db.wallets.update(dataclasses.replace(platform, sealed=b"p2"))
        stored = await db.wallets.get(client_id, WalletOwner.PLATFORM, None)
        assert stored is not None and stored.sealed == b"p2"
        assert await db.wallets.get(client_id, WalletOwner.USER, user_id) == extended

    async def test_a_user_is_created_once_per_request_id_of_a_client(
        self, storage: Storage, client_id: str
    ) -> None:
        db = autocommit(storage)
        first, first_wallet = user_and_wallet(client_id)
        assert await db.wallets.created_by_request(client_id, "create-1") is None
        assert await db.wallets.add_user(first, first_wallet, request_id="create-1")
        assert await db.wallets.created_by_request(client_id, "create-1") == first.user_id

        second, second_wallet = user_and_wallet(client_id)
        assert not await db.wallets.add_user(second, second_wallet, request_id="create-1")
        assert await db.wallets.get_user(client_id, second.user_id) is None
        assert await db.wallets.get(client_id, WalletOwner.USER, second.user_id) is None
        assert await db.wallets.created_by_request(client_id, "create-1") == first.user_id
        # Another request id, none, or another client: a new user each.
        assert await db.wallets.add_user(*user_and_wallet(client_id), request_id="create-2")
        assert await db.wallets.add_user(*user_and_wallet(client_id))
        assert await db.wallets.add_user(*user_and_wallet(client_id))
        other = client()
        await db.clients.add(other)
        theirs, theirs_wallet = user_and_wallet(other.client_id)
        assert await db.wallets.add_user(theirs, theirs_wallet, request_id="create-1")
        assert await db.wallets.created_by_request(other.client_id, "create-1") == theirs.user_id
        assert await db.wallets.created_by_request(client_id, "create-1") == first.user_id

    # -- trades -------------------------------------------------------------------------
    async def test_trade_round_trips_every_field(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        t = dataclasses.replace(
            trade(client_id, user_id),
            status=TradeStatus.FAILED,
            approved_at=T0 + timedelta(seconds=5),
            completed_at=T0 + timedelta(seconds=6),
            approved=Figures(Decimal("1.5"), Decimal("4500.1"), Decimal("3000.0666")),
            executed=Figures(None, Decimal("4500.2"), Decimal("3000.1")),
            reference="VEN-123",
            failure_reason="insufficient liquidity",
        )
        await db.trades.add(t)
        got = await db.trades.get(client_id, user_id, t.trade_id)
        assert got == t
        for when in (got.created_at, got.approved_at, got.completed_at, got.quote.expires_at):
            assert when is not None and when.utcoffset() == timedelta(0)

    async def test_open_trade_round_trips_without_optional_fields(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        t = dataclasses.replace(
            trade(client_id, user_id),
            fixed_leg=FixedLeg.FIAT,
            quote=Quote(None, Decimal("100.00"), Decimal("2.5"), T0 + timedelta(seconds=60)),
        )
        await db.trades.add(t)
        got = await db.trades.get(client_id, user_id, t.trade_id)
        assert got == t
        assert got.approved is None and got.executed is None
        assert got.reference is None and got.failure_reason is None

    async def test_another_users_or_clients_trade_is_none(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        t = trade(client_id, user_id)
        await db.trades.add(t)
        neighbour, wallet = user_and_wallet(client_id)
        await db.wallets.add_user(neighbour, wallet)
        other = client()
        await db.clients.add(other)
        assert await db.trades.get(client_id, neighbour.user_id, t.trade_id) is None
        assert await db.trades.get(other.client_id, user_id, t.trade_id) is None
        assert await db.trades.get(client_id, user_id, new_id()) is None
        assert await db.trades.get(client_id, user_id, t.trade_id) == t

    async def test_page_is_newest_first_and_capped(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        made = [trade(client_id, user_id, created_at=T0 + timedelta(seconds=i)) for i in range(12)]
        for t in [*reversed(made[6:]), *made[:6]]:
            await db.trades.add(t)
        listed = await db.trades.page(client_id, user_id, side=None, status=None, limit=10)
        assert [t.trade_id for t in listed] == [t.trade_id for t in reversed(made)][:10]
        assert listed[0] == made[-1]
        three = await db.trades.page(client_id, user_id, side=None, status=None, limit=3)
        assert [t.trade_id for t in three] == [t.trade_id for t in listed[:3]]

    async def test_page_breaks_creation_ties_by_trade_id(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        for i in (3, 1, 2):
            await db.trades.add(trade(client_id, user_id, trade_id=f"{i:024x}"))
        listed = await db.trades.page(client_id, user_id, side=None, status=None, limit=10)
        assert [t.trade_id for t in listed] == [f"{i:024x}" for i in (3, 2, 1)]

    async def test_page_filters_by_side_and_status(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        kinds = [
            (Side.SELL, TradeStatus.OPEN),
            (Side.BUY, TradeStatus.OPEN),
            (Side.SELL, TradeStatus.COMPLETED),
            (Side.BUY, TradeStatus.CANCELLED),
            (Side.BUY, TradeStatus.COMPLETED),
        ]
        made = [
            trade(client_id, user_id, side=s, status=st, created_at=T0 + timedelta(seconds=i))
            for i, (s, st) in enumerate(kinds)
        ]
        for t in made:
            await db.trades.add(t)

        async def ids(side: Side | None, status: TradeStatus | None) -> list[str]:
            found = await db.trades.page(client_id, user_id, side=side, status=status, limit=10)
            return [t.trade_id for t in found]

        assert await ids(Side.BUY, None) == [made[4].trade_id, made[3].trade_id, made[1].trade_id]
        assert await ids(Side.SELL, None) == [made[2].trade_id, made[0].trade_id]
        assert await ids(None, TradeStatus.COMPLETED) == [made[4].trade_id, made[2].trade_id]
        assert await ids(Side.SELL, TradeStatus.OPEN) == [made[0].trade_id]
        assert await ids(Side.SELL, TradeStatus.EXPIRED) == []

    async def test_page_shows_only_the_users_own_trades(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        neighbour, wallet = user_and_wallet(client_id)
        await db.wallets.add_user(neighbour, wallet)
        mine = trade(client_id, user_id)
        await db.trades.add(mine)
        await db.trades.add(trade(client_id, neighbour.user_id))
        page = await db.trades.page(client_id, user_id, side=None, status=None, limit=10)
        assert page == [mine]
        other = client()
        await db.clients.add(other)
        theirs = await db.trades.page(other.client_id, user_id, side=None, status=None, limit=10)
        assert theirs == []
        bought = await db.trades.page(
            client_id, neighbour.user_id, side=Side.BUY, status=None, limit=10
        )
        assert bought == []

    async def test_swap_is_a_compare_and_set(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        t = trade(client_id, user_id)
        await db.trades.add(t)
        executing = t.start_approval(T0 + timedelta(seconds=1))
        assert await db.trades.swap(TradeStatus.OPEN, executing) is True
        assert await db.trades.get(client_id, user_id, t.trade_id) == executing
        # A second approval started from the same open trade loses.
        assert await db.trades.swap(TradeStatus.OPEN, t.cancel(T0)) is False
        assert await db.trades.get(client_id, user_id, t.trade_id) == executing
        # Settlement stores every figure.
        fill = Fill(Figures(Decimal("1.5"), Decimal("4500.5"), Decimal("3000.3333")), "REF-1")
        done = executing.settle(fill, T0 + timedelta(seconds=2))
        assert await db.trades.swap(TradeStatus.EXECUTING, done) is True
        assert await db.trades.get(client_id, user_id, t.trade_id) == done

    async def test_a_swap_writes_only_what_a_move_changes(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        t = trade(client_id, user_id)
        await db.trades.add(t)
        executing = t.start_approval(T0 + timedelta(seconds=1))
        # A move whose quote, side and creation instant disagree with the stored trade:
        # the store keeps the quote's own fields and takes the move's.
        forged = dataclasses.replace(
            executing,
            side=Side.BUY,
            symbol="BTC",
            quote=dataclasses.replace(t.quote, price=Decimal(1), crypto_amount=Decimal(9)),
            created_at=T0 + timedelta(days=1),
        )
        assert await db.trades.swap(TradeStatus.OPEN, forged) is True
        assert await db.trades.get(client_id, user_id, t.trade_id) == executing
        fill = Fill(Figures(Decimal("1.5"), Decimal("4500.5"), Decimal("3000.3333")), "REF-1")
        done = executing.settle(fill, T0 + timedelta(seconds=2))
        forged = dataclasses.replace(done, fiat=Fiat.USD, asset_id=1)
        assert await db.trades.swap(TradeStatus.EXECUTING, forged) is True
        assert await db.trades.get(client_id, user_id, t.trade_id) == done

    async def test_swap_of_an_unknown_trade_is_false(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        t = trade(client_id, user_id)
        assert await db.trades.swap(TradeStatus.OPEN, t.cancel(T0)) is False
        assert await db.trades.get(client_id, user_id, t.trade_id) is None

    async def test_lapsed_finds_only_this_users_lapsed_open_quotes(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        neighbour, wallet = user_and_wallet(client_id)
        await db.wallets.add_user(neighbour, wallet)
        lapsed = trade(client_id, user_id, ttl=timedelta(seconds=10))
        exactly = trade(client_id, user_id, ttl=timedelta(seconds=30))  # lapses at `now`
        live = trade(client_id, user_id, ttl=timedelta(seconds=31))
        approved = dataclasses.replace(
            trade(client_id, user_id, ttl=timedelta(seconds=10)), status=TradeStatus.APPROVED
        )
        theirs = trade(client_id, neighbour.user_id, ttl=timedelta(seconds=10))
        for t in (lapsed, exactly, live, approved, theirs):
            await db.trades.add(t)
        now = T0 + timedelta(seconds=30)

        found = await db.trades.lapsed(client_id, user_id, now)
        assert sorted(t.trade_id for t in found) == sorted([lapsed.trade_id, exactly.trade_id])
        assert {t.trade_id: t for t in found} == {
            lapsed.trade_id: lapsed,
            exactly.trade_id: exactly,
        }
        for t in found:  # what a use case does with them: expire each, compare-and-set
            assert await db.trades.swap(TradeStatus.OPEN, t.expire(now))
            stored = await db.trades.get(client_id, user_id, t.trade_id)
            assert stored == t.expire(now) and stored.completed_at == t.quote.expires_at
        assert await db.trades.lapsed(client_id, user_id, now) == []
        assert await db.trades.get(client_id, user_id, live.trade_id) == live
        assert await db.trades.get(client_id, neighbour.user_id, theirs.trade_id) == theirs

    # -- money and time -------------------------------------------------------------------
    @pytest.mark.parametrize(
        "amount",
        [
            Decimal("123456789.123456789012345678"),
            Decimal("0.000000000000000001"),
            Decimal("999999999999999999999999999999.999999999999999999"),
            Decimal("100.00"),
            Decimal(42),
        ],
    )
    async def test_amounts_round_trip_exactly_to_18_places(
        self, storage: Storage, client_id: str, user_id: str, amount: Decimal
    ) -> None:
        db = autocommit(storage)
        t = dataclasses.replace(
            trade(client_id, user_id),
            quote=Quote(amount, amount, amount, T0 + timedelta(seconds=60)),
            approved=Figures(amount, amount, amount),
            executed=Figures(amount, amount, amount),
        )
        await db.trades.add(t)
        got = await db.trades.get(client_id, user_id, t.trade_id)
        for value in (got.quote.crypto_amount, got.quote.fiat_amount, got.quote.price):
            assert isinstance(value, Decimal) and value == amount
        assert got.figures == Figures(amount, amount, amount)

    async def test_more_than_18_places_are_cut_never_rounded_up(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        """A derived fiat amount can carry more places (18-place crypto x 8-place price):
        a store may keep it whole or cut it at 18 places, and the wire value is the same."""
        db = autocommit(storage)
        long = Decimal("1.999999999999999999999999")  # 24 places, all nines
        t = dataclasses.replace(trade(client_id, user_id), approved=Figures(long, long, long))
        await db.trades.add(t)
        got = await db.trades.get(client_id, user_id, t.trade_id)
        assert got.approved is not None
        assert got.approved.fiat_amount in (long, truncate(long, 18))
        assert format_amount(got.approved.price) == format_amount(long) == "1.999999"

    async def test_times_come_back_as_the_same_aware_instant(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        local = T0.astimezone(timezone(timedelta(hours=5, minutes=30)))
        t = trade(client_id, user_id, created_at=local.replace(microsecond=123456))
        await db.trades.add(t)
        got = await db.trades.get(client_id, user_id, t.trade_id)
        assert got.created_at == t.created_at and got.created_at.tzinfo is not None
        assert got.created_at.microsecond == 123456
        # kept as given, or as UTC: the same instant either way
        assert got.created_at.utcoffset() in (timedelta(0), t.created_at.utcoffset())

    # -- sends: the idempotency record ------------------------------------------------------
    async def test_begin_creates_a_leased_started_record(
        self, storage: Storage, client_id: str
    ) -> None:
        db = autocommit(storage)
        record = await db.sends.begin(client_id, RID, "fp-1", T0)
        assert record.state is SendState.STARTED
        assert (record.client_id, record.request_id, record.fingerprint) == (client_id, RID, "fp-1")
        assert record.attempt == 1 and record.locked_until == T0 + SEND_LEASE
        assert record.raw_tx is None and record.tx_hash is None and record.result is None
        assert await db.sends.get(client_id, RID) == record
        assert await db.sends.get(client_id, "another") is None

    async def test_a_second_request_while_the_first_works_is_a_409(
        self, storage: Storage, client_id: str
    ) -> None:
        db = autocommit(storage)
        first = await db.sends.begin(client_id, RID, "fp-1", T0)
        with pytest.raises(IdempotencyConflict) as caught:
            await db.sends.begin(client_id, RID, "fp-1", T0 + SEND_LEASE - timedelta(seconds=1))
        assert caught.value.status == 409
        assert caught.value.message == "A request with this X-Request-Id is still in progress"
        assert await db.sends.get(client_id, RID) == first

    async def test_a_different_request_under_a_used_id_is_a_422(
        self, storage: Storage, client_id: str
    ) -> None:
        db = autocommit(storage)
        first = await db.sends.begin(client_id, RID, "fp-1", T0)
        with pytest.raises(IdempotencyKeyReused) as caught:
            await db.sends.begin(client_id, RID, "fp-2", T0)
        assert caught.value.status == 422
        assert caught.value.message == "X-Request-Id was already used with a different request"
        assert await db.sends.advance(first, first.finish({"txHash": "0x1"}, T0))
        with pytest.raises(IdempotencyKeyReused):
            await db.sends.begin(client_id, RID, "fp-2", T0 + timedelta(days=30))

    async def test_a_send_moves_through_its_recovery_points(
        self, storage: Storage, client_id: str
    ) -> None:
        db = autocommit(storage)
        started = await db.sends.begin(client_id, RID, "fp-1", T0)
        signed = started.signed(b"\x02\xf8signed-tx\x00", "0xhash", T0 + timedelta(seconds=1))
        assert await db.sends.advance(started, signed) is True
        assert await db.sends.get(client_id, RID) == signed
        sent = signed.broadcast(T0 + timedelta(seconds=2))
        assert await db.sends.advance(signed, sent) is True
        result = {
            "txHash": "0xhash",
            "amount": "1.5",
            "nested": {"fee": "0.0001", "ok": True},
            "é": [1, 2],
        }
        finished = sent.finish(result, T0 + timedelta(seconds=3))
        assert await db.sends.advance(sent, finished) is True
        stored = await db.sends.get(client_id, RID)
        assert stored == finished
        assert stored.raw_tx == b"\x02\xf8signed-tx\x00"
        assert stored.result == result and stored.locked_until is None

    async def test_a_finished_send_is_replayed(self, storage: Storage, client_id: str) -> None:
        db = autocommit(storage)
        started = await db.sends.begin(client_id, RID, "fp-1", T0)
        finished = started.finish({"status": 200, "body": {"txHash": "0x9"}}, T0)
        assert await db.sends.advance(started, finished)
        again = await db.sends.begin(client_id, RID, "fp-1", T0 + timedelta(seconds=1))
        assert again == finished and again.is_finished
        assert again.result == {"status": 200, "body": {"txHash": "0x9"}}

    async def test_a_lapsed_lease_is_taken_over_at_the_last_recovery_point(
        self, storage: Storage, client_id: str
    ) -> None:
        db = autocommit(storage)
        started = await db.sends.begin(client_id, RID, "fp-1", T0)
        signed = started.signed(b"raw", "0xh", T0 + timedelta(seconds=1))
        assert await db.sends.advance(started, signed)
        # The first process dies here. After its lease, a retry resumes at `signed`.
        later = T0 + timedelta(seconds=1) + SEND_LEASE
        resumed = await db.sends.begin(client_id, RID, "fp-1", later)
        assert resumed.state is SendState.SIGNED and resumed.attempt == 2
        assert resumed.raw_tx == b"raw" and resumed.tx_hash == "0xh"
        assert resumed.locked_until == later + SEND_LEASE
        # The first process wakes up: its attempt is stale, it cannot move the record.
        assert await db.sends.advance(signed, signed.broadcast(later)) is False
        assert await db.sends.advance(resumed, resumed.broadcast(later)) is True
        stored = await db.sends.get(client_id, RID)
        assert stored.state is SendState.BROADCAST and stored.attempt == 2

    async def test_a_custom_lease_is_honoured(self, storage: Storage, client_id: str) -> None:
        db = autocommit(storage)
        short = timedelta(seconds=5)
        first = await db.sends.begin(client_id, RID, "fp-1", T0, lease=short)
        assert first.locked_until == T0 + short
        with pytest.raises(IdempotencyConflict):
            await db.sends.begin(client_id, RID, "fp-1", T0 + timedelta(seconds=4), lease=short)
        taken = await db.sends.begin(client_id, RID, "fp-1", T0 + short, lease=short)
        assert taken.attempt == 2

    async def test_advance_from_a_state_no_longer_stored_is_false(
        self, storage: Storage, client_id: str
    ) -> None:
        db = autocommit(storage)
        started = await db.sends.begin(client_id, RID, "fp-1", T0)
        signed = started.signed(b"raw", "0xh", T0)
        assert await db.sends.advance(started, signed)
        assert await db.sends.advance(started, started.signed(b"other", "0xo", T0)) is False
        assert await db.sends.get(client_id, RID) == signed

    async def test_advance_refuses_another_record(self, storage: Storage, client_id: str) -> None:
        db = autocommit(storage)
        started = await db.sends.begin(client_id, RID, "fp-1", T0)
        other = dataclasses.replace(started.signed(b"raw", "0xh", T0), request_id="other")
        with pytest.raises(InvalidSendTransition):
            await db.sends.advance(started, other)
        assert await db.sends.get(client_id, RID) == started

    async def test_a_released_send_resumes_at_once(self, storage: Storage, client_id: str) -> None:
        db = autocommit(storage)
        started = await db.sends.begin(client_id, RID, "fp-1", T0)
        assert await db.sends.advance(started, started.release(T0 + timedelta(seconds=1)))
        again = await db.sends.begin(client_id, RID, "fp-1", T0 + timedelta(seconds=2))
        assert again.state is SendState.STARTED and again.attempt == 2

    async def test_request_ids_are_per_client(self, storage: Storage, client_id: str) -> None:
        db = autocommit(storage)
        other = client()
        await db.clients.add(other)
        mine = await db.sends.begin(client_id, RID, "fp-1", T0)
        theirs = await db.sends.begin(other.client_id, RID, "fp-other", T0)
        assert mine.attempt == theirs.attempt == 1
        assert await db.sends.get(other.client_id, RID) == theirs
        assert await db.sends.get(client_id, RID) == mine

    async def test_an_overlong_request_id_is_a_400(self, storage: Storage, client_id: str) -> None:
        db = autocommit(storage)
        with pytest.raises(InvalidRequest):
            await db.sends.begin(client_id, "x" * 256, "fp-1", T0)
        record = await db.sends.begin(client_id, "x" * 255, "fp-1", T0)
        assert await db.sends.get(client_id, "x" * 255) == record

    # -- the audit log ----------------------------------------------------------------------
    async def test_audit_lists_newest_first(self, storage: Storage, client_id: str) -> None:
        db = autocommit(storage)
        entries = [
            AuditEntry(T0 + timedelta(seconds=i), client_id, f"trade.sell.{i}", f"req-{i}", "ok")
            for i in range(5)
        ]
        full = AuditEntry(
            at=T0 + timedelta(seconds=9),
            client_id=None,
            action="auth",
            request_id="req-x",
            outcome="401",
            user_id=new_id(),
            target="t",
            detail="Invalid credentials",
        )
        for e in [*entries, full]:
            await db.audit.append(e)
        assert await db.audit.newest() == [full, *reversed(entries)]
        assert await db.audit.newest(limit=2) == [full, entries[-1]]

    async def test_the_audit_of_a_fresh_store_is_empty(self, storage: Storage) -> None:
        assert await autocommit(storage).audit.newest() == []

    async def test_a_change_and_its_entry_commit_together(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        """What every use case does: the change, then its entry, in one write unit."""
        t = trade(client_id, user_id)
        async with storage.write() as unit:
            await unit.trades.add(t)
            await unit.audit.append(entry("trade.sell", target=t.trade_id))
        executing = t.start_approval(T0 + timedelta(seconds=1))
        async with storage.write() as unit:
            assert await unit.trades.swap(TradeStatus.OPEN, executing)
            await unit.audit.append(entry("trade.approve"))
            await unit.audit.append(entry("trade.note"))
        async with storage.write() as unit:
            started = await unit.sends.begin(client_id, RID, "fp-1", T0)
            await unit.audit.append(entry("send.begin"))
        async with storage.write() as unit:
            assert await unit.sends.advance(started, started.signed(b"raw", "0xh", T0))
            await unit.audit.append(entry("wallet.send", target="0xh"))
        newest = await autocommit(storage).audit.newest(limit=10)
        assert [e.action for e in reversed(newest)] == [
            "trade.sell",
            "trade.approve",
            "trade.note",
            "send.begin",
            "wallet.send",
        ]
        assert newest[0] == entry("wallet.send", target="0xh")  # every field round-trips

    async def test_an_entry_that_cannot_be_written_fails_its_change(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        """One transaction: the change and its entries commit together or not at all."""
        db = autocommit(storage)
        t = trade(client_id, user_id)
        await db.trades.add(t)
        bad = AuditEntry(T0, None, None, "req-a", "ok")  # type: ignore[arg-type]  # NOT NULL
        with pytest.raises(Exception):  # noqa: B017 - each store refuses it its own way
            async with storage.write() as unit:
                assert await unit.trades.swap(TradeStatus.OPEN, t.cancel(T0))
                await unit.audit.append(entry("first"))
                await unit.audit.append(bad)
        assert await db.trades.get(client_id, user_id, t.trade_id) == t
        c = client()
        with pytest.raises(Exception):  # noqa: B017
            async with storage.write() as unit:
                await unit.clients.add(c)
                await unit.audit.append(bad)
        assert await db.clients.get(c.client_id) is None
        assert await db.audit.newest() == []
        # The same change with a good entry goes through.
        async with storage.write() as unit:
            assert await unit.trades.swap(TradeStatus.OPEN, t.cancel(T0))
            await unit.audit.append(entry("trade.cancel"))
        assert [e.action for e in await db.audit.newest()] == ["trade.cancel"]

    async def test_a_swap_carries_its_entry_only_when_it_applies(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        """`swap(..., entry=e)`: the winner stores the trade and `e` together; a loser
        writes neither; an entry no store could keep fails the swap's unit."""
        db = autocommit(storage)
        t = trade(client_id, user_id)
        await db.trades.add(t)
        bad = AuditEntry(T0, None, None, "req-a", "ok")  # type: ignore[arg-type]  # NOT NULL
        with pytest.raises(Exception):  # noqa: B017 - each store refuses it its own way
            async with storage.write() as unit:
                await unit.trades.swap(TradeStatus.OPEN, t.cancel(T0), entry=bad)
        assert await db.trades.get(client_id, user_id, t.trade_id) == t

        async def approve(n: int) -> bool:
            executing = t.start_approval(T0 + timedelta(seconds=n))
            async with storage.write() as unit:
                await asyncio.sleep(0)
                done = await unit.trades.swap(
                    TradeStatus.OPEN, executing, entry=entry(f"approve-{n}", target=t.trade_id)
                )
                return bool(done)

        won = await asyncio.gather(*(approve(n) for n in range(8)))
        assert sum(won) == 1
        winner = won.index(True)
        stored = await db.trades.get(client_id, user_id, t.trade_id)
        assert stored == t.start_approval(T0 + timedelta(seconds=winner))
        assert await db.audit.newest() == [entry(f"approve-{winner}", target=t.trade_id)]
        # Several swaps with entries in one unit keep their order, and see each other.
        cancelled = [trade(client_id, user_id) for _ in range(3)]
        for other in cancelled:
            await db.trades.add(other)
        async with storage.write() as unit:
            for n, other in enumerate(cancelled):
                assert await unit.trades.swap(
                    TradeStatus.OPEN, other.cancel(T0), entry=entry(f"cancel-{n}")
                )
                found = await unit.trades.get(client_id, user_id, other.trade_id)
                assert found is not None and found.status is TradeStatus.CANCELLED
            await unit.audit.append(entry("after"))
        newest = await db.audit.newest(limit=4)
        assert [e.action for e in reversed(newest)] == ["cancel-0", "cancel-1", "cancel-2", "after"]

    async def test_swap_trade_is_a_unit_of_one_compare_and_set(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        """`storage.swap_trade`: the winner stores the trade and its entry, losers write
        nothing; an entry no store could keep fails it and leaves the trade as it was."""
        db = autocommit(storage)
        t = trade(client_id, user_id)
        await db.trades.add(t)
        bad = AuditEntry(T0, None, None, "req-a", "ok")  # type: ignore[arg-type]  # NOT NULL
        with pytest.raises(Exception):  # noqa: B017 - each store refuses it its own way
            await storage.swap_trade(TradeStatus.OPEN, t.cancel(T0), bad)
        assert await db.trades.get(client_id, user_id, t.trade_id) == t
        moves = [t.start_approval(T0 + timedelta(seconds=n)) for n in range(8)]
        won = await asyncio.gather(
            *(
                storage.swap_trade(TradeStatus.OPEN, move, entry(f"approve-{n}"))
                for n, move in enumerate(moves)
            )
        )
        assert sum(won) == 1
        winner = won.index(True)
        assert await db.trades.get(client_id, user_id, t.trade_id) == moves[winner]
        assert await db.audit.newest() == [entry(f"approve-{winner}")]
        assert not await storage.swap_trade(TradeStatus.OPEN, t.cancel(T0), entry("late"))
        assert len(await db.audit.newest()) == 1

    async def test_add_trade_is_a_unit_of_the_quote_and_its_entry(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        """`storage.add_trade`: the trade and its entry stored together; an entry no store
        could keep fails it and leaves no trade; a trade id stored already fails it and
        leaves the stored trade and the log as they were."""
        db = autocommit(storage)
        t = trade(client_id, user_id)
        bad = AuditEntry(T0, None, None, "req-a", "ok")  # type: ignore[arg-type]  # NOT NULL
        with pytest.raises(Exception):  # noqa: B017 - each store refuses it its own way
            await storage.add_trade(t, bad)
        assert await db.trades.get(client_id, user_id, t.trade_id) is None
        assert await db.audit.newest() == []
        await storage.add_trade(t, entry("sell"))
        assert await db.trades.get(client_id, user_id, t.trade_id) == t
        assert await db.audit.newest() == [entry("sell")]
        with pytest.raises(Exception):  # noqa: B017 - the same trade id twice
            await storage.add_trade(dataclasses.replace(t, symbol="ETH"), entry("again"))
        assert await db.trades.get(client_id, user_id, t.trade_id) == t
        assert await db.audit.newest() == [entry("sell")]

    async def test_standalone_and_carried_entries_keep_one_order(
        self, storage: Storage, client_id: str, user_id: str
    ) -> None:
        db = autocommit(storage)
        t = trade(client_id, user_id)
        await db.audit.append(entry("refused-1"))
        async with storage.write() as unit:
            await unit.trades.add(t)
            await unit.audit.append(entry("trade.sell"))
        await db.audit.append(entry("refused-2"))
        async with storage.write() as unit:
            assert await unit.trades.swap(TradeStatus.OPEN, t.cancel(T0))
            await unit.audit.append(entry("trade.cancel"))
        await db.audit.append(entry("replay"))
        newest = await db.audit.newest(limit=1000)
        assert [e.action for e in reversed(newest)] == [
            "refused-1",
            "trade.sell",
            "refused-2",
            "trade.cancel",
            "replay",
        ]
        assert [e.action for e in await db.audit.newest(limit=2)] == ["replay", "trade.cancel"]


__all__ = ["StorageContract"]
