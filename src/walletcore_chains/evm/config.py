"""EVM chain configurations: chain id, native coin, token contracts and confirmation depth,
per chain and network (`mainnet`, `testnet`, `devnet`).

`devnet` is the in-process py-evm chain (eth-tester): its chain id is the node's and its
token contracts are deployed at start-up (`walletcore_chains.evm.devnet`), so the devnet
table names no address.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from walletcore.domain.assets import Chain

NETWORKS = ("mainnet", "testnet", "devnet")


@dataclass(frozen=True, slots=True)
class EvmConfig:
    chain: Chain
    network: str
    #: None: whatever the node answers (the devnet).
    chain_id: int | None
    native_symbol: str
    #: asset id -> token contract address (checksummed)
    tokens: Mapping[int, str] = field(default_factory=dict)
    #: blocks on top of a transaction's (its own included) before it reads `success`
    confirmations: int = 12
    #: whether the chain prices gas with EIP-1559 (base fee + tip) or a legacy gas price
    eip1559: bool = True
    #: how many recent blocks `history` scans (see docs/chains.md: production wants an indexer)
    history_blocks: int = 2_000


_MAINNET = {
    Chain.ETHEREUM: EvmConfig(
        Chain.ETHEREUM,
        "mainnet",
        1,
        "ETH",
        {
            21: "0xdAC17F958D2ee523a2206206994597C13D831ec7",
            22: "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48",
        },
        confirmations=12,
    ),
    Chain.BSC: EvmConfig(
        Chain.BSC,
        "mainnet",
        56,
        "BNB",
        {
            31: "0x55d398326f99059fF775485246999027B3197955",
            32: "0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d",
        },
        confirmations=15,
    ),
    Chain.POLYGON: EvmConfig(
        Chain.POLYGON,
        "mainnet",
        137,
        "POL",
        {
            51: "0xc2132D05D31c914a87C6611C10748AEb04B58e8F",
            52: "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359",
        },
        confirmations=64,
    ),
}

_TESTNET = {
    Chain.ETHEREUM: EvmConfig(
        Chain.ETHEREUM,
        "testnet",
        11155111,
        "ETH",  # Sepolia
        {22: "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238"},
        confirmations=3,
    ),
    Chain.BSC: EvmConfig(Chain.BSC, "testnet", 97, "BNB", {}, confirmations=3),
    Chain.POLYGON: EvmConfig(
        Chain.POLYGON,
        "testnet",
        80002,
        "POL",  # Amoy
        {52: "0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582"},
        confirmations=3,
    ),
}

_DEVNET_SYMBOLS = {Chain.ETHEREUM: "ETH", Chain.BSC: "BNB", Chain.POLYGON: "POL"}


def evm_config(chain: Chain, network: str) -> EvmConfig:
    """The configuration of `chain` on `network`; `ValueError` for an unknown network."""
    if network == "mainnet":
        return _MAINNET[chain]
    if network == "testnet":
        return _TESTNET[chain]
    if network == "devnet":
        return EvmConfig(chain, "devnet", None, _DEVNET_SYMBOLS[chain], {}, confirmations=1)
    raise ValueError(f"unknown network {network!r}; known: {', '.join(NETWORKS)}")


EVM_CHAINS = (Chain.ETHEREUM, Chain.BSC, Chain.POLYGON)

__all__ = ["EVM_CHAINS", "NETWORKS", "EvmConfig", "evm_config"]
