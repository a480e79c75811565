"""An EVM JSON-RPC node for the tests: stdlib `http.server` on 127.0.0.1 (a free port) in a
thread, answering JSON-RPC from a devnet chain (`DevnetEvmGateway`: py-evm through
eth-tester, with the asset table's tokens deployed). Requests go through web3's own
eth-tester formatting (`EthereumTesterProvider`); results leave as a geth node writes them
(quantities as `0x` hex, a 256-byte `logsBloom`, camelCase keys), so the client parses
real wire JSON.

Like geth, `eth_sendRawTransaction` checks a transaction before it takes it and refuses it
with `{"code": -32000, "message": ...}` in geth's words: `exceeds block gas limit`,
`invalid sender`, `intrinsic gas too low: gas G, minimum needed M`, `nonce too low: next
nonce N, tx nonce T`, `insufficient funds for gas * price + value: balance B, tx cost C,
overshot O`. The chain mines every transaction at once, so there is no pool: a transaction
already mined reads `nonce too low` (as in geth once it left the pool), and a future nonce
is refused with `nonce too high` where geth would queue it. `eth_feeHistory` is geth's
(the next block's base fee last, each block's reward percentiles weighted by gas, zero rows
for empty blocks); eth-tester's own leaves rewards out.

Options:
- `chain_id`: the chain id the node answers and accepts signatures for (Sepolia's, BSC
  testnet's, ...), so a gateway runs on the network's own configuration; a transaction
  signed for another chain is refused as geth does (`invalid sender: invalid chain id for
  signer`). The devnet's faucet (`DevnetEvmGateway.fund`) signs inside eth-tester, which
  does not check chain ids, and keeps working.
- `poa_extra_data`: every block's `extraData` is 97 bytes (32 vanity + 65 seal), as on BSC
  and Polygon; web3 refuses such a block without `ExtraDataToPOAMiddleware`.
- `no_fee_history`: `eth_feeHistory` answers method-not-found (a node without the API).
- `legacy`: a chain without EIP-1559: no `eth_feeHistory` or `eth_maxPriorityFeePerGas`,
  blocks without `baseFeePerGas`, receipts without `effectiveGasPrice`.
- `refuse_sends(message)`: the next `eth_sendRawTransaction` answers that error and takes
  nothing (a node's refusal the chain would not give on its own: `already known`,
  `replacement transaction underpriced`, bor's and bsc's wordings).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from typing import Any
from urllib.request import Request, urlopen

from eth_tester.exceptions import TransactionFailed  # type: ignore[import-untyped]
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak
from web3 import EthereumTesterProvider, Web3
from web3.providers.eth_tester.middleware import (
    transaction_result_formatter,
    transaction_result_remapper,
)

from walletcore.domain.assets import CONTRACT_ASSETS
from walletcore.testing.http import LoopbackRpcServer, RpcError
from walletcore_chains.evm.devnet import DevnetEvmGateway

#: geth's generic server error code, and its answer to an unknown method
SERVER_ERROR, METHOD_NOT_FOUND, REVERTED = -32000, -32601, 3
_BLOCKS = ("eth_getBlockByNumber", "eth_getBlockByHash")


def not_available(method: str) -> RpcError:
    return RpcError(METHOD_NOT_FOUND, f"the method {method} does not exist/is not available")


def wire(value: Any, key: str | None = None) -> Any:
    """A result as a node writes it: quantities as `0x` hex, bytes as `0x` data."""
    if value is None or isinstance(value, bool | str | float):
        return value
    if isinstance(value, int):
        return "0x" + value.to_bytes(256).hex() if key == "logsBloom" else hex(value)
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    if isinstance(value, dict):
        renamed = {("yParity" if k == "y_parity" else k): v for k, v in value.items()}
        return {k: wire(v, k) for k, v in renamed.items() if k != "state_root"}
    if isinstance(value, list | tuple):
        return [wire(v, key) for v in value]
    raise TypeError(f"no wire form for {type(value).__name__}")


class EvmRpcNode(LoopbackRpcServer):
    def __init__(
        self,
        devnet: DevnetEvmGateway,
        *,
        chain_id: int | None = None,
        poa_extra_data: bool = False,
        no_fee_history: bool = False,
        legacy: bool = False,
    ) -> None:
        self.devnet = devnet
        self.tester = devnet.tester
        self.chain_id = int(chain_id or devnet.tester.backend.chain.chain_id)
        self.poa_extra_data = poa_extra_data
        self.no_fee_history = no_fee_history or legacy
        self.legacy = legacy
        #: every method asked, in order
        self.calls: list[str] = []
        #: hashes of the transactions `eth_sendRawTransaction` took
        self.taken: list[str] = []
        self._refusals: deque[RpcError] = deque()
        provider = EthereumTesterProvider(devnet.tester)
        w3 = Web3(provider, middleware=[])
        self._forward = provider.request_func(w3, w3.middleware_onion)
        self._lock = threading.Lock()
        self._own: dict[str, Callable[..., Any]] = {
            "eth_sendRawTransaction": self._send_raw_transaction,
            "eth_feeHistory": self._fee_history,
            "eth_maxPriorityFeePerGas": self._max_priority_fee,
            "eth_chainId": lambda: self.chain_id,
            "net_version": lambda: str(self.chain_id),
        }
        super().__init__()

    @property
    def tokens(self) -> dict[int, str]:
        """asset id -> the contract the devnet deployed for it."""
        return {
            asset.id: self.devnet.token_address(asset)
            for asset in CONTRACT_ASSETS
            if asset.chain == self.devnet.chain and not asset.is_native
        }

    def refuse_sends(self, message: str, *, code: int = SERVER_ERROR, times: int = 1) -> None:
        """The next `times` transactions sent are refused with this error, and not taken."""
        self._refusals.extend(RpcError(code, message) for _ in range(times))

    def call(self, method: str, *params: Any) -> dict[str, Any]:
        """One JSON-RPC request over HTTP, as a client sends it: the node's whole answer
        (blocking: from async code, run it in a thread)."""
        request = Request(
            self.url,
            data=json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            ).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urlopen(request, timeout=10) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def mine(self, blocks: int = 1) -> None:
        with self._lock:
            self.tester.mine_blocks(blocks)

    # -- dispatch -----------------------------------------------------------------------
    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        method, params, rid = request["method"], request.get("params") or [], request.get("id")
        self.calls.append(method)
        try:
            with self._lock:
                own = self._own.get(method)
                result = own(*params) if own is not None else self._tester(method, params)
        except RpcError as err:
            return err.reply(rid)
        except TransactionFailed as exc:
            return RpcError(REVERTED, str(exc)).reply(rid)
        except Exception as exc:  # noqa: BLE001 - the chain refused the call: a server error
            return RpcError(SERVER_ERROR, str(exc)).reply(rid)
        return {"jsonrpc": "2.0", "id": rid, "result": wire(result)}

    def _tester(self, method: str, params: list[Any]) -> Any:
        response = self._forward(method, params)
        if "error" in response:
            error = response["error"]
            raise RpcError(int(error["code"]), str(error["message"]))
        result = response["result"]
        if method in _BLOCKS and isinstance(result, dict):
            return self._block(result)
        if method == "eth_getTransactionReceipt" and isinstance(result, dict):
            receipt = {**result, "to": result.get("to") or None}  # eth-tester: "" on a deploy
            if self.legacy:
                receipt.pop("effectiveGasPrice", None)
            return receipt
        return result

    def _block(self, block: dict[str, Any]) -> dict[str, Any]:
        block = dict(block)
        block["transactions"] = [
            transaction_result_formatter(transaction_result_remapper(tx))
            if isinstance(tx, dict)
            else tx
            for tx in block["transactions"]
        ]
        if self.poa_extra_data:
            vanity = bytes.fromhex(str(block["extraData"]).removeprefix("0x")).ljust(32, b"\0")
            seal = (keccak(text=str(block["hash"])) * 3)[:65]  # a validator's signature
            block["extraData"] = "0x" + (vanity[:32] + seal).hex()
        if self.legacy:
            block.pop("baseFeePerGas", None)
        return block

    # -- methods the node answers itself ------------------------------------------------
    def _max_priority_fee(self) -> Any:
        if self.legacy:
            raise not_available("eth_maxPriorityFeePerGas")
        return self._tester("eth_maxPriorityFeePerGas", [])

    def _fee_history(
        self, count: Any, newest: Any, percentiles: list[float] | None = None
    ) -> dict[str, Any]:
        """geth's: base fees of the blocks and of the next one, gas used ratios, and per
        block the tip at each percentile of its gas (zeros for an empty block)."""
        if self.no_fee_history:
            raise not_available("eth_feeHistory")
        count = int(count, 16) if isinstance(count, str) else int(count)
        last = self.tester.get_block_by_number(newest if newest != "pending" else "latest")
        first = max(0, int(last["number"]) - count + 1)
        bases, ratios, rewards = [], [], []
        for number in range(first, int(last["number"]) + 1):
            block = self.tester.get_block_by_number(number, full_transactions=True)
            base = int(block["base_fee_per_gas"])
            bases.append(base)
            ratios.append(int(block["gas_used"]) / int(block["gas_limit"]))
            if percentiles:
                rewards.append(self._rewards(block, base, percentiles))
        bases.append(int(self.tester.get_block_by_number("pending")["base_fee_per_gas"]))
        history: dict[str, Any] = {
            "oldestBlock": first,
            "baseFeePerGas": bases,
            "gasUsedRatio": ratios,
        }
        if percentiles:
            history["reward"] = rewards
        return history

    def _rewards(self, block: dict[str, Any], base: int, percentiles: list[float]) -> list[int]:
        if not block["transactions"]:
            return [0 for _ in percentiles]
        tips = []
        for tx in block["transactions"]:
            if "max_fee_per_gas" in tx:
                tip = min(int(tx["max_priority_fee_per_gas"]), int(tx["max_fee_per_gas"]) - base)
            else:
                tip = int(tx["gas_price"]) - base
            used = int(self.tester.get_transaction_receipt(tx["hash"])["gas_used"])
            tips.append((tip, used))
        tips.sort()
        out, index, total = [], 0, tips[0][1]
        for p in percentiles:
            threshold = int(block["gas_used"]) * p / 100
            while total < threshold and index < len(tips) - 1:
                index += 1
                total += tips[index][1]
            out.append(tips[index][0])
        return out

    def _send_raw_transaction(self, raw_hex: str) -> str:
        """geth's checks of a transaction, in geth's order and words, then the chain."""
        if self._refusals:
            raise self._refusals.popleft()
        raw = bytes.fromhex(raw_hex.removeprefix("0x"))
        chain = self.tester.backend.chain
        try:
            tx = chain.get_transaction_builder().decode(raw)
        except Exception:  # noqa: BLE001 - not a transaction
            raise RpcError(SERVER_ERROR, "rlp: invalid transaction encoding") from None
        if tx.chain_id is None:
            raise RpcError(
                SERVER_ERROR, "only replay-protected (EIP-155) transactions allowed over RPC"
            )
        if tx.gas > chain.get_block().header.gas_limit:
            raise RpcError(SERVER_ERROR, "exceeds block gas limit")
        if tx.chain_id != self.chain_id:
            raise RpcError(
                SERVER_ERROR,
                "invalid sender: invalid chain id for signer: "
                f"have {tx.chain_id} want {self.chain_id}",
            )
        try:
            sender = to_checksum_address(tx.sender)
        except Exception:  # noqa: BLE001 - no signer recovers from the signature
            raise RpcError(SERVER_ERROR, "invalid sender") from None
        if tx.gas < tx.intrinsic_gas:
            raise RpcError(
                SERVER_ERROR,
                f"intrinsic gas too low: gas {tx.gas}, minimum needed {tx.intrinsic_gas}",
            )
        nonce = int(self.tester.get_nonce(sender))
        if tx.nonce < nonce:
            raise RpcError(SERVER_ERROR, f"nonce too low: next nonce {nonce}, tx nonce {tx.nonce}")
        if tx.nonce > nonce:
            raise RpcError(SERVER_ERROR, f"nonce too high: next nonce {nonce}, tx nonce {tx.nonce}")
        balance = int(self.tester.get_balance(sender))
        cost = tx.gas * tx.max_fee_per_gas + tx.value
        if balance < cost:
            raise RpcError(
                SERVER_ERROR,
                "insufficient funds for gas * price + value: "
                f"balance {balance}, tx cost {cost}, overshot {cost - balance}",
            )
        tx_hash = str(self.tester.send_raw_transaction(raw_hex))
        self.taken.append(tx_hash)
        return tx_hash


__all__ = ["EvmRpcNode", "RpcError", "wire"]
