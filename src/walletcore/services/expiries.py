"""The expiry of lapsed quotes in one process: one write per quote, shared by its readers.

Rules:
- The expiry of an open quote is the same whoever makes it, so the readers of one process
  that find a quote lapsed together share one write (`SharedExpiries.expire`), and a reader
  that read it `open` after that write ended gets the terminal trade it ended with: no
  write, and no read.
- Remembered: the terminal trades those writes ended with, at most `EXPIRED_REMEMBERED`,
  the oldest forgotten first (a terminal status never changes again: what is remembered
  stays true). A write that failed or was cancelled is not remembered: the next reader
  writes again.
- Processes race with the compare-and-set of the write (`store`): a loser writes nothing,
  costs one conditional UPDATE that matches no row, and answers what the winner stored.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any

from walletcore.domain.trade import Trade
from walletcore.services.context import Caller

#: How many expiries this process remembers, for readers that read the quote `open` just
#: before it was stored as expired.
EXPIRED_REMEMBERED = 4096


class SharedExpiries:
    """The expiry writes of one process (module rules). `store(caller, trade)` stores the
    lapsed open quote `trade` as expired and answers the trade as stored after."""

    def __init__(self, store: Callable[[Caller, Trade], Coroutine[Any, Any, Trade]]) -> None:
        self._store = store
        #: trade id -> the expiry write in flight for it (one per lapsed quote at a time)
        self._expiring: dict[str, asyncio.Future[Trade]] = {}
        #: trade id -> the terminal trade an expiry write of this process ended with
        self._expired: OrderedDict[str, Trade] = OrderedDict()

    async def expire(self, caller: Caller, trade: Trade) -> Trade:
        """Store the lapsed open quote `trade` as expired; the trade as stored after."""
        known = self._expired.get(trade.trade_id)
        if known is not None:  # read before the expiry landed: no write, and no read
            return known
        loop = asyncio.get_running_loop()
        flight = self._expiring.get(trade.trade_id)
        if flight is None or flight.get_loop() is not loop:
            flight = loop.create_task(self._store(caller, trade))
            self._expiring[trade.trade_id] = flight
            flight.add_done_callback(lambda done: self._forget(trade.trade_id, done))
        return await asyncio.shield(flight)

    def _forget(self, trade_id: str, done: asyncio.Future[Trade]) -> None:
        if self._expiring.get(trade_id) is done:
            del self._expiring[trade_id]
        if done.cancelled() or done.exception() is not None:
            return
        stored = done.result()
        if stored.status.is_terminal:
            self._expired[trade_id] = stored
            if len(self._expired) > EXPIRED_REMEMBERED:
                self._expired.popitem(last=False)


__all__ = ["EXPIRED_REMEMBERED", "SharedExpiries"]
