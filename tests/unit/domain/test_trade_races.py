"""Compare-and-set under concurrency: an open trade is approved once, or cancelled, never both."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import pytest

from walletcore.domain.errors import DomainError
from walletcore.domain.trade import Trade, TradeStatus

from ..conftest import Core, CoreFactory, CountingVenue, YieldingStorage


@pytest.fixture
def racing_storage() -> Callable[[], YieldingStorage]:
    """A factory of in-memory storages whose reads interleave (the SQL ones race for real:
    tests/integration/sql/test_sql_concurrency.py)."""
    return YieldingStorage


async def test_swap_trade_is_a_compare_and_set(core) -> None:  # type: ignore[no-untyped-def]
    trade = await core.sell(crypto_amount="0.5")
    cancelled = trade.cancel(core.clock.now())
    assert not await core.db.trades.swap(TradeStatus.EXECUTING, cancelled)
    assert (await core.stored(trade)).status is TradeStatus.OPEN
    assert await core.db.trades.swap(TradeStatus.OPEN, cancelled)
    assert not await core.db.trades.swap(TradeStatus.OPEN, cancelled)  # a second swap loses
    assert (await core.stored(trade)).status is TradeStatus.CANCELLED
    assert not await core.db.trades.swap(TradeStatus.OPEN, replace(trade, trade_id="f" * 24))


@pytest.mark.parametrize("venue_delay", [0.0, 0.01], ids=["instant venue", "slow venue"])
async def test_fifty_concurrent_approvals_execute_one_order(
    make_core: CoreFactory, racing_storage: Callable[[], YieldingStorage], venue_delay: float
) -> None:
    core = await make_core(storage=racing_storage(), venue=CountingVenue(delay=venue_delay))
    trade = await core.sell(crypto_amount="0.5")

    outcomes = await asyncio.gather(
        *(
            core.trading.approve(core.caller(), user_id=core.user_id, trade_id=trade.trade_id)
            for _ in range(50)
        ),
        return_exceptions=True,
    )

    assert len(core.venue.executed) == 1
    stored = await core.stored(trade)
    assert stored.status is TradeStatus.COMPLETED
    answers = [o for o in outcomes if isinstance(o, Trade)]
    refusals = [o for o in outcomes if not isinstance(o, Trade)]
    assert answers, "the winning approval answers 200"
    assert all(isinstance(r, DomainError) and r.status == 409 for r in refusals), refusals
    # every 200 is the settled trade (the winner, or a replay of it)
    assert all(a == stored for a in answers)
    if venue_delay:
        # while the order is at the venue, the trade is executing: every loser is a 409
        assert len(answers) == 1 and len(refusals) == 49
    # The log tells the one execution from the rest: one `ok`, the 200s that answered the
    # stored trade are `replay`, the refusals their status.
    outcomes_logged = Counter(
        e.outcome for e in await core.db.audit.newest(1000) if e.action == "trade.approve"
    )
    assert outcomes_logged == Counter(
        {"ok": 1, "replay": len(answers) - 1, "409": len(refusals)}
    )  # (a zero count equals a missing one)


async def test_approves_of_a_settled_trade_are_all_replays(
    make_core: CoreFactory, racing_storage: Callable[[], YieldingStorage]
) -> None:
    core = await make_core(storage=racing_storage())
    trade = await core.sell(crypto_amount="0.5")
    await core.trading.approve(core.caller(), user_id=core.user_id, trade_id=trade.trade_id)
    answers = await asyncio.gather(
        *(
            core.trading.approve(core.caller(), user_id=core.user_id, trade_id=trade.trade_id)
            for _ in range(49)
        )
    )
    assert all(a == answers[0] for a in answers) and len(core.venue.executed) == 1
    logged = [e for e in await core.db.audit.newest(1000) if e.action == "trade.approve"]
    assert Counter(e.outcome for e in logged) == {"ok": 1, "replay": 49}
    assert [e.action for e in await core.db.audit.newest(1000)].count("trade.settle") == 1


async def test_a_quote_lapsing_under_many_pollers_is_expired_by_one_write(
    make_core: CoreFactory, racing_storage: Callable[[], YieldingStorage]
) -> None:
    """200 `/trade` polls read the quote `open` past its expiry together: one of them
    stores the expiry, the others wait for it and read; none writes its own."""
    core = await make_core(storage=racing_storage())
    trade = await core.sell(crypto_amount="0.5")
    core.clock.advance(61)
    assert isinstance(core.storage, YieldingStorage)
    swaps = core.storage.swaps
    swaps.clear()
    answers = await asyncio.gather(
        *(
            core.trading.get(core.caller(), user_id=core.user_id, trade_id=trade.trade_id)
            for _ in range(200)
        )
    )
    stored = await core.stored(trade)
    assert stored.status is TradeStatus.EXPIRED and stored.completed_at == trade.quote.expires_at
    assert all(a == stored for a in answers)
    assert swaps == [TradeStatus.OPEN]  # one write attempt in all
    expiries = [e for e in await core.db.audit.newest(1000) if e.action == "trade.expire"]
    assert [(e.outcome, e.target) for e in expiries] == [("ok", trade.trade_id)]
    # Lists and later polls find it expired: no write, no entry.
    await core.trading.list(core.caller(), user_id=core.user_id)
    await core.trading.get(core.caller(), user_id=core.user_id, trade_id=trade.trade_id)
    assert swaps == [TradeStatus.OPEN]
    assert len([e for e in await core.db.audit.newest(1000) if e.action == "trade.expire"]) == 1


@pytest.mark.parametrize("approve_first", [True, False])
@pytest.mark.parametrize("venue_delay", [0.0, 0.01], ids=["instant venue", "slow venue"])
async def test_approve_racing_cancel_ends_in_exactly_one(
    make_core: CoreFactory,
    racing_storage: Callable[[], YieldingStorage],
    approve_first: bool,
    venue_delay: float,
) -> None:
    core = await make_core(storage=racing_storage(), venue=CountingVenue(delay=venue_delay))
    trade = await core.sell(crypto_amount="0.5")
    approve = core.trading.approve(core.caller(), user_id=core.user_id, trade_id=trade.trade_id)
    cancel = core.trading.cancel(core.caller(), user_id=core.user_id, trade_id=trade.trade_id)
    calls = [approve, cancel] if approve_first else [cancel, approve]

    results = await asyncio.gather(*calls, return_exceptions=True)
    approved, cancelled = results if approve_first else results[::-1]

    stored = await core.stored(trade)
    if stored.status is TradeStatus.COMPLETED:
        assert approved == stored and len(core.venue.executed) == 1
        assert isinstance(cancelled, DomainError) and cancelled.status == 409
    else:
        assert stored.status is TradeStatus.CANCELLED
        assert cancelled == stored and not core.venue.executed
        assert isinstance(approved, DomainError) and approved.status == 409


@pytest.mark.parametrize("remembered", [True, False], ids=["quote remembered", "quote read"])
async def test_both_outcomes_of_the_race_can_happen(
    make_core: CoreFactory, racing_storage: Callable[[], YieldingStorage], remembered: bool
) -> None:
    """Whoever swaps first wins: the test above is not passing on one lucky ordering.

    An approval in the process that made the quote reaches its compare-and-set without a
    read (walletcore.services.trading): for the cancel to swap first there, the approval
    starts one step after it. `quote read`: the approval runs in another process (a fresh
    service on the same storage), which reads the trade first."""
    seen = set()
    for approve_first in (True, False):
        core = await make_core(storage=racing_storage())
        trade = await core.sell(crypto_amount="0.5")
        if not remembered:
            core.container.trading.reset()  # another process's service: it remembers nothing

        late = remembered and not approve_first
        approve = _approve(core, trade, late=late)
        cancel = core.trading.cancel(core.caller(), user_id=core.user_id, trade_id=trade.trade_id)
        await asyncio.gather(
            *([approve, cancel] if approve_first else [cancel, approve]), return_exceptions=True
        )
        seen.add((await core.stored(trade)).status)
    assert seen == {TradeStatus.COMPLETED, TradeStatus.CANCELLED}


async def _approve(core: Core, trade: Trade, *, late: bool) -> Trade:
    """An approval of `trade`; `late`: it starts one step after the calls gathered with it."""
    if late:
        await asyncio.sleep(0)
    approved: Trade = await core.trading.approve(
        core.caller(), user_id=core.user_id, trade_id=trade.trade_id
    )
    return approved


async def test_concurrent_cancels_all_answer_the_cancelled_trade(
    make_core: CoreFactory, racing_storage: Callable[[], YieldingStorage]
) -> None:
    core = await make_core(storage=racing_storage())
    trade = await core.sell(crypto_amount="0.5")
    results = await asyncio.gather(
        *(
            core.trading.cancel(core.caller(), user_id=core.user_id, trade_id=trade.trade_id)
            for _ in range(20)
        ),
        return_exceptions=True,
    )
    stored = await core.stored(trade)
    assert stored.status is TradeStatus.CANCELLED
    assert all(r == stored for r in results), results


async def test_concurrent_approvals_of_a_lapsed_quote_all_409_and_expire_it(
    make_core: CoreFactory, racing_storage: Callable[[], YieldingStorage]
) -> None:
    core = await make_core(storage=racing_storage())
    trade = await core.sell(crypto_amount="0.5")
    core.clock.advance(61)
    results = await asyncio.gather(
        *(
            core.trading.approve(core.caller(), user_id=core.user_id, trade_id=trade.trade_id)
            for _ in range(10)
        ),
        return_exceptions=True,
    )
    assert all(isinstance(r, DomainError) and r.status == 409 for r in results), results
    assert (await core.stored(trade)).status is TradeStatus.EXPIRED
    assert not core.venue.executed
