"""The Bitcoin gateway on a real regtest node, on both backends (Core JSON-RPC's watch-only
wallet, and the Esplora API served from the same node): sends, reads, fees and refusals."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest
from btc_support import BTC, LostAnswer, Wallet, make_gateway, send, signed_transfer

from walletcore.domain.errors import (
    AddressUnknown,
    BroadcastTimeout,
    DomainError,
    InsufficientFunds,
    InvalidRequest,
    NodeUnavailable,
    TransactionNotFound,
    TransferRejected,
)
from walletcore.ports import SendMinimum, Transfer
from walletcore_chains.bitcoin.gateway import BitcoinGateway
from walletcore_chains.bitcoin.txcodec import RBF_SEQUENCE
from walletcore_chains.testing.bitcoind import Bitcoind

COIN = 100_000_000


def funded(node: Bitcoind, btc: str = "1") -> Wallet:
    wallet = Wallet()
    node.fund(wallet.address, btc)
    node.mine(1)
    return wallet


async def test_a_new_address_is_unknown_to_the_indexer(gateway: BitcoinGateway) -> None:
    with pytest.raises(AddressUnknown) as caught:
        await gateway.balance(Wallet().address, BTC)
    assert caught.value.status == 404


async def test_fund_by_mining_fee_send_pending_then_success(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    alice, bob = Wallet(), Wallet()
    node.mine(1, alice.address)  # a coinbase: immature for 100 blocks
    assert await gateway.balance(alice.address, BTC) == 0
    node.mine(100)
    reward = await gateway.balance(alice.address, BTC)
    assert reward > 0

    quote = await gateway.fee(alice.address, bob.address, BTC, COIN)
    rate = await gateway.fee_rate()
    assert quote.native_units >= 141 * rate  # one input, two outputs: 141 vB at least

    txid, _ = await send(gateway, alice, bob.address, COIN)
    raw = node.call("getrawtransaction", txid, 1)
    assert raw["txid"] == txid  # the hash stored is the node's
    assert all(v["sequence"] == RBF_SEQUENCE for v in raw["vin"])  # replace-by-fee
    assert Decimal(str(raw["vout"][0]["value"])) == 1

    for who, kind in ((alice, "send"), (bob, "receive")):
        row = await gateway.lookup(who.address, BTC, txid)
        assert (row.type, row.amount_units, row.status, row.date) == (kind, COIN, "pending", None)
        assert row.fee_units == quote.native_units
    node.mine(1)
    assert (await gateway.lookup(bob.address, BTC, txid)).status == "pending"  # 1 of 2 deep
    node.mine(1)
    row = await gateway.lookup(bob.address, BTC, txid)
    assert row.status == "success" and row.date is not None

    assert await gateway.balance(bob.address, BTC) == COIN
    assert await gateway.balance(alice.address, BTC) == reward - COIN - quote.native_units
    sent = await gateway.history(alice.address, BTC, 10)
    got = await gateway.history(bob.address, BTC, 10)
    assert [(r.hash, r.type, r.amount_units) for r in got] == [(txid, "receive", COIN)]
    assert sent[0].hash == txid and sent[0].type == "send"
    received = sum(r.amount_units or 0 for r in sent if r.type == "receive")
    spent = sum((r.amount_units or 0) + r.fee_units for r in sent if r.type == "send")
    assert received == reward  # the coinbase
    assert received - spent == await gateway.balance(alice.address, BTC)


async def test_unconfirmed_change_is_spent(gateway: BitcoinGateway, node: Bitcoind) -> None:
    alice, bob = funded(node), Wallet()
    first, _ = await send(gateway, alice, bob.address, COIN // 4)
    second, _ = await send(gateway, alice, bob.address, COIN // 4)
    parents = [v["txid"] for v in node.call("getrawtransaction", second, 1)["vin"]]
    assert parents == [first]  # the first send's change, still unconfirmed
    # coins received from someone else, unconfirmed, are not spendable yet
    node.fund(bob.address, "0.1")
    assert await gateway.balance(bob.address, BTC) == 0
    node.mine(1)
    assert await gateway.balance(bob.address, BTC) == COIN // 2 + COIN // 10


async def test_ten_concurrent_sends_never_pick_the_same_coins(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    alice = funded(node, "2")
    node.fund(alice.address, "0.3")
    node.mine(1)
    recipients = [Wallet() for _ in range(10)]
    results = await asyncio.gather(
        *(send(gateway, alice, r.address, 5_000_000 + i) for i, r in enumerate(recipients))
    )
    txids = [t for t, _ in results]
    assert len(set(txids)) == 10
    mempool = set(node.call("getrawmempool"))
    assert set(txids) <= mempool  # all valid, all accepted
    spent = [
        (v["txid"], v["vout"]) for t in txids for v in node.call("getrawtransaction", t, 1)["vin"]
    ]
    assert len(spent) == len(set(spent))  # no coin spent twice
    node.mine(1)
    for i, r in enumerate(recipients):
        assert await gateway.balance(r.address, BTC) == 5_000_000 + i


async def test_the_platform_adds_its_own_input_and_pays_the_fee(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    user, platform, bob = funded(node), funded(node, "0.5"), Wallet()
    before = await gateway.balance(platform.address, BTC)
    txid, quote = await send(gateway, user, bob.address, COIN // 2, sponsor=platform)
    raw = node.call("getrawtransaction", txid, 2)
    owners = []
    for v in raw["vin"]:
        parent = node.call("getrawtransaction", v["txid"], 1)
        owners.append(parent["vout"][v["vout"]]["scriptPubKey"]["address"])
    assert owners[-1] == platform.address and user.address in owners  # one tx, two signers
    node.mine(2)
    assert await gateway.balance(bob.address, BTC) == COIN // 2
    assert await gateway.balance(user.address, BTC) == COIN // 2  # the fee is not the user's
    assert await gateway.balance(platform.address, BTC) == before - quote.native_units
    user_row = await gateway.lookup(user.address, BTC, txid)
    platform_row = await gateway.lookup(platform.address, BTC, txid)
    assert (user_row.type, user_row.amount_units) == ("send", COIN // 2)
    assert (platform_row.type, platform_row.amount_units) == ("send", 0)
    assert platform_row.fee_units == quote.native_units


async def test_user_fee_from_the_amount_sends_the_whole_balance(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    alice, bob = funded(node, "0.2"), Wallet()
    held = await gateway.balance(alice.address, BTC)
    _txid, quote = await send(gateway, alice, bob.address, held, fee_from_amount=True)
    node.mine(1)
    assert await gateway.balance(bob.address, BTC) == held - quote.native_units
    assert await gateway.balance(alice.address, BTC) == 0


async def test_dust_is_refused_before_anything_is_signed(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    alice, bob = funded(node, "0.01"), Wallet()
    with pytest.raises(InvalidRequest, match="dust limit") as caught:
        await send(gateway, alice, bob.address, 200)
    assert caught.value.status == 400
    txid, _ = await send(gateway, alice, bob.address, 294)  # the P2WPKH limit itself
    assert txid in node.call("getrawmempool")


@pytest.mark.parametrize(
    ("kind", "dust"), [("bech32", 294), ("bech32m", 330), ("p2sh-segwit", 540), ("legacy", 546)]
)
async def test_the_minimum_send_is_the_dust_limit_of_the_recipients_address_type(
    gateway: BitcoinGateway, node: Bitcoind, kind: str, dust: int
) -> None:
    """What the core checks before anything is signed (`MinimumSends`), per address type."""
    address = node.call("getnewaddress", "", kind, wallet="miner")
    minimum = await gateway.minimum_send(gateway.validate_address(address), BTC)
    assert minimum == SendMinimum(dust, "the dust limit of its address type")


async def test_insufficient_funds_is_a_clear_400(gateway: BitcoinGateway, node: Bitcoind) -> None:
    alice, bob = funded(node, "0.01"), Wallet()
    with pytest.raises(InsufficientFunds, match="Insufficient BTC") as caught:
        await send(gateway, alice, bob.address, COIN)
    assert caught.value.status == 400
    assert await gateway.balance(alice.address, BTC) == COIN // 100  # nothing moved


async def test_a_double_spend_is_refused_and_nothing_sent(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    alice, bob, carol = funded(node, "0.05"), Wallet(), Wallet()
    # a second process that does not share this one's lease or reservations
    other = make_gateway(gateway.backend.name, _url_of(gateway, node))
    try:
        quote = await gateway.fee(alice.address, bob.address, BTC, 1_000_000)
        first = await gateway.prepare(
            Transfer(BTC, alice.address, bob.address, 1_000_000, alice.address), quote
        )
        second = await other.prepare(
            Transfer(BTC, alice.address, carol.address, 1_000_000, alice.address), quote
        )
        one = gateway.assemble(first, {alice.address: alice.sign(first.payload)})
        two = other.assemble(second, {alice.address: alice.sign(second.payload)})
        assert await gateway.broadcast(one) == one.tx_hash
        with pytest.raises(TransferRejected, match="double spend") as caught:
            await other.broadcast(two)
        assert caught.value.status == 502
        assert two.tx_hash not in node.call("getrawmempool")
        assert await gateway.broadcast(one) == one.tx_hash  # the same bytes again: sent
    finally:
        await other.aclose()


async def test_an_unknown_broadcast_outcome_is_a_504_and_a_retry_resends_the_same_bytes(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    alice, bob = funded(node, "0.05"), Wallet()
    signed, quote = await signed_transfer(gateway, alice, bob.address, 1_000_000)
    real = gateway.backend
    lost = LostAnswer(real)  # the first broadcast reaches the node, its answer is lost
    gateway.backend = lost
    try:
        with pytest.raises(BroadcastTimeout) as caught:
            await gateway.broadcast(signed)
        assert caught.value.status == 504
        assert "outcome unknown" in caught.value.message
        assert "the same signed transaction is sent again" in caught.value.message
        assert signed.tx_hash in node.call("getrawmempool")  # it did leave
        # the retry: the same SignedTransfer, the node has it already -> sent, same txid
        assert await gateway.broadcast(signed) == signed.tx_hash
    finally:
        gateway.backend = real
    assert lost.sent == [signed.raw.hex()] * 2  # the very same bytes, twice; no new tx
    assert signed.tx_hash in node.call("getrawmempool")
    node.mine(1)
    assert await gateway.broadcast(signed) == signed.tx_hash  # again once mined: still sent
    assert await gateway.balance(bob.address, BTC) == 1_000_000  # exactly once
    got = await gateway.history(bob.address, BTC, 10)
    assert [(r.hash, r.type, r.amount_units) for r in got] == [
        (signed.tx_hash, "receive", 1_000_000)
    ]
    assert await gateway.balance(alice.address, BTC) == 5_000_000 - 1_000_000 - quote.native_units


async def test_a_node_refusal_is_not_a_504(gateway: BitcoinGateway, node: Bitcoind) -> None:
    alice, bob, carol = funded(node, "0.05"), Wallet(), Wallet()
    # a second process that does not share this one's lease or reservations
    other = make_gateway(gateway.backend.name, _url_of(gateway, node))
    real = gateway.backend
    try:
        one, _ = await signed_transfer(gateway, alice, bob.address, 1_000_000)
        two, _ = await signed_transfer(other, alice, carol.address, 1_000_000)
        gateway.backend = LostAnswer(real)
        with pytest.raises(BroadcastTimeout):  # `one` reached the node; its answer was lost
            await gateway.broadcast(one)
        # the node answers `two` (same coins) with a refusal: a 502, never an unknown outcome
        with pytest.raises(DomainError) as caught:
            await other.broadcast(two)
        assert not isinstance(caught.value, BroadcastTimeout)
        assert isinstance(caught.value, TransferRejected)
        assert caught.value.status == 502
        assert "double spend" in caught.value.message
        assert "nothing was sent" in caught.value.message
        assert not other._reserved  # refused: its coins are free again in that process
        mempool = node.call("getrawmempool")
        assert one.tx_hash in mempool and two.tx_hash not in mempool
        assert await gateway.broadcast(one) == one.tx_hash  # the retry of `one`: sent
    finally:
        gateway.backend = real
        await other.aclose()


async def test_an_unreachable_node_is_a_503(node: Bitcoind) -> None:
    for backend in ("core", "esplora"):
        dead = make_gateway(backend, "http://u:p@127.0.0.1:1")
        try:
            with pytest.raises(NodeUnavailable, match="unreachable") as caught:
                await dead.balance(Wallet().address, BTC)
            assert caught.value.status == 503
            with pytest.raises(NodeUnavailable):
                await dead.fee(Wallet().address, Wallet().address, BTC, 1000)
            with pytest.raises(NodeUnavailable, match="nothing was sent"):
                await dead._send(b"\x00", "00" * 32)
        finally:
            await dead.aclose()


async def test_lookups_of_other_and_unknown_transactions(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    alice, bob = funded(node, "0.01"), Wallet()
    txid, _ = await send(gateway, alice, bob.address, 10_000)
    with pytest.raises(TransactionNotFound):
        await gateway.lookup(Wallet().address, BTC, txid)  # not this wallet's
    with pytest.raises(TransactionNotFound):
        await gateway.lookup(alice.address, BTC, "ab" * 32)
    with pytest.raises(TransactionNotFound):
        await gateway.lookup(alice.address, BTC, "not-a-hash")


def test_addresses_follow_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    from walletcore.domain.assets import Chain
    from walletcore_chains.bitcoin import validate_address

    regtest = Wallet().address
    assert regtest.startswith("bcrt1q")
    assert validate_address(Chain.BITCOIN, regtest.upper()) == regtest
    with pytest.raises(InvalidRequest, match="mainnet addresses are not accepted on regtest"):
        validate_address(Chain.BITCOIN, "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4")
    with pytest.raises(InvalidRequest, match="testnet addresses"):
        validate_address(Chain.BITCOIN, "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx")
    monkeypatch.setenv("WALLETCORE_BITCOIN_NETWORK", "signet")
    assert Wallet().address.startswith("tb1q")
    assert validate_address(Chain.BITCOIN, "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx")
    with pytest.raises(InvalidRequest, match="testnet addresses are not accepted on signet"):
        validate_address(Chain.BITCOIN, regtest)


def _url_of(gateway: BitcoinGateway, node: Bitcoind) -> str:
    if gateway.backend.name == "core":
        return node.url
    return str(gateway.backend._client.base_url)  # type: ignore[attr-defined]
