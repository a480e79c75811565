"""The event feed read by cursor (`POST /events`, docs/events.md), its retention, and the
client's deposits.

A reader passes the id of the last event it processed as `after` (none: from the oldest
kept) and gets the next events of its api client in feed order, at most `limit`, of one
user when it names one. Storing the last id it handled and reading again from it, a reader
misses no event and sees none twice, across restarts of either side (the storage never
places a new event behind one it has served: walletcore.ports.storage.EventStore).

Events are kept `retention` (the `prune_events` job deletes older ones). A cursor whose
event is no longer kept, older than the oldest kept, is `CursorExpired` (410): the reader
re-reads from the start and reconciles with `/balance`, `/trade` and `/txid`. A cursor this
client's feed never gave is a 400.
"""

from __future__ import annotations

from datetime import timedelta

from walletcore.domain.deposits import Deposit
from walletcore.domain.errors import CursorExpired, InvalidRequest, UserNotFound
from walletcore.domain.events import EventPage, parse_cursor
from walletcore.domain.ids import parse_id
from walletcore.domain.wire import JsonValue
from walletcore.ports import Clock, Storage
from walletcore.services.context import Caller

#: Events one read returns when the reader gives no `limit`, and the most it may ask for.
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def parse_limit(value: JsonValue, default: int = DEFAULT_LIMIT, most: int = MAX_LIMIT) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise InvalidRequest(f"limit must be an integer from 1 to {most}")
    return value


class EventFeed:
    def __init__(self, storage: Storage, clock: Clock, *, retention: timedelta) -> None:
        self._storage = storage
        self._clock = clock
        self.retention = retention

    async def read(
        self,
        caller: Caller,
        *,
        after: JsonValue = None,
        limit: JsonValue = None,
        user_id: JsonValue = None,
    ) -> EventPage:
        position = parse_cursor(after)
        count = parse_limit(limit)
        uid = None if user_id is None else parse_id(user_id, "userId")
        client_id = caller.client_id
        async with self._storage.read() as unit:
            if uid is not None and await unit.wallets.get_user(client_id, uid) is None:
                raise UserNotFound()
            if position is not None and not await unit.events.has(client_id, position):
                oldest = await unit.events.oldest(client_id)
                if oldest is None or position < oldest:
                    raise CursorExpired()
                raise InvalidRequest("Unknown cursor: after must be an event id from this feed")
            return await unit.events.after(client_id, position, limit=count, user_id=uid)

    async def deposits(
        self, caller: Caller, *, user_id: JsonValue = None, limit: JsonValue = None
    ) -> list[Deposit]:
        """The client's deposits, newest first: of one user, or all (platform's included)."""
        count = parse_limit(limit)
        uid = None if user_id is None else parse_id(user_id, "userId")
        async with self._storage.read() as unit:
            if uid is not None and await unit.wallets.get_user(caller.client_id, uid) is None:
                raise UserNotFound()
            return await unit.deposits.page(caller.client_id, uid, limit=count)

    async def prune(self, batch: int = 10_000) -> int:
        """Delete the events older than the retention; how many (one batch per unit)."""
        before = self._clock.now() - self.retention
        total = 0
        while True:
            async with self._storage.write() as unit:
                done = await unit.events.prune(before, batch)
            total += done
            if done < batch:
                return total


__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "EventFeed", "parse_limit"]
