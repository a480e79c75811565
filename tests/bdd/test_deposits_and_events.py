"""Steps of features/deposits_and_events.feature.

The core on its fakes: the in-memory storage, a manual clock, the FAKE KeyStore, the
sandbox prices and venue, and for ETHEREUM a fake chain with blocks, a mempool and reorgs
(`walletcore.testing.chains.ScanningFakeGateway`) that the deposit watch scans
(walletcore.services.deposits). "The feed" is `POST /events`'s use case
(walletcore.services.events), read as a reader that keeps its cursor would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from dependency_injector import providers
from pytest_bdd import given, parsers, scenarios, then, when

from walletcore import Caller, Container, DomainError, Settings, create_container
from walletcore.clock import ManualClock
from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.domain.deposits import DepositStatus
from walletcore.domain.events import Event
from walletcore.domain.money import to_base_units
from walletcore.domain.trade import Side
from walletcore.testing import CONTRACT_CATALOG, FakeKeyStore, InMemoryStorage
from walletcore.testing.chains import FollowedFakeGateway, ScanningFakeGateway

scenarios("deposits_and_events.feature")

ETHEREUM = Chain.ETHEREUM
SYMBOLS = {"ETH": 2, "USDT": 21}
EXCHANGE = "0x28C6c06298d514Db089934071355E5743bf21d60"


@dataclass
class Desk:
    container: Container
    clock: ManualClock
    storage: InMemoryStorage
    chain: ScanningFakeGateway
    caller: Caller
    user_id: str = ""
    address: str = ""
    platform: str = ""
    watching: bool = True
    cursor: str | None = None
    handled: list[str] = field(default_factory=list)
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)

    def run(self, work: Any) -> Any:
        return self.loop.run_until_complete(work)

    def scan(self) -> None:
        if self.watching:
            self.run(self.container.deposit_watch().scan(ETHEREUM))

    def events(self, user_id: Any = None) -> list[Event]:
        feed = self.container.event_feed()
        page = self.run(feed.read(self.caller, limit=1000, user_id=user_id))
        return list(page.events)


@pytest.fixture
def desk(tmp_path: Any) -> Iterator[Desk]:
    clock = ManualClock()
    storage = InMemoryStorage()
    chain = ScanningFakeGateway(ETHEREUM, confirmations=3, scan_span=5)
    gateways: dict[Chain, Any] = {c: FollowedFakeGateway(c) for c in CONTRACT_CHAINS}
    gateways[ETHEREUM] = chain
    container = create_container(
        Settings(home=tmp_path, repo="memory"),
        clock=clock,
        storage=storage,
        keystore=FakeKeyStore(),
    )
    container.gateways.override(providers.Object(gateways))
    loop = asyncio.new_event_loop()
    issued = loop.run_until_complete(container.auth().create_client("Acme Pay"))
    desk = Desk(container, clock, storage, chain, Caller(issued.client, "req-1"), loop=loop)
    yield desk
    loop.close()


def units(symbol: str, amount: str) -> int:
    return to_base_units(Decimal(amount), CONTRACT_CATALOG.asset_by_id(SYMBOLS[symbol]).decimals)


# -- given -----------------------------------------------------------------------------
@given("an api client with a user whose wallet has an ETH address")
def a_user(desk: Desk) -> None:
    desk.scan()  # the watch starts before anything happens
    created = desk.run(desk.container.wallets().create(desk.caller, password="correct horse"))
    desk.user_id, desk.address = str(created.user_id), created.addresses[ETHEREUM]


@given(parsers.parse("the chain needs {depth:d} blocks for a deposit to be confirmed"))
def depth(desk: Desk, depth: int) -> None:
    assert desk.chain.confirmations == depth


@given("the api client has a platform wallet")
def platform(desk: Desk) -> None:
    wallets = desk.container.wallets()
    addresses = desk.run(wallets.provision_platform(desk.caller.client_id))
    desk.platform = addresses[ETHEREUM]


@given("the service stops watching the chain")
def stop_watching(desk: Desk) -> None:
    desk.watching = False


@given(parsers.parse("the feed keeps events for {days:d} days"))
def retention(desk: Desk, days: int) -> None:
    assert desk.container.event_feed().retention == timedelta(days=days)


# -- when ------------------------------------------------------------------------------
@when(
    parsers.re(
        r"(?P<amount>[0-9.]+) (?P<symbol>ETH|USDT) (?:is|are) sent to the user's address(?P<by> by an exchange)?"
    )
)
def pay_user(desk: Desk, amount: str, symbol: str, by: str | None) -> None:
    credit = desk.chain.pay(desk.address, SYMBOLS[symbol], units(symbol, amount))
    if by:
        desk.chain.waiting[-1] = replace(credit, sender=EXCHANGE, position="log:0")
    desk.scan()


@when(parsers.parse("the payment is {deep:d} block deep"))
@when(parsers.parse("the payment is {deep:d} blocks deep"))
def deep(desk: Desk, deep: int) -> None:
    desk.chain.mine(deep)
    desk.scan()


@when(parsers.parse("{amount} ETH are sent to the platform wallet and are {deep:d} blocks deep"))
def pay_platform(desk: Desk, amount: str, deep: int) -> None:
    desk.chain.pay(desk.platform, SYMBOLS["ETH"], units("ETH", amount))
    desk.chain.mine(deep)
    desk.scan()


@when("a reorganisation replaces that block and the payment is gone for good")
def reorg(desk: Desk) -> None:
    desk.chain.reorg(1, drop=True)
    desk.chain.mine(2)
    desk.scan()


@when(
    parsers.parse(
        "{count:d} payments of {amount} ETH reach the user's address over {blocks:d} blocks"
    )
)
def payments_over(desk: Desk, count: int, amount: str, blocks: int) -> None:
    for n in range(blocks):
        if n < count:
            desk.chain.pay(desk.address, SYMBOLS["ETH"], units("ETH", amount))
        desk.chain.mine()
        desk.scan()


@when("the service watches the chain again")
def watch_again(desk: Desk) -> None:
    desk.watching = True
    for _ in range(3):
        desk.scan()


@when(
    parsers.parse(
        "{count:d} payments of {amount} ETH reach the user's address and are {deep:d} blocks deep"
    )
)
def payments(desk: Desk, count: int, amount: str, deep: int) -> None:
    for _ in range(count):
        desk.chain.pay(desk.address, SYMBOLS["ETH"], units("ETH", amount))
        desk.chain.mine()
        desk.scan()
    desk.chain.mine(deep)
    desk.scan()


@when(
    parsers.parse(
        "the reader reads {size:d} events at a time, stopping after each page and starting again from its stored cursor"
    )
)
def reader(desk: Desk, size: int) -> None:
    while True:
        feed = (
            desk.container.event_feed()
        )  # a new reader process each page: only the cursor is kept
        page = desk.run(feed.read(desk.caller, after=desk.cursor, limit=size))
        for event in page.events:
            desk.handled.append(event.event_id)
            desk.cursor = event.event_id
        if not page.events:
            return


@when("the reader stores the cursor of the first event")
def store_first(desk: Desk) -> None:
    desk.cursor = desk.events()[0].event_id


@when(parsers.parse("{days:d} days pass and old events are deleted"))
def days_pass(desk: Desk, days: int) -> None:
    desk.clock.advance(days=days)
    desk.run(desk.container.event_feed().prune())


@when(parsers.parse("the user buys {amount:d} EUR of ETH and approves the trade"))
def buy(desk: Desk, amount: int) -> None:
    trading = desk.container.trading()
    trade = desk.run(
        trading.quote(
            desk.caller,
            Side.BUY,
            user_id=desk.user_id,
            asset_id=2,
            fiat="EUR",
            fiat_amount=str(amount),
        )
    )
    desk.run(trading.approve(desk.caller, user_id=desk.user_id, trade_id=trade.trade_id))


# -- then ------------------------------------------------------------------------------
def _deposit_events(desk: Desk, kind: str, symbol: str, amount: str, whose: str) -> list[Event]:
    user = None if whose == "the platform wallet" else desk.user_id
    return [
        e
        for e in desk.events()
        if e.type == f"deposit.{kind}"
        and e.data["symbol"] == symbol
        and Decimal(str(e.data["amount"])) == Decimal(amount)
        and e.user_id == user
        and e.data["wallet"] == ("platform" if user is None else "user")
    ]


@then(
    parsers.re(
        r"the feed shows (?:a|the) deposit of (?P<amount>[0-9.]+) (?P<symbol>ETH|USDT) (?P<kind>seen|confirmed|reversed) for (?P<whose>the user|the platform wallet)"
    )
)
def shows(desk: Desk, amount: str, symbol: str, kind: str, whose: str) -> None:
    assert len(_deposit_events(desk, kind, symbol, amount, whose)) == 1


@then("the user's deposits list it as confirmed")
def listed(desk: Desk) -> None:
    found = desk.run(desk.container.event_feed().deposits(desk.caller, user_id=desk.user_id))
    assert [d.status for d in found] == [DepositStatus.CONFIRMED]


@then("the feed never shows it confirmed")
def never_confirmed(desk: Desk) -> None:
    assert not [e for e in desk.events() if e.type == "deposit.confirmed"]


@then(parsers.parse("the feed shows {seen:d} deposits seen and {confirmed:d} confirmed, each once"))
def each_once(desk: Desk, seen: int, confirmed: int) -> None:
    events = desk.events()
    kinds = [e.type for e in events]
    assert kinds.count("deposit.seen") == seen and kinds.count("deposit.confirmed") == confirmed
    ids = [e.data["depositId"] for e in events if e.type == "deposit.confirmed"]
    assert len(set(ids)) == confirmed


@then(
    parsers.parse(
        "the reader has handled exactly the {count:d} events of the feed, in order, each once"
    )
)
def handled(desk: Desk, count: int) -> None:
    assert desk.handled == [e.event_id for e in desk.events()]
    assert len(desk.handled) == count == len(set(desk.handled))


@then(parsers.parse('reading from that cursor is refused with {status:d} "{message}"'))
def refused(desk: Desk, status: int, message: str) -> None:
    with pytest.raises(DomainError) as caught:
        desk.run(desk.container.event_feed().read(desk.caller, after=desk.cursor))
    assert (caught.value.status, caught.value.message) == (status, message)


@then("the feed shows the trade approved, then completed, with its amounts")
def trade_events(desk: Desk) -> None:
    events = [e for e in desk.events() if e.type.startswith("trade.")]
    assert [e.type for e in events] == ["trade.approved", "trade.completed"]
    done = events[-1].data
    assert done["side"] == "buy" and done["fiat"] == "EUR" and done["fiatAmount"] == "100"
    assert Decimal(str(done["cryptoAmount"])) > 0 and events[-1].user_id == desk.user_id
