"""BITCOIN end to end over HTTP on `WALLETCORE_CHAINS=rpc`, with a real `bitcoind -regtest`
(installed by `python3 dev.py test`; skipped, saying why, without one): the gateway built by
the `bitcoin` plugin from variables alone, on the Core backend, the SQL storage's leases."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok, rpc_env

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain
from walletcore.settings import Settings
from walletcore_chains.bitcoin.gateway import BitcoinGateway
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.testing.bitcoind import Bitcoind, find_bitcoind


@pytest.fixture(scope="module")
def node() -> Iterator[Bitcoind]:
    binary = find_bitcoind()
    if binary is None:
        pytest.skip(
            "no bitcoind: run `python3 dev.py test` (it installs one) or set WALLETCORE_BITCOIND"
        )
    started = Bitcoind(binary).start()
    started.mine(101)
    try:
        yield started
    finally:
        started.stop()


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
