"""Deposits: value that reached a watched address (a user's or a platform wallet's) on
chain, whoever sent it and however (a plain transfer, a token `Transfer`, value moved
inside a contract call, a Bitcoin output, an SPL token account credit).

A chain plugin's scanner (`walletcore.ports.deposits.DepositScanner`) reports what it
finds in a range of blocks as `Incoming` credits; the core stores each once, keyed by
`(chain, tx_hash, position)`, and moves it:

    seen --(its block is `confirmations` deep, still in the chain)--> confirmed
      \\--(its transaction is in no block and no mempool any more)--> reversed

`seen` covers the mempool (`block` None) and a block not yet deep enough; a reorg that
moves the transaction to another block keeps it `seen` with the new block. `reversed`
is final unless a later scan finds the same credit again (then it is `seen` once more).
Every move is a compare-and-set on the stored status and block (`DepositStore.move`),
with its audit entry and its event (walletcore.domain.events) in the same unit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from walletcore.domain.assets import Chain
from walletcore.domain.wallet import WalletOwner


class DepositStatus(StrEnum):
    SEEN = "seen"
    CONFIRMED = "confirmed"
    REVERSED = "reversed"


@dataclass(frozen=True, slots=True)
class BlockRef:
    """One block of a chain: its height (slot, block number) and its hash (id)."""

    height: int
    hash: str


@dataclass(frozen=True, slots=True)
class Watched:
    """Whose a watched address is: a user's wallet, or the api client's platform wallet."""

    client_id: str
    owner: WalletOwner
    #: None for a platform wallet.
    user_id: str | None


@dataclass(frozen=True, slots=True)
class Incoming:
    """One credit a scanner found: `amount_units` of `asset_id` to `address`.

    `position` tells credits of one transaction apart, in the chain's own words, stable
    across scans: `out:<n>` (a Bitcoin output), `log:<n>` (an EVM log index), `tx` (an
    EVM transaction's own value), `call:<path>` (value moved inside a contract call, its
    place in the call tree), `sol` / `spl:<account index>` (Solana), `trx` / `trc20:<n>`
    (TRON). `address` is the watched address exactly as the wallet stores it."""

    chain: Chain
    tx_hash: str
    position: str
    address: str
    asset_id: int
    amount_units: int
    #: The block that holds it; None while it is only in the mempool.
    block: BlockRef | None
    #: The payer, when the chain names one (the transaction's sender, the token's `from`).
    sender: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (str(self.chain), self.tx_hash, self.position)


@dataclass(frozen=True, slots=True)
class Deposit:
    """A stored deposit: the credit, whose it is, and where it stands."""

    deposit_id: str
    client_id: str
    owner: WalletOwner
    user_id: str | None
    chain: Chain
    asset_id: int
    address: str
    tx_hash: str
    position: str
    amount_units: int
    sender: str | None
    status: DepositStatus
    #: The block that holds it now; None while in the mempool (or once reversed).
    block: BlockRef | None
    seen_at: datetime
    confirmed_at: datetime | None = None
    reversed_at: datetime | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (str(self.chain), self.tx_hash, self.position)

    @classmethod
    def of(cls, deposit_id: str, found: Incoming, whose: Watched, at: datetime) -> Deposit:
        return cls(
            deposit_id=deposit_id,
            client_id=whose.client_id,
            owner=whose.owner,
            user_id=whose.user_id,
            chain=found.chain,
            asset_id=found.asset_id,
            address=found.address,
            tx_hash=found.tx_hash,
            position=found.position,
            amount_units=found.amount_units,
            sender=found.sender,
            status=DepositStatus.SEEN,
            block=found.block,
            seen_at=at,
        )

    def moved_to(self, block: BlockRef | None) -> Deposit:
        """Still `seen`, now in `block` (mined, or moved by a reorg)."""
        return replace(self, status=DepositStatus.SEEN, block=block)

    def confirm(self, at: datetime) -> Deposit:
        return replace(self, status=DepositStatus.CONFIRMED, confirmed_at=at)

    def reverse(self, at: datetime) -> Deposit:
        return replace(self, status=DepositStatus.REVERSED, block=None, reversed_at=at)

    def seen_again(self, block: BlockRef | None) -> Deposit:
        return replace(self, status=DepositStatus.SEEN, block=block, reversed_at=None)


@dataclass(frozen=True, slots=True)
class ScanCursor:
    """How far a chain was scanned: every block up to `block` (included), as the chain
    had it then. Stored in the same unit as what the scan found."""

    chain: Chain
    block: BlockRef
    updated_at: datetime


__all__ = [
    "BlockRef",
    "Deposit",
    "DepositStatus",
    "Incoming",
    "ScanCursor",
    "Watched",
]
