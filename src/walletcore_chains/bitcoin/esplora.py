"""The Esplora HTTP API backend (Blockstream's electrs, mempool.space, a self-hosted
explorer): the production default (docs/bitcoin.md).

Endpoints: `GET /blocks/tip/height`, `/address/:a` (stats: whether it is known),
`/address/:a/utxo`, `/address/:a/txs` (the mempool's, then the newest confirmed), `/tx/:id`
(404: unknown), `/tx/:id/outspend/:vout`, `/fee-estimates`, `POST /tx`. Esplora follows every address (no import)
and tells no minimum relay fee: `min_fee_rate` is the configured floor
(`WALLETCORE_BITCOIN_MIN_FEE_RATE`). Blocks for the deposit scan: `blocks`
(`esplora_blocks.EsploraBlocks`).
"""

from __future__ import annotations

from typing import Any

import httpx

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
from walletcore_chains.bitcoin.esplora_blocks import EsploraBlocks
from walletcore_chains.bitcoin.jsonrpc import http_failure, split_credentials


class EsploraBackend:
    name = "esplora"

    def __init__(self, url: str, *, timeout: float = 20.0, min_fee_rate: float = 1.0) -> None:
        base, auth = split_credentials(url)
        self._client = httpx.AsyncClient(
            base_url=base.rstrip("/"),
            auth=auth,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
        )
        self._floor = min_fee_rate
        self._confirmed = ConfirmedViews()
        self.blocks: BlockSource = EsploraBlocks(self._client)

    def __repr__(self) -> str:
        return "EsploraBackend(<url hidden>)"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _get(self, path: str) -> httpx.Response:
        try:
            return await self._client.get(path)
        except httpx.HTTPError as exc:
            raise http_failure(exc) from None

    async def _json(self, path: str) -> Any:
        response = await self._get(path)
        if response.status_code != 200:
            raise BackendError(f"the indexer answered HTTP {response.status_code}")
        try:
            return response.json()
        except ValueError:
            raise BackendError("the indexer answered nonsense") from None

    async def watch(self, address: str) -> None:
        """Esplora indexes every address."""

    async def tip_height(self) -> int:
        response = await self._get("/blocks/tip/height")
        if response.status_code != 200:
            raise BackendError(f"the indexer answered HTTP {response.status_code}")
        try:
            return int(response.text.strip())
        except ValueError:
            raise BackendError("the indexer answered nonsense") from None

    async def address_known(self, address: str) -> bool:
        stats = await self._json(f"/address/{address}")
        chain = stats.get("chain_stats", {})
        mempool = stats.get("mempool_stats", {})
        return int(chain.get("tx_count", 0)) + int(mempool.get("tx_count", 0)) > 0

    async def utxos(self, address: str) -> list[Utxo]:
        entries = await self._json(f"/address/{address}/utxo")
        out = []
        for entry in entries:
            status = entry.get("status", {})
            height = int(status["block_height"]) if status.get("confirmed") else None
            out.append(Utxo(str(entry["txid"]), int(entry["vout"]), int(entry["value"]), height))
        return out

    async def transaction(self, txid: str) -> TxView | None:
        cached = self._confirmed.get(txid)
        if cached is not None:
            return cached
        response = await self._get(f"/tx/{txid}")
        if response.status_code in (400, 404):
            return None
        if response.status_code != 200:
            raise BackendError(f"the indexer answered HTTP {response.status_code}")
        view = _view(response.json())
        self._confirmed.keep(view)
        return view

    async def outspend(self, txid: str, vout: int) -> Outspend:
        """`/tx/:txid/outspend/:vout` (the spender, mempool or mined); an output it calls
        unspent is `unknown` when `/tx/:txid` does not know its transaction."""
        response = await self._get(f"/tx/{txid}/outspend/{vout}")
        if response.status_code in (400, 404):
            return Outspend("unknown")
        if response.status_code != 200:
            raise BackendError(f"the indexer answered HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            raise BackendError("the indexer answered nonsense") from None
        if not isinstance(data, dict):
            raise BackendError("the indexer answered nonsense")
        if data.get("spent"):
            spender = data.get("txid")
            return Outspend("spent", str(spender) if spender else None)
        funding = await self.transaction(txid)
        if funding is None or vout >= len(funding.outputs):
            return Outspend("unknown")
        return Outspend("unspent")

    async def history(self, address: str, limit: int) -> list[TxView]:
        entries = await self._json(f"/address/{address}/txs")
        return [_view(e) for e in entries[:limit]]

    async def fee_rate(self, target_blocks: int) -> float | None:
        estimates = await self._json("/fee-estimates")
        if not isinstance(estimates, dict) or not estimates:
            return None
        targets = sorted((int(k), float(v)) for k, v in estimates.items())
        # the estimate for the target, or for the nearest longer one
        for target, rate in targets:
            if target >= target_blocks:
                return rate
        return targets[-1][1]

    async def min_fee_rate(self) -> float:
        return self._floor

    async def broadcast(self, raw_hex: str) -> str:
        try:
            response = await self._client.post("/tx", content=raw_hex)
        except httpx.HTTPError as exc:
            raise http_failure(exc) from None
        if response.status_code == 200:
            return response.text.strip()
        if 400 <= response.status_code < 500:
            raise BroadcastRefused(response.text[:500])
        raise BackendError(f"the indexer answered HTTP {response.status_code}")


def _view(tx: dict[str, Any]) -> TxView:
    vin = tx.get("vin", [])
    coinbase = any(v.get("is_coinbase") for v in vin)
    inputs = tuple(
        TxIn(
            str(v["txid"]),
            int(v["vout"]),
            (v.get("prevout") or {}).get("scriptpubkey_address"),
            int((v.get("prevout") or {}).get("value", 0)),
        )
        for v in vin
        if not v.get("is_coinbase")
    )
    outputs = tuple(TxOut(o.get("scriptpubkey_address"), int(o["value"])) for o in tx["vout"])
    status = tx.get("status", {})
    confirmed = bool(status.get("confirmed"))
    rbf = not coinbase and all(int(v.get("sequence", 0xFFFFFFFF)) < 0xFFFFFFFE for v in vin)
    return TxView(
        str(tx["txid"]),
        inputs,
        outputs,
        int(tx.get("fee", 0)),
        int(status["block_height"]) if confirmed else None,
        int(status["block_time"]) if confirmed and status.get("block_time") else None,
        coinbase,
        False,
        rbf,
        vsize=-(-int(tx["weight"]) // 4) if tx.get("weight") else None,
    )


__all__ = ["EsploraBackend"]
