"""What a backend reads of blocks and of the mempool for the deposit scan
(`gateway/scanning.py`, docs/bitcoin.md "Deposits"): the values and `BlockSource`, the
protocol each backend implements (`core_blocks.CoreBlocks`, `esplora_blocks.EsploraBlocks`).

A block is read whole as its raw bytes and parsed here (`rawblocks.py`): each output's
value (satoshis, exact) and locking script, each transaction's txid. The scan matches the
locking scripts against the watched addresses' own (`scripts.locking_script`), so an
address is found whatever form or case it is stored in, and is reported as stored.

Rules every source keeps: a block is returned complete (its header hashes to the hash
asked for, its transactions to the header's merkle root) or not at all (`BackendError`);
`blocks_at` answers the main chain as the node has it at the time of the call; a failure
of the node raises (`BackendFailure`), never an empty answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from walletcore.domain.deposits import BlockRef
from walletcore.ports.deposits import Unmined

#: Blocks a transaction last seen in the mempool (`locate(txid, None)`) is looked for in,
#: below the head, when the node has it in no mempool any more (it was mined meanwhile).
UNMINED_SEARCH = 50


@dataclass(frozen=True, slots=True)
class TxOutputs:
    """One transaction's outputs: `(value in satoshis, locking script)` each, in order
    (the index is the output's `n`, its deposit position `out:<n>`)."""

    txid: str
    outputs: tuple[tuple[int, bytes], ...]


@dataclass(frozen=True, slots=True)
class Block:
    """A block read whole: where it is, its parent's hash and its transactions in order
    (the coinbase first)."""

    ref: BlockRef
    previous: str
    txs: tuple[TxOutputs, ...]


class BlockSource(Protocol):
    """The blocks and mempool of a backend's node."""

    async def best_block(self) -> BlockRef:
        """The node's newest block (height and hash read together)."""
        ...

    async def blocks_at(self, first: int, last: int) -> list[BlockRef]:
        """The main chain's blocks at heights `first..last`, in order; it stops below
        `last` when the node has no block that high."""
        ...

    async def block(self, ref: BlockRef) -> Block:
        """The block `ref.hash`, whole and checked (module rules)."""
        ...

    async def mempool(self) -> Sequence[TxOutputs]:
        """The transactions of the node's mempool, each decoded once; empty when the
        backend reads no mempool."""
        ...

    async def locate(self, txid: str, last: BlockRef | None) -> BlockRef | Unmined | None:
        """Where `txid` is now (`DepositScanner.locate`): its main-chain block, MEMPOOL,
        or None."""
        ...


__all__ = ["UNMINED_SEARCH", "Block", "BlockSource", "TxOutputs"]
