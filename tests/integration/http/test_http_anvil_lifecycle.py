"""The transfer lifecycle over HTTP on anvil (docs/transfers.md): one X-Request-Id is one
transfer through every replacement. The app serves `/send`, `/txid` and replays; the
follow job runs in a worker of its own (its own container on the same database, as
`walletcore worker`); the operator's `walletcore sends` runs as the CLI does.

anvil mines only when told (`--no-mining`). A send is kept waiting by blocks of 21,000 gas
taken by a rival paying more, so its bumps go out one by one until one outbids the rival.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account
from http_support import PASSWORD, Api, assert_ok, rpc_env, sign_in
from litestar.testing import AsyncTestClient

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain
from walletcore.settings import Settings
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.evm.fees import NATIVE_GAS
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.testing.anvil import AnvilNode, find_anvil
from walletcore_cli import main as cli_main
from walletcore_litestar import create_app

pytestmark = pytest.mark.skipif(
    find_anvil() is None, reason="no anvil: run `python3 dev.py test` (it installs it)"
)
RECIPIENT = "0x52908400098527886E0F7030069857D2E4169EE7"
ETH = CONTRACT_CATALOG.asset_by_id(2)
STUCK_AFTER = 30
CONFIRMATIONS = 12  # ETHEREUM mainnet's depth


@pytest.fixture
def node() -> Iterator[AnvilNode]:
    with AnvilNode(Chain.ETHEREUM, mining=False) as started:
        yield started


@pytest.fixture
def env(tmp_path: Path, node: AnvilNode, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    values = {
        **rpc_env(home, Chain.ETHEREUM),
        "WALLETCORE_EVM_NETWORK": "mainnet",
        "WALLETCORE_ETHEREUM_RPC_URL": node.url,
        "WALLETCORE_EVM_RPC_TIMEOUT_SECONDS": "5",
        "WALLETCORE_EVM_TOKENS": json.dumps({str(k): v for k, v in node.tokens.items()}),
        "WALLETCORE_EVM_STUCK_AFTER_SECONDS": str(STUCK_AFTER),
        "WALLETCORE_JOBS": "off",  # the worker below runs the follow job
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
async def app(
    env: dict[str, str], clock: ManualClock, keystore: SealedKeyStore
) -> AsyncIterator[tuple[Api, Container]]:
    """The HTTP app, and a worker container (the follow job) on the same database."""
    container = create_container(Settings(), clock=clock, keystore=keystore)
    worker = create_container(Settings(), clock=clock, keystore=keystore)
    async with AsyncTestClient(create_app(container)) as client:
        yield await sign_in(client, container), worker
    await worker.gateways()[Chain.ETHEREUM].aclose()  # type: ignore[attr-defined]
    await worker.storage().aclose()


async def follow(worker: Container) -> None:
    await worker.jobs().follow_sends()


async def record_of(worker: Container, client_id: str, request_id: str) -> Any:
    async with worker.storage().read() as unit:
        return await unit.sends.get(client_id, request_id)


def rival_fills_blocks(node: AnvilNode, count: int, max_fee: int) -> None:
    """Blocks of 21,000 gas, each taken by a rival's transfer paying `max_fee`."""
    node.set_block_gas_limit(NATIVE_GAS)
    node.mine()  # the limit holds from the next block on
    rival = Account.create()
    node.fund(rival.address, ETH, 10**18)
    for nonce in range(count):
        tx = {
            "chainId": node.chain_id,
            "nonce": nonce,
            "to": rival.address,
            "value": 0,
            "gas": NATIVE_GAS,
            "maxFeePerGas": max_fee,
            "maxPriorityFeePerGas": max_fee // 2,
        }
        node.send_raw(bytes(Account.sign_transaction(tx, rival.key).raw_transaction))


async def new_user(api: Api, node: AnvilNode, wei: int = 10**18) -> tuple[str, str]:
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    node.fund(created["addresses"]["ETHEREUM"], ETH, wei)
    return created["userId"], created["addresses"]["ETHEREUM"]


async def test_a_stuck_send_is_bumped_by_the_worker_until_mined_under_one_request_id(
    app: tuple[Api, Container], node: AnvilNode, clock: ManualClock
) -> None:
    api, worker = app
    user, _ = await new_user(api, node)
    body = {"userId": user, "assetId": 2, "recipient": RECIPIENT, "amount": "0.01"}
    quoted = Decimal(assert_ok(await api.post("/fee", body)))
    max_fee = int(quoted * 10**18) // NATIVE_GAS
    rival_fills_blocks(node, 10, max_fee * 9 // 5)  # above the 2nd bump, under the 3rd

    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="e1"))
    first = sent["txHash"]
    node.mine(2)
    await follow(worker)  # pending, not stuck yet: nothing replaced
    record = await record_of(worker, api.client_id, "e1")
    assert (record.chain_status.value, record.tx_hash) == ("pending", first)

    hashes = [first]
    for _ in range(6):  # stuck, bumped; until a bump outbids the rival and is mined
        clock.advance(STUCK_AFTER + 1)
        await follow(worker)
        record = await record_of(worker, api.client_id, "e1")
        if record.tx_hash != hashes[-1]:
            hashes.append(record.tx_hash)
            replay = assert_ok(
                await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="e1")
            )
            assert (replay["txHash"], replay["status"]) == (record.tx_hash, "pending")
            assert Decimal(replay["fee"]) > Decimal(sent["fee"])
        node.mine()
        if node.receipt(hashes[-1]) is not None:
            break
    assert len(hashes) >= 3, hashes  # two bumps were not enough against the rival
    landed = hashes[-1]
    assert node.receipt(landed)["status"] == "0x1"
    node.mine(CONFIRMATIONS)
    await follow(worker)
    record = await record_of(worker, api.client_id, "e1")
    assert (record.chain_status.value, record.tx_hash) == ("success", landed)

    # every hash the transfer had answers its outcome; the replay answers the landed one
    for old in hashes:
        row = assert_ok(await api.post("/txid", {"userId": user, "assetId": 2, "txHash": old}))
        assert (row["hash"], row["status"], row["type"]) == (landed, "success", "send")
    replay = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="e1"))
    assert (replay["txHash"], replay["status"]) == (landed, "success")
    assert node.native(RECIPIENT) == Decimal(row["amount"])  # paid once
    async with worker.storage().read() as unit:
        entries = await unit.audit.newest(200)
    replaced = [e for e in entries if e.action == "send.replace"]
    assert sorted(e.target for e in replaced) == sorted(hashes[1:])  # each bump audited once


async def test_a_dropped_nonce_is_refilled_and_ten_later_sends_land_without_an_operator(
    app: tuple[Api, Container], node: AnvilNode
) -> None:
    api, worker = app
    user, address = await new_user(api, node)
    body = {"userId": user, "assetId": 2, "recipient": RECIPIENT, "amount": "0.001"}
    first = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="d0"))
    node.drop_all()  # the node lost it: its nonce is a gap now
    later = []
    for n in range(1, 11):  # accepted and queued behind the gap (the nonce floor)
        sent = await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id=f"d{n}")
        later.append(assert_ok(sent)["txHash"])
    node.mine(2)
    assert [node.receipt(h) for h in [first["txHash"], *later]] == [None] * 11  # stalled
    await follow(worker)  # d0 reads missing: its same bytes go again
    node.mine(3)
    assert all(node.receipt(h)["status"] == "0x1" for h in [first["txHash"], *later])
    assert node.nonce(address) == 11  # nonces 0..10, no gap, no operator
    node.mine(CONFIRMATIONS)
    await follow(worker)
    for n in range(11):
        assert (await record_of(worker, api.client_id, f"d{n}")).chain_status.value == "success"
    nxt = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="d11"))
    node.mine()
    assert int(node.transaction(nxt["txHash"])["nonce"], 16) == 11


async def test_the_operator_cancels_a_stuck_send_and_the_transfer_fails_having_sent_nothing(
    app: tuple[Api, Container], node: AnvilNode, env: dict[str, str]
) -> None:
    api, worker = app
    user, address = await new_user(api, node)
    body = {"userId": user, "assetId": 2, "recipient": RECIPIENT, "amount": "0.02"}
    quoted = Decimal(assert_ok(await api.post("/fee", body)))
    rival_fills_blocks(node, 4, int(quoted * 10**18) // NATIVE_GAS * 2)
    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="c1"))
    node.mine()
    before = node.native(RECIPIENT)

    def operator(*argv: str) -> int:
        return cli_main(["sends", *argv])

    assert await asyncio.to_thread(operator, "show", api.client_id, "c1") == 0
    assert await asyncio.to_thread(operator, "cancel", api.client_id, "c1") == 0
    record = await record_of(worker, api.client_id, "c1")
    cancel = record.tx_hash
    assert cancel != sent["txHash"]
    node.mine(2)  # the cancel (21,000 gas at the cap's price) outbids the rival
    assert node.receipt(cancel)["status"] == "0x1"
    node.mine(CONFIRMATIONS)
    await follow(worker)
    record = await record_of(worker, api.client_id, "c1")
    assert record.chain_status.value == "failed"
    row = assert_ok(
        await api.post("/txid", {"userId": user, "assetId": 2, "txHash": sent["txHash"]})
    )
    assert (row["status"], row["hash"]) == ("failed", cancel)
    assert node.native(RECIPIENT) == before  # nothing was sent
    assert node.nonce(address) == 1
    # a second cancel of a final transfer is refused: exit 1, the reason on stderr
    assert await asyncio.to_thread(operator, "cancel", api.client_id, "c1") == 1
