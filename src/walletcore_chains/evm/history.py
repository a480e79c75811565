"""EVM history and lookups read from the node: a bounded scan of recent blocks.

A node has no "transactions of an address" call, so `rows` scans the last
`config.history_blocks` blocks: native transfers from the blocks' transactions, token
transfers from the contract's Transfer logs (`eth_getLogs`, filtered by topic). It may lag
a fresh broadcast (pending transactions are not in blocks) and forgets older transfers;
production should plug an indexer behind the same port (docs/chains.md).
"""

from __future__ import annotations

from typing import Any

from web3 import AsyncWeb3
from web3.exceptions import TransactionNotFound as Web3NotFound

from walletcore.domain.errors import HistoryUnavailable
from walletcore.domain.wallet import TxRow
from walletcore_chains.evm import errors
from walletcore_chains.evm.config import EvmConfig
from walletcore_chains.evm.rows import TRANSFER_TOPIC, hexstr, row


def _topic(address: str) -> str:
    return "0x" + "0" * 24 + address.lower().removeprefix("0x")


class History:
    def __init__(self, w3: AsyncWeb3[Any], config: EvmConfig) -> None:
        self.w3 = w3
        self.config = config

    async def lookup(self, address: str, contract: str | None, tx_hash: str) -> TxRow | None:
        """The row of one transaction for the wallet, or None when it is not the wallet's."""
        try:
            tx = await self.w3.eth.get_transaction(tx_hash)  # type: ignore[arg-type]
        except Web3NotFound:
            return None
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            if "not found" in str(exc).lower() or isinstance(exc, ValueError):
                return None  # a malformed hash names no transaction
            raise errors.read_error(exc) from None
        try:
            return await self._row(address, contract, tx, await self.w3.eth.block_number)
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            raise errors.read_error(exc) from None

    async def rows(self, address: str, contract: str | None, limit: int) -> list[TxRow]:
        """Newest first, at most `limit`; `HistoryUnavailable` when the node cannot answer."""
        try:
            latest = int(await self.w3.eth.block_number)
            first = max(0, latest - self.config.history_blocks + 1)
            if contract is None:
                hashes = await self._native_hashes(address, first, latest, limit)
            else:
                hashes = await self._token_hashes(address, contract, first, latest)
            out: list[TxRow] = []
            for tx_hash in hashes[:limit]:
                tx = await self.w3.eth.get_transaction(tx_hash)  # type: ignore[arg-type]
                found = await self._row(address, contract, tx, latest)
                if found is not None:
                    out.append(found)
            return out
        except Exception as exc:  # noqa: BLE001 - any node failure is read into a domain error
            if errors.is_unreachable(exc):
                raise HistoryUnavailable(
                    "Transaction history could not be read now: chain node unreachable; "
                    "retry with backoff"
                ) from None
            raise HistoryUnavailable() from None

    async def _native_hashes(self, address: str, first: int, latest: int, limit: int) -> list[str]:
        me = address.lower()
        hashes: list[str] = []
        for number in range(latest, first - 1, -1):
            block = await self.w3.eth.get_block(number, full_transactions=True)
            txs: list[Any] = list(block["transactions"])
            for tx in reversed(txs):
                parties = (str(tx["from"]).lower(), str(tx.get("to") or "").lower())
                if me in parties and int(tx["value"]) > 0:
                    hashes.append(hexstr(tx["hash"]))
            if len(hashes) >= limit:
                break
        return hashes

    async def _token_hashes(
        self, address: str, contract: str, first: int, latest: int
    ) -> list[str]:
        logs: list[Any] = []
        for topics in ([TRANSFER_TOPIC, _topic(address)], [TRANSFER_TOPIC, None, _topic(address)]):
            logs += await self.w3.eth.get_logs(
                {"address": contract, "fromBlock": first, "toBlock": latest, "topics": topics}  # type: ignore[typeddict-item]
            )
        logs.sort(key=lambda log: (int(log["blockNumber"]), int(log["logIndex"])), reverse=True)
        seen: list[str] = []
        for log in logs:
            tx_hash = hexstr(log["transactionHash"])
            if tx_hash not in seen:
                seen.append(tx_hash)
        return seen

    async def _row(self, address: str, contract: str | None, tx: Any, latest: int) -> TxRow | None:
        try:
            receipt = await self.w3.eth.get_transaction_receipt(tx["hash"])
        except Web3NotFound:
            receipt = None
        block_time = None
        if receipt is not None:
            block = await self.w3.eth.get_block(receipt["blockNumber"])
            block_time = int(block["timestamp"])
        return row(address, contract, tx, receipt, block_time, latest, self.config.confirmations)


__all__ = ["History"]
