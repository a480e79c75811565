"""Zero-network adapters of the sandbox profile: prices, venue, the sandbox chain and its
ledger, the faucet (`walletcore sandbox fund`).

Found through entry points (`walletcore.price_sources: sandbox`, `walletcore.venues:
sandbox`, `walletcore.chains: sandbox`; `pip install 'walletcore[sandbox]'`). This package
imports the core and the standard library only (the ledger is an SQLite file, `sqlite3`).
The in-memory storage is the core's fake (`walletcore.testing`), and the nonce leases of one
process are the core's own (`walletcore.nonces`).
"""

from walletcore_sandbox.prices import SandboxPriceSource, sandbox_unit_price
from walletcore_sandbox.venue import SandboxVenue

__all__ = ["SandboxPriceSource", "SandboxVenue", "sandbox_unit_price"]
