"""Blocks of an Esplora HTTP API for the deposit scan (`blocks.BlockSource`;
docs/bitcoin.md, "Deposits").

- `best_block`: `GET /blocks/tip/hash`, then `/block/:hash` (its height).
- `blocks_at`: `GET /block-height/:height` per height (404: above the tip), a few at once.
- `block`: `GET /block/:hash/raw`, the block's bytes: one request a block (the JSON pages
  of `/block/:hash/txs/:start` hold 25 transactions each, some 140 requests for a full
  block), parsed and checked by `rawblocks.parse_block`.
- `mempool`: not read (empty). Esplora lists the mempool's txids (`/mempool/txids`) but
  decodes them one request each: some 100,000 requests for a full mainnet mempool on the
  first run, too many for a public API. A deposit is found once mined.
- `locate`: `GET /tx/:txid/status` (its main-chain block); unconfirmed, `/tx/:txid` (404:
  nowhere) and the spender of its first input (`/tx/:prev/outspend/:vout`): itself, the
  mempool; another or none, nowhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx

from walletcore.domain.deposits import BlockRef
from walletcore.ports.deposits import MEMPOOL, Unmined
from walletcore_chains.bitcoin.backend import BackendError
from walletcore_chains.bitcoin.blocks import Block, TxOutputs
from walletcore_chains.bitcoin.jsonrpc import http_failure
from walletcore_chains.bitcoin.rawblocks import checked_block

#: `/block-height` requests in flight at once.
_AT_ONCE = 8


class EsploraBlocks:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    def __repr__(self) -> str:
        return "EsploraBlocks(<url hidden>)"

    async def _get(self, path: str) -> httpx.Response:
        try:
            return await self._client.get(path)
        except httpx.HTTPError as exc:
            raise http_failure(exc) from None

    async def _text(self, path: str) -> str:
        response = await self._get(path)
        if response.status_code != 200:
            raise BackendError(f"the indexer answered HTTP {response.status_code}")
        return response.text.strip()

    async def _json(self, path: str) -> dict[str, Any]:
        return _json_of(await self._get(path))

    async def best_block(self) -> BlockRef:
        best = _hash(await self._text("/blocks/tip/hash"))
        info = await self._json(f"/block/{best}")
        if not isinstance(info.get("height"), int):
            raise BackendError("the indexer answered nonsense")
        return BlockRef(int(info["height"]), best)

    async def _at(self, height: int) -> BlockRef | None:
        response = await self._get(f"/block-height/{height}")
        if response.status_code == 404:
            return None  # above the tip
        if response.status_code != 200:
            raise BackendError(f"the indexer answered HTTP {response.status_code}")
        return BlockRef(height, _hash(response.text.strip()))

    async def blocks_at(self, first: int, last: int) -> list[BlockRef]:
        first = max(first, 0)
        refs: list[BlockRef] = []
        for low in range(first, last + 1, _AT_ONCE):
            heights = range(low, min(low + _AT_ONCE, last + 1))
            found = await asyncio.gather(*(self._at(h) for h in heights))
            for ref in found:
                if ref is None:
                    return refs
                refs.append(ref)
        return refs

    async def block(self, ref: BlockRef) -> Block:
        response = await self._get(f"/block/{ref.hash}/raw")
        if response.status_code != 200:
            raise BackendError(f"the indexer answered HTTP {response.status_code}")
        return await checked_block(response.content, ref, "indexer")

    async def mempool(self) -> Sequence[TxOutputs]:
        return ()

    async def locate(self, txid: str, last: BlockRef | None) -> BlockRef | Unmined | None:
        """`/tx/:txid/status` names its main-chain block. Unconfirmed there also means "only
        in a block a reorg dropped" or unknown (electrs answers every txid): the mempool is
        told by its first input's spender (`/tx/:txid`, then `/tx/:prev/outspend/:vout`):
        itself, or another transaction (a double spend) or none (evicted): nowhere."""
        where = _block_of(await self._json(f"/tx/{txid}/status"))
        if where is not None:
            return where
        response = await self._get(f"/tx/{txid}")
        if response.status_code in (400, 404):
            return None
        tx = _json_of(response)
        spent = [v for v in tx.get("vin", []) if isinstance(v, dict) and not v.get("is_coinbase")]
        if not spent:
            return None  # a coinbase off the main chain never returns to a mempool
        first = spent[0]
        outspend = await self._json(f"/tx/{first.get('txid')}/outspend/{first.get('vout')}")
        if not outspend.get("spent") or outspend.get("txid") != txid:
            return None
        return _block_of(outspend.get("status")) or MEMPOOL


def _json_of(response: httpx.Response) -> dict[str, Any]:
    if response.status_code != 200:
        raise BackendError(f"the indexer answered HTTP {response.status_code}")
    try:
        data = response.json()
    except ValueError:
        raise BackendError("the indexer answered nonsense") from None
    if not isinstance(data, dict):
        raise BackendError("the indexer answered nonsense")
    return data


def _block_of(status: Any) -> BlockRef | None:
    """The main-chain block of an Esplora `status`; None when unconfirmed."""
    if not isinstance(status, dict):
        raise BackendError("the indexer answered nonsense")
    if not status.get("confirmed"):
        return None
    height, block_hash = status.get("block_height"), status.get("block_hash")
    if not isinstance(height, int) or not isinstance(block_hash, str):
        raise BackendError("the indexer answered nonsense")
    return BlockRef(height, _hash(block_hash))


def _hash(text: str) -> str:
    """A block hash as the indexer wrote it: 64 hexadecimal digits, lower case."""
    value = text.strip().lower()
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise BackendError("the indexer answered nonsense")
    return value


__all__ = ["EsploraBlocks"]
