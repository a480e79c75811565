"""`DeskPauseStore` on SQL: deliveries of an asset paused for an api client, one row per
(client, asset).

- `pause` is one `INSERT ... ON CONFLICT DO NOTHING`: a second pause of one asset stores
  nothing and keeps the standing one; only the insert that stored appends its entry.
- `resume` is one `DELETE` of the row; only the delete that removed it appends its entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select

from walletcore.domain.audit import AuditEntry
from walletcore.domain.desk import DeskPause
from walletcore.ports.storage import DeskPauseStore
from walletcore_sql import rows
from walletcore_sql.database import Database
from walletcore_sql.stores.statements import bind
from walletcore_sql.tables import desk_pauses

if TYPE_CHECKING:
    from walletcore_sql.stores.unit import SqlUnit

_P = desk_pauses.c
_KEY = (_P.client_id == bind("client_id"), _P.asset_id == bind("asset_id"))
_GET = select(desk_pauses).where(*_KEY)
_OF_CLIENT = select(desk_pauses).where(_P.client_id == bind("client_id")).order_by(_P.asset_id)
_RESUME = delete(desk_pauses).where(*_KEY)


def _pause_insert(database: Database) -> Any:
    return database.insert(desk_pauses).on_conflict_do_nothing(
        index_elements=["client_id", "asset_id"]
    )


class SqlDeskPauses(DeskPauseStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def pause(self, pause: DeskPause, *, entry: AuditEntry | None = None) -> bool:
        self._unit.writer()
        statement = self._unit.upsert(_pause_insert)
        stored = (await self._unit.run(statement, rows.desk_pause_values(pause))).rowcount == 1
        if stored and entry is not None:
            await self._unit.audit.append(entry)
        return bool(stored)

    async def resume(
        self, client_id: str, asset_id: int, *, entry: AuditEntry | None = None
    ) -> bool:
        self._unit.writer()
        params = {"b_client_id": client_id, "b_asset_id": asset_id}
        removed = (await self._unit.run(_RESUME, params)).rowcount == 1
        if removed and entry is not None:
            await self._unit.audit.append(entry)
        return bool(removed)

    async def get(self, client_id: str, asset_id: int) -> DeskPause | None:
        row = await self._unit.one(_GET, {"b_client_id": client_id, "b_asset_id": asset_id})
        return None if row is None else rows.desk_pause_from(row)

    async def of_client(self, client_id: str) -> list[DeskPause]:
        found = await self._unit.all(_OF_CLIENT, {"b_client_id": client_id})
        return [rows.desk_pause_from(row) for row in found]
