"""Steps of features/settlement.feature.

The core on its fakes: the in-memory storage, a manual clock, the FAKE KeyStore, the
sandbox prices and venue, and followed fake chains (`walletcore.testing.chains`) that take
a transfer's coins when they accept it and report it mined once the scenario confirms it.
"The desk" is the api client's platform wallet; "the service's jobs" are one run of
`follow_sends` and one of `settle_coins`, each after its due time. "Its coins" is the
trade's settlement as the service stores it (and as `/trade` shows it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from dependency_injector import providers
from pytest_bdd import given, parsers, scenarios, then, when

from walletcore import Caller, Container, DomainError, Settings, create_container
from walletcore.clock import ManualClock
from walletcore.domain.assets import CONTRACT_CHAINS, Chain
from walletcore.domain.events import Event
from walletcore.domain.money import format_balance, to_base_units
from walletcore.domain.settlement import Settlement
from walletcore.domain.trade import Trade
from walletcore.ports import Sighting
from walletcore.testing import CONTRACT_CATALOG, FakeKeyStore, InMemoryStorage
from walletcore.testing.chains import FollowedFakeGateway
from walletcore.testing.keys import fake_address

scenarios("settlement.feature")

ETH = CONTRACT_CATALOG.asset_by_id(2)
#: where "someone else" is paid: an address of no wallet here
SOMEONE_ELSE = fake_address(b"\x07" * 8, Chain.ETHEREUM)


@dataclass
class Market:
    container: Container
    clock: ManualClock
    chain: FollowedFakeGateway
    caller_of: Any
    user_id: str = ""
    address: str = ""
    desk: str = ""
    trade_id: str | None = None
    answer: Any = None
    error: DomainError | None = None
    requests: int = 0
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)

    def run(self, work: Any) -> Any:
        return self.loop.run_until_complete(work)

    def caller(self) -> Caller:
        self.requests += 1
        caller: Caller = self.caller_of(f"req-{self.requests:04d}")
        return caller

    def attempt(self, work: Any) -> Any:
        self.answer, self.error = None, None
        try:
            self.answer = self.run(work)
        except DomainError as exc:
            self.error = exc
        return self.answer

    def settlement(self) -> Settlement:
        assert self.trade_id is not None
        client_id = self.caller().client_id
        found: Settlement | None = self.run(_settlements(self, client_id, self.trade_id))
        assert found is not None, "the trade has no settlement"
        return found

    def balance(self, address: str) -> str:
        return format_balance(self.chain.balances.get((address.lower(), ETH.id), 0), 18)

    def events(self) -> list[Event]:
        page = self.run(self.container.event_feed().read(self.caller(), limit=1000))
        return [e for e in page.events if e.type.startswith("settlement.")]


async def _settlements(market: Market, client_id: str, trade_id: str) -> Settlement | None:
    async with market.container.storage().read() as unit:
        found: Settlement | None = await unit.settlements.get(client_id, trade_id)
        return found


@pytest.fixture
def market(tmp_path: Any) -> Iterator[Market]:
    clock = ManualClock()
    gateways: dict[Chain, Any] = {c: FollowedFakeGateway(c) for c in CONTRACT_CHAINS}
    container = create_container(
        Settings(home=tmp_path, repo="memory"),
        clock=clock,
        storage=InMemoryStorage(),
        keystore=FakeKeyStore(),
    )
    container.gateways.override(providers.Object(gateways))
    market = Market(container, clock, gateways[Chain.ETHEREUM], None)
    yield market
    market.loop.close()


def units(amount: str) -> int:
    return to_base_units(Decimal(amount), ETH.decimals)


# -- given ------------------------------------------------------------------------------
@given("an api client enabled for ETH")
def api_client(market: Market) -> None:
    issued = market.run(market.container.auth().create_client("Acme Pay", assets=[ETH.id]))
    market.caller_of = lambda rid: Caller(issued.client, rid)


@given(parsers.parse('a user whose wallet was created with the password "{password}"'))
def user(market: Market, password: str) -> None:
    created = market.run(market.container.wallets().create(market.caller(), password=password))
    market.user_id, market.address = str(created.user_id), created.addresses[Chain.ETHEREUM]


@given("the operator has provisioned the api client's platform wallet as the desk")
def desk(market: Market) -> None:
    wallets = market.container.wallets()
    addresses = market.run(wallets.provision_platform(market.caller().client_id))
    market.desk = addresses[Chain.ETHEREUM]


@given(parsers.parse("the desk holds {amount} ETH"))
@when(parsers.parse("the operator tops the desk up with {amount} ETH"))
def fund_desk(market: Market, amount: str) -> None:
    market.chain.fund(market.desk, ETH, units(amount))


@given(parsers.parse("the user's wallet holds {amount} ETH"))
def fund_user(market: Market, amount: str) -> None:
    market.chain.fund(market.address, ETH, units(amount))


@given(parsers.parse("the user has sold {amount} ETH without giving the password"))
def sold(market: Market, amount: str) -> None:
    approve(market, "sells", f"{amount} ETH", None)
    assert market.error is None, market.error
    assert market.settlement().status == "awaiting_password"


# -- when -------------------------------------------------------------------------------
@when(
    parsers.re(
        r"the user (?P<side>buys|sells) (?P<what>.+?) and approves the trade"
        r'(?: with the password "(?P<password>[^"]*)")?$'
    )
)
def approve(market: Market, side: str, what: str, password: str | None) -> None:
    trading = market.container.trading()
    body: dict[str, Any] = {"asset_id": ETH.id, "fiat": "USD"}
    if what.startswith("ETH worth "):
        body["fiat_amount"] = what.removeprefix("ETH worth ").removesuffix(" USD")
    else:
        body["crypto_amount"] = what.removesuffix(" ETH")
    quote = trading.sell if side == "sells" else trading.order
    trade: Trade | None = market.attempt(quote(market.caller(), user_id=market.user_id, **body))
    if trade is None:  # the quote is refused already
        return
    market.trade_id = trade.trade_id
    market.attempt(
        trading.approve(
            market.caller(), user_id=market.user_id, trade_id=trade.trade_id, password=password
        )
    )


@when(parsers.parse('the user collects the trade with the password "{password}"'))
def collect(market: Market, password: str) -> None:
    market.attempt(
        market.container.trading().collect(
            market.caller(), user_id=market.user_id, trade_id=market.trade_id, password=password
        )
    )


@when(parsers.parse("the user sends {amount} ETH to someone else"))
def send(market: Market, amount: str) -> None:
    market.attempt(
        market.container.sends().send(
            market.caller(),
            request_id=f"pay-{market.requests}",
            user_id=market.user_id,
            asset_id=ETH.id,
            recipient=SOMEONE_ELSE,
            amount=amount,
            password="correct horse battery",
        )
    )


def _jobs(market: Market) -> None:
    market.answer = None  # what is stored moves on from the last answer
    market.clock.advance(61)  # past every due time
    jobs = market.container.jobs()
    market.run(jobs.follow_sends())
    market.run(jobs.settle_coins())


@when("the service's jobs run")
def jobs_run(market: Market) -> None:
    _jobs(market)


@when("the service's jobs run three times")
def jobs_run_thrice(market: Market) -> None:
    for _ in range(3):
        _jobs(market)


@when("the transfer is confirmed on the chain and the service's jobs have run")
def confirmed(market: Market) -> None:
    tx_hash = market.settlement().tx_hash
    assert tx_hash is not None, "no transfer was sent"
    market.chain.sightings[tx_hash] = Sighting.SUCCESS
    _jobs(market)


# -- then -------------------------------------------------------------------------------
@then("the request succeeds")
def succeeds(market: Market) -> None:
    assert market.error is None, market.error


@then(parsers.parse("the request fails with status {code:d}"))
def fails(market: Market, code: int) -> None:
    assert market.error is not None, f"expected {code}, got {market.answer!r}"
    assert market.error.status == code, market.error


@then(parsers.parse('the request fails with status {code:d} and the message "{message}"'))
def fails_with(market: Market, code: int, message: str) -> None:
    fails(market, code)
    assert market.error is not None and market.error.message == message


@then(parsers.parse('the request fails with status {code:d} and a message naming "{words}"'))
def fails_naming(market: Market, code: int, words: str) -> None:
    fails(market, code)
    assert market.error is not None and words in market.error.message, market.error.message


@then("the trade is completed")
def completed(market: Market) -> None:
    assert market.error is None, market.error
    assert isinstance(market.answer, Trade) and market.answer.status == "completed"
    market.trade_id = market.answer.trade_id


@then(
    parsers.re(
        r'its coins are (?:still )?"(?P<status>[a-z_]+)"(?:: (?P<amount>[0-9.]+) ETH on their way)?$'
    )
)
def coins_are(market: Market, status: str, amount: str | None) -> None:
    settlement = market.settlement()
    assert settlement.status == status, settlement
    if isinstance(market.answer, Trade) and market.answer.settlement is not None:
        assert market.answer.settlement == settlement  # the answer shows what is stored
    if amount is not None:
        assert settlement.units == units(amount)
        assert settlement.tx_hash is not None


@then(parsers.parse('its coins are "{status}", with the reason "{reason}"'))
def coins_with_reason(market: Market, status: str, reason: str) -> None:
    settlement = market.settlement()
    assert (settlement.status, settlement.reason) == (status, reason)


@then(parsers.parse('its coins are "{status}", because the desk does not hold enough'))
def coins_short(market: Market, status: str) -> None:
    settlement = market.settlement()
    assert settlement.status == status
    assert settlement.reason is not None
    assert settlement.reason.startswith("Insufficient ETH balance: the platform wallet holds"), (
        settlement.reason
    )


@then(parsers.parse("the user's wallet holds {amount} ETH"))
def user_holds(market: Market, amount: str) -> None:
    assert market.balance(market.address) == amount


@then(parsers.parse("the desk holds {amount} ETH"))
def desk_holds(market: Market, amount: str) -> None:
    assert market.balance(market.desk) == amount


def _held(market: Market) -> int:
    async def read() -> int:
        async with market.container.storage().read() as unit:
            held: int = await unit.settlements.held(
                market.caller().client_id, market.user_id, ETH.id
            )
            return held

    held: int = market.run(read())
    return held


@then(parsers.parse("{amount} ETH of the user's wallet are reserved"))
def reserved(market: Market, amount: str) -> None:
    assert _held(market) == units(amount)


@then("nothing of the user's wallet is reserved")
def nothing_reserved(market: Market) -> None:
    assert _held(market) == 0


def _left(market: Market, address: str) -> set[int]:
    """The transfers that left `address`: one nonce each (a fee bump replaces a transaction
    under its nonce: the same transfer)."""
    return {int(b["nonce"]) for b in market.chain.accepted.values() if b["from"] == address}


@then("no coins have left the user's wallet")
def nothing_left(market: Market) -> None:
    assert _left(market, market.address) == set()


@then("exactly one transfer has left the user's wallet")
def one_left_user(market: Market) -> None:
    assert len(_left(market, market.address)) == 1


@then("exactly one transfer has left the desk")
def one_left_desk(market: Market) -> None:
    assert len(_left(market, market.desk)) == 1


@then(
    parsers.re(
        r"the feed shows the trade's coins (?P<moves>[a-z_, ]+) and (?P<last>[a-z_]+), in that order"
    )
)
def feed_shows(market: Market, moves: str, last: str) -> None:
    expected = [*(m.strip() for m in moves.split(",")), last]
    mine = [e for e in market.events() if e.data["tradeId"] == market.trade_id]
    assert [e.data["status"] for e in mine] == expected
    assert [e.type for e in mine] == [f"settlement.{s}" for s in expected]


@then("every one of those events names the trade, the sell, ETH and 0.5")
def events_name(market: Market) -> None:
    for event in market.events():
        assert (
            event.data["tradeId"],
            event.data["side"],
            event.data["symbol"],
            event.data["assetId"],
            event.data["amount"],
        ) == (market.trade_id, "sell", "ETH", ETH.id, "0.5")
        assert event.user_id == market.user_id
