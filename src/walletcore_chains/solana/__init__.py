"""The Solana gateway: `SolanaGateway` for SOL and SPL tokens over a node; the in-process
LiteSVM node of the devnet (`walletcore_chains.solana.devnet`)."""
