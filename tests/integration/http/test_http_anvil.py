"""The EVM `rpc` gateway on anvil, a real EVM node with a mempool and interval mining, for
the three EVM chains at their main networks' chain ids (1, 56, 137), over HTTP: balances,
fee quotes, native and token sends followed to `success` at the chain's depth, replays."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from http_support import PASSWORD, Api, assert_ok, rpc_env

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.testing.anvil import AnvilNode, find_anvil

pytestmark = pytest.mark.skipif(
    find_anvil() is None, reason="no anvil: run `python3 dev.py test` (it installs it)"
)
RECIPIENT = "0x52908400098527886E0F7030069857D2E4169EE7"
ETH, USDT_ETH = CONTRACT_CATALOG.native_asset(Chain.ETHEREUM).id, 21
BNB, POL = (
    CONTRACT_CATALOG.native_asset(Chain.BSC).id,
    CONTRACT_CATALOG.native_asset(Chain.POLYGON).id,
)


@pytest.fixture(scope="module")
def anvils() -> Iterator[dict[Chain, AnvilNode]]:
    nodes = {chain: AnvilNode(chain) for chain in (Chain.ETHEREUM, Chain.BSC, Chain.POLYGON)}
    with nodes[Chain.ETHEREUM], nodes[Chain.BSC], nodes[Chain.POLYGON]:
        yield nodes


@pytest.fixture
def container(
    tmp_path: Path,
    anvils: dict[Chain, AnvilNode],
    clock: ManualClock,
    keystore: SealedKeyStore,
    monkeypatch: pytest.MonkeyPatch,
) -> Container:
    home = tmp_path / "home"
    home.mkdir()
    tokens = {str(k): v for node in anvils.values() for k, v in node.tokens.items()}
    env = {
        **rpc_env(home, Chain.ETHEREUM, Chain.BSC, Chain.POLYGON),
        "WALLETCORE_EVM_NETWORK": "mainnet",
        "WALLETCORE_ETHEREUM_RPC_URL": anvils[Chain.ETHEREUM].url,
        "WALLETCORE_BSC_RPC_URL": anvils[Chain.BSC].url,
        "WALLETCORE_POLYGON_RPC_URL": anvils[Chain.POLYGON].url,
        "WALLETCORE_EVM_RPC_TIMEOUT_SECONDS": "5",
        "WALLETCORE_EVM_TOKENS": json.dumps(tokens),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return create_container(Settings(), clock=clock, keystore=keystore)


async def settle(api: Api, body: dict[str, Any], seconds: float = 30) -> dict[str, Any]:
    """Poll `/txid` until it leaves `pending` (anvil mines a block every 0.25 s)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        row = assert_ok(await api.post("/txid", body))
        if row["status"] != "pending":
            return row  # type: ignore[no-any-return]
        await asyncio.sleep(0.25)
    raise AssertionError(f"still pending after {seconds} s: {body}")


async def test_eth_and_usdt_on_anvil_end_to_end(api: Api, anvils: dict[Chain, AnvilNode]) -> None:
    node = anvils[Chain.ETHEREUM]
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    user, address = created["userId"], created["addresses"]["ETHEREUM"]
    node.fund(address, CONTRACT_CATALOG.asset_by_id(ETH), 10**18)
    node.fund(address, CONTRACT_CATALOG.asset_by_id(USDT_ETH), 25_000_000)
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": ETH})) == "1"
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": USDT_ETH})) == "25"

    body = {"userId": user, "assetId": ETH, "recipient": RECIPIENT, "amount": "0.5"}
    quoted = Decimal(assert_ok(await api.post("/fee", body)))
    assert quoted > 0
    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="a1"))
    assert sent["status"] == "pending"
    replay = await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="a1")
    assert assert_ok(replay)["txHash"] == sent["txHash"]  # one transfer per X-Request-Id
    lookup = {"userId": user, "assetId": ETH, "txHash": sent["txHash"]}
    row = await settle(api, lookup)
    assert row["status"] == "success" and row["type"] == "send"
    assert Decimal(row["fee"]) <= quoted  # what was quoted is the most it costs
    # a USER-paid native send takes the fee from the amount: the recipient gets the rest
    assert Decimal(row["amount"]) + Decimal(row["fee"]) <= Decimal("0.5")
    assert Decimal(row["amount"]) > Decimal("0.49")
    assert node.native(RECIPIENT) == Decimal(row["amount"])

    token = {"userId": user, "assetId": USDT_ETH, "recipient": RECIPIENT, "amount": "10"}
    sent = assert_ok(await api.post("/send", {**token, "password": PASSWORD}, X_Request_Id="a2"))
    row = await settle(api, {"userId": user, "assetId": USDT_ETH, "txHash": sent["txHash"]})
    assert (row["status"], row["amount"]) == ("success", "10")
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": USDT_ETH})) == "15"


@pytest.mark.parametrize(("chain", "asset_id"), [(Chain.BSC, BNB), (Chain.POLYGON, POL)])
async def test_native_sends_on_bsc_and_polygon_ids(
    api: Api, anvils: dict[Chain, AnvilNode], chain: Chain, asset_id: int
) -> None:
    node = anvils[chain]
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    user, address = created["userId"], created["addresses"][chain.value]
    node.fund(address, CONTRACT_CATALOG.asset_by_id(asset_id), 2 * 10**18)
    body = {"userId": user, "assetId": asset_id, "recipient": RECIPIENT, "amount": "1"}
    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="n1"))
    receipt = node.wait_receipt(sent["txHash"])  # mined by the node, from its mempool
    assert receipt["status"] == "0x1" and int(receipt["to"], 16) == int(RECIPIENT, 16)
    assert Decimal("0.99") < node.native(RECIPIENT) < 1  # the fee came out of the amount
