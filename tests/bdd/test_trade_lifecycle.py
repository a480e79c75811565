"""Steps of features/trade_lifecycle.feature (the shared ones live in conftest.py)."""

from __future__ import annotations

import asyncio
import re
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import msgspec
from pytest_bdd import given, parsers, scenarios, then, when

from walletcore.domain.assets import Fiat
from walletcore.domain.errors import DomainError
from walletcore.domain.ids import new_id
from walletcore.domain.money import format_amount
from walletcore.domain.trade import Trade
from walletcore_litestar.schemas import TradeView
from walletcore_sandbox.prices import sandbox_unit_price

if TYPE_CHECKING:
    from conftest import World


def _status(text: str) -> str:
    return text


_status.pattern = "open|approved|executing|completed|failed|expired|cancelled"  # type: ignore[attr-defined]
TYPES = {"Status": _status}

scenarios("trade_lifecycle.feature")

#: The quote request that leads to each status with the sandbox venue's trigger amounts.
ROUTES: dict[str, tuple[str, str | None]] = {
    # status: (quote request for a sell, what happens next)
    "open": ("sell 0.5 BTC for USD", None),
    "completed": ("sell 0.5 BTC for USD", "approve"),
    "approved": ("sell BTC worth 202 USD", "approve"),
    "approved-unsettled": ("sell BTC worth 203 USD", "approve"),
    "executing": ("sell BTC worth 504 USD", "approve"),
    "failed": ("sell BTC worth 502 USD", "approve"),
    "cancelled": ("sell 0.5 BTC for USD", "cancel"),
    "expired": ("sell 0.5 BTC for USD", "lapse"),
}


def _when(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z")


def make_trade(world: World, status: str, side: str = "sell") -> None:
    request, then_do = ROUTES[status]
    if side == "buy":
        request = request.replace("sell", "buy").replace(" for USD", " with USD")
    world.ask_for_quote(request)
    assert world.answer is not None and world.answer["status"] == "open", world.error
    if then_do == "lapse":
        world.pass_quote_lifetime()
        world.act("check")
    elif then_do is not None:
        world.act(then_do)
    assert world.stored()["status"] == status.split("-")[0]
    world.remembered = world.stored()


# -- quotes ------------------------------------------------------------------------------
@when(parsers.parse("the user asks to {request}"))
def ask(world: World, request: str) -> None:
    both = re.fullmatch(r"(sell|buy) (.+) for (\S+) giving (both amounts|neither amount)", request)
    if both:
        side, asset, fiat, which = both.groups()
        asset_id = world.read_quote_request(f"sell 1 {asset} for {fiat}")[1]["asset_id"]
        body: dict[str, Any] = {"asset_id": asset_id, "fiat": fiat}
        if which == "both amounts":
            body.update(crypto_amount="1", fiat_amount="100")
        world.ask_for_quote((side, body))
        return
    no_fiat = re.fullmatch(r"(sell|buy) (\S+) (.+) without naming a fiat", request)
    if no_fiat:
        side, amount, asset = no_fiat.groups()
        body = dict(world.read_quote_request(f"sell {amount} {asset} for USD")[1])
        del body["fiat"]
        world.ask_for_quote((side, body))
        return
    world.ask_for_quote(request)


@when(parsers.parse("a quote to {request} is asked for a user who does not exist"))
def ask_for_nobody(world: World, request: str) -> None:
    side, body = world.read_quote_request(request)
    world.users["nobody"] = ("the api client", new_id())
    world.ask_for_quote((side, body), user="nobody")


@given(parsers.parse("the user has an open quote to {request}"))
def has_open_quote(world: World, request: str) -> None:
    world.ask_for_quote(request)
    assert world.succeeded()["status"] == "open"


@given("the user has an approved trade that the venue never settles")
def approved_unsettled(world: World) -> None:
    make_trade(world, "approved-unsettled")


@given(parsers.parse("the user has {article} {status:Status} trade", extra_types=TYPES))
def has_trade(world: World, article: str, status: str) -> None:
    make_trade(world, status)


@given(parsers.parse("the user has made {count:d} quotes, one second apart"))
def has_made_quotes(world: World, count: int) -> None:
    for n in range(1, count + 1):
        world.ask_for_quote(f"sell 0.{n:02d} BTC for USD")
        world.succeeded()
        world.clock.advance(1)


@given("the user has these trades, one second apart:")
def has_these_trades(world: World, datatable: list[list[str]]) -> None:
    header, *rows = datatable
    for row in rows:
        wanted = dict(zip(header, row, strict=True))
        make_trade(world, wanted["status"], wanted["side"])
        world.clock.advance(1)


@given("another user of the same api client has a trade")
def other_user_has_trade(world: World) -> None:
    world.ask_for_quote("buy 1 ETH with USD", user="another user")
    world.succeeded()


# -- acting on the trade -------------------------------------------------------------------
@when("the user approves the trade")
@when("the user approves the trade again")
def approve(world: World) -> None:
    world.act("approve")


@when("the user cancels the trade")
@when("the user cancels the trade again")
def cancel(world: World) -> None:
    world.act("cancel")


@when("the user checks the trade")
def check(world: World) -> None:
    world.act("check")


VERBS = {"checks": "check", "approves": "approve", "cancels": "cancel"}


@when(parsers.parse("another user of the same api client {verb} the trade"))
def other_user_acts(world: World, verb: str) -> None:
    world.remembered = world.stored()
    world.last_act = {"action": VERBS[verb], "party": "the api client", "user": "another user"}
    world.act(VERBS[verb], user="another user")


@when(parsers.parse("another api client {verb} the trade on behalf of the user"))
def other_client_acts(world: World, verb: str) -> None:
    world.remembered = world.stored()
    world.last_act = {"action": VERBS[verb], "party": "another api client", "user": "the user"}
    world.act(VERBS[verb], party="another api client")


@when(parsers.parse("the user approves the trade {count:d} times at once"))
def approve_at_once(world: World, count: int) -> None:
    trading = world.container.trading()
    callers = [world.caller() for _ in range(count)]

    async def all_at_once() -> list[Trade | BaseException]:
        return await asyncio.gather(
            *(
                trading.approve(c, user_id=world.user_id(), trade_id=world.trade_id)
                for c in callers
            ),
            return_exceptions=True,
        )

    world.remembered = world.run(all_at_once())


@when("the user lists their trades")
def list_trades(world: World) -> None:
    caller = world.caller()
    world.attempt(lambda: world.container.trading().list(caller, user_id=world.user_id()))


@when(parsers.parse('the user lists their trades with {key} "{value}"'))
def list_trades_filtered(world: World, key: str, value: str) -> None:
    assert key in ("side", "status")
    caller = world.caller()
    world.attempt(
        lambda: world.container.trading().list(caller, user_id=world.user_id(), **{key: value})
    )


# -- what the answer shows -----------------------------------------------------------------
@then(parsers.parse("the answer shows the trade {status:Status}", extra_types=TYPES))
def answer_shows(world: World, status: str) -> None:
    assert world.succeeded()["status"] == status, world.answer


@then(parsers.parse("the trade is {status:Status}", extra_types=TYPES))
def trade_is(world: World, status: str) -> None:
    assert world.stored()["status"] == status.split("-")[0]


@then("the trade is unchanged")
def trade_unchanged(world: World) -> None:
    assert world.stored() == world.remembered


@then(parsers.parse("the answer is a {side} trade of {asset} in {fiat}"))
def answer_is(world: World, side: str, asset: str, fiat: str) -> None:
    answer = world.succeeded()
    assert (answer["side"], answer["symbol"], answer["fiat"]) == (side, asset, fiat)


@then(parsers.parse('the answer shows a {leg} amount of "{value}"'))
def answer_amount(world: World, leg: str, value: str) -> None:
    assert leg in ("crypto", "fiat")
    assert world.succeeded()[f"{leg}Amount"] == value


@then("the answer has no approval time and no completion time")
def no_times(world: World) -> None:
    answer = world.succeeded()
    assert answer["approvedAt"] is None and answer["completedAt"] is None


@then("the answer has an approval time and a completion time")
def both_times(world: World) -> None:
    answer = world.succeeded()
    assert answer["approvedAt"] is not None and answer["completedAt"] is not None


@then("the answer has an approval time but no completion time")
def approval_time_only(world: World) -> None:
    answer = world.succeeded()
    assert answer["approvedAt"] is not None and answer["completedAt"] is None


@then("the answer has no approval time")
def no_approval_time(world: World) -> None:
    assert world.succeeded()["approvedAt"] is None


@then("the answer's completion time is the moment the quote lapsed")
def completed_when_lapsed(world: World) -> None:
    answer = world.succeeded()
    assert answer["completedAt"] == answer["quote"]["expiresAt"]


@then("the quote expires one minute after it was created")
def quote_expires_in_a_minute(world: World) -> None:
    answer = world.succeeded()
    lifetime = _when(answer["quote"]["expiresAt"]) - _when(answer["createdAt"])
    assert lifetime.total_seconds() == 60


@then("the top-level figures are the quoted figures")
def top_level_quoted(world: World) -> None:
    answer = world.succeeded()
    quote = answer["quote"]
    assert [answer[k] for k in ("cryptoAmount", "fiatAmount", "price")] == [
        quote[k] for k in ("cryptoAmount", "fiatAmount", "price")
    ]


@then("the price in the answer differs from the quoted price")
def price_moved(world: World) -> None:
    answer = world.succeeded()
    assert answer["price"] != answer["quote"]["price"]


@then("the price in the answer is the market price at the moment of approval")
def price_at_approval(world: World) -> None:
    answer = world.succeeded()
    trade = world.stored_trade()
    assert trade.approved_at == world.clock.now()  # the clock has not moved since
    prices = world.container.prices()  # the venue re-prices through the configured source
    market = world.run(prices.unit_price(answer["symbol"], Fiat(answer["fiat"])))
    assert market == sandbox_unit_price(answer["symbol"], Fiat(answer["fiat"]), trade.approved_at)
    assert answer["price"] == format_amount(market)


@then("the amounts in the answer agree with its price")
def amounts_agree(world: World) -> None:
    """crypto x price = fiat, within what cutting each figure to 6 places can move."""
    answer = world.succeeded()
    crypto, fiat, price = (Decimal(answer[k]) for k in ("cryptoAmount", "fiatAmount", "price"))
    slack = Decimal("0.000001") * (crypto + price + 1)
    assert abs(crypto * price - fiat) <= slack, (crypto, price, fiat)


@then("the quote in the answer is exactly the quote first offered")
def quote_frozen(world: World) -> None:
    assert world.first_quote is not None
    assert world.succeeded()["quote"] == world.first_quote


@then("the answer is exactly the earlier answer")
def same_answer(world: World) -> None:
    assert world.succeeded() == world.remembered


@then("the trade carries a failure reason")
def has_failure_reason(world: World) -> None:
    assert world.stored()["failureReason"]


@then("the trade has a completion time")
def has_completion_time(world: World) -> None:
    assert world.stored()["completedAt"] is not None


@then("the answer is the same as for a trade that does not exist")
def same_as_missing(world: World) -> None:
    seen = world.error
    assert seen is not None and seen.status == 404, repr(seen)
    act = world.last_act
    world.act(act["action"], party=act["party"], user=act["user"], trade_id=new_id())
    assert world.error is not None
    assert (world.error.status, world.error.message) == (seen.status, seen.message)


# -- the venue -------------------------------------------------------------------------------
@then("nothing has been sent to the venue")
def nothing_sent(world: World) -> None:
    assert world.venue.executions == 0


@then(
    parsers.re(r"the venue has been asked to execute (?P<count>\d+) orders?"),
    converters={"count": int},
)
def venue_executions(world: World, count: int) -> None:
    assert world.venue.executions == count


@then("exactly one approval went through and every other one was refused or replayed")
def one_approval(world: World) -> None:
    outcomes = world.remembered
    traded = [o for o in outcomes if isinstance(o, Trade)]
    refused = [o for o in outcomes if isinstance(o, DomainError)]
    assert len(traded) + len(refused) == len(outcomes), outcomes
    assert all(e.status == 409 for e in refused), refused
    # every 200 is the same settled trade
    views = {msgspec.json.encode(TradeView.of(t)) for t in traded}
    assert len(views) == 1 and traded[0].status.value == "completed"


# -- lists -----------------------------------------------------------------------------------
@then(parsers.parse("{count:d} trades are listed, newest first"))
def listed_newest_first(world: World, count: int) -> None:
    listed = world.succeeded()
    assert len(listed) == count
    created = [_when(t["createdAt"]) for t in listed]
    assert created == sorted(created, reverse=True)


@then(parsers.parse("they are the {count:d} most recent quotes"))
def most_recent(world: World, count: int) -> None:
    assert [t["tradeId"] for t in world.succeeded()] == list(reversed(world.made))[:count]


@then("the list shows, newest first:")
def list_shows(world: World, datatable: list[list[str]]) -> None:
    header, *rows = datatable
    listed = world.succeeded()
    assert [["" if t[h] is None else str(t[h]) for h in header] for t in listed] == rows
    assert all(t["tradeId"] in world.made for t in listed)


@then("the list is empty")
def list_empty(world: World) -> None:
    assert world.succeeded() == []


@then("every listed trade belongs to the user")
def listed_are_mine(world: World) -> None:
    listed = world.succeeded()
    assert listed and {t["tradeId"] for t in listed} <= set(world.made)
    for view in listed:
        world.check_shape(view)
