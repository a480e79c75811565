"""End to end over HTTP on `WALLETCORE_CHAINS=rpc`, `WALLETCORE_NETWORK=testnet`: the service
as a deployer runs it, its gateways built by the `evm` and `solana` chain plugins from
WALLETCORE_* variables alone (some under the names of before the plugins), each
talking JSON-RPC over real HTTP to a loopback node (`walletcore_chains.testing`): anvil at
Sepolia's, BSC testnet's and Amoy's chain ids (a block for each transaction as it
arrives), Solana on LiteSVM. The repo is SQL on an SQLite file, so the EVM nonces go
through its leases and floors. Create a wallet, fund it, `/fee`, `/send`, poll `/txid`
while the chain confirms, and `/balance` and `/transactions` agree with the chain. (BSC's
and Polygon's 97-byte `extraData`, which anvil's blocks do not carry, is read in
tests/integration/evm/test_evm_rpc.py on the loopback test node.)"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok, judge_responses, sign_in
from litestar.testing import AsyncTestClient
from sqlalchemy import select

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain, FeePayer
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.addresses import validate_address
from walletcore_chains.evm.devnet import DevnetEvmGateway
from walletcore_chains.evm.gateway import EvmGateway
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.solana.devnet import DevnetSolanaGateway
from walletcore_chains.solana.gateway import SolanaGateway
from walletcore_chains.testing.anvil import AnvilNode, find_anvil
from walletcore_chains.testing.solana_rpc_node import RpcTestNode
from walletcore_cli import main as walletcore_cli
from walletcore_litestar import create_app
from walletcore_sql.engine import sqlite_url
from walletcore_sql.storage import SqlStorage
from walletcore_sql.tables import nonce_floors

RECIPIENT = "0x52908400098527886E0F7030069857D2E4169EE7"
SOL_RECIPIENT = "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T"
SEPOLIA, BSC_TESTNET, AMOY = 11155111, 97, 80002
CONFIRMATIONS = 3  # the testnet configs' depth


class Nodes:
    """The loopback nodes: anvil for the EVM chains (their own faucets), Solana's."""

    def __init__(self) -> None:
        self.evm = {
            chain: AnvilNode(chain, chain_id=chain_id, block_time=None)
            for chain, chain_id in (
                (Chain.ETHEREUM, SEPOLIA),
                (Chain.BSC, BSC_TESTNET),
                (Chain.POLYGON, AMOY),
            )
        }
        self.solana = DevnetSolanaGateway(validate_address)
        self.sol = RpcTestNode(self.solana.node)

    def environment(self, home: Path, **changes: str) -> dict[str, str]:
        """A deployer's WALLETCORE_* variables: the ETHEREUM and POLYGON endpoints, the
        network and the timeout under the names of before the chain plugins (which stay
        read), BSC's and Solana's under the plugins' own."""
        tokens = {k: v for node in self.evm.values() for k, v in node.tokens.items()}
        env = {
            "WALLETCORE_HOME": str(home),
            "WALLETCORE_REPO": "sql",
            "WALLETCORE_DATABASE_URL": sqlite_url(home / "walletcore.db"),
            "WALLETCORE_CHAINS": "rpc",
            # BITCOIN's rpc gateway has its own end-to-end test on a regtest bitcoind
            # (tests/integration/bitcoin/test_bitcoin_http.py): here the ledger stands in
            "WALLETCORE_CHAIN_BITCOIN": "sandbox",
            # and TRON's in tests/integration/http/test_http_tron_rpc.py
            "WALLETCORE_CHAIN_TRON": "sandbox",
            "WALLETCORE_NETWORK": "testnet",
            "WALLETCORE_RPC_ETHEREUM": self.evm[Chain.ETHEREUM].url,
            "WALLETCORE_BSC_RPC_URL": self.evm[Chain.BSC].url,
            "WALLETCORE_RPC_POLYGON": self.evm[Chain.POLYGON].url,
            "WALLETCORE_SOLANA_RPC_URL": self.sol.url,
            "WALLETCORE_RPC_TIMEOUT_SECONDS": "5",
            "WALLETCORE_EVM_TOKENS": json.dumps(tokens),
            "WALLETCORE_SOLANA_USDT_MINT": str(self.solana.mint(CONTRACT_CATALOG.asset_by_id(61))),
            "WALLETCORE_SOLANA_USDC_MINT": str(self.solana.mint(CONTRACT_CATALOG.asset_by_id(62))),
        }
        return {**env, **changes}

    def settings(self, home: Path, monkeypatch: pytest.MonkeyPatch, **changes: str) -> Settings:
        """The settings of `environment(home)`, set for the test (the chain plugins read
        theirs when the container builds the gateways)."""
        for name, value in self.environment(home, **changes).items():
            monkeypatch.setenv(name, value)
        return Settings()

    async def fund(self, address: str, asset_id: int, units: int) -> None:
        asset = CONTRACT_CATALOG.asset_by_id(asset_id)
        if asset.chain == Chain.SOLANA:
            await self.solana.fund(address, asset, units)
        else:  # a token is minted in a mined block: off the event loop
            await asyncio.to_thread(self.evm[asset.chain].fund, address, asset, units)


@pytest.fixture(scope="module")
def nodes() -> Iterator[Nodes]:
    if find_anvil() is None:
        pytest.skip("no anvil: run `python3 dev.py test` (it installs it)")
    made = Nodes()
    with made.evm[Chain.ETHEREUM], made.evm[Chain.BSC], made.evm[Chain.POLYGON], made.sol:
        yield made


@pytest.fixture
def settings(tmp_path: Path, nodes: Nodes, monkeypatch: pytest.MonkeyPatch) -> Settings:
    home = tmp_path / "home"
    home.mkdir()
    return nodes.settings(home, monkeypatch)


@pytest.fixture
def container(settings: Settings, clock: ManualClock, keystore: SealedKeyStore) -> Container:
    return create_container(settings, clock=clock, keystore=keystore)


async def poll_until_confirmed(api: Api, node: AnvilNode, body: dict[str, Any]) -> dict[str, Any]:
    """`/txid` reads `pending` until the chain is `CONFIRMATIONS` deep, then `success`."""
    for depth in range(CONFIRMATIONS + 2):
        row = assert_ok(await api.post("/txid", body))
        if row["status"] != "pending":
            assert depth >= CONFIRMATIONS - 1, f"{row['status']} after {depth} blocks"
            return row  # type: ignore[no-any-return]
        node.mine()
    raise AssertionError("the transaction stayed pending")


async def floor_of(container: Container, chain_id: int, address: str) -> int | None:
    storage = container.storage()
    assert isinstance(storage, SqlStorage)
    async with storage.database.transaction() as conn:
        found = await conn.execute(
            select(nonce_floors.c.next_nonce).where(
                nonce_floors.c.chain == f"eip155:{chain_id}",
                nonce_floors.c.address == address.lower(),
            )
        )
        return found.scalar_one_or_none()


def test_the_rpc_profile_builds_json_rpc_gateways_from_settings(
    container: Container, nodes: Nodes
) -> None:
    gateways = container.gateways()
    for chain in (Chain.ETHEREUM, Chain.BSC, Chain.POLYGON):
        gateway = gateways[chain]
        assert isinstance(gateway, EvmGateway) and not isinstance(gateway, DevnetEvmGateway)
        assert gateway.config.network == "testnet"
    assert isinstance(gateways[Chain.SOLANA], SolanaGateway)
    assert not isinstance(gateways[Chain.SOLANA], DevnetSolanaGateway)
    plan = container.chain_plan()
    assert {c: choice.label for c, choice in plan.choices.items()} == {
        Chain.BITCOIN: "sandbox:sandbox",  # WALLETCORE_CHAIN_BITCOIN=sandbox (see `env`)
        Chain.ETHEREUM: "evm:rpc",
        Chain.BSC: "evm:rpc",
        Chain.TRON: "sandbox:sandbox",  # WALLETCORE_CHAIN_TRON=sandbox (see `env`)
        Chain.POLYGON: "evm:rpc",
        Chain.SOLANA: "solana:rpc",
    }
    evm = plan.settings["evm"]  # the older names and the plugins' own, read alike
    assert evm.ethereum_rpc_url.get_secret_value() == nodes.evm[Chain.ETHEREUM].url
    assert evm.bsc_rpc_url.get_secret_value() == nodes.evm[Chain.BSC].url
    assert (evm.evm_network, evm.evm_rpc_timeout_seconds) == ("testnet", 5.0)


async def test_eth_and_usdt_over_json_rpc_end_to_end(
    api: Api, container: Container, nodes: Nodes
) -> None:
    node = nodes.evm[Chain.ETHEREUM]
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    user, address = created["userId"], created["addresses"]["ETHEREUM"]
    await nodes.fund(address, 2, 10**18)
    await nodes.fund(address, 21, 25_000_000)
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 2})) == "1"
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 21})) == "25"

    quoted = assert_ok(
        await api.post(
            "/fee", {"userId": user, "assetId": 2, "recipient": RECIPIENT, "amount": "0.5"}
        )
    )
    assert Decimal(quoted) > 0
    body = {"userId": user, "assetId": 2, "recipient": RECIPIENT, "amount": "0.5"}
    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="e1"))
    assert (sent["status"], sent["feePayer"], sent["fee"]) == ("pending", "USER", quoted)
    on_chain = node.transaction(sent["txHash"])  # it went over the wire
    assert on_chain is not None and int(on_chain["from"], 16) == int(address, 16)
    replay = await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="e1")
    assert assert_ok(replay) == sent and node.nonce(address, "pending") == 1  # sent once
    assert await floor_of(container, SEPOLIA, address) == 1  # the lease's floor moved on

    row = await poll_until_confirmed(
        api, node, {"userId": user, "assetId": 2, "txHash": sent["txHash"]}
    )
    assert (row["type"], row["status"]) == ("send", "success") and row["date"]
    assert Decimal(row["amount"]) == Decimal("0.5") - Decimal(quoted)  # USER: fee from amount
    assert Decimal(row["fee"]) <= Decimal(quoted)
    balance = Decimal(assert_ok(await api.post("/balance", {"userId": user, "assetId": 2})))
    assert balance == Decimal("0.5") + Decimal(quoted) - Decimal(row["fee"])
    rows = assert_ok(await api.post("/transactions", {"userId": user, "assetId": 2}))
    assert rows[0] == row

    token = {"userId": user, "assetId": 21, "recipient": RECIPIENT, "amount": "7.5"}
    sent = assert_ok(await api.post("/send", {**token, "password": PASSWORD}, X_Request_Id="u1"))
    row = await poll_until_confirmed(
        api, node, {"userId": user, "assetId": 21, "txHash": sent["txHash"]}
    )
    assert (row["type"], row["amount"], row["status"]) == ("send", "7.5", "success")
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 21})) == "17.5"
    rows = assert_ok(await api.post("/transactions", {"userId": user, "assetId": 21}))
    assert [(r["type"], r["amount"]) for r in rows] == [("send", "7.5"), ("receive", "25")]
    assert await floor_of(container, SEPOLIA, address) == 2

    too_much = {**body, "amount": "5", "password": PASSWORD}
    refused = assert_error(await api.post("/send", too_much, X_Request_Id="e2"), 400)
    assert refused["message"].startswith("Insufficient ETH balance: the wallet holds 0.4999")
    assert await floor_of(container, SEPOLIA, address) == 2  # a refused send takes no nonce


async def test_platform_pays_the_gas_of_a_bsc_usdt_send(
    http: AsyncTestClient[Any], container: Container, nodes: Nodes
) -> None:
    node = nodes.evm[Chain.BSC]
    payer = await sign_in(http, container, name="Payer", fee_payer=FeePayer.PLATFORM)
    platform = await container.wallets().provision_platform(payer.client_id)
    await nodes.fund(platform[Chain.BSC], 3, 10**18)
    created = assert_ok(await payer.post("/create", {"password": PASSWORD}))
    user, address = created["userId"], created["addresses"]["BSC"]
    await nodes.fund(address, 31, 3 * 10**18)  # USDT (18 decimals on BSC), and no BNB at all

    body = {"userId": user, "assetId": 31, "recipient": RECIPIENT, "amount": "3"}
    sent = assert_ok(await payer.post("/send", {**body, "password": PASSWORD}, X_Request_Id="b"))
    assert sent["feePayer"] == "PLATFORM"
    row = await poll_until_confirmed(
        payer, node, {"userId": user, "assetId": 31, "txHash": sent["txHash"]}
    )
    assert (row["type"], row["amount"], row["status"]) == ("send", "3", "success")
    # the top-up from the platform wallet, then the token
    assert (node.nonce(platform[Chain.BSC]), node.nonce(address)) == (1, 1)
    assert assert_ok(await payer.post("/balance", {"userId": user, "assetId": 31})) == "0"
    platform_bnb = Decimal(assert_ok(await payer.post("/platform/balance", {"assetId": 3})))
    assert 0 < Decimal(1) - platform_bnb <= Decimal(sent["fee"])
    assert await floor_of(container, BSC_TESTNET, platform[Chain.BSC]) == 1
    assert await floor_of(container, BSC_TESTNET, address) == 1


async def test_spl_usdt_over_solana_json_rpc_end_to_end(api: Api, nodes: Nodes) -> None:
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    user, address = created["userId"], created["addresses"]["SOLANA"]
    await nodes.fund(address, 6, 2 * 10**9)
    await nodes.fund(address, 61, 10_000_000)
    before = len(nodes.sol.calls)
    fee = assert_ok(
        await api.post("/fee", {"userId": user, "assetId": 61, "recipient": SOL_RECIPIENT})
    )
    assert len(nodes.sol.calls) > before  # answered by the node over HTTP
    body = {"userId": user, "assetId": 61, "recipient": SOL_RECIPIENT, "amount": "2.5"}
    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="s1"))
    assert (sent["fee"], sent["feePayer"]) == (fee, "USER")
    row = assert_ok(
        await api.post("/txid", {"userId": user, "assetId": 61, "txHash": sent["txHash"]})
    )
    assert (row["type"], row["amount"], row["status"]) == ("send", "2.5", "success")
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 61})) == "7.5"
    sol = Decimal(assert_ok(await api.post("/balance", {"userId": user, "assetId": 6})))
    assert sol == Decimal(2) - Decimal(fee)
    rows = assert_ok(await api.post("/transactions", {"userId": user, "assetId": 61}))
    assert [(r["type"], r["amount"]) for r in rows] == [("send", "2.5"), ("receive", "10")]


@pytest.fixture
async def unreachable(
    tmp_path: Path,
    nodes: Nodes,
    clock: ManualClock,
    keystore: SealedKeyStore,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Api]:
    """The service with its Polygon node gone (nothing listens on 127.0.0.1:1)."""
    home = tmp_path / "down"
    home.mkdir()
    gone = {"WALLETCORE_RPC_POLYGON": "http://127.0.0.1:1/amoy"}
    settings = nodes.settings(home, monkeypatch, **gone)
    down = create_container(settings, clock=clock, keystore=keystore)
    async with AsyncTestClient(create_app(down)) as client:
        yield await sign_in(await judge_responses(client), down)


async def test_an_unreachable_node_is_a_503_with_a_retry_hint_and_nothing_changes(
    unreachable: Api, nodes: Nodes
) -> None:
    api = unreachable
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    user = created["userId"]
    body = {"userId": user, "assetId": 5, "recipient": RECIPIENT, "amount": "0.1"}
    for path, payload in (
        ("/balance", {"userId": user, "assetId": 5}),
        ("/fee", body),
        ("/send", {**body, "password": PASSWORD}),
    ):
        assert_error(
            await api.post(path, payload, X_Request_Id="p1"),
            503,
            "Chain node unreachable; retry with backoff",
        )
    # the other chains are unaffected
    assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 2})) == "0"
    assert assert_ok(await api.post("/transactions", {"userId": user, "assetId": 2})) == []


async def test_the_operator_sees_and_repairs_a_floor_past_a_dropped_transaction(
    api: Api,
    container: Container,
    nodes: Nodes,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`walletcore nonces show|reset`, on the same database as the running service. A floor
    past the node's count makes a send wait in the node's pool behind the gap (a real node
    holds a future nonce); the repaired floor fills the gap and the waiting send lands."""
    for name, value in nodes.environment(settings.home).items():
        monkeypatch.setenv(name, value)

    async def cli(*argv: str, status: int = 0) -> Any:
        assert await asyncio.to_thread(walletcore_cli, list(argv)) == status
        out, err = capsys.readouterr()
        return json.loads(out) if status == 0 else err

    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    user, address = created["userId"], created["addresses"]["ETHEREUM"]
    await nodes.fund(address, 2, 10**18)
    body = {"userId": user, "assetId": 2, "recipient": RECIPIENT, "amount": "0.1"}
    first = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="n0"))
    node = nodes.evm[Chain.ETHEREUM]
    node.wait_receipt(first["txHash"])
    where = ("--chain", "ethereum", "--address", address.lower())
    shown = await cli("nonces", "show", *where)
    assert shown == {
        "chain": "ETHEREUM",
        "network": "testnet",
        "sequence": f"eip155:{SEPOLIA}",
        "address": address,
        "mined": 1,
        "pending": 1,
        "floor": 1,
        "waiting": False,
    }

    # nonces 1 and 2 were accepted by a node that then dropped them: the floor is past them
    assert (await cli("nonces", "reset", *where, "--to", "3"))["floor"] == 3
    stalled = await cli("nonces", "show", *where)
    assert (stalled["pending"], stalled["floor"], stalled["waiting"]) == (1, 3, True)
    waiting = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="n1"))
    assert (node.transaction(waiting["txHash"]) or {})["nonce"] == "0x3"  # taken, queued
    assert node.receipt(waiting["txHash"]) is None  # it cannot be mined behind the gap
    stalled = await cli("nonces", "show", *where)
    assert (stalled["pending"], stalled["floor"], stalled["waiting"]) == (1, 4, True)

    repaired = await cli("nonces", "reset", *where)  # to the node's pending count
    assert (repaired["previousFloor"], repaired["floor"], repaired["waiting"]) == (4, 1, False)
    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="n2"))
    assert (node.transaction(sent["txHash"]) or {})["nonce"] == "0x1"  # at once, no restart
    assert await floor_of(container, SEPOLIA, address) == 2
    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="n3"))
    assert (node.transaction(sent["txHash"]) or {})["nonce"] == "0x2"  # the gap is filled:
    node.wait_receipt(waiting["txHash"])  # the send waiting behind it landed
    assert node.nonce(address) == 4 and await floor_of(container, SEPOLIA, address) == 3

    below = await cli("nonces", "reset", *where, "--to", "0", status=1)
    assert "cannot go below 4" in below and "never reused" in below
    assert "no EVM gateway" in await cli(
        "nonces", "show", "--chain", "TRON", "--address", "T", status=1
    )
    assert (
        "address"
        in (await cli("nonces", "show", "--chain", "BSC", "--address", "0x1234", status=1)).lower()
    )
    assert (await cli("nonces", "show", *where))["floor"] == 3  # the refusals changed nothing
