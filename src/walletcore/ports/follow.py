"""Ports of the transfer lifecycle: what a chain says of one broadcast transaction, and how
a transfer that does not confirm is replaced (docs/transfers.md).

A gateway that also implements `TransferFollower` has its sends followed to their end by
the `follow_sends` job (walletcore.jobs): pending, then `success` or `failed`, through the
internal states `stuck`, `dropped` and `replaced`. A gateway without it (the sandbox) is
only asked `ChainGateway.lookup`, as before.

Replacing, two ways, chosen by the chain:
- **A ladder signed in advance** (EVM: the same nonce with raised tip and max fee, or a
  zero-value cancel to self; BITCOIN: replace-by-fee over the same coins). A user's key is
  sealed under a password the service never keeps, so the rungs are built by
  `replacements()` when the send is signed and signed in the same unseal; the job or the
  operator broadcasts them later, without any key.
- **Re-signing** (SOLANA: a fresh blockhash and compute-unit price; TRON: a fresh reference
  block and expiration), allowed only once the first transaction can provably never land
  (`Sighting.EXPIRED`). The platform wallet's key opens without a password, so the job
  re-signs platform sends itself; a user's send is re-signed when the client replays its
  `/send` (same X-Request-Id, which carries the password).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, Protocol, runtime_checkable

from walletcore.domain.assets import Asset
from walletcore.ports.chains import SignedTransfer, UnsignedTransfer


class Sighting(StrEnum):
    """What the chain says of one broadcast transaction (one hash) now."""

    #: The node has it (mempool, or mined but not yet at the chain's depth).
    PENDING = "pending"
    #: Mined, at the chain's depth, succeeded.
    SUCCESS = "success"
    #: Mined, at the chain's depth, failed (reverted, out of energy): its fee is spent.
    FAILED = "failed"
    #: The node neither holds nor mined it (evicted, dropped, or not yet propagated), and
    #: it may still land: broadcasting the same bytes again is safe.
    MISSING = "missing"
    #: It can never land: another transaction took its place (an EVM nonce mined by
    #: another hash, a BITCOIN coin spent by another transaction).
    CONFLICT = "conflict"
    #: It can never land as signed and nothing took its place (SOLANA: its blockhash is
    #: past its last valid block height; TRON: past its expiration): re-signing is safe.
    EXPIRED = "expired"

    @property
    def is_final(self) -> bool:
        return self in (Sighting.SUCCESS, Sighting.FAILED)


@dataclass(frozen=True, slots=True)
class Replacement:
    """One rung of a pre-signed ladder: the same transfer at a higher fee (`bump`), or a
    transfer of nothing to the sender itself that takes the first one's place (`cancel`).

    `unsigned` is signed like the send it replaces (`UnsignedTransfer.payload_for` per
    signer; its `transfer.signers` are the send's). `fee_units`: the most it can cost, in
    the chain's native base units, never above the cap it was built under.
    """

    kind: Literal["bump", "cancel"]
    unsigned: UnsignedTransfer
    fee_units: int


@runtime_checkable
class TransferFollower(Protocol):
    """The lifecycle side of a `ChainGateway` (implemented by the same object)."""

    #: Seconds a broadcast may stay pending before it counts as `stuck` (and is bumped).
    stuck_after_seconds: float
    #: True: a transfer that `EXPIRED` is re-signed (`prepare` again); False: it is
    #: replaced from its pre-signed ladder only.
    resigns: bool

    async def sighting(self, sender: str, asset: Asset, signed: SignedTransfer) -> Sighting:
        """What the chain says of `signed` (sent from `sender`) now.

        Raises `ServiceUnavailable` (or the node's error) when it cannot be asked; never
        `MISSING` for a node that did not answer."""
        ...

    def replacements(self, unsigned: UnsignedTransfer, cap_units: int) -> Sequence[Replacement]:
        """The ladder of `unsigned`, built offline (no node call) when it is signed: bumps
        of rising fee, each meeting the chain's replacement rule over the one before, and
        cancels, every rung costing at most `cap_units`. Empty when the chain re-signs
        instead, or when even the first rung would cross the cap."""
        ...


__all__ = [
    "Replacement",
    "Sighting",
    "TransferFollower",
]
