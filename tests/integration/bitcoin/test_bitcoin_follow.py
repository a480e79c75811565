"""The Bitcoin transfer lifecycle (`TransferFollower`) on a real regtest node, on both
backends: sightings from the mempool to the confirmation depth, a stuck send replaced by
its pre-signed replace-by-fee ladder (bumps and the cancel, accepted by the node under its
BIP125 rules), an evicted send read `missing` and sent again, and child-pays-for-parent.

The node of this module mines no transaction paying under 2.5 sat/vB (`-blockmintxfee`),
so a send at the minimum relay fee (1 sat/vB) stays in the mempool block after block:
stuck, as on a busy network. Fee rates are pinned on the gateways (a regtest node's estimate
changes with the blocks mined before)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from typing import Any

import pytest
from btc_support import BTC, Wallet, make_gateway

from walletcore.domain.errors import (
    InvalidRequest,
    NodeUnavailable,
    ServerError,
    TransferRejected,
)
from walletcore.ports import (
    FeeQuote,
    Replacement,
    Sighting,
    SignedTransfer,
    Transfer,
    TransferFollower,
    UnsignedTransfer,
)
from walletcore_chains.bitcoin import txcodec
from walletcore_chains.bitcoin.backend import Utxo
from walletcore_chains.bitcoin.coins import P2WPKH_SCRIPT, vsize
from walletcore_chains.bitcoin.follow import FACTOR, INCREMENTAL_RATE
from walletcore_chains.bitcoin.gateway import BitcoinGateway
from walletcore_chains.testing.bitcoind import Bitcoind, stingy_node_or_skip
from walletcore_chains.testing.esplora_server import EsploraTestServer

COIN = 100_000_000
#: blocks take nothing paying less (sat/vB); the gateways send at 1 sat/vB, so a send is
#: stuck, its first bump (2 sat/vB: the fee plus 1 sat/vB of its size) too, the second
#: (3 sat/vB) is mined
BLOCK_MIN_RATE = 2.5


@pytest.fixture(scope="module")
def picky() -> Iterator[Bitcoind]:
    with stingy_node_or_skip(BLOCK_MIN_RATE) as started:
        yield started


@pytest.fixture(scope="module")
def picky_esplora(picky: Bitcoind) -> Iterator[EsploraTestServer]:
    with EsploraTestServer(picky.plain_url, (picky.user, picky.password)) as server:
        yield server


@pytest.fixture(params=["core", "esplora"])
async def gw(request: pytest.FixtureRequest, picky: Bitcoind) -> AsyncIterator[BitcoinGateway]:
    url = picky.url if request.param == "core" else request.getfixturevalue("picky_esplora").url
    gateway = make_gateway(request.param, url)
    pin_rate(gateway, 1.0)
    try:
        yield gateway
    finally:
        await gateway.aclose()


@pytest.fixture
async def core_gw(picky: Bitcoind) -> AsyncIterator[BitcoinGateway]:
    gateway = make_gateway("core", picky.url)
    pin_rate(gateway, 1.0)
    try:
        yield gateway
    finally:
        await gateway.aclose()


def pin_rate(gateway: BitcoinGateway, rate: float) -> None:
    async def pinned() -> float:
        return rate

    gateway.fee_rate = pinned  # type: ignore[method-assign]


def funded(node: Bitcoind, btc: str) -> Wallet:
    wallet = Wallet()
    node.fund(wallet.address, btc)
    node.mine(1)
    return wallet


async def prepared(
    gateway: BitcoinGateway,
    sender: Wallet,
    recipient: str,
    units: int,
    *,
    sponsor: Wallet | None = None,
    fee_from_amount: bool = False,
) -> UnsignedTransfer:
    payer = sponsor.address if sponsor else sender.address
    quote = await gateway.fee(sender.address, recipient, BTC, units, fee_payer=payer)
    amount = units - quote.native_units if fee_from_amount else units
    return await gateway.prepare(Transfer(BTC, sender.address, recipient, amount, payer), quote)


def signed(gateway: BitcoinGateway, unsigned: UnsignedTransfer, *keys: Wallet) -> SignedTransfer:
    """Signed as the core signs: each signer of the transfer signs its own payload."""
    by_address = {k.address: k for k in keys}
    signatures = {a: by_address[a].sign(unsigned.payload_for(a)) for a in unsigned.transfer.signers}
    return gateway.assemble(unsigned, signatures)


def body(unsigned: UnsignedTransfer) -> txcodec.Body:
    return txcodec.Body.decode(unsigned.body)


def mempool_fee(node: Bitcoind, txid: str) -> int:
    entry = node.call("getmempoolentry", txid)
    return int(Decimal(str(entry["fees"]["base"])) * COIN)


def check_ladder(unsigned: UnsignedTransfer, ladder: list[Replacement], cap: int) -> None:
    """Rising fees under the cap, each over the one before by the replacement rules; the
    cancel last; the same coins and signers throughout."""
    assert ladder and ladder[-1].kind == "cancel"
    assert all(r.kind == "bump" for r in ladder[:-1])
    previous = unsigned.fee.native_units
    for rung in ladder:
        rung_body = body(rung.unsigned)
        assert rung.fee_units == rung_body.fee == rung.unsigned.fee.native_units <= cap
        size = vsize(len(rung_body.inputs), [P2WPKH_SCRIPT] * len(rung_body.outputs))
        assert rung.fee_units >= previous + INCREMENTAL_RATE * size  # BIP125 rule 4
        assert [c for c, _ in rung_body.inputs] == [c for c, _ in body(unsigned).inputs]
        assert set(rung.unsigned.transfer.signers) == set(unsigned.transfer.signers)
        assert rung_body.turns == {}  # broadcast later, under no lease
        previous = rung.fee_units


async def test_the_gateway_follows_transfers(gw: BitcoinGateway) -> None:
    assert isinstance(gw, TransferFollower)
    assert gw.resigns is False
    assert gw.stuck_after_seconds == 30.0  # regtest's default


async def test_sighting_from_signed_to_the_mempool_to_depth(
    gw: BitcoinGateway, picky: Bitcoind
) -> None:
    pin_rate(gw, 5.0)  # above what blocks take
    alice, bob = funded(picky, "0.05"), Wallet()
    send = signed(gw, await prepared(gw, alice, bob.address, 1_000_000), alice)
    # signed, never sent: unknown, its coins unspent -> missing (sending it is safe)
    assert await gw.sighting(alice.address, BTC, send) == Sighting.MISSING
    assert await gw.broadcast(send) == send.tx_hash
    assert await gw.sighting(alice.address, BTC, send) == Sighting.PENDING
    picky.mine(1)
    assert await gw.sighting(alice.address, BTC, send) == Sighting.PENDING  # 1 of 2 deep
    picky.mine(1)
    assert await gw.sighting(alice.address, BTC, send) == Sighting.SUCCESS
    assert (await gw.lookup(bob.address, BTC, send.tx_hash)).status == "success"  # same rule


async def test_a_stuck_send_is_bumped_until_it_is_mined(
    gw: BitcoinGateway, picky: Bitcoind
) -> None:
    alice, bob = funded(picky, "0.1"), Wallet()
    start = await gw.balance(alice.address, BTC)
    unsigned = await prepared(gw, alice, bob.address, 3_000_000)
    cap = 20 * unsigned.fee.native_units
    ladder = list(gw.replacements(unsigned, cap))
    check_ladder(unsigned, ladder, cap)
    bumps = [r for r in ladder if r.kind == "bump"]
    assert len(bumps) >= 3
    for rung in bumps:  # the recipient gets the same; the sender's change pays the rise
        assert rung.unsigned.transfer == unsigned.transfer
        assert body(rung.unsigned).outputs[0] == body(unsigned).outputs[0]
        assert body(rung.unsigned).outputs[1].address == alice.address
        assert rung.fee_units >= FACTOR * unsigned.fee.native_units - 1
    # all signed with the send, in the same key unseal
    original = signed(gw, unsigned, alice)
    first, second = (signed(gw, r.unsigned, alice) for r in bumps[:2])

    assert await gw.broadcast(original) == original.tx_hash
    picky.mine(1)
    assert original.tx_hash in picky.call("getrawmempool")  # 1 sat/vB: left out, stuck
    assert await gw.sighting(alice.address, BTC, original) == Sighting.PENDING

    assert await gw.broadcast(first) == first.tx_hash  # a BIP125 replacement
    mempool = picky.call("getrawmempool")
    assert first.tx_hash in mempool and original.tx_hash not in mempool
    assert mempool_fee(picky, first.tx_hash) == bumps[0].fee_units
    assert await gw.sighting(alice.address, BTC, original) == Sighting.CONFLICT
    assert await gw.sighting(alice.address, BTC, first) == Sighting.PENDING
    picky.mine(1)
    assert first.tx_hash in picky.call("getrawmempool")  # 2 sat/vB: still stuck

    assert await gw.broadcast(second) == second.tx_hash  # replaces the first bump
    assert mempool_fee(picky, second.tx_hash) == bumps[1].fee_units
    picky.mine(1)
    assert second.tx_hash not in picky.call("getrawmempool")  # 3 sat/vB: mined
    assert await gw.sighting(alice.address, BTC, second) == Sighting.PENDING  # 1 of 2
    picky.mine(1)
    assert await gw.sighting(alice.address, BTC, second) == Sighting.SUCCESS
    assert await gw.sighting(alice.address, BTC, original) == Sighting.CONFLICT
    assert await gw.sighting(alice.address, BTC, first) == Sighting.CONFLICT

    assert await gw.balance(bob.address, BTC) == 3_000_000
    assert await gw.balance(alice.address, BTC) == start - 3_000_000 - bumps[1].fee_units
    # the cancel can no longer take the coins: they are spent by the mined bump
    cancel = signed(gw, ladder[-1].unsigned, alice)
    with pytest.raises(TransferRejected, match="double spend"):
        await gw.broadcast(cancel)
    assert await gw.sighting(alice.address, BTC, cancel) == Sighting.CONFLICT


async def test_the_cancel_gives_the_coins_back(gw: BitcoinGateway, picky: Bitcoind) -> None:
    alice, bob = funded(picky, "0.1"), Wallet()
    start = await gw.balance(alice.address, BTC)
    unsigned = await prepared(gw, alice, bob.address, 3_000_000)
    cap = 20 * unsigned.fee.native_units
    ladder = list(gw.replacements(unsigned, cap))
    cancel = ladder[-1]
    assert cancel.kind == "cancel" and cancel.fee_units > ladder[-2].fee_units
    assert cancel.unsigned.transfer.recipient == alice.address
    assert cancel.unsigned.transfer.amount_units == 0
    assert body(cancel.unsigned).outputs == (
        txcodec.Output(alice.address, start - cancel.fee_units),
    )
    original = signed(gw, unsigned, alice)
    back = signed(gw, cancel.unsigned, alice)
    await gw.broadcast(original)
    assert await gw.broadcast(back) == back.tx_hash  # over the original: accepted
    assert await gw.sighting(alice.address, BTC, original) == Sighting.CONFLICT
    assert await gw.sighting(alice.address, BTC, back) == Sighting.PENDING
    picky.mine(2)
    assert await gw.sighting(alice.address, BTC, back) == Sighting.SUCCESS
    assert await gw.sighting(alice.address, BTC, original) == Sighting.CONFLICT
    assert await gw.balance(alice.address, BTC) == start - cancel.fee_units
    assert picky.call("gettxout", original.tx_hash, 0, True) is None  # bob got nothing


async def test_a_whole_balance_send_is_bumped_out_of_the_amount(
    gw: BitcoinGateway, picky: Bitcoind
) -> None:
    alice, bob = funded(picky, "0.02"), Wallet()
    held = await gw.balance(alice.address, BTC)
    unsigned = await prepared(gw, alice, bob.address, held, fee_from_amount=True)
    assert len(body(unsigned).outputs) == 1  # no change: the fee comes from the amount
    cap = 20 * unsigned.fee.native_units
    ladder = list(gw.replacements(unsigned, cap))
    check_ladder(unsigned, ladder, cap)
    for rung in ladder[:-1]:
        assert rung.unsigned.transfer.amount_units == held - rung.fee_units
        assert body(rung.unsigned).outputs == (txcodec.Output(bob.address, held - rung.fee_units),)
    await gw.broadcast(signed(gw, unsigned, alice))
    bump = ladder[1]  # a rung may be skipped: each one replaces every lower one
    assert await gw.broadcast(signed(gw, bump.unsigned, alice))
    picky.mine(1)
    assert await gw.balance(bob.address, BTC) == held - bump.fee_units
    assert await gw.balance(alice.address, BTC) == 0


async def test_a_platform_paid_send_is_bumped_out_of_the_platforms_change(
    gw: BitcoinGateway, picky: Bitcoind
) -> None:
    user, platform, bob = funded(picky, "0.1"), funded(picky, "0.05"), Wallet()
    user_start = await gw.balance(user.address, BTC)
    platform_start = await gw.balance(platform.address, BTC)
    unsigned = await prepared(gw, user, bob.address, 2_000_000, sponsor=platform)
    cap = 20 * unsigned.fee.native_units
    ladder = list(gw.replacements(unsigned, cap))
    check_ladder(unsigned, ladder, cap)
    for rung in ladder:
        assert rung.unsigned.transfer.signers == (platform.address, user.address)
        assert set(rung.unsigned.payloads or {}) == {platform.address, user.address}
    cancel_outputs = body(ladder[-1].unsigned).outputs
    assert cancel_outputs[0] == txcodec.Output(user.address, user_start)  # all back to the user
    await gw.broadcast(signed(gw, unsigned, user, platform))
    bump = ladder[1]
    replaced = signed(gw, bump.unsigned, user, platform)  # two signers, as the send
    assert await gw.broadcast(replaced) == replaced.tx_hash
    picky.mine(2)
    assert await gw.sighting(user.address, BTC, replaced) == Sighting.SUCCESS
    assert await gw.balance(bob.address, BTC) == 2_000_000
    assert await gw.balance(user.address, BTC) == user_start - 2_000_000  # no fee paid
    assert await gw.balance(platform.address, BTC) == platform_start - bump.fee_units


async def test_the_ladder_is_built_offline_and_stays_under_the_cap(
    core_gw: BitcoinGateway, picky: Bitcoind
) -> None:
    alice, bob = funded(picky, "0.1"), Wallet()
    unsigned = await prepared(core_gw, alice, bob.address, 1_000_000)
    await core_gw.release(unsigned)
    fee = unsigned.fee.native_units
    backend = core_gw.backend
    core_gw.backend = _NoNode()  # type: ignore[assignment]
    try:
        full = core_gw.replacements(unsigned, 1000 * fee)
        assert [r.kind for r in full] == ["bump"] * 8 + ["cancel"]  # MAX_BUMPS
        for cap in (2 * fee, 5 * fee, 11 * fee):
            ladder = list(core_gw.replacements(unsigned, cap))
            check_ladder(unsigned, ladder, cap)
        # only room for the cancel (the fee plus 1 sat/vB of its size): no bump
        only = core_gw.replacements(unsigned, fee + 150)
        assert [r.kind for r in only] == ["cancel"] and only[0].fee_units <= fee + 150
        assert core_gw.replacements(unsigned, fee) == []  # not even one rung fits
    finally:
        core_gw.backend = backend


def _unsigned_of(
    gateway: BitcoinGateway,
    transfer: Transfer,
    inputs: list[tuple[int, str]],
    outputs: list[tuple[str, int]],
) -> UnsignedTransfer:
    """A send shaped as `prepare` shapes them, over coins no node knows (offline)."""
    coins = tuple(
        (Utxo(f"{i + 1:064x}", 0, value, None), owner) for i, (value, owner) in enumerate(inputs)
    )
    fee = sum(v for v, _ in inputs) - sum(v for _, v in outputs)
    made = txcodec.Body(
        "regtest", 0, coins, tuple(txcodec.Output(a, v) for a, v in outputs), fee, {"x": 1}
    )
    payloads = txcodec.payloads(gateway.network, made)
    return UnsignedTransfer(
        transfer, FeeQuote(fee), payloads[transfer.sender], made.encode(), payloads=payloads
    )


async def test_a_change_that_would_be_dust_joins_the_fee_and_ends_the_bumps() -> None:
    gateway = make_gateway("core", "http://u:p@127.0.0.1:1")  # never asked: offline
    try:
        alice, bob = Wallet(), Wallet()
        transfer = Transfer(BTC, alice.address, bob.address, 99_459, alice.address)
        unsigned = _unsigned_of(
            gateway,
            transfer,
            [(100_000, alice.address)],
            [(bob.address, 99_459), (alice.address, 400)],
        )
        ladder = gateway.replacements(unsigned, 10_000)
        assert [r.kind for r in ladder] == ["bump", "cancel"]
        # 400 - (282 - 141) is under the dust limit (294): the whole change joins the fee
        assert body(ladder[0].unsigned).outputs == (txcodec.Output(bob.address, 99_459),)
        assert ladder[0].fee_units == 541
        assert body(ladder[1].unsigned).outputs == (
            txcodec.Output(alice.address, 100_000 - ladder[1].fee_units),
        )
        check_ladder(unsigned, list(ladder), 10_000)
        assert ladder[0].unsigned.payload_for(alice.address) != unsigned.payload  # re-signed

        # a PLATFORM fee paid by the platform's whole coin: nothing to raise it from
        platform = Wallet()
        sponsored = Transfer(BTC, alice.address, bob.address, 50_000, platform.address)
        whole_coin = _unsigned_of(
            gateway,
            sponsored,
            [(100_000, alice.address), (300, platform.address)],
            [(bob.address, 50_000), (alice.address, 50_000)],
        )
        assert gateway.replacements(whole_coin, 100_000) == []
    finally:
        await gateway.aclose()


async def test_an_evicted_send_reads_missing_and_is_sent_again(
    gw: BitcoinGateway, picky: Bitcoind
) -> None:
    alice, bob = funded(picky, "0.05"), Wallet()
    send = signed(gw, await prepared(gw, alice, bob.address, 1_000_000), alice)
    await gw.broadcast(send)
    assert await gw.sighting(alice.address, BTC, send) == Sighting.PENDING
    picky.evict_mempool()  # two weeks unmined: expired from the mempool
    assert send.tx_hash not in picky.call("getrawmempool")
    assert await gw.sighting(alice.address, BTC, send) == Sighting.MISSING
    assert await gw.broadcast(send) == send.tx_hash  # the same bytes again
    assert await gw.sighting(alice.address, BTC, send) == Sighting.PENDING
    assert send.tx_hash in picky.call("getrawmempool")


async def test_child_pays_for_a_received_low_fee_parent(
    gw: BitcoinGateway, picky: Bitcoind
) -> None:
    carol = Wallet()
    parent = str(
        picky.call(
            "sendtoaddress",
            carol.address,
            "0.01",
            "",
            "",
            False,
            True,
            None,
            "unset",
            None,
            1,  # sat/vB: stuck on this node
            wallet="miner",
        )
    )
    picky.mine(1)
    assert parent in picky.call("getrawmempool")
    target = 10
    with pytest.raises(InvalidRequest, match="pays nothing"):
        await gw.prepare_cpfp(Wallet().address, parent, target)
    with pytest.raises(InvalidRequest, match="unknown"):
        await gw.prepare_cpfp(carol.address, "ab" * 32, target)
    with pytest.raises(TransferRejected, match="exceeds the cap"):
        await gw.prepare_cpfp(carol.address, parent, target, cap_units=500)

    unsigned = await gw.prepare_cpfp(carol.address, parent, target)
    assert unsigned.transfer.signers == (carol.address,)
    assert unsigned.transfer.amount_units == 0  # the wallet's own coins back to it
    fee = unsigned.fee.native_units
    assert body(unsigned).outputs == (txcodec.Output(carol.address, 1_000_000 - fee),)
    child = signed(gw, unsigned, carol)
    assert await gw.broadcast(child) == child.tx_hash
    entry = picky.call("getmempoolentry", child.tx_hash)
    package_rate = Decimal(str(entry["fees"]["ancestor"])) * COIN / entry["ancestorsize"]
    assert entry["ancestorcount"] == 2 and package_rate >= target
    assert package_rate < target * Decimal("1.2")  # and no more than that asks
    of_parent = picky.call("getmempoolentry", parent)
    assert (
        Decimal(str(of_parent["fees"]["descendant"])) * COIN / of_parent["descendantsize"] >= target
    )
    assert await gw.sighting(carol.address, BTC, child) == Sighting.PENDING
    with pytest.raises(InvalidRequest, match="spent already"):
        await gw.prepare_cpfp(carol.address, parent, target)

    picky.mine(1)  # the package pays above what blocks take: both mined
    assert picky.call("getrawtransaction", parent, 1)["confirmations"] == 1
    assert picky.call("getrawtransaction", child.tx_hash, 1)["confirmations"] == 1
    with pytest.raises(InvalidRequest, match="confirmed already"):
        await gw.prepare_cpfp(carol.address, parent, target)
    assert await gw.balance(carol.address, BTC) == 1_000_000 - unsigned.fee.native_units


async def test_a_node_that_does_not_answer_raises(picky: Bitcoind) -> None:
    for backend in ("core", "esplora"):
        dead = make_gateway(backend, "http://u:p@127.0.0.1:1")
        try:
            with pytest.raises(NodeUnavailable, match="unreachable"):
                await dead.sighting(Wallet().address, BTC, _offline_send(dead))
            other = SignedTransfer(_offline_send(dead).raw, "00" * 32)  # not its hash
            with pytest.raises(ServerError, match="does not match its hash"):
                await dead.sighting(Wallet().address, BTC, other)
        finally:
            await dead.aclose()


class _NoNode:
    """A backend that fails the test when anything is asked of it."""

    name = "none"

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the ladder asked the node: {name}")


def _offline_send(gateway: BitcoinGateway) -> SignedTransfer:
    """A signed transaction of a coin no node knows, built without one."""
    alice = Wallet()
    coin = Utxo("11" * 32, 0, 100_000, None)
    made = txcodec.Body(
        "regtest", 0, ((coin, alice.address),), (txcodec.Output(alice.address, 90_000),), 10_000, {}
    )
    payloads = txcodec.payloads(gateway.network, made)
    unsigned = UnsignedTransfer(
        Transfer(BTC, alice.address, alice.address, 90_000, alice.address),
        FeeQuote(10_000),
        payloads[alice.address],
        made.encode(),
        payloads=payloads,
    )
    return signed(gateway, unsigned, alice)
