"""Nonce leases (`walletcore.ports.NonceLeases`) that need no database server.

- `LocalNonceLeases`: one process (the in-memory repo). An asyncio lock per (chain,
  address), the floors in a dict; lost on restart, like everything in that repo.
- `FlockNonceLeases`: every process of one machine (the file repo, floors in a
  `JsonFloors` file; the SQL repo on an SQLite file, floors in its table). An exclusive OS
  lock (`filelock`'s `AsyncFileLock`: `flock` on Unix) on one lock file per (chain,
  address), tried without blocking and polled on the event loop, never in a thread; the
  floors read and raised in short transactions of their own (a write lock held across
  signing would stall the repo's other writes). A process that dies closes its
  descriptors, and the kernel drops its locks with them. Waiters are not served in order
  across processes (PostgreSQL's advisory locks are).

`filelock` comes with the extras that use these leases (`walletcore[sandbox]`, `[sql]`);
it is imported when a `FlockNonceLeases` is built, so the core itself does not need it.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from walletcore.domain.errors import AddressBusy
from walletcore.ports import NonceLease, NonceLeases
from walletcore.sandbox.jsonstore import JsonFile, JsonStoreError
from walletcore.secretfiles import private_folder

if TYPE_CHECKING:
    from filelock import AsyncFileLock, Timeout

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


@dataclass(eq=False)
class _Lease(NonceLease):
    """A held lease; `let_go(advanced_to)` runs once, on the first `release`."""

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


def checked_nonce(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a nonce floor is a whole number >= 0, not {value!r}")
    return value


_FLOORS_FORMAT = "walletcore-sandbox-nonce-floors"
_Floors = dict[str, dict[str, int]]  # chain -> address -> next nonce


class JsonFloors(FloorStore):
    """Floors in one JSON file (`JsonFile`: changed under `flock`, replaced atomically)."""

    def __init__(self, path: Path) -> None:
        self._file: JsonFile[_Floors] = JsonFile(
            path, load=_load_floors, dump=_dump_floors, empty=dict
        )

    async def read(self, chain: str, address: str) -> int:
        return self._file.read().get(chain, {}).get(address, 0)

    async def raise_to(self, chain: str, address: str, next_nonce: int) -> None:
        def change(floors: _Floors) -> tuple[_Floors | None, None]:
            if floors.get(chain, {}).get(address, 0) >= next_nonce:
                return None, None
            return {**floors, chain: {**floors.get(chain, {}), address: next_nonce}}, None

        await self._file.mutate(change)

    async def set_to(self, chain: str, address: str, next_nonce: int) -> None:
        def change(floors: _Floors) -> tuple[_Floors | None, None]:
            return {**floors, chain: {**floors.get(chain, {}), address: next_nonce}}, None

        await self._file.mutate(change)


def _load_floors(data: Any, path: Path) -> _Floors:
    if not isinstance(data, dict) or data.get("format") != _FLOORS_FORMAT:
        raise JsonStoreError(f"{path} is not a walletcore nonce floors file")
    floors = data.get("floors", {})
    return {str(c): {str(a): int(n) for a, n in by.items()} for c, by in floors.items()}


def _dump_floors(floors: _Floors) -> Any:
    return {"format": _FLOORS_FORMAT, "version": 1, "floors": floors}


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

        return _Lease(self._floors.get(key, 0), let_go, store)


class FlockNonceLeases(NonceLeases):
    """Leases shared by the processes of one machine: an OS file lock per (chain, address)
    under `directory`, the floors in `floors`. A lease dropped without `release` is let go
    when it is collected (filelock's finalizer), without raising its floor."""

    def __init__(self, directory: Path, floors: FloorStore, *, wait: float = WAIT_SECONDS) -> None:
        try:
            from filelock import AsyncFileLock, Timeout
        except ImportError as exc:  # pragma: no cover - the extras bring it
            raise ImportError(
                "FlockNonceLeases needs filelock: pip install 'walletcore[sandbox]'"
            ) from exc
        self.directory = Path(directory)
        self._floors = floors
        self._wait = max(0.0, wait)  # filelock waits forever on a negative timeout
        self._lock_type: type[AsyncFileLock] = AsyncFileLock
        self._busy: type[Timeout] = Timeout

    def __repr__(self) -> str:
        return f"FlockNonceLeases({str(self.directory)!r})"

    def lock_path(self, chain: str, address: str) -> Path:
        return self.directory / f"{lease_digest(chain, address).hex()}.lock"

    async def acquire(self, chain: str, address: str) -> NonceLease:
        private_folder(self.directory)
        # One lock object per lease: each opens its own descriptor, so two leases of one
        # process exclude each other as two processes' do.
        lock = self._lock_type(
            self.lock_path(chain, address),
            mode=0o600,
            timeout=self._wait,
            poll_interval=POLL_SECONDS,
            run_in_executor=False,  # a non-blocking flock per try, on the loop
            fallback_to_soft=False,  # a marker file would outlive a killed holder
        )
        try:
            await lock.acquire()
        except self._busy:
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

        return _Lease(floor, let_go, store)


__all__ = [
    "WAIT_SECONDS",
    "FlockNonceLeases",
    "FloorStore",
    "JsonFloors",
    "LocalNonceLeases",
    "checked_nonce",
    "lease_digest",
]
