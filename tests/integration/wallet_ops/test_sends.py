"""`/send` through the service: idempotency, the wrong password per chain, timeouts."""

from __future__ import annotations

import asyncio

import pytest
from ops_support import ELSEWHERE, PASSWORD, Ops

from walletcore.domain.assets import Chain, FeePayer
from walletcore.domain.errors import (
    BroadcastTimeout,
    DomainError,
    IdempotencyConflict,
    IdempotencyKeyReused,
    InvalidRequest,
    TransferRejected,
)
from walletcore.domain.sends import SendState
from walletcore.ports import SignedTransfer
from walletcore.testing import CONTRACT_CATALOG

NATIVE_AMOUNT = {1: "0.01", 2: "0.01", 3: "0.01", 4: "5", 5: "0.01", 6: "0.01"}
WRONG_PASSWORD = [
    (Chain.BITCOIN, 400, "Invalid password"),
    (Chain.ETHEREUM, 401, "Invalid credentials"),
    (Chain.BSC, 401, "Invalid credentials"),
    (Chain.TRON, 401, "Invalid credentials"),
    (Chain.POLYGON, 401, "Invalid credentials"),
    (Chain.SOLANA, 401, "Invalid password"),
]


@pytest.mark.parametrize(("chain", "status", "message"), WRONG_PASSWORD)
async def test_a_wrong_password_is_answered_per_chain_before_anything_is_signed(
    ops: Ops, chain: Chain, status: int, message: str
) -> None:
    client = await ops.client()
    user = await ops.user(client)
    native = CONTRACT_CATALOG.native_asset(chain)
    await ops.fund(ops.wallets[user][chain], native.id, "10")
    with pytest.raises(DomainError) as caught:
        await ops.send(
            client, user, native.id, NATIVE_AMOUNT[native.id], request_id="r1", password="nope!"
        )
    assert (caught.value.status, caught.value.message) == (status, message)
    assert ops.broadcasts() == 0
    record = await ops.db.sends.get(client.client_id, "r1")
    assert record is not None and record.state is SendState.STARTED and record.tx_hash is None
    assert not record.is_locked(ops.clock.now())  # released: the corrected retry goes at once
    # The same request with the password fixed, under the same X-Request-Id, sends once.
    receipt = await ops.send(client, user, native.id, NATIVE_AMOUNT[native.id], request_id="r1")
    assert receipt.status == "pending" and ops.broadcasts() == 1


async def test_a_replay_answers_the_first_result_and_sends_nothing_again(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], 2, "1")
    first = await ops.send(client, user, 2, "0.1", request_id="pay-1")
    # Any later request with this id replays, even with another password (it is not part
    # of the request's identity) and after the balance has moved on.
    again = await ops.send(client, user, 2, "0.1", request_id="pay-1", password="whatever")
    assert again == first
    assert ops.broadcasts() == 1
    assert await ops.balance(client, user, 2) == "0.9"


async def test_the_same_id_with_another_request_is_422(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], 2, "1")
    await ops.send(client, user, 2, "0.1", request_id="pay-1")
    with pytest.raises(IdempotencyKeyReused) as caught:
        await ops.send(client, user, 2, "0.2", request_id="pay-1")
    assert caught.value.status == 422
    assert ops.broadcasts() == 1


async def test_the_same_id_while_the_first_is_in_flight_is_409(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], 2, "1")
    gateway = ops.gateways[Chain.ETHEREUM]
    entered, proceed = asyncio.Event(), asyncio.Event()
    inner = gateway.inner.broadcast

    async def slow(signed: SignedTransfer) -> str:
        entered.set()
        await proceed.wait()
        return await inner(signed)

    gateway.inner.broadcast = slow  # type: ignore[method-assign]
    first = asyncio.create_task(ops.send(client, user, 2, "0.1", request_id="pay-1"))
    await entered.wait()
    with pytest.raises(IdempotencyConflict) as caught:
        await ops.send(client, user, 2, "0.1", request_id="pay-1")
    assert caught.value.status == 409
    proceed.set()
    receipt = await first
    assert await ops.send(client, user, 2, "0.1", request_id="pay-1") == receipt
    assert ops.broadcasts() == 1


@pytest.mark.parametrize("request_id", [None, ""])
async def test_a_send_without_request_id_is_400(ops: Ops, request_id: str | None) -> None:
    client = await ops.client()
    user = await ops.user(client)
    with pytest.raises(InvalidRequest, match="X-Request-Id is required"):
        await ops.sends.send(
            ops.caller(client),
            request_id=request_id,
            user_id=user,
            asset_id=2,
            recipient=ELSEWHERE[Chain.ETHEREUM],
            amount="0.1",
            password=PASSWORD,
        )


async def test_a_lost_broadcast_answer_is_kept_and_its_replay_sends_the_same_transaction(
    ops: Ops,
) -> None:
    client = await ops.client()
    user = await ops.user(client)
    sender = ops.wallets[user][Chain.TRON]
    await ops.fund(sender, 4, "100")
    gateway = ops.gateways[Chain.TRON]
    gateway.lose_answers = 1
    with pytest.raises(BroadcastTimeout) as caught:
        await ops.send(client, user, 4, "10", request_id="pay-1")
    assert caught.value.status == 504
    record = await ops.db.sends.get(client.client_id, "pay-1")
    assert record is not None and record.state is SendState.SIGNED and record.tx_hash
    assert not record.is_locked(ops.clock.now())
    audit = [e for e in await ops.db.audit.newest() if e.action == "wallet.send"]
    assert (audit[0].outcome, audit[0].target) == ("504", record.tx_hash)
    # The replay broadcasts the stored bytes again; the network knows them: one transfer.
    receipt = await ops.send(client, user, 4, "10", request_id="pay-1")
    assert receipt.tx_hash == record.tx_hash
    assert gateway.broadcasts == [record.tx_hash, record.tx_hash]
    rows = await gateway.history(sender, CONTRACT_CATALOG.native_asset(Chain.TRON), 10)
    assert [r.hash for r in rows if r.type == "send"] == [record.tx_hash]
    assert await ops.balance(client, user, 4) == "90"
    finished = await ops.db.sends.get(client.client_id, "pay-1")
    assert finished is not None and finished.is_finished


async def test_a_broadcast_that_never_reached_the_network_is_sent_by_the_replay(
    ops: Ops,
) -> None:
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.SOLANA], 6, "1")
    gateway = ops.gateways[Chain.SOLANA]
    real = gateway.inner.broadcast

    async def unreachable(signed: SignedTransfer) -> str:
        raise ConnectionError("node unreachable")

    gateway.inner.broadcast = unreachable  # type: ignore[method-assign]
    with pytest.raises(BroadcastTimeout):
        await ops.send(client, user, 6, "0.5", request_id="pay-1")
    assert await ops.balance(client, user, 6) == "1"
    gateway.inner.broadcast = real  # type: ignore[method-assign]
    stored = await ops.db.sends.get(client.client_id, "pay-1")
    receipt = await ops.send(client, user, 6, "0.5", request_id="pay-1")
    assert stored is not None and receipt.tx_hash == stored.tx_hash
    assert await ops.balance(client, user, 6) == "0.5"


async def test_a_transfer_the_network_refused_finishes_with_that_error(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], 2, "1")
    gateway = ops.gateways[Chain.ETHEREUM]

    async def refuse(signed: SignedTransfer) -> str:
        raise TransferRejected()

    gateway.inner.broadcast = refuse  # type: ignore[method-assign]
    with pytest.raises(TransferRejected):
        await ops.send(client, user, 2, "0.1", request_id="pay-1")
    record = await ops.db.sends.get(client.client_id, "pay-1")
    assert record is not None and record.is_finished
    with pytest.raises(DomainError) as caught:
        await ops.send(client, user, 2, "0.1", request_id="pay-1")
    assert (caught.value.status, caught.value.message) == (502, TransferRejected().message)
    assert ops.broadcasts() == 1


async def test_a_body_refused_before_the_claim_leaves_the_id_free(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], 21, "10")
    with pytest.raises(InvalidRequest, match="more than 6 decimal places"):
        await ops.send(client, user, 21, "1.0000001", request_id="pay-1")
    with pytest.raises(InvalidRequest, match="Invalid ETHEREUM address"):
        await ops.send(client, user, 21, "1", request_id="pay-1", recipient="0x1234")
    assert await ops.db.sends.get(client.client_id, "pay-1") is None


async def test_insufficient_funds_release_the_id_for_the_same_request(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    address = ops.wallets[user][Chain.BITCOIN]
    with pytest.raises(InvalidRequest) as caught:
        await ops.send(client, user, 1, "0.5", request_id="pay-1")
    assert caught.value.message == (
        "Insufficient BTC balance: the wallet holds 0 BTC, the send needs 0.5 BTC"
    )
    await ops.fund(address, 1, "1")
    receipt = await ops.send(client, user, 1, "0.5", request_id="pay-1")
    assert receipt.fee_payer is FeePayer.USER and len(receipt.tx_hash) == 64


async def test_every_send_is_audited(ops: Ops) -> None:
    client = await ops.client()
    user = await ops.user(client)
    await ops.fund(ops.wallets[user][Chain.ETHEREUM], 2, "1")
    receipt = await ops.send(client, user, 2, "0.1", request_id="pay-1")
    with pytest.raises(DomainError):
        await ops.send(client, user, 2, "0.1", request_id="pay-2", password="wrong password")
    entries = [e for e in await ops.db.audit.newest() if e.action == "wallet.send"]
    assert [(e.request_id, e.outcome) for e in entries] == [("pay-2", "401"), ("pay-1", "ok")]
    assert entries[1].target == receipt.tx_hash and entries[1].user_id == user
