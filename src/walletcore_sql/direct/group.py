"""Group commit, what PostgreSQL's and SQLite's share: the queue, the lanes, the cancellations.

Both make the writes of a busy moment durable under one commit: PostgreSQL's
(`walletcore_sql.direct.pg_group`) sends a statement's queued writes together, pipelined
in one transaction; SQLite's (`walletcore_sql.database.sqlite_group`) runs the write units
handed over whole in savepoints of the group its writer holds open. What they share is
here, and the dialect brings its send (`GroupCommit.flush`):
- a write that finds a lane free (`free`) is sent at once, alone, as if there were no
  group commit: no write waits for others to come;
- else it waits (`Waiting`, the longest waiting first), and a flight (a task holding a
  lane, up to `lanes` at once) sends what waits, batch after batch, until nothing does;
  each write is answered for itself, with its own result or its own error;
- a caller cancelled while its write waits takes it out: it is never sent (`take` and
  `next` skip it); once sent, it commits or not with its group;
- a flight ends with its lane given back; when writes still wait then, another flight
  takes them.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

from walletcore.domain.errors import StorageUnavailable

P = TypeVar("P")  # what a write is: its values, or the unit's work
R = TypeVar("R")  # what its caller gets


def answer(future: asyncio.Future[R], result: R) -> None:
    """A waiting write's result, unless its caller left (it then gets nothing)."""
    if not future.done():
        future.set_result(result)


def refuse(future: asyncio.Future[Any], failure: BaseException | None) -> None:
    """A waiting write's error (cancelled when None), unless its caller left."""
    if not future.done():
        if failure is None:
            future.cancel()
        else:
            future.set_exception(failure)


def copied(exc: StorageUnavailable) -> StorageUnavailable:
    """The same answer for each write of a group: an exception of its own for each (one
    instance raised in many tasks would gather their tracebacks), with the cause kept."""
    fresh = type(exc)(exc.message)
    fresh.__cause__ = exc.__cause__
    return fresh


class Waiting(collections.deque[tuple[P, asyncio.Future[R]]], Generic[P, R]):
    """The writes waiting for a group, the longest waiting first: each its payload and the
    future its caller awaits (done when the caller left: skipped, never sent). A deque:
    every write asks whether any waits, and a deque answers with no Python call."""

    __slots__ = ()

    def put(self, payload: P) -> asyncio.Future[R]:
        """`payload` queued; the future its caller awaits."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self.append((payload, future))
        return future

    def next(self) -> tuple[P, asyncio.Future[R]] | None:
        """The write waiting longest whose caller is still there; None when none is."""
        while self:
            write = self.popleft()
            if not write[1].done():
                return write
        return None

    def take(
        self, most: int, key: Callable[[P], Any] | None = None
    ) -> list[tuple[P, asyncio.Future[R]]]:
        """The next batch: the writes waiting longest, up to `most`, none whose caller
        left; with `key`, none of a row the batch has already (that one waits for the
        next batch, in its place)."""
        batch: list[tuple[P, asyncio.Future[R]]] = []
        keys: set[Any] = set()
        later = []
        while self and len(batch) < most:
            write = self.popleft()
            if write[1].done():  # cancelled while it waited: never sent
                continue
            if key is not None:
                row = key(write[0])
                if row in keys:
                    later.append(write)
                    continue
                keys.add(row)
            batch.append(write)
        self.extendleft(reversed(later))
        return batch

    def fail_all(self, failure: BaseException | None) -> None:
        """Every waiting write fails with `failure` (cancelled when None)."""
        while self:
            refuse(self.popleft()[1], failure)


class GroupCommit(Generic[P, R]):
    """A dialect's group commit (module rules): `waiting` writes, `busy` lanes of `lanes`,
    the `flights` in the air. The dialect says when a lane is free for a write sent alone
    (`free`) and how a flight sends what waits (`flush`); `queued` hands a write to the
    flights and answers what its group gave it."""

    __slots__ = ("busy", "flights", "lanes", "waiting")

    def __init__(self, lanes: int) -> None:
        self.lanes = lanes
        self.busy = 0  # lanes in use: flights, and the writes sent alone that hold one
        self.waiting: Waiting[P, R] = Waiting()
        self.flights: set[asyncio.Future[None]] = set()

    def free(self) -> bool:
        """A write may be sent at once, alone: a lane is free and none waits."""
        return self.busy < self.lanes and not self.waiting

    async def queued(self, payload: P) -> R:
        """`payload` waits for a flight (one takes off if a lane is free); what its group
        answered it."""
        answered = self.waiting.put(payload)
        if self.busy < self.lanes:
            self.fly()
        return await answered

    def fly(self) -> None:
        """A flight takes a lane and sends what waits, until nothing does."""
        self.busy += 1
        flight = self.spawn(self._flight())
        self.flights.add(flight)
        flight.add_done_callback(self.flights.discard)

    def spawn(self, flight: Coroutine[Any, Any, None]) -> asyncio.Future[None]:
        """The flight's task (held in `flights`: the loop keeps only weak references)."""
        return asyncio.get_running_loop().create_task(flight)

    async def _flight(self) -> None:
        try:
            await self.flush()
        finally:
            self.busy -= 1
            if self.waiting and self.busy < self.lanes:
                self.fly()

    async def flush(self) -> None:
        """Send what waits, batch after batch, until nothing does: the dialect's."""
        raise NotImplementedError

    async def wait_idle(self) -> None:
        """Until no flight is in the air (a pool closing waits for them)."""
        while self.flights:
            await asyncio.wait(set(self.flights))
