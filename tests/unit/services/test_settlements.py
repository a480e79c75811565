"""The settlement of trades' crypto legs (walletcore.services.settlements, docs/settlement.md)
on the core's fakes: the in-memory storage, the FAKE KeyStore, followed fake chains, the
sandbox venue (whose fixed-leg amounts 502, 504 and 202 reject, time out and work an order).

Each test reads back what is stored: the settlement, its audit entries and events, the
send records of its transfers and what the fake chain was asked to broadcast."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from dependency_injector import providers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from walletcore.domain.assets import Chain
from walletcore.domain.errors import DomainError, InvalidRequest, PriceUnavailable
from walletcore.domain.events import Event
from walletcore.domain.money import format_balance
from walletcore.domain.settlement import (
    DUE_STATUSES,
    HOLDING_STATUSES,
    RESERVED_REQUEST_PREFIX,
    Settlement,
    SettlementStatus,
    transfer_key,
)
from walletcore.domain.trade import Side, Trade, TradeStatus
from walletcore.ports import Sighting
from walletcore.services.settlements import SettlementSettings
from walletcore.testing.chains import Outcome

from .conftest import ETH, PASSWORD, USDT, WRONG, Desk, DeskFactory, elsewhere, units

S = SettlementStatus


@dataclass
class Market:
    """A desk (the api client's platform wallet, funded) and one user trading ETH and USDT."""

    desk: Desk
    user: str
    platform: dict[Chain, str]

    @property
    def trading(self) -> Any:
        return self.desk.container.trading()

    @property
    def settlements(self) -> Any:
        return self.desk.container.settlements()

    @property
    def eth(self) -> Any:
        return self.desk.gateway(ETH)

    async def sell(self, amount: str = "0.5", asset_id: int = ETH, **body: Any) -> Trade:
        body.setdefault("crypto_amount", amount)
        trade: Trade = await self.trading.sell(
            self.desk.caller(), user_id=self.user, asset_id=asset_id, fiat="USD", **body
        )
        return trade

    async def buy(self, amount: str = "0.3", asset_id: int = ETH, **body: Any) -> Trade:
        body.setdefault("crypto_amount", amount)
        trade: Trade = await self.trading.order(
            self.desk.caller(), user_id=self.user, asset_id=asset_id, fiat="USD", **body
        )
        return trade

    async def approve(self, trade: Trade, password: Any = None) -> Trade:
        approved: Trade = await self.trading.approve(
            self.desk.caller(), user_id=self.user, trade_id=trade.trade_id, password=password
        )
        return approved

    async def collect(self, trade: Trade, password: Any = PASSWORD) -> Trade:
        collected: Trade = await self.trading.collect(
            self.desk.caller(), user_id=self.user, trade_id=trade.trade_id, password=password
        )
        return collected

    async def check(self, trade: Trade) -> Trade:
        found: Trade = await self.trading.get(
            self.desk.caller(), user_id=self.user, trade_id=trade.trade_id
        )
        return found

    async def settlement(self, trade: Trade) -> Settlement:
        found = await self.desk.db.settlements.get(self.desk.client.client_id, trade.trade_id)
        assert found is not None
        return found

    async def held(self, asset_id: int = ETH) -> int:
        held: int = await self.desk.db.settlements.held(
            self.desk.client.client_id, self.user, asset_id
        )
        return held

    async def run(self) -> int:
        """One run of the `settle_coins` job (after its due time)."""
        moved: int = await self.desk.container.jobs().settle_coins()
        return moved

    async def land(self, tx_hash: str | None, outcome: Sighting = Sighting.SUCCESS) -> None:
        """The chain mines `tx_hash`, and the follow job sees it."""
        assert tx_hash is not None
        self.eth.sightings[tx_hash] = outcome
        self.desk.clock.advance(30)
        assert await self.desk.follow() == 1

    async def events(self, prefix: str = "settlement.") -> list[Event]:
        page = await self.desk.db.events.after(self.desk.client.client_id, None, limit=1000)
        return [e for e in page.events if e.type.startswith(prefix)]

    async def moves(self, trade: Trade) -> list[str]:
        """The audit details of the trade's settlement moves, oldest first."""
        return [
            e.detail or ""
            for e in await self.desk.audit()
            if e.target == trade.trade_id
            and e.action
            in {"trade.reserve", "trade.release", "trade.settlement"}
            | {"trade.deliver", "trade.collect"}
            and e.detail is not None
            and "->" in e.detail
        ]


async def _market(desk: Desk) -> Market:
    user = await desk.user()
    platform = await desk.platform()
    desk.fund(desk.address(user, ETH), ETH, "1")
    desk.fund(desk.address(user, USDT), USDT, "100")
    desk.fund(platform[Chain.ETHEREUM], ETH, "5")
    desk.fund(platform[Chain.ETHEREUM], USDT, "1000")
    return Market(desk, user, platform)


@pytest.fixture
async def market(desk: Desk) -> Market:
    return await _market(desk)


def fee(asset_id: int = ETH) -> int:
    """The fake ETHEREUM chain's fee quote of a transfer of `asset_id`, in wei."""
    from walletcore.testing.chains import FAKE_FEES

    native, token, _ = FAKE_FEES[Chain.ETHEREUM]
    return native if asset_id == ETH else token


# -- sells: reserved at approval, collected with the password ------------------------------
async def test_a_sell_approved_with_the_password_is_collected_and_settles(market: Market) -> None:
    trade = await market.approve(await market.sell("0.5"), PASSWORD)
    assert trade.status is TradeStatus.COMPLETED
    assert trade.settlement is not None and trade.settlement.status is S.SENT
    record = await market.desk.record(transfer_key(Side.SELL, trade.trade_id, 1))
    body = market.eth.body_of(record.tx_hash or "")
    assert (body["from"], body["to"]) == (
        market.desk.address(market.user, ETH),
        market.platform[Chain.ETHEREUM],
    )
    assert body["amount"] == units(ETH, "0.5")  # the desk receives the amount exactly
    assert await market.held() == units(ETH, "0.5") + fee()  # held until final on chain

    await market.land(trade.settlement.tx_hash)
    settled = (await market.check(trade)).settlement
    assert settled is not None and settled.status is S.SETTLED
    assert settled.tx_hash == trade.settlement.tx_hash
    assert await market.held() == 0
    assert await market.moves(trade) == [
        "none -> reserved",
        "reserved -> awaiting_password",
        f"awaiting_password -> sent: {settled.tx_hash}",
        f"sent -> settled: {settled.tx_hash}",
    ]


async def test_a_sell_approved_without_a_password_waits_for_it(market: Market) -> None:
    trade = await market.approve(await market.sell("0.5"))
    assert trade.settlement is not None
    assert trade.settlement.status is S.AWAITING_PASSWORD
    assert (
        trade.settlement.reason == "The collection needs the wallet password: POST /trade/collect"
    )
    assert market.eth.broadcasts == []
    assert await market.held() == units(ETH, "0.5") + fee()
    # neither a poll nor the job collects: only /trade/collect does
    await market.check(trade)
    market.desk.clock.advance(3600)
    await market.run()
    assert (await market.settlement(trade)).status is S.AWAITING_PASSWORD
    assert market.eth.broadcasts == []

    collected = await market.collect(trade)
    assert collected.settlement is not None and collected.settlement.status is S.SENT
    assert len(market.eth.broadcasts) == 1


async def test_a_wrong_password_at_collect_changes_nothing(market: Market) -> None:
    trade = await market.approve(await market.sell("0.5"))
    before = await market.settlement(trade)
    audit_before = len(await market.desk.audit())
    with pytest.raises(DomainError) as caught:
        await market.collect(trade, WRONG)
    assert (caught.value.status, caught.value.message) == (401, "Invalid credentials")
    assert await market.settlement(trade) == before
    assert market.eth.broadcasts == []
    after = await market.desk.audit()
    assert [(e.action, e.outcome, e.detail) for e in after[audit_before:]] == [
        ("trade.collect", "401", "Invalid credentials")
    ]


async def test_a_wrong_password_at_approve_trades_nothing(market: Market) -> None:
    trade = await market.sell("0.5")
    with pytest.raises(DomainError) as caught:
        await market.approve(trade, WRONG)
    assert caught.value.status == 401
    assert (
        await market.desk.db.trades.get(trade.client_id, market.user, trade.trade_id)
    ).status is (TradeStatus.OPEN)
    assert await market.desk.db.settlements.get(trade.client_id, trade.trade_id) is None
    assert await market.held() == 0


@pytest.mark.parametrize("password", ["", 12, "x" * 10_000])
async def test_a_malformed_password_at_approve_or_collect_is_a_400(
    market: Market, password: Any
) -> None:
    trade = await market.sell("0.5")
    with pytest.raises(DomainError) as caught:
        await market.approve(trade, password)
    assert caught.value.status == 400
    approved = await market.approve(trade)
    with pytest.raises(DomainError) as caught:
        await market.collect(approved, password)
    assert caught.value.status == 400
    assert (await market.settlement(trade)).status is S.AWAITING_PASSWORD


async def test_a_buy_approved_with_a_password_is_a_400(market: Market) -> None:
    trade = await market.buy("0.3")
    with pytest.raises(InvalidRequest, match="only when approving a sell"):
        await market.approve(trade, PASSWORD)
    assert (
        await market.desk.db.trades.get(trade.client_id, market.user, trade.trade_id)
    ).status is (TradeStatus.OPEN)


async def test_a_collection_that_failed_on_chain_is_collected_again_under_a_new_key(
    market: Market,
) -> None:
    trade = await market.approve(await market.sell("0.5"), PASSWORD)
    assert trade.settlement is not None
    await market.land(trade.settlement.tx_hash, Sighting.FAILED)
    # the fake chain took the coins when it accepted the transfer: a failed one gives them back
    market.desk.fund(market.desk.address(market.user, ETH), ETH, "0.5")
    failed = (await market.check(trade)).settlement
    assert failed is not None and failed.status is S.FAILED and failed.attempt == 1
    assert failed.reason is not None and "collect again with the password" in failed.reason
    assert await market.held() == units(ETH, "0.5") + fee()  # still held: nothing moved
    market.desk.clock.advance(3600)
    await market.run()  # a sell is never retried by the job: it needs the password
    assert (await market.settlement(trade)).status is S.FAILED

    again = (await market.collect(trade)).settlement
    assert again is not None and (again.status, again.attempt) == (S.SENT, 2)
    assert again.request_id == transfer_key(Side.SELL, trade.trade_id, 2)
    assert len(market.eth.broadcasts) == 2


async def test_a_sell_rejected_at_the_venue_releases_its_hold(market: Market) -> None:
    trade = await market.sell(fiat_amount="502", crypto_amount=None)
    with pytest.raises(DomainError) as caught:
        await market.approve(trade, PASSWORD)
    assert caught.value.status == 502
    released = await market.settlement(trade)
    assert released.status is S.RELEASED
    assert await market.held() == 0
    assert market.eth.broadcasts == []
    assert await market.moves(trade) == ["none -> reserved", "reserved -> released"]
    with pytest.raises(DomainError) as caught:
        await market.collect(trade)
    assert (caught.value.status, caught.value.message) == (
        409,
        "Nothing to collect: the sell did not complete",
    )


async def test_a_sell_whose_outcome_is_unknown_stays_reserved_until_it_completes(
    market: Market,
) -> None:
    trade = await market.sell(fiat_amount="504", crypto_amount=None)
    with pytest.raises(DomainError) as caught:
        await market.approve(trade)
    assert caught.value.status == 504
    assert (await market.settlement(trade)).status is S.RESERVED
    with pytest.raises(DomainError) as caught:
        await market.desk.container.settlements().collect(
            market.desk.caller(),
            await market.desk.db.trades.get(trade.client_id, market.user, trade.trade_id),
            PASSWORD,
        )
    assert caught.value.status == 409
    # the poll sees it complete: the collection now waits for the password
    checked = await market.check(trade)
    assert checked.status is TradeStatus.COMPLETED
    assert checked.settlement is not None and checked.settlement.status is S.AWAITING_PASSWORD


async def test_collect_polls_a_worked_sell_and_collects_once_it_completed(
    market: Market,
) -> None:
    trade = await market.approve(await market.sell(fiat_amount="202", crypto_amount=None))
    assert trade.status is TradeStatus.APPROVED
    assert trade.settlement is not None and trade.settlement.status is S.RESERVED
    collected = await market.collect(trade)
    assert collected.status is TradeStatus.COMPLETED
    assert collected.settlement is not None and collected.settlement.status is S.SENT


async def test_the_job_carries_on_a_reserved_sell_whose_trade_ended(market: Market) -> None:
    """A process killed between the fill and the settlement's move: the job moves it."""
    trade = await market.approve(await market.sell(fiat_amount="202", crypto_amount=None))
    await market.desk.container.trading().settle(
        await market.desk.db.trades.get(trade.client_id, market.user, trade.trade_id),
        request_id="job-1",
    )
    assert (await market.settlement(trade)).status is S.AWAITING_PASSWORD


async def test_collect_of_a_buy_or_a_stranger_is_refused(market: Market) -> None:
    buy = await market.approve(await market.buy("0.3"))
    with pytest.raises(DomainError) as caught:
        await market.collect(buy)
    assert (caught.value.status, caught.value.message) == (
        409,
        "Nothing to collect: only a completed sell's coins are collected",
    )
    open_sell = await market.sell("0.1")
    with pytest.raises(DomainError) as caught:
        await market.collect(open_sell)
    assert caught.value.status == 409


# -- buys: delivered from the desk ----------------------------------------------------------
async def test_a_buy_is_delivered_from_the_desk_and_settles(market: Market) -> None:
    trade = await market.approve(await market.buy("0.3"))
    assert trade.status is TradeStatus.COMPLETED
    assert trade.settlement is not None and trade.settlement.status is S.SENT
    body = market.eth.body_of(trade.settlement.tx_hash or "")
    assert (body["from"], body["to"], body["amount"]) == (
        market.platform[Chain.ETHEREUM],
        market.desk.address(market.user, ETH),
        units(ETH, "0.3"),
    )
    assert await market.held() == 0  # a buy holds nothing in the user's wallet
    await market.land(trade.settlement.tx_hash)
    market.desk.clock.advance(60)
    assert await market.run() == 1
    assert (await market.settlement(trade)).status is S.SETTLED
    assert await market.moves(trade) == [
        "none -> reserved",
        "reserved -> queued",
        f"queued -> sent: {trade.settlement.tx_hash}",
        f"sent -> settled: {trade.settlement.tx_hash}",
    ]


async def test_a_short_desk_delivers_once_topped_up(make_desk: DeskFactory) -> None:
    desk = await make_desk()
    user = await desk.user()
    market = Market(desk, user, await desk.platform())  # the desk holds nothing yet
    trade = await market.approve(await market.buy("0.3"))
    short = trade.settlement
    assert short is not None and short.status is S.SHORT and short.reason
    assert market.eth.broadcasts == []
    desk.clock.advance(30)
    await market.run()  # not due yet; still short
    assert (await market.settlement(trade)).status is S.SHORT

    desk.fund(market.platform[Chain.ETHEREUM], ETH, "1")
    desk.clock.advance(60)
    assert await market.run() == 1
    sent = await market.settlement(trade)
    assert (sent.status, sent.attempt) == (S.SENT, 1)
    for _ in range(3):  # run again and again: the same delivery, never a second one
        desk.clock.advance(60)
        await market.run()
        await market.check(trade)
    assert len(market.eth.broadcasts) == 1
    short_events = [e for e in await market.events() if e.type == "settlement.short"]
    assert len(short_events) == 1


async def test_a_buy_without_a_platform_wallet_is_short_with_the_reason(
    desk: Desk,
) -> None:
    user = await desk.user()
    market = Market(desk, user, {})
    trade = await market.approve(await market.buy("0.3"))
    assert trade.settlement is not None and trade.settlement.status is S.SHORT
    assert trade.settlement.reason == (
        "The api client has no platform wallet to deliver from; the operator provisions it"
    )


async def test_a_failed_delivery_is_retried_under_a_new_key_up_to_the_limit(
    market: Market,
) -> None:
    trade = await market.approve(await market.buy("0.3"))
    seen: list[str] = []
    for attempt in range(1, 4):
        current = await market.settlement(trade)
        assert (current.status, current.attempt) == (S.SENT, attempt)
        assert current.request_id == transfer_key(Side.BUY, trade.trade_id, attempt)
        seen.append(current.tx_hash or "")
        await market.land(current.tx_hash, Sighting.FAILED)
        market.desk.clock.advance(60)
        await market.run()  # sent -> failed
        market.desk.clock.advance(60)
        await market.run()  # failed -> the next attempt (while attempts are left)
    final = await market.settlement(trade)
    assert (final.status, final.attempt, final.due_at) == (S.FAILED, 3, None)
    assert len(set(seen)) == 3 and len(market.eth.broadcasts) == 3


async def test_a_buy_rejected_at_the_venue_is_released(market: Market) -> None:
    trade = await market.buy(fiat_amount="502", crypto_amount=None)
    with pytest.raises(DomainError):
        await market.approve(trade)
    assert (await market.settlement(trade)).status is S.RELEASED
    assert market.eth.broadcasts == []


# -- exactly once ---------------------------------------------------------------------------
async def test_following_the_same_trade_twice_moves_it_once(market: Market) -> None:
    trade = await market.approve(await market.buy("0.3"))
    for _ in range(3):
        await market.check(trade)
        await market.settlements.follow(market.desk.caller(), trade)
    assert len(market.eth.broadcasts) == 1
    assert len(await market.events()) == 2  # reserved, sent (queued has no event)


async def test_concurrent_collects_sign_and_broadcast_once(market: Market) -> None:
    trade = await market.approve(await market.sell("0.5"))
    answers = await asyncio.gather(
        *(market.collect(trade) for _ in range(5)), return_exceptions=True
    )
    assert len(market.eth.broadcasts) == 1
    ok = [a for a in answers if isinstance(a, Trade)]
    assert ok, answers
    for a in answers:
        assert isinstance(a, Trade) or (isinstance(a, DomainError) and a.status == 409), a
    assert [e.type for e in await market.events()].count("settlement.sent") == 1
    assert (await market.settlement(trade)).attempt == 1


async def test_concurrent_follows_of_a_buy_deliver_once(market: Market) -> None:
    trade = await market.buy("0.3")
    approved = await market.approve(trade)
    stored = await market.desk.db.trades.get(trade.client_id, market.user, trade.trade_id)
    await asyncio.gather(
        *(market.settlements.follow(market.desk.caller(), stored) for _ in range(5)),
        market.run(),
        market.check(approved),
    )
    assert len(market.eth.broadcasts) == 1


async def test_a_job_run_racing_the_approval_delivers_once(make_desk: DeskFactory) -> None:
    desk = await make_desk()
    market = await _market(desk)
    market.eth.holds["broadcast"] = asyncio.Event()  # the approval's broadcast waits
    trade = await market.buy("0.3")
    approval = asyncio.create_task(market.approve(trade))
    for _ in range(200):
        await asyncio.sleep(0)
    desk.clock.advance(600)
    run = asyncio.create_task(market.run())
    for _ in range(200):
        await asyncio.sleep(0)
    market.eth.holds["broadcast"].set()
    await asyncio.gather(approval, run, return_exceptions=True)
    desk.clock.advance(600)
    await market.run()
    assert len(set(market.eth.broadcasts)) == 1
    assert (await market.settlement(trade)).attempt == 1


async def test_twenty_concurrent_approvals_of_one_buy_make_one_order_and_one_delivery(
    market: Market,
) -> None:
    trade = await market.buy("0.3")
    await asyncio.gather(*(market.approve(trade) for _ in range(20)), return_exceptions=True)
    assert len(market.eth.broadcasts) == 1
    reserved = [e for e in await market.events() if e.type == "settlement.reserved"]
    assert len(reserved) == 1


async def test_an_unknown_outcome_resumes_the_same_key(market: Market) -> None:
    market.eth.outcomes.append(Outcome.ANSWER_LOST)
    trade = await market.approve(await market.buy("0.3"))
    first = await market.settlement(trade)
    assert first.attempt == 1
    assert first.status in (S.QUEUED, S.SENT)
    market.desk.clock.advance(120)
    await market.run()
    again = await market.settlement(trade)
    assert again.attempt == 1  # never a new key while the first may still land
    assert again.request_id == transfer_key(Side.BUY, trade.trade_id, 1)
    assert len(set(market.eth.broadcasts)) == 1


async def test_a_lost_compare_and_set_writes_no_entry_and_no_event(market: Market) -> None:
    trade = await market.approve(await market.sell("0.5"))
    stale = await market.settlement(trade)
    await market.collect(trade)  # awaiting_password -> sent
    entries = len(await market.desk.audit())
    events = len(await market.events(""))
    moved = await market.settlements._move(  # a mover that read before the collection
        market.desk.caller(), stale, stale.moved(S.RELEASED, market.desk.clock.now())
    )
    assert moved.status is S.SENT  # the winner's, as stored
    assert len(await market.desk.audit()) == entries
    assert len(await market.events("")) == events


async def test_every_move_carries_its_event(market: Market) -> None:
    sell = await market.approve(await market.sell("0.5"), PASSWORD)
    assert sell.settlement is not None
    await market.land(sell.settlement.tx_hash)
    await market.check(sell)
    events = await market.events()
    assert [e.type for e in events] == [
        "settlement.reserved",
        "settlement.awaiting_password",
        "settlement.sent",
        "settlement.settled",
    ]
    for event in events:
        assert set(event.data) == {
            "tradeId",
            "side",
            "assetId",
            "symbol",
            "amount",
            "status",
            "txHash",
            "reason",
        }
        assert event.data["tradeId"] == sell.trade_id and event.data["amount"] == "0.5"
    entries = [
        e
        for e in await market.desk.audit()
        if e.target == sell.trade_id
        and e.action != "trade.settle"
        and e.detail
        and "->" in e.detail
    ]
    assert [e.action for e in entries] == [
        "trade.reserve",
        "trade.settlement",
        "trade.collect",
        "trade.settlement",
    ]
    assert all(e.event is not None for e in entries)


# -- holds ----------------------------------------------------------------------------------
async def test_a_second_sell_of_reserved_coins_is_refused_naming_the_reserved(
    market: Market,
) -> None:
    await market.approve(await market.sell("0.7"))
    second = await market.sell("0.1")  # a quote: what is free covers it
    with pytest.raises(DomainError) as caught:
        await market.approve(await market.sell("0.3"))
    assert caught.value.status == 400
    assert caught.value.message == (
        "The wallet holds 1 ETH, of which 0.29958 ETH are free (0.70042 ETH reserved for "
        "sells being settled or spent by sends in flight), less than the 0.3 ETH to sell"
    )
    approved = await market.approve(second)
    assert approved.settlement is not None


async def test_a_send_of_reserved_coins_is_refused_and_nothing_is_signed(
    market: Market,
) -> None:
    await market.approve(await market.sell("0.7"))
    with pytest.raises(DomainError) as caught:
        await market.desk.send(market.user, ETH, "0.5", request_id="send-reserved")
    assert caught.value.status == 400
    assert "reserved for sells" in caught.value.message
    assert market.eth.broadcasts == []
    record = await market.desk.db.sends.get(market.desk.client.client_id, "send-reserved")
    assert record is None or record.raw_tx is None
    receipt = await market.desk.send(market.user, ETH, "0.2", request_id="send-free")
    assert receipt.status == "pending"


async def test_a_send_may_not_pay_its_fee_out_of_reserved_coins(market: Market) -> None:
    await market.approve(await market.sell("0.5"))  # holds 0.5 ETH and the collection's fee
    free = units(ETH, "1") - await market.held()
    amount = free  # the free coins, but its own fee would come out of the held ones
    with pytest.raises(DomainError) as caught:
        await market.desk.send(market.user, ETH, format_balance(amount, 18))
    assert caught.value.status == 400
    assert caught.value.message == (
        "Insufficient ETH balance: the wallet holds 1 ETH, of which 0.50042 ETH are reserved "
        "for sells being settled; 0.49958 ETH can be sent, the send needs 0.5 ETH with its "
        "network fee"
    )
    assert market.eth.broadcasts == []


async def test_a_token_sell_holds_its_fee_in_the_native_coin(market: Market) -> None:
    await market.approve(await market.sell("40", asset_id=USDT))
    assert await market.held(USDT) == units(USDT, "40")
    assert await market.held(ETH) == fee(USDT)


async def test_a_platform_paid_collection_holds_no_fee(market: Market) -> None:
    from walletcore.domain.assets import FeePayer

    await market.desk.set_client(fee_payer=FeePayer.PLATFORM)
    trade = await market.approve(await market.sell("0.5"))
    assert (await market.settlement(trade)).fee_units == 0
    assert await market.held() == units(ETH, "0.5")


def test_the_holding_and_due_statuses() -> None:
    assert {s for s in S if s.holds} == {S.RESERVED, S.AWAITING_PASSWORD, S.SENT, S.FAILED}
    assert HOLDING_STATUSES.isdisjoint({S.RELEASED, S.SETTLED, S.QUEUED, S.SHORT})
    assert S.AWAITING_PASSWORD not in DUE_STATUSES  # only a request with the password


# -- the reserved request ids, and turning it off ------------------------------------------
async def test_a_client_x_request_id_may_not_take_the_reserved_prefix(market: Market) -> None:
    key = f"{RESERVED_REQUEST_PREFIX}delivery:abc:1"
    with pytest.raises(InvalidRequest, match="may not start with walletcore:"):
        await market.desk.send(market.user, ETH, "0.1", request_id=key)
    assert market.eth.broadcasts == []
    assert await market.desk.db.sends.get(market.desk.client.client_id, key) is None


async def test_settlement_disabled_leaves_trades_as_they_were(make_desk: DeskFactory) -> None:
    desk = await make_desk()
    desk.container.settlement_settings.override(providers.Object(SettlementSettings(enabled=False)))
    market = await _market(desk)
    sell = await market.approve(await market.sell("0.9"))
    buy = await market.approve(await market.buy("0.3"))
    assert sell.settlement is None and buy.settlement is None
    assert sell.status is TradeStatus.COMPLETED
    assert await market.held() == 0
    assert await desk.db.settlements.get(desk.client.client_id, sell.trade_id) is None
    second = await market.approve(await market.sell("0.9"))  # nothing is held
    assert second.status is TradeStatus.COMPLETED
    assert market.eth.broadcasts == []
    assert await desk.container.jobs().settle_coins() == 0
    with pytest.raises(InvalidRequest):
        await market.collect(sell)


# -- a property: approvals and sends of one wallet never spend held coins -----------------
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(
        st.tuples(st.sampled_from(["sell", "send"]), st.integers(min_value=1, max_value=6)),
        min_size=1,
        max_size=6,
    )
)
def test_approvals_and_sends_never_hold_and_spend_more_than_the_balance(
    make_desk: DeskFactory, steps: list[tuple[str, int]]
) -> None:
    async def scenario() -> None:
        desk = await make_desk()
        market = await _market(desk)

        async def one(n: int, kind: str, tenths: int) -> None:
            amount = f"0.{tenths}"
            try:
                if kind == "sell":
                    await market.approve(await market.sell(amount))
                else:
                    await desk.send(market.user, ETH, amount, request_id=f"send-{n}")
            except DomainError as exc:
                assert exc.status == 400, exc

        await asyncio.gather(*(one(n, k, t) for n, (k, t) in enumerate(steps)))
        balance = desk.held(desk.address(market.user, ETH), ETH)
        # the fake chain takes a send's coins (and its fee) when it accepts it: what the
        # wallet's sells hold is still all there, to be collected
        assert await market.held() <= balance

    asyncio.run(scenario())


async def test_sends_elsewhere_are_unaffected_by_another_users_holds(market: Market) -> None:
    other = await market.desk.user()
    market.desk.fund(market.desk.address(other, ETH), ETH, "1")
    await market.approve(await market.sell("0.9"))
    receipt = await market.desk.send(other, ETH, "0.9", recipient=elsewhere(Chain.ETHEREUM))
    assert receipt.status == "pending"


async def test_a_bumped_transfer_shows_its_current_transaction(market: Market) -> None:
    trade = await market.approve(await market.buy("0.3"))
    assert trade.settlement is not None
    first = trade.settlement.tx_hash
    for _ in range(2):  # pending past the stuck time: the lifecycle bumps its fee
        market.desk.clock.advance(61)
        await market.desk.follow()
    record = await market.desk.record(transfer_key(Side.BUY, trade.trade_id, 1))
    assert record.tx_hash != first  # replaced under its nonce
    shown = (await market.check(trade)).settlement
    assert shown is not None and (shown.status, shown.tx_hash) == (S.SENT, record.tx_hash)
    await market.land(record.tx_hash)
    settled = (await market.check(trade)).settlement
    assert settled is not None and (settled.status, settled.tx_hash) == (S.SETTLED, record.tx_hash)
    assert len({b["nonce"] for b in market.eth.accepted.values()}) == 1


@pytest.mark.parametrize("password", ["", 12, "x" * 257])
async def test_a_malformed_password_is_a_400_on_an_approval_answered_as_it_stands(
    market: Market, password: Any
) -> None:
    trade = await market.approve(await market.buy("0.3"))
    assert (await market.approve(trade)).status is TradeStatus.COMPLETED  # a replay
    with pytest.raises(InvalidRequest, match="password"):
        await market.approve(trade, password)


async def test_a_sell_of_the_whole_native_balance_cannot_hold_its_collection_fee(
    market: Market,
) -> None:
    """The collection's fee is held beside the coins: together they must be free."""
    with pytest.raises(DomainError) as caught:
        await market.approve(await market.sell("1"))
    assert caught.value.status == 400
    assert caught.value.message == (
        "The wallet holds 1 ETH, less than the 1 ETH to sell and the 0.00042 ETH network fee "
        "of collecting them"
    )
    assert await market.held() == 0
    trade = await market.approve(await market.sell("0.99958"))
    assert trade.settlement is not None and await market.held() == units(ETH, "1")


class _PlacesNothingOnce:
    """The venue, answering its first execution with no usable price: nothing placed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.refused = False

    async def execute(self, order: Any) -> Any:
        if not self.refused:
            self.refused = True
            raise PriceUnavailable()
        return await self.inner.execute(order)

    async def status(self, order: Any) -> Any:
        return await self.inner.status(order)

    async def cancel(self, order: Any) -> Any:
        return await self.inner.cancel(order)


async def test_a_sell_the_venue_placed_nothing_for_is_released_then_reserved_again(
    make_desk: DeskFactory,
) -> None:
    desk = await make_desk()
    venue = _PlacesNothingOnce(desk.container.venue())
    desk.container.venue.override(providers.Object(venue))
    market = await _market(desk)
    trade = await market.sell("0.5")
    with pytest.raises(PriceUnavailable):
        await market.approve(trade)
    released = await market.settlement(trade)
    assert released.status is S.RELEASED
    assert await market.held() == 0
    stored = await desk.db.trades.get(trade.client_id, market.user, trade.trade_id)
    assert stored.status is TradeStatus.OPEN  # approve may be retried
    again = await market.approve(trade)
    assert again.settlement is not None and again.settlement.status is S.AWAITING_PASSWORD
    assert await market.held() == units(ETH, "0.5") + fee()
    assert await market.moves(trade) == [
        "none -> reserved",
        "reserved -> released",
        "released -> reserved",
        "reserved -> awaiting_password",
    ]


async def test_a_sell_whose_quote_lapsed_unapproved_has_no_settlement(market: Market) -> None:
    trade = await market.sell("0.5")
    market.desk.clock.advance(120)
    with pytest.raises(DomainError) as caught:
        await market.approve(trade)
    assert caught.value.status == 409
    assert await market.desk.db.settlements.get(trade.client_id, trade.trade_id) is None
    assert (await market.check(trade)).settlement is None


# -- the withdrawal policy checks the desk's own transfers -----------------------------------
async def _policy(market: Market, *rules: dict[str, Any], **document: Any) -> Any:
    policies = market.desk.container.policies()
    await policies.set_policy(
        market.desk.client.client_id,
        {"rules": list(rules), "default": "allow", **document},
        set_by="test",
    )
    return policies


async def test_a_delivery_the_policy_refuses_is_short_naming_the_rule(market: Market) -> None:
    await _policy(
        market,
        {"name": "no-deliveries", "wallet": "platform", "action": "deny", "origins": ["delivery"]},
    )
    trade = await market.approve(await market.buy("0.3"))
    assert trade.status is TradeStatus.COMPLETED
    settlement = await market.settlement(trade)
    assert settlement.status is S.SHORT
    assert settlement.reason == (
        "Transfer refused by withdrawal policy rule no-deliveries: the rule denies such transfers"
    )
    assert market.eth.prepared == []
    (decision,) = await market.desk.audit("policy.decide")
    assert (decision.outcome, decision.target) == ("403", "no-deliveries")


async def test_a_delivery_held_for_approval_is_sent_once_approved(market: Market) -> None:
    policies = await _policy(
        market,
        {
            "name": "big-deliveries",
            "wallet": "platform",
            "action": "require_approval",
            "approvals": 1,
            "origins": ["delivery"],
        },
    )
    operator, _ = await policies.add_operator("olga")
    trade = await market.approve(await market.buy("0.3"))
    settlement = await market.settlement(trade)
    assert settlement.status is S.SHORT
    assert settlement.reason is not None and "waits for 1 operator approval" in settlement.reason
    (held,) = await policies.approvals(client_id=market.desk.client.client_id)
    assert held.initiated_by == "desk" and held.transfer.origin == "delivery"
    # the job tries again: still held, nothing prepared
    market.desk.clock.advance(60)
    await market.run()
    assert market.eth.prepared == []
    await policies.approve(held.id, operator)
    market.desk.clock.advance(60)
    await market.run()
    sent = await market.settlement(trade)
    assert sent.status is S.SENT
    assert len(market.eth.prepared) == 1
    market.desk.clock.advance(60)
    await market.run()
    assert len(market.eth.prepared) == 1


async def test_a_collection_the_policy_refuses_keeps_the_sell_waiting(market: Market) -> None:
    await _policy(
        market,
        {"name": "no-collections", "wallet": "user", "action": "deny", "origins": ["collection"]},
    )
    trade = await market.approve(await market.sell("0.5"), PASSWORD)
    assert trade.status is TradeStatus.COMPLETED
    settlement = await market.settlement(trade)
    assert settlement.status is S.AWAITING_PASSWORD
    assert settlement.reason is not None and "no-collections" in settlement.reason
    assert market.eth.prepared == []
    # still reserved for the collection, with its network fee
    assert await market.held() == units(ETH, "0.5") + fee()
