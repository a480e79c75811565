"""`SendStore` on SQL: the idempotency record of each send, and the chain status followed.

`begin` inserts the (client, X-Request-Id) row or locks the stored one (`FOR UPDATE`) and
lets `SendRecord.claim` decide; `advance` is a compare-and-set on (state, attempt);
`track` one on the chain status and transaction hash (its entry appended in the unit only
when it matched); `following` one read of `ix_sends_following`; `spending` one read of
`ix_sends_spending` (a `SUM` on PostgreSQL; on SQLite, whose `sum()` of the amounts'
decimal text is a float, the rows' amounts summed here).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select, text, type_coerce, update

from walletcore.domain.audit import AuditEntry
from walletcore.domain.errors import InvalidRequest, InvalidSendTransition
from walletcore.domain.sends import SEND_LEASE, SendRecord
from walletcore.domain.settlement import RESERVED_REQUEST_PREFIX
from walletcore.ports.storage import SendStore
from walletcore_sql import rows
from walletcore_sql.database import Database
from walletcore_sql.stores.statements import bind
from walletcore_sql.tables import SEND_FOLLOWED, SEND_SPENDING, send_hashes, sends
from walletcore_sql.types import Units

if TYPE_CHECKING:
    from walletcore_sql.stores.unit import SqlUnit

_SEND_KEY = (sends.c.client_id == bind("client_id"), sends.c.request_id == bind("request_id"))
_SEND_GET = select(sends).where(*_SEND_KEY)
_SEND_LOCK = _SEND_GET.with_for_update()
_SEND_CLAIM = (
    update(sends)
    .where(*_SEND_KEY, sends.c.attempt == bind("expected_attempt"))
    .values(
        attempt=bind("attempt"), locked_until=bind("locked_until"), updated_at=bind("updated_at")
    )
)
_SEND_MUTABLE = (
    "state",
    "locked_until",
    "tx_hash",
    "raw_tx",
    "result",
    "updated_at",
    "chain_status",
    "chain_checked_at",
    "chain_final_at",
    "spend_user_id",
    "spend_asset_id",
    "spend_units",
)
_SEND_ADVANCE = update(sends).where(
    *_SEND_KEY,
    sends.c.state == bind("expected_state"),
    sends.c.attempt == bind("expected_attempt"),
)
# `ix_sends_following`'s partial condition as a literal: the planner proves a partial
# index's condition only from the literal (`trades._TRADE_LAPSED`).
_SEND_FOLLOWED = text(f"sends.{SEND_FOLLOWED}")
_SEND_FOLLOWING = (
    select(sends)
    .where(_SEND_FOLLOWED)
    .order_by(sends.c.chain_checked_at, sends.c.created_at, sends.c.client_id, sends.c.request_id)
    .limit(bind("limit"))
)
_SEND_COUNT_FOLLOWING = select(func.count().label("n")).select_from(sends).where(_SEND_FOLLOWED)
_SEND_CHECKED = update(sends).where(*_SEND_KEY, _SEND_FOLLOWED).values(chain_checked_at=bind("at"))
_SEND_TRACK = (
    update(sends)
    .where(
        *_SEND_KEY,
        _SEND_FOLLOWED,
        sends.c.chain_status == bind("expected_status"),
        sends.c.tx_hash == bind("expected_hash"),
    )
    .values(
        chain_status=bind("status"),
        chain_checked_at=bind("at"),
        chain_final_at=bind("final_at"),
        tx_hash=bind("tx_hash"),
        raw_tx=bind("raw_tx"),
    )
)
# `ix_sends_spending`'s partial condition as a literal, and the service's own transfers
# left out (a prefix compared as is: LIKE is case-insensitive on SQLite).
_SEND_SPENDING_OF = (
    sends.c.client_id == bind("client_id"),
    sends.c.spend_user_id == bind("user_id"),
    sends.c.spend_asset_id == bind("asset_id"),
    text(SEND_SPENDING),
    text(
        f"substr(sends.request_id, 1, {len(RESERVED_REQUEST_PREFIX)}) "
        f"<> '{RESERVED_REQUEST_PREFIX}'"
    ),
)
_SEND_SPENDING_SUM = select(type_coerce(func.sum(sends.c.spend_units), Units).label("units")).where(
    *_SEND_SPENDING_OF
)
_SEND_SPENDING_ROWS = select(sends.c.spend_units).where(*_SEND_SPENDING_OF)
_SEND_BY_HASH = select(sends).where(
    sends.c.client_id == bind("client_id"), sends.c.tx_hash == bind("tx_hash")
)
_SEND_BY_OLD_HASH = (
    select(sends)
    .join(
        send_hashes,
        (send_hashes.c.client_id == sends.c.client_id)
        & (send_hashes.c.request_id == sends.c.request_id),
    )
    .where(send_hashes.c.client_id == bind("client_id"), send_hashes.c.tx_hash == bind("tx_hash"))
)


def _send_insert(database: Database) -> Any:
    return database.insert(sends).on_conflict_do_nothing()


def _send_hash_insert(database: Database) -> Any:
    return database.insert(send_hashes).on_conflict_do_nothing()


class SqlSends(SendStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def begin(
        self,
        client_id: str,
        request_id: str,
        fingerprint: str,
        now: datetime,
        *,
        lease: timedelta = SEND_LEASE,
    ) -> SendRecord:
        self._unit.writer()
        fresh = SendRecord.start(client_id, request_id, fingerprint, now, lease)
        key = {"b_client_id": client_id, "b_request_id": request_id}
        statement = self._unit.upsert(_send_insert)
        if (await self._unit.run(statement, rows.send_values(fresh))).rowcount == 1:
            return fresh
        # Another request made it first: lock the row and let the domain decide.
        row = await self._unit.one(_SEND_LOCK, key)
        if row is None:  # pragma: no cover - rows are never deleted
            raise InvalidRequest("X-Request-Id record vanished; retry")
        stored = rows.send_from(row)
        claimed = stored.claim(fingerprint, now, lease)  # raises the 409 and 422 rows
        if claimed is not stored:
            await self._unit.run(
                _SEND_CLAIM,
                {
                    **key,
                    "b_expected_attempt": stored.attempt,
                    "b_attempt": claimed.attempt,
                    "b_locked_until": claimed.locked_until,
                    "b_updated_at": claimed.updated_at,
                },
            )
        return claimed

    async def advance(self, current: SendRecord, new: SendRecord) -> bool:
        current.require_successor(new)
        self._unit.writer()
        values = rows.send_values(new)
        params = {k: values[k] for k in _SEND_MUTABLE}
        params.update(
            b_client_id=current.client_id,
            b_request_id=current.request_id,
            b_expected_state=current.state.value,
            b_expected_attempt=current.attempt,
        )
        return bool((await self._unit.run(_SEND_ADVANCE, params)).rowcount == 1)

    async def get(self, client_id: str, request_id: str) -> SendRecord | None:
        row = await self._unit.one(
            _SEND_GET, {"b_client_id": client_id, "b_request_id": request_id}
        )
        return None if row is None else rows.send_from(row)

    async def count_following(self) -> int:
        found = await self._unit.all(_SEND_COUNT_FOLLOWING, {})
        return int(found[0]["n"])

    async def following(self, limit: int) -> list[SendRecord]:
        found = await self._unit.all(_SEND_FOLLOWING, {"b_limit": max(limit, 0)})
        return [rows.send_from(r) for r in found]

    async def checked_chain(self, keys: Sequence[tuple[str, str]], at: datetime) -> None:
        self._unit.writer()
        params = [
            {"b_client_id": client_id, "b_request_id": request_id, "b_at": at}
            for client_id, request_id in keys
        ]
        if params:
            await self._unit.run(_SEND_CHECKED, params)  # type: ignore[arg-type]

    async def track(
        self, current: SendRecord, new: SendRecord, *, entry: AuditEntry | None = None
    ) -> bool:
        current.require_successor(new)
        if new.chain_status is None or current.chain_status is None or not current.tx_hash:
            raise InvalidSendTransition()
        self._unit.writer()
        at = new.chain_checked_at or new.updated_at
        params = {
            "b_client_id": current.client_id,
            "b_request_id": current.request_id,
            "b_expected_status": current.chain_status.value,
            "b_expected_hash": current.tx_hash,
            "b_status": new.chain_status.value,
            "b_at": at,
            "b_final_at": at if new.chain_status.is_final else None,
            "b_tx_hash": new.tx_hash,
            "b_raw_tx": None if new.raw_tx is None else bytes(new.raw_tx),
        }
        if (await self._unit.run(_SEND_TRACK, params)).rowcount != 1:
            return False
        if new.tx_hash and new.tx_hash != current.tx_hash:
            statement = self._unit.upsert(_send_hash_insert)
            await self._unit.run(
                statement,
                [  # type: ignore[arg-type]
                    {"client_id": current.client_id, "tx_hash": h, "request_id": current.request_id}
                    for h in (current.tx_hash, new.tx_hash)
                ],
            )
        if entry is not None:
            await self._unit.audit.append(entry)
        return True

    async def by_hash(self, client_id: str, tx_hash: str) -> SendRecord | None:
        params = {"b_client_id": client_id, "b_tx_hash": tx_hash}
        row = await self._unit.one(_SEND_BY_OLD_HASH, params)
        if row is None:
            row = await self._unit.one(_SEND_BY_HASH, params)
        return None if row is None else rows.send_from(row)

    async def spending(self, client_id: str, user_id: str, asset_id: int) -> int:
        params = {"b_client_id": client_id, "b_user_id": user_id, "b_asset_id": asset_id}
        if not self._unit.database.is_sqlite:
            row = await self._unit.one(_SEND_SPENDING_SUM, params)
            return 0 if row is None or row["units"] is None else int(row["units"])
        # SQLite keeps amounts as decimal text, and its sum() of text is a float
        found = await self._unit.all(_SEND_SPENDING_ROWS, params)
        return sum(int(row["spend_units"]) for row in found)
