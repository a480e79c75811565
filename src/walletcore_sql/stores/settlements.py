"""`SettlementStore` on SQL: each trade's crypto leg on chain, one row per (client, trade).

- `add` is one `INSERT ... ON CONFLICT DO NOTHING`: a trade's second settlement stores
  nothing, and only the insert that stored appends its entry.
- `move` is a compare-and-set: an `UPDATE` whose `WHERE` holds the expected status and
  attempt; a loser matches no row, writes nothing and appends no entry.
- `lock_wallet` locks the user's row of `users` (`SELECT ... FOR UPDATE`) on PostgreSQL,
  so two write units deciding about one wallet (a sell's hold, a send's signature) run one
  after the other; on SQLite a write unit holds the database's write lock already.
- `held` is one read of `ix_settlements_held`: on PostgreSQL one `SUM` (NUMERIC: exact);
  SQLite keeps amounts as decimal text and its `sum()` of text is a float, so there the
  rows' amounts are summed here, exactly.
- `due` reads `ix_settlements_due`, `listing` `ix_settlements_listing`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, case, func, literal_column, select, text, type_coerce, update

from walletcore.domain.audit import AuditEntry
from walletcore.domain.settlement import Settlement, SettlementStatus
from walletcore.ports.storage import SettlementStore
from walletcore_sql import rows
from walletcore_sql.database import Database
from walletcore_sql.stores.statements import bind
from walletcore_sql.tables import SETTLEMENT_DUE, SETTLEMENT_HOLDING, settlements, users
from walletcore_sql.types import Units

if TYPE_CHECKING:
    from walletcore_sql.stores.unit import SqlUnit

_S = settlements.c
_KEY = (_S.client_id == bind("client_id"), _S.trade_id == bind("trade_id"))
_GET = select(settlements).where(*_KEY)
_OF_TRADES = select(settlements).where(
    _S.client_id == bind("client_id"), _S.trade_id.in_(bindparam("b_trade_ids", expanding=True))
)
_MOVE = update(settlements).where(
    *_KEY,
    _S.status == bind("expected_status"),
    _S.attempt == bind("expected_attempt"),
)
#: The user's row, locked until the unit ends (PostgreSQL; `lock_wallet`).
_LOCK_USER = (
    select(users.c.user_id)
    .where(users.c.client_id == bind("client_id"), users.c.user_id == bind("user_id"))
    .with_for_update()
)
# The partial indexes' conditions as literals: the planner proves a partial index's
# condition only from the literal (`trades._TRADE_LAPSED`).
_HOLDING = text(SETTLEMENT_HOLDING)
_DUE_NOW = text(SETTLEMENT_DUE)
#: The user's holding sells that hold some of the asset: as coins or as their fee.
_HOLDS_ASSET = (
    _S.client_id == bind("client_id"),
    _S.user_id == bind("user_id"),
    _HOLDING,
    (_S.asset_id == bind("asset_id")) | (_S.fee_asset_id == bind("asset_id")),
)
_ZERO: Any = literal_column("0")
_HELD_SUM = select(
    type_coerce(
        func.sum(
            case((_S.asset_id == bind("asset_id"), _S.units), else_=_ZERO)
            + case((_S.fee_asset_id == bind("asset_id"), _S.fee_units), else_=_ZERO)
        ),
        Units,
    ).label("held")
).where(*_HOLDS_ASSET)
_HELD_ROWS = select(_S.asset_id, _S.units, _S.fee_asset_id, _S.fee_units).where(*_HOLDS_ASSET)
_DUE = (
    select(settlements)
    .where(_DUE_NOW, _S.due_at <= bind("now"))
    .order_by(_S.due_at, _S.trade_id)
    .limit(bind("limit"))
)


def _listing(by_asset: bool, by_status: bool) -> Any:
    query = select(settlements).where(_S.client_id == bind("client_id"))
    if by_asset:
        query = query.where(_S.asset_id == bind("asset_id"))
    if by_status:
        query = query.where(_S.status.in_(bindparam("b_statuses", expanding=True)))
    return query.order_by(_S.created_at.desc(), _S.trade_id.desc()).limit(bind("limit"))


#: (by asset, by status) -> the listing's query.
_LISTING = {(a, s): _listing(a, s) for a in (False, True) for s in (False, True)}


def _settlement_insert(database: Database) -> Any:
    return database.insert(settlements).on_conflict_do_nothing(
        index_elements=["client_id", "trade_id"]
    )


class SqlSettlements(SettlementStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def add(self, settlement: Settlement, *, entry: AuditEntry | None = None) -> bool:
        self._unit.writer()
        statement = self._unit.upsert(_settlement_insert)
        values = rows.settlement_values(settlement)
        stored = (await self._unit.run(statement, values)).rowcount == 1
        if stored and entry is not None:
            await self._unit.audit.append(entry)
        return bool(stored)

    async def get(self, client_id: str, trade_id: str) -> Settlement | None:
        row = await self._unit.one(_GET, {"b_client_id": client_id, "b_trade_id": trade_id})
        return None if row is None else rows.settlement_from(row)

    async def of_trades(self, client_id: str, trade_ids: Sequence[str]) -> dict[str, Settlement]:
        if not trade_ids:
            return {}
        params = {"b_client_id": client_id, "b_trade_ids": list(dict.fromkeys(trade_ids))}
        found = [rows.settlement_from(row) for row in await self._unit.all(_OF_TRADES, params)]
        return {s.trade_id: s for s in found}

    async def move(
        self, current: Settlement, new: Settlement, *, entry: AuditEntry | None = None
    ) -> bool:
        if new.trade_id != current.trade_id or new.client_id != current.client_id:
            raise ValueError("a settlement moves within its own trade")
        self._unit.writer()
        values = rows.settlement_move_values(new)
        values.update(
            b_client_id=current.client_id,
            b_trade_id=current.trade_id,
            b_expected_status=current.status.value,
            b_expected_attempt=current.attempt,
        )
        moved = (await self._unit.run(_MOVE, values)).rowcount == 1
        if moved and entry is not None:
            await self._unit.audit.append(entry)
        return bool(moved)

    async def lock_wallet(self, client_id: str, user_id: str) -> None:
        self._unit.writer()
        if not self._unit.database.is_sqlite:
            await self._unit.one(_LOCK_USER, {"b_client_id": client_id, "b_user_id": user_id})

    async def held(self, client_id: str, user_id: str, asset_id: int) -> int:
        params = {"b_client_id": client_id, "b_user_id": user_id, "b_asset_id": asset_id}
        if not self._unit.database.is_sqlite:
            row = await self._unit.one(_HELD_SUM, params)
            return 0 if row is None or row["held"] is None else int(row["held"])
        total = 0
        for row in await self._unit.all(_HELD_ROWS, params):
            if row["asset_id"] == asset_id:
                total += int(row["units"])
            if row["fee_asset_id"] == asset_id:
                total += int(row["fee_units"])
        return total

    async def due(self, now: datetime, limit: int) -> list[Settlement]:
        found = await self._unit.all(_DUE, {"b_now": now, "b_limit": max(limit, 0)})
        return [rows.settlement_from(row) for row in found]

    async def listing(
        self,
        client_id: str,
        *,
        asset_id: int | None = None,
        statuses: frozenset[SettlementStatus] | None = None,
        limit: int = 100,
    ) -> list[Settlement]:
        if statuses is not None and not statuses:
            return []
        params: dict[str, Any] = {"b_client_id": client_id, "b_limit": max(limit, 0)}
        if asset_id is not None:
            params["b_asset_id"] = asset_id
        if statuses is not None:
            params["b_statuses"] = sorted(s.value for s in statuses)
        query = _LISTING[asset_id is not None, statuses is not None]
        return [rows.settlement_from(row) for row in await self._unit.all(query, params)]
