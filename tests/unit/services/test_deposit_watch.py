"""The deposit watch on the core's fakes (walletcore.services.deposits, docs/events.md): a
credit is stored once, `seen` then `confirmed` at the chain's depth, `reversed` when a reorg
drops it, found again when a reorg re-mines it; the cursor resumes where the last stored
range ended (a new watch, a failed scan, a run cut short), two watches racing store each
range once; and every move is on the client's feed, in order, with its audit entry."""

from __future__ import annotations

import asyncio

import pytest

from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.domain.deposits import DepositStatus
from walletcore.domain.errors import ServiceUnavailable
from walletcore.domain.events import Event
from walletcore.services.deposits import DepositWatch
from walletcore.testing.chains import FollowedFakeGateway, ScanningFakeGateway

from .conftest import ETH, USDT, Desk, DeskFactory, elsewhere

ETHEREUM = Chain.ETHEREUM


@pytest.fixture
async def chain_desk(make_desk: DeskFactory) -> tuple[Desk, ScanningFakeGateway]:
    scanning = ScanningFakeGateway(ETHEREUM, confirmations=3, scan_span=5)
    gateways = {c: FollowedFakeGateway(c) for c in CONTRACT_CHAINS}
    gateways[ETHEREUM] = scanning
    desk = await make_desk(gateways=gateways)
    return desk, scanning


def watch(desk: Desk, **options: object) -> DepositWatch:
    if not options:
        return desk.container.deposit_watch()
    return DepositWatch(
        storage=desk.storage,
        clock=desk.clock,
        gateways=desk.gateways,
        catalog=desk.container.catalog(),
        **options,  # type: ignore[arg-type]
    )


async def feed(desk: Desk, user_id: str | None = None) -> list[Event]:
    page = await desk.container.event_feed().read(desk.caller(), limit=1000, user_id=user_id)
    return page.events


async def deposits(desk: Desk) -> list:
    async with desk.storage.read() as unit:
        return await unit.deposits.page(desk.client.client_id, None, limit=1000)


async def test_a_deposit_is_seen_in_the_mempool_then_confirmed_at_depth(chain_desk) -> None:
    desk, chain = chain_desk
    scan = watch(desk)
    await scan.scan(ETHEREUM)  # the first run places the cursor
    user = await desk.user()
    address = desk.address(user, ETH)
    chain.pay(address, ETH, 5 * 10**17)
    report = await scan.scan(ETHEREUM)
    assert report.found == 1
    [seen] = await deposits(desk)
    assert (seen.status, seen.block, seen.user_id) == (DepositStatus.SEEN, None, user)
    chain.mine()
    await scan.scan(ETHEREUM)
    [mined] = await deposits(desk)
    assert mined.status is DepositStatus.SEEN and mined.block == chain.blocks[-1][0]
    chain.mine(1)
    await scan.scan(ETHEREUM)
    assert (await deposits(desk))[0].status is DepositStatus.SEEN  # 2 deep of 3
    chain.mine(1)
    report = await scan.scan(ETHEREUM)
    assert report.confirmed == 1
    [done] = await deposits(desk)
    assert done.status is DepositStatus.CONFIRMED and done.amount_units == 5 * 10**17
    events = await feed(desk)
    assert [e.type for e in events] == ["deposit.seen", "deposit.confirmed"]
    assert events[1].data["amount"] == "0.5" and events[1].data["address"] == address
    assert events[1].user_id == user
    assert [e.action for e in await desk.audit() if e.action.startswith("deposit.")] == [
        "deposit.seen",
        "deposit.move",
        "deposit.confirm",
    ]


async def test_tokens_and_platform_wallets_and_unwatched_addresses(chain_desk) -> None:
    desk, chain = chain_desk
    scan = watch(desk)
    await scan.scan(ETHEREUM)
    user = await desk.user()
    platform = (await desk.platform())[ETHEREUM]
    chain.pay(desk.address(user, USDT), USDT, 25_000_000, position="log:3")
    chain.pay(platform, ETH, 10**18)
    chain.pay(elsewhere(ETHEREUM), ETH, 10**18)  # nobody's
    chain.mine(3)
    await scan.scan(ETHEREUM)
    found = {(d.asset_id, d.user_id, d.status) for d in await deposits(desk)}
    assert found == {
        (USDT, user, DepositStatus.CONFIRMED),
        (ETH, None, DepositStatus.CONFIRMED),
    }
    mine = await feed(desk, user)
    assert {e.data["symbol"] for e in mine} == {"USDT"} and mine[0].data["amount"] == "25"


async def test_a_reorg_that_drops_the_transaction_reverses_the_deposit(chain_desk) -> None:
    desk, chain = chain_desk
    scan = watch(desk)
    await scan.scan(ETHEREUM)
    user = await desk.user()
    chain.pay(desk.address(user, ETH), ETH, 10**18)
    chain.mine()
    await scan.scan(ETHEREUM)
    chain.reorg(1, drop=True)  # a conflicting transaction took its coins on the new branch
    chain.mine(2)
    report = await scan.scan(ETHEREUM)
    assert report.rewound and report.reversed == 1
    [gone] = await deposits(desk)
    assert gone.status is DepositStatus.REVERSED and gone.block is None
    assert [e.type for e in await feed(desk)] == ["deposit.seen", "deposit.reversed"]


async def test_a_reorg_that_remines_the_transaction_keeps_it_and_confirms_it(chain_desk) -> None:
    desk, chain = chain_desk
    scan = watch(desk)
    await scan.scan(ETHEREUM)
    user = await desk.user()
    chain.pay(desk.address(user, ETH), ETH, 10**18)
    chain.mine()
    await scan.scan(ETHEREUM)
    chain.reorg(1)  # back to the mempool
    await scan.scan(ETHEREUM)
    [back] = await deposits(desk)
    assert back.status is DepositStatus.SEEN and back.block is None
    chain.mine(3)
    await scan.scan(ETHEREUM)
    [done] = await deposits(desk)
    assert done.status is DepositStatus.CONFIRMED and done.block == chain.blocks[-3][0]
    assert [e.type for e in await feed(desk)] == ["deposit.seen", "deposit.confirmed"]


async def test_catch_up_scans_every_block_in_ranges_and_resumes_after_a_failure(
    chain_desk,
) -> None:
    desk, chain = chain_desk
    scan = watch(desk)
    await scan.scan(ETHEREUM)
    start = chain.blocks[-1][0].height
    user = await desk.user()
    address = desk.address(user, ETH)
    for n in range(23):  # one credit in each of 23 blocks: a long outage
        chain.pay(address, ETH, 1000 + n)
        chain.mine()
    chain.scans.clear()
    chain.fail_scan.append(ServiceUnavailable())
    failed = await scan.scan(ETHEREUM)
    assert failed.error == "ServiceUnavailable" and failed.blocks == 0
    # the next ranges: the third fails, the run stops there with two ranges stored
    calls = []
    original = chain.scan

    async def flaky(first, last, addresses):  # type: ignore[no-untyped-def]
        calls.append((first, last))
        if len(calls) == 3:
            raise ServiceUnavailable()
        return await original(first, last, addresses)

    chain.scan = flaky  # type: ignore[method-assign]
    partial = await scan.scan(ETHEREUM)
    assert partial.blocks == 10 and partial.error == "ServiceUnavailable"
    chain.scan = original  # type: ignore[method-assign]
    fresh = watch(desk, run_seconds=30.0)  # a restarted process: only the cursor survives
    await fresh.scan(ETHEREUM)
    ranges = [(f, l) for f, l, _ in chain.scans]
    covered = sorted({h for f, l in [*calls[:2], *ranges[1:]] for h in range(f, l + 1)})
    assert covered == list(range(start + 1, start + 24))
    amounts = sorted(d.amount_units for d in await deposits(desk))
    assert amounts == [1000 + n for n in range(23)]  # each once, none skipped


async def test_two_watches_racing_store_each_deposit_once(chain_desk) -> None:
    desk, chain = chain_desk
    await watch(desk).scan(ETHEREUM)
    user = await desk.user()
    for n in range(12):
        chain.pay(desk.address(user, ETH), ETH, 7 + n)
        chain.mine()
    first, second = watch(desk, run_seconds=30.0), watch(desk, run_seconds=30.0)
    await asyncio.gather(first.scan(ETHEREUM), second.scan(ETHEREUM))
    await first.scan(ETHEREUM)
    assert sorted(d.amount_units for d in await deposits(desk)) == [7 + n for n in range(12)]
    seen = [e for e in await feed(desk) if e.type == "deposit.seen"]
    assert len(seen) == 12 and len({e.data["depositId"] for e in seen}) == 12


async def test_scans_ask_for_ranges_with_every_address_at_once(chain_desk) -> None:
    desk, chain = chain_desk
    users = [await desk.user() for _ in range(4)]
    await watch(desk).scan(ETHEREUM)
    chain.mine(7)
    chain.scans.clear()
    await watch(desk).scan(ETHEREUM)
    assert [(f, l) for f, l, _ in chain.scans] == [(1, 5), (6, 7)]
    assert {n for _, _, n in chain.scans} == {len(users)}  # one call for all, no platform yet


async def test_the_feed_pages_by_cursor_and_refuses_a_bad_one(chain_desk) -> None:
    desk, chain = chain_desk
    scan = watch(desk)
    await scan.scan(ETHEREUM)
    user = await desk.user()
    for n in range(5):
        chain.pay(desk.address(user, ETH), ETH, 100 + n)
    await scan.scan(ETHEREUM)
    events = desk.container.event_feed()
    first = await events.read(desk.caller(), limit=2)
    assert len(first.events) == 2 and first.more
    rest = await events.read(desk.caller(), after=first.events[-1].event_id, limit=10)
    assert len(rest.events) == 3 and not rest.more
    ids = [e.event_id for e in [*first.events, *rest.events]]
    assert len(set(ids)) == 5
    with pytest.raises(Exception, match="Invalid cursor"):
        await events.read(desk.caller(), after="nope")
    with pytest.raises(Exception, match="limit must be"):
        await events.read(desk.caller(), limit=0)


async def test_a_reorg_while_a_range_is_read_stores_nothing_of_it(chain_desk) -> None:
    desk, chain = chain_desk
    scan = watch(desk)
    await scan.scan(ETHEREUM)
    user = await desk.user()
    chain.pay(desk.address(user, ETH), ETH, 10**18)
    chain.mine(2)
    original = chain.scan

    async def reorg_during(first, last, addresses):  # type: ignore[no-untyped-def]
        found = await original(first, last, addresses)
        chain.reorg(2, drop=True)  # the blocks just read leave the chain
        chain.mine(2)
        return found

    chain.scan = reorg_during  # type: ignore[method-assign]
    report = await scan.scan(ETHEREUM)
    chain.scan = original  # type: ignore[method-assign]
    assert report.blocks == 0 and await deposits(desk) == []
    async with desk.storage.read() as unit:
        assert (await unit.deposits.cursor(ETHEREUM)).block.height == 0
    await scan.scan(ETHEREUM)
    assert await deposits(desk) == []  # the new branch has no such credit
