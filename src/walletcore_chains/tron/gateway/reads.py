"""Reads of `TronGateway`: balances (TRX, a TRC20's `balanceOf`), one transaction
(`lookup`), and the history from TronGrid's `/v1` API.
"""

from __future__ import annotations

import logging
from typing import Any

from eth_abi.abi import encode as abi_encode

from walletcore.domain.assets import Asset, Chain
from walletcore.domain.errors import HistoryUnavailable, InvalidRequest, TransactionNotFound
from walletcore.domain.wallet import TxRow
from walletcore_chains.tron import errors, rows
from walletcore_chains.tron.gateway.base import GatewayBase, evm_address

log = logging.getLogger("walletcore_chains.tron.gateway")


class Reads(GatewayBase):
    """Balances, lookups, history."""

    # -- reads --------------------------------------------------------------------------
    def validate_address(self, address: object) -> str:
        if not isinstance(address, str):
            raise InvalidRequest("A TRON address must be a string")
        return self._validator(Chain.TRON, address)

    async def balance(self, address: str, asset: Asset) -> int:
        contract = self._contract_of(asset)
        try:
            if contract is None:
                return int((await self.client.account(address)).get("balance", 0))
            parameter = abi_encode(["address"], [evm_address(address)]).hex()
            answer = await self.client.constant_call(
                address, contract, "balanceOf(address)", parameter
            )
            if not (answer.get("result") or {}).get("result"):
                raise ValueError("balanceOf failed")
            return int(answer["constant_result"][0] or "0", 16)
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None

    async def lookup(self, address: str, asset: Asset, tx_hash: str) -> TxRow:
        contract = self._contract_of(asset)
        wanted = tx_hash.strip().lower().removeprefix("0x")
        if len(wanted) != 64 or any(c not in "0123456789abcdef" for c in wanted):
            raise TransactionNotFound()
        try:
            tx = await self.client.transaction(wanted)
            if tx is None:
                raise TransactionNotFound()
            solid = await self.client.info(wanted, solid=True)
            info = solid if solid is not None else await self.client.info(wanted, solid=False)
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None
        row = rows.lookup_row(address, tx, info, solid=solid is not None, token=contract)
        if row is None:
            raise TransactionNotFound()
        return row

    async def history(self, address: str, asset: Asset, limit: int) -> list[TxRow]:
        contract = self._contract_of(asset)
        try:
            if contract is None:
                return await self._native_history(address, limit)
            return await self._token_history(address, contract, limit)
        except Exception as exc:  # noqa: BLE001 - any failure: history unreadable now
            log.warning("TRON history unreadable: %s", type(exc).__name__)
            raise HistoryUnavailable() from None

    async def _native_history(self, address: str, limit: int) -> list[TxRow]:
        found: list[TxRow] = []
        params: dict[str, Any] = {"limit": 200, "only_confirmed": "true"}
        for _ in range(self.options.history_pages):
            page = await self.client.history(f"accounts/{address}/transactions", params)
            for item in page.get("data") or []:
                row = rows.grid_native_row(address, item)
                if row is not None:
                    found.append(row)
            fingerprint = (page.get("meta") or {}).get("fingerprint")
            if len(found) >= limit or not fingerprint:
                break
            params = {**params, "fingerprint": fingerprint}
        return found[:limit]

    async def _token_history(self, address: str, contract: str, limit: int) -> list[TxRow]:
        page = await self.client.history(
            f"accounts/{address}/transactions/trc20",
            {"limit": limit, "contract_address": contract, "only_confirmed": "true"},
        )
        out = []
        for item in (page.get("data") or [])[:limit]:
            way = "send" if rows.base58(item.get("from")) == address else "receive"
            tx_id = str(item["transaction_id"])
            info = await self.client.info(tx_id, solid=True) or {}
            status = "failed" if info and rows.receipt_failed(info) else "success"
            date = rows.date_of(item.get("block_timestamp"))
            out.append(TxRow(tx_id, way, int(item["value"]), int(info.get("fee", 0)), status, date))
        return out


__all__ = ["Reads"]
