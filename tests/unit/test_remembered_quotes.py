"""An approval in the process that made the quote reads nothing first
(walletcore.services.trading): it decides on the quote it remembers, and the compare-and-set
open -> executing is what tells whether the trade is still open. Every answer is the one an
approval that reads the trade gives, whichever process moved the trade meanwhile."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import pytest

from walletcore.domain.errors import DomainError, QuoteLapsed, TradeNotFound
from walletcore.domain.money import KEPT_PLACES, keep_places
from walletcore.domain.trade import Trade, TradeStatus
from walletcore.ports import Clock, Storage
from walletcore.services import trading as trading_module
from walletcore.testing import FixedHoldings
from walletcore.testing.markets import FixedPrices

from .conftest import Core, CoreFactory, YieldingStorage


async def counting_core(make_core: CoreFactory, **changes: Any) -> Core:
    """A core whose storage counts the reads of a trade (`YieldingStorage.trade_reads`)."""
    return await make_core(storage=YieldingStorage(), **changes)


def other_process(core: Core) -> Any:
    """A second service on the same storage, as another worker has: it remembers nothing.
    The core's own service stays the one `core.trading` gave before."""
    mine = core.trading
    core.container.trading.reset()
    other = core.container.trading()
    assert other is not mine
    return other


async def approve(core: Core, service: Any, trade: Trade) -> Trade:
    result: Trade = await service.approve(
        core.caller(), user_id=core.user_id, trade_id=trade.trade_id
    )
    return result


async def test_an_approval_of_this_processs_quote_reads_no_trade(make_core: CoreFactory) -> None:
    core = await counting_core(make_core)
    storage = core.storage
    assert isinstance(storage, YieldingStorage)
    trade = await core.sell(crypto_amount="0.5")
    storage.trade_reads.clear()

    done = await approve(core, core.trading, trade)

    assert done.status is TradeStatus.COMPLETED
    assert storage.trade_reads == []
    assert done == await core.stored(trade)  # what it answered is what is stored
    assert len(core.venue.executed) == 1
    logged = [(e.action, e.outcome) for e in await core.db.audit.newest(10)]
    assert ("trade.approve", "ok") in logged and ("trade.settle", "ok") in logged


async def test_it_answers_what_an_approval_that_reads_answers(make_core: CoreFactory) -> None:
    """The same quote approved unread here and read in another process: the same trade,
    the same order at the venue (the clock is the same for both)."""
    here = await counting_core(make_core)
    there = await counting_core(make_core)
    quoted_here = await here.sell(crypto_amount="0.5")
    quoted_there = await there.sell(crypto_amount="0.5")
    reader = other_process(there)

    unread = await approve(here, here.trading, quoted_here)
    read = await approve(there, reader, quoted_there)

    assert there.storage.trade_reads == [quoted_there.trade_id]  # type: ignore[attr-defined]
    assert here.storage.trade_reads == []  # type: ignore[attr-defined]

    def terms(trade: Trade) -> tuple[Any, ...]:
        return (
            trade.status,
            trade.quote,
            trade.approved_at,
            trade.approved,
            trade.executed,
            trade.completed_at,
            trade.side,
            trade.asset_id,
            trade.fiat,
            trade.fixed_leg,
        )

    assert terms(unread) == terms(read)
    order_here, order_there = here.venue.executed[0], there.venue.executed[0]
    assert (order_here.fixed_amount, order_here.quoted_price, order_here.expires_at) == (
        order_there.fixed_amount,
        order_there.quoted_price,
        order_there.expires_at,
    )


async def test_a_quote_another_process_cancelled_is_refused_and_never_executed(
    make_core: CoreFactory,
) -> None:
    core = await counting_core(make_core)
    mine = core.trading
    trade = await core.sell(crypto_amount="0.5")
    await other_process(core).cancel(core.caller(), user_id=core.user_id, trade_id=trade.trade_id)

    with pytest.raises(DomainError) as refused:
        await approve(core, mine, trade)

    assert refused.value.status == 409 and "cancelled" in str(refused.value)
    assert not core.venue.executed
    assert (await core.stored(trade)).status is TradeStatus.CANCELLED
    # the compare-and-set told it: the quote is forgotten, the next approval reads
    core.storage.trade_reads.clear()  # type: ignore[attr-defined]
    with pytest.raises(DomainError):
        await approve(core, mine, trade)
    assert core.storage.trade_reads == [trade.trade_id]  # type: ignore[attr-defined]


async def test_a_quote_another_process_approved_is_a_replay_here(make_core: CoreFactory) -> None:
    core = await counting_core(make_core)
    mine = core.trading
    trade = await core.sell(crypto_amount="0.5")
    settled = await approve(core, other_process(core), trade)

    again = await approve(core, mine, trade)

    assert again == settled == await core.stored(trade)
    assert len(core.venue.executed) == 1  # executed once, by the other process
    outcomes = [e.outcome for e in await core.db.audit.newest(20) if e.action == "trade.approve"]
    assert sorted(outcomes) == ["ok", "replay"]


async def test_a_quote_another_process_reopened_is_approved_as_stored(
    make_core: CoreFactory,
) -> None:
    """executing -> open (the venue placed nothing) restores the quote field for field: the
    remembered quote is still the stored one, and approving it here is right."""
    core = await counting_core(make_core)
    mine = core.trading
    trade = await core.sell(crypto_amount="0.5")
    executing = trade.start_approval(core.clock.now())
    assert await core.db.trades.swap(TradeStatus.OPEN, executing)
    assert await core.db.trades.swap(TradeStatus.EXECUTING, executing.reopen())
    assert await core.stored(trade) == trade

    done = await approve(core, mine, trade)

    assert done.status is TradeStatus.COMPLETED and done == await core.stored(trade)


async def test_another_users_approval_of_the_trade_is_a_404(
    make_core: CoreFactory, make_user: Callable[[Storage, Clock, str], Awaitable[str]]
) -> None:
    core = await counting_core(make_core)
    trade = await core.sell(crypto_amount="0.5")
    other_user = await make_user(core.storage, core.clock, core.client.client_id)
    with pytest.raises(TradeNotFound):
        await core.trading.approve(core.caller(), user_id=other_user, trade_id=trade.trade_id)
    assert (await core.stored(trade)).status is TradeStatus.OPEN and not core.venue.executed
    # the owner's approval is untouched by it
    assert (await approve(core, core.trading, trade)).status is TradeStatus.COMPLETED


async def test_a_lapsed_remembered_quote_is_read_and_expired(make_core: CoreFactory) -> None:
    core = await counting_core(make_core)
    trade = await core.sell(crypto_amount="0.5")
    core.clock.advance(61)

    with pytest.raises(QuoteLapsed):
        await approve(core, core.trading, trade)

    stored = await core.stored(trade)
    assert stored.status is TradeStatus.EXPIRED and stored.completed_at == trade.quote.expires_at
    assert core.storage.trade_reads.count(trade.trade_id) >= 1  # type: ignore[attr-defined]
    assert not core.venue.executed


async def test_the_oldest_quotes_are_forgotten_past_the_bound(
    make_core: CoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trading_module, "_QUOTES_REMEMBERED", 3)
    core = await counting_core(make_core)
    trades = [await core.sell(crypto_amount="0.1") for _ in range(4)]
    core.storage.trade_reads.clear()  # type: ignore[attr-defined]

    for trade in trades:
        assert (await approve(core, core.trading, trade)).status is TradeStatus.COMPLETED

    assert core.storage.trade_reads == [trades[0].trade_id]  # type: ignore[attr-defined]
    assert len(core.venue.executed) == 4


async def test_an_unbacked_approval_changes_nothing_and_may_be_retried(
    make_core: CoreFactory,
) -> None:
    holdings = FixedHoldings(units=10**8)  # 1 BTC
    core = await make_core(storage=YieldingStorage(), holdings=holdings)
    trade = await core.sell(crypto_amount="0.5")
    holdings.units_held = 10**7  # 0.1 BTC left: the sell is no longer backed
    with pytest.raises(DomainError) as refused:
        await approve(core, core.trading, trade)
    assert refused.value.status == 400
    assert await core.stored(trade) == trade and not core.venue.executed
    core.storage.trade_reads.clear()  # type: ignore[attr-defined]

    holdings.units_held = 10**8
    assert (await approve(core, core.trading, trade)).status is TradeStatus.COMPLETED
    assert core.storage.trade_reads == []  # type: ignore[attr-defined]


async def test_a_quotes_figures_are_cut_to_the_places_stores_keep(
    make_core: CoreFactory,
) -> None:
    """A price with more places than any store keeps is cut (never rounded) when quoted:
    the quote a sell answers is the trade stored, and what an approval remembers."""
    long_price = Decimal("60123." + "9" * 30)
    core = await make_core(prices=FixedPrices(default=long_price))
    trade = await core.sell(crypto_amount="0.5")

    assert trade.quote.price == Decimal("60123." + "9" * KEPT_PLACES)
    assert trade.quote.fiat_amount is not None
    assert -trade.quote.fiat_amount.as_tuple().exponent <= KEPT_PLACES  # type: ignore[operator]
    assert trade.quote.fiat_amount == keep_places(Decimal("0.5") * trade.quote.price)
    assert await core.stored(trade) == trade


async def test_lapsed_quotes_are_forgotten_as_new_ones_are_made(make_core: CoreFactory) -> None:
    """What is remembered is the quotes still alive: a quote made after others lapsed
    drops them (the service's quotes all live as long, so the oldest lapse first)."""
    core = await make_core()
    service = core.trading
    old = [await core.sell(crypto_amount="0.1") for _ in range(3)]
    core.clock.advance(30)
    middle = await core.sell(crypto_amount="0.1")
    core.clock.advance(31)  # the first three lapsed; `middle` has not
    newest = await core.sell(crypto_amount="0.1")

    remembered = {key[2] for key in service._quoted}
    assert remembered == {middle.trade_id, newest.trade_id}
    assert not remembered & {t.trade_id for t in old}
