"""`AuditStore` on SQL: the append-only audit log (its entries deferred with the unit's
other inserts, `SqlUnit.defer`), and the event feed's outbox: an entry that carries an
event has its `events` row deferred with it, so both are written with the unit's change."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select

from walletcore.domain.audit import AuditEntry, storable
from walletcore.ports.storage import AuditStore
from walletcore_sql import rows
from walletcore_sql.stores.statements import bind
from walletcore_sql.tables import audit_log, events

if TYPE_CHECKING:
    from walletcore_sql.stores.unit import SqlUnit

_AUDIT_NEWEST = select(audit_log).order_by(audit_log.c.entry_id.desc()).limit(bind("limit"))


class SqlAudit(AuditStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def append(self, entry: AuditEntry) -> None:
        if entry.event is None:
            self._unit.defer(audit_log, rows.audit_values(entry))
            return
        storable((entry,))  # an event needs its client: refused before anything is sent
        event = rows.entry_event_values(entry)
        assert event is not None
        self._unit.defer(audit_log, rows.audit_values(entry))
        self._unit.defer(events, event)

    async def newest(self, limit: int = 100) -> list[AuditEntry]:
        found = await self._unit.all(_AUDIT_NEWEST, {"b_limit": max(limit, 0)})
        return [rows.audit_from(r) for r in found]
