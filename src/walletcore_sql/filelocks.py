"""Nonce leases (`walletcore.ports.NonceLeases`) shared by the processes of one machine:
the SQL storage's on an SQLite file (`walletcore_sql.nonces`), floors in its table.

`FlockNonceLeases`: an exclusive OS lock (`filelock`'s `AsyncFileLock`: `flock` on Unix) on
one lock file per (chain, address), tried without blocking and polled on the event loop,
never in a thread; the floors read and raised in short transactions of their own (a write
lock held across signing would stall the storage's other writes). A process that dies
closes its descriptors, and the kernel drops its locks with them. Waiters are not served in
order across processes (PostgreSQL's advisory locks are). The leases of one process:
`walletcore.nonces.LocalNonceLeases`.

filelock 4 or newer (`walletcore[sql]`), for `fallback_to_soft=False`: never an existence
marker, which would outlive a killed holder.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

from filelock import AsyncFileLock, Timeout

from walletcore.domain.errors import AddressBusy
from walletcore.nonces import HeldLease
from walletcore.ports.nonces import NonceLease, NonceLeases
from walletcore.secretfiles import private_folder

#: Seconds an `acquire` waits for a lease another holder keeps, before `AddressBusy`. A
#: holder keeps it from `prepare` to `broadcast` (a sponsored EVM transfer waits for its
#: top-up's receipt in between), and a `NonceBook` lets go after 120 s at most.
WAIT_SECONDS = 180.0
#: How often a waiting `FlockNonceLeases.acquire` tries the lock again, in seconds.
POLL_SECONDS = 0.01


def lease_digest(chain: str, address: str, scope: str = "") -> bytes:
    """A stable 16-byte name of a lease: the same in every process and on every run (never
    Python's `hash()`, which is salted per process). `scope` keeps side-by-side stores
    apart (a PostgreSQL schema)."""
    material = f"walletcore-nonce-lease\x00{scope}\x00{chain}\x00{address}".encode()
    return hashlib.blake2b(material, digest_size=16).digest()


class FloorStore(Protocol):
    """Where `FlockNonceLeases` keeps the floors: the next nonce seen accepted per
    (chain, address)."""

    async def read(self, chain: str, address: str) -> int:
        """The stored floor, 0 when none."""
        ...

    async def raise_to(self, chain: str, address: str, next_nonce: int) -> None:
        """Store `max(stored, next_nonce)`: a floor never goes down."""
        ...

    async def set_to(self, chain: str, address: str, next_nonce: int) -> None:
        """Store `next_nonce`, lower or higher (the operator's `reset`)."""
        ...


class FlockNonceLeases(NonceLeases):
    """Leases shared by the processes of one machine: an OS file lock per (chain, address)
    under `directory`, the floors in `floors`. A lease dropped without `release` is let go
    when it is collected (filelock's finalizer), without raising its floor."""

    def __init__(self, directory: Path, floors: FloorStore, *, wait: float = WAIT_SECONDS) -> None:
        self.directory = Path(directory)
        self._floors = floors
        self._wait = max(0.0, wait)  # filelock waits forever on a negative timeout

    def __repr__(self) -> str:
        return f"FlockNonceLeases({str(self.directory)!r})"

    def lock_path(self, chain: str, address: str) -> Path:
        return self.directory / f"{lease_digest(chain, address).hex()}.lock"

    async def acquire(self, chain: str, address: str) -> NonceLease:
        private_folder(self.directory)
        # One lock object per lease: each opens its own descriptor, so two leases of one
        # process exclude each other as two processes' do.
        lock = AsyncFileLock(
            self.lock_path(chain, address),
            mode=0o600,
            timeout=self._wait,
            poll_interval=POLL_SECONDS,
            run_in_executor=False,  # a non-blocking flock per try, on the loop
            fallback_to_soft=False,  # a marker file would outlive a killed holder
        )
        try:
            await lock.acquire()
        except Timeout:
            raise AddressBusy() from None
        try:
            floor = await self._floors.read(chain, address)
        except BaseException:
            await lock.release(force=True)
            raise

        async def let_go(advanced_to: int | None) -> None:
            try:
                if advanced_to is not None:  # stored before anyone else may read it
                    await self._floors.raise_to(chain, address, advanced_to)
            finally:
                await lock.release(force=True)

        async def store(next_nonce: int) -> None:
            await self._floors.set_to(chain, address, next_nonce)

        return HeldLease(floor, let_go, store)


__all__ = ["POLL_SECONDS", "WAIT_SECONDS", "FlockNonceLeases", "FloorStore", "lease_digest"]
