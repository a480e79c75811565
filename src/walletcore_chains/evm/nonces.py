"""Nonce reservation: at most one built-but-not-broadcast transaction per address.

A transfer's nonce is signed into it before it is stored and broadcast, so two sends from
one address racing would either share a nonce (one of them can never land) or, when one
is abandoned, leave a gap that stalls every later one. The book prevents both:

- `reserve(address, pending)` waits its turn on the address's gate (FIFO, in this process),
  then on the address's lease (`walletcore.ports.NonceLeases`, from the Repo: the turn
  across every process on one store), then takes `max(node's pending nonce, last nonce
  this process saw accepted + 1, the lease's floor)`. The floor covers a node that lags
  (a load-balanced endpoint whose pending count misses a transaction just broadcast).
- The gate and the lease stay held until the transaction is broadcast (`accepted`: the
  lease's floor rises to nonce + 1), or will never be (`release`: signing, storing or
  broadcasting failed with nothing sent; the floor stays); the next reservation then
  reads the node again, so a released nonce is reused, never skipped.
- A holder that vanished (a bug, a cancelled task) loses the gate after `lease` seconds;
  a holder that is alive but slow on purpose (a sponsored transfer waiting for its
  top-up's receipt) `renew`s its turn first, so it never lapses under a live send; a
  process that died loses the lease with its connection or lock file.

Without leases (`leases=None`) the turn is per process only: one signing process per
address (the devnets, whose chains live in one process anyway).

The book keeps a gate per address that sends. On leases, an idle gate (no holder, nobody
waiting, its last floor stored) holds nothing the lease does not: past `GATES_REMEMBERED`
gates the idle ones are forgotten, the oldest first, so a worker serving millions of
addresses keeps a bounded map. Without leases a gate's floor is the only record of what
was accepted, so none is forgotten.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from walletcore.ports import NonceLease, NonceLeases

log = logging.getLogger(__name__)
T = TypeVar("T")
#: Gates a book on leases keeps before it forgets idle ones (about 380 bytes each; it keeps
#: half as many, the newest, and every gate in use).
GATES_REMEMBERED = 10_000


@dataclass
class _Gate:
    loop: asyncio.AbstractEventLoop
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    holder: int | None = None
    token: int = 0
    expiry: asyncio.TimerHandle | None = None
    #: the cross-process lease the holder has, if any
    lease: NonceLease | None = None
    #: the lowest nonce not yet seen accepted from this process
    floor: int = 0
    #: with leases: the last accepted nonce's floor could not be stored, so this process's
    #: own floor counts until a later one is (else the lease's floor alone rules, and an
    #: operator's `reset` takes effect at once)
    unstored: bool = False
    #: the node's pending count last seen below the floor (a stall, if it persists)
    behind: int | None = None
    #: reservations (and floor reads or resets) waiting for `lock`
    waiting: int = 0

    async def take_turn(self) -> None:
        """Wait for the lock, counted in `waiting` meanwhile (a gate waited on is in use)."""
        self.waiting += 1
        try:
            await self.lock.acquire()
        finally:
            self.waiting -= 1

    @property
    def idle(self) -> bool:
        """No holder, no one waiting for it, its last floor stored: forgetting it loses
        nothing the lease does not hold."""
        return (
            self.holder is None
            and not self.lock.locked()
            and self.waiting == 0
            and not self.unstored
        )


class NonceBook:
    def __init__(
        self,
        lease: float = 120.0,
        *,
        leases: NonceLeases | None = None,
        chain: str | None = None,
    ) -> None:
        """`leases`: the Repo's, shared by every process on the store, for the nonce
        sequence `chain` (`eip155:<chain id>`); None: this process only."""
        if leases is not None and not chain:
            raise ValueError("a NonceBook on shared leases needs its chain's key (eip155:<id>)")
        self._lease = lease
        self._leases = leases
        self._chain = chain or ""
        self._gates: dict[str, _Gate] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def __repr__(self) -> str:
        shared = f"shared {self._chain}" if self._leases is not None else "this process"
        return f"NonceBook({shared}, {len(self._gates)} addresses)"

    @property
    def leases(self) -> NonceLeases | None:
        return self._leases

    @property
    def chain(self) -> str:
        return self._chain

    def _gate(self, address: str) -> _Gate:
        loop = asyncio.get_running_loop()
        key = _key(address)
        gate = self._gates.get(key)
        if gate is None or gate.loop is not loop:
            floor = gate.floor if gate is not None else 0
            if gate is None and len(self._gates) >= GATES_REMEMBERED:
                self._forget_idle()
            gate = self._gates[key] = _Gate(loop, floor=floor)
        return gate

    def _forget_idle(self) -> None:
        """On leases, forget idle gates, the oldest first, until half the bound is left."""
        if self._leases is None:
            return  # each gate's floor is this process's only record
        gates = self._gates
        keep = GATES_REMEMBERED // 2
        for key, gate in list(gates.items()):
            if len(gates) <= keep:
                return
            if gate.idle:
                del gates[key]

    async def reserve(self, address: str, pending: Callable[[], Awaitable[int]]) -> int:
        """The next nonce of `address`; the gate (and lease) is held until `accepted` or
        `release`."""
        gate = self._gate(address)
        await gate.take_turn()
        lease: NonceLease | None = None
        try:
            if self._leases is not None:
                lease = await self._leases.acquire(self._chain, _key(address))
            node = await pending()
            if lease is None:
                floor = gate.floor
            else:
                floor = max(lease.floor, gate.floor if gate.unstored else 0)
            self._watch(gate, address, node, floor)
            nonce = max(node, floor)
        except BaseException:
            try:
                if lease is not None:
                    await self._let_go(lease, None)
            finally:
                gate.lock.release()
            raise
        gate.token += 1
        gate.holder = nonce
        gate.lease = lease
        token = gate.token
        gate.expiry = gate.loop.call_later(self._lease, self._lapse, _key(address), token)
        return nonce

    def _watch(self, gate: _Gate, address: str, node: int, floor: int) -> None:
        """Warn when the node stays behind the floor: a lagging node catches up, but a
        transaction it dropped after accepting leaves later sends waiting behind it."""
        if node >= floor:
            gate.behind = None
            return
        if gate.behind == node:
            log.warning(
                "sends from %s on %s wait behind nonce %s: the node still counts %s pending "
                "while %s were accepted (a dropped transaction?); see `walletcore nonces show`",
                address,
                self._chain or "this chain",
                node,
                node,
                floor,
            )
        gate.behind = node

    async def floor(self, address: str) -> int:
        """The stored floor of `address` (its turn awaited like a send's)."""
        return await self._with_lease(address, None)

    async def reset_floor(self, address: str, next_nonce: int) -> int:
        """Store `next_nonce` as the floor of `address`, lower or higher, between two sends
        (its turn awaited like a send's); returns the floor it replaced. This process's own
        floor follows; other processes follow the stored one."""
        return await self._with_lease(address, next_nonce)

    async def _with_lease(self, address: str, next_nonce: int | None) -> int:
        if self._leases is None:
            raise ValueError("this NonceBook keeps its floors in its process: nothing is stored")
        gate = self._gate(address)
        await gate.take_turn()
        try:
            lease = await self._leases.acquire(self._chain, _key(address))
            try:
                previous = lease.floor
                if next_nonce is not None:
                    await lease.reset(next_nonce)
                    gate.floor, gate.unstored, gate.behind = next_nonce, False, None
            finally:
                await self._let_go(lease, None)
        finally:
            gate.lock.release()
        return previous

    async def accepted(self, address: str, nonce: int) -> None:
        """The node took the transaction with `nonce`: later ones follow it."""
        gate = self._gates.get(_key(address))
        if gate is None:
            return
        gate.floor = max(gate.floor, nonce + 1)
        await self._free(gate, nonce, nonce + 1)

    async def release(self, address: str, nonce: int) -> None:
        """The transaction with `nonce` will not be broadcast: its nonce is free again."""
        gate = self._gates.get(_key(address))
        if gate is not None:
            await self._free(gate, nonce, None)

    def renew(self, address: str, nonce: int, seconds: float) -> None:
        """The holder of `nonce` is alive and will keep it up to `seconds` more (a sponsored
        transfer waiting for its top-up's receipt): its turn does not lapse before then."""
        gate = self._gates.get(_key(address))
        if gate is None or gate.holder != nonce:
            return
        if gate.expiry is not None:
            gate.expiry.cancel()
        gate.expiry = gate.loop.call_later(
            max(self._lease, seconds), self._lapse, _key(address), gate.token
        )

    @property
    def lapse_seconds(self) -> float:
        """How long a turn is held without news before it is given up."""
        return self._lease

    def held(self, address: str) -> int | None:
        """The nonce reserved now for `address`, if any."""
        gate = self._gates.get(_key(address))
        return None if gate is None else gate.holder

    def _lapse(self, key: str, token: int) -> None:
        gate = self._gates.get(key)
        if gate is not None and gate.token == token and gate.holder is not None:
            log.warning("nonce %s of %s was held too long; its turn is given up", gate.holder, key)
            lease = self._take(gate)
            self._spawn(self._open(gate, lease, None))

    async def _free(self, gate: _Gate, nonce: int, advanced_to: int | None) -> None:
        if gate.holder != nonce:
            return  # not the holder's (a re-broadcast after a restart, or already freed)
        await self._open(gate, self._take(gate), advanced_to)

    @staticmethod
    def _take(gate: _Gate) -> NonceLease | None:
        """End the holder's turn (synchronously, so it ends once); its lease to let go."""
        lease, gate.lease = gate.lease, None
        gate.holder = None
        if gate.expiry is not None:
            gate.expiry.cancel()
            gate.expiry = None
        return lease

    async def _open(self, gate: _Gate, lease: NonceLease | None, advanced_to: int | None) -> None:
        """Let the lease go, then the gate: the next waiter here finds the lease free."""
        try:
            if lease is not None:
                stored = await self._let_go(lease, advanced_to)
                if advanced_to is not None:
                    gate.unstored = not stored
        finally:
            gate.lock.release()

    async def _let_go(self, lease: NonceLease, advanced_to: int | None) -> bool:
        """Release `lease` to the end, even when the caller is cancelled meanwhile; False
        when that failed. A failure is logged, not raised: the transaction's fate is already
        decided, and this process keeps its own floor until a later one is stored."""
        return await asyncio.shield(self._spawn(_release(lease, advanced_to)))

    def _spawn(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)  # a reference, so the task is not collected half-way
        task.add_done_callback(self._tasks.discard)
        return task


async def _release(lease: NonceLease, advanced_to: int | None) -> bool:
    try:
        await lease.release(advanced_to)
    except Exception as exc:  # see NonceBook._let_go
        log.warning(
            "could not release a nonce lease (floor %s): %s",
            advanced_to,
            type(exc).__name__,
            exc_info=True,
        )
        return False
    return True


def _key(address: str) -> str:
    """EVM addresses compare without their checksum case."""
    return address.lower()


__all__ = ["NonceBook"]
