"""HTTP on BITCOIN: one X-Request-Id is one transfer through its replace-by-fee ladder
(docs/transfers.md), on `WALLETCORE_CHAINS=rpc` with a real `bitcoind -regtest` (installed
by `python3 dev.py test`; skipped, saying why, without one) and the SQL storage.

The node mines no transaction paying under 2.5 sat/vB (`-blockmintxfee`), and quotes are
at its minimum relay fee (1 sat/vB: a regtest node has no estimate), so a send stays in
the mempool block after block: stuck, as on a busy network. The app runs with
`WALLETCORE_JOBS=off`; `follow_sends` runs in a worker of its own (its own container on
the same database and key store, as `walletcore worker`), driven by the test with the
shared manual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from http_support import PASSWORD, Api, assert_ok, rpc_env

from walletcore.clock import ManualClock
from walletcore.container import Container, create_container
from walletcore.domain.assets import Chain
from walletcore.domain.audit import AuditEntry
from walletcore.domain.sends import ChainStatus, SendRecord
from walletcore.ports import Lifecycle
from walletcore.services.send_record import SignedSend
from walletcore.settings import Settings
from walletcore_chains.bitcoin.gateway import BitcoinGateway
from walletcore_chains.keystore import SealedKeyStore
from walletcore_chains.testing.bitcoind import Bitcoind, stingy_node_or_skip

COIN = 100_000_000
#: sat/vB: blocks take nothing paying less
BLOCK_MIN_RATE = 2.5
#: `WALLETCORE_FEE_CAPS` of BITCOIN: no transaction of a transfer may cost more (sat)
CAP_BTC = "0.00002"
CAP_UNITS = 2_000


@pytest.fixture(scope="module")
def node() -> Iterator[Bitcoind]:
    with stingy_node_or_skip(BLOCK_MIN_RATE) as started:
        yield started


@pytest.fixture
def fee_bump() -> str:
    return "auto"


@pytest.fixture
def settings(
    tmp_path: Path, node: Bitcoind, fee_bump: str, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **rpc_env(home, Chain.BITCOIN),
        "WALLETCORE_BITCOIN_NETWORK": "regtest",
        "WALLETCORE_BITCOIN_BACKEND": "core",
        "WALLETCORE_BITCOIN_RPC_URL": node.url,
        "WALLETCORE_BITCOIN_CONFIRMATIONS": "2",
        "WALLETCORE_FEE_CAPS": f'{{"BITCOIN": "{CAP_BTC}"}}',
        "WALLETCORE_FEE_BUMP": fee_bump,
        "WALLETCORE_JOBS": "off",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return Settings()


@pytest.fixture
def container(settings: Settings, clock: ManualClock, keystore: SealedKeyStore) -> Container:
    return create_container(settings, clock=clock, keystore=keystore)


@pytest.fixture
async def worker(
    settings: Settings, clock: ManualClock, keystore: SealedKeyStore
) -> AsyncIterator[Container]:
    """A worker: a container of its own on the same database and key store."""
    built = create_container(settings, clock=clock, keystore=keystore)
    try:
        yield built
    finally:
        for gateway in built.gateways().values():
            if isinstance(gateway, Lifecycle):
                await gateway.aclose()
        storage = built.storage()
        if isinstance(storage, Lifecycle):
            await storage.aclose()


async def record_of(worker: Container, client_id: str, request_id: str) -> SendRecord:
    async with worker.storage().read() as unit:
        record = await unit.sends.get(client_id, request_id)
    assert record is not None
    return record


async def audit_of(worker: Container, action: str) -> list[AuditEntry]:
    """The entries of `action`, oldest first."""
    async with worker.storage().read() as unit:
        entries = await unit.audit.newest(1000)
    return [e for e in reversed(entries) if e.action == action]


def mempool_fee(node: Bitcoind, txid: str) -> int:
    return int(Decimal(str(node.call("getmempoolentry", txid)["fees"]["base"])) * COIN)


def units(btc: str) -> int:
    return int(Decimal(btc) * COIN)


async def funded_user(api: Api, node: Bitcoind, btc: str) -> tuple[str, str]:
    created = assert_ok(await api.post("/create", {"password": PASSWORD}))
    address = created["addresses"]["BITCOIN"]
    node.fund(address, btc)
    node.mine(1)
    return created["userId"], address


async def test_a_stuck_send_is_bumped_until_mined_under_one_request_id(
    api: Api, container: Container, worker: Container, node: Bitcoind, clock: ManualClock
) -> None:
    gateway = worker.gateways()[Chain.BITCOIN]
    assert isinstance(gateway, BitcoinGateway) and gateway.resigns is False
    assert worker.transfers().cap_units(Chain.BITCOIN) == CAP_UNITS
    jobs = worker.jobs()
    alice, _ = await funded_user(api, node, "0.1")
    bob = assert_ok(await api.post("/create", {"password": PASSWORD}))
    body = {
        "userId": alice,
        "assetId": 1,
        "recipient": bob["addresses"]["BITCOIN"],
        "amount": "0.03",
    }
    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="s1"))
    first = sent["txHash"]
    assert sent["status"] == "pending"
    entry = node.call("getmempoolentry", first)
    assert units(sent["fee"]) == mempool_fee(node, first)
    assert units(sent["fee"]) / entry["vsize"] < BLOCK_MIN_RATE  # the node will not mine it

    # the ladder, signed with the send: rising fees, bumps then the cancel, all under the cap
    signed = SignedSend.from_bytes((await record_of(worker, api.client_id, "s1")).raw_tx)
    fees = [r.fee_units for r in signed.ladder]
    kinds = [r.kind for r in signed.ladder]
    assert kinds[-1] == "cancel" and set(kinds[:-1]) == {"bump"} and len(kinds) >= 3
    assert fees == sorted(set(fees)) and fees[0] > units(sent["fee"])
    assert fees[-1] == CAP_UNITS  # the cap binds: the cancel sits on it, nothing above

    node.mine(1)
    assert first in node.call("getrawmempool")  # left out of the block
    await jobs.follow_sends()  # not stuck yet: pending, nothing replaced
    record = await record_of(worker, api.client_id, "s1")
    assert (record.chain_status, record.tx_hash) == (ChainStatus.PENDING, first)
    assert await audit_of(worker, "send.replace") == []

    # past the stuck time: the worker broadcasts the next bump, block after block
    hashes, broadcast_fees = [first], [units(sent["fee"])]
    for _ in range(len(fees) - 1):
        clock.advance(gateway.stuck_after_seconds + 1)
        await jobs.follow_sends()
        record = await record_of(worker, api.client_id, "s1")
        current = SignedSend.from_bytes(record.raw_tx)
        assert record.chain_status is ChainStatus.STUCK and current.kind == "bump"
        assert record.tx_hash == current.tx_hash != hashes[-1]
        hashes.append(current.tx_hash)
        broadcast_fees.append(current.fee_units)
        mempool = node.call("getrawmempool")
        assert current.tx_hash in mempool and not set(hashes[:-1]) & set(mempool)
        assert mempool_fee(node, current.tx_hash) == current.fee_units <= CAP_UNITS
        # the client replaying its /send sees the transfer as it stands: the bump
        replay = assert_ok(
            await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="s1")
        )
        assert (replay["txHash"], replay["status"]) == (current.tx_hash, "pending")
        assert units(replay["fee"]) == current.fee_units
        node.mine(1)
        if current.tx_hash not in node.call("getrawmempool"):
            break  # mined
    else:
        pytest.fail(f"no bump was mined: fees {broadcast_fees}")
    assert len(hashes) >= 3  # the first bump (2 sat/vB) was left out too
    final = hashes[-1]
    replaced = await audit_of(worker, "send.replace")
    assert [(e.target, e.outcome) for e in replaced] == [(h, "ok") for h in hashes[1:]]
    assert replaced[0].detail == f"bump {first} -> {hashes[1]}, fee {broadcast_fees[1]}"

    await jobs.follow_sends()  # mined one block deep of two: pending, not bumped again
    record = await record_of(worker, api.client_id, "s1")
    assert record.tx_hash == final and not record.chain_status.is_final
    node.mine(1)
    assert await jobs.follow_sends() == 1
    record = await record_of(worker, api.client_id, "s1")
    assert (record.chain_status, record.tx_hash) == (ChainStatus.SUCCESS, final)
    [settled] = await audit_of(worker, "send.settle")
    assert settled.target == final and "success" in (settled.detail or "")

    # every hash the transfer had answers its outcome: the replacement's row
    for wanted in hashes:
        lookup = {"userId": alice, "assetId": 1, "txHash": wanted}
        row = assert_ok(await api.post("/txid", lookup))
        assert (row["hash"], row["status"], row["type"]) == (final, "success", "send")
        assert units(row["fee"]) == broadcast_fees[-1]
    replay = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="s1"))
    assert (replay["txHash"], replay["status"]) == (final, "success")
    # paid once: the amount less the first quote (USER pays from the amount); the bumps'
    # rise came out of the sender's change
    paid = units("0.03") - broadcast_fees[0]
    bob_balance = {"userId": bob["userId"], "assetId": 1}
    assert units(assert_ok(await api.post("/balance", bob_balance))) == paid
    alice_balance = assert_ok(await api.post("/balance", {"userId": alice, "assetId": 1}))
    assert units(alice_balance) == units("0.1") - paid - broadcast_fees[-1]
    assert max(broadcast_fees) <= CAP_UNITS


@pytest.mark.parametrize("fee_bump", ["manual"])
async def test_the_operators_cancel_gives_a_stuck_send_back(
    api: Api, container: Container, worker: Container, node: Bitcoind, clock: ManualClock
) -> None:
    gateway = worker.gateways()[Chain.BITCOIN]
    jobs = worker.jobs()
    carol, _ = await funded_user(api, node, "0.05")
    dave = assert_ok(await api.post("/create", {"password": PASSWORD}))
    body = {
        "userId": carol,
        "assetId": 1,
        "recipient": dave["addresses"]["BITCOIN"],
        "amount": "0.01",
    }
    sent = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="c1"))
    first = sent["txHash"]
    node.mine(1)
    assert first in node.call("getrawmempool")
    clock.advance(gateway.stuck_after_seconds + 1)
    await jobs.follow_sends()  # stuck; WALLETCORE_FEE_BUMP=manual: left to the operator
    record = await record_of(worker, api.client_id, "c1")
    assert (record.chain_status, record.tx_hash) == (ChainStatus.STUCK, first)
    cancel = SignedSend.from_bytes(record.raw_tx).next_rung("cancel")
    assert cancel is not None and cancel.fee_units <= CAP_UNITS

    shown = await worker.transfers().replace(
        api.client_id, "c1", cancel=True, request_id_audit="operator-cancel-test"
    )
    assert shown["current"]["kind"] == "cancel" and shown["current"]["txHash"] == cancel.tx_hash
    assert [e["txHash"] for e in shown["earlier"]] == [first] and shown["ladder"] == []
    mempool = node.call("getrawmempool")
    assert cancel.tx_hash in mempool and first not in mempool
    assert mempool_fee(node, cancel.tx_hash) == cancel.fee_units
    [replaced] = await audit_of(worker, "send.replace")
    assert (replaced.request_id, replaced.target) == ("operator-cancel-test", cancel.tx_hash)
    assert (
        replaced.detail == f"cancel {first} -> {cancel.tx_hash}, fee {cancel.fee_units} (operator)"
    )

    node.mine(2)  # the cancel pays above what blocks take: mined, two deep
    assert await jobs.follow_sends() == 1
    record = await record_of(worker, api.client_id, "c1")
    assert (record.chain_status, record.tx_hash) == (ChainStatus.FAILED, cancel.tx_hash)
    [settled] = await audit_of(worker, "send.settle")
    assert settled.target == cancel.tx_hash and "(cancelled)" in (settled.detail or "")

    row = assert_ok(await api.post("/txid", {"userId": carol, "assetId": 1, "txHash": first}))
    assert (row["hash"], row["status"]) == (cancel.tx_hash, "failed")
    assert units(row["fee"]) == cancel.fee_units
    replay = assert_ok(await api.post("/send", {**body, "password": PASSWORD}, X_Request_Id="c1"))
    assert (replay["txHash"], replay["status"]) == (cancel.tx_hash, "failed")
    held = assert_ok(await api.post("/balance", {"userId": carol, "assetId": 1}))
    assert units(held) == units("0.05") - cancel.fee_units  # the coins are back
    dave_balance = {"userId": dave["userId"], "assetId": 1}
    assert assert_ok(await api.post("/balance", dave_balance)) == "0"  # nothing reached him
    assert node.call("gettxout", first, 0, True) is None
