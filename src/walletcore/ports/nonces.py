"""Ports of the nonces: the turn of one address of one chain to take a nonce, held across
every process of a deployment (docs/chains.md, "Nonces").

A port of its own, not a method of the storage: the container's `nonce_leases` provider
builds it from the entry-point group `walletcore.nonce_leases`, under the name the storage
was chosen by (`WALLETCORE_REPO`), so a storage plugin names its leases next to itself.
"""

from __future__ import annotations

from typing import Protocol


class NonceLease(Protocol):
    """The turn of one address of one chain to take a nonce, held across processes.

    Only one lease of a (chain, address) exists at a time in the whole deployment (every
    process on one database); the next `acquire` waits until this one is released, or
    until the process holding it dies.
    """

    #: The next nonce this deployment has seen accepted from the address (0: none yet).
    floor: int

    async def release(self, advanced_to: int | None) -> None:
        """Give the turn up. `advanced_to`: the new floor, when a transaction took a nonce
        (the stored floor only ever rises); None when nothing was sent. Idempotent."""
        ...

    async def reset(self, next_nonce: int) -> None:
        """The operator's repair (`walletcore nonces reset`): store `next_nonce` as the floor,
        lower or higher, while this lease is held; `floor` follows. A transaction the node
        dropped after accepting it leaves the floor past a nonce that never lands."""
        ...


class NonceLeases(Protocol):
    """Cross-process nonce reservation: one holder of a (chain, address) at a time."""

    async def acquire(self, chain: str, address: str) -> NonceLease:
        """Wait for the lease of `address` on `chain` (a nonce sequence: `eip155:<chain
        id>` for the EVM chains) and return it with the stored floor.

        Raises `AddressBusy` (503) when another holder keeps it too long, and the store's
        own errors (`StorageUnavailable`) when it cannot be reached.
        """
        ...


__all__ = ["NonceLease", "NonceLeases"]
