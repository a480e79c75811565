"""The deposit scan of `BitcoinGateway` (`walletcore.ports.DepositScanner`; docs/bitcoin.md,
"Deposits"), over its backend's `blocks` (`bitcoin/blocks.py`).

- A credit is an output paying a watched address: position `out:<n>`, the output's value
  in satoshis (read from the raw block: exact), the chain's native asset, no sender (the
  payer is an input's previous output: another read per input). Outputs are matched by
  locking script: each watched address's own (`scripts.locking_script`, remembered per
  address), so an address is found whatever its form (P2PKH, P2SH, P2WPKH, P2WSH, P2TR)
  or case, and reported exactly as stored. An address of another network matches nothing.
  A coinbase output counts too (spendable after 100 blocks: the balance counts it then).
- `scan(first, last)`: the heights' hashes, then each block whole; the blocks must link
  (each one's parent the block before) and the last must still be the node's at `last`
  when the range is read, else the chain moved during the scan and the range is read
  again (at most `_ATTEMPTS` times, then 503). A block missing or unreadable raises: never
  a partial answer, never a skipped block.
- `mempool`: the backend's mempool, each transaction decoded once (Core; Esplora reads
  none). `locate`: the backend's (`core_blocks`, `esplora_blocks`).
- Node failures are the gateway's read errors (503), as for every other read.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator

from walletcore.domain.deposits import BlockRef, Incoming
from walletcore.ports.deposits import Unmined
from walletcore_chains.bitcoin import errors
from walletcore_chains.bitcoin.backend import BackendError, BackendFailure
from walletcore_chains.bitcoin.blocks import TxOutputs
from walletcore_chains.bitcoin.gateway.base import GatewayBase
from walletcore_chains.bitcoin.scripts import locking_script

#: Reads of a range while the chain moves under it, before the scan gives up (503).
_ATTEMPTS = 3
#: Watched addresses whose locking script is remembered (about 250 bytes each: 25 MB at
#: the bound); past it the one kept longest is forgotten and decoded again when asked.
SCRIPTS_REMEMBERED = 100_000


class _Moved(Exception):
    """The chain changed while a range was read."""


class Scanning(GatewayBase):
    """`DepositScanner`: head, blocks, scan, mempool, locate."""

    async def head(self) -> BlockRef:
        try:
            return await self.backend.blocks.best_block()
        except BackendFailure as exc:
            raise errors.read_error(exc) from None

    async def block(self, height: int) -> BlockRef | None:
        if height < 0:
            return None
        try:
            refs = await self.backend.blocks.blocks_at(height, height)
        except BackendFailure as exc:
            raise errors.read_error(exc) from None
        return refs[0] if refs else None

    async def scan(self, first: int, last: int, addresses: Collection[str]) -> list[Incoming]:
        """Every output paying one of `addresses` in blocks `first..last` (module rules)."""
        watched = self._watched(addresses)
        if not watched or last < max(first, 0):
            return []
        try:
            for _ in range(_ATTEMPTS):
                try:
                    return await self._range(max(first, 0), last, watched)
                except _Moved:
                    continue
            raise BackendError("the chain kept changing while the blocks were read")
        except BackendFailure as exc:
            raise errors.read_error(exc) from None

    async def _range(self, first: int, last: int, watched: dict[bytes, str]) -> list[Incoming]:
        source = self.backend.blocks
        refs = await source.blocks_at(first, last)
        if len(refs) != last - first + 1:
            raise BackendError(f"the node has no block at height {first + len(refs)}")
        found: list[Incoming] = []
        previous: str | None = None
        for ref in refs:
            block = await source.block(ref)
            if previous is not None and block.previous != previous:
                raise _Moved()
            previous = ref.hash
            found.extend(self._credits(block.txs, watched, ref))
        now = await source.blocks_at(last, last)
        if now != refs[-1:]:
            raise _Moved()
        return found

    async def mempool(self, addresses: Collection[str]) -> list[Incoming]:
        """Outputs paying `addresses` in the node's mempool (`block` None); [] on Esplora."""
        watched = self._watched(addresses)
        if not watched:
            return []
        try:
            txs = await self.backend.blocks.mempool()
        except BackendFailure as exc:
            raise errors.read_error(exc) from None
        return list(self._credits(txs, watched, None))

    async def locate(self, tx_hash: str, last: BlockRef | None) -> BlockRef | Unmined | None:
        try:
            return await self.backend.blocks.locate(tx_hash, last)
        except BackendFailure as exc:
            raise errors.read_error(exc) from None

    def _credits(
        self, txs: Iterable[TxOutputs], watched: dict[bytes, str], block: BlockRef | None
    ) -> Iterator[Incoming]:
        chain, asset = self.chain, self.native.id
        for tx in txs:
            for n, (value, script) in enumerate(tx.outputs):
                address = watched.get(script)
                if address is not None and value > 0:
                    yield Incoming(chain, tx.txid, f"out:{n}", address, asset, value, block)

    def _watched(self, addresses: Collection[str]) -> dict[bytes, str]:
        """Locking script -> the watched address as stored (the first, if two stored
        forms of one address were given)."""
        scripts = self._scripts
        out: dict[bytes, str] = {}
        for address in addresses:
            if address in scripts:
                script = scripts[address]
            else:
                try:
                    script = locking_script(self.network, address)
                except ValueError:
                    script = None  # not an address of this network: nothing pays it here
                scripts[address] = script
                if len(scripts) > SCRIPTS_REMEMBERED:
                    del scripts[next(iter(scripts))]
            if script is not None:
                out.setdefault(script, address)
        return out


__all__ = ["SCRIPTS_REMEMBERED", "Scanning"]
