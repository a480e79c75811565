"""Blocks and mempool of a Bitcoin Core node for the deposit scan (`blocks.BlockSource`),
over its JSON-RPC; no transaction index needed (docs/bitcoin.md, "Deposits").

- `best_block`: `getbestblockhash`, then its `getblockheader` (the height of that hash).
- `blocks_at`: one `getblockhash` per height, in one JSON-RPC batch.
- `block`: `getblock <hash> 0` (the raw block: its hex is about a third of the size of the
  decoded JSON of verbosity 2, and far cheaper for the node to answer and for us to read),
  parsed and checked by `rawblocks.parse_block`.
- `mempool`: `getrawmempool`, then `getrawtransaction <txid> 0` for the transactions not
  decoded yet (batches of `MEMPOOL_BATCH`, at most `MEMPOOL_DECODES` a call): each is
  decoded once and remembered while it stays in the mempool (at most
  `MEMPOOL_REMEMBERED`; past it the rest waits, found when mined).
- `locate`: the block it was last seen in, if still in the main chain and holding it
  (`getblockheader` confirmations > 0, `getrawtransaction <txid> 0 <hash>`); else the
  mempool (`getmempoolentry`); else the main chain's blocks from the fork point of that
  block (or the newest `UNMINED_SEARCH` blocks, for a transaction last seen in the
  mempool) up to the head, searched by `getrawtransaction <txid> 0 <hash>` in batches;
  else nowhere (None).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from walletcore.domain.deposits import BlockRef
from walletcore.ports.deposits import MEMPOOL, Unmined
from walletcore_chains.bitcoin.backend import BackendError
from walletcore_chains.bitcoin.blocks import UNMINED_SEARCH, Block, TxOutputs
from walletcore_chains.bitcoin.jsonrpc import JsonRpc, RpcError
from walletcore_chains.bitcoin.rawblocks import checked_block, parse_transaction

_NOT_FOUND = -5  # RPC_INVALID_ADDRESS_OR_KEY: no such block, transaction, mempool entry
_OUT_OF_RANGE = -8  # RPC_INVALID_PARAMETER: `getblockhash` above the tip
#: Mempool transactions decoded in one JSON-RPC batch, and at most in one `mempool` call.
MEMPOOL_BATCH = 500
MEMPOOL_DECODES = 10_000
#: Mempool transactions kept decoded (about 520 bytes each with two outputs: some 26 MB at
#: the bound; docs/bitcoin.md, "Deposits"). The node lists its mempool best-paying first:
#: past the bound, the cheapest wait, found when mined.
MEMPOOL_REMEMBERED = 50_000
#: Blocks searched in one batch by `locate`, and the most it walks back to a fork point.
_SEARCH_BATCH = 50
_FORK_WALK = 100


class CoreBlocks:
    def __init__(self, rpc: JsonRpc) -> None:
        self._rpc = rpc
        #: txid -> its outputs, for the transactions of the node's mempool decoded so far
        self._mempool: dict[str, TxOutputs] = {}

    def __repr__(self) -> str:
        return "CoreBlocks()"

    async def best_block(self) -> BlockRef:
        best = str(await self._rpc.call("getbestblockhash"))
        header = await self._rpc.call("getblockheader", best, True)
        return BlockRef(int(header["height"]), best)

    async def blocks_at(self, first: int, last: int) -> list[BlockRef]:
        if last < first or last < 0:
            return []
        first = max(first, 0)
        heights = range(first, last + 1)
        answers = await self._rpc.batch([("getblockhash", [h]) for h in heights])
        refs: list[BlockRef] = []
        for height, answer in zip(heights, answers, strict=True):
            if isinstance(answer, RpcError):
                if answer.code == _OUT_OF_RANGE:
                    break  # above the node's tip
                raise answer
            refs.append(BlockRef(height, str(answer)))
        return refs

    async def block(self, ref: BlockRef) -> Block:
        try:
            hex_block = await self._rpc.call("getblock", ref.hash, 0)
        except RpcError as exc:
            if exc.code == _NOT_FOUND:
                raise BackendError("the node does not have the block") from None
            raise  # e.g. pruned: "Block not available"
        try:
            raw = bytes.fromhex(str(hex_block))
        except ValueError:
            raise BackendError("the node answered a block that does not parse") from None
        return await checked_block(raw, ref, "node")

    async def mempool(self) -> Sequence[TxOutputs]:
        txids = [str(t) for t in await self._rpc.call("getrawmempool")]
        current = set(txids)
        known = self._mempool
        for gone in [t for t in known if t not in current]:
            del known[gone]
        room = min(MEMPOOL_DECODES, MEMPOOL_REMEMBERED - len(known))
        new = [t for t in txids if t not in known][: max(room, 0)]
        for start in range(0, len(new), MEMPOOL_BATCH):
            chunk = new[start : start + MEMPOOL_BATCH]
            answers = await self._rpc.batch([("getrawtransaction", [t, 0]) for t in chunk])
            for txid, answer in zip(chunk, answers, strict=True):
                if isinstance(answer, RpcError):
                    if answer.code == _NOT_FOUND:
                        continue  # it left the mempool since (mined: the block scan has it)
                    raise answer
                known[txid] = _transaction(txid, answer)
        return [known[t] for t in txids if t in known]

    async def locate(self, txid: str, last: BlockRef | None) -> BlockRef | Unmined | None:
        start: int | None = None
        if last is not None:
            header = await self._header(last.hash)
            if header is not None and int(header.get("confirmations", -1)) > 0:
                if await self._holds(txid, last.hash):
                    return last
                start = last.height
            elif header is not None:
                start = await self._fork_height(header) + 1
        try:
            await self._rpc.call("getmempoolentry", txid)
            return MEMPOOL
        except RpcError as exc:
            if exc.code != _NOT_FOUND:
                raise
        head = await self.best_block()
        if start is None:  # last seen in the mempool, or in a block this node never had
            start = head.height - UNMINED_SEARCH + 1
            if last is not None:
                start = min(start, last.height)
        return await self._search(txid, max(start, 0), head.height)

    async def _header(self, block_hash: str) -> dict[str, Any] | None:
        try:
            header: dict[str, Any] = await self._rpc.call("getblockheader", block_hash, True)
        except RpcError as exc:
            if exc.code == _NOT_FOUND:
                return None
            raise
        return header

    async def _fork_height(self, header: dict[str, Any]) -> int:
        """The height of the newest main-chain ancestor of a block off the main chain."""
        for _ in range(_FORK_WALK):
            previous = header.get("previousblockhash")
            if previous is None:
                return 0
            parent = await self._header(str(previous))
            if parent is None:
                break
            if int(parent.get("confirmations", -1)) > 0:
                return int(parent["height"])
            header = parent
        return max(int(header.get("height", 0)) - _FORK_WALK, 0)

    async def _holds(self, txid: str, block_hash: str) -> bool:
        try:
            await self._rpc.call("getrawtransaction", txid, 0, block_hash)
        except RpcError as exc:
            if exc.code == _NOT_FOUND:
                return False
            raise
        return True

    async def _search(self, txid: str, first: int, last: int) -> BlockRef | None:
        for low in range(first, last + 1, _SEARCH_BATCH):
            refs = await self.blocks_at(low, min(low + _SEARCH_BATCH - 1, last))
            answers = await self._rpc.batch(
                [("getrawtransaction", [txid, 0, ref.hash]) for ref in refs]
            )
            for ref, answer in zip(refs, answers, strict=True):
                if not isinstance(answer, RpcError):
                    return ref
                if answer.code != _NOT_FOUND:
                    raise answer
        return None


def _transaction(txid: str, hex_tx: Any) -> TxOutputs:
    try:
        tx = parse_transaction(bytes.fromhex(str(hex_tx)))
    except ValueError:
        raise BackendError("the node answered a transaction that does not parse") from None
    if tx.txid != txid:
        raise BackendError("the node answered another transaction than the one asked for")
    return TxOutputs(txid, tx.outputs)  # one string for the key and the value


__all__ = ["MEMPOOL_BATCH", "MEMPOOL_DECODES", "MEMPOOL_REMEMBERED", "CoreBlocks"]
