"""The open quotes this process made, remembered for their approval: a `Storage` decorator.

    storage = RememberedQuotes(storage, clock)   # TradingService writes and reads through it
    trade = storage.open_quote(client_id, user_id, trade_id)   # no read; None: read it

An approval in the process that made the quote reads nothing first. A quote's terms never
change (an open trade is, field for field, the trade its quote stored: `reopen` restores
exactly that), and its figures are cut to the places every store keeps when it is made
(`Figures.kept`), so the quote remembered is the trade stored, value for value, for as long
as it is open. What the process does not know is whether it is still open in storage
(another process may have approved, cancelled or expired it); only the compare-and-set
open -> executing can tell, and every approval makes it anyway.

Rules:
- Remembered: a quote stored through the decorator (`add_trade` of an open trade), once the
  write succeeded, keyed by client, user and trade: ownership is the quote's own, and
  another client's or user's lookup finds nothing.
- Answered: one read, `open_quote`, the approval's, while the quote has not lapsed by the
  clock (a lapsed one is forgotten then, and read). Every other read (a `/trade` poll, a
  cancel, `/trades`) goes to the storage through `read()`: its answer must be what is
  stored now, whichever process moved the trade.
- Forgotten: a compare-and-set from open (`swap_trade(OPEN, ...)`: an approval, a cancel, an
  expiry) forgets the quote as it is sent, whatever its outcome: the trade moved here,
  another process had moved it (the swap matches no row, and the use case reads the trade
  and decides as usual), or the outcome is unknown (a `503`). A quote that is open again
  (executing -> open: the venue placed nothing) is not remembered again; its next approval
  reads it. The expiries `/trades` writes in a unit of its own (`trades.swap` in
  `write()`) are of lapsed quotes, which are never answered.
- Bounded: at most `QUOTES_REMEMBERED` (under 1 KB each), the oldest forgotten first, and
  the lapsed ones as new quotes are made (every quote of one service lives as long, so the
  oldest lapse first). An approval of a forgotten quote reads it.
- One per `TradingService`, which wraps the storage it is given: a second service, as
  another worker has, remembers nothing.
- Everything else is the storage's own: `read()` and `write()` are its units, unwrapped, and
  a compare-and-set from any other status goes straight to it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any

from walletcore.domain.audit import AuditEntry
from walletcore.domain.trade import Trade, TradeStatus
from walletcore.ports import Clock, Storage, UnitOfWork

#: How many of its own open quotes a process remembers for their approval (the module
#: docstring; under 1 KB each, the oldest forgotten first, and every lapsed one).
QUOTES_REMEMBERED = 20_000


class RememberedQuotes(Storage):
    """`storage`, remembering the open quotes stored through it (module docstring)."""

    def __init__(self, storage: Storage, clock: Clock) -> None:
        #: the storage decorated
        self.storage = storage
        self._clock = clock
        #: (client id, user id, trade id) -> the open quote as this process stored it
        self._quoted: OrderedDict[tuple[str, str, str], Trade] = OrderedDict()

    def __repr__(self) -> str:
        return f"RememberedQuotes({self.storage!r}, {len(self._quoted)} quotes)"

    def open_quote(self, client_id: str, user_id: str, trade_id: str) -> Trade | None:
        """The open quote this process made, while it may still be approved; else None
        (and forgotten when it lapsed). Whether it is still open in storage is for the
        compare-and-set to tell."""
        key = (client_id, user_id, trade_id)
        trade = self._quoted.get(key)
        if trade is None:
            return None
        if trade.lapses_unapproved(self._clock.now()):
            del self._quoted[key]
            return None
        return trade

    # -- the port ---------------------------------------------------------------------------
    def read(self) -> AbstractAsyncContextManager[UnitOfWork]:
        return self.storage.read()

    def write(self) -> AbstractAsyncContextManager[UnitOfWork]:
        return self.storage.write()

    async def add_trade(self, trade: Trade, entry: AuditEntry) -> None:
        await self.storage.add_trade(trade, entry)
        if trade.status is TradeStatus.OPEN:
            self._remember(trade)

    def swap_trade(
        self, expected: TradeStatus, trade: Trade, entry: AuditEntry
    ) -> Coroutine[Any, Any, bool]:
        """The storage's compare-and-set itself (no coroutine around it), the quote forgotten
        first when it moves from open."""
        if expected is TradeStatus.OPEN:
            self._quoted.pop((trade.client_id, trade.user_id, trade.trade_id), None)
        return self.storage.swap_trade(expected, trade, entry)

    # -- the bound --------------------------------------------------------------------------
    def _remember(self, trade: Trade) -> None:
        """Remember `trade`; forget the oldest quotes past the bound, and those that lapsed
        (every quote of a service lives as long, so the oldest lapse first)."""
        quoted = self._quoted
        quoted[(trade.client_id, trade.user_id, trade.trade_id)] = trade
        if len(quoted) > QUOTES_REMEMBERED:
            quoted.popitem(last=False)
        now = trade.created_at
        while quoted:
            oldest = next(iter(quoted.values()))
            if not oldest.lapses_unapproved(now):
                break
            quoted.popitem(last=False)


__all__ = ["QUOTES_REMEMBERED", "RememberedQuotes"]
