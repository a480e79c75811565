"""The EVM gateway: one adapter (`EvmGateway`) for ETHEREUM, BSC and POLYGON over web3's
`AsyncWeb3`, configured per chain and network (`walletcore_chains.evm.config`)."""
