"""The devnet EVM chains: an in-process py-evm chain (eth-tester) per EVM chain, with the
asset table's tokens deployed at start-up from `contracts/Token.vy` (compiled offline by
the `vyper` package) and a faucet paying from the chain's prefunded account.

Real execution (gas, nonces, reverts, logs), no network; the chain lives as long as the
process (docs/chains.md: `walletcore sandbox fund` cannot reach it from another process).
Its deposits are scanned as on a node without a call tracer, block receipts or a readable
pool (eth-tester serves none of them): token transfers and transactions' own value.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from eth_abi.abi import encode as abi_encode
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak
from web3 import AsyncWeb3
from web3.providers.eth_tester import AsyncEthereumTesterProvider

from walletcore.domain.assets import CONTRACT_ASSETS, Asset, Chain
from walletcore.domain.errors import InvalidRequest
from walletcore.ports import AddressValidator
from walletcore_chains.evm.config import evm_config
from walletcore_chains.evm.gateway import EvmGateway

TOKEN_SOURCE = Path(__file__).parent / "contracts" / "Token.vy"
_MINT = keccak(b"mint(address,uint256)")[:4]


@lru_cache(maxsize=1)
def token_artifact() -> tuple[list[Any], bytes]:
    """(ABI, deployment bytecode) of `Token.vy`, compiled offline once per process."""
    import vyper  # type: ignore[import-untyped]

    out = vyper.compile_code(TOKEN_SOURCE.read_text(), output_formats=["abi", "bytecode"])
    return out["abi"], bytes.fromhex(out["bytecode"].removeprefix("0x"))


class DevnetEvmGateway(EvmGateway):
    """An `EvmGateway` on its own eth-tester chain, with a faucet."""

    def __init__(
        self, chain: Chain, validator: AddressValidator, assets: Iterable[Asset] | None = None
    ) -> None:
        """`assets`: the chain's assets (its factory passes its description's), whose
        tokens are deployed; by default the contract's of `chain`."""
        chosen = tuple(CONTRACT_ASSETS if assets is None else assets)
        provider = AsyncEthereumTesterProvider()
        self.tester = provider.ethereum_tester
        self.funder = self.tester.get_accounts()[0]
        tokens = {
            asset.id: self._deploy(asset)
            for asset in chosen
            if asset.chain == chain and not asset.is_native
        }
        super().__init__(
            evm_config(chain, "devnet"),
            AsyncWeb3(provider),
            validator,
            tokens=tokens,
            assets=chosen,
        )

    def __repr__(self) -> str:
        return f"DevnetEvmGateway({self.chain.value})"

    def _deploy(self, asset: Asset) -> str:
        _, bytecode = token_artifact()
        args = abi_encode(
            ["string", "string", "uint8"], [f"Devnet {asset.symbol}", asset.symbol, asset.decimals]
        )
        tx_hash = self.tester.send_transaction(
            {"from": self.funder, "data": "0x" + (bytecode + args).hex(), "gas": 3_000_000}
        )
        receipt = self.tester.get_transaction_receipt(tx_hash)
        return to_checksum_address(receipt["contract_address"])

    async def fund(self, address: str, asset: Asset, units: int) -> int:
        """Pay `units` of `asset` to `address` from the prefunded account (mined at once);
        the new balance."""
        if asset.chain != self.chain:
            raise InvalidRequest(f"asset {asset.id} is not on {self.chain}")
        if units <= 0:
            raise InvalidRequest("amount must be greater than zero")
        where = self.validate_address(address)
        if asset.is_native:
            tx = {"from": self.funder, "to": where, "value": units, "gas": 21_000}
        else:
            data = _MINT + abi_encode(["address", "uint256"], [where, units])
            tx = {
                "from": self.funder,
                "to": self.token_address(asset),
                "data": "0x" + data.hex(),
                "gas": 200_000,
            }
        self.tester.send_transaction(tx)
        return await self.balance(where, asset)

    def mine(self, blocks: int = 1) -> None:
        """Mine empty blocks (confirmations pile up)."""
        self.tester.mine_blocks(blocks)


__all__ = ["DevnetEvmGateway", "token_artifact"]
