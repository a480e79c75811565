"""An approval in the process that made the quote reads nothing first: the storage
decorator that remembers the open quotes (walletcore.services.remembered_quotes), on the
in-memory storage, and the trading service deciding on the quote it answers, where the
compare-and-set open -> executing is what tells whether the trade is still open. Every
answer is the one an approval that reads the trade gives, whichever process moved the
trade meanwhile."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from walletcore.clock import ManualClock
from walletcore.domain.assets import Fiat
from walletcore.domain.audit import AuditEntry
from walletcore.domain.errors import DomainError, QuoteLapsed, StorageUnavailable, TradeNotFound
from walletcore.domain.ids import new_id
from walletcore.domain.money import KEPT_PLACES, keep_places
from walletcore.domain.trade import FixedLeg, Quote, Side, Trade, TradeStatus
from walletcore.ports import Clock, Storage
from walletcore.services import remembered_quotes as remembered_module
from walletcore.services.assets import AssetPolicy
from walletcore.services.audit import Auditor
from walletcore.services.remembered_quotes import RememberedQuotes
from walletcore.services.trading import TradingService
from walletcore.testing import (
    CONTRACT_CATALOG,
    FixedHoldings,
    InMemoryStorage,
    InstantVenue,
    autocommit,
)
from walletcore.testing.markets import FixedPrices

from ..conftest import Core, CoreFactory, YieldingStorage

CLIENT, USER = new_id(), new_id()
TTL = timedelta(seconds=60)


def quote(clock: ManualClock, *, client_id: str = CLIENT, user_id: str = USER) -> Trade:
    """An open sell quote made now, as `TradingService.quote` makes one."""
    now = clock.now()
    return Trade(
        trade_id=new_id(),
        client_id=client_id,
        user_id=user_id,
        side=Side.SELL,
        asset_id=1,
        symbol="BTC",
        fiat=Fiat.USD,
        fixed_leg=FixedLeg.CRYPTO,
        quote=Quote(Decimal("0.5"), Decimal(30000), Decimal(60000), now + TTL),
        status=TradeStatus.OPEN,
        created_at=now,
    )


def entry(clock: ManualClock, action: str = "trade.sell") -> AuditEntry:
    return AuditEntry(clock.now(), CLIENT, action, "req-1", "ok", user_id=USER)


async def stored(storage: Storage, trade: Trade) -> Trade | None:
    found: Trade | None = await autocommit(storage).trades.get(
        trade.client_id, trade.user_id, trade.trade_id
    )
    return found


# -- the decorator ----------------------------------------------------------------------------
async def test_a_quote_stored_through_it_is_remembered_and_answered_unread(
    clock: ManualClock,
) -> None:
    storage = YieldingStorage()
    quotes = RememberedQuotes(storage, clock)
    trade = quote(clock)

    await quotes.add_trade(trade, entry(clock))

    assert await stored(storage, trade) == trade  # stored by the storage itself
    storage.trade_reads.clear()
    assert quotes.open_quote(CLIENT, USER, trade.trade_id) is trade
    assert storage.trade_reads == []
    # ownership is the quote's own: another user's or client's lookup finds nothing
    assert quotes.open_quote(CLIENT, new_id(), trade.trade_id) is None
    assert quotes.open_quote(new_id(), USER, trade.trade_id) is None
    assert quotes.open_quote(CLIENT, USER, new_id()) is None


async def test_an_approval_decided_on_it_forgets_it(clock: ManualClock) -> None:
    storage = InMemoryStorage()
    quotes = RememberedQuotes(storage, clock)
    trade = quote(clock)
    await quotes.add_trade(trade, entry(clock))
    remembered = quotes.open_quote(CLIENT, USER, trade.trade_id)
    assert remembered is not None
    executing = remembered.start_approval(clock.now())

    assert await quotes.swap_trade(TradeStatus.OPEN, executing, entry(clock, "trade.approve"))

    assert await stored(storage, trade) == executing
    assert quotes.open_quote(CLIENT, USER, trade.trade_id) is None
    actions = [e.action for e in await autocommit(storage).audit.newest(10)]
    assert actions == ["trade.approve", "trade.sell"]


async def test_another_processs_move_is_told_by_the_swap_and_then_read(
    clock: ManualClock,
) -> None:
    """Another process cancelled the quote: this one still answers it (it cannot know), the
    compare-and-set matches no row and writes nothing, and the quote is forgotten: the next
    approval reads the trade, and another process's decorator never knew it."""
    storage = InMemoryStorage()
    here, there = RememberedQuotes(storage, clock), RememberedQuotes(storage, clock)
    trade = quote(clock)
    await here.add_trade(trade, entry(clock))
    assert there.open_quote(CLIENT, USER, trade.trade_id) is None  # a read, over there
    cancelled = trade.cancel(clock.now())
    assert await there.swap_trade(TradeStatus.OPEN, cancelled, entry(clock, "trade.cancel"))

    remembered = here.open_quote(CLIENT, USER, trade.trade_id)
    assert remembered == trade
    executing = remembered.start_approval(clock.now())
    assert not await here.swap_trade(TradeStatus.OPEN, executing, entry(clock, "trade.approve"))

    assert await stored(storage, trade) == cancelled
    assert here.open_quote(CLIENT, USER, trade.trade_id) is None
    actions = [e.action for e in await autocommit(storage).audit.newest(10)]
    assert actions == ["trade.cancel", "trade.sell"]  # the lost swap appended nothing


async def test_a_swap_whose_outcome_is_unknown_forgets_it(clock: ManualClock) -> None:
    class Unreachable(InMemoryStorage):
        async def swap_trade(self, expected: TradeStatus, trade: Trade, entry: Any) -> bool:
            raise StorageUnavailable()

    quotes = RememberedQuotes(Unreachable(), clock)
    trade = quote(clock)
    await quotes.add_trade(trade, entry(clock))

    with pytest.raises(StorageUnavailable):
        await quotes.swap_trade(TradeStatus.OPEN, trade.start_approval(clock.now()), entry(clock))

    assert quotes.open_quote(CLIENT, USER, trade.trade_id) is None


async def test_a_quote_whose_write_failed_is_not_remembered(clock: ManualClock) -> None:
    class Refusing(InMemoryStorage):
        async def add_trade(self, trade: Trade, entry: AuditEntry) -> None:
            raise StorageUnavailable()

    quotes = RememberedQuotes(Refusing(), clock)
    trade = quote(clock)
    with pytest.raises(StorageUnavailable):
        await quotes.add_trade(trade, entry(clock))
    assert quotes.open_quote(CLIENT, USER, trade.trade_id) is None


async def test_a_quote_open_again_is_not_remembered_again(clock: ManualClock) -> None:
    """executing -> open (the venue placed nothing): the next approval reads the quote."""
    storage = InMemoryStorage()
    quotes = RememberedQuotes(storage, clock)
    trade = quote(clock)
    await quotes.add_trade(trade, entry(clock))
    executing = trade.start_approval(clock.now())
    assert await quotes.swap_trade(TradeStatus.OPEN, executing, entry(clock))

    assert await quotes.swap_trade(TradeStatus.EXECUTING, executing.reopen(), entry(clock))

    assert await stored(storage, trade) == trade
    assert quotes.open_quote(CLIENT, USER, trade.trade_id) is None


async def test_units_and_other_moves_are_the_storages_own(clock: ManualClock) -> None:
    storage = YieldingStorage()
    quotes = RememberedQuotes(storage, clock)
    trade = quote(clock)
    await quotes.add_trade(trade, entry(clock))
    settled = trade.start_approval(clock.now())
    async with storage.write() as unit:
        await unit.trades.swap(TradeStatus.OPEN, settled)

    # a read unit is the storage's: what is stored, not what is remembered
    storage.trade_reads.clear()
    async with quotes.read() as unit:
        assert await unit.trades.get(CLIENT, USER, trade.trade_id) == settled
    assert storage.trade_reads == [trade.trade_id]
    # a move from another status is the storage's compare-and-set alone
    failed = settled.fail("venue said no", clock.now())
    assert await quotes.swap_trade(TradeStatus.EXECUTING, failed, entry(clock))
    assert storage.swaps[-1] is TradeStatus.EXECUTING
    assert await stored(storage, trade) == failed
    # a trade stored in another status than open is not a quote to remember
    other = quote(clock)
    await quotes.add_trade(other.cancel(clock.now()), entry(clock))
    assert quotes.open_quote(CLIENT, USER, other.trade_id) is None


async def test_a_lapsed_quote_is_forgotten_when_looked_up(clock: ManualClock) -> None:
    quotes = RememberedQuotes(InMemoryStorage(), clock)
    trade = quote(clock)
    await quotes.add_trade(trade, entry(clock))
    clock.advance(59)
    assert quotes.open_quote(CLIENT, USER, trade.trade_id) is trade

    clock.advance(1)  # at `expiresAt` the quote has lapsed

    assert quotes.open_quote(CLIENT, USER, trade.trade_id) is None
    assert not quotes._quoted


async def test_lapsed_quotes_are_forgotten_as_new_ones_are_made(clock: ManualClock) -> None:
    """What is remembered is the quotes still alive: a quote made after others lapsed
    drops them (the service's quotes all live as long, so the oldest lapse first)."""
    quotes = RememberedQuotes(InMemoryStorage(), clock)
    old = [quote(clock) for _ in range(3)]
    for trade in old:
        await quotes.add_trade(trade, entry(clock))
    clock.advance(30)
    middle = quote(clock)
    await quotes.add_trade(middle, entry(clock))
    clock.advance(31)  # the first three lapsed; `middle` has not
    newest = quote(clock)
    await quotes.add_trade(newest, entry(clock))

    remembered = {key[2] for key in quotes._quoted}
    assert remembered == {middle.trade_id, newest.trade_id}


async def test_past_the_bound_the_oldest_quote_is_forgotten(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remembered_module, "QUOTES_REMEMBERED", 3)
    quotes = RememberedQuotes(InMemoryStorage(), clock)
    trades = [quote(clock) for _ in range(4)]
    for trade in trades:
        await quotes.add_trade(trade, entry(clock))

    assert quotes.open_quote(CLIENT, USER, trades[0].trade_id) is None
    assert [quotes.open_quote(CLIENT, USER, t.trade_id) for t in trades[1:]] == trades[1:]


def test_the_trading_service_wraps_its_storage_once(clock: ManualClock) -> None:
    storage = InMemoryStorage()
    quotes = RememberedQuotes(storage, clock)

    def service(given: Storage) -> Storage:
        prices = FixedPrices()
        built = TradingService(
            given,
            clock,
            prices,
            InstantVenue(prices),
            AssetPolicy(CONTRACT_CATALOG),
            Auditor(storage, clock),
            holdings=FixedHoldings(),
        )
        return built._storage

    wrapped = service(storage)
    assert isinstance(wrapped, RememberedQuotes) and wrapped.storage is storage
    assert service(quotes) is quotes
    assert service(storage) is not wrapped  # one memory per service


# -- the trading service on it ----------------------------------------------------------------


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
    monkeypatch.setattr(remembered_module, "QUOTES_REMEMBERED", 3)
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
