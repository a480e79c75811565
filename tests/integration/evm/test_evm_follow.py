"""The EVM transfer lifecycle (`walletcore.ports.TransferFollower`) on anvil, a real EVM node
with a mempool, mining only when told (`--no-mining` + `anvil_mine`): what `sighting` reads
of a transfer in the pool, mined below and at depth, reverted, dropped, replaced; the
pre-signed ladder of `replacements` broadcast rung by rung through the gateway's own
`broadcast` (bumps, the cancel, a legacy chain, a USDT transfer, a sponsored one); a
dropped nonce refilled so the sends queued behind it land with no gap.

The ladder is signed as the core signs it: each rung's `payload_for(signer)` for every
signer of its `transfer.signers`, with the real `ChainKey` signer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import replace
from typing import Any

import pytest
from eth_account import Account
from evm_support import Wallet, new_wallet

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.errors import InsufficientGas, NodeUnavailable, TransferRejected
from walletcore.ports import (
    FeeQuote,
    Replacement,
    Sighting,
    SignedTransfer,
    Transfer,
    TransferFollower,
    UnsignedTransfer,
)
from walletcore.testing import CONTRACT_CATALOG
from walletcore_chains.addresses import validate_address
from walletcore_chains.evm import codec, follow
from walletcore_chains.evm.config import evm_config
from walletcore_chains.evm.fees import NATIVE_GAS
from walletcore_chains.evm.gateway import EvmGateway
from walletcore_chains.evm.plugin import rpc_web3
from walletcore_chains.testing.anvil import AnvilNode, find_anvil

ETH, USDT = CONTRACT_CATALOG.asset_by_id(2), CONTRACT_CATALOG.asset_by_id(21)
GWEI = 10**9
CONFIRMATIONS = 3
needs_anvil = pytest.mark.skipif(
    find_anvil() is None, reason="no anvil: run `python3 dev.py test` (it installs it)"
)


# -- fixtures and helpers ---------------------------------------------------------------
@pytest.fixture
def node() -> Iterator[AnvilNode]:
    """A fresh anvil per test (0.1 s to start): mining only when told."""
    with AnvilNode(Chain.ETHEREUM, mining=False) as started:
        yield started


def gateway_on(node: AnvilNode, **config: Any) -> EvmGateway:
    chosen = replace(
        evm_config(Chain.ETHEREUM, "mainnet", node.tokens), confirmations=CONFIRMATIONS, **config
    )
    w3 = rpc_web3(node.url, 5.0, Chain.ETHEREUM)
    return EvmGateway(chosen, w3, validate_address, receipt_timeout=20.0)


@pytest.fixture
async def gateway(node: AnvilNode) -> AsyncIterator[EvmGateway]:
    made = gateway_on(node)
    yield made
    await made.aclose()


def funded(node: AnvilNode, wei: int = 10**18) -> Wallet:
    wallet = new_wallet()
    node.fund(wallet.address, ETH, wei)  # anvil_setBalance: no block
    return wallet


def sign_as_core(
    gateway: EvmGateway, unsigned: UnsignedTransfer, *wallets: Wallet
) -> SignedTransfer:
    """As the core signs: `payload_for(signer)` for each of `transfer.signers`."""
    keys = {w.address: w for w in wallets}
    signatures = {
        signer: keys[signer].key.sign(unsigned.payload_for(signer))
        for signer in unsigned.transfer.signers
    }
    return gateway.assemble(unsigned, signatures)


async def prepared(
    gateway: EvmGateway,
    asset: Asset,
    sender: Wallet,
    recipient: str,
    units: int,
    sponsor: Wallet | None = None,
) -> tuple[UnsignedTransfer, SignedTransfer]:
    payer = sponsor.address if sponsor else sender.address
    quote = await gateway.fee(sender.address, recipient, asset, units, fee_payer=payer)
    unsigned = await gateway.prepare(
        Transfer(asset, sender.address, recipient, units, fee_payer=payer), quote
    )
    return unsigned, sign_as_core(gateway, unsigned, sender, *([sponsor] if sponsor else []))


def signed_ladder(
    gateway: EvmGateway, unsigned: UnsignedTransfer, cap: int, *wallets: Wallet
) -> list[tuple[Replacement, SignedTransfer]]:
    """The ladder under `cap`, signed in the same go as the transfer."""
    return [
        (rung, sign_as_core(gateway, rung.unsigned, *wallets))
        for rung in gateway.replacements(unsigned, cap)
    ]


async def seen(gateway: EvmGateway, sender: Wallet, *signed: SignedTransfer) -> list[Sighting]:
    return [await gateway.sighting(sender.address, ETH, one) for one in signed]


def on_chain(node: AnvilNode, signed: SignedTransfer) -> dict[str, Any]:
    found = node.transaction(signed.tx_hash)
    assert found is not None, "the node does not know the transaction"
    return found


def check_ladder(rungs: Sequence[Replacement], original: UnsignedTransfer, cap: int) -> None:
    """Rising fees, each rung >= x1.25 on max fee and tip over the one before, all <= cap,
    bumps first (same nonce, recipient, value, data, gas), one cancel last."""
    [main] = codec.decode_body(original.body)[-1:]
    kinds = [r.kind for r in rungs]
    assert kinds[-1] == "cancel" and set(kinds[:-1]) == {"bump"} and len(kinds) >= 2
    before = main
    for rung in rungs:
        [tx] = codec.decode_body(rung.unsigned.body)
        assert tx.replaces and tx.nonce == main.nonce and tx.sender == main.sender
        assert rung.fee_units == int(tx.fields["gas"]) * tx.max_fee <= cap
        assert rung.unsigned.fee == FeeQuote(rung.fee_units)
        assert 4 * tx.max_fee >= 5 * before.max_fee
        if not tx.legacy:
            tip, tip_before = (int(t.fields["maxPriorityFeePerGas"]) for t in (tx, before))
            assert 4 * tip >= 5 * tip_before and tip <= tx.max_fee
        same = ("to", "value", "data", "gas", "chainId")
        if rung.kind == "bump":
            assert {k: tx.fields[k] for k in same} == {k: main.fields[k] for k in same}
        else:
            assert (tx.fields["to"], tx.fields["value"], tx.fields["data"]) == (
                main.sender,
                0,
                "0x",
            )
            assert tx.fields["gas"] == NATIVE_GAS
        before = tx


# -- the port ---------------------------------------------------------------------------
def test_the_gateway_is_a_transfer_follower_with_per_chain_stuck_times() -> None:
    seconds = {}
    for chain in (Chain.ETHEREUM, Chain.BSC, Chain.POLYGON):
        built = EvmGateway(
            evm_config(chain, "mainnet"), rpc_web3("http://127.0.0.1:1", 1.0), validate_address
        )
        assert isinstance(built, TransferFollower) and built.resigns is False
        seconds[chain] = built.stuck_after_seconds
    assert seconds == {Chain.ETHEREUM: 180.0, Chain.BSC: 45.0, Chain.POLYGON: 60.0}
    assert evm_config(Chain.BSC, "testnet").stuck_after_seconds == 45.0
    assert evm_config(Chain.POLYGON, "devnet").stuck_after_seconds == 30.0


# -- the ladder, offline ------------------------------------------------------------------
def _unsigned(fields: dict[str, Any], sender: str, sponsor: str | None = None) -> UnsignedTransfer:
    main = codec.EvmTx(sender, fields)
    txs = [main]
    if sponsor is not None:
        top_up = codec.tx_fields(1, 9, sender, 1, b"", NATIVE_GAS, 10, 1)
        txs = [codec.EvmTx(sponsor, top_up), main]
    transfer = Transfer(
        ETH, sender, "0x52908400098527886E0F7030069857D2E4169EE7", 5, sponsor or sender
    )
    return UnsignedTransfer(transfer, FeeQuote(1), main.digest(), codec.encode_body(txs))


def test_a_ladder_rises_by_a_quarter_stops_under_the_cap_and_ends_in_a_cancel() -> None:
    gateway = gateway_on_nothing()
    alice = new_wallet().address
    fields = codec.tx_fields(
        1, 4, "0x52908400098527886E0F7030069857D2E4169EE7", 5, b"", 60_000, 40 * GWEI, 2 * GWEI
    )
    unsigned = _unsigned(fields, alice)
    cap = 60_000 * 40 * GWEI * 3  # three times the transfer's most
    rungs = gateway.replacements(unsigned, cap)
    check_ladder(rungs, unsigned, cap)
    bumps = [r for r in rungs if r.kind == "bump"]
    assert len(bumps) == 4  # 1.25 ** 4 = 2.44 <= 3 < 1.25 ** 5 = 3.05
    [cancel] = codec.decode_body(rungs[-1].unsigned.body)
    assert cancel.max_fee == cap // NATIVE_GAS  # the most the cap allows: it lands
    # no bump fits: a cancel still does (21,000 gas), over the transfer
    [alone] = gateway.replacements(unsigned, 60_000 * 40 * GWEI)
    assert alone.kind == "cancel" and alone.fee_units <= 60_000 * 40 * GWEI
    least = NATIVE_GAS * follow.raised(40 * GWEI)
    assert gateway.replacements(unsigned, least - 1) == []  # not even one rung fits
    assert len(gateway.replacements(unsigned, least)) == 1
    # a native transfer (21,000 gas): the bumps leave room for the cancel over them
    native = codec.tx_fields(
        1, 4, "0x52908400098527886E0F7030069857D2E4169EE7", 5, b"", NATIVE_GAS, 40 * GWEI, 2 * GWEI
    )
    cap = NATIVE_GAS * 40 * GWEI * 2
    rungs = gateway.replacements(_unsigned(native, alice), cap)
    assert [r.kind for r in rungs] == ["bump", "bump", "cancel"]  # 1.25 ** 3 = 1.95 <= 2
    check_ladder(rungs, _unsigned(native, alice), cap)
    # at most MAX_BUMPS bumps, however high the cap
    rungs = gateway.replacements(_unsigned(native, alice), 10**30)
    assert len(rungs) == follow.MAX_BUMPS + 1


def test_a_legacy_ladder_bumps_the_gas_price_and_a_zero_tip_still_rises() -> None:
    gateway = gateway_on_nothing()
    alice = new_wallet().address
    legacy = codec.tx_fields(1, 0, alice, 5, b"", NATIVE_GAS, 3 * GWEI, None)
    cap = NATIVE_GAS * 3 * GWEI * 4
    rungs = gateway.replacements(_unsigned(legacy, alice), cap)
    check_ladder(rungs, _unsigned(legacy, alice), cap)
    for rung in rungs:
        [tx] = codec.decode_body(rung.unsigned.body)
        assert tx.legacy and "maxFeePerGas" not in tx.fields
    [cancel] = codec.decode_body(rungs[-1].unsigned.body)
    [top] = codec.decode_body(rungs[-2].unsigned.body)
    assert cancel.max_fee == follow.raised(top.max_fee)  # a legacy price is what it pays
    tipless = codec.tx_fields(1, 0, alice, 5, b"", NATIVE_GAS, 3, 0)
    [first, *_] = gateway.replacements(_unsigned(tipless, alice), 10**15)
    [tx] = codec.decode_body(first.unsigned.body)
    assert (tx.fields["maxFeePerGas"], tx.fields["maxPriorityFeePerGas"]) == (4, 1)


def test_a_sponsored_transfers_rungs_replace_its_own_transaction_signed_by_the_sender() -> None:
    gateway = gateway_on_nothing()
    alice, platform = new_wallet().address, new_wallet().address
    fields = codec.tx_fields(
        1, 2, "0x52908400098527886E0F7030069857D2E4169EE7", 0, b"\x01", 60_000, 10, 1
    )
    unsigned = _unsigned(fields, alice, sponsor=platform)
    assert unsigned.transfer.signers == (platform, alice)
    rungs = gateway.replacements(unsigned, 60_000 * 10 * 5)
    check_ladder(rungs, unsigned, 60_000 * 10 * 5)
    for rung in rungs:
        assert rung.unsigned.transfer.signers == (alice,)  # the sender alone
        assert [t.sender for t in codec.decode_body(rung.unsigned.body)] == [alice]


def gateway_on_nothing() -> EvmGateway:
    """A gateway whose node does not listen: the ladder is built without it."""
    return EvmGateway(
        evm_config(Chain.ETHEREUM, "mainnet"), rpc_web3("http://127.0.0.1:1", 1.0), validate_address
    )


async def test_a_node_that_does_not_answer_is_never_read_as_missing() -> None:
    gateway = gateway_on_nothing()
    alice = new_wallet()
    fields = codec.tx_fields(1, 0, alice.address, 5, b"", NATIVE_GAS, 10, 1)
    unsigned = _unsigned(fields, alice.address)
    signed = sign_as_core(gateway, unsigned, alice)
    with pytest.raises(NodeUnavailable):
        await gateway.sighting(alice.address, ETH, signed)
    await gateway.aclose()


# -- sightings on anvil -----------------------------------------------------------------
@needs_anvil
async def test_a_send_reads_pending_in_the_pool_then_below_depth_then_success(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    alice, bob = funded(node), new_wallet()
    _, signed = await prepared(gateway, ETH, alice, bob.address, 10**17)
    assert await gateway.broadcast(signed) == signed.tx_hash
    assert signed.tx_hash in node.pooled()
    assert await seen(gateway, alice, signed) == [Sighting.PENDING]
    for depth in range(1, CONFIRMATIONS + 1):
        node.mine()
        row = await gateway.lookup(alice.address, ETH, signed.tx_hash)
        expected = Sighting.SUCCESS if depth == CONFIRMATIONS else Sighting.PENDING
        assert await seen(gateway, alice, signed) == [expected]
        assert row.status == expected.value  # the same depth rule as `lookup`
    assert await gateway.balance(bob.address, ETH) == 10**17


@needs_anvil
async def test_a_reverted_token_transfer_reads_failed_at_depth(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    alice, bob = funded(node), new_wallet()
    node.fund(alice.address, USDT, 1_000_000)
    _, signed = await prepared(gateway, USDT, alice, bob.address, 5_000_000)  # more than held
    await gateway.broadcast(signed)
    node.mine()
    receipt = node.receipt(signed.tx_hash)
    assert receipt is not None and receipt["status"] == "0x0"  # reverted, mined
    assert await gateway.sighting(alice.address, USDT, signed) == Sighting.PENDING
    node.mine(CONFIRMATIONS - 1)
    assert await gateway.sighting(alice.address, USDT, signed) == Sighting.FAILED
    assert (await gateway.lookup(alice.address, USDT, signed.tx_hash)).status == "failed"
    assert await gateway.balance(bob.address, USDT) == 0


@needs_anvil
async def test_a_dropped_send_reads_missing_and_its_same_bytes_land(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    alice, bob = funded(node), new_wallet()
    _, signed = await prepared(gateway, ETH, alice, bob.address, 10**16)
    await gateway.broadcast(signed)
    node.drop_all()
    assert await seen(gateway, alice, signed) == [Sighting.MISSING]
    node.mine(2)  # nothing took its nonce: still missing, still able to land
    assert await seen(gateway, alice, signed) == [Sighting.MISSING]
    assert gateway.nonces.held(alice.address) is None

    assert await gateway.broadcast(signed) == signed.tx_hash  # the same bytes again
    assert await seen(gateway, alice, signed) == [Sighting.PENDING]
    node.mine(CONFIRMATIONS)
    assert await seen(gateway, alice, signed) == [Sighting.SUCCESS]
    assert await gateway.balance(bob.address, ETH) == 10**16
    assert await gateway.broadcast(signed) == signed.tx_hash  # mined: known, counts as sent
    _, after = await prepared(gateway, ETH, alice, bob.address, 1)
    await gateway.broadcast(after)
    assert on_chain(node, after)["nonce"] == "0x1"  # the book moved on past it, once


# -- the ladder on anvil --------------------------------------------------------------------
def competitor_sends(node: AnvilNode, count: int, max_fee: int) -> None:
    """`count` transfers of another account, each filling a block of 21,000 gas, paying
    `max_fee` (anvil mines its pool by max fee per gas, highest first)."""
    rival = Account.create()
    node.fund(rival.address, ETH, 10**18)
    for nonce in range(count):
        raw = rival.sign_transaction(
            {
                "chainId": node.chain_id,
                "nonce": nonce,
                "to": rival.address,
                "value": 0,
                "gas": NATIVE_GAS,
                "maxFeePerGas": max_fee,
                "maxPriorityFeePerGas": max_fee // 2,
            }
        ).raw_transaction
        node.send_raw(bytes(raw))


@needs_anvil
async def test_a_send_outbid_for_blocks_stays_pending_until_a_rung_of_its_ladder_lands(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    """Blocks of 21,000 gas, each taken by a rival paying more: the send waits block after
    block; its rungs go out one by one, each taken by the pool as a replacement, until one
    outbids the rival and is mined. Then the send and the lower rungs read CONFLICT, the
    rung SUCCESS, and the recipient was paid once."""
    alice, bob = funded(node), new_wallet()
    unsigned, signed = await prepared(gateway, ETH, alice, bob.address, 10**16)
    cap = 4 * unsigned.fee.native_units
    ladder = signed_ladder(gateway, unsigned, cap, alice)
    check_ladder([r for r, _ in ladder], unsigned, cap)
    [original] = codec.decode_body(unsigned.body)
    rival_fee = original.max_fee * 9 // 5  # between the 2nd rung (x1.5625) and the 3rd (x1.95)
    node.set_block_gas_limit(NATIVE_GAS)
    node.mine()  # the limit holds from the next block on
    competitor_sends(node, 8, rival_fee)

    await gateway.broadcast(signed)
    node.mine(2)
    assert await seen(gateway, alice, signed) == [Sighting.PENDING]  # outbid, still pooled
    sent = [signed]
    for rung, rung_signed in ladder[:3]:
        assert rung.kind == "bump"
        assert await gateway.broadcast(rung_signed) == rung_signed.tx_hash  # taken
        pool = node.pooled()
        assert rung_signed.tx_hash in pool and not {s.tx_hash for s in sent} & set(pool)
        # replaced in the pool, its nonce not mined: it could still go again
        assert await seen(gateway, alice, *sent) == [Sighting.MISSING] * len(sent)
        assert gateway.nonces.held(alice.address) is None  # the book was not touched
        sent.append(rung_signed)
        node.mine()
    landed = sent[-1]
    receipt = node.receipt(landed.tx_hash)
    assert receipt is not None and receipt["status"] == "0x1"
    assert [node.receipt(s.tx_hash) for s in sent[:-1]] == [None] * 3
    assert await seen(gateway, alice, *sent) == [Sighting.PENDING] * 4  # below depth
    node.mine(CONFIRMATIONS - 1)
    assert await seen(gateway, alice, *sent) == [Sighting.CONFLICT] * 3 + [Sighting.SUCCESS]
    assert await gateway.balance(bob.address, ETH) == 10**16  # paid once
    paid = int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
    assert paid <= ladder[2][0].fee_units <= cap

    # the rungs after it: the nonce is used by another transaction; the landed one is known
    with pytest.raises(TransferRejected, match="nonce was used by another transaction"):
        await gateway.broadcast(ladder[3][1])
    assert await gateway.broadcast(landed) == landed.tx_hash
    _, after = await prepared(gateway, ETH, alice, bob.address, 1)
    await gateway.broadcast(after)
    assert on_chain(node, after)["nonce"] == "0x1"  # the next send takes the next nonce


@needs_anvil
async def test_a_rung_under_a_higher_one_in_the_pool_is_refused_and_nothing_changes(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    alice, bob = funded(node), new_wallet()
    unsigned, signed = await prepared(gateway, ETH, alice, bob.address, 10**16)
    ladder = signed_ladder(gateway, unsigned, 4 * unsigned.fee.native_units, alice)
    await gateway.broadcast(signed)
    await gateway.broadcast(ladder[1][1])
    with pytest.raises(TransferRejected, match="waits in the node's pool at an equal or higher"):
        await gateway.broadcast(ladder[0][1])
    assert node.pooled() == [ladder[1][1].tx_hash]
    assert await gateway.broadcast(ladder[1][1]) == ladder[1][1].tx_hash  # already known


@needs_anvil
async def test_a_send_under_a_base_fee_jump_is_evicted_and_a_rung_above_it_lands(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    """anvil evicts a pooled transaction whose max fee falls below a mined block's base
    fee, and refuses one below the next block's (geth would keep it pooled, waiting): the
    send reads MISSING, its same bytes are refused, and so is every rung under the base
    fee, until one above it is taken and mined."""
    alice, bob = funded(node), new_wallet()
    unsigned, signed = await prepared(gateway, ETH, alice, bob.address, 10**16)
    ladder = signed_ladder(gateway, unsigned, 8 * unsigned.fee.native_units, alice)
    [original] = codec.decode_body(unsigned.body)
    base = original.max_fee * 7 // 5  # above the send and its first rung (x1.25)
    await gateway.broadcast(signed)
    assert await seen(gateway, alice, signed) == [Sighting.PENDING]

    node.set_next_base_fee(base)
    node.mine()
    assert node.base_fee() == base
    assert await seen(gateway, alice, signed) == [Sighting.MISSING]  # evicted
    node.set_next_base_fee(base)
    for refused in (signed, ladder[0][1]):
        with pytest.raises(TransferRejected, match="fee is below what the network takes"):
            await gateway.broadcast(refused)
    rung = ladder[1][1]
    assert await gateway.broadcast(rung) == rung.tx_hash
    node.mine(CONFIRMATIONS)
    assert await seen(gateway, alice, signed, ladder[0][1], rung) == [
        Sighting.CONFLICT,
        Sighting.CONFLICT,
        Sighting.SUCCESS,
    ]
    assert await gateway.balance(bob.address, ETH) == 10**16


@needs_anvil
async def test_a_cancel_takes_the_nonce_and_the_recipient_gets_nothing(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    alice, bob = funded(node), new_wallet()
    unsigned, signed = await prepared(gateway, ETH, alice, bob.address, 10**17)
    cap = 3 * unsigned.fee.native_units
    ladder = signed_ladder(gateway, unsigned, cap, alice)
    cancel, cancel_signed = ladder[-1]
    assert cancel.kind == "cancel" and cancel.fee_units <= cap
    await gateway.broadcast(signed)
    assert await gateway.broadcast(cancel_signed) == cancel_signed.tx_hash  # over the send
    assert node.pooled() == [cancel_signed.tx_hash]
    node.mine(CONFIRMATIONS)
    assert await seen(gateway, alice, signed, cancel_signed) == [
        Sighting.CONFLICT,
        Sighting.SUCCESS,
    ]
    landed = on_chain(node, cancel_signed)
    assert (int(landed["to"], 16), landed["value"]) == (int(alice.address, 16), "0x0")
    assert await gateway.balance(bob.address, ETH) == 0  # the recipient got nothing
    receipt = node.receipt(cancel_signed.tx_hash)
    assert receipt is not None
    spent = 10**18 - await gateway.balance(alice.address, ETH)
    assert spent == int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
    assert spent <= cancel.fee_units


@needs_anvil
@pytest.mark.parametrize("refill", ["same bytes", "cancel"])
async def test_a_dropped_nonce_refilled_lets_the_ten_sends_behind_it_land_without_a_gap(
    node: AnvilNode, gateway: EvmGateway, refill: str
) -> None:
    """Six sends, then the node drops its pool; five more sends queue behind the dropped
    nonce 0 (the book hands out its floor, past the node's count). The dropped ones read
    MISSING and go again, nonce 0 last (its same bytes, or its cancel): all eleven nonces
    are mined, in sequence."""
    alice, bob = funded(node), new_wallet()
    first: list[tuple[UnsignedTransfer, SignedTransfer]] = []
    for _ in range(6):
        first.append(await prepared(gateway, ETH, alice, bob.address, 10**15))
        await gateway.broadcast(first[-1][1])
    node.drop_all()
    later = []
    for _ in range(5):
        _, one = await prepared(gateway, ETH, alice, bob.address, 10**15)
        assert await gateway.broadcast(one) == one.tx_hash  # taken, queued behind nonce 0
        later.append(one)
    node.mine(2)
    assert node.nonce(alice.address) == 0  # nothing can be mined past the gap
    dropped = [s for _, s in first]
    assert await seen(gateway, alice, *dropped) == [Sighting.MISSING] * 6
    assert await seen(gateway, alice, *later) == [Sighting.PENDING] * 5

    for one in dropped[1:]:
        assert await gateway.broadcast(one) == one.tx_hash  # MISSING: the same bytes again
    if refill == "cancel":
        unsigned = first[0][0]
        [zero] = [
            s
            for r, s in signed_ladder(gateway, unsigned, 3 * unsigned.fee.native_units, alice)
            if r.kind == "cancel"
        ]
    else:
        zero = dropped[0]
    assert await gateway.broadcast(zero) == zero.tx_hash
    node.mine(CONFIRMATIONS)

    landed = [zero, *dropped[1:], *later]
    assert await seen(gateway, alice, *landed) == [Sighting.SUCCESS] * 11
    assert [int(on_chain(node, s)["nonce"], 16) for s in landed] == list(range(11))
    assert node.nonce(alice.address) == 11
    paid = 10 if refill == "cancel" else 11
    assert await gateway.balance(bob.address, ETH) == paid * 10**15
    if refill == "cancel":
        assert await seen(gateway, alice, dropped[0]) == [Sighting.CONFLICT]
    _, twelfth = await prepared(gateway, ETH, alice, bob.address, 10**15)
    await gateway.broadcast(twelfth)
    assert on_chain(node, twelfth)["nonce"] == hex(11)  # the floor is consistent again


@needs_anvil
async def test_a_usdt_transfer_is_bumped_and_moves_its_tokens_once(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    alice, bob = funded(node), new_wallet()
    node.fund(alice.address, USDT, 10_000_000)
    unsigned, signed = await prepared(gateway, USDT, alice, bob.address, 4_000_000)
    cap = 3 * unsigned.fee.native_units
    ladder = signed_ladder(gateway, unsigned, cap, alice)
    check_ladder([r for r, _ in ladder], unsigned, cap)
    await gateway.broadcast(signed)
    bump, bumped = ladder[1]
    assert await gateway.broadcast(bumped) == bumped.tx_hash
    node.mine(CONFIRMATIONS)
    assert await gateway.sighting(alice.address, USDT, signed) == Sighting.CONFLICT
    assert await gateway.sighting(alice.address, USDT, bumped) == Sighting.SUCCESS
    assert await gateway.balance(bob.address, USDT) == 4_000_000
    assert await gateway.balance(alice.address, USDT) == 6_000_000
    row = await gateway.lookup(bob.address, USDT, bumped.tx_hash)
    assert (row.type, row.amount_units, row.status) == ("receive", 4_000_000, "success")
    assert row.fee_units <= bump.fee_units <= cap


@needs_anvil
async def test_a_sponsored_usdt_transfer_is_bumped_by_its_sender_with_its_own_gas(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    """The sponsor's top-up is mined first; the sender's transfer then waits in the pool.
    Its rungs are signed by the sender alone and paid from the sender's coin: refused
    (InsufficientGas, nothing sent) while the sender holds only the top-up, taken once it
    holds more."""
    platform, alice, bob = funded(node), new_wallet(), new_wallet()
    node.fund(alice.address, USDT, 3_000_000)
    unsigned, signed = await prepared(gateway, USDT, alice, bob.address, 3_000_000, platform)
    ladder = signed_ladder(gateway, unsigned, 3 * unsigned.fee.native_units, alice)
    assert {r.unsigned.transfer.signers for r, _ in ladder} == {(alice.address,)}
    [top_up, main] = codec.decode_envelope(signed.raw)

    sending = asyncio.create_task(gateway.broadcast(signed))
    while top_up.tx_hash not in await asyncio.to_thread(node.pooled):
        await asyncio.sleep(0.02)
    await asyncio.to_thread(node.mine)  # the top-up; then the transfer goes out
    assert await sending == signed.tx_hash == main.tx_hash
    assert await gateway.sighting(alice.address, USDT, signed) == Sighting.PENDING

    bump, bumped = ladder[0]
    with pytest.raises(InsufficientGas):
        await gateway.broadcast(bumped)
    assert node.pooled() == [main.tx_hash]  # untouched
    node.fund(alice.address, ETH, bump.fee_units)
    assert await gateway.broadcast(bumped) == bumped.tx_hash
    node.mine(CONFIRMATIONS)
    assert await gateway.sighting(alice.address, USDT, signed) == Sighting.CONFLICT
    assert await gateway.sighting(alice.address, USDT, bumped) == Sighting.SUCCESS
    assert await gateway.balance(bob.address, USDT) == 3_000_000


@needs_anvil
async def test_a_legacy_chain_ladder_bumps_the_gas_price_on_the_node() -> None:
    with AnvilNode(Chain.ETHEREUM, mining=False, hardfork="berlin") as legacy:
        gateway = gateway_on(legacy, eip1559=False)
        try:
            alice, bob = funded(legacy), new_wallet()
            unsigned, signed = await prepared(gateway, ETH, alice, bob.address, 10**15)
            [original] = codec.decode_body(unsigned.body)
            assert original.legacy
            ladder = signed_ladder(gateway, unsigned, 3 * unsigned.fee.native_units, alice)
            check_ladder([r for r, _ in ladder], unsigned, 3 * unsigned.fee.native_units)
            await gateway.broadcast(signed)
            rung = ladder[0][1]
            assert await gateway.broadcast(rung) == rung.tx_hash
            landed = on_chain(legacy, rung)
            assert landed["type"] == "0x0"
            assert int(landed["gasPrice"], 16) == follow.raised(original.max_fee)
            legacy.mine(CONFIRMATIONS)
            assert await seen(gateway, alice, signed, rung) == [
                Sighting.CONFLICT,
                Sighting.SUCCESS,
            ]
        finally:
            await gateway.aclose()


@needs_anvil
async def test_a_rung_leaves_alone_a_nonce_the_book_holds_for_another_send(
    node: AnvilNode, gateway: EvmGateway
) -> None:
    """A process without stored floors (restarted) reads the node's count: after a drop it
    reserves the dropped nonce again for a new send. The cancel of the dropped transfer,
    broadcast meanwhile, must not end that send's turn; the send is then refused (the
    cancel holds the nonce in the pool) and gives its nonce back."""
    alice, bob = funded(node), new_wallet()
    unsigned, signed = await prepared(gateway, ETH, alice, bob.address, 10**16)
    cancel = signed_ladder(gateway, unsigned, 3 * unsigned.fee.native_units, alice)[-1][1]
    await gateway.broadcast(signed)
    node.drop_all()
    restarted = gateway_on(node)
    try:
        fresh_unsigned, fresh = await prepared(restarted, ETH, alice, bob.address, 10**15)
        assert restarted.nonces.held(alice.address) == 0  # the dropped transfer's nonce
        assert await restarted.broadcast(cancel) == cancel.tx_hash
        assert restarted.nonces.held(alice.address) == 0  # the new send's turn goes on
        with pytest.raises(TransferRejected, match="waits in the node's pool"):
            await restarted.broadcast(fresh)
        assert restarted.nonces.held(alice.address) is None
        await restarted.release(fresh_unsigned)  # harmless once given back
    finally:
        await restarted.aclose()
    node.mine(CONFIRMATIONS)
    assert await seen(gateway, alice, signed, cancel) == [Sighting.CONFLICT, Sighting.SUCCESS]
