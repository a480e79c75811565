"""Trades that move BTC over HTTP (docs/settlement.md), on `WALLETCORE_CHAINS=rpc` with a
real `bitcoind -regtest` (installed by `python3 dev.py test`; skipped, saying why, without
one): a buy delivered from the desk, a sell collected to it, each `sent` then `settled`
once mined and followed by the jobs; the amounts and fees as the node sees them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok, regtest_bitcoind, rpc_env, sign_in
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
from walletcore.services.settlements import SettlementSettings
from walletcore.settings import Settings
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.testing.bitcoind import Bitcoind

BTC = 1


node = pytest.fixture(scope="module", name="node")(regtest_bitcoind)


@pytest.fixture
def settings(tmp_path: Path, node: Bitcoind, monkeypatch: pytest.MonkeyPatch) -> Settings:
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **rpc_env(home, Chain.BITCOIN),
        "WALLETCORE_BITCOIN_NETWORK": "regtest",
        "WALLETCORE_BITCOIN_BACKEND": "core",
        "WALLETCORE_BITCOIN_RPC_URL": node.url,
        "WALLETCORE_BITCOIN_CONFIRMATIONS": "2",
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


async def user(api: Api, node: Bitcoind, btc: str | None = None) -> tuple[str, str]:
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    address = created["addresses"]["BITCOIN"]
    if btc is not None:
        node.fund(address, btc)
        node.mine(1)
    return created["userId"], address


async def desk(api: Api, container: Container, node: Bitcoind, btc: str) -> str:
    address = (await container.wallets().provision_platform(api.client_id))[Chain.BITCOIN]
    node.fund(address, btc)
    node.mine(1)
    return address


async def confirmed(
    api: Api, worker: Container, clock: ManualClock, node: Bitcoind, user_id: str, trade_id: str
) -> dict[str, str]:
    """The trade's transfer mined two blocks deep and followed: its settlement, `settled`."""
    assert (await trade_of(api, user_id, trade_id))["settlement"]["status"] == "sent"
    node.mine(2)
    await run_jobs(worker, clock)
    settlement: dict[str, str] = (await trade_of(api, user_id, trade_id))["settlement"]
    assert settlement["status"] == "settled", settlement
    return settlement


async def test_a_buy_is_delivered_from_the_desk_which_pays_the_fee(
    api: Api, container: Container, worker: Container, clock: ManualClock, node: Bitcoind
) -> None:
    await desk(api, container, node, "1")
    alice, _ = await user(api, node)
    before = await balance(api, BTC)
    quote = await traded(api, "/order", alice, BTC, "0.1")
    trade = await approved(api, alice, quote["tradeId"])
    sent = trade["settlement"]
    assert (sent["status"], sent["amount"]) == ("sent", "0.1") and sent["txHash"]
    settled = await confirmed(api, worker, clock, node, alice, quote["tradeId"])
    assert settled["txHash"] == sent["txHash"]
    assert await balance(api, BTC, alice) == Decimal("0.1")
    fee = await send_fee(api, BTC, sent["txHash"])
    assert fee > 0
    assert before - await balance(api, BTC) == Decimal("0.1") + fee


async def test_a_sell_approved_with_the_password_is_collected_to_the_desk(
    api: Api, container: Container, worker: Container, clock: ManualClock, node: Bitcoind
) -> None:
    await desk(api, container, node, "0.01")
    alice, _ = await user(api, node, "0.5")
    before = await balance(api, BTC)
    quote = await traded(api, "/sell", alice, BTC, "0.2")
    trade = await approved(api, alice, quote["tradeId"], password=PASSWORD)
    sent = trade["settlement"]
    assert (sent["status"], sent["amount"]) == ("sent", "0.2") and sent["txHash"]
    await confirmed(api, worker, clock, node, alice, quote["tradeId"])
    assert await balance(api, BTC) - before == Decimal("0.2")
    fee = await send_fee(api, BTC, sent["txHash"], alice)  # USER: the wallet pays, on top
    assert await balance(api, BTC, alice) == Decimal("0.3") - fee


async def test_a_sell_collected_later_refuses_a_wrong_password_and_changes_nothing(
    api: Api, container: Container, worker: Container, clock: ManualClock, node: Bitcoind
) -> None:
    await desk(api, container, node, "0.01")
    alice, _ = await user(api, node, "0.5")
    before = await balance(api, BTC)
    quote = await traded(api, "/sell", alice, BTC, "0.25")
    ids = {"userId": alice, "tradeId": quote["tradeId"]}
    waiting = (await approved(api, alice, quote["tradeId"]))["settlement"]
    assert (waiting["status"], waiting["amount"]) == ("awaiting_password", "0.25")

    wrong = await api.post("/trade/collect", {**ids, "password": "not-it"})
    assert assert_error(wrong, 400)["message"] == "Invalid password"
    assert (await trade_of(api, alice, quote["tradeId"]))["settlement"] == waiting
    assert await balance(api, BTC, alice) == Decimal("0.5")
    assert await balance(api, BTC) == before

    collected = assert_ok(await api.post("/trade/collect", {**ids, "password": PASSWORD}))
    sent = collected["settlement"]
    assert sent["status"] == "sent" and sent["txHash"]
    again = assert_ok(await api.post("/trade/collect", {**ids, "password": PASSWORD}))
    assert again["settlement"] == sent  # answered as it stands
    await confirmed(api, worker, clock, node, alice, quote["tradeId"])
    assert await balance(api, BTC) - before == Decimal("0.25")
    fee = await send_fee(api, BTC, sent["txHash"], alice)
    assert await balance(api, BTC, alice) == Decimal("0.25") - fee


async def test_a_buy_the_desk_cannot_cover_is_short_until_it_is_topped_up(
    api: Api, container: Container, worker: Container, clock: ManualClock, node: Bitcoind
) -> None:
    """The desk holds the amount but not the fee on top: `short`, nothing signed; the
    job delivers it once the operator tops the desk up."""
    address = await desk(api, container, node, "0.1")
    alice, _ = await user(api, node)
    quote = await traded(api, "/order", alice, BTC, "0.1")
    short = (await approved(api, alice, quote["tradeId"]))["settlement"]
    assert short["status"] == "short" and "txHash" not in short, short
    assert "network fee" in short["reason"]
    assert await balance(api, BTC) == Decimal("0.1")

    node.fund(address, "0.001")
    node.mine(1)
    clock.advance(SettlementSettings().retry_seconds + 1)
    await worker.jobs().settle_coins()
    trade = await trade_of(api, alice, quote["tradeId"])
    await confirmed(api, worker, clock, node, alice, quote["tradeId"])
    assert await balance(api, BTC, alice) == Decimal("0.1")
    fee = await send_fee(api, BTC, trade["settlement"]["txHash"])
    assert await balance(api, BTC) == Decimal("0.001") - fee


async def test_a_sell_whose_fee_payer_is_platform_costs_the_wallet_the_amount_only(
    api: Api, container: Container, worker: Container, clock: ManualClock, node: Bitcoind
) -> None:
    """`PLATFORM` on BITCOIN: the desk bears the collection's fee (out of what it
    receives); the wallet gives the amount exactly."""
    payer = await sign_in(api.http, container, name="Payer", fee_payer=FeePayer.PLATFORM)
    await desk(payer, container, node, "0.01")
    alice, _ = await user(payer, node, "0.5")
    quote = await traded(payer, "/sell", alice, BTC, "0.2")
    trade = await approved(payer, alice, quote["tradeId"], password=PASSWORD)
    await confirmed(payer, worker, clock, node, alice, quote["tradeId"])
    assert await balance(payer, BTC, alice) == Decimal("0.3")
    fee = await send_fee(payer, BTC, trade["settlement"]["txHash"], alice)
    assert fee > 0 and await balance(payer, BTC) == Decimal("0.21") - fee
