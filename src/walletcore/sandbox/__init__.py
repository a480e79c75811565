"""Zero-network adapters for the sandbox profile: prices, venue, and the sandbox chain.

The in-memory storage and nonce leases are in `walletcore.testing`."""

from walletcore.sandbox.prices import SandboxPriceSource, sandbox_unit_price
from walletcore.sandbox.venue import SandboxVenue

__all__ = ["SandboxPriceSource", "SandboxVenue", "sandbox_unit_price"]
