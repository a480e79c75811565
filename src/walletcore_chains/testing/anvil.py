"""anvil (Foundry's EVM node: a real mempool, real blocks) for tests, on a loopback port.

`AnvilNode(chain_id=1)` starts `anvil --chain-id 1 --block-time <s>` on a free port as a
context manager; `url` is its JSON-RPC endpoint. On start it deploys the test ERC20
(`walletcore_chains/evm/contracts/Token.vy`, compiled offline by Vyper) once per token of
the chain's asset table from anvil's first dev account, so `tokens` can go to
`WALLETCORE_EVM_TOKENS`; `fund` pays native coins (`anvil_setBalance`) or mints tokens.

Mining, three ways: every `block_time` seconds (interval mining, the default);
`block_time=None`: a block for each transaction as it arrives (anvil's automine, like a
devnet); `mining=False` (`--no-mining`): only when the test says, `mine(n)`, so a
transaction stays in the pool as long as the test wants. Then `drop_all()` empties the
pool (`anvil_dropAllTransactions`), `set_next_base_fee` sets the next block's base fee and
`set_block_gas_limit` the gas of later blocks. Minting a token (`fund`) mines a block, so
with `mining=False` it takes whatever waits in the pool along: fund before sending.

anvil's pool differs from geth's in ways the tests rely on: it takes a replacement at any
higher max fee (geth: +10% on max fee and tip); it refuses a transaction whose max fee is
below the next block's base fee (`max fee per gas less than block base fee`), and it
evicts one that falls below the base fee of a block it mines (geth keeps it, waiting);
it orders its pool by max fee per gas; it holds a transaction with a future nonce, as geth
does. `hardfork="berlin"` runs a chain without EIP-1559 (legacy gas prices), and without
the test tokens (Vyper's bytecode needs later opcodes).

The binary is found at `WALLETCORE_ANVIL`, or where `python3 dev.py test` installs the npm
package `@foundry-rs/anvil-linux-amd64` (`.venv/anvil`); `find_anvil()` returns None when
neither exists, so tests can skip saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any, Self

from eth_abi.abi import encode as abi_encode
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

from walletcore.domain.assets import CONTRACT_ASSETS, Asset, Chain
from walletcore_chains.evm.config import MAINNET_CHAIN_IDS

ANVIL_ENV = "WALLETCORE_ANVIL"
PACKAGE = "@foundry-rs/anvil-linux-amd64"
#: Where `dev.py test` installs the npm package (beside the project's virtualenv).
INSTALLED = Path(sys.prefix) / "anvil" / "node_modules" / PACKAGE / "bin" / "anvil"
#: anvil's chain ids of the asset table's EVM chains on their main networks.
MAINNET_IDS = MAINNET_CHAIN_IDS
_MINT = keccak(b"mint(address,uint256)")[:4]


def find_anvil() -> Path | None:
    configured = os.environ.get(ANVIL_ENV)
    if configured:
        return Path(configured)
    if INSTALLED.exists():
        return INSTALLED
    found = shutil.which("anvil")
    return Path(found) if found else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class AnvilNode:
    """One anvil process for `chain`, with the asset table's tokens deployed."""

    def __init__(
        self,
        chain: Chain,
        *,
        chain_id: int | None = None,
        block_time: float | None = 0.25,
        mining: bool = True,
        hardfork: str | None = None,
        binary: Path | None = None,
        assets: Iterable[Asset] | None = None,
    ) -> None:
        """`chain_id`: by default the chain's main network's (`MAINNET_IDS`, the asset
        table's EVM chains); `assets`: the chain's assets whose tokens are deployed (by
        default the contract's), for an EVM chain a plugin adds."""
        found = binary or find_anvil()
        if found is None:
            raise FileNotFoundError(
                f"no anvil: run `python3 dev.py test` (it installs {PACKAGE}) or set {ANVIL_ENV}"
            )
        self.chain = chain
        self.chain_id = chain_id if chain_id is not None else MAINNET_IDS[chain]
        self.binary = found
        self.mining = mining
        self.block_time = block_time if mining else None
        self.hardfork = hardfork
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.tokens: dict[int, str] = {}
        self._assets = tuple(CONTRACT_ASSETS if assets is None else assets)
        self._process: subprocess.Popen[bytes] | None = None
        self._funder = ""
        self._calls = 0
        #: the chain prices gas without EIP-1559 (`hardfork` before London)
        self.legacy = False

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> Self:
        command = [
            str(self.binary),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--chain-id", str(self.chain_id),
            "--silent",
        ]  # fmt: skip
        if not self.mining:
            command.append("--no-mining")
        elif self.block_time is not None:
            command += ["--block-time", str(self.block_time)]
        if self.hardfork is not None:
            command += ["--hardfork", self.hardfork]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while True:
            try:
                if int(self.call("eth_chainId"), 16) == self.chain_id:
                    break
            except OSError:
                pass
            if self._process.poll() is not None or time.monotonic() > deadline:
                error = self._process.stderr.read() if self._process.stderr else b""
                self.__exit__()
                raise RuntimeError(f"anvil did not start: {error.decode(errors='replace')}")
            time.sleep(0.05)
        try:
            self._funder = self.call("eth_accounts")[0]
            latest = self.call("eth_getBlockByNumber", "latest", False)
            self.legacy = latest.get("baseFeePerGas") is None  # a hardfork before London
            if not self.legacy:  # Token.vy's bytecode needs later opcodes (PUSH0)
                self.tokens = {
                    asset.id: self._deploy(asset)
                    for asset in self._assets
                    if asset.chain == self.chain and not asset.is_native
                }
        except BaseException:
            self.__exit__()  # no anvil left running behind a failed start
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()

    # -- JSON-RPC ---------------------------------------------------------------------------
    def call(self, method: str, *params: Any) -> Any:
        """The result of one JSON-RPC request; `RuntimeError` with the node's error."""
        reply = self.request(method, *params)
        if "error" in reply:
            raise RuntimeError(f"anvil {method}: {reply['error']}")
        return reply["result"]

    def request(self, method: str, *params: Any) -> dict[str, Any]:
        """The node's whole answer to one JSON-RPC request (`result` or `error`)."""
        self._calls += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self._calls, "method": method,
                           "params": list(params)}).encode()  # fmt: skip
        request = urllib.request.Request(
            self.url, body, {"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            reply: dict[str, Any] = json.loads(answer.read())
        return reply

    @property
    def funder(self) -> str:
        """anvil's first dev account (unlocked: `eth_sendTransaction` signs for it)."""
        return self._funder

    def wait_receipt(self, tx_hash: str, timeout: float = 30) -> dict[str, Any]:
        """The transaction's receipt once mined: by the node's own mining (interval, or
        automine, which mines just after `eth_sendRawTransaction` answers), or, with
        `mining=False`, by a block mined here."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            receipt = self.call("eth_getTransactionReceipt", tx_hash)
            if receipt is not None:
                return dict(receipt)
            if not self.mining:
                self.call("evm_mine")
            time.sleep(0.01)
        raise TimeoutError(f"no receipt for {tx_hash}")

    # -- blocks and the pool ----------------------------------------------------------------
    def mine(self, blocks: int = 1) -> None:
        """Mine `blocks` blocks now, from the pool (`anvil_mine`)."""
        self.call("anvil_mine", hex(blocks))

    def block_number(self) -> int:
        return int(self.call("eth_blockNumber"), 16)

    def automine(self, on: bool) -> None:
        """Mine a block for each transaction as it arrives (on), or only when told (off)."""
        self.call("evm_setAutomine", on)

    def drop_all(self) -> None:
        """Empty the pool: every transaction not mined is forgotten."""
        self.call("anvil_dropAllTransactions")

    def set_next_base_fee(self, wei: int) -> None:
        """The base fee of the next block mined (later ones follow EIP-1559 from it)."""
        self.call("anvil_setNextBlockBaseFeePerGas", hex(wei))

    def base_fee(self) -> int:
        """The latest block's base fee."""
        return int(self.call("eth_getBlockByNumber", "latest", False)["baseFeePerGas"], 16)

    def set_block_gas_limit(self, gas: int) -> None:
        """The gas limit of the blocks mined from now on."""
        self.call("evm_setBlockGasLimit", hex(gas))

    def pooled(self) -> list[str]:
        """Hashes of the transactions in the pool, ready or waiting on a nonce."""
        content = self.call("txpool_content")
        return [
            str(tx["hash"])
            for part in ("pending", "queued")
            for by_nonce in content.get(part, {}).values()
            for tx in by_nonce.values()
        ]

    def send_raw(self, raw: bytes) -> str:
        return str(self.call("eth_sendRawTransaction", "0x" + raw.hex()))

    def receipt(self, tx_hash: str) -> dict[str, Any] | None:
        found = self.call("eth_getTransactionReceipt", tx_hash)
        return None if found is None else dict(found)

    def transaction(self, tx_hash: str) -> dict[str, Any] | None:
        found = self.call("eth_getTransactionByHash", tx_hash)
        return None if found is None else dict(found)

    def nonce(self, address: str, block: str = "latest") -> int:
        return int(self.call("eth_getTransactionCount", address, block), 16)

    def _send(self, tx: dict[str, Any]) -> dict[str, Any]:
        if self.legacy:  # anvil fills in EIP-1559 fees otherwise, which such a chain refuses
            tx = {"gasPrice": self.call("eth_gasPrice"), **tx}
        receipt = self.wait_receipt(self.call("eth_sendTransaction", {"from": self._funder, **tx}))
        if receipt.get("status") != "0x1":
            raise RuntimeError(f"anvil transaction failed: {receipt}")
        return receipt

    def _deploy(self, asset: Asset) -> str:
        from walletcore_chains.evm.devnet import token_artifact

        _, bytecode = token_artifact()
        args = abi_encode(
            ["string", "string", "uint8"], [f"Test {asset.symbol}", asset.symbol, asset.decimals]
        )
        receipt = self._send({"data": "0x" + (bytecode + args).hex(), "gas": hex(3_000_000)})
        return to_checksum_address(receipt["contractAddress"])

    # -- faucet -------------------------------------------------------------------------------
    def fund(self, address: str, asset: Asset, units: int) -> None:
        """Add `units` of `asset` to `address`: native coins by `anvil_setBalance` (the
        balance plus `units`), tokens minted in a mined transaction."""
        if asset.is_native:
            current = int(self.call("eth_getBalance", address, "latest"), 16)
            self.call("anvil_setBalance", address, hex(current + units))
            return
        data = _MINT + abi_encode(["address", "uint256"], [to_checksum_address(address), units])
        self._send({"to": self.tokens[asset.id], "data": "0x" + data.hex(), "gas": hex(200_000)})

    def native(self, address: str) -> Decimal:
        return Decimal(int(self.call("eth_getBalance", address, "latest"), 16)).scaleb(-18)


__all__ = ["ANVIL_ENV", "MAINNET_IDS", "AnvilNode", "find_anvil"]
