"""walletcore_l2chain: a third party's EVM chain, for the tests.

It adds BASECHAIN, an EVM L2 with its own chain id (8453), native coin (asset 8453, ETH,
18 decimals) and token (asset 84531, USDC, an ERC20 of 6 decimals), as a package of its
own: no edit to walletcore or walletcore_chains. It imports walletcore's public API only
(`walletcore.domain.assets`, and the EVM family's `walletcore_chains.evm`), and is found
through its entry point `l2chain` in the group `walletcore.chains`.

What the family gives it (`evm_plugin`): EVM addresses and keys (`m/44'/60'/0'/0/0`: a
wallet's BASECHAIN address is its ETHEREUM one), `EvmGateway` in the mode `rpc`, nonces
reserved under `eip155:8453`, and its settings, `WALLETCORE_BASECHAIN_RPC_URL`,
`_NETWORK` (`mainnet`, the default, or `testnet`), `_TOKENS` (asset id -> checksummed
contract, JSON), ... Its description (`DESCRIPTION`): fee-bump replacements, a default fee
cap of 0.001 ETH, `401 Invalid credentials` on a wrong password, `/fee` as a decimal
string, `0x` hex hashes, and the sandbox ledger's gas x 0.1 gwei.

A deployment serves it only when it names it: `WALLETCORE_CHAIN_BASECHAIN=l2chain:rpc`
(or `=sandbox`, on the sandbox profile, for the sandbox ledger).
"""

from __future__ import annotations

from decimal import Decimal

from walletcore.chainplugins import ChainPlugin
from walletcore.domain.assets import Asset, AssetKind, Chain
from walletcore.domain.chains import ChainDescription
from walletcore_chains.evm import EvmChain, EvmConfig, evm_plugin

BASECHAIN = Chain("BASECHAIN")
#: The chain id its transactions are signed for, on its main network.
CHAIN_ID = 8453
ETH = Asset(8453, BASECHAIN, "ETH", AssetKind.NATIVE, None, 18)
USDC = Asset(84531, BASECHAIN, "USDC", AssetKind.TOKEN, "ERC20", 6)

CHAIN = EvmChain(
    chain=BASECHAIN,
    assets=(ETH, USDC),
    networks={
        "mainnet": EvmConfig(
            BASECHAIN,
            "mainnet",
            CHAIN_ID,
            "ETH",
            {USDC.id: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"},
            confirmations=10,
            stuck_after_seconds=60.0,
        ),
        "testnet": EvmConfig(
            BASECHAIN,
            "testnet",
            84532,
            "ETH",
            {USDC.id: "0x036CbD53842c5426634e7929541eC2318f3dCF7e"},
            confirmations=3,
            stuck_after_seconds=60.0,
        ),
    },
    default_fee_cap=Decimal("0.001"),
    sandbox_gas_price_wei=10**8,
)
DESCRIPTION: ChainDescription = CHAIN.description

#: Entry point `walletcore.chains: l2chain`.
PLUGIN: ChainPlugin[object] = evm_plugin("l2chain", [CHAIN])

__all__ = ["BASECHAIN", "CHAIN", "CHAIN_ID", "DESCRIPTION", "ETH", "PLUGIN", "USDC"]
