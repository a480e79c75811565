"""Raw blocks and transactions (the network's serialisation) read into `TxOutputs`: each
output's value and locking script, each transaction's txid, with no chain library.

- A transaction: version, the segwit marker and flag when present (BIP144), inputs,
  outputs, the witnesses when marked, locktime. Its txid is the double SHA-256 of the
  serialisation without the marker, flag and witnesses, byte-reversed in hex.
- A block: the 80-byte header (its hash is the double SHA-256 of the header,
  byte-reversed), the transaction count, the transactions. `parse_block` checks that the
  header's merkle root is the one of the txids read and that nothing is left over: a
  truncated or padded block is refused (`ValueError`), never read in part.

About 28 ms per MB of block in CPython (bench/btc_scan_bench.py): some 50 ms for a full
mainnet block; the node's own JSON of it (`getblock <hash> 2`) costs several times more to
produce and to decode.
"""

from __future__ import annotations

import asyncio
from hashlib import sha256

from walletcore.domain.deposits import BlockRef
from walletcore_chains.bitcoin.backend import BackendError
from walletcore_chains.bitcoin.blocks import Block, TxOutputs

_HEADER = 80


def _sha256d(data: bytes) -> bytes:
    return sha256(sha256(data).digest()).digest()


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    first = data[pos]
    if first < 0xFD:
        return first, pos + 1
    width = {0xFD: 2, 0xFE: 4, 0xFF: 8}[first]
    end = pos + 1 + width
    if end > len(data):
        raise ValueError("truncated")
    return int.from_bytes(data[pos + 1 : end], "little"), end


def _transaction(data: bytes, pos: int) -> tuple[TxOutputs, bytes, int]:
    """The transaction at `pos`: its outputs, its txid (internal byte order) and where
    the next one starts."""
    start = pos
    pos += 4
    segwit = data[pos] == 0 and data[pos + 1] == 1
    if segwit:
        pos += 2
    body = pos
    inputs, pos = _varint(data, pos)
    for _ in range(inputs):
        pos += 36  # the outpoint
        length, pos = _varint(data, pos)
        pos += length + 4  # the unlocking script, the sequence
    count, pos = _varint(data, pos)
    outputs = []
    for _ in range(count):
        value = int.from_bytes(data[pos : pos + 8], "little")
        length, pos = _varint(data, pos + 8)
        outputs.append((value, data[pos : pos + length]))
        pos += length
    end = pos
    if segwit:
        for _ in range(inputs):
            items, pos = _varint(data, pos)
            for _ in range(items):
                length, pos = _varint(data, pos)
                pos += length
    pos += 4  # locktime
    if pos > len(data):
        raise ValueError("truncated")
    if segwit:
        digest = _sha256d(data[start : start + 4] + data[body:end] + data[pos - 4 : pos])
    else:
        digest = _sha256d(data[start:pos])
    return TxOutputs(digest[::-1].hex(), tuple(outputs)), digest, pos


def parse_transaction(raw: bytes) -> TxOutputs:
    """One serialised transaction; ValueError when it is not exactly one."""
    try:
        tx, _, end = _transaction(raw, 0)
    except (IndexError, KeyError) as exc:
        raise ValueError("truncated") from exc
    if end != len(raw):
        raise ValueError("bytes after the transaction")
    return tx


def block_hash(raw: bytes) -> str:
    """The hash of a serialised block (of its header)."""
    return _sha256d(raw[:_HEADER])[::-1].hex()


def parse_block(raw: bytes) -> tuple[str, str, tuple[TxOutputs, ...]]:
    """A serialised block's hash, its parent's hash and its transactions; ValueError when
    the bytes are not exactly one block whose merkle root matches its transactions."""
    if len(raw) < _HEADER + 1:
        raise ValueError("truncated")
    try:
        count, pos = _varint(raw, _HEADER)
        txs = []
        leaves = []
        for _ in range(count):
            tx, digest, pos = _transaction(raw, pos)
            txs.append(tx)
            leaves.append(digest)
    except (IndexError, KeyError) as exc:
        raise ValueError("truncated") from exc
    if pos != len(raw):
        raise ValueError("bytes after the block's transactions")
    if not leaves or merkle_root(leaves) != raw[36:68]:
        raise ValueError("the transactions do not match the header's merkle root")
    return block_hash(raw), raw[4:36][::-1].hex(), tuple(txs)


def merkle_root(leaves: list[bytes]) -> bytes:
    """The merkle root of txids in internal byte order (the last one paired with itself
    on an odd level)."""
    level = leaves
    while len(level) > 1:
        if len(level) % 2:
            level = [*level, level[-1]]
        level = [_sha256d(level[i] + level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


__all__ = ["block_hash", "merkle_root", "parse_block", "parse_transaction"]


#: A raw block larger than this is parsed in a worker thread (the event loop goes on).
THREAD_PARSE_BYTES = 200_000


async def checked_block(raw: bytes, ref: BlockRef, source: str) -> Block:
    """The block `ref` from its raw bytes as `source` (the node, the indexer) answered them:
    parsed (in a worker thread when large), its header hashing to `ref.hash`; else a
    `BackendError` naming the source."""
    try:
        if len(raw) > THREAD_PARSE_BYTES:
            parsed = await asyncio.to_thread(parse_block, raw)
        else:
            parsed = parse_block(raw)
    except ValueError:
        raise BackendError(f"the {source} answered a block that does not parse") from None
    found, previous, txs = parsed
    if found != ref.hash:
        raise BackendError(f"the {source} answered another block than the one asked for")
    return Block(ref, previous, txs)
