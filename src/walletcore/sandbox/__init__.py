"""Zero-dependency adapters for the sandbox profile and for tests: repo, prices, venue."""

from walletcore.sandbox.prices import SandboxPriceSource, sandbox_unit_price
from walletcore.sandbox.repo import InMemoryRepo
from walletcore.sandbox.venue import SandboxVenue

__all__ = ["InMemoryRepo", "SandboxPriceSource", "SandboxVenue", "sandbox_unit_price"]
