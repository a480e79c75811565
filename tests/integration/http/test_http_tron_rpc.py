"""TRON end to end over HTTP on `WALLETCORE_CHAINS=rpc`: the gateway built by the `tron`
plugin from variables alone against the loopback TRON node (`walletcore_chains.testing.
tron_node`), the SQL storage, the sealed KeyStore signing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from http_support import PASSWORD, Api, assert_error, assert_ok, rpc_env, sign_in
from litestar.testing import AsyncTestClient

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain, FeePayer
from walletcore.domain.errors import TransferRejected
from walletcore.ports import SignedTransfer
from walletcore.services.send_record import SignedSend
from walletcore.settings import Settings
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.testing.tron_node import PARAMETERS, TronTestNode
from walletcore_chains.tron.client import API_KEY_HEADER
from walletcore_chains.tron.gateway import TronGateway
from walletcore_litestar import create_app

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
        "WALLETCORE_TRON_API_KEY": "secret-api-key",
        "WALLETCORE_TRON_NETWORK": "nile",
        "WALLETCORE_TRON_TOKENS": json.dumps({"41": node.tokens[41], "42": node.tokens[42]}),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()


@pytest.fixture
def container(settings: Settings, clock: ManualClock, keystore: SealedKeyStore) -> Container:
    return create_container(settings, clock=clock, keystore=keystore)


async def test_trx_and_usdt_over_http_end_to_end(
    api: Api, container: Container, node: TronTestNode
) -> None:
    gateway = container.gateways()[Chain.TRON]
    assert isinstance(gateway, TronGateway)
    assert node.url not in repr(gateway) + repr(gateway.client)
    alice = assert_ok(await api.post("/create", {"password": PASSWORD}))
    bob = assert_ok(await api.post("/create", {"password": PASSWORD}))
    sender, recipient = alice["addresses"]["TRON"], bob["addresses"]["TRON"]
    node.fund(sender, 50 * SUN)
    node.fund_token(sender, 41, 20 * SUN)
    balance = {"userId": alice["userId"], "assetId": 4}
    assert assert_ok(await api.post("/balance", balance)) == "50"
    assert assert_ok(await api.post("/balance", {**balance, "assetId": 41})) == "20"
    assert node.last_headers.get(API_KEY_HEADER) == "secret-api-key"

    # TRX to a new account: the activation fee, taken from the amount (USER)
    body = {"userId": alice["userId"], "assetId": 4, "recipient": recipient, "amount": "10"}
    quoted = assert_ok(await api.post("/fee", body))
    assert set(quoted) == {"bandwidth"} and quoted["bandwidth"] > 200
    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="t1"))
    fee = (
        Decimal(
            PARAMETERS["getCreateAccountFee"] + PARAMETERS["getCreateNewAccountFeeInSystemContract"]
        )
        / SUN
    )
    assert (sent["status"], sent["feePayer"], Decimal(sent["fee"])) == ("pending", "USER", fee)
    replay = await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="t1")
    assert assert_ok(replay) == sent and node.broadcasts == [sent["txHash"]]
    info = node.info(sent["txHash"])
    assert info["fee"] == int(fee * SUN)

    lookup = {"userId": alice["userId"], "assetId": 4, "txHash": sent["txHash"]}
    assert assert_ok(await api.post("/txid", lookup))["status"] == "pending"  # not solid yet
    node.solidify()
    row = assert_ok(await api.post("/txid", lookup))
    assert (row["type"], row["status"], Decimal(row["amount"])) == ("send", "success", 10 - fee)
    assert Decimal(row["fee"]) == fee and row["date"]
    assert (
        assert_ok(await api.post("/balance", {"userId": bob["userId"], "assetId": 4}))
        == row["amount"]
    )
    assert assert_ok(await api.post("/balance", balance)) == "40"
    rows = assert_ok(await api.post("/transactions", balance))
    assert rows == [row]

    # USDT: the Tron fee object with energy, equal to what the node then charges
    token = {"userId": alice["userId"], "assetId": 41, "recipient": recipient, "amount": "5"}
    quoted = assert_ok(await api.post("/fee", token))
    assert set(quoted) == {"bandwidth", "energy"} and quoted["energy"] > 0
    sent = assert_ok(await api.post("/send", {**token, "password": PASSWORD}, X_Request_Id="t2"))
    receipt = node.info(sent["txHash"])["receipt"]
    assert receipt["result"] == "SUCCESS"
    assert receipt["energy_usage_total"] == quoted["energy"]
    assert (
        receipt.get("net_usage", 0) + receipt.get("net_fee", 0) // PARAMETERS["getTransactionFee"]
        == quoted["bandwidth"]
    )
    node.solidify()
    row = assert_ok(await api.post("/txid", {**lookup, "assetId": 41, "txHash": sent["txHash"]}))
    assert (row["type"], row["amount"], row["status"]) == ("send", "5", "success")
    assert Decimal(row["fee"]) == Decimal(node.info(sent["txHash"])["fee"]) / SUN
    bob_rows = assert_ok(await api.post("/transactions", {"userId": bob["userId"], "assetId": 41}))
    assert [(r["type"], r["amount"]) for r in bob_rows] == [("receive", "5")]

    # a wrong password: 401 Invalid credentials, nothing sent
    wrong = await api.post("/send", {**body, "password": "not-it"}, X_Request_Id="t3")
    assert assert_error(wrong, 401)["message"] == "Invalid credentials"
    bad = await api.post("/fee", {**body, "recipient": "0x" + "11" * 20})
    assert "Invalid TRON address" in assert_error(bad, 400)["message"]
    assert len(node.broadcasts) == 2


async def test_platform_pays_a_usdt_send_from_a_wallet_without_trx(
    http: AsyncTestClient[Any], container: Container, node: TronTestNode
) -> None:
    payer = await sign_in(http, container, name="Payer", fee_payer=FeePayer.PLATFORM)
    platform = await container.wallets().provision_platform(payer.client_id)
    node.fund(platform[Chain.TRON], 100 * SUN)
    created = assert_ok(await payer.post("/create", {"password": PASSWORD}))
    user, address = created["userId"], created["addresses"]["TRON"]
    node.fund_token(address, 41, 3 * SUN)  # USDT and no TRX: not even an activated account
    other = assert_ok(await payer.post("/create", {"password": PASSWORD}))["addresses"]["TRON"]
    body = {"userId": user, "assetId": 41, "recipient": other, "amount": "3"}
    quoted = assert_ok(await payer.post("/fee", body))
    sent = assert_ok(await payer.post("/send", {**body, "password": PASSWORD}, X_Request_Id="p"))
    assert sent["feePayer"] == "PLATFORM" and len(node.broadcasts) == 2  # top-up, transfer
    # the whole balance: clearing it refunds energy, so the call needs more than it uses
    assert node.info(sent["txHash"])["receipt"]["energy_usage_total"] < quoted["energy"]
    node.solidify()
    row = assert_ok(
        await payer.post("/txid", {"userId": user, "assetId": 41, "txHash": sent["txHash"]})
    )
    assert (row["type"], row["amount"], row["status"]) == ("send", "3", "success")
    platform_trx = Decimal(assert_ok(await payer.post("/platform/balance", {"assetId": 4})))
    assert Decimal(100) - platform_trx == Decimal(sent["fee"])


@pytest.fixture
def held_node() -> Iterator[TronTestNode]:
    """A node that holds broadcasts in its pending pool until `pack()` (docs/tron.md)."""
    with TronTestNode(auto_pack=False) as started:
        yield started


async def test_one_request_id_is_one_transfer_through_an_expiry_and_a_resign(
    tmp_path: Path,
    held_node: TronTestNode,
    clock: ManualClock,
    keystore: SealedKeyStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user's TRX send lost from the node's pool: broadcast again by the follow job while
    it may land; once expired, `dropped` (pending on the wire, never 404) until the client
    replays its `/send` with the password, which re-signs it; the replaced hash's `/txid`
    answers the transfer; the recipient is paid once (docs/transfers.md)."""
    node = held_node
    monkeypatch.setenv("WALLETCORE_TRON_NODE_URL", node.url)
    monkeypatch.setenv("WALLETCORE_TRON_TOKENS", json.dumps({"41": node.tokens[41]}))
    home = tmp_path / "home-held"
    home.mkdir()
    for name, value in {
        **rpc_env(home, Chain.TRON),
        "WALLETCORE_TRON_NETWORK": "nile",
        "WALLETCORE_JOBS": "off",
    }.items():
        monkeypatch.setenv(name, value)
    container = create_container(Settings(), clock=clock, keystore=keystore)
    async with AsyncTestClient(create_app(container)) as client:
        api = await sign_in(client, container)
        alice = assert_ok(await api.post("/create", {"password": PASSWORD}))
        bob = assert_ok(await api.post("/create", {"password": PASSWORD}))
        node.fund(alice["addresses"]["TRON"], 50 * SUN)
        node.fund(bob["addresses"]["TRON"], 1 * SUN)  # an active account: no activation fee
        body = {
            "userId": alice["userId"],
            "assetId": 4,
            "recipient": bob["addresses"]["TRON"],
            "amount": "10",
        }
        sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="r1"))
        first = sent["txHash"]
        # the follow job runs in a worker of its own (its own container, the same database)
        worker = create_container(Settings(), clock=clock, keystore=keystore)
        jobs = worker.jobs()
        await jobs.follow_sends()
        lookup = {"userId": alice["userId"], "assetId": 4, "txHash": first}
        assert assert_ok(await api.post("/txid", lookup))["status"] == "pending"

        # lost from the pool while its expiration is ahead: the same bytes go again
        assert node.drop_pending(first) == [first]
        await jobs.follow_sends()
        assert node.broadcasts.count(first) == 2
        assert node.drop_pending(first) == [first]

        # expired unlanded: dropped, pending on the wire, never re-signed without the password
        node.advance(400)
        node.solidify()
        await jobs.follow_sends()
        async with worker.storage().read() as unit:
            record = await unit.sends.get(api.client_id, "r1")
        assert record.chain_status.value == "dropped"
        row = assert_ok(await api.post("/txid", lookup))
        assert (row["status"], row["hash"]) == ("pending", first)
        assert set(node.broadcasts) == {first}

        # the replay re-signs: a new transaction under the same X-Request-Id
        again = assert_ok(
            await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="r1")
        )
        second = again["txHash"]
        assert second != first and again["status"] == "pending"
        assert node.broadcasts[-1] == second
        assert node.pack() == [second]
        node.solidify()
        await jobs.follow_sends()
        row = assert_ok(await api.post("/txid", lookup))  # the replaced hash
        assert (row["hash"], row["status"]) == (second, "success")
        replay = assert_ok(
            await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="r1")
        )
        assert (replay["txHash"], replay["status"]) == (second, "success")
        bob_balance = {"userId": bob["userId"], "assetId": 4}
        assert Decimal(assert_ok(await api.post("/balance", bob_balance))) == 11  # paid once
        # the old bytes can never land now: refused, nothing sent
        old = SignedSend.from_bytes(record.raw_tx)
        with pytest.raises(TransferRejected):
            await worker.gateways()[Chain.TRON].broadcast(SignedTransfer(old.raw, first))
        assert Decimal(assert_ok(await api.post("/balance", bob_balance))) == 11
