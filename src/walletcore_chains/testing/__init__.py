"""Loopback JSON-RPC nodes over the in-process devnet chains, for testing an app that embeds
walletcore on `WALLETCORE_CHAINS=rpc` without a network (needs the `devnets` extra):

- `walletcore_chains.testing.evm_rpc_node.EvmRpcNode`: a geth-like node over a
  `DevnetEvmGateway` (py-evm through eth-tester), with BSC/Polygon proof-of-authority
  blocks, legacy chains and node refusals on request.
- `walletcore_chains.testing.solana_rpc_node.RpcTestNode`: a Solana node over a
  `DevnetSolanaGateway`'s LiteSVM runtime.
- `walletcore_chains.testing.tron_node.TronTestNode`: a TRON full node's HTTP API and
  TronGrid's `/v1` history, verifying every broadcast, TRC20 calls on py-evm
  (docs/tron.md).

Each is a stdlib `ThreadingHTTPServer` on 127.0.0.1 (a free port) in a thread, used as a
context manager; `url` is what `WALLETCORE_RPC_<CHAIN>` takes (docs/chains.md).
"""
