"""Nonce reservation: at most one built-but-not-broadcast transaction per address.

A transfer's nonce is signed into it before it is stored and broadcast, so two sends from
one address racing would either share a nonce (one of them can never land) or, when one
is abandoned, leave a gap that stalls every later one. The book prevents both:

- `reserve(address, pending)` waits its turn on the address's gate (FIFO), then takes
  `max(node's pending nonce, last nonce this process saw accepted + 1)`.
- The gate stays held until the transaction is broadcast (`accepted`), or will never be
  (`release`: signing, storing or broadcasting failed with nothing sent); the next
  reservation then reads the node again, so a released nonce is reused, never skipped.
- A holder that vanished (a bug, a cancelled task) loses the gate after `lease` seconds.

The gate is per process: one signing process per address (docs/chains.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


@dataclass
class _Gate:
    loop: asyncio.AbstractEventLoop
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    holder: int | None = None
    token: int = 0
    expiry: asyncio.TimerHandle | None = None
    #: the lowest nonce not yet seen accepted from this process
    floor: int = 0


class NonceBook:
    def __init__(self, lease: float = 120.0) -> None:
        self._lease = lease
        self._gates: dict[str, _Gate] = {}

    def _gate(self, address: str) -> _Gate:
        loop = asyncio.get_running_loop()
        gate = self._gates.get(address)
        if gate is None or gate.loop is not loop:
            floor = gate.floor if gate is not None else 0
            gate = self._gates[address] = _Gate(loop, floor=floor)
        return gate

    async def reserve(self, address: str, pending: Callable[[], Awaitable[int]]) -> int:
        """The next nonce of `address`; the gate is held until `accepted` or `release`."""
        gate = self._gate(address)
        await gate.lock.acquire()
        try:
            nonce = max(await pending(), gate.floor)
        except BaseException:
            gate.lock.release()
            raise
        gate.token += 1
        gate.holder = nonce
        token = gate.token
        gate.expiry = gate.loop.call_later(self._lease, self._lapse, address, token)
        return nonce

    def accepted(self, address: str, nonce: int) -> None:
        """The node took the transaction with `nonce`: later ones follow it."""
        gate = self._gates.get(address)
        if gate is None:
            return
        gate.floor = max(gate.floor, nonce + 1)
        self._free(gate, nonce)

    def release(self, address: str, nonce: int) -> None:
        """The transaction with `nonce` will not be broadcast: its nonce is free again."""
        gate = self._gates.get(address)
        if gate is not None:
            self._free(gate, nonce)

    def held(self, address: str) -> int | None:
        """The nonce reserved now for `address`, if any."""
        gate = self._gates.get(address)
        return None if gate is None else gate.holder

    def _lapse(self, address: str, token: int) -> None:
        gate = self._gates.get(address)
        if gate is not None and gate.token == token and gate.holder is not None:
            self._free(gate, gate.holder)

    @staticmethod
    def _free(gate: _Gate, nonce: int) -> None:
        if gate.holder != nonce:
            return  # not the holder's (a re-broadcast after a restart, or already freed)
        gate.holder = None
        if gate.expiry is not None:
            gate.expiry.cancel()
            gate.expiry = None
        gate.lock.release()


__all__ = ["NonceBook"]
