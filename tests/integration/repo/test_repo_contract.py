"""The Repo contract: every method's semantics, run against memory, SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from walletcore.clock import ManualClock
from walletcore.domain.assets import Chain, FeePayer, Fiat
from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import (
    IdempotencyConflict,
    IdempotencyKeyReused,
    InvalidRequest,
    InvalidSendTransition,
)
from walletcore.domain.ids import new_id
from walletcore.domain.money import format_amount, truncate
from walletcore.domain.sends import SEND_LEASE, SendRecord, SendState
from walletcore.domain.trade import Figures, FixedLeg, Quote, Side, Trade, TradeStatus
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports import Clock, Repo
from walletcore.sandbox.repo import InMemoryRepo

MakeUser = Callable[[Repo, Clock, str], Awaitable[str]]
T0 = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)


def client(client_id: str | None = None, **changes: object) -> ApiClient:
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
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


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


@pytest.fixture
async def client_id(repo: Repo) -> str:
    c = client()
    await repo.add_client(c)
    return c.client_id


@pytest.fixture
async def user_id(repo: Repo, client_id: str, clock: ManualClock, make_user: MakeUser) -> str:
    return await make_user(repo, clock, client_id)


# -- api clients -------------------------------------------------------------------------
async def test_client_round_trips_every_field(repo: Repo) -> None:
    c = client(disabled=True, fee_payer=FeePayer.PLATFORM, asset_fee_payers={1: FeePayer.USER})
    await repo.add_client(c)
    got = await repo.get_client(c.client_id)
    assert got == c
    assert got is not None and got.created_at is not None and got.created_at.tzinfo is not None
    assert got.asset_fee_payers == {1: FeePayer.USER}
    assert isinstance(got.enabled_assets, tuple)


async def test_unknown_client_is_none(repo: Repo) -> None:
    assert await repo.get_client(new_id()) is None


async def test_adding_a_client_twice_is_refused(repo: Repo) -> None:
    c = client()
    await repo.add_client(c)
    with pytest.raises(InvalidRequest):
        await repo.add_client(dataclasses.replace(c, name="other"))
    assert await repo.get_client(c.client_id) == c


async def test_list_clients_holds_every_client(repo: Repo) -> None:
    a, b = client(), client(created_at=None)
    await repo.add_client(a)
    await repo.add_client(b)
    assert {c.client_id: c for c in await repo.list_clients()} == {a.client_id: a, b.client_id: b}


async def test_update_client_replaces_it(repo: Repo) -> None:
    c = client()
    await repo.add_client(c)
    rotated = dataclasses.replace(
        c, key_hash="cd" * 32, key_generation=4, enabled_assets=(2,), asset_fee_payers={}
    )
    await repo.update_client(rotated)
    assert await repo.get_client(c.client_id) == rotated


# -- users and wallets ---------------------------------------------------------------------
async def test_user_and_wallet_are_stored_together(repo: Repo, client_id: str) -> None:
    from walletcore.domain.clients import User

    uid = new_id()
    wallet = WalletRecord(
        client_id=client_id,
        owner=WalletOwner.USER,
        user_id=uid,
        sealed=b"\x00sealed\xff" * 10,
        addresses={Chain.ETHEREUM: "0xabc", Chain.BITCOIN: "bc1q"},
        created_at=T0,
    )
    await repo.add_user_wallet(User(uid, client_id, T0), wallet)
    assert await repo.get_user(client_id, uid) == User(uid, client_id, T0)
    assert await repo.get_wallet(client_id, WalletOwner.USER, uid) == wallet
    assert await repo.get_wallet(client_id, WalletOwner.PLATFORM, None) is None


async def test_users_of_another_client_are_invisible(
    repo: Repo, client_id: str, user_id: str
) -> None:
    other = client()
    await repo.add_client(other)
    assert await repo.get_user(other.client_id, user_id) is None
    assert await repo.get_wallet(other.client_id, WalletOwner.USER, user_id) is None
    assert await repo.get_user(client_id, new_id()) is None


async def test_one_platform_wallet_per_client(repo: Repo, client_id: str) -> None:
    wallet = WalletRecord(client_id, WalletOwner.PLATFORM, None, b"k", {Chain.TRON: "T1"}, T0)
    assert await repo.add_wallet(wallet) is True
    assert await repo.add_wallet(dataclasses.replace(wallet, sealed=b"other")) is False
    assert await repo.get_wallet(client_id, WalletOwner.PLATFORM, None) == wallet
    other = client()
    await repo.add_client(other)
    assert await repo.get_wallet(other.client_id, WalletOwner.PLATFORM, None) is None
    assert await repo.add_wallet(dataclasses.replace(wallet, client_id=other.client_id)) is True


async def test_add_wallet_refuses_a_second_user_wallet(
    repo: Repo, client_id: str, user_id: str
) -> None:
    existing = await repo.get_wallet(client_id, WalletOwner.USER, user_id)
    assert existing is not None
    assert await repo.add_wallet(dataclasses.replace(existing, sealed=b"second")) is False
    assert await repo.get_wallet(client_id, WalletOwner.USER, user_id) == existing


async def test_update_wallet_replaces_seal_and_addresses(
    repo: Repo, client_id: str, user_id: str
) -> None:
    existing = await repo.get_wallet(client_id, WalletOwner.USER, user_id)
    assert existing is not None
    extended = dataclasses.replace(
        existing,
        sealed=b"resealed",
        addresses={Chain.SOLANA: "So1", Chain.POLYGON: "0xp"},
        updated_at=T0 + timedelta(hours=1),
    )
    await repo.update_wallet(extended)
    assert await repo.get_wallet(client_id, WalletOwner.USER, user_id) == extended
    platform = WalletRecord(client_id, WalletOwner.PLATFORM, None, b"p", {}, T0)
    await repo.add_wallet(platform)
    await repo.update_wallet(dataclasses.replace(platform, sealed=b"p2"))
    stored = await repo.get_wallet(client_id, WalletOwner.PLATFORM, None)
    assert stored is not None and stored.sealed == b"p2"
    assert await repo.get_wallet(client_id, WalletOwner.USER, user_id) == extended


# -- trades ---------------------------------------------------------------------------
async def test_trade_round_trips_every_field(repo: Repo, client_id: str, user_id: str) -> None:
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
    await repo.add_trade(t)
    got = await repo.get_trade(client_id, user_id, t.trade_id)
    assert got == t
    assert got is not None
    for when in (got.created_at, got.approved_at, got.completed_at, got.quote.expires_at):
        assert when is not None and when.utcoffset() == timedelta(0)


async def test_open_trade_round_trips_without_optional_fields(
    repo: Repo, client_id: str, user_id: str
) -> None:
    t = dataclasses.replace(
        trade(client_id, user_id),
        fixed_leg=FixedLeg.FIAT,
        quote=Quote(None, Decimal("100.00"), Decimal("2.5"), T0 + timedelta(seconds=60)),
    )
    await repo.add_trade(t)
    got = await repo.get_trade(client_id, user_id, t.trade_id)
    assert got == t
    assert got is not None and got.approved is None and got.executed is None
    assert got.reference is None and got.failure_reason is None


async def test_another_users_or_clients_trade_is_none(
    repo: Repo, client_id: str, user_id: str, clock: ManualClock, make_user: MakeUser
) -> None:
    t = trade(client_id, user_id)
    await repo.add_trade(t)
    neighbour = await make_user(repo, clock, client_id)
    other = client()
    await repo.add_client(other)
    assert await repo.get_trade(client_id, neighbour, t.trade_id) is None
    assert await repo.get_trade(other.client_id, user_id, t.trade_id) is None
    assert await repo.get_trade(client_id, user_id, new_id()) is None
    assert await repo.get_trade(client_id, user_id, t.trade_id) == t


async def test_list_is_newest_first_and_capped(repo: Repo, client_id: str, user_id: str) -> None:
    made = [trade(client_id, user_id, created_at=T0 + timedelta(seconds=i)) for i in range(12)]
    for t in reversed(made[6:]):
        await repo.add_trade(t)
    for t in made[:6]:
        await repo.add_trade(t)
    listed = await repo.list_trades(client_id, user_id, side=None, status=None, limit=10)
    assert [t.trade_id for t in listed] == [t.trade_id for t in reversed(made)][:10]
    assert listed[0] == made[-1]
    three = await repo.list_trades(client_id, user_id, side=None, status=None, limit=3)
    assert [t.trade_id for t in three] == [t.trade_id for t in listed[:3]]


async def test_list_breaks_creation_ties_by_trade_id(
    repo: Repo, client_id: str, user_id: str
) -> None:
    same = [trade(client_id, user_id, trade_id=f"{i:024x}") for i in (3, 1, 2)]
    for t in same:
        await repo.add_trade(t)
    listed = await repo.list_trades(client_id, user_id, side=None, status=None, limit=10)
    assert [t.trade_id for t in listed] == [f"{i:024x}" for i in (3, 2, 1)]


async def test_list_filters_by_side_and_status(repo: Repo, client_id: str, user_id: str) -> None:
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
        await repo.add_trade(t)

    async def ids(side: Side | None, status: TradeStatus | None) -> list[str]:
        found = await repo.list_trades(client_id, user_id, side=side, status=status, limit=10)
        return [t.trade_id for t in found]

    assert await ids(Side.BUY, None) == [made[4].trade_id, made[3].trade_id, made[1].trade_id]
    assert await ids(Side.SELL, None) == [made[2].trade_id, made[0].trade_id]
    assert await ids(None, TradeStatus.COMPLETED) == [made[4].trade_id, made[2].trade_id]
    assert await ids(Side.SELL, TradeStatus.OPEN) == [made[0].trade_id]
    assert await ids(Side.SELL, TradeStatus.EXPIRED) == []


async def test_list_shows_only_the_users_own_trades(
    repo: Repo, client_id: str, user_id: str, clock: ManualClock, make_user: MakeUser
) -> None:
    neighbour = await make_user(repo, clock, client_id)
    mine = trade(client_id, user_id)
    await repo.add_trade(mine)
    await repo.add_trade(trade(client_id, neighbour))
    assert await repo.list_trades(client_id, user_id, side=None, status=None, limit=10) == [mine]
    other = client()
    await repo.add_client(other)
    assert await repo.list_trades(other.client_id, user_id, side=None, status=None, limit=10) == []


async def test_a_user_who_never_traded_lists_nothing(
    repo: Repo, client_id: str, user_id: str
) -> None:
    assert await repo.list_trades(client_id, user_id, side=None, status=None, limit=10) == []


async def test_swap_trade_is_a_compare_and_set(repo: Repo, client_id: str, user_id: str) -> None:
    t = trade(client_id, user_id)
    await repo.add_trade(t)
    executing = t.start_approval(T0 + timedelta(seconds=1))
    assert await repo.swap_trade(TradeStatus.OPEN, executing) is True
    assert await repo.get_trade(client_id, user_id, t.trade_id) == executing
    # A second approval started from the same open trade loses.
    assert await repo.swap_trade(TradeStatus.OPEN, t.cancel(T0)) is False
    assert await repo.get_trade(client_id, user_id, t.trade_id) == executing
    # Settlement stores every figure.
    from walletcore.domain.trade import Fill

    fill = Fill(Figures(Decimal("1.5"), Decimal("4500.5"), Decimal("3000.3333")), "REF-1")
    done = executing.settle(fill, T0 + timedelta(seconds=2))
    assert await repo.swap_trade(TradeStatus.EXECUTING, done) is True
    assert await repo.get_trade(client_id, user_id, t.trade_id) == done


async def test_swap_of_an_unknown_trade_is_false(repo: Repo, client_id: str, user_id: str) -> None:
    t = trade(client_id, user_id)
    assert await repo.swap_trade(TradeStatus.OPEN, t.cancel(T0)) is False
    assert await repo.get_trade(client_id, user_id, t.trade_id) is None


async def test_expire_lapsed_moves_only_this_users_lapsed_open_quotes(
    repo: Repo, client_id: str, user_id: str, clock: ManualClock, make_user: MakeUser
) -> None:
    neighbour = await make_user(repo, clock, client_id)
    lapsed = trade(client_id, user_id, ttl=timedelta(seconds=10))
    exactly = trade(client_id, user_id, ttl=timedelta(seconds=30))  # lapses at `now` itself
    live = trade(client_id, user_id, ttl=timedelta(seconds=31))
    approved = dataclasses.replace(
        trade(client_id, user_id, ttl=timedelta(seconds=10)), status=TradeStatus.APPROVED
    )
    theirs = trade(client_id, neighbour, ttl=timedelta(seconds=10))
    for t in (lapsed, exactly, live, approved, theirs):
        await repo.add_trade(t)
    now = T0 + timedelta(seconds=30)

    assert await repo.expire_lapsed(client_id, user_id, now) == 2
    for t in (lapsed, exactly):
        stored = await repo.get_trade(client_id, user_id, t.trade_id)
        assert stored == t.expire(now)
        assert stored is not None and stored.completed_at == t.quote.expires_at
        assert stored.approved_at is None
    assert await repo.get_trade(client_id, user_id, live.trade_id) == live
    assert await repo.get_trade(client_id, user_id, approved.trade_id) == approved
    assert await repo.get_trade(client_id, neighbour, theirs.trade_id) == theirs
    assert await repo.expire_lapsed(client_id, user_id, now) == 0


# -- money and time ---------------------------------------------------------------------------
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
    repo: Repo, client_id: str, user_id: str, amount: Decimal
) -> None:
    t = dataclasses.replace(
        trade(client_id, user_id),
        quote=Quote(amount, amount, amount, T0 + timedelta(seconds=60)),
        approved=Figures(amount, amount, amount),
        executed=Figures(amount, amount, amount),
    )
    await repo.add_trade(t)
    got = await repo.get_trade(client_id, user_id, t.trade_id)
    assert got is not None
    for value in (got.quote.crypto_amount, got.quote.fiat_amount, got.quote.price):
        assert isinstance(value, Decimal) and value == amount
    assert got.figures == Figures(amount, amount, amount)


async def test_more_than_18_places_are_cut_never_rounded_up(
    repo: Repo, client_id: str, user_id: str
) -> None:
    """A derived fiat amount can carry more places (18-place crypto x 8-place price):
    a store may keep it whole or cut it at 18 places, and the wire value is the same."""
    long = Decimal("1.999999999999999999999999")  # 24 places, all nines
    t = dataclasses.replace(trade(client_id, user_id), approved=Figures(long, long, long))
    await repo.add_trade(t)
    got = await repo.get_trade(client_id, user_id, t.trade_id)
    assert got is not None and got.approved is not None
    assert got.approved.fiat_amount in (long, truncate(long, 18))
    assert format_amount(got.approved.price) == format_amount(long) == "1.999999"


async def test_times_come_back_as_the_same_aware_instant(
    repo: Repo, client_id: str, user_id: str
) -> None:
    local = T0.astimezone(timezone(timedelta(hours=5, minutes=30)))
    t = trade(client_id, user_id, created_at=local.replace(microsecond=123456))
    await repo.add_trade(t)
    got = await repo.get_trade(client_id, user_id, t.trade_id)
    assert got is not None
    assert got.created_at == t.created_at and got.created_at.tzinfo is not None
    assert got.created_at.microsecond == 123456
    if not isinstance(repo, InMemoryRepo):  # stores keep UTC and read it back as UTC
        assert got.created_at.utcoffset() == timedelta(0)


# -- sends: the idempotency record -------------------------------------------------------------
RID = "req-7f3a"


async def test_begin_send_creates_a_leased_started_record(repo: Repo, client_id: str) -> None:
    record = await repo.begin_send(client_id, RID, "fp-1", T0)
    assert record.state is SendState.STARTED
    assert (record.client_id, record.request_id, record.fingerprint) == (client_id, RID, "fp-1")
    assert record.attempt == 1 and record.locked_until == T0 + SEND_LEASE
    assert record.raw_tx is None and record.tx_hash is None and record.result is None
    assert await repo.get_send(client_id, RID) == record
    assert await repo.get_send(client_id, "another") is None


async def test_a_second_request_while_the_first_works_is_a_409(repo: Repo, client_id: str) -> None:
    first = await repo.begin_send(client_id, RID, "fp-1", T0)
    with pytest.raises(IdempotencyConflict) as caught:
        await repo.begin_send(client_id, RID, "fp-1", T0 + SEND_LEASE - timedelta(seconds=1))
    assert caught.value.status == 409
    assert caught.value.message == "A request with this X-Request-Id is still in progress"
    assert await repo.get_send(client_id, RID) == first


async def test_a_different_request_under_a_used_id_is_a_422(repo: Repo, client_id: str) -> None:
    first = await repo.begin_send(client_id, RID, "fp-1", T0)
    with pytest.raises(IdempotencyKeyReused) as caught:
        await repo.begin_send(client_id, RID, "fp-2", T0)
    assert caught.value.status == 422
    assert caught.value.message == "X-Request-Id was already used with a different request"
    done = first.finish({"txHash": "0x1"}, T0)
    assert await repo.advance_send(first, done)
    with pytest.raises(IdempotencyKeyReused):
        await repo.begin_send(client_id, RID, "fp-2", T0 + timedelta(days=30))


async def test_a_send_moves_through_its_recovery_points(repo: Repo, client_id: str) -> None:
    started = await repo.begin_send(client_id, RID, "fp-1", T0)
    signed = started.signed(b"\x02\xf8signed-tx\x00", "0xhash", T0 + timedelta(seconds=1))
    assert await repo.advance_send(started, signed) is True
    assert await repo.get_send(client_id, RID) == signed
    sent = signed.broadcast(T0 + timedelta(seconds=2))
    assert await repo.advance_send(signed, sent) is True
    result = {
        "txHash": "0xhash",
        "amount": "1.5",
        "nested": {"fee": "0.0001", "ok": True},
        "é": [1, 2],
    }
    finished = sent.finish(result, T0 + timedelta(seconds=3))
    assert await repo.advance_send(sent, finished) is True
    stored = await repo.get_send(client_id, RID)
    assert stored == finished
    assert stored is not None and stored.raw_tx == b"\x02\xf8signed-tx\x00"
    assert stored.result == result and stored.locked_until is None


async def test_a_finished_send_is_replayed(repo: Repo, client_id: str) -> None:
    started = await repo.begin_send(client_id, RID, "fp-1", T0)
    finished = started.finish({"status": 200, "body": {"txHash": "0x9"}}, T0)
    assert await repo.advance_send(started, finished)
    again = await repo.begin_send(client_id, RID, "fp-1", T0 + timedelta(seconds=1))
    assert again == finished and again.is_finished
    assert again.result == {"status": 200, "body": {"txHash": "0x9"}}


async def test_a_lapsed_lease_is_taken_over_at_the_last_recovery_point(
    repo: Repo, client_id: str
) -> None:
    started = await repo.begin_send(client_id, RID, "fp-1", T0)
    signed = started.signed(b"raw", "0xh", T0 + timedelta(seconds=1))
    assert await repo.advance_send(started, signed)
    # The first process dies here. After its lease, a retry resumes at `signed`.
    later = T0 + timedelta(seconds=1) + SEND_LEASE
    resumed = await repo.begin_send(client_id, RID, "fp-1", later)
    assert resumed.state is SendState.SIGNED and resumed.attempt == 2
    assert resumed.raw_tx == b"raw" and resumed.tx_hash == "0xh"
    assert resumed.locked_until == later + SEND_LEASE
    # The first process wakes up: its attempt is stale, it cannot move the record.
    assert await repo.advance_send(signed, signed.broadcast(later)) is False
    assert await repo.advance_send(resumed, resumed.broadcast(later)) is True
    stored = await repo.get_send(client_id, RID)
    assert stored is not None and stored.state is SendState.BROADCAST and stored.attempt == 2


async def test_a_custom_lease_is_honoured(repo: Repo, client_id: str) -> None:
    short = timedelta(seconds=5)
    first = await repo.begin_send(client_id, RID, "fp-1", T0, lease=short)
    assert first.locked_until == T0 + short
    with pytest.raises(IdempotencyConflict):
        await repo.begin_send(client_id, RID, "fp-1", T0 + timedelta(seconds=4), lease=short)
    taken = await repo.begin_send(client_id, RID, "fp-1", T0 + short, lease=short)
    assert taken.attempt == 2


async def test_advance_from_a_state_no_longer_stored_is_false(repo: Repo, client_id: str) -> None:
    started = await repo.begin_send(client_id, RID, "fp-1", T0)
    signed = started.signed(b"raw", "0xh", T0)
    assert await repo.advance_send(started, signed)
    assert await repo.advance_send(started, started.signed(b"other", "0xother", T0)) is False
    assert await repo.get_send(client_id, RID) == signed


async def test_advance_refuses_another_record(repo: Repo, client_id: str) -> None:
    started = await repo.begin_send(client_id, RID, "fp-1", T0)
    other = dataclasses.replace(started.signed(b"raw", "0xh", T0), request_id="other")
    with pytest.raises(InvalidSendTransition):
        await repo.advance_send(started, other)
    assert await repo.get_send(client_id, RID) == started


async def test_a_released_send_resumes_at_once(repo: Repo, client_id: str) -> None:
    started = await repo.begin_send(client_id, RID, "fp-1", T0)
    released = started.release(T0 + timedelta(seconds=1))
    assert await repo.advance_send(started, released)
    again = await repo.begin_send(client_id, RID, "fp-1", T0 + timedelta(seconds=2))
    assert again.state is SendState.STARTED and again.attempt == 2


async def test_request_ids_are_per_client(repo: Repo, client_id: str) -> None:
    other = client()
    await repo.add_client(other)
    mine = await repo.begin_send(client_id, RID, "fp-1", T0)
    theirs = await repo.begin_send(other.client_id, RID, "fp-other", T0)
    assert mine.attempt == theirs.attempt == 1
    assert await repo.get_send(other.client_id, RID) == theirs
    assert await repo.get_send(client_id, RID) == mine


async def test_an_overlong_request_id_is_a_400(repo: Repo, client_id: str) -> None:
    with pytest.raises(InvalidRequest):
        await repo.begin_send(client_id, "x" * 256, "fp-1", T0)
    record = await repo.begin_send(client_id, "x" * 255, "fp-1", T0)
    assert await repo.get_send(client_id, "x" * 255) == record


# -- audit --------------------------------------------------------------------------------------
async def test_audit_lists_newest_first(repo: Repo, client_id: str) -> None:
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
        await repo.append_audit(e)
    listed = await repo.list_audit()
    assert listed == [full, *reversed(entries)]
    assert await repo.list_audit(limit=2) == [full, entries[-1]]


async def test_the_audit_of_a_fresh_store_is_empty(repo: Repo) -> None:
    assert await repo.list_audit() == []


def test_send_record_repr_hides_the_signed_transaction() -> None:
    record = SendRecord.start("c", "r", "fp", T0).signed(b"secret-ish", "0xh", T0)
    assert "secret-ish" not in repr(record)


# -- the audit log, written with the change it records ---------------------------------------
def entry(action: str, request_id: str = "req-a", **changes: object) -> AuditEntry:
    base = AuditEntry(T0, None, action, request_id, "ok", target=None)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


async def actions(repo: Repo) -> list[str]:
    """The actions in the log, oldest first."""
    return [e.action for e in reversed(await repo.list_audit(limit=1000))]


async def test_every_change_writes_the_entries_it_carries(
    repo: Repo, client_id: str, user_id: str
) -> None:
    from walletcore.domain.clients import User

    c = client()
    await repo.add_client(c, audit=[entry("client.create", client_id=c.client_id)])
    await repo.update_client(dataclasses.replace(c, name="B"), audit=[entry("client.rotate")])
    uid = new_id()
    wallet = WalletRecord(client_id, WalletOwner.USER, uid, b"s", {Chain.TRON: "T"}, T0)
    assert await repo.add_user_wallet(
        User(uid, client_id, T0), wallet, audit=[entry("wallet.create", user_id=uid)]
    )
    await repo.update_wallet(
        dataclasses.replace(wallet, sealed=b"t"), audit=[entry("wallet.extend")]
    )
    platform = WalletRecord(client_id, WalletOwner.PLATFORM, None, b"p", {}, T0)
    assert await repo.add_wallet(platform, audit=[entry("wallet.provision_platform")])
    t = trade(client_id, user_id)
    await repo.add_trade(t, audit=[entry("trade.sell", target=t.trade_id)])
    executing = t.start_approval(T0 + timedelta(seconds=1))
    two = [entry("trade.approve"), entry("trade.note")]
    assert await repo.swap_trade(TradeStatus.OPEN, executing, audit=two)
    started = await repo.begin_send(client_id, RID, "fp-1", T0, audit=[entry("send.begin")])
    signed = started.signed(b"raw", "0xh", T0)
    assert await repo.advance_send(started, signed, audit=[entry("wallet.send", target="0xh")])

    assert await actions(repo) == [
        "client.create",
        "client.rotate",
        "wallet.create",
        "wallet.extend",
        "wallet.provision_platform",
        "trade.sell",
        "trade.approve",
        "trade.note",
        "send.begin",
        "wallet.send",
    ]
    newest = await repo.list_audit(limit=1)
    assert newest == [entry("wallet.send", target="0xh")]  # every field round-trips


async def test_a_change_that_does_not_apply_writes_none_of_its_entries(
    repo: Repo, client_id: str, user_id: str
) -> None:
    c = client()
    await repo.add_client(c)
    with pytest.raises(InvalidRequest):
        await repo.add_client(c, audit=[entry("client.create")])
    existing = await repo.get_wallet(client_id, WalletOwner.USER, user_id)
    assert existing is not None
    assert not await repo.add_wallet(existing, audit=[entry("wallet.add")])
    t = trade(client_id, user_id)
    await repo.add_trade(t)
    assert await repo.swap_trade(TradeStatus.OPEN, t.cancel(T0))
    assert not await repo.swap_trade(TradeStatus.OPEN, t.cancel(T0), audit=[entry("lost")])
    assert not await repo.swap_trade(
        TradeStatus.OPEN, trade(client_id, user_id).cancel(T0), audit=[entry("unknown trade")]
    )
    started = await repo.begin_send(client_id, RID, "fp-1", T0)
    with pytest.raises(IdempotencyConflict):
        await repo.begin_send(client_id, RID, "fp-1", T0, audit=[entry("conflict")])
    with pytest.raises(IdempotencyKeyReused):
        await repo.begin_send(client_id, RID, "fp-2", T0, audit=[entry("reused")])
    signed = started.signed(b"raw", "0xh", T0)
    assert await repo.advance_send(started, signed)
    stale = started.signed(b"other", "0xo", T0)
    assert not await repo.advance_send(started, stale, audit=[entry("stale")])
    finished = signed.finish({"txHash": "0xh"}, T0)
    assert await repo.advance_send(signed, finished)
    replayed = await repo.begin_send(client_id, RID, "fp-1", T0, audit=[entry("replayed")])
    assert replayed == finished
    assert await repo.expire_lapsed(client_id, user_id, T0, audit=entry("nothing")) == 0

    assert await repo.list_audit() == []


async def test_an_entry_that_cannot_be_written_fails_its_change(
    repo: Repo, client_id: str, user_id: str
) -> None:
    """One transaction: the change and its entries commit together or not at all."""
    t = trade(client_id, user_id)
    await repo.add_trade(t)
    bad = dataclasses.replace(entry("trade.cancel"), action=None)  # NOT NULL in every store
    with pytest.raises(Exception):  # noqa: B017 - each store refuses it its own way
        await repo.swap_trade(TradeStatus.OPEN, t.cancel(T0), audit=[entry("first"), bad])
    assert await repo.get_trade(client_id, user_id, t.trade_id) == t
    c = client()
    with pytest.raises(Exception):  # noqa: B017
        await repo.add_client(c, audit=[bad])
    assert await repo.get_client(c.client_id) is None
    assert await repo.list_audit() == []
    # The same change with a good entry goes through.
    assert await repo.swap_trade(TradeStatus.OPEN, t.cancel(T0), audit=[entry("trade.cancel")])
    assert await actions(repo) == ["trade.cancel"]


async def test_expire_lapsed_writes_one_entry_per_trade_it_moved(
    repo: Repo, client_id: str, user_id: str
) -> None:
    lapsed = [trade(client_id, user_id, ttl=timedelta(seconds=10)) for _ in range(2)]
    live = trade(client_id, user_id, ttl=timedelta(seconds=60))
    for t in (*lapsed, live):
        await repo.add_trade(t)
    template = entry("trade.expire", user_id=user_id, detail="open -> expired")
    now = T0 + timedelta(seconds=30)
    assert await repo.expire_lapsed(client_id, user_id, now, audit=template) == 2
    written = await repo.list_audit()
    assert sorted(e.target or "" for e in written) == sorted(t.trade_id for t in lapsed)
    assert all(dataclasses.replace(e, target=None) == template for e in written)
    assert await repo.expire_lapsed(client_id, user_id, now, audit=template) == 0
    assert len(await repo.list_audit()) == 2


async def test_begin_send_writes_its_entries_when_it_stores_a_record(
    repo: Repo, client_id: str
) -> None:
    started = await repo.begin_send(client_id, RID, "fp-1", T0, audit=[entry("begin")])
    assert started.attempt == 1
    later = T0 + SEND_LEASE
    taken = await repo.begin_send(client_id, RID, "fp-1", later, audit=[entry("takeover")])
    assert taken.attempt == 2
    assert await actions(repo) == ["begin", "takeover"]


async def test_a_user_is_created_once_per_request_id_of_a_client(
    repo: Repo, client_id: str
) -> None:
    from walletcore.domain.clients import User

    def new_user(cid: str) -> tuple[User, WalletRecord]:
        uid = new_id()
        return User(uid, cid, T0), WalletRecord(cid, WalletOwner.USER, uid, b"s", {}, T0)

    first, first_wallet = new_user(client_id)
    assert await repo.created_by_request(client_id, "create-1") is None
    assert await repo.add_user_wallet(
        first, first_wallet, request_id="create-1", audit=[entry("wallet.create")]
    )
    assert await repo.created_by_request(client_id, "create-1") == first.user_id

    second, second_wallet = new_user(client_id)
    stored = await repo.add_user_wallet(
        second, second_wallet, request_id="create-1", audit=[entry("second")]
    )
    assert stored is False
    assert await repo.get_user(client_id, second.user_id) is None
    assert await repo.get_wallet(client_id, WalletOwner.USER, second.user_id) is None
    assert await repo.created_by_request(client_id, "create-1") == first.user_id
    # Another request id, none, or another client: a new user each.
    assert await repo.add_user_wallet(*new_user(client_id), request_id="create-2")
    assert await repo.add_user_wallet(*new_user(client_id))
    assert await repo.add_user_wallet(*new_user(client_id))
    other = client()
    await repo.add_client(other)
    theirs, theirs_wallet = new_user(other.client_id)
    assert await repo.add_user_wallet(theirs, theirs_wallet, request_id="create-1")
    assert await repo.created_by_request(other.client_id, "create-1") == theirs.user_id
    assert await repo.created_by_request(client_id, "create-1") == first.user_id
    assert await actions(repo) == ["wallet.create"]


async def test_standalone_and_carried_entries_keep_one_order(
    repo: Repo, client_id: str, user_id: str
) -> None:
    t = trade(client_id, user_id)
    await repo.append_audit(entry("refused-1"))
    await repo.add_trade(t, audit=[entry("trade.sell")])
    await repo.append_audit(entry("refused-2"))
    await repo.swap_trade(TradeStatus.OPEN, t.cancel(T0), audit=[entry("trade.cancel")])
    await repo.append_audit(entry("replay"))
    assert await actions(repo) == ["refused-1", "trade.sell", "refused-2", "trade.cancel", "replay"]
    assert [e.action for e in await repo.list_audit(limit=2)] == ["replay", "trade.cancel"]
