"""The deposit scan of `BitcoinGateway` (`DepositScanner`) on a real regtest node, on both
backends: payments to every address form seen in the mempool (Core) then in their block
with their output and exact satoshis, several outputs of one transaction, thousands of
watched addresses in a few requests, a range equal to its blocks one by one, reorgs that
put a transaction back in the mempool, mine it again or replace it by a double spend, the
node's failures; and the core's deposit watch over the gateway, from `seen` to
`confirmed`, and to `reversed`."""

from __future__ import annotations

import json
import os
from decimal import Decimal
from typing import Any

import httpx
import pytest
from btc_support import BTC, Wallet, make_gateway

from walletcore.clock import ManualClock
from walletcore.domain.assets import Chain
from walletcore.domain.deposits import BlockRef, Deposit, DepositStatus, Incoming
from walletcore.domain.errors import DomainError
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports import MEMPOOL, ChainGateway, DepositScanner
from walletcore.services.deposits import DepositWatch
from walletcore.testing import CONTRACT_CATALOG, InMemoryStorage
from walletcore_chains import bclib
from walletcore_chains.bitcoin.gateway import SCAN_SPAN, BitcoinGateway
from walletcore_chains.bitcoin.rawblocks import parse_block, parse_transaction
from walletcore_chains.testing.bitcoind import Bitcoind

COIN = 100_000_000


class Requests:
    """The HTTP requests the gateway's backend sends (JSON-RPC methods, or Esplora paths)."""

    def __init__(self, gw: BitcoinGateway) -> None:
        backend: Any = gw.backend
        client: httpx.AsyncClient = (
            backend._rpc._client if backend.name == "core" else backend._client
        )
        self.sent: list[list[str]] = []

        async def hook(request: httpx.Request) -> None:
            if request.method == "POST" and request.content:
                body = json.loads(request.content)
                calls = body if isinstance(body, list) else [body]
                self.sent.append([c["method"] for c in calls])
            else:
                self.sent.append([request.url.path])

        client.event_hooks = {"request": [hook], "response": []}

    def clear(self) -> None:
        self.sent.clear()

    @property
    def methods(self) -> list[str]:
        return [m for request in self.sent for m in request]


def p2wpkh_addresses(count: int) -> list[str]:
    encode = bclib.encoding().pubkeyhash_to_addr_bech32
    return [encode(os.urandom(20), prefix="bcrt", witver=0) for _ in range(count)]


def vout_of(node: Bitcoind, txid: str, address: str) -> int:
    """The output `n` of `txid` paying `address`, as the node decodes it."""
    tx = node.call("getrawtransaction", txid, 1)
    found = [o["n"] for o in tx["vout"] if o["scriptPubKey"].get("address") == address]
    assert len(found) == 1, found
    return int(found[0])


def tip(node: Bitcoind) -> BlockRef:
    best = node.call("getbestblockhash")
    return BlockRef(int(node.call("getblockheader", best)["height"]), best)


def address_forms(node: Bitcoind) -> dict[str, str]:
    """One address of each form: the wallets' P2WPKH (a key of ours), and the node's P2PKH,
    P2SH, P2TR and a P2WSH multisig."""
    forms = {"p2wpkh": Wallet().address}
    for kind, name in (("legacy", "p2pkh"), ("p2sh-segwit", "p2sh"), ("bech32m", "p2tr")):
        forms[name] = node.call("getnewaddress", "", kind, wallet="miner")
    key = node.call("getaddressinfo", node.call("getnewaddress", wallet="miner"), wallet="miner")
    forms["p2wsh"] = node.call("createmultisig", 1, [key["pubkey"]], "bech32")["address"]
    return forms


def double_spend(node: Bitcoind, txid: str) -> str:
    """The coins `txid` spends, to the miner at a higher fee, mined in a block of their
    own (whatever the mempool holds); the new block's hash."""
    spent = node.call("getrawtransaction", txid, 1)["vin"]
    value = sum(
        Decimal(str(node.call("getrawtransaction", v["txid"], 1)["vout"][v["vout"]]["value"]))
        for v in spent
    )
    conflict = node.call(
        "createrawtransaction",
        [{"txid": v["txid"], "vout": v["vout"]} for v in spent],
        {node.miner: str(value - Decimal("0.001"))},
    )
    signed = node.call("signrawtransactionwithwallet", conflict, wallet="miner")
    assert signed["complete"]
    return str(node.call("generateblock", node.miner, [signed["hex"]])["hash"])


async def test_the_gateway_scans_at_its_lifecycle_depth(gateway: BitcoinGateway) -> None:
    assert isinstance(gateway, DepositScanner)
    assert gateway.confirmations == gateway.options.confirmations == 2
    assert gateway.scan_span == SCAN_SPAN == 50
    three = make_gateway("core", "http://127.0.0.1:1", confirmations=3)
    try:
        assert three.confirmations == 3
    finally:
        await three.aclose()


async def test_each_address_form_is_found_in_the_mempool_then_in_its_block(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    forms = address_forms(node)
    amounts = {name: Decimal("0.1234567") + Decimal(i) / COIN for i, name in enumerate(forms)}
    # matured coins for every payment first: `fund` mines 101 blocks when the miner runs
    # low, which would mine the payments made before it out of the mempool
    if Decimal(str(node.call("getbalance", wallet="miner"))) < sum(amounts.values()) + 2:
        node.mine(101)
    paid = {name: node.fund(address, amounts[name]) for name, address in forms.items()}
    watched = list(forms.values())

    def expected(block: BlockRef | None) -> set[Incoming]:
        return {
            Incoming(
                BTC.chain,
                paid[name],
                f"out:{vout_of(node, paid[name], address)}",
                address,
                BTC.id,
                int(amounts[name] * COIN),
                block,
            )
            for name, address in forms.items()
        }

    pending = await gateway.mempool(watched)
    if gateway.backend.name == "core":
        assert set(pending) == expected(None) and len(pending) == len(forms)
    else:
        assert pending == []  # Esplora: found once mined
    for txid in paid.values():
        assert await gateway.locate(txid, None) is MEMPOOL

    node.mine(1)
    block = tip(node)
    assert await gateway.head() == block
    assert await gateway.block(block.height) == block
    found = await gateway.scan(block.height, block.height, watched)
    assert set(found) == expected(block) and len(found) == len(forms)
    assert {c.amount_units for c in found} == {int(a * COIN) for a in amounts.values()}
    for txid in paid.values():
        assert await gateway.locate(txid, block) == block
        assert await gateway.locate(txid, None) == block  # mined since it was last seen
        unknown = BlockRef(block.height, os.urandom(32).hex())  # a block this node never had
        assert await gateway.locate(txid, unknown) == block
    assert await gateway.mempool(watched) == []


async def test_an_address_is_reported_as_stored_whatever_its_case(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    stored = Wallet().address.upper()
    txid = node.fund(stored.lower(), "0.3")
    node.mine(1)
    block = tip(node)
    found = await gateway.scan(block.height, block.height, [stored])
    assert [(c.tx_hash, c.address, c.amount_units) for c in found] == [(txid, stored, 30_000_000)]


async def test_one_transaction_paying_two_watched_addresses_and_others(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    first, second, stranger = Wallet().address, Wallet().address, Wallet().address
    txid = node.call(
        "sendmany",
        "",
        {first: "0.25", second: "0.00000546", stranger: "0.4"},
        wallet="miner",
    )
    node.mine(1)
    block = tip(node)
    outputs = node.call("getrawtransaction", txid, 1)["vout"]
    assert len(outputs) == 4  # the change is the fourth, unwatched like the stranger
    found = await gateway.scan(block.height, block.height, [first, second])
    assert sorted(found, key=lambda c: c.position) == sorted(
        [
            Incoming(BTC.chain, txid, f"out:{vout_of(node, txid, first)}", first, BTC.id,
                     25_000_000, block),
            Incoming(BTC.chain, txid, f"out:{vout_of(node, txid, second)}", second, BTC.id,
                     546, block),
        ],
        key=lambda c: c.position,
    )  # fmt: skip


async def test_thousands_of_watched_addresses_in_one_scan(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    watched = p2wpkh_addresses(2_000)
    paid = watched[::100]  # 20 of them, in one transaction
    txid = node.call("sendmany", "", {a: "0.001" for a in paid}, wallet="miner")
    node.mine(1)
    block = tip(node)
    requests = Requests(gateway)
    found = await gateway.scan(block.height - 1, block.height, watched)
    assert {c.address for c in found} == set(paid)
    assert {(c.tx_hash, c.amount_units, c.block) for c in found} == {(txid, 100_000, block)}
    # a few requests for two blocks, whatever the number of addresses
    if gateway.backend.name == "core":
        assert requests.sent == [
            ["getblockhash", "getblockhash"],
            ["getblock"],
            ["getblock"],
            ["getblockhash"],
        ]
    else:
        assert len(requests.sent) == 5  # two heights, two raw blocks, the last height again


async def test_a_range_is_the_union_of_its_blocks(gateway: BitcoinGateway, node: Bitcoind) -> None:
    watched = p2wpkh_addresses(5)
    start = tip(node).height + 1
    funded = []
    for i, address in enumerate(watched):
        funded.append(node.fund(address, f"0.0{i + 1}"))
        if i % 2 == 0:
            funded.append(node.fund(watched[0], "0.5"))  # some blocks hold two payments
        node.mine(1)
    node.mine(1)  # and one holds none
    last = tip(node).height
    whole = await gateway.scan(start, last, watched)
    single = [c for h in range(start, last + 1) for c in await gateway.scan(h, h, watched)]
    assert whole == single
    missing = [t for t in funded if t not in {c.tx_hash for c in whole}]
    assert len(whole) == 8 and not missing, [  # where the node has what was not found
        (t, node.call("getrawtransaction", t, 1).get("blockhash"), start, last) for t in missing
    ]
    assert [c.block.height for c in whole if c.block] == sorted(
        c.block.height for c in whole if c.block
    )
    assert await gateway.scan(start, last, []) == []


async def test_a_reorg_puts_it_back_in_the_mempool_then_a_double_spend_is_mined(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    node.mine(1)  # the coins it spends are all mined before the reorg
    address = Wallet().address
    txid = node.fund(address, "0.7")
    node.mine(1)
    mined = tip(node)
    [credit] = await gateway.scan(mined.height, mined.height, [address])
    assert credit.block == mined and credit.amount_units == 70_000_000
    assert await gateway.locate(txid, mined) == mined

    node.call("invalidateblock", mined.hash)  # the block leaves the chain, its txs wait
    assert txid in node.call("getrawmempool")
    assert await gateway.locate(txid, mined) is MEMPOOL
    assert await gateway.head() == BlockRef(mined.height - 1, tip(node).hash)
    assert await gateway.block(mined.height) is None
    if gateway.backend.name == "core":
        assert await gateway.mempool([address]) == [
            Incoming(BTC.chain, txid, credit.position, address, BTC.id, 70_000_000, None)
        ]
    with pytest.raises(DomainError) as above:
        await gateway.scan(mined.height, mined.height, [address])
    assert above.value.status == 503  # no block there: never an empty answer

    new_hash = double_spend(node, txid)
    assert txid not in node.call("getrawmempool")

    assert await gateway.locate(txid, mined) is None
    assert await gateway.locate(txid, None) is None
    assert await gateway.block(mined.height) == BlockRef(mined.height, new_hash)
    assert await gateway.scan(mined.height, mined.height, [address]) == []
    assert await gateway.mempool([address]) == []


async def test_a_reorg_that_mines_it_again_moves_it_to_the_new_block(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    node.mine(1)
    address = Wallet().address
    txid = node.fund(address, "0.2")
    node.mine(1)
    old = tip(node)
    node.mine(1)
    node.call("invalidateblock", old.hash)  # two blocks leave; the tx waits again
    node.mine(3, Wallet().address)  # the new branch (other coinbases): it is in its first
    again = BlockRef(old.height, node.call("getblockhash", old.height))
    assert again != old
    assert await gateway.locate(txid, old) == again
    [credit] = await gateway.scan(old.height, old.height + 2, [address])
    assert (credit.tx_hash, credit.block) == (txid, again)


async def test_unknown_transactions_are_nowhere(gateway: BitcoinGateway, node: Bitcoind) -> None:
    unknown = os.urandom(32).hex()
    assert await gateway.locate(unknown, None) is None
    assert await gateway.locate(unknown, tip(node)) is None
    head = await gateway.head()
    assert await gateway.block(head.height + 1) is None
    assert await gateway.block(-1) is None


async def test_core_decodes_each_mempool_transaction_once(node: Bitcoind) -> None:
    gw = make_gateway("core", node.url)
    try:
        watched = p2wpkh_addresses(3)
        node.mine(1)  # an empty mempool
        paid = [node.fund(a, "0.01") for a in watched[:2]]
        requests = Requests(gw)
        first = await gw.mempool(watched)
        assert {c.tx_hash for c in first} == set(paid)
        decoded = requests.methods.count("getrawtransaction")
        assert decoded >= 2 and requests.methods[0] == "getrawmempool"

        requests.clear()
        assert await gw.mempool(watched) == first
        assert requests.methods == ["getrawmempool"]  # nothing decoded again

        third = node.fund(watched[2], "0.02")
        requests.clear()
        found = await gw.mempool(watched)
        assert {c.tx_hash for c in found} == {*paid, third}
        assert requests.methods.count("getrawtransaction") == 1
    finally:
        await gw.aclose()


async def test_a_node_that_does_not_answer_is_a_503() -> None:
    for backend in ("core", "esplora"):
        gw = make_gateway(backend, "http://walletcore:secret@127.0.0.1:1")
        try:
            for call in (
                gw.head(),
                gw.block(1),
                gw.scan(1, 2, [Wallet().address]),
                *([gw.mempool([Wallet().address])] if backend == "core" else []),
                gw.locate("00" * 32, BlockRef(1, "11" * 32)),
            ):
                with pytest.raises(DomainError) as caught:
                    await call
                assert caught.value.status == 503
                assert "secret" not in str(caught.value)
        finally:
            await gw.aclose()


def test_raw_blocks_parse_as_the_node_decodes_them(node: Bitcoind) -> None:
    sender = node.call("getnewaddress", "", "legacy", wallet="miner")
    node.fund(sender, "1")
    node.call("sendmany", "", {a: "0.003" for a in p2wpkh_addresses(3)}, wallet="miner")
    node.mine(1)
    block_hash = node.call("getbestblockhash")
    raw = bytes.fromhex(node.call("getblock", block_hash, 0))
    decoded = node.call("getblock", block_hash, 2)
    found, previous, txs = parse_block(raw)
    assert (found, previous) == (block_hash, decoded["previousblockhash"])
    assert [t.txid for t in txs] == [t["txid"] for t in decoded["tx"]]
    assert [t.outputs for t in txs] == [
        tuple(
            (int(Decimal(str(o["value"])) * COIN), bytes.fromhex(o["scriptPubKey"]["hex"]))
            for o in t["vout"]
        )
        for t in decoded["tx"]
    ]
    one = decoded["tx"][1]
    assert parse_transaction(bytes.fromhex(one["hex"])) == txs[1]
    for broken in (raw[:-1], raw + b"\x00", raw[:67] + bytes([raw[67] ^ 1]) + raw[68:]):
        with pytest.raises(ValueError):
            parse_block(broken)


# -- the deposit watch of the core over this gateway ---------------------------------------


async def _watching(gateway: BitcoinGateway) -> tuple[DepositWatch, InMemoryStorage, str]:
    """The core's deposit watch over the gateway, one user wallet's address watched."""
    storage, clock = InMemoryStorage(), ManualClock()
    address = Wallet().address
    async with storage.write() as unit:
        wallet = WalletRecord(
            "client-1", WalletOwner.USER, "user-1", b"", {BTC.chain: address}, clock.now()
        )
        assert await unit.wallets.add(wallet)
    gateways: dict[Chain, ChainGateway] = {BTC.chain: gateway}
    watch = DepositWatch(storage=storage, clock=clock, gateways=gateways, catalog=CONTRACT_CATALOG)
    assert watch.chains == (BTC.chain,)
    first = await watch.scan(BTC.chain)  # places the cursor
    assert first.error is None
    return watch, storage, address


async def _stored(storage: InMemoryStorage) -> list[Deposit]:
    async with storage.read() as unit:
        return await unit.deposits.page("client-1", None, limit=10)


async def test_the_watch_sees_a_deposit_then_confirms_it_at_depth(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    watch, storage, address = await _watching(gateway)
    txid = node.fund(address, "0.4")
    report = await watch.scan(BTC.chain)
    if gateway.backend.name == "core":
        [seen] = await _stored(storage)
        assert (seen.status, seen.block, seen.tx_hash) == (DepositStatus.SEEN, None, txid)
    else:
        assert report.found == 0 and await _stored(storage) == []  # Esplora: once mined
    node.mine(1)
    mined = tip(node)
    report = await watch.scan(BTC.chain)
    assert report.error is None
    [deposit] = await _stored(storage)
    assert (deposit.status, deposit.block, deposit.amount_units) == (
        DepositStatus.SEEN,
        mined,
        40_000_000,
    )
    node.mine(1)  # two deep: the gateway's depth
    report = await watch.scan(BTC.chain)
    assert report.confirmed == 1
    [done] = await _stored(storage)
    assert (done.status, done.block, done.address) == (DepositStatus.CONFIRMED, mined, address)
    assert done.position == f"out:{vout_of(node, txid, address)}"


async def test_the_watch_reverses_a_deposit_a_reorg_and_a_double_spend_took_away(
    gateway: BitcoinGateway, node: Bitcoind
) -> None:
    node.mine(1)  # the coins it spends are all mined before the reorg
    watch, storage, address = await _watching(gateway)
    txid = node.fund(address, "0.6")
    node.mine(1)
    mined = tip(node)
    await watch.scan(BTC.chain)
    [seen] = await _stored(storage)
    assert (seen.status, seen.block) == (DepositStatus.SEEN, mined)

    node.call("invalidateblock", mined.hash)
    double_spend(node, txid)
    report = await watch.scan(BTC.chain)
    assert report.error is None and report.rewound  # the cursor's block left the chain
    assert report.reversed == 1
    [gone] = await _stored(storage)
    assert (gone.status, gone.block, gone.tx_hash) == (DepositStatus.REVERSED, None, txid)
