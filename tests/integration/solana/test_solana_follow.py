"""The Solana side of the transfer lifecycle (`TransferFollower`), on LiteSVM in process and
through the JSON-RPC engine over HTTP to the loopback node (the `chain` fixture runs each
test on both): a dropped send reads `missing` and its same bytes land once; an expired one
reads `expired` (only once the finalized chain is past its last valid block height) and
is re-signed, the old bytes refused; the compute-unit limit and price, in the quote and
paid; commitment (`confirmed` is not `finalized`)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator

import pytest
from pydantic import ValidationError
from sol_support import RpcSolanaGateway, Wallet, build, new_wallet
from solders.compute_budget import ID as COMPUTE_BUDGET_ID
from solders.instruction import CompiledInstruction
from solders.message import Message
from solders.signature import Signature
from solders.transaction import Transaction

from walletcore.domain.assets import Asset
from walletcore.domain.errors import NodeUnavailable, TransferRejected
from walletcore.ports import (
    FeeQuote,
    Sighting,
    SignedTransfer,
    Transfer,
    TransferFollower,
    UnsignedTransfer,
)
from walletcore.secretfiles import ConfigurationError
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.solana.devnet import DevnetSolanaGateway
from walletcore_chains.solana.gateway import (
    CU_PRICE_MAX,
    SolanaGateway,
    compute_unit_limit,
    cu_price,
    priority_fee,
)
from walletcore_chains.solana.node import (
    BLOCKHASH_VALIDITY,
    LAMPORTS_PER_SIGNATURE,
    LiteSvmNode,
    SendError,
)
from walletcore_chains.solana.plugin import SolanaSettings, gateway_options

Gateway = DevnetSolanaGateway | RpcSolanaGateway
SOL, USDT = CONTRACT_CATALOG.asset_by_id(6), CONTRACT_CATALOG.asset_by_id(61)
RENT = 2_039_280  # a 165-byte token account, rent-exempt
LIMIT_200 = b"\x02" + (200).to_bytes(4, "little")  # SetComputeUnitLimit(200)


def runtime(chain: Gateway) -> LiteSvmNode:
    """The LiteSVM node under either engine."""
    return chain.devnet.node if isinstance(chain, RpcSolanaGateway) else chain.node


@pytest.fixture(autouse=True)
def clean_node(devnet: DevnetSolanaGateway) -> Iterator[None]:
    """Each test starts and ends on a node with no fee market, instant finality and no
    lost sends (the runtime is shared by the module)."""
    node = devnet.node
    yield
    node.priority_fees.clear()
    node.account_priority_fees.clear()
    node.finality_slots = 0
    node.lose_sends = 0


def tx_of(signed: SignedTransfer) -> Transaction:
    return Transaction.from_bytes(base64.b64decode(json.loads(signed.raw)["tx"]))


def last_valid_of(signed: SignedTransfer) -> int:
    return int(json.loads(signed.raw)["lastValid"])


async def signed_by(chain: Gateway, unsigned: UnsignedTransfer, *wallets: Wallet) -> SignedTransfer:
    signatures = {w.address: w.key.sign(unsigned.payload_for(w.address)) for w in wallets}
    return chain.assemble(unsigned, signatures)


async def lost_in_flight(chain: Gateway, signed: SignedTransfer) -> asyncio.Task[str]:
    """Broadcast `signed` with the node losing it: the node answers its signature and
    never lands it; `broadcast` keeps waiting for it (a task)."""
    node = runtime(chain)
    node.lose_sends = 1
    waiting = asyncio.create_task(chain.broadcast(signed))
    for _ in range(200):
        if signed.tx_hash in node.lost:
            return waiting
        await asyncio.sleep(0.01)
    raise AssertionError("the send never reached the node")


# -- the port ---------------------------------------------------------------------------
async def test_the_gateway_follows_transfers_by_re_signing(chain: Gateway) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    assert isinstance(chain, TransferFollower)
    assert chain.resigns is True and chain.stuck_after_seconds == 60.0
    quote = await chain.fee(alice.address, bob.address, SOL, 10**6)
    unsigned = await chain.prepare(
        Transfer(SOL, alice.address, bob.address, 10**6, alice.address), quote
    )
    assert list(chain.replacements(unsigned, 10**9)) == []  # re-signed, never a ladder


async def test_a_node_that_cannot_answer_raises_never_missing(
    devnet: DevnetSolanaGateway,
) -> None:
    alice, bob = new_wallet(), new_wallet()
    await devnet.fund(alice.address, SOL, 10**9)
    signed = await build(devnet, SOL, alice, bob.address, 10**6)
    down = RpcSolanaGateway(devnet, "http://127.0.0.1:1", timeout=2.0)
    with pytest.raises(NodeUnavailable):
        await down.sighting(alice.address, SOL, signed)
    await down.aclose()
    assert await devnet.sighting(alice.address, SOL, signed) is Sighting.MISSING


# -- missing, expired, re-signed ---------------------------------------------------------
async def test_a_dropped_send_reads_missing_and_its_same_bytes_land_once(
    chain: Gateway,
) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    signed = await build(chain, SOL, alice, bob.address, 10**6)
    first = await lost_in_flight(chain, signed)

    assert await chain.sighting(alice.address, SOL, signed) is Sighting.MISSING
    assert await chain.balance(bob.address, SOL) == 0

    assert await chain.broadcast(signed) == signed.tx_hash  # the same bytes again: they land
    assert await asyncio.wait_for(first, 5) == signed.tx_hash  # the first wait sees them too
    assert await chain.sighting(alice.address, SOL, signed) is Sighting.SUCCESS
    assert await chain.broadcast(signed) == signed.tx_hash  # and once more: nothing new
    assert await chain.balance(bob.address, SOL) == 10**6
    quote = await chain.fee(alice.address, bob.address, SOL, 10**6)
    assert await chain.balance(alice.address, SOL) == 10**9 - 10**6 - quote.native_units


async def test_an_expired_send_is_re_signed_once_and_its_old_bytes_are_refused(
    chain: Gateway,
) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    node = runtime(chain)
    node.finality_slots = 10
    transfer = Transfer(SOL, alice.address, bob.address, 10**6, alice.address)
    old = await signed_by(
        chain, await chain.prepare(transfer, await chain.fee(*_route(transfer))), alice
    )
    waiting = await lost_in_flight(chain, old)
    last_valid = last_valid_of(old)
    blockhash = tx_of(old).message.recent_blockhash
    assert await chain.sighting(alice.address, SOL, old) is Sighting.MISSING

    # past its last valid height, but the finalized chain is not yet: it could still show
    # up in a block below it, so it is not yet provably dead
    node.svm.warp_to_slot(last_valid + 1)
    with pytest.raises(TransferRejected, match="expired"):
        await asyncio.wait_for(waiting, 5)  # the first broadcast gives up: nothing was sent
    assert not await chain.node.blockhash_valid(blockhash, "processed")
    assert await chain.sighting(alice.address, SOL, old) is Sighting.MISSING
    node.svm.warp_to_slot(last_valid + 1 + node.finality_slots)
    assert await chain.sighting(alice.address, SOL, old) is Sighting.EXPIRED

    # re-signed: a fresh quote, a fresh blockhash, a new signature that lands
    quote = await chain.fee(*_route(transfer))
    unsigned = await chain.prepare(transfer, quote)
    new = await signed_by(chain, unsigned, alice)
    assert new.tx_hash != old.tx_hash
    assert tx_of(new).message.recent_blockhash != blockhash
    assert await chain.node.blockhash_valid(tx_of(new).message.recent_blockhash, "processed")
    assert await chain.broadcast(new) == new.tx_hash
    node.svm.warp_to_slot(node.height_now() + node.finality_slots)
    assert await chain.sighting(alice.address, SOL, new) is Sighting.SUCCESS

    # the old bytes can never land: the gateway refuses them, and so does the node itself
    with pytest.raises(TransferRejected, match="expired"):
        await chain.broadcast(old)
    with pytest.raises(SendError, match="BlockhashNotFound"):
        await chain.node.send(tx_of(old))
    assert await chain.sighting(alice.address, SOL, old) is Sighting.EXPIRED
    assert await chain.balance(bob.address, SOL) == 10**6  # one transfer, never two
    assert await chain.balance(alice.address, SOL) == 10**9 - 10**6 - quote.native_units


async def test_a_transfer_that_landed_and_failed_reads_failed_at_the_commitment(
    chain: Gateway,
) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**7)
    node = runtime(chain)
    node.finality_slots = 5
    quote = await chain.fee(alice.address, bob.address, SOL, 10**9)
    unsigned = await chain.prepare(
        Transfer(SOL, alice.address, bob.address, 10**9, alice.address), quote
    )
    signed = await signed_by(chain, unsigned, alice)  # more than alice holds
    # past a preflight, as when the state changes before its block: it lands, and fails
    node.execute(tx_of(signed), preflight=False)

    assert await chain.sighting(alice.address, SOL, signed) is Sighting.PENDING
    node.svm.warp_to_slot(node.height_now() + 5)
    assert await chain.sighting(alice.address, SOL, signed) is Sighting.FAILED
    row = await chain.lookup(alice.address, SOL, signed.tx_hash)
    assert (row.status, row.fee_units) == ("failed", quote.native_units)
    assert await chain.balance(alice.address, SOL) == 10**7 - quote.native_units  # the fee
    assert await chain.balance(bob.address, SOL) == 0


def _route(transfer: Transfer) -> tuple[str, str, Asset, int]:
    return transfer.sender, transfer.recipient, transfer.asset, transfer.amount_units


# -- priority fees ----------------------------------------------------------------------
def budget_of(signed: SignedTransfer) -> tuple[int, int]:
    """(compute-unit limit, compute-unit price) of the signed transaction's instructions."""
    message: Message = tx_of(signed).message
    keys = message.account_keys
    budget = [
        bytes(ix.data)
        for ix in message.instructions
        if keys[ix.program_id_index] == COMPUTE_BUDGET_ID
    ]
    assert [data[0] for data in budget] == [2, 3]  # SetComputeUnitLimit, SetComputeUnitPrice
    return int.from_bytes(budget[0][1:5], "little"), int.from_bytes(budget[1][1:9], "little")


async def test_the_compute_unit_price_follows_the_recent_fees_of_the_written_accounts(
    chain: Gateway,
) -> None:
    alice, bob, elsewhere = new_wallet(), new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    node = runtime(chain)
    now = node.height_now()
    for back, fee in enumerate((100, 200, 300)):
        node.set_priority_fee(fee, slot=now - back)  # every transaction of these slots
    node.set_priority_fee(2_000, slot=now - 3, account=bob.address)  # writing to bob
    node.set_priority_fee(3_000, slot=now - 4, account=bob.address)
    node.set_priority_fee(10**6, slot=now - 5, account=elsewhere.address)  # not ours
    # non-zero fees of the accounts written: 100, 200, 300, 2000, 3000 -> 75th: 2,000
    limit = compute_unit_limit(native=True)
    quote = await chain.fee(alice.address, bob.address, SOL, 10**8)
    assert quote.native_units == LAMPORTS_PER_SIGNATURE + priority_fee(limit, 2_000)
    assert priority_fee(limit, 2_000) == -(-limit * 2_000 // 10**6) > 0

    unsigned = await chain.prepare(
        Transfer(SOL, alice.address, bob.address, 10**8, alice.address), quote
    )
    signed = await signed_by(chain, unsigned, alice)
    assert budget_of(signed) == (limit, 2_000)
    assert await chain.broadcast(signed) == signed.tx_hash

    # the sender pays exactly the quote, and the row says so
    assert await chain.balance(alice.address, SOL) == 10**9 - 10**8 - quote.native_units
    row = await chain.lookup(alice.address, SOL, signed.tx_hash)
    assert row.fee_units == quote.native_units
    executed = await chain.node.executed(signed.tx_hash)
    assert executed is not None and 0 < executed.compute_units * 1.3 < limit


async def test_spl_transfers_set_limits_their_instructions_fit_and_pay_their_quote(
    chain: Gateway,
) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    await chain.fund(alice.address, USDT, 10**7)
    node = runtime(chain)
    node.set_priority_fee(50_000)
    for units, creates in ((4_000_000, True), (1_000_000, False)):
        before = await chain.balance(alice.address, SOL)
        limit = compute_unit_limit(native=False, creates_token_account=creates)
        quote = await chain.fee(alice.address, bob.address, USDT, units)
        rent = RENT if creates else 0
        assert quote.native_units == LAMPORTS_PER_SIGNATURE + rent + priority_fee(limit, 50_000)
        signed = await build(chain, USDT, alice, bob.address, units)
        assert budget_of(signed) == (limit, 50_000)
        await chain.broadcast(signed)
        assert await chain.balance(alice.address, SOL) == before - quote.native_units
        executed = await chain.node.executed(signed.tx_hash)
        assert executed is not None and 0 < executed.compute_units * 1.3 < limit
    assert await chain.balance(bob.address, USDT) == 5_000_000
    assert compute_unit_limit(False, True) > compute_unit_limit(False) > compute_unit_limit(True)


async def test_the_limit_is_enforced_a_bare_transfers_200_units_would_fail(
    devnet: DevnetSolanaGateway,
) -> None:
    """The runtime holds a transaction to its limit: the same message with a limit of 200
    units (a bare System transfer's cost plus a little) fails; with the gateway's, it runs."""
    alice, bob = new_wallet(), new_wallet()
    await devnet.fund(alice.address, SOL, 10**9)
    quote = await devnet.fee(alice.address, bob.address, SOL, 10**6)
    unsigned = await devnet.prepare(
        Transfer(SOL, alice.address, bob.address, 10**6, alice.address), quote
    )
    message = Message.from_bytes(unsigned.payload)
    first, *rest = message.instructions
    header = message.header
    tight = Message.new_with_compiled_instructions(
        header.num_required_signatures,
        header.num_readonly_signed_accounts,
        header.num_readonly_unsigned_accounts,
        message.account_keys,
        message.recent_blockhash,
        [CompiledInstruction(first.program_id_index, LIMIT_200, b""), *rest],
    )
    for candidate, fits in ((tight, False), (message, True)):
        signature = Signature.from_bytes(alice.key.sign(bytes(candidate)))
        err, _, units = devnet.node.simulate(Transaction.populate(candidate, [signature]))
        assert (err is None) is fits, err
        assert units > 200 if fits else units == 200  # ran out at its limit
    signed = await signed_by(devnet, unsigned, alice)
    assert budget_of(signed)[0] == compute_unit_limit(native=True)


async def test_a_quote_is_binding_prepare_never_pays_more_and_takes_a_lower_price(
    chain: Gateway,
) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    node = runtime(chain)
    limit = compute_unit_limit(native=True)
    transfer = Transfer(SOL, alice.address, bob.address, 10**6, alice.address)

    cheap = await chain.fee(*_route(transfer))  # no fees paid lately: no priority
    assert cheap.native_units == LAMPORTS_PER_SIGNATURE
    node.set_priority_fee(400_000)  # then the market rises: the quote still binds
    signed = await signed_by(chain, await chain.prepare(transfer, cheap), alice)
    assert budget_of(signed) == (limit, 0)
    before = await chain.balance(alice.address, SOL)
    await chain.broadcast(signed)
    assert before - await chain.balance(alice.address, SOL) == 10**6 + cheap.native_units

    dear = await chain.fee(*_route(transfer))
    assert dear.native_units == LAMPORTS_PER_SIGNATURE + priority_fee(limit, 400_000)
    node.priority_fees.clear()
    node.set_priority_fee(1_000)  # the market falls before it is built: the lower price
    signed = await signed_by(chain, await chain.prepare(transfer, dear), alice)
    assert budget_of(signed) == (limit, 1_000)
    before = await chain.balance(alice.address, SOL)
    await chain.broadcast(signed)
    paid = before - await chain.balance(alice.address, SOL) - 10**6
    assert paid == LAMPORTS_PER_SIGNATURE + priority_fee(limit, 1_000) < dear.native_units

    # a quote covering part of the price now: the highest price it covers
    partial = FeeQuote(LAMPORTS_PER_SIGNATURE + 3)
    node.set_priority_fee(10**6)
    signed = await signed_by(chain, await chain.prepare(transfer, partial), alice)
    price = budget_of(signed)[1]
    assert price == 3 * 10**6 // limit and priority_fee(limit, price) <= 3


def test_the_compute_unit_price_is_the_75th_percentile_within_its_floor_and_cap() -> None:
    assert cu_price([], 0, CU_PRICE_MAX) == 0
    assert cu_price([0, 0, 0], 7, CU_PRICE_MAX) == 7  # the floor
    assert cu_price([0, 10, 20, 30, 40, 0], 0, CU_PRICE_MAX) == 30  # zeros do not count
    assert cu_price([5], 0, CU_PRICE_MAX) == 5
    assert cu_price([10**9, 10**9], 0, 250_000) == 250_000  # the cap
    assert priority_fee(16_300, 1) == 1  # rounded up, as the runtime charges
    assert priority_fee(16_300, 0) == 0


async def test_the_cap_and_floor_settings_reach_the_quote(devnet: DevnetSolanaGateway) -> None:
    alice, bob = new_wallet(), new_wallet()
    capped = SolanaGateway(devnet.node, devnet._validator, devnet._mints, cu_price_max=5_000)
    floored = SolanaGateway(devnet.node, devnet._validator, devnet._mints, cu_price_min=9_000)
    limit = compute_unit_limit(native=True)
    devnet.node.set_priority_fee(8_000)
    assert (await capped.fee(alice.address, bob.address, SOL, 1)).native_units == (
        LAMPORTS_PER_SIGNATURE + priority_fee(limit, 5_000)
    )
    assert (await floored.fee(alice.address, bob.address, SOL, 1)).native_units == (
        LAMPORTS_PER_SIGNATURE + priority_fee(limit, 9_000)
    )


# -- commitment -------------------------------------------------------------------------
async def test_confirmed_but_not_finalized_is_pending_under_finalized_success_under_confirmed(
    chain: Gateway,
) -> None:
    alice, bob = new_wallet(), new_wallet()
    await chain.fund(alice.address, SOL, 10**9)
    node = runtime(chain)
    node.finality_slots = 32
    signed = await build(chain, SOL, alice, bob.address, 10**6)
    assert await chain.broadcast(signed) == signed.tx_hash  # landed: confirmed

    assert chain.commitment == "finalized"  # the default
    assert await chain.sighting(alice.address, SOL, signed) is Sighting.PENDING
    assert (await chain.lookup(alice.address, SOL, signed.tx_hash)).status == "pending"
    rows = await chain.history(bob.address, SOL, 10)
    assert [(r.hash, r.status) for r in rows] == [(signed.tx_hash, "pending")]

    chain.commitment = "confirmed"
    try:
        assert await chain.sighting(alice.address, SOL, signed) is Sighting.SUCCESS
        assert (await chain.lookup(alice.address, SOL, signed.tx_hash)).status == "success"
        assert [r.status for r in await chain.history(bob.address, SOL, 10)] == ["success"]
    finally:
        chain.commitment = "finalized"

    node.svm.warp_to_slot(node.height_now() + 32)  # 32 slots deeper: finalized
    assert await chain.sighting(alice.address, SOL, signed) is Sighting.SUCCESS
    assert (await chain.lookup(alice.address, SOL, signed.tx_hash)).status == "success"
    assert [r.status for r in await chain.history(bob.address, SOL, 10)] == ["success"]


def test_the_solana_settings_of_the_lifecycle(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("COMMITMENT", "CU_PRICE_MIN", "CU_PRICE_MAX", "STUCK_AFTER_SECONDS"):
        monkeypatch.delenv(f"WALLETCORE_SOLANA_{name}", raising=False)
    assert gateway_options(SolanaSettings()) == {
        "commitment": "finalized",
        "cu_price_min": 0,
        "cu_price_max": CU_PRICE_MAX,
        "stuck_after_seconds": 60.0,
    }
    monkeypatch.setenv("WALLETCORE_SOLANA_COMMITMENT", "confirmed")
    monkeypatch.setenv("WALLETCORE_SOLANA_CU_PRICE_MIN", "10")
    monkeypatch.setenv("WALLETCORE_SOLANA_CU_PRICE_MAX", "20000")
    monkeypatch.setenv("WALLETCORE_SOLANA_STUCK_AFTER_SECONDS", "90")
    options = gateway_options(SolanaSettings())
    assert options == {
        "commitment": "confirmed",
        "cu_price_min": 10,
        "cu_price_max": 20_000,
        "stuck_after_seconds": 90.0,
    }
    from walletcore_chains.addresses import validate_address

    gateway = DevnetSolanaGateway(validate_address, **options)
    assert (gateway.commitment, gateway.cu_price_max, gateway.stuck_after_seconds) == (
        "confirmed",
        20_000,
        90.0,
    )
    monkeypatch.setenv("WALLETCORE_SOLANA_COMMITMENT", "processed")
    with pytest.raises(ValidationError):
        SolanaSettings()
    monkeypatch.setenv("WALLETCORE_SOLANA_COMMITMENT", "finalized")
    monkeypatch.setenv("WALLETCORE_SOLANA_CU_PRICE_MIN", "30000")
    with pytest.raises(ConfigurationError, match="WALLETCORE_SOLANA_CU_PRICE_MIN is above"):
        gateway_options(SolanaSettings())


def test_blockhash_validity_is_150_blocks_from_its_block() -> None:
    node = LiteSvmNode()
    first, last_valid = node.latest_blockhash_now()
    assert last_valid == node.height_now() + BLOCKHASH_VALIDITY
    assert node.latest_blockhash_now() == (first, last_valid)  # the same block, the same
    node.svm.warp_to_slot(node.height_now() + 1)
    second, _ = node.latest_blockhash_now()
    assert second != first  # a new block, a new blockhash; the first still valid
    assert node.blockhash_valid_now(first) and node.blockhash_valid_now(second)
    node.svm.warp_to_slot(last_valid)
    assert node.blockhash_valid_now(first)
    node.svm.warp_to_slot(last_valid + 1)
    assert not node.blockhash_valid_now(first) and node.blockhash_valid_now(second)
    node.finality_slots = 5  # the finalized bank is 5 blocks behind: still valid there
    assert node.blockhash_valid_now(first, "finalized")
