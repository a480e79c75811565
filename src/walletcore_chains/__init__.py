"""walletcore_chains: HD keys, address validation and the sealed KeyStore (chain adapters).

Nothing here runs at import time: chain libraries are imported by the functions that use
them, and bitcoinlib only after its data directory is pinned (`walletcore_chains.bclib`).
"""

from walletcore_chains.addresses import validate_address

__all__ = ["validate_address"]
