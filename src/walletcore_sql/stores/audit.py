"""`AuditStore` on SQL: the append-only audit log (its entries deferred with the unit's
other inserts, `SqlUnit.defer`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select

from walletcore.domain.audit import AuditEntry
from walletcore.ports.storage import AuditStore
from walletcore_sql import rows
from walletcore_sql.stores.statements import bind
from walletcore_sql.tables import audit_log

if TYPE_CHECKING:
    from walletcore_sql.stores.unit import SqlUnit

_AUDIT_NEWEST = select(audit_log).order_by(audit_log.c.entry_id.desc()).limit(bind("limit"))


class SqlAudit(AuditStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def append(self, entry: AuditEntry) -> None:
        self._unit.defer(audit_log, rows.audit_values(entry))

    async def newest(self, limit: int = 100) -> list[AuditEntry]:
        found = await self._unit.all(_AUDIT_NEWEST, {"b_limit": max(limit, 0)})
        return [rows.audit_from(r) for r in found]
