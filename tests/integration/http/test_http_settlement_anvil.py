"""Trades that move coins on anvil, over HTTP (docs/settlement.md): ETH and USDT bought and
sold end to end between a user's wallet and the desk (the api client's platform wallet).
The follow and settlement jobs run in a worker container of their own on the same
database, as `walletcore worker` does; blocks are mined on demand for the chain's depth.

- a buy is delivered: the user receives exactly the bought amount, the desk pays it and
  the network fee;
- a sell approved with the password is collected: the desk receives exactly the sold
  amount, the wallet pays it and the fee (fee payer `USER`); approved without one it waits
  `awaiting_password`, a wrong password on `/trade/collect` is the chain's `401` and moves
  nothing, the right one collects;
- a buy the desk is short of is `short` with its reason, and delivered once after a top-up.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok, rpc_env, sign_in
from litestar.testing import AsyncTestClient

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.testing.anvil import AnvilNode, find_anvil
from walletcore_litestar import create_app

pytestmark = [
    pytest.mark.trades,
    pytest.mark.skipif(
        find_anvil() is None, reason="no anvil: run `python3 dev.py test` (it installs it)"
    ),
]
ETH, USDT = CONTRACT_CATALOG.asset_by_id(2), CONTRACT_CATALOG.asset_by_id(21)
CONFIRMATIONS = 12  # ETHEREUM mainnet's depth
DELIVERY = "walletcore:delivery:"


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    with AnvilNode(Chain.ETHEREUM) as started:
        yield started


@pytest.fixture
async def app(
    tmp_path: Path,
    node: AnvilNode,
    clock: ManualClock,
    keystore: SealedKeyStore,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[tuple[Api, Container]]:
    """The HTTP app, and a worker container (the jobs) on the same database."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = {
        **rpc_env(home, Chain.ETHEREUM),
        "WALLETCORE_EVM_NETWORK": "mainnet",
        "WALLETCORE_ETHEREUM_RPC_URL": node.url,
        "WALLETCORE_EVM_RPC_TIMEOUT_SECONDS": "5",
        "WALLETCORE_EVM_TOKENS": json.dumps({str(k): v for k, v in node.tokens.items()}),
        "WALLETCORE_JOBS": "off",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    container = create_container(Settings(), clock=clock, keystore=keystore)
    worker = create_container(Settings(), clock=clock, keystore=keystore)
    async with AsyncTestClient(create_app(container)) as client:
        yield await sign_in(client, container), worker
    await worker.gateways()[Chain.ETHEREUM].aclose()  # type: ignore[attr-defined]
    await worker.storage().aclose()


async def desk(api: Api, node: AnvilNode, eth: int = 0, usdt: int = 0) -> str:
    """The client's platform wallet's ETHEREUM address, funded with `eth` wei and `usdt`."""
    address = (await api.container.wallets().provision_platform(api.client_id))[Chain.ETHEREUM]
    if eth:
        node.fund(address, ETH, eth)
    if usdt:
        node.fund(address, USDT, usdt)
    return address


async def user(api: Api, node: AnvilNode, eth: int = 0, usdt: int = 0) -> tuple[str, str]:
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    address = created["addresses"]["ETHEREUM"]
    if eth:
        node.fund(address, ETH, eth)
    if usdt:
        node.fund(address, USDT, usdt)
    return created["userId"], address


async def balance(api: Api, user_id: str | None, asset_id: int) -> Decimal:
    if user_id is None:
        return Decimal(assert_ok(await api.post("/platform/balance", {"assetId": asset_id})))
    return Decimal(assert_ok(await api.post("/balance", {"userId": user_id, "assetId": asset_id})))


def fee_of(node: AnvilNode, tx_hash: str) -> Decimal:
    """What a mined transaction cost its sender, in ETH."""
    receipt = node.wait_receipt(tx_hash)
    assert receipt["status"] == "0x1", receipt
    wei = int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
    return Decimal(wei).scaleb(-18)


async def settle(api: Api, worker: Container, node: AnvilNode, ids: dict[str, str]) -> Any:
    """The trade once its transfer is mined at depth and the jobs have run: `settled`."""
    trade = assert_ok(await api.post("/trade", ids))
    assert trade["settlement"]["status"] in ("sent", "settled"), trade["settlement"]
    node.wait_receipt(trade["settlement"]["txHash"])
    node.mine(CONFIRMATIONS)
    jobs = worker.jobs()
    await jobs.follow_sends()
    worker.clock().advance(16)  # WALLETCORE_SETTLEMENT_FOLLOW_SECONDS: the transfer is due
    await jobs.settle_coins()
    trade = assert_ok(await api.post("/trade", ids))
    assert trade["settlement"]["status"] == "settled", trade["settlement"]
    return trade


async def trade(api: Api, path: str, user_id: str, asset_id: int, amount: str) -> dict[str, str]:
    body = {"userId": user_id, "assetId": asset_id, "cryptoAmount": amount}
    return {"userId": user_id, "tradeId": assert_ok(await api.post(path, body))["tradeId"]}


async def records(worker: Container, client_id: str, trade_id: str, prefix: str) -> int:
    async with worker.storage().read() as unit:
        found = [await unit.sends.get(client_id, f"{prefix}{trade_id}:{n}") for n in range(1, 5)]
    return sum(record is not None for record in found)


@pytest.mark.parametrize(("asset", "amount"), [(ETH, "0.1"), (USDT, "10")], ids=["ETH", "USDT"])
async def test_a_buy_is_delivered_from_the_desk_to_the_user_exactly(
    app: tuple[Api, Container], node: AnvilNode, asset: Any, amount: str
) -> None:
    api, worker = app
    await desk(api, node, eth=10**18, usdt=100 * 10**6)
    user_id, _ = await user(api, node)
    desk_before = {a.id: await balance(api, None, a.id) for a in (ETH, USDT)}
    ids = await trade(api, "/order", user_id, asset.id, amount)
    done = assert_ok(await api.post("/trade/approve", ids))
    assert done["status"] == "completed"
    settled = await settle(api, worker, node, ids)
    fee = fee_of(node, settled["settlement"]["txHash"])
    assert await balance(api, user_id, asset.id) == Decimal(amount)  # exactly the amount
    paid = Decimal(amount) + fee if asset.is_native else fee
    assert await balance(api, None, ETH.id) == desk_before[ETH.id] - paid
    if not asset.is_native:
        assert await balance(api, None, USDT.id) == desk_before[USDT.id] - Decimal(amount)
    assert await records(worker, api.client_id, ids["tradeId"], DELIVERY) == 1


@pytest.mark.parametrize(("asset", "amount"), [(ETH, "0.1"), (USDT, "10")], ids=["ETH", "USDT"])
async def test_a_sell_with_the_password_is_collected_to_the_desk_exactly(
    app: tuple[Api, Container], node: AnvilNode, asset: Any, amount: str
) -> None:
    api, worker = app
    await desk(api, node)
    user_id, _ = await user(api, node, eth=10**18, usdt=25 * 10**6)
    before = {a.id: await balance(api, user_id, a.id) for a in (ETH, USDT)}
    desk_before = await balance(api, None, asset.id)
    ids = await trade(api, "/sell", user_id, asset.id, amount)
    done = assert_ok(await api.post("/trade/approve", {**ids, "password": PASSWORD}))
    assert done["status"] == "completed"
    settled = await settle(api, worker, node, ids)
    fee = fee_of(node, settled["settlement"]["txHash"])
    assert await balance(api, None, asset.id) == desk_before + Decimal(amount)  # exactly
    paid = Decimal(amount) + fee if asset.is_native else fee
    assert await balance(api, user_id, ETH.id) == before[ETH.id] - paid  # fee payer USER
    if not asset.is_native:
        assert await balance(api, user_id, USDT.id) == before[USDT.id] - Decimal(amount)


async def test_a_sell_without_the_password_waits_and_a_wrong_one_collects_nothing(
    app: tuple[Api, Container], node: AnvilNode
) -> None:
    api, worker = app
    await desk(api, node)
    user_id, address = await user(api, node, eth=10**18, usdt=25 * 10**6)
    ids = await trade(api, "/sell", user_id, USDT.id, "5")
    waiting = assert_ok(await api.post("/trade/approve", ids))
    assert (waiting["status"], waiting["settlement"]["status"]) == (
        "completed",
        "awaiting_password",
    )
    await worker.jobs().settle_coins()  # no job collects without the password
    wrong = await api.post("/trade/collect", {**ids, "password": "not the password"})
    assert_error(wrong, 401, "Invalid credentials")
    assert node.nonce(address) == 0  # nothing was signed
    assert assert_ok(await api.post("/trade", ids))["settlement"]["status"] == "awaiting_password"
    assert await balance(api, user_id, USDT.id) == Decimal(25)
    collected = assert_ok(await api.post("/trade/collect", {**ids, "password": PASSWORD}))
    assert collected["settlement"]["status"] in ("sent", "settled")
    await settle(api, worker, node, ids)
    assert await balance(api, user_id, USDT.id) == Decimal(20)
    assert await balance(api, None, USDT.id) == Decimal(5)
    again = assert_ok(await api.post("/trade/collect", {**ids, "password": PASSWORD}))
    assert again["settlement"]["status"] == "settled"  # answered as it stands
    assert node.nonce(address) == 1  # collected once


async def test_a_buy_the_desk_is_short_of_is_delivered_once_after_a_top_up(
    app: tuple[Api, Container], node: AnvilNode, clock: ManualClock
) -> None:
    api, worker = app
    desk_address = await desk(api, node, eth=10**17)
    user_id, _ = await user(api, node)
    ids = await trade(api, "/order", user_id, ETH.id, "0.5")
    done = assert_ok(await api.post("/trade/approve", ids))
    assert (done["status"], done["settlement"]["status"]) == ("completed", "short")
    assert "ETH" in done["settlement"]["reason"], done["settlement"]
    assert node.nonce(desk_address) == 0

    node.fund(desk_address, ETH, 10**18)
    clock.advance(61)  # WALLETCORE_SETTLEMENT_RETRY_SECONDS
    await worker.jobs().settle_coins()
    await settle(api, worker, node, ids)
    clock.advance(61)
    await worker.jobs().settle_coins()
    assert node.nonce(desk_address) == 1  # delivered once
    assert await balance(api, user_id, ETH.id) == Decimal("0.5")
    assert await records(worker, api.client_id, ids["tradeId"], DELIVERY) == 1


async def test_twenty_approvals_of_one_buy_make_one_delivery_on_chain(
    app: tuple[Api, Container], node: AnvilNode
) -> None:
    api, worker = app
    desk_address = await desk(api, node, eth=10**18)
    user_id, _ = await user(api, node)
    ids = await trade(api, "/order", user_id, ETH.id, "0.05")
    answers = await asyncio.gather(*(api.post("/trade/approve", ids) for _ in range(20)))
    trades = [assert_ok(answer) for answer in answers]
    assert {(t["tradeId"], t["status"]) for t in trades} == {(ids["tradeId"], "completed")}
    await settle(api, worker, node, ids)
    assert node.nonce(desk_address) == 1  # one transaction
    assert await records(worker, api.client_id, ids["tradeId"], DELIVERY) == 1
    assert await balance(api, user_id, ETH.id) == Decimal("0.05")


async def test_buys_of_five_users_approved_at_once_are_each_delivered_from_one_desk(
    app: tuple[Api, Container], node: AnvilNode
) -> None:
    api, worker = app
    desk_address = await desk(api, node, eth=10**18, usdt=100 * 10**6)
    buyers = [(await user(api, node))[0] for _ in range(5)]
    orders = [
        await trade(api, "/order", u, asset.id, amount)
        for u, (asset, amount) in zip(buyers, [(ETH, "0.01"), (USDT, "3")] * 3, strict=False)
    ]
    answers = await asyncio.gather(*(api.post("/trade/approve", ids) for ids in orders))
    assert all(assert_ok(a)["status"] == "completed" for a in answers)
    for ids in orders:
        await settle(api, worker, node, ids)
    assert node.nonce(desk_address) == 5  # one transaction each, nonces 0..4
    assert await balance(api, buyers[0], ETH.id) == Decimal("0.01")
    assert await balance(api, buyers[1], USDT.id) == Decimal(3)
