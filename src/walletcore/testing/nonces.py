"""The nonce leases of the in-memory storage: entry point `walletcore.nonce_leases: memory`
(next to `walletcore.repos: memory`), the leases of one process (`walletcore.nonces`)."""

from __future__ import annotations

from typing import Any

# Re-exported for the importers of this path that have not moved to `walletcore.nonces`.
from walletcore.nonces import HeldLease, LocalNonceLeases, checked_nonce


def build(**_: Any) -> LocalNonceLeases:
    """Entry point `walletcore.nonce_leases: memory` (next to `walletcore.repos: memory`)."""
    return LocalNonceLeases()


__all__ = ["HeldLease", "LocalNonceLeases", "build", "checked_nonce"]
