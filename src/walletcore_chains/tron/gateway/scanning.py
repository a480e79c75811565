"""Deposits of `TronGateway` (`walletcore.ports.deposits.DepositScanner`; docs/tron.md,
"Deposits"): blocks read by range, never one request per address.

- `scan(first, last, addresses)`: the range's blocks from `wallet/getblockbylimitnext`
  (`blocks_per_call` at a time, java-tron's limit 100; a node refusing a range, `{}`, is
  asked for half as many), checked to be exactly `first..last`, each the parent of the
  next; then, for each block holding a contract call, its receipts
  (`wallet/gettransactioninfobyblocknum`, `scan_concurrency` at once). What they credit to
  the watched addresses is read by `tron/deposits.py` (TRX `trx`, TRC20 `trc20:<n>`,
  internal TRX `internal:<n>`). Any failure, or answers that disagree (a block replaced
  between two reads), raises `NodeUnavailable`: no partial answer, no skipped block.
- `head()`: `wallet/getnowblock`; `block(height)`: `wallet/getblockbynum` (None above the
  head).
- `locate(tx_hash, last)`: `wallet/gettransactioninfobyid` gives the block number, whose
  block (`getblockbynum`) must hold the transaction; a transaction whose receipt failed
  moved nothing: None, as for one the chain has nowhere. Not in a block:
  `wallet/gettransactionfrompending` (the node's pending pool) says `MEMPOOL`
  (`gettransactionbyid` answers only for transactions in blocks on java-tron).
- `mempool(addresses)`: [] (TRON makes a block every 3 s; the pool is read one transaction
  per request, and a TRC20 credit is only known once the call ran).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

from walletcore.domain.deposits import BlockRef, Incoming
from walletcore.ports import MEMPOOL, Unmined
from walletcore_chains.tron import deposits, errors, rows
from walletcore_chains.tron.gateway.base import GatewayBase

_HEX = frozenset("0123456789abcdef")


class Scanning(GatewayBase):
    """The deposit scanner."""

    #: blocks per `getblockbylimitnext` the node was seen to take (a refusal halves it)
    _block_step: int | None = None

    async def head(self) -> BlockRef:
        try:
            found = await self.client.head()
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        return BlockRef(found.number, found.id.lower())

    async def block(self, height: int) -> BlockRef | None:
        if height < 0:
            return None
        try:
            found = await self.client.block(height)
            if found is None:
                return None
            ref = deposits.ref_of(found)
            if ref.height != height:
                raise deposits.Inconsistent(f"asked for block {height}, got {ref.height}")
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        return ref

    async def scan(self, first: int, last: int, addresses: Collection[str]) -> list[Incoming]:
        watch = deposits.Watch.of(addresses)
        if last < first or not watch.by_hex:
            return []
        tokens = deposits.tokens_by_hex(self._tokens)
        found: list[Incoming] = []
        try:
            blocks = await self._blocks(first, last)
            deposits.check_range(blocks, first, last)
            receipts = await self._receipts(blocks)
            for block, infos in zip(blocks, receipts, strict=True):
                found.extend(
                    deposits.credits(self.chain, block, infos, watch, tokens, self.native_asset_id)
                )
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        return found

    async def mempool(self, addresses: Collection[str]) -> list[Incoming]:
        """[]: not read (module docstring)."""
        return []

    async def locate(self, tx_hash: str, last: BlockRef | None) -> BlockRef | Unmined | None:
        wanted = tx_hash.strip().lower().removeprefix("0x")
        if len(wanted) != 64 or not _HEX.issuperset(wanted):
            return None
        try:
            info = await self.client.info(wanted, solid=False)
            if info is not None:
                if rows.receipt_failed(info):
                    return None  # in a block, but it moved nothing
                number = int(info["blockNumber"])
                block = await self.client.block(number)
                held = {
                    str(tx.get("txID", "")).lower() for tx in deposits.transactions(block or {})
                }
                if block is None or wanted not in held:
                    raise deposits.Inconsistent(f"block {number} does not hold {wanted}")
                return deposits.ref_of(block)
            if await self.client.pending(wanted):
                return MEMPOOL
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        return None

    async def _blocks(self, first: int, last: int) -> list[dict[str, Any]]:
        """Blocks `first..last`, as many per request as the node takes."""
        found: list[dict[str, Any]] = []
        step = self._block_step or max(1, self.options.blocks_per_call)
        at = first
        while at <= last:
            end = min(last, at + step - 1)
            got = await self.client.blocks(at, end)
            if got is None:  # refused: too many at once for this node
                if end == at:
                    raise deposits.Inconsistent(f"the node refused block {at}")
                step = self._block_step = (end - at + 1) // 2
                continue
            if not got:
                raise deposits.Inconsistent(f"the node has no block {at}")
            for block in got[: end - at + 1]:
                if deposits.number_of(block) != at:
                    raise deposits.Inconsistent(f"the node skipped block {at}")
                found.append(block)
                at += 1
        return found

    async def _receipts(self, blocks: list[dict[str, Any]]) -> list[list[dict[str, Any]] | None]:
        """Each block's receipts (None for a block without a contract call: not read)."""
        gate = asyncio.Semaphore(max(1, self.options.scan_concurrency))

        async def read(block: dict[str, Any]) -> list[dict[str, Any]] | None:
            if not deposits.has_calls(block):
                return None
            async with gate:
                return await self.client.block_infos(deposits.number_of(block))

        answers = await asyncio.gather(*(read(b) for b in blocks), return_exceptions=True)
        out: list[list[dict[str, Any]] | None] = []
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
            out.append(answer)
        return out


__all__ = ["Scanning"]
