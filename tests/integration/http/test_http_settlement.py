"""Trades that move coins, over HTTP on the sandbox chains and the SQL storage (SQLite and
PostgreSQL) (docs/settlement.md): a sell collected with the password moves the sold amount
from the user's wallet to the desk once, a buy is delivered from the desk once; twenty
approvals of one buy make one order and one delivery; an approval of a sell racing a
`/send` of the same coins never lets both spend them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok
from test_http_wallet_ops import OUTSIDE, give

from walletcore.clock import ManualClock, SystemClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.keystore import SealedKeyStore
from walletcore_cli import main as cli_main
from walletcore_sandbox.ledger import DATA_FILE as LEDGER_FILE
from walletcore_sandbox.ledger import SandboxLedger
from walletcore_sql.engine import sqlite_url
from walletcore_sql.storage import SqlStorage
from walletcore_sql.testing import create_schema_async, drop_schema_async, pg_test_url

pytestmark = pytest.mark.trades
BTC = CONTRACT_CATALOG.native_asset(Chain.BITCOIN).id
ETH = CONTRACT_CATALOG.native_asset(Chain.ETHEREUM).id
DELIVERY = "walletcore:delivery:"


@dataclass(frozen=True)
class Database:
    url: str
    schema: str | None = None

    def storage(self, *, migrate: bool = False) -> SqlStorage:
        return SqlStorage(self.url, migrate=migrate, schema=self.schema)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    """An empty database: a SQLite file, or a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        yield Database(sqlite_url(tmp_path / "db" / "walletcore.db"))
        return
    url = pg_test_url()
    schema = await create_schema_async(url)
    try:
        yield Database(url, schema)
    finally:
        await drop_schema_async(url, schema)


@pytest.fixture
async def storage(database: Database) -> AsyncIterator[SqlStorage]:
    """The service's storage, migrated."""
    opened = database.storage(migrate=True)
    yield opened
    await opened.aclose()


@pytest.fixture
def clock() -> ManualClock:
    """Today: the `walletcore sandbox fund` of a test funds at the system's time."""
    return ManualClock(SystemClock().now())


@pytest.fixture
def container(
    tmp_path: Path, clock: ManualClock, keystore: SealedKeyStore, storage: SqlStorage
) -> Container:
    """The sandbox chains, the sandbox venue, balances read on chain."""
    settings = Settings(home=tmp_path / "home", repo="sql")
    return create_container(settings, clock=clock, keystore=keystore, storage=storage)


async def user_with(api: Api, asset_id: int, amount: str) -> tuple[str, str]:
    """A new user whose wallet holds `amount` of the asset: (user id, address)."""
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    chain = CONTRACT_CATALOG.asset_by_id(asset_id).chain.value
    address = created["addresses"][chain]
    if Decimal(amount):
        await give(api.container, address, asset_id, amount)
    return created["userId"], address


async def desk_with(api: Api, **amounts: str) -> dict[Chain, str]:
    """The client's platform wallet, funded with `amounts` (asset id as `a<id>`)."""
    addresses = await api.container.wallets().provision_platform(api.client_id)
    for name, amount in amounts.items():
        asset_id = int(name[1:])
        chain = CONTRACT_CATALOG.asset_by_id(asset_id).chain
        await give(api.container, addresses[chain], asset_id, amount)
    return addresses


async def balance(api: Api, user_id: str, asset_id: int) -> Decimal:
    return Decimal(assert_ok(await api.post("/balance", {"userId": user_id, "assetId": asset_id})))


async def desk_balance(api: Api, asset_id: int) -> Decimal:
    return Decimal(assert_ok(await api.post("/platform/balance", {"assetId": asset_id})))


async def deliveries(container: Container, client_id: str, trade_id: str) -> list[Any]:
    """The send records of a trade's delivery, one per attempt made."""
    async with container.storage().read() as unit:
        found = [
            await unit.sends.get(client_id, f"{DELIVERY}{trade_id}:{attempt}")
            for attempt in range(1, 5)
        ]
    return [record for record in found if record is not None]


async def sent_from(container: Container, address: str) -> list[str]:
    """The hashes of the sandbox chain's transactions sent from `address`."""
    ledger = SandboxLedger(
        container.settings().home / LEDGER_FILE,
        SystemClock(),
        lambda *_: False,
        catalog=CONTRACT_CATALOG,
    )
    try:
        return [tx.tx_hash for tx in await ledger.transactions() if tx.sender == address]
    finally:
        await ledger.aclose()


async def run_jobs(container: Container, clock: ManualClock) -> None:
    """The follow and settlement jobs, once each, a minute later."""
    clock.advance(61)
    jobs = container.jobs()
    await jobs.follow_sends()
    await jobs.settle_coins()


async def test_a_new_user_sells_half_of_their_btc_with_the_password(
    api: Api, container: Container, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk = await desk_with(api)
    user, address = await user_with(api, BTC, "0")
    monkeypatch.setenv("WALLETCORE_HOME", str(container.settings().home))
    argv = ["--chain", "BITCOIN", "--address", address, "--asset", str(BTC), "--amount", "0.1"]
    assert await asyncio.to_thread(cli_main, ["sandbox", "fund", *argv]) == 0
    clock.advance((SystemClock().now() - clock.now()).total_seconds() + 1)  # the CLI's time
    assert await balance(api, user, BTC) == Decimal("0.1")
    quote = assert_ok(
        await api.post("/sell", {"userId": user, "assetId": BTC, "cryptoAmount": "0.05"})
    )
    ids = {"userId": user, "tradeId": quote["tradeId"]}
    done = assert_ok(await api.post("/trade/approve", {**ids, "password": PASSWORD}))
    assert done["status"] == "completed"
    assert done["settlement"]["status"] in ("sent", "settled"), done["settlement"]
    left = await balance(api, user, BTC)
    fee = Decimal("0.1") - Decimal("0.05") - left
    assert Decimal(0) <= fee < Decimal("0.001"), left  # the sold amount, plus the fee (USER)
    assert desk[Chain.BITCOIN]
    again = {"userId": user, "assetId": BTC, "cryptoAmount": "0.05"}
    assert_error(await api.post("/sell", again), 400)  # the same coins are gone
    for _ in range(3):
        await run_jobs(container, clock)
    settled = assert_ok(await api.post("/trade", ids))["settlement"]
    assert settled["status"] == "settled", settled
    assert await balance(api, user, BTC) == left
    assert await desk_balance(api, BTC) == Decimal("0.05")  # the desk receives it exactly


async def test_a_buy_is_delivered_from_the_desk_and_a_sell_collected_to_it(
    api: Api, container: Container, clock: ManualClock
) -> None:
    await desk_with(api, a2="1")
    user, _ = await user_with(api, ETH, "0")
    quote = assert_ok(
        await api.post("/order", {"userId": user, "assetId": ETH, "cryptoAmount": "0.2"})
    )
    done = assert_ok(
        await api.post("/trade/approve", {"userId": user, "tradeId": quote["tradeId"]})
    )
    assert done["status"] == "completed"
    assert done["settlement"]["status"] in ("sent", "settled"), done["settlement"]
    for _ in range(3):
        await run_jobs(container, clock)
    assert await balance(api, user, ETH) == Decimal("0.2")  # exactly: the desk paid the fee
    desk_left = await desk_balance(api, ETH)
    assert Decimal("0.8") - Decimal("0.001") < desk_left <= Decimal("0.8")
    assert len(await deliveries(container, api.client_id, quote["tradeId"])) == 1
    desk = (await api.container.wallets().provision_platform(api.client_id))[Chain.ETHEREUM]
    assert len(await sent_from(container, desk)) == 1

    sell = assert_ok(
        await api.post("/sell", {"userId": user, "assetId": ETH, "cryptoAmount": "0.1"})
    )
    ids = {"userId": user, "tradeId": sell["tradeId"]}
    waiting = assert_ok(await api.post("/trade/approve", ids))
    assert waiting["settlement"]["status"] == "awaiting_password"
    assert await balance(api, user, ETH) == Decimal("0.2")  # held, not moved
    assert_error(await api.post("/trade/collect", {**ids, "password": "wrong password!"}), 401)
    assert await balance(api, user, ETH) == Decimal("0.2")
    collected = assert_ok(await api.post("/trade/collect", {**ids, "password": PASSWORD}))
    assert collected["settlement"]["status"] in ("sent", "settled")
    for _ in range(3):
        await run_jobs(container, clock)
    assert assert_ok(await api.post("/trade", ids))["settlement"]["status"] == "settled"
    assert await desk_balance(api, ETH) == desk_left + Decimal("0.1")
    assert await balance(api, user, ETH) < Decimal("0.1")  # the amount and the fee (USER)


async def test_twenty_approvals_of_one_buy_make_one_order_and_one_delivery(
    api: Api, container: Container, clock: ManualClock
) -> None:
    desk = (await desk_with(api, a2="1"))[Chain.ETHEREUM]
    user, _ = await user_with(api, ETH, "0")
    body = {"userId": user, "assetId": ETH, "cryptoAmount": "0.3"}
    quote = assert_ok(await api.post("/order", body))
    ids = {"userId": user, "tradeId": quote["tradeId"]}
    answers = await asyncio.gather(*(api.post("/trade/approve", ids) for _ in range(20)))
    trades = [assert_ok(a) for a in answers]  # every approval answers the same trade
    assert {(t["tradeId"], t["status"]) for t in trades} == {(quote["tradeId"], "completed")}
    hashes = {t["settlement"].get("txHash") for t in trades} - {None}
    assert len(hashes) == 1, trades  # one delivery, whichever answer saw it sent
    async with container.storage().read() as unit:
        entries = await unit.audit.newest(1000)
    approved = [e for e in entries if (e.action, e.outcome) == ("trade.approve", "ok")]
    assert len(approved) == 1  # one order went to the venue
    for _ in range(3):
        await run_jobs(container, clock)
    final = assert_ok(await api.post("/trade", ids))
    assert (final["status"], final["settlement"]["status"]) == ("completed", "settled")
    assert len(await deliveries(container, api.client_id, quote["tradeId"])) == 1
    assert len(await sent_from(container, desk)) == 1  # one transaction on chain
    assert await balance(api, user, ETH) == Decimal("0.3")


@pytest.mark.sends
@pytest.mark.parametrize("collect", [False, True], ids=["held", "collected"])
async def test_an_approval_of_a_sell_racing_a_send_of_the_same_coins_never_spends_them_twice(
    api: Api, container: Container, collect: bool
) -> None:
    """`collected`: the approval carries the password, and collects in the same request."""
    await desk_with(api)
    outcomes = set()
    for round_ in range(20):
        user, address = await user_with(api, ETH, "1")
        sell = {"userId": user, "assetId": ETH, "cryptoAmount": "0.8"}
        quote = assert_ok(await api.post("/sell", sell))
        ids = {"userId": user, "tradeId": quote["tradeId"]}
        send = {
            "userId": user,
            "assetId": ETH,
            "recipient": OUTSIDE[Chain.ETHEREUM],
            "amount": "0.8",
            "password": PASSWORD,
        }
        delay = (round_ % 5) * 0.001  # the approval goes a little later round by round

        async def approve(delay: float = delay, ids: dict[str, str] = ids) -> Any:
            if delay:
                await asyncio.sleep(delay)
            body = {**ids, "password": PASSWORD} if collect else ids
            return await api.post("/trade/approve", body)

        approved, sent = await asyncio.gather(
            approve(), api.post("/send", send, X_Request_Id=f"r-{user}")
        )
        assert (approved.status_code, sent.status_code) in ((200, 400), (400, 200)), (
            approved.text,
            sent.text,
        )
        left = await balance(api, user, ETH)
        trade = assert_ok(await api.post("/trade", ids))
        if approved.status_code == 200:
            outcomes.add("sell")
            refused = assert_error(sent, 400)["message"]
            # held: the send names the hold; collected: the coins may have left already
            assert "reserved" in refused or (collect and "Insufficient ETH" in refused), refused
            on_chain = await sent_from(container, address)
            if collect:  # the collection, and only it, spent them
                assert trade["settlement"]["status"] in ("sent", "settled"), trade
                assert Decimal("0.19") < left < Decimal("0.2")  # the amount and its fee
                assert on_chain == [trade["settlement"]["txHash"]]
            else:
                assert trade["settlement"]["status"] == "awaiting_password"
                assert left == Decimal(1)  # nothing was signed: the coins are held for the sell
                assert on_chain == []
        else:
            outcomes.add("send")
            refused = assert_error(approved, 400)["message"]
            assert "sends" in refused and "less than" in refused, refused
            assert trade["status"] == "open" and "settlement" not in trade
            assert left == Decimal("0.2")  # the send (its fee out of the amount), only the send
            assert len(await sent_from(container, address)) == 1
    assert outcomes  # which one wins is the race's; never both


async def test_a_buy_the_desk_is_short_of_is_delivered_once_after_a_top_up(
    api: Api, container: Container, clock: ManualClock
) -> None:
    desk = (await desk_with(api, a2="0.1"))[Chain.ETHEREUM]
    user, _ = await user_with(api, ETH, "0")
    quote = assert_ok(
        await api.post("/order", {"userId": user, "assetId": ETH, "cryptoAmount": "0.5"})
    )
    ids = {"userId": user, "tradeId": quote["tradeId"]}
    done = assert_ok(await api.post("/trade/approve", ids))
    short = done["settlement"]
    assert (done["status"], short["status"]) == ("completed", "short"), short
    assert short["reason"], short
    await run_jobs(container, clock)  # still short: nothing sent
    assert assert_ok(await api.post("/trade", ids))["settlement"]["status"] == "short"
    assert await sent_from(container, desk) == []

    await give(container, desk, ETH, "1")
    for _ in range(3):
        await run_jobs(container, clock)
    final = assert_ok(await api.post("/trade", ids))["settlement"]
    assert final["status"] == "settled", final
    assert len(await deliveries(container, api.client_id, quote["tradeId"])) == 1
    assert len(await sent_from(container, desk)) == 1
    assert await balance(api, user, ETH) == Decimal("0.5")


async def test_twenty_collections_of_one_sell_move_its_coins_once(
    api: Api, container: Container, clock: ManualClock
) -> None:
    await desk_with(api)
    user, address = await user_with(api, ETH, "1")
    quote = assert_ok(
        await api.post("/sell", {"userId": user, "assetId": ETH, "cryptoAmount": "0.4"})
    )
    ids = {"userId": user, "tradeId": quote["tradeId"]}
    assert_ok(await api.post("/trade/approve", ids))
    body = {**ids, "password": PASSWORD}
    answers = await asyncio.gather(*(api.post("/trade/collect", body) for _ in range(20)))
    assert all(a.status_code in (200, 409) for a in answers), [a.text for a in answers]
    assert any(a.status_code == 200 for a in answers)
    for _ in range(3):
        await run_jobs(container, clock)
    final = assert_ok(await api.post("/trade/collect", body))["settlement"]
    assert final["status"] == "settled", final
    assert len(await sent_from(container, address)) == 1  # collected once
    assert await desk_balance(api, ETH) == Decimal("0.4")


async def test_two_workers_deliver_a_topped_up_buy_once(
    api: Api,
    container: Container,
    clock: ManualClock,
    keystore: SealedKeyStore,
    database: Database,
) -> None:
    desk = (await desk_with(api))[Chain.ETHEREUM]
    user, _ = await user_with(api, ETH, "0")
    quote = assert_ok(
        await api.post("/order", {"userId": user, "assetId": ETH, "cryptoAmount": "0.5"})
    )
    ids = {"userId": user, "tradeId": quote["tradeId"]}
    assert assert_ok(await api.post("/trade/approve", ids))["settlement"]["status"] == "short"
    await give(container, desk, ETH, "1")
    clock.advance(61)
    workers = [
        create_container(container.settings(), clock=clock, keystore=keystore, storage=opened)
        for opened in (database.storage(), database.storage())
    ]
    try:
        runs = [w.jobs().settle_coins() for w in workers for _ in range(3)]
        await asyncio.gather(*runs, api.post("/trade", ids), api.post("/trade", ids))
        for _ in range(3):
            await run_jobs(workers[0], clock)
    finally:
        for worker in workers:
            await worker.storage().aclose()
    final = assert_ok(await api.post("/trade", ids))["settlement"]
    assert final["status"] == "settled", final
    assert len(await deliveries(container, api.client_id, quote["tradeId"])) == 1
    assert len(await sent_from(container, desk)) == 1
    assert await balance(api, user, ETH) == Decimal("0.5")


async def test_a_sell_of_the_whole_balance_leaves_nothing_for_the_collection_fee(
    api: Api, container: Container
) -> None:
    await desk_with(api)
    user, _ = await user_with(api, ETH, "1")
    quote = assert_ok(
        await api.post("/sell", {"userId": user, "assetId": ETH, "cryptoAmount": "1"})
    )
    ids = {"userId": user, "tradeId": quote["tradeId"]}
    refused = assert_error(await api.post("/trade/approve", ids), 400)["message"]
    assert refused.startswith("The wallet holds 1 ETH, less than the 1 ETH to sell and the ")
    assert refused.endswith(" ETH network fee of collecting them"), refused
    assert assert_ok(await api.post("/trade", ids))["status"] == "open"  # nothing traded


async def test_a_wrong_password_on_approval_trades_nothing_and_holds_nothing(
    api: Api, container: Container
) -> None:
    await desk_with(api, a2="1")
    user, _ = await user_with(api, ETH, "1")
    sell = assert_ok(
        await api.post("/sell", {"userId": user, "assetId": ETH, "cryptoAmount": "0.3"})
    )
    ids = {"userId": user, "tradeId": sell["tradeId"]}
    assert_error(await api.post("/trade/approve", {**ids, "password": "not the password"}), 401)
    trade = assert_ok(await api.post("/trade", ids))
    assert trade["status"] == "open" and "settlement" not in trade
    assert_error(await api.post("/trade/collect", {**ids, "password": PASSWORD}), 409)  # open
    buy = assert_ok(
        await api.post("/order", {"userId": user, "assetId": ETH, "cryptoAmount": "0.1"})
    )
    bought = {"userId": user, "tradeId": buy["tradeId"]}
    assert_error(await api.post("/trade/approve", {**bought, "password": PASSWORD}), 400)
    assert_ok(await api.post("/trade/approve", bought))
    assert_error(await api.post("/trade/collect", {**bought, "password": PASSWORD}), 409)
    send = {
        "userId": user,
        "assetId": ETH,
        "recipient": OUTSIDE[Chain.ETHEREUM],
        "amount": "0.1",
        "password": PASSWORD,
    }
    taken = await api.post("/send", send, X_Request_Id=f"{DELIVERY}{buy['tradeId']}:2")
    assert_error(taken, 400)  # the service's own keys are not a client's to take
    assert_ok(await api.post("/trade/approve", {**ids, "password": PASSWORD}))  # all of it free
