"""The expiry writes of one process (walletcore.services.expiries): readers of a lapsed
quote share one write, a terminal answer is remembered, a failed write is not."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from decimal import Decimal

import pytest

from walletcore.clock import ManualClock
from walletcore.domain.assets import Fiat
from walletcore.domain.clients import ApiClient
from walletcore.domain.errors import StorageUnavailable
from walletcore.domain.ids import new_id
from walletcore.domain.trade import FixedLeg, Quote, Side, Trade, TradeStatus
from walletcore.services import expiries as expiries_module
from walletcore.services.context import Caller
from walletcore.services.expiries import SharedExpiries

CALLER = Caller(ApiClient(new_id(), "Acme", "0" * 64), "req-1")


def lapsed(clock: ManualClock) -> Trade:
    """An open quote made a minute ago, lapsed now."""
    made = clock.now() - timedelta(seconds=61)
    return Trade(
        trade_id=new_id(),
        client_id=CALLER.client_id,
        user_id=new_id(),
        side=Side.SELL,
        asset_id=1,
        symbol="BTC",
        fiat=Fiat.USD,
        fixed_leg=FixedLeg.CRYPTO,
        quote=Quote(Decimal("0.5"), Decimal(30000), Decimal(60000), made + timedelta(60)),
        status=TradeStatus.OPEN,
        created_at=made,
    )


class Writes:
    """The `store` of a service: counts the writes, yields before answering."""

    def __init__(self, clock: ManualClock, *, fail: bool = False) -> None:
        self.clock = clock
        self.fail = fail
        self.written: list[str] = []

    async def __call__(self, caller: Caller, trade: Trade) -> Trade:
        self.written.append(trade.trade_id)
        await asyncio.sleep(0)
        if self.fail:
            raise StorageUnavailable()
        return trade.expire(self.clock.now())


async def test_readers_of_one_lapsed_quote_share_one_write(clock: ManualClock) -> None:
    writes = Writes(clock)
    expiries = SharedExpiries(writes)
    trade = lapsed(clock)

    answers = await asyncio.gather(*(expiries.expire(CALLER, trade) for _ in range(20)))

    assert writes.written == [trade.trade_id]
    assert {a.status for a in answers} == {TradeStatus.EXPIRED} and len(set(answers)) == 1


async def test_a_reader_after_the_write_gets_its_terminal_trade(clock: ManualClock) -> None:
    writes = Writes(clock)
    expiries = SharedExpiries(writes)
    trade = lapsed(clock)
    first = await expiries.expire(CALLER, trade)

    again = await expiries.expire(CALLER, trade)  # it read the quote `open` before

    assert again is first and writes.written == [trade.trade_id]


async def test_a_failed_write_is_not_remembered(clock: ManualClock) -> None:
    writes = Writes(clock, fail=True)
    expiries = SharedExpiries(writes)
    trade = lapsed(clock)
    with pytest.raises(StorageUnavailable):
        await expiries.expire(CALLER, trade)

    writes.fail = False
    assert (await expiries.expire(CALLER, trade)).status is TradeStatus.EXPIRED
    assert writes.written == [trade.trade_id, trade.trade_id]


async def test_what_is_remembered_is_bounded(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(expiries_module, "EXPIRED_REMEMBERED", 2)
    writes = Writes(clock)
    expiries = SharedExpiries(writes)
    trades = [lapsed(clock) for _ in range(3)]
    for trade in trades:
        await expiries.expire(CALLER, trade)

    for trade in (trades[2], trades[1], trades[0]):  # the oldest was forgotten: written again
        await expiries.expire(CALLER, trade)

    assert writes.written == [t.trade_id for t in trades] + [trades[0].trade_id]
