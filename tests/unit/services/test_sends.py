"""`SendService` on the core's fakes (walletcore.services.sends, docs/wallet-operations.md,
docs/idempotency.md): the X-Request-Id record (a replay never signs twice, another body is a
422, one in flight a 409, a refusal before signing releases the claim, a slow request that
lost its lease stores nothing), the wallet password per chain checked before anything is
signed, every broadcast outcome, and the audit entries written with the change."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest

from walletcore.domain.assets import Chain, FeePayer
from walletcore.domain.errors import (
    DomainError,
    InsufficientFunds,
    NodeUnavailable,
    TransferRejected,
)
from walletcore.domain.ids import new_id
from walletcore.domain.sends import ChainStatus, SendState
from walletcore.domain.wallet import WalletOwner
from walletcore.testing.chains import Outcome

from .conftest import (
    BTC,
    ETH,
    PASSWORD,
    POL,
    SOL,
    TRX,
    USDT,
    WRONG,
    Desk,
    DeskFactory,
    elsewhere,
    units,
    until,
)

IN_PROGRESS = "A request with this X-Request-Id is still in progress"
REUSED = "X-Request-Id was already used with a different request"


async def refused(call: Any) -> DomainError:
    """The domain error `call` (an awaitable) raised."""
    with pytest.raises(DomainError) as caught:
        await call
    return caught.value


# -- the X-Request-Id ------------------------------------------------------------------------
@pytest.mark.parametrize("request_id", [None, ""])
async def test_a_send_without_an_x_request_id_is_400_and_stores_nothing(
    funded: tuple[Desk, str], request_id: str | None
) -> None:
    desk, user = funded
    error = await refused(desk.send(user, ETH, "0.1", request_id=request_id))
    assert (error.status, error.message) == (
        400,
        "X-Request-Id is required on a send: it is the idempotency key",
    )
    assert desk.gateway(ETH).prepared == []
    assert await desk.db.sends.following(10) == []
    (entry,) = await desk.audit("wallet.send")
    assert entry.outcome == "400"


async def test_a_replay_answers_the_first_result_and_never_signs_or_sends_again(
    funded: tuple[Desk, str],
) -> None:
    desk, user = funded
    eth = desk.gateway(ETH)
    first = await desk.send(user, ETH, "0.1")
    unseals, assembled = desk.keystore.unseals, len(eth.assembled)
    again = await desk.send(user, ETH, "0.1")
    assert again == first
    assert (desk.keystore.unseals, len(eth.assembled)) == (unseals, assembled)
    assert eth.broadcasts == [first.tx_hash]
    assert desk.held(desk.address(user, ETH), ETH) == units(ETH, "0.9")  # moved once
    assert [(e.outcome, e.detail) for e in await desk.audit("wallet.send")] == [
        ("ok", "signed"),
        ("replay", None),
    ]


async def test_an_overlong_x_request_id_is_400_and_stores_nothing(
    funded: tuple[Desk, str],
) -> None:
    desk, user = funded
    error = await refused(desk.send(user, ETH, "0.1", request_id="x" * 256))
    assert (error.status, error.message) == (400, "X-Request-Id is longer than 255 characters")
    assert desk.gateway(ETH).prepared == []
    assert await desk.db.sends.get(desk.client.client_id, "x" * 256) is None


async def test_the_same_request_written_differently_is_a_replay(
    funded: tuple[Desk, str],
) -> None:
    """The fingerprint is of the normalised request: the recipient as its chain writes it,
    the amount in base units."""
    desk, user = funded
    to = elsewhere(Chain.ETHEREUM)
    first = await desk.send(user, ETH, "0.1", recipient=to)
    again = await desk.send(user, ETH, "0.100", recipient=to.upper())
    assert again == first
    assert desk.gateway(ETH).broadcasts == [first.tx_hash]


@pytest.mark.parametrize(
    "change",
    [
        {"amount": "0.2"},
        {"recipient": elsewhere(Chain.ETHEREUM, 2)},
        {"asset_id": USDT},
    ],
)
async def test_the_same_id_with_another_request_is_422_and_signs_nothing(
    funded: tuple[Desk, str], change: dict[str, Any]
) -> None:
    desk, user = funded
    first = await desk.send(user, ETH, "0.1")
    assembled = len(desk.gateway(ETH).assembled)
    body = {"asset_id": ETH, "amount": "0.1", **change}
    error = await refused(
        desk.send(user, body["asset_id"], body["amount"], recipient=body.get("recipient"))
    )
    assert (error.status, error.message) == (422, REUSED)
    assert len(desk.gateway(ETH).assembled) == assembled
    assert (await desk.record()).tx_hash == first.tx_hash


async def test_the_same_id_on_another_endpoint_or_for_another_user_is_422(
    funded: tuple[Desk, str],
) -> None:
    desk, user = funded
    platform = await desk.platform()
    desk.fund(platform[Chain.ETHEREUM], ETH, "1")
    other = await desk.user()
    desk.fund(desk.address(other, ETH), ETH, "1")
    await desk.send(user, ETH, "0.1", request_id="pay-1")
    by_platform = await refused(desk.platform_send(ETH, "0.1", request_id="pay-1"))
    by_other = await refused(desk.send(other, ETH, "0.1", request_id="pay-1"))
    assert (by_platform.status, by_other.status) == (422, 422)
    assert len(desk.gateway(ETH).broadcasts) == 1


async def test_request_ids_are_per_api_client(funded: tuple[Desk, str]) -> None:
    desk, user = funded
    first_client = desk.client
    mine = await desk.send(user, ETH, "0.1", request_id="pay-1")
    other = await desk.other_client()
    theirs_user = await desk.user(client=other)
    desk.fund(desk.address(theirs_user, ETH), ETH, "1")
    theirs = await desk.send(theirs_user, ETH, "0.1", request_id="pay-1", client=other)
    assert theirs.tx_hash != mine.tx_hash
    assert (await desk.record("pay-1", first_client)).tx_hash == mine.tx_hash
    assert (await desk.record("pay-1", other)).tx_hash == theirs.tx_hash


async def test_a_body_refused_before_the_claim_leaves_the_id_free(
    funded: tuple[Desk, str],
) -> None:
    desk, user = funded
    invalid = "Invalid ETHEREUM address: expected fake-ethereum-<40 hex digits>"
    to = elsewhere(Chain.ETHEREUM)
    for asset_id, amount, recipient, message in (
        (ETH, "0.1", "0x52908400098527886E0F7030069857D2E4169EE7", invalid),
        (ETH, "0.1", elsewhere(Chain.BITCOIN), invalid),  # another chain's address
        (ETH, "0.1234567890123456789", to, "amount has more than 18 decimal places"),
        (ETH, "0", to, "amount must be greater than zero"),
        (99, "0.1", to, "Unknown assetId"),  # not in the catalog
    ):
        error = await refused(desk.send(user, asset_id, amount, recipient=recipient))
        assert (error.status, error.message) == (400, message)
    without = await refused(desk.send(user, ETH, "0.1", password=""))
    assert (without.status, without.message) == (400, "password is required")
    assert await desk.db.sends.get(desk.client.client_id, "send-1") is None
    receipt = await desk.send(user, ETH, "0.2")  # another body under the same id: free
    assert receipt.status == "pending"


async def test_a_refusal_after_the_claim_releases_it_for_the_same_request(
    desk: Desk,
) -> None:
    user = await desk.user()
    address = desk.address(user, USDT)
    desk.fund(address, USDT, "3")
    short = await refused(desk.send(user, USDT, "10"))
    assert (short.status, short.message) == (
        400,
        "Insufficient USDT balance: the wallet holds 3 USDT, the send needs 10 USDT",
    )
    record = await desk.record()
    assert (record.state, record.locked_until) == (SendState.STARTED, None)  # released
    # another request under the id stays a 422: a well-formed request named it
    other = await refused(desk.send(user, USDT, "2"))
    assert other.status == 422
    # the same request, once the wallet is funded, goes through at once under the id
    desk.fund(address, USDT, "7")
    desk.fund(address, ETH, "1")
    receipt = await desk.send(user, USDT, "10")
    assert receipt.status == "pending"
    assert desk.gateway(USDT).broadcasts == [receipt.tx_hash]


@pytest.mark.parametrize(
    ("setting", "status", "message"),
    [
        ({"limited_assets": [USDT]}, 400, "Unknown assetId"),
        ({"client": {"enabled_assets": (ETH,)}}, 403, "Asset not enabled for this api client"),
        (
            {"unavailable_assets": {"send": [USDT]}},
            503,
            "USDT on ETHEREUM is not available on /send; contact the operator",
        ),
        ({"user": "another"}, 404, "User not found"),
    ],
    ids=["limited", "not enabled", "flagged", "no such user"],
)
async def test_state_refusals_come_after_the_claim_and_release_it(
    make_desk: DeskFactory, setting: dict[str, Any], status: int, message: str
) -> None:
    client_changes = setting.pop("client", None)
    another = setting.pop("user", None)
    desk = await make_desk(**setting)
    user = await desk.user()
    desk.fund(desk.address(user, USDT), USDT, "10")
    desk.fund(desk.address(user, ETH), ETH, "1")
    if client_changes:
        await desk.set_client(**client_changes)
    error = await refused(desk.send(new_id() if another else user, USDT, "1"))
    assert (error.status, error.message) == (status, message)
    record = await desk.record()
    assert (record.state, record.locked_until) == (SendState.STARTED, None)
    assert desk.gateway(USDT).prepared == []


async def test_one_id_sent_five_times_at_once_makes_one_record_and_one_transfer(
    funded: tuple[Desk, str],
) -> None:
    desk, user = funded
    eth = desk.gateway(ETH)
    gate = eth.holds["prepare"] = asyncio.Event()
    tasks = [asyncio.create_task(desk.send(user, ETH, "0.1")) for _ in range(5)]
    # the first holds the record at `prepare`; the others are refused meanwhile
    await until(lambda: sum(t.done() for t in tasks) == 4)
    gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    receipts = [r for r in results if not isinstance(r, BaseException)]
    errors = [r for r in results if isinstance(r, DomainError)]
    assert len(receipts) == 1
    assert [(e.status, e.message) for e in errors] == [(409, IN_PROGRESS)] * 4
    assert (len(eth.prepared), eth.broadcasts) == (1, [receipts[0].tx_hash])
    assert (await desk.record()).attempt == 1


async def test_a_request_that_outlived_its_lease_stores_and_broadcasts_nothing(
    funded: tuple[Desk, str],
) -> None:
    """The lease lapsed (60 s) while the first request was slow: a retry takes the record
    over (next attempt) and sends; the slow one's signature is never stored or broadcast,
    and its prepared transfer is given back."""
    desk, user = funded
    eth = desk.gateway(ETH)
    gate = eth.holds["prepare"] = asyncio.Event()
    slow = asyncio.create_task(desk.send(user, ETH, "0.1"))
    await until(lambda: bool(eth.calls) and eth.calls[-1][0] == "prepare")
    del eth.holds["prepare"]
    desk.clock.advance(61)
    taken_over = await desk.send(user, ETH, "0.1")
    gate.set()
    error = await refused(slow)
    assert (error.status, error.message) == (409, IN_PROGRESS)
    record = await desk.record()
    assert (record.attempt, record.tx_hash) == (2, taken_over.tx_hash)
    assert eth.broadcasts == [taken_over.tx_hash]
    assert len(eth.prepared) == 2
    sent_nonce = eth.body_of(taken_over.tx_hash)["nonce"]
    slow_one = [p for p in eth.prepared if json.loads(p.body)["nonce"] != sent_nonce]
    assert eth.released == slow_one  # the slow one's, never broadcast
    signed = [e for e in await desk.audit("wallet.send") if e.detail == "signed"]
    assert [e.target for e in signed] == [taken_over.tx_hash]


async def test_a_send_stuck_after_signing_is_resumed_with_the_same_bytes_once_its_lease_lapses(
    funded: tuple[Desk, str],
) -> None:
    """The first request signed and stored, then hangs at the broadcast: within its lease a
    retry is a 409; after it, the retry takes over and broadcasts the stored bytes (no
    password needed, nothing signed again); the first, waking up, is fenced off."""
    desk, user = funded
    eth = desk.gateway(ETH)
    gate = eth.holds["broadcast"] = asyncio.Event()
    first = asyncio.create_task(desk.send(user, ETH, "0.1"))
    await until(lambda: bool(eth.broadcasts))
    signed = await desk.record()
    del eth.holds["broadcast"]
    early = await refused(desk.send(user, ETH, "0.1"))
    assert (early.status, early.message) == (409, IN_PROGRESS)
    desk.clock.advance(61)
    resumed = await desk.send(user, ETH, "0.1", password=WRONG)
    assert resumed.tx_hash == signed.tx_hash
    gate.set()
    fenced = await refused(first)
    assert fenced.status == 409
    assert eth.broadcasts == [signed.tx_hash, signed.tx_hash]  # the same bytes, one transfer
    assert len(eth.prepared) == 1
    record = await desk.record()
    assert (record.state, record.attempt) == (SendState.FINISHED, 2)
    assert [(e.outcome, e.detail) for e in await desk.audit("wallet.send")] == [
        ("ok", "signed"),
        ("409", IN_PROGRESS),  # the early retry
        ("ok", "resumed"),
        ("409", IN_PROGRESS),  # the first request, fenced off
    ]


async def test_a_request_cancelled_during_its_broadcast_leaves_the_send_to_its_retry(
    funded: tuple[Desk, str],
) -> None:
    desk, user = funded
    eth = desk.gateway(ETH)
    eth.holds["broadcast"] = asyncio.Event()
    task = asyncio.create_task(desk.send(user, ETH, "0.1"))
    await until(lambda: bool(eth.broadcasts))
    task.cancel()  # the client went away
    with pytest.raises(asyncio.CancelledError):
        await task
    record = await desk.record()
    assert (record.state, record.locked_until) == (SendState.SIGNED, None)
    del eth.holds["broadcast"]
    again = await desk.send(user, ETH, "0.1")
    assert again.tx_hash == record.tx_hash and len(eth.prepared) == 1


# -- the wallet password ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("asset_id", "status", "message"),
    [
        (ETH, 401, "Invalid credentials"),
        (3, 401, "Invalid credentials"),  # BSC
        (POL, 401, "Invalid credentials"),
        (TRX, 401, "Invalid credentials"),
        (SOL, 401, "Invalid password"),
        (BTC, 400, "Invalid password"),
    ],
)
async def test_a_wrong_password_is_answered_per_chain_before_anything_is_signed(
    desk: Desk, asset_id: int, status: int, message: str
) -> None:
    user = await desk.user()
    desk.fund(desk.address(user, asset_id), asset_id, "5")
    gateway = desk.gateway(asset_id)
    unseals = desk.keystore.unseals
    error = await refused(desk.send(user, asset_id, "1", password=WRONG))
    assert (error.status, error.message) == (status, message)
    assert desk.keystore.unseals == unseals  # no key was handed out
    assert (gateway.assembled, gateway.broadcasts) == ([], [])
    assert gateway.released == gateway.prepared  # its nonce given back
    record = await desk.record()
    assert (record.state, record.locked_until, record.raw_tx) == (SendState.STARTED, None, None)
    # released: the same request with the right password goes through under the same id
    receipt = await desk.send(user, asset_id, "1")
    assert gateway.broadcasts == [receipt.tx_hash]


async def test_a_platform_wallet_that_cannot_be_opened_is_a_500_for_the_operator(
    desk: Desk,
) -> None:
    platform = await desk.platform()
    desk.fund(platform[Chain.ETHEREUM], ETH, "1")
    wallet = await desk.db.wallets.get(desk.client.client_id, WalletOwner.PLATFORM, None)
    await desk.db.wallets.update(replace(wallet, sealed=b"sealed under another master key"))
    error = await refused(desk.platform_send(ETH, "0.1"))
    assert (error.status, error.message) == (
        500,
        "The platform wallet cannot be opened; contact the operator",
    )
    assert desk.gateway(ETH).broadcasts == []


async def test_a_sponsored_send_whose_platform_wallet_cannot_be_opened_is_a_500(
    funded: tuple[Desk, str],
) -> None:
    desk, user = funded
    await desk.set_client(fee_payer=FeePayer.PLATFORM)
    platform = await desk.platform()
    desk.fund(platform[Chain.ETHEREUM], ETH, "1")
    wallet = await desk.db.wallets.get(desk.client.client_id, WalletOwner.PLATFORM, None)
    await desk.db.wallets.update(replace(wallet, sealed=b"sealed under another master key"))
    error = await refused(desk.send(user, USDT, "1"))  # the user's password is right
    assert desk.gateway(ETH).broadcasts == []
    assert (error.status, error.message) == (
        500,
        "The platform wallet cannot be opened; contact the operator",
    )


async def test_a_key_that_does_not_match_the_stored_address_signs_nothing(
    funded: tuple[Desk, str],
) -> None:
    """The signer's address must be the wallet's stored one: a mismatch would send from
    another address."""
    desk, user = funded
    wallet = await desk.db.wallets.get(desk.client.client_id, WalletOwner.USER, user)
    elsewhere_address = elsewhere(Chain.ETHEREUM, 9)
    addresses = {**wallet.addresses, Chain.ETHEREUM: elsewhere_address}
    await desk.db.wallets.update(replace(wallet, addresses=addresses))
    desk.fund(elsewhere_address, ETH, "1")
    error = await refused(desk.send(user, ETH, "0.1"))
    assert (error.status, error.message) == (
        500,
        "The wallet's key does not match its stored address",
    )
    eth = desk.gateway(ETH)
    assert (eth.assembled, eth.broadcasts, eth.released) == ([], [], eth.prepared)
    assert (await desk.record()).locked_until is None


# -- broadcast outcomes ---------------------------------------------------------------------
async def test_an_accepted_send_is_stored_before_it_is_broadcast_and_followed(
    funded: tuple[Desk, str],
) -> None:
    desk, user = funded
    eth = desk.gateway(ETH)
    gate = eth.holds["broadcast"] = asyncio.Event()
    task = asyncio.create_task(desk.send(user, ETH, "0.1"))
    await until(lambda: bool(eth.calls) and eth.calls[-1][0] == "broadcast")
    at_broadcast = await desk.record()  # committed before the broadcast
    gate.set()
    receipt = await task
    assert (at_broadcast.state, at_broadcast.tx_hash) == (SendState.SIGNED, receipt.tx_hash)
    record = await desk.record()
    assert (record.state, record.chain_status) == (SendState.FINISHED, ChainStatus.PENDING)
    assert record.result == receipt.as_result()
    assert receipt.as_result() == {
        "txHash": receipt.tx_hash,
        "status": "pending",
        "fee": "0.00042",
        "feePayer": "USER",
    }


async def test_a_lost_broadcast_answer_is_504_and_the_retry_sends_the_same_bytes(
    funded: tuple[Desk, str],
) -> None:
    """The outcome is unknown: the record stays signed and released; the retry (even with
    a wrong password: nothing is signed again) re-broadcasts the stored transaction."""
    desk, user = funded
    eth = desk.gateway(ETH)
    eth.outcomes.append(Outcome.ANSWER_LOST)
    error = await refused(desk.send(user, ETH, "0.1"))
    assert error.status == 504
    assert error.message.startswith("Broadcast outcome unknown; retry with the same X-Request-Id")
    record = await desk.record()
    assert (record.state, record.locked_until) == (SendState.SIGNED, None)
    unseals, assembled = desk.keystore.unseals, len(eth.assembled)
    again = await desk.send(user, ETH, "0.1", password=WRONG)
    assert again.tx_hash == record.tx_hash
    assert eth.broadcasts == [record.tx_hash, record.tx_hash]
    assert (desk.keystore.unseals, len(eth.assembled)) == (unseals, assembled)
    assert len(eth.prepared) == 1
    assert desk.held(desk.address(user, ETH), ETH) == units(ETH, "0.9")  # moved once
    assert [(e.outcome, e.detail) for e in await desk.audit("wallet.send")] == [
        ("ok", "signed"),
        ("504", error.message),
        ("ok", "resumed"),
    ]


@pytest.mark.parametrize(
    "failure",
    [NodeUnavailable(), RuntimeError("connection reset")],
    ids=["node unreachable", "unexpected error"],
)
async def test_a_broadcast_that_may_not_have_been_sent_keeps_the_record_for_the_retry(
    funded: tuple[Desk, str], failure: Exception
) -> None:
    desk, user = funded
    eth = desk.gateway(ETH)
    eth.outcomes.append(failure)
    error = await refused(desk.send(user, ETH, "0.1"))
    assert error.status == (503 if isinstance(failure, DomainError) else 504)
    signed = await desk.record()
    assert (signed.state, signed.locked_until) == (SendState.SIGNED, None)
    again = await desk.send(user, ETH, "0.1")
    assert again.tx_hash == signed.tx_hash
    assert eth.broadcasts == [signed.tx_hash, signed.tx_hash]
    assert len(eth.prepared) == 1  # built and signed once


@pytest.mark.parametrize(
    "refusal",
    [
        TransferRejected("Transfer rejected by the network: bad signature; nothing was sent"),
        InsufficientFunds("Insufficient ETH at broadcast; nothing was sent"),
    ],
    ids=["rejected", "funds spent meanwhile"],
)
async def test_a_transfer_the_network_refused_finishes_with_that_error(
    funded: tuple[Desk, str], refusal: DomainError
) -> None:
    desk, user = funded
    eth = desk.gateway(ETH)
    eth.outcomes.append(refusal)
    error = await refused(desk.send(user, ETH, "0.1"))
    assert (error.status, error.message) == (refusal.status, refusal.message)
    record = await desk.record()
    assert record.state is SendState.FINISHED and record.chain_status is None  # not followed
    again = await refused(desk.send(user, ETH, "0.1"))
    assert (again.status, again.message) == (refusal.status, refusal.message)
    assert len(eth.broadcasts) == 1 and len(eth.prepared) == 1
    assert desk.held(desk.address(user, ETH), ETH) == units(ETH, "1")
    entries = [(e.outcome, e.target, e.detail) for e in await desk.audit("wallet.send")]
    status = str(refusal.status)
    assert entries == [
        ("ok", record.tx_hash, "signed"),
        (status, record.tx_hash, refusal.message),  # carried by the finish: no duplicate
        (status, record.tx_hash, refusal.message),  # the replay's own
    ]


# -- the audit ------------------------------------------------------------------------------
async def test_every_send_is_audited_with_its_change_and_never_a_secret(
    funded: tuple[Desk, str],
) -> None:
    desk, user = funded
    platform = await desk.platform()
    desk.fund(platform[Chain.ETHEREUM], ETH, "1")
    await refused(desk.send(user, ETH, "0.1", password=WRONG, request_id="pay-1"))
    sent = await desk.send(user, ETH, "0.1", request_id="pay-1")
    by_platform = await desk.platform_send(ETH, "0.1", request_id="pp-1")
    entries = await desk.audit()
    sends = [e for e in entries if e.action == "wallet.send"]
    assert [(e.outcome, e.user_id, e.target, e.request_id) for e in sends] == [
        ("401", user, None, "pay-1"),
        ("ok", user, sent.tx_hash, "pay-1"),
    ]
    assert all(e.client_id == desk.client.client_id for e in sends)
    (platform_entry,) = [e for e in entries if e.action == "platform.send"]
    assert (platform_entry.outcome, platform_entry.user_id, platform_entry.target) == (
        "ok",
        None,
        by_platform.tx_hash,
    )
    text = repr(entries)
    for secret in (PASSWORD, WRONG, "fake fake"):  # passwords, the fake seed phrase
        assert secret not in text
    # the stored record keeps no password either
    for request_id in ("pay-1",):
        record = await desk.record(request_id)
        assert PASSWORD.encode() not in (record.raw_tx or b"")
        assert PASSWORD not in repr(record)


async def test_the_receipt_fee_is_a_decimal_of_the_native_coin_on_every_chain(
    desk: Desk,
) -> None:
    user = await desk.user()
    expected = {ETH: "0.00042", TRX: "0.268", SOL: "0.000005", BTC: "0.0000141"}
    for asset_id, fee in expected.items():
        desk.fund(desk.address(user, asset_id), asset_id, "5")
        receipt = await desk.send(user, asset_id, "1", request_id=f"fee-{asset_id}")
        assert (receipt.fee, receipt.status, receipt.fee_payer.value) == (fee, "pending", "USER")
