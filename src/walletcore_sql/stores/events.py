"""`EventStore` on SQL: the event feed (docs/storage.md, "The event feed").

An event is a row of `events` inserted in the unit of the change it tells of: by
`AuditStore.append` of an entry that carries one (deferred with the entry, `SqlUnit.defer`),
by `publish`, and by the audited move of a trade on PostgreSQL's fast path
(`TRADE_SWAP_AUDITED`, in the same statement). So it commits with its change or not at all.

Its place in the feed is `(tx, seq)`: `seq` numbers the rows as they are inserted, `tx` is
the writing transaction's id (the column's default: `pg_current_xact_id()` on PostgreSQL,
0 on SQLite). On PostgreSQL `seq` alone is not the commit order: a transaction that took
its `seq` first may commit after one that took a later `seq`, and a reader that had moved
its cursor past that later one would never see the first. So the feed is read in `(tx,
seq)` order, and only below the reading statement's snapshot horizon
(`pg_snapshot_xmin(pg_current_snapshot())`, `types.feed_horizon`): every transaction below
it has ended, and every transaction that may still write an event (running now, or not
started yet) has an id at or above it, hence every event still to come sorts after every
event read. A transaction still open holds the feed back, never loses an event behind the
cursor. SQLite writes one transaction at a time: `tx` is 0 and `seq` is the commit order.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select, tuple_

from walletcore.domain.events import EventNote, EventPage, EventPosition
from walletcore.ports.storage import EventStore
from walletcore_sql import rows
from walletcore_sql.stores.statements import bind
from walletcore_sql.tables import events
from walletcore_sql.types import feed_horizon

if TYPE_CHECKING:
    from walletcore_sql.stores.unit import SqlUnit


def _after(*, postgres: bool, by_user: bool) -> Any:
    """The feed after the cursor of a client (of one user with `by_user`), oldest first,
    at most `b_limit`. PostgreSQL: after `(b_tx, b_seq)` and below the snapshot's horizon.
    SQLite: `tx` is 0 on every row, so after `b_seq` among them (an equality and a range:
    the index is searched from the cursor on; a row-value range would be searched on `tx`
    alone there, from the client's first event)."""
    query = select(events).where(events.c.client_id == bind("client_id"))
    if by_user:
        query = query.where(events.c.user_id == bind("user_id"))
    if postgres:
        query = query.where(
            tuple_(events.c.tx, events.c.seq) > tuple_(bind("tx"), bind("seq")),
            events.c.tx < feed_horizon(),
        )
    else:
        query = query.where(events.c.tx == 0, events.c.seq > bind("seq"))
    return query.order_by(events.c.tx, events.c.seq).limit(bind("limit"))


#: (PostgreSQL, of one user) -> the statement: `ix_events_client_tx_seq` or
#: `ix_events_client_user_tx_seq` read from the cursor on.
_AFTER = {
    (postgres, by_user): _after(postgres=postgres, by_user=by_user)
    for postgres in (False, True)
    for by_user in (False, True)
}
_HAS = select(events.c.seq).where(
    events.c.seq == bind("seq"),
    events.c.tx == bind("tx"),
    events.c.client_id == bind("client_id"),
)
_OLDEST = (
    select(events.c.tx, events.c.seq)
    .where(events.c.client_id == bind("client_id"))
    .order_by(events.c.tx, events.c.seq)
    .limit(1)
)
_PRUNE = delete(events).where(
    events.c.seq.in_(
        select(events.c.seq)
        .where(events.c.at < bind("before"))
        .order_by(events.c.at, events.c.seq)
        .limit(bind("limit"))
        .scalar_subquery()
    )
)


class SqlEvents(EventStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def after(
        self,
        client_id: str,
        position: EventPosition | None,
        *,
        limit: int,
        user_id: str | None = None,
    ) -> EventPage:
        count = max(limit, 0)
        postgres = not self._unit.database.is_sqlite
        if position is None:  # before every stored position
            tx, seq = -1, -1
        elif postgres or position.tx == 0:
            tx, seq = position.tx, position.seq
        elif position.tx > 0:  # after every position SQLite gives (all at tx 0)
            return EventPage([], more=False)
        else:
            tx, seq = -1, -1
        params: dict[str, Any] = {
            "b_client_id": client_id,
            "b_seq": seq,
            "b_limit": count + 1,  # one more: whether the page holds them all
        }
        if postgres:
            params["b_tx"] = tx
        if user_id is not None:
            params["b_user_id"] = user_id
        query = _AFTER[(postgres, user_id is not None)]
        found = [rows.event_from(r) for r in await self._unit.all(query, params)]
        return EventPage(found[:count], more=len(found) > count)

    async def publish(
        self, client_id: str, user_id: str | None, note: EventNote, at: datetime
    ) -> None:
        if not isinstance(note, EventNote):
            raise TypeError("an event needs its EventNote")
        self._unit.defer(events, rows.event_values(client_id, user_id, note, at))

    async def has(self, client_id: str, position: EventPosition) -> bool:
        params = {"b_client_id": client_id, "b_tx": position.tx, "b_seq": position.seq}
        return await self._unit.one(_HAS, params) is not None

    async def oldest(self, client_id: str) -> EventPosition | None:
        row = await self._unit.one(_OLDEST, {"b_client_id": client_id})
        return None if row is None else EventPosition(int(row["tx"]), int(row["seq"]))

    async def prune(self, before: datetime, limit: int) -> int:
        self._unit.writer()
        result = await self._unit.run(_PRUNE, {"b_before": before, "b_limit": max(limit, 0)})
        return int(result.rowcount)
