"""Shared steps of the Gherkin features, and the world a scenario runs in.

The services are driven directly (no HTTP): each scenario builds the core through
`create_container` with a manual clock, the in-memory storage, the sandbox prices and the
sandbox venue wrapped so it counts what it was asked to do. Trades are read as the HTTP API
answers them (`trade_view`, the binding's `TradeView`), so the steps assert the wire
strings of the spec, and every trade answer is checked against the spec's field rules on
the way in.

Conventions of the step text:
- "the answer ..." is what the last request returned;
- "the trade is ..." is what is stored now, read without asking the venue anything;
- "the user checks the trade" is the poll (`/trade`), which may ask the venue.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import parse
import pytest
from pytest_bdd import given, parsers, then, when

from walletcore import Caller, Container, DomainError, Settings, create_container
from walletcore.clock import ManualClock
from walletcore.domain.assets import Asset
from walletcore.domain.trade import Accepted, Fill, Order, OrderOutcome, Trade
from walletcore.ports import TradeStore, UnitOfWork
from walletcore.testing import CONTRACT_CATALOG, FixedHoldings, InMemoryStorage, autocommit
from walletcore_litestar.schemas import TradeView
from walletcore_sandbox.prices import SandboxPriceSource
from walletcore_sandbox.venue import SandboxVenue

T = TypeVar("T")


def trade_view(trade: Trade) -> dict[str, Any]:
    """The trade as the HTTP API answers it: the binding's wire shape, as JSON values."""
    view: dict[str, Any] = msgspec.to_builtins(TradeView.of(trade))
    return view


QUOTE_LIFETIME = timedelta(seconds=60)
STATUSES = ("open", "approved", "executing", "completed", "failed", "expired", "cancelled")
TERMINAL = {"completed", "failed", "expired", "cancelled"}


# -- the world ---------------------------------------------------------------------------
class CountingVenue:
    """The sandbox venue, counting the orders it is asked to execute and the polls."""

    def __init__(self) -> None:
        self._inner: SandboxVenue | None = None  # on the world's prices, with its container
        self.executions = 0
        self.polls = 0

    def trade_on(self, prices: SandboxPriceSource) -> None:
        self._inner = SandboxVenue(prices)

    @property
    def inner(self) -> SandboxVenue:
        assert self._inner is not None, "the venue trades once the world has its container"
        return self._inner

    async def execute(self, order: Order) -> Fill | Accepted:
        self.executions += 1
        return await self.inner.execute(order)

    async def status(self, order: Order) -> OrderOutcome:
        self.polls += 1
        return await self.inner.status(order)

    async def cancel(self, order: Order) -> OrderOutcome:
        return await self.inner.cancel(order)


class _InterleavingTrades:
    def __init__(self, inner: TradeStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def get(self, client_id: str, user_id: str, trade_id: str) -> Trade | None:
        trade = await self._inner.get(client_id, user_id, trade_id)
        await asyncio.sleep(0)  # others run between this read and the caller's next write
        return trade


class InterleavingStorage(InMemoryStorage):
    """The in-memory storage, yielding to other tasks on every read of a trade.

    Requests that arrive together then really interleave (each reads before the others
    write), as they would against a database, so the compare-and-set is what keeps a
    trade from being approved twice.
    """

    @asynccontextmanager
    async def read(self) -> AsyncIterator[UnitOfWork]:
        async with super().read() as unit:
            unit.trades = _InterleavingTrades(unit.trades)  # type: ignore[assignment]
            yield unit


@dataclass
class Party:
    """An api client as a scenario knows it: its id and the api keys it was issued."""

    client_id: str
    api_key: str = field(repr=False)


@dataclass
class World:
    runner: asyncio.Runner
    home: Path
    clock: ManualClock
    storage: InMemoryStorage = field(default_factory=InterleavingStorage)
    venue: CountingVenue = field(default_factory=CountingVenue)
    #: what users' wallets hold (plenty of everything unless a scenario says otherwise)
    holdings: FixedHoldings = field(default_factory=FixedHoldings)
    env: dict[str, Any] = field(default_factory=dict)
    parties: dict[str, Party] = field(default_factory=dict)
    #: user name -> (api client name, user id)
    users: dict[str, tuple[str, str]] = field(default_factory=dict)
    trade_id: str | None = None
    #: the last answer: a wire-shaped trade, a list of them, or another result
    answer: Any = None
    error: DomainError | None = None
    requests: int = 0
    #: the quote as first offered, and an answer remembered for comparison
    first_quote: dict[str, Any] | None = None
    remembered: Any = None
    #: trade ids in the order the scenario created them
    made: list[str] = field(default_factory=list)
    #: auth scenarios: tokens issued (by label), keys replaced, request ids used
    tokens: dict[str, Any] = field(default_factory=dict, repr=False)
    #: the last request made against someone else's trade: action, party, user
    last_act: dict[str, str] = field(default_factory=dict)
    _prices: SandboxPriceSource | None = None
    _container: Container | None = None

    # plumbing
    @property
    def db(self) -> Any:
        """The storage, one unit per call."""
        return autocommit(self.storage)

    def run(self, awaitable: Awaitable[T]) -> T:
        return self.runner.run(awaitable)  # type: ignore[arg-type]

    @property
    def container(self) -> Container:
        if self._container is None:
            if self._prices is None:
                # a feed refreshed every second: an approval prices at its own minute
                self._prices = SandboxPriceSource(
                    self.clock, symbols=CONTRACT_CATALOG.symbols, interval_seconds=1
                )
            self.venue.trade_on(self._prices)
            self.holdings.storage = self.storage
            self._container = create_container(
                Settings(home=self.home, **{"repo": "memory", **self.env}),
                clock=self.clock,
                storage=self.storage,
                venue=self.venue,
                prices=self._prices,
                holdings=self.holdings,
            )
        return self._container

    def reconfigure(self, **env: Any) -> None:
        """Change the environment's settings; storage, clock, prices and venue carry over."""
        self.env.update(env)
        self._container = None

    def next_request_id(self) -> str:
        self.requests += 1
        return f"req-{self.requests:04d}"

    def caller(self, party: str = "the api client") -> Caller:
        client = self.run(self.db.clients.get(self.parties[party].client_id))
        assert client is not None
        return Caller(client, self.next_request_id())

    def user_id(self, name: str = "the user") -> str:
        return self.users[name][1]

    def attempt(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """Make one request: remember its answer (as wire shapes) or its error."""
        self.answer, self.error = None, None
        try:
            result = self.run(call())
        except DomainError as exc:
            self.error = exc
            return None
        self.answer = _wire(result)
        return result

    def stored(self) -> dict[str, Any]:
        """The trade under discussion as stored now, without asking the venue."""
        assert self.trade_id is not None
        party, user_id = self.users["the user"]
        trade = self.run(self.db.trades.get(self.parties[party].client_id, user_id, self.trade_id))
        assert trade is not None
        return check_trade_shape(trade_view(trade))

    def stored_trade(self) -> Trade:
        party, user_id = self.users["the user"]
        assert self.trade_id is not None
        trade = self.run(self.db.trades.get(self.parties[party].client_id, user_id, self.trade_id))
        assert trade is not None
        return trade

    def succeeded(self) -> Any:
        assert self.error is None, f"expected success, got {self.error!r}"
        return self.answer

    # step helpers, reachable from every step module through the `world` fixture
    def ask_for_quote(
        self, request: str | tuple[str, dict[str, Any]], user: str = "the user"
    ) -> None:
        """`sell 0.5 BTC for USD` (or a side and a raw body) as a quote request."""
        side, body = quote_request(request) if isinstance(request, str) else request
        ask_for_quote(self, side, body, user)

    def act(self, action: str, **kwargs: Any) -> None:
        """`approve`, `cancel` or `check` the trade under discussion (or `trade_id=`)."""
        act_on_trade(self, action, **kwargs)

    def pass_quote_lifetime(self) -> None:
        self.clock.advance(QUOTE_LIFETIME.total_seconds())

    def check_shape(self, view: dict[str, Any]) -> dict[str, Any]:
        return check_trade_shape(view)

    def read_quote_request(self, text: str) -> tuple[str, dict[str, Any]]:
        return quote_request(text)


def _wire(result: Any) -> Any:
    if isinstance(result, Trade):
        return check_trade_shape(trade_view(result))
    if isinstance(result, list) and all(isinstance(t, Trade) for t in result):
        return [check_trade_shape(trade_view(t)) for t in result]
    return result


@pytest.fixture
def world(tmp_path: Path, clock: ManualClock) -> Iterator[World]:
    with asyncio.Runner() as runner:
        yield World(runner=runner, home=tmp_path / "home", clock=clock)


# -- the spec's field rules for a trade -----------------------------------------------------
REQUIRED = {
    "tradeId",
    "side",
    "status",
    "assetId",
    "symbol",
    "fiat",
    "cryptoAmount",
    "fiatAmount",
    "price",
    "quote",
    "createdAt",
    "approvedAt",
    "completedAt",
}
OPTIONAL = {"reference", "failureReason"}
#: At most 6 places, trailing zeros trimmed, no sign, no exponent.
AMOUNT = re.compile(r"\A(0|[1-9][0-9]*)(\.[0-9]{0,5}[1-9])?\Z")
DATETIME = re.compile(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z")
FIATS = {"USD", "EUR", "GBP", "CAD", "AUD", "SEK", "DKK", "PLN", "BRL", "AED"}


def check_trade_shape(view: dict[str, Any]) -> dict[str, Any]:
    assert REQUIRED <= set(view) <= REQUIRED | OPTIONAL, sorted(view)
    assert re.fullmatch(r"[0-9a-f]{24}", view["tradeId"])
    assert view["side"] in ("buy", "sell")
    assert view["status"] in STATUSES
    assert view["fiat"] in FIATS
    assert isinstance(view["assetId"], int) and not isinstance(view["assetId"], bool)
    for figures in (view, view["quote"]):
        for key in ("cryptoAmount", "fiatAmount"):
            assert figures[key] is None or AMOUNT.match(figures[key]), (key, figures[key])
        assert AMOUNT.match(figures["price"]), figures["price"]
    assert set(view["quote"]) == {"cryptoAmount", "fiatAmount", "price", "expiresAt"}
    assert DATETIME.match(view["quote"]["expiresAt"])
    assert DATETIME.match(view["createdAt"])
    for key in ("approvedAt", "completedAt"):
        assert view[key] is None or DATETIME.match(view[key]), (key, view[key])
    status = view["status"]
    # completedAt is null until a terminal status is reached; approvedAt null until approved
    assert (view["completedAt"] is not None) == (status in TERMINAL), view
    if status in ("open", "cancelled"):
        assert view["approvedAt"] is None
    if status in ("approved", "executing", "completed", "failed"):
        assert view["approvedAt"] is not None
    # failureReason only on a failed trade, and always there
    assert ("failureReason" in view) == (status == "failed"), view
    if "failureReason" in view:
        assert isinstance(view["failureReason"], str) and view["failureReason"]
    return view


# -- words of the step text ----------------------------------------------------------------
def asset_named(text: str) -> Asset:
    """`BTC`, `USDT on TRON`: a coin symbol, with its chain when the symbol is on several."""
    symbol, _, chain = text.strip().partition(" on ")
    found = [
        a
        for a in CONTRACT_CATALOG.assets
        if a.symbol == symbol and (not chain or a.chain.value == chain.upper())
    ]
    assert len(found) == 1, f"{text!r} names {len(found)} assets; say which chain"
    return found[0]


def raw_asset_id(text: str) -> object:
    """What the request carries for an asset named in step text (`unit of asset 7` is raw)."""
    match = re.fullmatch(r"units? of asset (\S+)", text.strip())
    if match:
        raw = match.group(1)
        return int(raw) if raw.isdigit() else raw
    return asset_named(text).id


def asset_list(text: str) -> list[int]:
    names = re.split(r",\s*|\s+and\s+", text.strip())
    return [asset_named(n).id for n in names if n]


QUOTE_FORMS = (
    ("sell", "crypto", parse.compile("sell {amount} {asset} for {fiat}")),
    ("sell", "fiat", parse.compile("sell {asset} worth {amount} {fiat}")),
    ("buy", "crypto", parse.compile("buy {amount} {asset} with {fiat}")),
    ("buy", "fiat", parse.compile("buy {asset} worth {amount} {fiat}")),
)


def quote_request(text: str) -> tuple[str, dict[str, Any]]:
    """`sell 0.5 BTC for USD` -> ("sell", body) in the service's keyword form."""
    for side, fixed, form in QUOTE_FORMS:
        found = form.parse(text)
        if found is not None:
            body: dict[str, Any] = {
                "asset_id": raw_asset_id(found["asset"]),
                "fiat": found["fiat"],
                f"{fixed}_amount": found["amount"],
            }
            return side, body
    raise AssertionError(f"cannot read the quote request {text!r}")


def ask_for_quote(world: World, side: str, body: dict[str, Any], user: str = "the user") -> None:
    party = world.users[user][0]
    trading = world.container.trading()
    caller = world.caller(party)
    method = trading.sell if side == "sell" else trading.order
    trade = world.attempt(lambda: method(caller, user_id=world.user_id(user), **body))
    if trade is not None:
        world.trade_id = trade.trade_id
        world.first_quote = dict(world.answer["quote"])
        world.made.append(trade.trade_id)


def act_on_trade(
    world: World,
    action: str,
    *,
    party: str = "the api client",
    user: str = "the user",
    trade_id: str | None = None,
) -> None:
    trading = world.container.trading()
    caller = world.caller(party)
    method = {"approve": trading.approve, "cancel": trading.cancel, "check": trading.get}[action]
    tid = trade_id or world.trade_id
    world.attempt(lambda: method(caller, user_id=world.user_id(user), trade_id=tid))


def seconds_to_next_minute(world: World) -> int:
    now = world.clock.now()
    return 60 - now.second + 1


# -- parties ---------------------------------------------------------------------------------
def _issue_client(world: World, name: str, assets: list[int] | None) -> Party:
    issued = world.run(world.container.auth().create_client(name, assets=assets))
    return Party(issued.client.client_id, issued.api_key)


@given(parsers.parse("an api client enabled for {assets}"))
def given_api_client(world: World, assets: str) -> None:
    world.parties["the api client"] = _issue_client(world, "Acme Pay", asset_list(assets))


@given("a user of that api client")
def given_user(world: World, make_user: Any) -> None:
    client_id = world.parties["the api client"].client_id
    world.users["the user"] = (
        "the api client",
        world.run(make_user(world.storage, world.clock, client_id)),
    )


@given("another user of the same api client")
def given_other_user(world: World, make_user: Any) -> None:
    client_id = world.parties["the api client"].client_id
    user_id = world.run(make_user(world.storage, world.clock, client_id))
    world.users["another user"] = ("the api client", user_id)


@given("another api client with a user of its own")
def given_other_client(world: World, make_user: Any) -> None:
    world.parties["another api client"] = _issue_client(world, "Other Ltd", None)
    client_id = world.parties["another api client"].client_id
    user_id = world.run(make_user(world.storage, world.clock, client_id))
    world.users["the other client's user"] = ("another api client", user_id)


# -- the environment ---------------------------------------------------------------------
@given(parsers.parse("the environment limits {asset}"))
def given_limited(world: World, asset: str) -> None:
    world.reconfigure(limited_assets=[asset_named(asset).id])


@given(parsers.parse("trading is unavailable for {asset} on this environment"))
def given_unavailable(world: World, asset: str) -> None:
    asset_id = asset_named(asset).id
    world.reconfigure(
        unavailable_assets={"sell": [asset_id], "order": [asset_id], "trade/approve": [asset_id]}
    )


@given(
    parsers.parse("the operator bounds trades of {asset} between {minimum} and {maximum} {unit}")
)
def given_trade_bounds(world: World, asset: str, minimum: str, maximum: str, unit: str) -> None:
    named = asset_named(asset)
    assert unit == named.symbol, f"the bounds are in {named.symbol}"
    world.reconfigure(trade_minimums={named.id: minimum}, trade_maximums={named.id: maximum})


# -- time ------------------------------------------------------------------------------------
@given("the quote lifetime has passed")
@when("the quote lifetime passes")
def quote_lifetime_passes(world: World) -> None:
    world.pass_quote_lifetime()


@given(parsers.re(r"(?P<seconds>\d+) seconds? (?:pass|have passed)"), converters={"seconds": int})
@when(parsers.re(r"(?P<seconds>\d+) seconds? pass(?:es)?"), converters={"seconds": int})
def seconds_pass(world: World, seconds: int) -> None:
    world.clock.advance(seconds)


@when(
    parsers.re(r"(?P<minutes>\d+) minutes?(?: and (?P<seconds>\d+) seconds?)? pass"),
    converters={"minutes": int},
)
def minutes_pass(world: World, minutes: int, seconds: str | None) -> None:
    world.clock.advance(minutes * 60 + int(seconds or 0))


@given("the market moves before the user approves")
def market_moves(world: World) -> None:
    """Into the next minute: the sandbox price of the approval differs from the quote's."""
    step = seconds_to_next_minute(world)
    world.clock.advance(step)
    assert world.stored_trade().quote.expires_at > world.clock.now(), "the quote lapsed"


# -- requests and their outcomes -----------------------------------------------------------
@then("the request succeeds")
def request_succeeds(world: World) -> None:
    world.succeeded()


@then(parsers.parse("the request fails with status {code:d}"))
def request_fails(world: World, code: int) -> None:
    assert world.error is not None, f"expected {code}, got the answer {world.answer!r}"
    assert world.error.status == code, repr(world.error)


@then(parsers.parse('the request fails with status {code:d} and the message "{message}"'))
def request_fails_with_message(world: World, code: int, message: str) -> None:
    request_fails(world, code)
    assert world.error is not None
    assert world.error.message == message


@then(parsers.parse('the request fails with status {code:d} and a message starting "{prefix}"'))
def request_fails_with_prefix(world: World, code: int, prefix: str) -> None:
    request_fails(world, code)
    assert world.error is not None
    assert world.error.message.startswith(prefix), world.error.message


@then(parsers.parse('the request fails with status {code:d} and a message naming "{word}"'))
def request_fails_naming(world: World, code: int, word: str) -> None:
    request_fails(world, code)
    assert world.error is not None
    assert word in world.error.message, world.error.message


# -- wallets on the sandbox chains (shared by the wallet and send features) ------------------
def wallet_address(world: World, chain: Any, owner: str = "the user") -> str:
    """The address on `chain` of the user's wallet, or of the api client's platform wallet."""
    from walletcore.domain.wallet import WalletOwner

    if owner == "the platform":
        client_id = world.parties["the api client"].client_id
        wallet = world.run(world.db.wallets.get(client_id, WalletOwner.PLATFORM, None))
    else:
        party, user_id = world.users[owner]
        client_id = world.parties[party].client_id
        wallet = world.run(world.db.wallets.get(client_id, WalletOwner.USER, user_id))
    assert wallet is not None, f"{owner} has no wallet"
    return str(wallet.addresses[chain])


def fund_wallet(world: World, amount: str, asset_text: str, owner: str = "the user") -> None:
    """Sandbox coins from the faucet (`walletcore sandbox fund`)."""
    from walletcore_sandbox.faucet import fund

    asset = asset_named(asset_text)
    world.run(
        fund(
            world.container.settings(),
            world.container.gateways(),
            world.container.catalog(),
            chain=asset.chain.value,
            address=wallet_address(world, asset.chain, owner),
            asset_id=asset.id,
            amount=amount,
        )
    )


def wallet_balance(world: World, asset_text: str, owner: str = "the user") -> str:
    from walletcore.domain.money import format_balance

    asset = asset_named(asset_text)
    gateway = world.container.gateways()[asset.chain]
    units = world.run(gateway.balance(wallet_address(world, asset.chain, owner), asset))
    return format_balance(units, asset.decimals)


@given(parsers.parse("the user's wallet holds {amount} {asset}"))
def given_user_holds(world: World, amount: str, asset: str) -> None:
    """What the user's wallet holds of an asset, as the backing check of sells reads it."""
    found = asset_named(asset)
    world.holdings.by_asset[found.id] = int(Decimal(amount).scaleb(found.decimals))


@given(parsers.parse("the wallet holds {amount} {asset}"))
@given(parsers.parse("the wallet receives {amount} {asset}"))
def given_wallet_funds(world: World, amount: str, asset: str) -> None:
    fund_wallet(world, amount, asset)


@given(parsers.parse("the platform wallet holds {amount} {asset}"))
def given_platform_funds(world: World, amount: str, asset: str) -> None:
    fund_wallet(world, amount, asset, owner="the platform")


@then(parsers.parse("the wallet holds {amount} {asset}"))
def then_wallet_holds(world: World, amount: str, asset: str) -> None:
    assert wallet_balance(world, asset) == amount


class ChainTools:
    """The helpers above for step modules, which reach them through the `chain_tools`
    fixture (a step module never imports conftest at run time)."""

    asset_named = staticmethod(asset_named)
    wallet_address = staticmethod(wallet_address)
    fund_wallet = staticmethod(fund_wallet)
    wallet_balance = staticmethod(wallet_balance)


@pytest.fixture
def chain_tools() -> type[ChainTools]:
    return ChainTools
