"""The EVM family: one adapter (`EvmGateway`) for every EVM chain over web3's `AsyncWeb3`,
configured per chain and network (`walletcore_chains.evm.config`).

The plugin `evm` serves ETHEREUM, BSC and POLYGON (`walletcore_chains.evm.plugin`). A
plugin for an EVM chain of one's own is built with the family's public API, from the
caller's values, without touching this package (`walletcore_chains.evm.family`):
`EvmChain` (the chain, its assets, its networks' `EvmConfig`, its default fee cap and
sandbox gas price) and `evm_plugin(name, chains)`.
"""

from walletcore_chains.evm.config import EvmConfig
from walletcore_chains.evm.family import (
    EvmChain,
    EvmChainSettings,
    SandboxEvm,
    evm_plugin,
    evm_settings_model,
)

__all__ = [
    "EvmChain",
    "EvmChainSettings",
    "EvmConfig",
    "SandboxEvm",
    "evm_plugin",
    "evm_settings_model",
]
