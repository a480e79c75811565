"""A chain of one's own, from outside: BASECHAIN, an EVM L2 (chain id 8453, its coin ETH
8453 and its token USDC 84531), is `tests/plugins/walletcore_l2chain`, a package that
touches nothing in src/ and is found through its entry point `l2chain` (installed by
`python3 dev.py test`). On anvil at chain id 8453, with the token deployed, the whole
service runs it from the deployer's variables alone (`WALLETCORE_CHAIN_BASECHAIN=
l2chain:rpc`, `WALLETCORE_BASECHAIN_RPC_URL`, `_NETWORK`, `_TOKENS`), on SQLite and on
PostgreSQL. Over HTTP: a client the operator enabled for the new assets sees them in
`/config` after the contract's sixteen, `/create` derives its BASECHAIN address (the EVM
address of the seed), and `/balance`, `/fee`, `/send` (coin and token) and `/txid` work;
a client not enabled for them sees the contract's six chains exactly as a deployment that
does not name BASECHAIN shows them; and a deployment that does not name it serves the six
chains alone, with the same OpenAPI document byte for byte as without the plugin."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers
from eth_account import Account
from http_support import PASSWORD, Api, assert_error, assert_ok, judge_responses, sign_in
from litestar.testing import AsyncTestClient

from walletcore import plugins
from walletcore.chainplugins import ChainPlugin
from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import CONTRACT_ASSETS, CONTRACT_CHAINS
from walletcore.domain.errors import InvalidRequest
from walletcore.services.auth import IssuedKey
from walletcore.settings import Settings
from walletcore_chains.evm import SandboxEvm
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.testing.anvil import AnvilNode, find_anvil
from walletcore_cli import main
from walletcore_litestar import create_app
from walletcore_sandbox.chain import SandboxGateway
from walletcore_sql.engine import sqlite_url
from walletcore_sql.testing import create_database, drop_database

try:
    import walletcore_l2chain
    from walletcore_l2chain import BASECHAIN, CHAIN_ID, ETH, USDC
except ImportError as missing:  # pragma: no cover - a set-up fault, not a skip
    raise ImportError(
        "the test chain is not installed: `python3 dev.py test` installs it, or "
        "pip install -e tests/plugins/walletcore_l2chain"
    ) from missing

pytestmark = pytest.mark.skipif(
    find_anvil() is None, reason="no anvil: run `python3 dev.py test` (it installs it)"
)
RECIPIENT = "0x52908400098527886E0F7030069857D2E4169EE7"
CONTRACT_IDS = [a.id for a in CONTRACT_ASSETS]
SIX = [c.value for c in CONTRACT_CHAINS]


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    """anvil at BASECHAIN's chain id, with its USDC deployed."""
    with AnvilNode(BASECHAIN, chain_id=CHAIN_ID, assets=(ETH, USDC)) as running:
        assert running.tokens.keys() == {USDC.id}
        yield running


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The deployment's `WALLETCORE_DATABASE_URL`: an SQLite file, or a fresh PostgreSQL
    database dropped afterwards."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path / "walletcore.db")
        return
    url, name = create_database("wcnewchain")
    try:
        yield url
    finally:
        drop_database(name)


def environment(home: Path, database_url: str, node: AnvilNode | None) -> dict[str, str]:
    """A deployer's variables: the SQL storage, the contract's six chains on the sandbox
    ledger, and, with a node, BASECHAIN on the `l2chain` plugin's `rpc` gateway."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "WALLETCORE_HOME": str(home),
        "WALLETCORE_REPO": "sql",
        "WALLETCORE_DATABASE_URL": database_url,
        "WALLETCORE_CHAINS": "sandbox",
    }
    if node is not None:
        env |= {
            "WALLETCORE_CHAIN_BASECHAIN": "l2chain:rpc",
            "WALLETCORE_BASECHAIN_RPC_URL": node.url,
            "WALLETCORE_BASECHAIN_NETWORK": "mainnet",
            "WALLETCORE_BASECHAIN_TOKENS": json.dumps({str(USDC.id): node.tokens[USDC.id]}),
            "WALLETCORE_BASECHAIN_RPC_TIMEOUT_SECONDS": "5",
        }
    return env


def deploy(
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    clock: ManualClock,
    keystore: SealedKeyStore,
    registry: Mapping[str, ChainPlugin[Any]] | None = None,
) -> Container:
    """A container built from `env` alone, its chains planned and built while `env` is
    the environment (the plugins read their settings then); `registry`: the installed
    chain plugins instead of the entry points'."""
    with monkeypatch.context() as scoped:
        for name, value in env.items():
            scoped.setenv(name, value)
        container = create_container(Settings(), clock=clock, keystore=keystore)
        if registry is not None:
            container.chain_plugins.override(providers.Object(registry))
        container.gateways()
    return container


@asynccontextmanager
async def serving(container: Container) -> AsyncIterator[AsyncTestClient[Any]]:
    """The app over `container`; every response is held to its served OpenAPI document."""
    async with AsyncTestClient(create_app(container)) as client:
        yield await judge_responses(client)


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


def ids(asset_ids: list[int]) -> str:
    return ",".join(map(str, asset_ids))


async def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    """The operator CLI (`walletcore ...`) on the environment's deployment, in this process
    (in a thread: it runs its own event loop)."""
    assert await asyncio.to_thread(main, list(argv)) == 0
    return json.loads(capsys.readouterr().out)


async def signed_in(
    http: AsyncTestClient[Any], container: Container, issued: dict[str, str]
) -> Api:
    """The client the CLI issued, signed in over `/auth`."""
    headers = {"x-client-id": issued["clientId"], "x-api-key": issued["apiKey"]}
    token = assert_ok(await http.post("/auth", headers=headers))["token"]
    clients = {c.client_id: c for c in await container.auth().list_clients()}
    key = IssuedKey(clients[issued["clientId"]], issued["apiKey"])
    return Api(http, container, key, token)


def evm_address(mnemonic: str) -> str:
    """The seed's EVM address (`m/44'/60'/0'/0/0`), derived by eth-account, not walletcore."""
    Account.enable_unaudited_hdwallet_features()
    return str(Account.from_mnemonic(mnemonic, account_path="m/44'/60'/0'/0/0").address)


def test_the_chain_is_a_plugin_found_through_its_entry_point() -> None:
    found = plugins.chain_plugins()["l2chain"]
    assert found is walletcore_l2chain.PLUGIN and found.defines
    assert found.chains == {BASECHAIN} and BASECHAIN not in CONTRACT_CHAINS
    assert plugins.chain_definitions().plugin_of(BASECHAIN) is found
    description = found.describes[BASECHAIN]
    assert description.assets == (ETH, USDC) and description.native == ETH
    assert (description.replaces_by, description.fee_wire) == ("fee-bump", "decimal")
    assert description.default_fee_cap == Decimal("0.001")
    assert description.wrong_password.error().status == 401
    assert description.hashes.prefix == "0x" and description.hashes.normalise("0xAB") == "0xab"
    assert description.sandbox == SandboxEvm(gas_price_wei=10**8)


async def test_an_enabled_client_sends_on_the_new_chain(
    tmp_path: Path,
    node: AnvilNode,
    database: str,
    clock: ManualClock,
    keystore: SealedKeyStore,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in environment(tmp_path / "home", database, node).items():
        monkeypatch.setenv(name, value)  # the server's and the operator CLI's
    container = create_container(Settings(), clock=clock, keystore=keystore)
    assert container.catalog().chains == (*CONTRACT_CHAINS, BASECHAIN)
    assert container.chain_plan().choices[BASECHAIN].label == "l2chain:rpc"
    # the operator issues a client for the contract's sixteen, then enables the new assets
    issued = await cli(capsys, "clients", "create", "--name", "Acme", "--assets", ids(CONTRACT_IDS))
    enabled = [*CONTRACT_IDS, ETH.id, USDC.id]
    changed = await cli(capsys, "clients", "update", issued["clientId"], "--assets", ids(enabled))
    assert changed["assets"] == enabled
    async with serving(container) as http:
        api = await signed_in(http, container, issued)
        config = assert_ok(await api.post("/config"))
        assert [a["assetId"] for a in config["assets"]] == enabled
        assert config["assets"][16:] == [
            {"assetId": 8453, "chain": "BASECHAIN", "symbol": "ETH", "kind": "NATIVE",
             "decimals": 18, "feePayer": "USER"},
            {"assetId": 84531, "chain": "BASECHAIN", "symbol": "USDC", "kind": "TOKEN",
             "decimals": 6, "feePayer": "USER", "standard": "ERC20"},
        ]  # fmt: skip

        created = assert_ok(await api.post("/create", {"password": PASSWORD}))
        user, addresses = created["userId"], created["addresses"]
        assert list(addresses) == [*SIX, "BASECHAIN"]
        address = addresses["BASECHAIN"]
        assert address == evm_address(created["mnemonic"]) == addresses["ETHEREUM"]
        shown = assert_ok(await api.post("/addresses", {"userId": user}))
        assert shown["addresses"] == addresses

        node.fund(address, ETH, 10**18)
        node.fund(address, USDC, 25_000_000)
        assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 8453})) == "1"
        assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 84531})) == "25"

        body = {"userId": user, "assetId": 8453, "recipient": RECIPIENT, "amount": "0.5"}
        quoted = Decimal(assert_ok(await api.post("/fee", body)))
        assert 0 < quoted <= Decimal("0.001")  # under the description's default fee cap
        wrong = await api.post("/send", {**body, "password": "not it"}, X_Request_Id="b0")
        assert_error(wrong, 401, "Invalid credentials")  # the description's answer
        sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="b1"))
        assert sent["status"] == "pending" and sent["txHash"].startswith("0x")
        replay = await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="b1")
        assert assert_ok(replay)["txHash"] == sent["txHash"]
        row = await settle(api, {"userId": user, "assetId": 8453, "txHash": sent["txHash"]})
        assert (row["status"], row["type"]) == ("success", "send")
        assert Decimal(row["fee"]) <= quoted
        assert Decimal(row["amount"]) + Decimal(row["fee"]) <= Decimal("0.5")
        assert node.native(RECIPIENT) >= Decimal(row["amount"]) > Decimal("0.49")
        receipt = node.wait_receipt(sent["txHash"])
        transaction = node.transaction(sent["txHash"])
        assert receipt["status"] == "0x1" and transaction is not None
        assert int(transaction["chainId"], 16) == CHAIN_ID  # signed for BASECHAIN's chain id

        token = {"userId": user, "assetId": 84531, "recipient": RECIPIENT, "amount": "10"}
        assert Decimal(assert_ok(await api.post("/fee", token))) > 0
        sent = assert_ok(
            await api.post("/send", {**token, "password": PASSWORD}, X_Request_Id="b2")
        )
        row = await settle(api, {"userId": user, "assetId": 84531, "txHash": sent["txHash"]})
        assert (row["status"], row["type"], row["amount"]) == ("success", "send", "10")
        assert assert_ok(await api.post("/balance", {"userId": user, "assetId": 84531})) == "15"
        listed = assert_ok(await api.post("/transactions", {"userId": user, "assetId": 84531}))
        assert sent["txHash"] in [r["hash"] for r in listed]


async def test_a_client_not_enabled_sees_the_contract_unchanged(
    tmp_path: Path,
    node: AnvilNode,
    clock: ManualClock,
    keystore: SealedKeyStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same client settings on a deployment that names BASECHAIN and on one that does
    not: the same `/config`, the same chains in `/create`, the new assets refused."""
    seen: list[tuple[Any, list[str]]] = []
    for name, with_node in (("named", node), ("not-named", None)):
        home = tmp_path / name
        env = environment(home, sqlite_url(home / "walletcore.db"), with_node)
        container = deploy(env, monkeypatch, clock, keystore)
        async with serving(container) as http:
            api = await sign_in(http, container, assets=CONTRACT_IDS)
            config = assert_ok(await api.post("/config"))
            created = assert_ok(await api.post("/create", {"password": PASSWORD}))
            seen.append((config, list(created["addresses"])))
            user = created["userId"]
            refused = await api.post("/balance", {"userId": user, "assetId": 8453})
            if with_node is None:
                assert_error(refused, 400, "Unknown assetId")  # not served at all
            else:
                assert_error(refused, 403)  # served, not enabled for this client
    (named_config, named_chains), (plain_config, plain_chains) = seen
    assert named_config == plain_config
    assert [a["assetId"] for a in named_config["assets"]] == CONTRACT_IDS
    assert named_chains == plain_chains == SIX


async def test_a_deployment_that_does_not_name_it_serves_the_six_chains(
    tmp_path: Path,
    clock: ManualClock,
    keystore: SealedKeyStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    env = environment(home, sqlite_url(home / "walletcore.db"), None)
    container = deploy(env, monkeypatch, clock, keystore)
    assert "l2chain" in container.chain_plugins()  # installed, not named
    assert container.catalog().chains == CONTRACT_CHAINS
    assert [a.id for a in container.catalog().assets] == CONTRACT_IDS
    assert list(container.gateways()) == list(CONTRACT_CHAINS)
    assert list(container.chain_plan().descriptions) == list(CONTRACT_CHAINS)
    async with serving(container) as http:
        api = await sign_in(http, container)  # every served asset
        assert api.issued.client.enabled_assets == tuple(CONTRACT_IDS)
        config = assert_ok(await api.post("/config"))
        assert [a["assetId"] for a in config["assets"]] == CONTRACT_IDS
        created = assert_ok(await api.post("/create", {"password": PASSWORD}))
        assert list(created["addresses"]) == SIX
        with pytest.raises(InvalidRequest, match="unknown asset ids"):
            await container.auth().create_client("Other", assets=[*CONTRACT_IDS, 8453])


async def test_the_openapi_document_is_the_contracts_unless_the_chain_is_named(
    tmp_path: Path,
    node: AnvilNode,
    clock: ManualClock,
    keystore: SealedKeyStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Byte for byte: the document of a deployment with the plugin installed and BASECHAIN
    not named is that of the same deployment without the plugin; naming it adds it."""

    async def document(container: Container) -> bytes:
        async with serving(container) as http:
            fetched = await http.get("/schema/openapi.json")
            assert fetched.status_code == 200
            return fetched.content

    def env(name: str, with_node: AnvilNode | None) -> dict[str, str]:
        home = tmp_path / name
        return environment(home, sqlite_url(home / "walletcore.db"), with_node)

    installed = deploy(env("installed", None), monkeypatch, clock, keystore)
    registry = {n: p for n, p in plugins.chain_plugins().items() if n != "l2chain"}
    without = deploy(env("without", None), monkeypatch, clock, keystore, registry)
    assert "l2chain" in installed.chain_plugins() and "l2chain" not in without.chain_plugins()
    plain = await document(without)
    assert await document(installed) == plain

    named = deploy(env("named", node), monkeypatch, clock, keystore)
    served = json.loads(await document(named))
    chains = served["components"]["schemas"]["ChainAddresses"]["properties"]
    assert list(chains) == [*SIX, "BASECHAIN"]
    assert (
        BASECHAIN.value
        not in json.loads(plain)["components"]["schemas"]["ChainAddresses"]["properties"]
    )


async def test_the_sandbox_ledger_stands_in_when_named(
    tmp_path: Path,
    clock: ManualClock,
    keystore: SealedKeyStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`WALLETCORE_CHAIN_BASECHAIN=sandbox`: the sandbox ledger plays the chain by its
    description's rules (gas x 0.1 gwei)."""
    home = tmp_path / "home"
    env = {
        **environment(home, sqlite_url(home / "walletcore.db"), None),
        "WALLETCORE_CHAIN_BASECHAIN": "sandbox",
    }
    container = deploy(env, monkeypatch, clock, keystore)
    assert isinstance(container.gateways()[BASECHAIN], SandboxGateway)
    assert container.catalog().chains == (*CONTRACT_CHAINS, BASECHAIN)
    async with serving(container) as http:
        api = await sign_in(http, container, assets=[*CONTRACT_IDS, ETH.id, USDC.id])
        created = assert_ok(await api.post("/create", {"password": PASSWORD}))
        assert list(created["addresses"]) == [*SIX, "BASECHAIN"]
        body = {
            "userId": created["userId"],
            "assetId": 8453,
            "recipient": RECIPIENT,
            "amount": "0.5",
        }
        assert assert_ok(await api.post("/fee", body)) == "0.0000021"  # 21,000 x 10^8 wei
        ledger = container.gateways()[BASECHAIN]
        assert isinstance(ledger, SandboxGateway)
        await ledger.fund(created["addresses"]["BASECHAIN"], ETH, 10**18)
        balance = {"userId": created["userId"], "assetId": 8453}
        assert assert_ok(await api.post("/balance", balance)) == "1"
        sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="s1"))
        assert sent["txHash"].startswith("0x") and len(sent["txHash"]) == 66  # EVM's form
        assert Decimal(assert_ok(await api.post("/balance", balance))) == Decimal("0.5")
