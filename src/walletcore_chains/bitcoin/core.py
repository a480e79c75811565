"""The Bitcoin Core JSON-RPC backend: a watch-only descriptor wallet on the operator's node.

- The gateway's wallet (`WALLETCORE_BITCOIN_RPC_WALLET`, created blank, without private
  keys, when missing) follows every address the gateway meets: `watch` imports
  `addr(<address>)` once, rescanning from `rescan_since` (docs/bitcoin.md).
- Coins: `listunspent` of the address (mempool outputs included, mempool spends removed,
  immature coinbase left out by the node). Transactions: `getrawtransaction` (the node
  runs `-txindex=1`), inputs' values and addresses from the prevouts (or the parents, for a
  mempool transaction); one the wallet saw replaced reads `conflicted`.
- History: the wallet's latest `history_depth` entries, kept when they touch the address.
- Fees: `estimatesmartfee`; the floor is the larger of `minrelaytxfee` and the mempool's
  minimum fee (`getmempoolinfo`).
- Spends (`outspend`): `gettxout`, `gettxspendingprevout` (the mempool), the funding
  transaction (a spend in a block, unnamed: Core has no spend index).
- Blocks and the mempool for the deposit scan: `blocks` (`core_blocks.CoreBlocks`).
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

from walletcore_chains.bitcoin.backend import (
    BackendError,
    BroadcastRefused,
    ConfirmedViews,
    Outspend,
    TxIn,
    TxOut,
    TxView,
    Utxo,
)
from walletcore_chains.bitcoin.blocks import BlockSource
from walletcore_chains.bitcoin.core_blocks import CoreBlocks
from walletcore_chains.bitcoin.jsonrpc import JsonRpc, RpcError, sats

_NOT_FOUND = -5  # RPC_INVALID_ADDRESS_OR_KEY: no such transaction
_METHOD_NOT_FOUND = -32601
_WALLET_NOT_FOUND = -18
_ALREADY_LOADED = -35
#: sendrawtransaction's refusals: verify error, verify rejected, already in chain
_REFUSED = (-25, -26, -27, -22)
_IMPORT_TIMEOUT = 3600.0
#: Addresses this process knows the node's wallet watches (about 130 bytes each, 12 MB at
#: the bound); past it the one known longest is forgotten, and asked about again when used.
WATCHED_REMEMBERED = 100_000


class CoreBackend:
    name = "core"

    def __init__(
        self,
        url: str,
        *,
        wallet: str = "walletcore-watch",
        timeout: float = 20.0,
        rescan_since: int = 0,
        history_depth: int = 1000,
    ) -> None:
        self._rpc = JsonRpc(url, timeout=timeout)
        self._wallet = wallet
        self._wallet_path = f"/wallet/{wallet}"
        self._rescan_since = rescan_since
        self._depth = history_depth
        #: the addresses known to be in the node's wallet, the oldest first (a dict as an
        #: ordered set: bounded by `WATCHED_REMEMBERED`)
        self._watched: dict[str, None] = {}
        self._wallet_ready = False
        self._lock = asyncio.Lock()
        #: confirmed transactions never change: decoded once
        self._confirmed = ConfirmedViews()
        self.blocks: BlockSource = CoreBlocks(self._rpc)

    def __repr__(self) -> str:
        return f"CoreBackend(wallet={self._wallet})"

    async def aclose(self) -> None:
        await self._rpc.aclose()

    # -- the watch-only wallet ---------------------------------------------------------------
    async def _ensure_wallet(self) -> None:
        if self._wallet_ready:
            return
        loaded = await self._rpc.call("listwallets")
        if self._wallet not in (loaded or []):
            try:
                await self._rpc.call("loadwallet", self._wallet, True)
            except RpcError as exc:
                if exc.code == _ALREADY_LOADED:
                    pass
                elif exc.code == _WALLET_NOT_FOUND or "not found" in exc.message.lower():
                    # blank, no private keys, descriptors; loaded when the node starts
                    await self._rpc.call(
                        "createwallet", self._wallet, True, True, "", False, True, True
                    )
                else:
                    raise
        self._wallet_ready = True

    async def _wallet_call(self, method: str, *params: Any, timeout: float | None = None) -> Any:
        await self._ensure_wallet()
        return await self._rpc.call(method, *params, path=self._wallet_path, timeout=timeout)

    async def watch(self, address: str) -> None:
        if address in self._watched:
            return
        async with self._lock:
            if address in self._watched:
                return
            info = await self._wallet_call("getaddressinfo", address)
            if not (info.get("ismine") or info.get("iswatchonly")):
                described = await self._rpc.call("getdescriptorinfo", f"addr({address})")
                request = {
                    "desc": described["descriptor"],
                    "timestamp": self._rescan_since,
                    "label": "",
                }
                result = await self._wallet_call(
                    "importdescriptors", [request], timeout=_IMPORT_TIMEOUT
                )
                if not result or not result[0].get("success"):
                    raise BackendError("the node did not import the address into its wallet")
            watched = self._watched
            watched[address] = None
            if len(watched) > WATCHED_REMEMBERED:
                del watched[next(iter(watched))]

    # -- reads ---------------------------------------------------------------------------
    async def tip_height(self) -> int:
        return int(await self._rpc.call("getblockcount"))

    async def address_known(self, address: str) -> bool:
        await self.watch(address)
        received = await self._wallet_call("getreceivedbyaddress", address, 0)
        if sats(received) > 0:
            return True
        # mined coins (immature or not) are left out of what the wallet counts as received
        entries = await self._wallet_call("listtransactions", "*", self._depth, 0, True)
        return any(entry.get("address") == address for entry in entries or [])

    async def utxos(self, address: str) -> list[Utxo]:
        await self.watch(address)
        tip = await self.tip_height()
        entries = await self._wallet_call("listunspent", 0, 9_999_999, [address], True)
        out = []
        for entry in entries or []:
            confirmations = int(entry.get("confirmations", 0))
            height = tip - confirmations + 1 if confirmations > 0 else None
            out.append(Utxo(str(entry["txid"]), int(entry["vout"]), sats(entry["amount"]), height))
        return out

    async def transaction(self, txid: str) -> TxView | None:
        cached = self._confirmed.get(txid)
        if cached is not None:
            return cached
        try:
            raw = await self._rpc.call("getrawtransaction", txid, 2)
        except RpcError as exc:
            if exc.code != _NOT_FOUND:
                raise
            return await self._wallet_conflict(txid)
        view = await self._view(raw)
        self._confirmed.keep(view)
        return view

    async def _wallet_conflict(self, txid: str) -> TxView | None:
        """A transaction gone from the mempool: the wallet remembers whether a mined one
        replaced it (negative confirmations)."""
        if not self._watched:
            return None
        try:
            entry = await self._wallet_call("gettransaction", txid, True, True)
        except RpcError as exc:
            if exc.code == _NOT_FOUND:
                return None
            raise
        decoded = entry.get("decoded")
        if not isinstance(decoded, dict):
            return None
        view = await self._view(decoded, confirmations=int(entry.get("confirmations", 0)))
        if int(entry.get("confirmations", 0)) < 0:
            return TxView(
                view.txid,
                view.inputs,
                view.outputs,
                view.fee,
                None,
                None,
                False,
                True,
                view.rbf,
                vsize=view.vsize,
            )
        return None  # dropped from the mempool, never mined: unknown to the node now

    async def _view(self, raw: dict[str, Any], confirmations: int | None = None) -> TxView:
        coinbase = any("coinbase" in vin for vin in raw.get("vin", []))
        inputs: list[TxIn] = []
        if not coinbase:
            for vin in raw["vin"]:
                prevout = vin.get("prevout")
                if prevout is None:
                    parent = await self._parent(str(vin["txid"]))
                    prevout = parent["vout"][int(vin["vout"])]
                    prevout = {"value": prevout["value"], "scriptPubKey": prevout["scriptPubKey"]}
                inputs.append(
                    TxIn(
                        str(vin["txid"]),
                        int(vin["vout"]),
                        prevout["scriptPubKey"].get("address"),
                        sats(prevout["value"]),
                    )
                )
        outputs = tuple(
            TxOut(out["scriptPubKey"].get("address"), sats(out["value"])) for out in raw["vout"]
        )
        fee = 0 if coinbase else sum(i.value for i in inputs) - sum(o.value for o in outputs)
        confirmations = int(raw.get("confirmations", 0)) if confirmations is None else confirmations
        height = None
        if confirmations > 0:
            height = await self.tip_height() - confirmations + 1
        rbf = not coinbase and all(
            int(v.get("sequence", 0xFFFFFFFF)) < 0xFFFFFFFE for v in raw["vin"]
        )
        return TxView(
            str(raw["txid"]),
            tuple(inputs),
            outputs,
            fee,
            height,
            int(raw["blocktime"]) if height is not None and "blocktime" in raw else None,
            coinbase,
            False,
            rbf,
            vsize=int(raw["vsize"]) if "vsize" in raw else None,
        )

    async def outspend(self, txid: str, vout: int) -> Outspend:
        """`gettxout` (mempool included) says unspent; else `gettxspendingprevout` names a
        mempool spender; else the funding transaction decides: mined -> spent in a block
        (the spender unnamed: Core keeps no spend index; answered only once the node's
        txindex has caught up with its tip, so the caller can ask for the spender's txid);
        unknown -> `unknown`."""
        coin = await self._rpc.call("gettxout", txid, vout, True)
        if coin is not None:
            return Outspend("unspent")
        try:
            found = await self._rpc.call("gettxspendingprevout", [{"txid": txid, "vout": vout}])
        except RpcError as exc:
            if exc.code != _METHOD_NOT_FOUND:
                raise
            found = None  # an older node: the funding transaction decides alone
        for entry in found or []:
            spender = entry.get("spendingtxid") if isinstance(entry, dict) else None
            if spender:
                return Outspend("spent", str(spender))
        try:
            parent = await self._rpc.call("getrawtransaction", txid, 1)
        except RpcError as exc:
            if exc.code != _NOT_FOUND:
                raise
            return Outspend("unknown")
        if vout >= len(parent.get("vout", [])):
            return Outspend("unknown")
        if int(parent.get("confirmations", 0)) <= 0:
            # in the mempool and not spent there: `gettxout` raced a change of the mempool
            return Outspend("unspent")
        tip = await self.tip_height()
        info = await self._rpc.call("getindexinfo", "txindex")
        index = info.get("txindex") if isinstance(info, dict) else None
        if not index or not index.get("synced") or int(index.get("best_block_height", -1)) < tip:
            raise BackendError("the node's transaction index is behind its tip")
        return Outspend("spent")

    async def _parent(self, txid: str) -> dict[str, Any]:
        parent: dict[str, Any] = await self._rpc.call("getrawtransaction", txid, 1)
        return parent

    async def history(self, address: str, limit: int) -> list[TxView]:
        await self.watch(address)
        entries = await self._wallet_call("listtransactions", "*", self._depth, 0, True)
        txids: list[str] = []
        for entry in reversed(entries or []):  # the node lists oldest first
            txid = str(entry["txid"])
            if txid not in txids:
                txids.append(txid)
        out: list[TxView] = []
        for txid in txids:
            view = await self.transaction(txid)
            if view is None or view.conflicted:
                continue
            touches = any(i.address == address for i in view.inputs) or any(
                o.address == address for o in view.outputs
            )
            if touches:
                out.append(view)
                if len(out) >= limit:
                    break
        # the mempool first, then the newest blocks
        out.sort(key=lambda v: -(v.height if v.height is not None else 1 << 62))
        return out

    async def fee_rate(self, target_blocks: int) -> float | None:
        estimate = await self._rpc.call("estimatesmartfee", target_blocks)
        rate = estimate.get("feerate") if isinstance(estimate, dict) else None
        if rate is None:
            return None
        return float(Decimal(str(rate)) * 100_000)  # BTC/kvB -> sat/vB

    async def min_fee_rate(self) -> float:
        info = await self._rpc.call("getmempoolinfo")
        floor = max(
            Decimal(str(info.get("minrelaytxfee", 0))), Decimal(str(info.get("mempoolminfee", 0)))
        )
        return float(floor * 100_000)

    # -- send ----------------------------------------------------------------------------
    async def broadcast(self, raw_hex: str) -> str:
        try:
            return str(await self._rpc.call("sendrawtransaction", raw_hex))
        except RpcError as exc:
            if exc.code in _REFUSED:
                raise BroadcastRefused(exc.message) from None
            raise


__all__ = ["CoreBackend"]
