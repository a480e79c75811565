"""Group commit on PostgreSQL: a statement's writes queued while its lanes are busy, sent
together, pipelined in one transaction (docs/storage.md, "Group commit on PostgreSQL").

The queue, the lanes and the cancellations are the shared ones
(`walletcore_sql.direct.group`); this is PostgreSQL's send: a batch as one round trip and
one commit (`execute_alone(..., many=True)`), and what a batch the server refused or whose
outcome is unknown answers.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from walletcore.domain.errors import StorageError, StorageUnavailable
from walletcore_sql.direct.group import GroupCommit, answer, copied, refuse
from walletcore_sql.direct.plans import Batch, Positional
from walletcore_sql.direct.pool import DriverPool
from walletcore_sql.direct.postgres import execute_alone

#: Batches of one statement in flight at once, per pool (`PgGroupCommit`): a write that
#: finds one free goes at once, alone.
GROUP_LANES = 4
#: The most value sets one batch sends.
GROUP_MOST = 64

_Write = tuple[Sequence[Any], Any]  # its values, and the future its caller awaits


class PgGroupCommit(GroupCommit[Sequence[Any], int]):
    """Group commit on PostgreSQL: the writes of one statement (a quote with its entry,
    a move of a trade with its entry) that arrive while `GROUP_LANES` are busy wait, and
    the next free lane sends them together (`Batch`): the same statement once for each,
    pipelined, in one transaction: one round trip and one commit for all of them.

    - A write that finds a lane free and none waiting is sent at once, alone, holding a
      lane: no write waits for others to come, so one at a time costs what it did.
    - Each write is its own statement, with the plan it has alone: it is stored with its
      entry or not at all, and answered only once the transaction that holds it
      committed. One batch never holds two writes of one row (`Batch.key`; the second
      waits for the next batch), so each compare-and-set finds its row as no other write
      of the batch left it, and decides as it would alone.
    - A batch the server refused (a constraint, a deadlock, a bad value: the server
      answered with an error, so nothing of it was committed) is sent again write by
      write, so each gets its own answer and one bad write fails no other. A batch whose
      outcome is unknown (the session dropped, a timeout) is answered 503 to every write
      in it, and never sent again (it may have committed).
    - A caller cancelled while its write waits takes it out; once sent, its write
      commits or not with the batch, as a statement cancelled in flight may have; a
      flight cancelled with a batch in hand answers it 503.
    """

    __slots__ = ("_batch", "_key", "_pool", "_statement", "batched", "batches", "refused")

    def __init__(self, pool: DriverPool, statement: Positional) -> None:
        if statement.batch is None:
            raise ValueError("a statement with no batch form")
        super().__init__(GROUP_LANES)
        self._pool = pool
        self._statement = statement
        self._batch: Batch = statement.batch
        self._key = operator.itemgetter(statement.batch.key)
        #: batches of two writes or more sent, the writes they held, and those of them
        #: the server refused whole (then sent write by write)
        self.batches = 0
        self.batched = 0
        self.refused = 0

    async def run(self, values: Sequence[Any]) -> int:
        """Write `values` (in `statement.names` order); the rows it matched, 0 or 1."""
        if self.busy < self.lanes and not self.waiting:  # `free`, inline: every write asks
            self.busy += 1
            try:
                count: int = await execute_alone(self._pool, self._statement, values)
                return count
            finally:
                self.busy -= 1
                if self.waiting:
                    self.fly()
        self._statement.check(values)  # refused now, not in a batch
        return await self.queued(values)

    async def flush(self) -> None:
        batch: list[_Write] = []
        try:
            while self.waiting:
                batch = self.waiting.take(GROUP_MOST, self._key)
                try:
                    await self._send(batch)
                except Exception as exc:  # noqa: BLE001 - a fault of this code: each write's answer
                    for _, answered in batch:
                        refuse(answered, exc)
                batch = []
        finally:
            for _, answered in batch:  # this lane was cancelled with a batch in hand
                refuse(answered, StorageUnavailable())

    async def _send(self, batch: list[_Write]) -> None:
        if not batch:
            return
        if len(batch) == 1:
            await self._alone(batch)
            return
        matched = self._batch.matched
        self.batches += 1
        self.batched += len(batch)
        try:
            result = await execute_alone(
                self._pool, self._batch.statement, [values for values, _ in batch], many=True
            )
        except StorageUnavailable as exc:  # the outcome is unknown: it may have committed
            for _, answered in batch:
                refuse(answered, copied(exc))
            return
        except StorageError:  # refused whole, nothing committed: each on its own
            self.refused += 1
            await self._alone(batch)
            return
        won = None if matched is None else matched(result)
        key = self._key
        for values, answered in batch:
            answer(answered, 1 if won is None or key(values) in won else 0)

    async def _alone(self, batch: list[_Write]) -> None:
        """Each write of `batch` sent alone, in order (none of a caller that left)."""
        for values, answered in batch:
            if answered.done():  # its caller left: nothing of it was committed
                continue
            try:
                count = await execute_alone(self._pool, self._statement, values)
            except Exception as exc:  # noqa: BLE001 - that write's own answer
                refuse(answered, exc)
                continue
            answer(answered, count)
