"""The chain plugins of walletcore_chains, entry points of `walletcore.chains`
(docs/chains.md):

- `evm` (ETHEREUM, BSC, POLYGON: `rpc`, `devnet`), `walletcore_chains.evm.plugin`;
- `solana` (SOLANA: `rpc`, `devnet`), `walletcore_chains.solana.plugin`;
- `bitcoin` (BITCOIN: `rpc` on Esplora or Core JSON-RPC), `walletcore_chains.bitcoin`;
- `tron` (TRON: `rpc` on a full node's HTTP API, TronGrid history),
  `walletcore_chains.tron`.
"""

from __future__ import annotations

from walletcore_chains.evm.plugin import rpc_web3

__all__ = ["rpc_web3"]
