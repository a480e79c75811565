"""The Bitcoin deposit scan without a node: raw blocks and transactions read as the node
serialises them (regtest's genesis block, a legacy and a segwit transaction), refused
when truncated, padded or not matching their merkle root; a range read again when the
chain moves under the scan, and refused (503) when it keeps moving or falls short.
(On a real node: tests/integration/bitcoin/test_bitcoin_deposits.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from hashlib import sha256

import pytest

from walletcore.domain.deposits import BlockRef, Incoming
from walletcore.domain.errors import DomainError
from walletcore.ports.deposits import MEMPOOL, Unmined
from walletcore_chains import bclib
from walletcore_chains.bitcoin import validate_address
from walletcore_chains.bitcoin.blocks import Block, TxOutputs
from walletcore_chains.bitcoin.gateway import BitcoinGateway
from walletcore_chains.bitcoin.network import network_named
from walletcore_chains.bitcoin.rawblocks import parse_block, parse_transaction
from walletcore_chains.bitcoin.scripts import locking_script

REGTEST = network_named("regtest")
GENESIS = "0f9188f13cb7b2c71f2a335e3a4fc328bf5beb436012afca590b1a11466e2206"
GENESIS_RAW = bytes.fromhex(
    "0100000000000000000000000000000000000000000000000000000000000000000000003ba3edfd7a7b12"
    "b27ac72c3e67768f617fc81bc3888a51323a9fb8aa4b1e5e4adae5494dffff7f2002000000010100000001"
    "0000000000000000000000000000000000000000000000000000000000000000ffffffff4d04ffff001d01"
    "04455468652054696d65732030332f4a616e2f32303039204368616e63656c6c6f72206f6e206272696e6b"
    "206f66207365636f6e64206261696c6f757420666f722062616e6b73ffffffff0100f2052a010000004341"
    "04678afdb0fe5548271967f1a67130b7105cd6a828e03909a67962e0ea1f61deb649f6bc3f4cef38c4f355"
    "04e51ec112de5c384df7ba0b8d578a4c702b6bf11d5fac00000000"
)
#: a transaction spending a P2PKH coin (no witness), as a regtest node signed it
LEGACY = (
    "1177db8de2384f20fa38d6e27c068271026a7da547f4eaf0d89c49bf88a83a2a",
    (
        "0200000001f892ed90c432d37cc53ffc8dd82ffcc80a85606ec7356dd6aa5a23cdf03bdb5d010000006a47"
        "30440220171f0c706f969d86588801a0ed09b81a40414d61820e7570a0801e5a4cff36b502201d3195bf53"
        "cc15e85369180edb79eeb0bb82efb1692b9ed9d3443d0452ba5437012102f7d69d45d4260f7f285ab2b344"
        "cb491cd58d5cab5b0169c0240ed385637967b2fdffffff01605af40500000000160014d3f5130ac558574e"
        "14010f7d2c4380c46d464aeb00000000"
    ),
)
#: a segwit transaction (marker, flag, a witness) paying two P2PKH outputs
SEGWIT = (
    "5ddb3bf0cd235aaad66d35c76e60850ac8fc2fd88dfc3fc57cd332c490ed92f8",
    (
        "0200000000010112b7128f3bbd85cccb42d983fef05bf6b4f1be5347cc82f1afb310d9d73af8e900000000"
        "00fdffffff0284051024010000001976a914a88e38f4851d4c74d134dd1b86b1ae7946df210488ac00e1f5"
        "05000000001976a914962793c54df9884e2d5ba918d0671d4d4f29e00d88ac02473044022033e3077fc869"
        "06b70226389769c33e4a9a7803f6aed3238b1ae4d20cc219547b02203db141906b522e9617304c6299cb1b"
        "7070dd6054b1071325a83bfec609ffe19f012103f92f829b5504c62078797ada88687992e914a566c8e41a"
        "3f758a58075f72ea0065000000"
    ),
)


def test_the_genesis_block_reads_as_the_node_has_it() -> None:
    found, previous, txs = parse_block(GENESIS_RAW)
    assert (found, previous) == (GENESIS, "0" * 64)
    [coinbase] = txs
    assert coinbase.txid == "4a5e1e4baab89f3a32518a88c31bc87f618f76673e2cc77ab2127b7afdeda33b"
    [(value, script)] = coinbase.outputs
    assert value == 50 * 100_000_000
    assert len(script) == 67 and script[0] == 0x41 and script[-1] == 0xAC  # P2PK


def test_legacy_and_segwit_transactions_read_with_their_txids() -> None:
    legacy = parse_transaction(bytes.fromhex(LEGACY[1]))
    assert legacy.txid == LEGACY[0]
    assert legacy.outputs == (
        (99_900_000, bytes.fromhex("0014d3f5130ac558574e14010f7d2c4380c46d464aeb")),
    )
    segwit = parse_transaction(bytes.fromhex(SEGWIT[1]))
    assert segwit.txid == SEGWIT[0]  # the witness left out of the txid
    assert [v for v, _ in segwit.outputs] == [4_899_997_060, 100_000_000]
    assert segwit.outputs[1][1] == bytes.fromhex(
        "76a914962793c54df9884e2d5ba918d0671d4d4f29e00d88ac"
    )


@pytest.mark.parametrize(
    "broken",
    [
        GENESIS_RAW[:-1],  # truncated
        GENESIS_RAW + b"\x00",  # padded
        GENESIS_RAW[:100],  # cut in a transaction
        GENESIS_RAW[:36] + bytes(32) + GENESIS_RAW[68:],  # another merkle root
        GENESIS_RAW[:80] + b"\x00",  # no transaction
        GENESIS_RAW[:40],  # not even a header
    ],
)
def test_a_block_that_is_not_whole_is_refused(broken: bytes) -> None:
    with pytest.raises(ValueError):
        parse_block(broken)


@pytest.mark.parametrize("raw", [SEGWIT[1][:-2], SEGWIT[1] + "00", LEGACY[1][:120]])
def test_a_transaction_that_is_not_whole_is_refused(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_transaction(bytes.fromhex(raw))


# -- the scan's rules over a chain that moves ----------------------------------------------


def _hash(label: str) -> str:
    return sha256(label.encode()).hexdigest()


class MovingChain:
    """A `BlockSource` of made-up blocks; `reorg_on_read` blocks read, the blocks from
    height 2 are replaced by a new branch (each reorg a new one)."""

    def __init__(self, paying: bytes, height: int = 5) -> None:
        self.paying = paying
        self.branch = 0
        self.reorg_on_read: list[int] = []
        #: the next `blocks_at` answers its first heights from the chain before a reorg
        #: and the rest from after it (the node's chain moved between them)
        self.reorg_within_blocks_at = False
        self.reads = 0
        self.blocks: dict[str, Block] = {}
        self.chain: list[BlockRef] = []
        self._build(0, height)

    def _build(self, start: int, top: int) -> None:
        del self.chain[start:]
        for height in range(start, top + 1):
            ref = BlockRef(height, _hash(f"{height}.{self.branch}"))
            previous = self.chain[-1].hash if self.chain else "0" * 64
            tx = TxOutputs(_hash(f"tx{height}.{self.branch}"), ((1000 + height, self.paying),))
            self.blocks[ref.hash] = Block(ref, previous, (tx,))
            self.chain.append(ref)

    async def best_block(self) -> BlockRef:
        return self.chain[-1]

    async def blocks_at(self, first: int, last: int) -> list[BlockRef]:
        if self.reorg_within_blocks_at and last > 3:
            self.reorg_within_blocks_at = False
            before = self.chain[first:3]
            self.branch += 1
            self._build(2, len(self.chain) - 1)
            return before + self.chain[3 : last + 1]
        return self.chain[first : last + 1]

    async def block(self, ref: BlockRef) -> Block:
        self.reads += 1
        if self.reads in self.reorg_on_read:
            self.branch += 1
            self._build(2, len(self.chain) - 1)
        return self.blocks[ref.hash]  # a block off the chain is still served, as Core does

    async def mempool(self) -> Sequence[TxOutputs]:
        return ()

    async def locate(self, txid: str, last: BlockRef | None) -> BlockRef | Unmined | None:
        return MEMPOOL


class FakeBackend:
    name = "fake"

    def __init__(self, blocks: MovingChain) -> None:
        self.blocks = blocks

    async def aclose(self) -> None:
        pass


def _gateway() -> tuple[BitcoinGateway, MovingChain, str]:
    address = bclib.encoding().pubkeyhash_to_addr_bech32(bytes(20), prefix="bcrt", witver=0)
    chain = MovingChain(locking_script(REGTEST, address))
    gateway = BitcoinGateway(REGTEST, FakeBackend(chain), validate_address)  # type: ignore[arg-type]
    return gateway, chain, address


async def test_a_range_read_while_the_chain_moved_is_read_again() -> None:
    gateway, chain, address = _gateway()
    chain.reorg_on_read = [2]  # after block 1 is read, blocks 2.. change
    found = await gateway.scan(1, 5, [address])
    assert [c.block for c in found] == chain.chain[1:6]  # the new branch only
    assert [c.amount_units for c in found] == [1001, 1002, 1003, 1004, 1005]
    assert found[1] == Incoming(
        gateway.chain, _hash("tx2.1"), "out:0", address, gateway.native.id, 1002, chain.chain[2]
    )
    assert chain.reads == 10  # the range twice


async def test_the_last_block_replaced_after_it_was_read_is_read_again() -> None:
    gateway, chain, address = _gateway()
    chain.reorg_on_read = [5]  # the range 1..5 read on the old branch, then it moves
    found = await gateway.scan(1, 5, [address])
    assert [c.block for c in found] == chain.chain[1:6] and chain.branch == 1


async def test_blocks_that_do_not_link_are_read_again() -> None:
    gateway, chain, address = _gateway()
    chain.reorg_within_blocks_at = True  # 1 and 2 of the old branch, 3.. of the new
    found = await gateway.scan(1, 5, [address])
    assert [c.block for c in found] == chain.chain[1:6]
    assert chain.reads == 3 + 5  # the old 2 does not lead to the new 3: read again


async def test_a_chain_that_keeps_moving_or_falls_short_is_a_503() -> None:
    gateway, chain, address = _gateway()
    chain.reorg_on_read = [2, 7, 12]
    with pytest.raises(DomainError) as moving:
        await gateway.scan(1, 5, [address])
    assert moving.value.status == 503
    with pytest.raises(DomainError) as short:
        await gateway.scan(4, 9, [address])  # the head is 5
    assert short.value.status == 503
    assert await gateway.scan(1, 5, []) == []  # nothing watched: nothing asked
    assert await gateway.block(6) is None and await gateway.block(-1) is None
