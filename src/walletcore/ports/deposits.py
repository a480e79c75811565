"""The deposit side of a `ChainGateway`: finding what reached the watched addresses.

A gateway that also implements `DepositScanner` has its chain scanned by the
`scan_deposits` job (walletcore.services.deposits, docs/events.md): one scan per block
range for every watched address of the chain at once, never one request per address per
block. The plugin implements it in its own package; the core keeps the cursor, the
deposits and their moves (walletcore.domain.deposits).

Rules every scanner keeps (each chain package proves them on its real engine):
- `scan(first, last, addresses)` reports every credit to one of `addresses` in the blocks
  `first..last` (both included) of the chain as it is now, native and token, each once,
  with a `position` stable across scans; it asks the node for the range in as few calls as
  the node allows (a log filter over the recipients, at most about 1,000 addresses a call;
  a block's transactions against the address set), and when the node refuses a range as
  too large it halves the range itself. It raises (`ServiceUnavailable` or the node's
  error) rather than return a partial answer: a block is never skipped.
- `head()` and `block(height)` answer the chain as the node has it now (after a reorg, the
  new blocks).
- `locate(tx_hash, last)`: where the transaction is now (`last`: the block it was last
  seen in, a hint for nodes without a transaction index): its block, `MEMPOOL`, or None
  when the chain has it nowhere (a reorg dropped it and a conflicting transaction took its coins, or
  it was evicted): a `seen` deposit whose transaction is nowhere is `reversed`.
- `mempool(addresses)`: credits to `addresses` the node holds unmined (`block` None);
  a chain without a mempool worth reading answers [].
"""

from __future__ import annotations

from collections.abc import Collection
from enum import Enum
from typing import Literal, Protocol, runtime_checkable

from walletcore.domain.deposits import BlockRef, Incoming


class Unmined(Enum):
    MEMPOOL = "mempool"


#: `locate`'s answer for a transaction the node holds, not yet in a block.
MEMPOOL: Literal[Unmined.MEMPOOL] = Unmined.MEMPOOL


@runtime_checkable
class DepositScanner(Protocol):
    """The scanning side of a `ChainGateway` (implemented by the same object)."""

    #: Blocks deep (its own included) a deposit's block must be before it is `confirmed`:
    #: the depth the transfer lifecycle uses for the chain's sends.
    confirmations: int
    #: Most blocks one `scan` call covers (the job splits a catch-up into such ranges, and
    #: runs them one after the other until the head: no catch-up cap, no skipped block).
    scan_span: int

    async def head(self) -> BlockRef:
        """The newest block the node has."""
        ...

    async def block(self, height: int) -> BlockRef | None:
        """The block at `height` in the chain as the node has it now; None above the head."""
        ...

    async def scan(self, first: int, last: int, addresses: Collection[str]) -> list[Incoming]:
        """Every credit to `addresses` in blocks `first..last` (module rules)."""
        ...

    async def mempool(self, addresses: Collection[str]) -> list[Incoming]:
        """Credits to `addresses` waiting in the node's mempool; [] if not read."""
        ...

    async def locate(self, tx_hash: str, last: BlockRef | None) -> BlockRef | Unmined | None:
        """Where `tx_hash` is now: its block, `MEMPOOL`, or None (nowhere). `last`: the
        block it was last seen in (None: the mempool)."""
        ...


__all__ = ["MEMPOOL", "DepositScanner", "Unmined"]
