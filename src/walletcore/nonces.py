"""Nonce leases of one process (`walletcore.ports.NonceLeases`), and what every adapter's
leases build on: the held lease (`HeldLease`) and the check of a floor (`checked_nonce`).

`LocalNonceLeases`: an asyncio lock per (chain, address), the floors in a dict, lost on
restart. The leases of the in-memory storage (entry point `walletcore.nonce_leases:
memory`, `walletcore.testing.nonces`) and of any deployment that is one process (the SQL
storage on an SQLite database in memory). Not a fake: correct wherever every sender shares
this object, so production code imports it from here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from walletcore.ports.nonces import NonceLease, NonceLeases


def checked_nonce(value: int) -> int:
    """A floor is a whole number >= 0 (`ValueError` otherwise): every adapter checks it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a nonce floor is a whole number >= 0, not {value!r}")
    return value


@dataclass(eq=False)
class HeldLease(NonceLease):
    """A held lease for adapters to build on: `let_go(advanced_to)` runs once, on the first
    `release`; `store(next_nonce)` keeps the operator's reset."""

    floor: int
    let_go: Callable[[int | None], Awaitable[None]] = field(repr=False)
    store: Callable[[int], Awaitable[None]] = field(repr=False)
    released: bool = False

    async def release(self, advanced_to: int | None) -> None:
        if self.released:
            return
        self.released = True
        await self.let_go(advanced_to)

    async def reset(self, next_nonce: int) -> None:
        if self.released:
            raise RuntimeError("a released nonce lease cannot reset its floor")
        await self.store(checked_nonce(next_nonce))
        self.floor = next_nonce


class LocalNonceLeases(NonceLeases):
    """Leases of one process: an asyncio lock per (chain, address), floors in memory."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], tuple[asyncio.AbstractEventLoop, asyncio.Lock]] = {}
        self._floors: dict[tuple[str, str], int] = {}

    def __repr__(self) -> str:
        return f"LocalNonceLeases({len(self._floors)} floors)"

    async def acquire(self, chain: str, address: str) -> NonceLease:
        key = (chain, address)
        loop = asyncio.get_running_loop()
        held = self._locks.get(key)
        if held is None or held[0] is not loop:  # an asyncio.Lock serves one loop only
            held = self._locks[key] = (loop, asyncio.Lock())
        lock = held[1]
        await lock.acquire()

        async def let_go(advanced_to: int | None) -> None:
            if advanced_to is not None:
                self._floors[key] = max(self._floors.get(key, 0), advanced_to)
            lock.release()

        async def store(next_nonce: int) -> None:
            self._floors[key] = next_nonce

        return HeldLease(self._floors.get(key, 0), let_go, store)


__all__ = ["HeldLease", "LocalNonceLeases", "checked_nonce"]
