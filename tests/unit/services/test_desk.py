"""The desk's accounting on the core's fakes (walletcore.services.desk): its figures per
asset, the differences it reports with their trades, the reconciliation that pauses an
asset's deliveries over the tolerance and audits a change of differences once, and a
paused delivery waiting `short` until the operator resumes it."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import pytest

from walletcore.domain.desk import MismatchKind
from walletcore.domain.errors import ApiClientNotFound, Conflict, InvalidRequest
from walletcore.domain.ids import new_id
from walletcore.domain.sends import ChainStatus
from walletcore.domain.settlement import Settlement, SettlementStatus
from walletcore.domain.trade import Side, TradeStatus
from walletcore.ports import Sighting
from walletcore.services.desk import DeskAccounts
from walletcore.testing.contracts.storage import trade

from .conftest import ETH, USDT, Desk, DeskFactory, units

pytestmark = pytest.mark.asyncio
S = SettlementStatus


def accounts(desk: Desk, **tolerance: str) -> DeskAccounts:
    built = desk.container.desk()
    assert isinstance(built, DeskAccounts)
    if tolerance:
        built._tolerance = {int(k.lstrip("a")): Decimal(v) for k, v in tolerance.items()}
    return built


async def settle(
    desk: Desk,
    user_id: str,
    side: Side,
    status: SettlementStatus,
    amount: str,
    *,
    asset_id: int = ETH,
    with_trade: bool = False,
    **changes: Any,
) -> Settlement:
    now = desk.clock.now()
    settlement = Settlement(
        trade_id=new_id(),
        client_id=desk.client.client_id,
        user_id=user_id,
        side=side,
        asset_id=asset_id,
        units=units(asset_id, amount),
        status=status,
        created_at=now,
        updated_at=now,
    )
    settlement = dataclasses.replace(settlement, **changes)
    if with_trade:
        done = trade(
            desk.client.client_id,
            user_id,
            side=side,
            status=TradeStatus.COMPLETED,
            trade_id=settlement.trade_id,
            created_at=now,
        )
        await desk.db.trades.add(done)
    assert await desk.db.settlements.add(settlement)
    return settlement


async def account_of(desk: Desk, asset_id: int = ETH) -> Any:
    (shown,) = await accounts(desk).show(desk.client.client_id, asset_id)
    (account,) = shown.assets
    return account


async def test_the_figures_count_open_deliveries_and_collections(desk: Desk) -> None:
    desk_address = (await desk.platform())[desk.gateway(ETH).chain]
    desk.fund(desk_address, ETH, "2")
    user = await desk.user()
    desk.fund(desk.address(user, ETH), ETH, "1")
    queued = await settle(desk, user, Side.BUY, S.QUEUED, "0.3")
    sent = await settle(desk, user, Side.BUY, S.SENT, "0.2", attempt=1, tx_hash="0xaa")
    retried = await settle(
        desk, user, Side.BUY, S.FAILED, "0.1", attempt=1, due_at=desk.clock.now()
    )
    given_up = await settle(desk, user, Side.BUY, S.FAILED, "0.4", attempt=3)
    await settle(desk, user, Side.BUY, S.SETTLED, "0.5", attempt=1)
    waiting = await settle(desk, user, Side.SELL, S.AWAITING_PASSWORD, "0.25")
    collection = await settle(desk, user, Side.SELL, S.FAILED, "0.05", attempt=1)
    await settle(desk, user, Side.SELL, S.RELEASED, "9")

    account = await account_of(desk)
    assert account.address == desk_address and account.balance == units(ETH, "2")
    assert account.owed == units(ETH, "0.6") and account.in_flight == units(ETH, "0.2")
    assert account.incoming == units(ETH, "0.3") and account.short == 0
    assert set(account.owed_trades) == {queued.trade_id, sent.trade_id, retried.trade_id}
    assert set(account.incoming_trades) == {waiting.trade_id, collection.trade_id}
    found = {(m.kind, m.trade_ids) for m in account.mismatches}
    assert found == {
        (MismatchKind.DELIVERY_FAILED, (given_up.trade_id,)),
        (MismatchKind.COLLECTION_FAILED, (collection.trade_id,)),
    }
    (shown,) = await accounts(desk).show(desk.client.client_id, recent=3)
    assert len(shown.recent) == 3  # newest first, each with its transfer
    assert {a.asset.id for a in shown.assets} >= {ETH, USDT}  # enabled, desk has an address
    usdt = next(a for a in shown.assets if a.asset.id == USDT)
    assert (usdt.balance, usdt.owed, usdt.mismatches) == (0, 0, ())


async def test_an_unknown_client_or_asset_is_refused(desk: Desk) -> None:
    with pytest.raises(ApiClientNotFound):
        await accounts(desk).show(new_id())
    with pytest.raises(ApiClientNotFound):
        await accounts(desk).show("not an id")
    with pytest.raises(InvalidRequest):
        await accounts(desk).show(desk.client.client_id, 9999)


async def test_sent_too_long_and_a_failed_transfer_are_reported(desk: Desk) -> None:
    desk.fund((await desk.platform())[desk.gateway(ETH).chain], ETH, "1")
    user = await desk.user()
    old = await settle(desk, user, Side.BUY, S.SENT, "0.1", attempt=1, tx_hash="0x01")
    failed = await settle(desk, user, Side.BUY, S.SENT, "0.1", attempt=1, tx_hash="0x02")
    db = desk.db
    now = desk.clock.now()
    record = await db.sends.begin(desk.client.client_id, failed.request_id, "fp", now)
    signed = record.signed(b"raw", "0x02", now)
    assert await db.sends.advance(record, signed)
    broadcast = signed.broadcast(now)
    assert await db.sends.advance(signed, broadcast)
    pending = broadcast.finish({"txHash": "0x02"}, now, follow=True)
    assert await db.sends.advance(broadcast, pending)
    assert await db.sends.track(pending, pending.tracked(ChainStatus.FAILED, now))
    desk.clock.advance(3601)
    recent = await settle(desk, user, Side.BUY, S.SENT, "0.1", attempt=1, tx_hash="0x03")
    kinds = {m.trade_ids[0]: m.kind for m in (await account_of(desk)).mismatches}
    assert kinds[failed.trade_id] is MismatchKind.TRANSFER_FAILED
    assert kinds[old.trade_id] is MismatchKind.SENT_TOO_LONG
    assert recent.trade_id not in kinds


async def test_coins_missing_from_a_wallet_pause_deliveries_until_the_operator_resumes_them(
    desk: Desk,
) -> None:
    desk_address = (await desk.platform())[desk.gateway(ETH).chain]
    desk.fund(desk_address, ETH, "0.5")
    user = await desk.user()
    desk.fund(desk.address(user, ETH), ETH, "0.2")
    sell = await settle(desk, user, Side.SELL, S.AWAITING_PASSWORD, "0.5")
    buy = await settle(
        desk, user, Side.BUY, S.QUEUED, "0.1", due_at=desk.clock.now(), with_trade=True
    )
    account = await account_of(desk)
    (short,) = account.mismatches  # the desk covers its 0.1 ETH: only the wallet is short
    assert short.kind is MismatchKind.WALLET_SHORT and short.trade_ids == (sell.trade_id,)
    assert short.units == units(ETH, "0.3")

    (reconciled,) = await accounts(desk).reconcile("job-1")
    (pause,) = reconciled.pauses
    assert pause.asset_id == ETH and "0.3 ETH missing on chain" in pause.reason
    assert next(a for a in reconciled.assets if a.asset.id == ETH).pause == pause
    await accounts(desk).reconcile("job-2")  # the same differences: no new entry
    assert [e.request_id for e in await desk.audit("desk.mismatch")] == ["job-1"]
    assert [e.detail for e in await desk.audit("desk.pause")] == [f"ETH: {pause.reason}"]

    # the delivery waits, whatever the desk holds now, and nothing is signed
    desk.fund(desk_address, ETH, "1")
    await desk.container.settlements().run("job-settle")
    stored = await desk.db.settlements.get(desk.client.client_id, buy.trade_id)
    assert stored.status is S.SHORT
    assert stored.reason == (
        f"Deliveries of ETH are paused by the desk's reconciliation: {pause.reason}; "
        "an operator resumes them"
    )
    assert await desk.db.sends.get(desk.client.client_id, stored.request_id) is None

    resumed = await accounts(desk).resume(desk.client.client_id, ETH, "op-1")
    assert resumed == pause
    with pytest.raises(Conflict):
        await accounts(desk).resume(desk.client.client_id, ETH, "op-2")
    assert [e.outcome for e in await desk.audit("desk.resume")] == ["ok", "409"]
    desk.clock.advance(61)
    await desk.container.settlements().run("job-settle-2")
    stored = await desk.db.settlements.get(desk.client.client_id, buy.trade_id)
    assert stored.status is S.SENT and stored.tx_hash
    desk.gateway(ETH).sightings[stored.tx_hash] = Sighting.SUCCESS
    desk.clock.advance(30)
    assert await desk.follow() == 1
    await desk.container.settlements().run("job-settle-3")
    stored = await desk.db.settlements.get(desk.client.client_id, buy.trade_id)
    assert stored.status is S.SETTLED
    # delivered, and the wallet's missing coins found: the next run records that the
    # difference went away
    desk.fund(desk.address(user, ETH), ETH, "0.3")
    await accounts(desk).reconcile("job-3")
    assert [e.detail for e in await desk.audit("desk.mismatch")][-1] == "no differences"
    assert await desk.db.desk_pauses.of_client(desk.client.client_id) == []


async def test_a_shortfall_within_the_tolerance_is_reported_and_not_paused(desk: Desk) -> None:
    await desk.platform()
    user = await desk.user()
    desk.fund(desk.address(user, ETH), ETH, "0.2")
    await settle(desk, user, Side.SELL, S.AWAITING_PASSWORD, "0.5")
    (reconciled,) = await accounts(desk, a2="0.3").reconcile("job-1")
    assert reconciled.pauses == ()
    assert [m.kind for m in reconciled.mismatches] == [MismatchKind.WALLET_SHORT]
    (reconciled,) = await accounts(desk, a2="0.29").reconcile("job-2")
    assert [p.asset_id for p in reconciled.pauses] == [ETH]


async def test_a_short_desk_is_reported_and_never_paused(desk: Desk) -> None:
    """Short inventory is not a ledger difference: its deliveries are `short` and go once
    the desk is topped up."""
    desk_address = (await desk.platform())[desk.gateway(ETH).chain]
    desk.fund(desk_address, ETH, "0.5")
    user = await desk.user()
    buy = await settle(desk, user, Side.BUY, S.QUEUED, "0.8")
    (reconciled,) = await accounts(desk).reconcile("job-1")
    (short,) = reconciled.mismatches
    assert short.kind is MismatchKind.DESK_SHORT and short.trade_ids == (buy.trade_id,)
    assert short.units == units(ETH, "0.3") and reconciled.pauses == ()


async def test_transfers_in_flight_are_left_out_of_what_pauses(desk: Desk) -> None:
    desk_address = (await desk.platform())[desk.gateway(ETH).chain]
    desk.fund(desk_address, ETH, "0.1")
    user = await desk.user()
    await settle(desk, user, Side.BUY, S.SENT, "0.3", attempt=1, tx_hash="0x01")
    (reconciled,) = await accounts(desk).reconcile("job-1")
    assert [m.kind for m in reconciled.mismatches] == [MismatchKind.DESK_SHORT]
    assert reconciled.pauses == ()  # the chain may have taken the transfer off already


async def test_a_wallet_short_of_its_held_sells_is_reported_and_pauses(desk: Desk) -> None:
    await desk.platform()
    user = await desk.user()
    desk.fund(desk.address(user, ETH), ETH, "0.2")
    sell = await settle(desk, user, Side.SELL, S.AWAITING_PASSWORD, "0.5")
    (reconciled,) = await accounts(desk).reconcile("job-1")
    (mismatch,) = reconciled.mismatches
    assert mismatch.kind is MismatchKind.WALLET_SHORT and mismatch.user_id == user
    assert mismatch.trade_ids == (sell.trade_id,) and mismatch.units == units(ETH, "0.3")
    assert [p.asset_id for p in reconciled.pauses] == [ETH]


async def test_the_operator_pauses_by_hand_once(desk: Desk) -> None:
    first = await accounts(desk).pause(desk.client.client_id, USDT, "  looking  into it ", "op-1")
    again = await accounts(desk).pause(desk.client.client_id, USDT, "other", "op-2")
    assert first == again and first.reason == "looking into it"
    assert [e.outcome for e in await desk.audit("desk.pause")] == ["ok", "replay"]
    with pytest.raises(InvalidRequest):
        await accounts(desk).pause(desk.client.client_id, USDT, "x" * 301)
    with pytest.raises(ApiClientNotFound):
        await accounts(desk).pause(new_id(), USDT, None)


async def test_settlement_off_builds_no_desk(make_desk: DeskFactory, monkeypatch: Any) -> None:
    monkeypatch.setenv("WALLETCORE_SETTLEMENT_ENABLED", "false")
    desk = await make_desk()
    assert desk.container.desk() is None
    assert await desk.container.jobs().reconcile_desk() == 0
