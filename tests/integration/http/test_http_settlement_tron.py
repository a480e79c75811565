"""Trades that move TRX and USDT (TRC20) over HTTP (docs/settlement.md), on
`WALLETCORE_CHAINS=rpc` against the loopback TRON node: a buy delivered from the desk (to
an account that does not exist yet: the desk pays its activation), a sell collected to it
(a token's from a wallet holding no TRX, the desk sponsoring its fee when the fee payer is
`PLATFORM`), each `sent`, then `settled` once solid and followed by the jobs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok, rpc_env, sign_in
from settlement_support import (
    approved,
    balance,
    run_jobs,
    send_fee,
    trade_of,
    traded,
    worker_of,
)

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain, FeePayer
from walletcore.settings import Settings
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.testing.tron_node import TronTestNode

TRX, USDT = 4, 41
SUN = 1_000_000


@pytest.fixture
def node() -> Iterator[TronTestNode]:
    with TronTestNode(auto_solidify=False) as started:
        yield started


@pytest.fixture
def settings(tmp_path: Path, node: TronTestNode, monkeypatch: pytest.MonkeyPatch) -> Settings:
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **rpc_env(home, Chain.TRON),
        "WALLETCORE_TRON_NODE_URL": node.url,
        "WALLETCORE_TRON_NETWORK": "nile",
        "WALLETCORE_TRON_TOKENS": json.dumps({"41": node.tokens[41], "42": node.tokens[42]}),
        "WALLETCORE_JOBS": "off",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    return Settings()


@pytest.fixture
def container(settings: Settings, clock: ManualClock, keystore: SealedKeyStore) -> Container:
    return create_container(settings, clock=clock, keystore=keystore)


@pytest.fixture
async def worker(
    settings: Settings, clock: ManualClock, keystore: SealedKeyStore
) -> AsyncIterator[Container]:
    async with worker_of(settings, clock, keystore) as built:
        yield built


async def desk(api: Api, container: Container, node: TronTestNode, trx: int, usdt: int) -> None:
    address = (await container.wallets().provision_platform(api.client_id))[Chain.TRON]
    node.fund(address, trx * SUN)
    if usdt:
        node.fund_token(address, USDT, usdt * SUN)


async def user(api: Api, node: TronTestNode, trx: int = 0, usdt: int = 0) -> str:
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    if trx:
        node.fund(created["addresses"]["TRON"], trx * SUN)
    if usdt:
        node.fund_token(created["addresses"]["TRON"], USDT, usdt * SUN)
    return created["userId"]  # type: ignore[no-any-return]


async def settled(
    api: Api,
    worker: Container,
    clock: ManualClock,
    node: TronTestNode,
    user_id: str,
    trade: dict[str, Any],
) -> dict[str, str]:
    """The trade's transfer, `sent` at approval (not solid yet), `settled` once solid and
    followed by the jobs."""
    sent = trade["settlement"]
    assert sent["status"] == "sent" and sent["txHash"], sent
    await run_jobs(worker, clock)
    found = (await trade_of(api, user_id, trade["tradeId"]))["settlement"]
    assert found["status"] == "sent", found
    node.solidify()
    await run_jobs(worker, clock)
    found = (await trade_of(api, user_id, trade["tradeId"]))["settlement"]
    assert found["status"] == "settled" and found["txHash"] == sent["txHash"], found
    return found  # type: ignore[no-any-return]


async def test_a_trx_buy_to_a_new_account_is_delivered_and_the_desk_pays_the_fee(
    api: Api, container: Container, worker: Container, clock: ManualClock, node: TronTestNode
) -> None:
    await desk(api, container, node, 100, 0)
    alice = await user(api, node)  # no account on chain yet: the delivery activates it
    quote = await traded(api, "/order", alice, TRX, "10")
    trade = await approved(api, alice, quote["tradeId"])
    done = await settled(api, worker, clock, node, alice, trade)
    assert await balance(api, TRX, alice) == Decimal(10)
    fee = await send_fee(api, TRX, done["txHash"])
    assert fee > 0 and Decimal(100) - await balance(api, TRX) == Decimal(10) + fee


async def test_a_usdt_buy_to_a_wallet_without_trx_is_delivered(
    api: Api, container: Container, worker: Container, clock: ManualClock, node: TronTestNode
) -> None:
    await desk(api, container, node, 100, 50)
    alice = await user(api, node)
    quote = await traded(api, "/order", alice, USDT, "12.5")
    trade = await approved(api, alice, quote["tradeId"])
    done = await settled(api, worker, clock, node, alice, trade)
    assert await balance(api, USDT, alice) == Decimal("12.5")
    assert await balance(api, TRX, alice) == 0
    assert await balance(api, USDT) == Decimal("37.5")
    fee = await send_fee(api, USDT, done["txHash"])
    assert fee > 0 and Decimal(100) - await balance(api, TRX) == fee  # energy and bandwidth


async def test_a_trx_sell_approved_with_the_password_is_collected(
    api: Api, container: Container, worker: Container, clock: ManualClock, node: TronTestNode
) -> None:
    await desk(api, container, node, 10, 0)
    alice = await user(api, node, trx=50)
    quote = await traded(api, "/sell", alice, TRX, "20")
    trade = await approved(api, alice, quote["tradeId"], password=PASSWORD)
    done = await settled(api, worker, clock, node, alice, trade)
    assert await balance(api, TRX) == Decimal(30)
    fee = await send_fee(api, TRX, done["txHash"], alice)  # USER: on top of the amount
    assert await balance(api, TRX, alice) == Decimal(30) - fee


async def test_a_usdt_sell_from_a_wallet_without_trx_is_sponsored_by_the_desk(
    api: Api, container: Container, worker: Container, clock: ManualClock, node: TronTestNode
) -> None:
    payer = await sign_in(api.http, container, name="Payer", fee_payer=FeePayer.PLATFORM)
    await desk(payer, container, node, 100, 0)
    alice = await user(payer, node, usdt=10)  # no TRX: not even an activated account
    quote = await traded(payer, "/sell", alice, USDT, "4")
    trade = await approved(payer, alice, quote["tradeId"], password=PASSWORD)
    await settled(payer, worker, clock, node, alice, trade)
    assert await balance(payer, USDT) == Decimal(4)
    assert await balance(payer, USDT, alice) == Decimal(6)
    assert await balance(payer, TRX) < 100


async def test_a_sell_collected_later_refuses_a_wrong_password_and_changes_nothing(
    api: Api, container: Container, worker: Container, clock: ManualClock, node: TronTestNode
) -> None:
    await desk(api, container, node, 10, 1)
    alice = await user(api, node, trx=50, usdt=3)
    quote = await traded(api, "/sell", alice, USDT, "3")
    ids = {"userId": alice, "tradeId": quote["tradeId"]}
    waiting = (await approved(api, alice, quote["tradeId"]))["settlement"]
    assert (waiting["status"], waiting["amount"]) == ("awaiting_password", "3")

    wrong = await api.post("/trade/collect", {**ids, "password": "not-it"})
    assert_error(wrong, 401, "Invalid credentials")
    assert (await trade_of(api, alice, quote["tradeId"]))["settlement"] == waiting
    assert await balance(api, USDT, alice) == Decimal(3)
    assert await balance(api, USDT) == Decimal(1)
    assert not node.broadcasts

    collected = assert_ok(await api.post("/trade/collect", {**ids, "password": PASSWORD}))
    await settled(api, worker, clock, node, alice, collected)
    assert await balance(api, USDT) == Decimal(4)
    assert await balance(api, USDT, alice) == 0
    fee = await send_fee(api, USDT, collected["settlement"]["txHash"], alice)
    assert await balance(api, TRX, alice) == Decimal(50) - fee
