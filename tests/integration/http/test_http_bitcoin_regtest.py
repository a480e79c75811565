"""BITCOIN end to end over HTTP on `WALLETCORE_CHAINS=rpc`, with a real `bitcoind -regtest`
(installed by `python3 dev.py test`; skipped, saying why, without one): the gateway built by
the `bitcoin` plugin from variables alone, on the Core backend, the SQL storage's leases."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok, regtest_bitcoind, rpc_env

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain
from walletcore.settings import Settings
from walletcore_chains.bitcoin.gateway import BitcoinGateway
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.testing.bitcoind import Bitcoind

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
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()


@pytest.fixture
def container(settings: Settings, clock: ManualClock, keystore: SealedKeyStore) -> Container:
    return create_container(settings, clock=clock, keystore=keystore)


async def test_btc_over_http_end_to_end(api: Api, container: Container, node: Bitcoind) -> None:
    assert isinstance(container.gateways()[Chain.BITCOIN], BitcoinGateway)
    assert "<url hidden>" in repr(container.gateways()[Chain.BITCOIN].backend._rpc)  # type: ignore[attr-defined]
    alice = assert_ok(await api.post("/create", {"password": PASSWORD}))
    bob = assert_ok(await api.post("/create", {"password": PASSWORD}))
    sender, recipient = alice["addresses"]["BITCOIN"], bob["addresses"]["BITCOIN"]
    assert sender.startswith("bcrt1q") and recipient.startswith("bcrt1q")
    unknown = await api.post("/balance", {"userId": bob["userId"], "assetId": 1})
    assert_error(unknown, 404)

    node.fund(sender, "0.7")
    node.mine(1)
    assert assert_ok(await api.post("/balance", {"userId": alice["userId"], "assetId": 1})) == "0.7"

    body = {"userId": alice["userId"], "assetId": 1, "recipient": recipient, "amount": "0.25"}
    quoted = assert_ok(await api.post("/fee", body))
    assert Decimal(quoted) > 0
    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="b1"))
    assert (sent["status"], sent["feePayer"], sent["fee"]) == ("pending", "USER", quoted)
    raw = node.call("getrawtransaction", sent["txHash"], 1)
    assert all(v["sequence"] == 0xFFFFFFFD for v in raw["vin"])
    replay = await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="b1")
    assert assert_ok(replay) == sent

    lookup = {"userId": alice["userId"], "assetId": 1, "txHash": sent["txHash"]}
    assert assert_ok(await api.post("/txid", lookup))["status"] == "pending"
    node.mine(2)
    row = assert_ok(await api.post("/txid", lookup))
    assert (row["type"], row["status"]) == ("send", "success") and row["date"]
    assert Decimal(row["amount"]) == Decimal("0.25") - Decimal(quoted)  # USER: from the amount
    assert row["fee"] == quoted

    other = {"userId": bob["userId"], "assetId": 1, "txHash": sent["txHash"]}
    received = assert_ok(await api.post("/txid", other))
    assert (received["type"], received["amount"]) == ("receive", row["amount"])
    assert (
        assert_ok(await api.post("/balance", {"userId": bob["userId"], "assetId": 1}))
        == row["amount"]
    )
    assert Decimal(
        assert_ok(await api.post("/balance", {"userId": alice["userId"], "assetId": 1}))
    ) == Decimal("0.45")
    rows = assert_ok(await api.post("/transactions", {"userId": alice["userId"], "assetId": 1}))
    assert rows[0] == row and [r["type"] for r in rows] == ["send", "receive"]
    bob_rows = assert_ok(await api.post("/transactions", {"userId": bob["userId"], "assetId": 1}))
    assert bob_rows == [received]

    wrong = await api.post("/send", {**body, "password": "not-it"}, X_Request_Id="b2")
    assert assert_error(wrong, 400)["message"] == "Invalid password"
    mainnet = {**body, "recipient": "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"}
    bad = assert_error(await api.post("/fee", mainnet), 400)
    assert "mainnet addresses are not accepted on regtest" in bad["message"]
    dust = assert_error(
        await api.post(
            "/send", {**body, "amount": "0.00000400", "password": PASSWORD}, X_Request_Id="b3"
        ),
        400,
    )
    assert "dust" in dust["message"] or "network fee" in dust["message"]


def node_recipients(node: Bitcoind) -> dict[str, str]:
    """An address of each form the validator accepts, from the node: `getnewaddress` of
    each type (P2PKH, P2SH, P2WPKH, P2TR), and a P2WSH (a 1-of-1 multisig's)."""
    kinds = {"p2pkh": "legacy", "p2sh": "p2sh-segwit", "p2wpkh": "bech32", "p2tr": "bech32m"}
    found = {
        form: node.call("getnewaddress", "", kind, wallet="miner") for form, kind in kinds.items()
    }
    pubkey = node.call("getaddressinfo", found["p2wpkh"], wallet="miner")["pubkey"]
    found["p2wsh"] = node.call("createmultisig", 1, [pubkey], "bech32")["address"]
    return found


def paid_to(node: Bitcoind, txid: str, script: str) -> Decimal:
    """What the transaction's one output locked by `script` pays, as the node decodes it."""
    outputs = node.call("getrawtransaction", txid, 1)["vout"]
    values = [Decimal(o["value"]) for o in outputs if o["scriptPubKey"]["hex"] == script]
    assert len(values) == 1, outputs
    return values[0]


async def test_btc_sends_to_every_recipient_form(
    api: Api, container: Container, node: Bitcoind
) -> None:
    """A user's `/send` and a `/platform/send` to each recipient form, legacy and P2SH ones
    too (their `m`/`n`/`2` prefixes are every test network's): each is quoted, built,
    accepted by the node and pays exactly the recipient's script."""
    alice = assert_ok(await api.post("/create", {"password": PASSWORD}))
    platform = await container.wallets().provision_platform(api.client_id)
    for funded in (alice["addresses"]["BITCOIN"], platform[Chain.BITCOIN]):
        node.fund(funded, "1")
    node.mine(1)
    amount = Decimal("0.01")
    sent: list[str] = []
    for form, recipient in node_recipients(node).items():
        script = node.call("validateaddress", recipient)["scriptPubKey"]
        body = {"assetId": 1, "recipient": recipient, "amount": str(amount)}
        user_body = {**body, "userId": alice["userId"]}
        quoted = assert_ok(await api.post("/fee", user_body))
        user_send = assert_ok(
            await api.post("/send", {**user_body, "password": PASSWORD}, X_Request_Id=f"u-{form}")
        )
        assert (user_send["feePayer"], user_send["fee"]) == ("USER", quoted)
        assert paid_to(node, user_send["txHash"], script) == amount - Decimal(quoted), form
        assert_ok(await api.post("/platform/fee", {"assetId": 1, "recipient": recipient}))
        platform_send = assert_ok(await api.post("/platform/send", body, X_Request_Id=f"p-{form}"))
        assert platform_send["feePayer"] == "PLATFORM"
        assert paid_to(node, platform_send["txHash"], script) == amount, form
        sent += [user_send["txHash"], platform_send["txHash"]]
    node.mine(1)
    assert all(node.call("getrawtransaction", t, 1)["confirmations"] == 1 for t in sent)
