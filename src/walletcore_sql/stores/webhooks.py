"""`WebhookStore` on SQL: the webhook endpoints and their delivery log.

- `get` in a write unit reads the endpoint `FOR UPDATE` (SQLite: the unit holds the write
  lock): an operator's change and a worker's move of one endpoint take turns.
- `put` is an upsert whose update writes the operator's columns only
  (`rows.WEBHOOK_SETTINGS_COLUMNS`): the delivery state stays the job's.
- `claim` reads the due endpoints (the partial index `ix_webhook_endpoints_due`; on
  PostgreSQL `FOR UPDATE SKIP LOCKED`, so two workers claiming at once pass each other's
  rows by) and leases each with an `UPDATE ... WHERE` its lease is still free (rowcount 1
  wins).
- `advance` is one `UPDATE ... WHERE lease_owner AND cursor` are the ones read; `replay`
  one `UPDATE ... WHERE` the cursor is after the new one (a row comparison).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, delete, or_, select, tuple_, update

from walletcore.domain.events import EventPosition
from walletcore.domain.webhooks import DeliveryAttempt, WebhookEndpoint
from walletcore.ports.webhooks import WebhookStore
from walletcore_sql import rows
from walletcore_sql.database import Database
from walletcore_sql.stores.statements import bind
from walletcore_sql.tables import webhook_attempts, webhook_endpoints

if TYPE_CHECKING:
    from walletcore_sql.stores.unit import SqlUnit

_E = webhook_endpoints.c
_A = webhook_attempts.c
_KEY = _E.client_id == bind("client_id")
_GET = select(webhook_endpoints).where(_KEY)
_GET_LOCKED = _GET.with_for_update()
#: Due at `now`: active (`ix_webhook_endpoints_due`'s condition), the next attempt due, no
#: live lease.
_DUE = and_(
    ~_E.paused,
    _E.disabled_reason.is_(None),
    or_(_E.next_attempt_at.is_(None), _E.next_attempt_at <= bind("now")),
    or_(_E.lease_until.is_(None), _E.lease_until <= bind("now")),
)
_DUE_ROWS = (
    select(webhook_endpoints)
    .where(_DUE)
    .order_by(_E.next_attempt_at, _E.client_id)
    .limit(bind("limit"))
)
_DUE_ROWS_SKIPPING = _DUE_ROWS.with_for_update(skip_locked=True)
_LEASE = (
    update(webhook_endpoints)
    .where(_KEY, _DUE)
    .values(lease_owner=bind("owner"), lease_until=bind("until"))
)
_SAME_CURSOR = and_(
    _E.cursor_tx.is_not_distinct_from(bind("expected_tx")),
    _E.cursor_seq.is_not_distinct_from(bind("expected_seq")),
)
#: The delivery state `advance` writes (and `disabled_*` when it disables).
_MOVED = ("cursor_tx", "cursor_seq", "attempts", "next_attempt_at", "lease_owner", "lease_until")
_ADVANCE = update(webhook_endpoints).where(
    _KEY, _E.lease_owner.is_not_distinct_from(bind("expected_owner")), _SAME_CURSOR
)
_REPLAY_TO_START = (
    update(webhook_endpoints)
    .where(_KEY, _E.cursor_tx.is_not(None))
    .values(
        cursor_tx=None,
        cursor_seq=None,
        attempts=0,
        next_attempt_at=bind("now"),
        lease_owner=None,
        lease_until=None,
    )
)
_REPLAY = (
    update(webhook_endpoints)
    .where(
        _KEY,
        _E.cursor_tx.is_not(None),
        tuple_(_E.cursor_tx, _E.cursor_seq) > tuple_(bind("tx"), bind("seq")),
    )
    .values(
        cursor_tx=bind("tx"),
        cursor_seq=bind("seq"),
        attempts=0,
        next_attempt_at=bind("now"),
        lease_owner=None,
        lease_until=None,
    )
)
_ATTEMPTS = (
    select(webhook_attempts)
    .where(_A.client_id == bind("client_id"))
    .order_by(_A.at.desc(), _A.attempt_id.desc())
    .limit(bind("limit"))
)
_EVENT_ATTEMPTS = (
    select(webhook_attempts)
    .where(_A.client_id == bind("client_id"), _A.event_id == bind("event_id"))
    .order_by(_A.at.desc(), _A.attempt_id.desc())
    .limit(bind("limit"))
)
_RECORD = webhook_attempts.insert()
_OLDEST = (
    select(_A.attempt_id)
    .where(_A.at < bind("before"))
    .order_by(_A.at, _A.attempt_id)
    .limit(bind("limit"))
)
_PRUNE = delete(webhook_attempts).where(_A.attempt_id.in_(_OLDEST))


def _upsert(database: Database) -> Any:
    insert = database.insert(webhook_endpoints)
    return insert.on_conflict_do_update(
        index_elements=[_E.client_id],
        set_={c: insert.excluded[c] for c in rows.WEBHOOK_SETTINGS_COLUMNS},
    )


class SqlWebhooks(WebhookStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def get(self, client_id: str) -> WebhookEndpoint | None:
        query = _GET_LOCKED if self._unit.writable else _GET
        row = await self._unit.one(query, {"b_client_id": client_id})
        return None if row is None else rows.webhook_from(row)

    async def put(self, endpoint: WebhookEndpoint) -> None:
        self._unit.writer()
        await self._unit.run(self._unit.upsert(_upsert), rows.webhook_values(endpoint))

    async def claim(
        self, now: datetime, *, owner: str, until: datetime, limit: int
    ) -> list[WebhookEndpoint]:
        self._unit.writer()
        query = _DUE_ROWS if self._unit.database.is_sqlite else _DUE_ROWS_SKIPPING
        found = await self._unit.all(query, {"b_now": now, "b_limit": max(limit, 0)})
        claimed = []
        for row in found:
            endpoint = rows.webhook_from(row)
            params = {
                "b_client_id": endpoint.client_id,
                "b_now": now,
                "b_owner": owner,
                "b_until": until,
            }
            if (await self._unit.run(_LEASE, params)).rowcount == 1:
                claimed.append(endpoint.leased(owner, until))
        return claimed

    async def advance(
        self, current: WebhookEndpoint, new: WebhookEndpoint
    ) -> WebhookEndpoint | None:
        self._unit.writer()
        values = rows.webhook_values(new)
        params = {k: values[k] for k in _MOVED}
        if new.disabled:
            params.update(disabled_reason=new.disabled_reason, disabled_at=new.disabled_at)
        cursor = current.cursor
        params.update(
            b_client_id=current.client_id,
            b_expected_owner=current.lease_owner,
            b_expected_tx=None if cursor is None else cursor.tx,
            b_expected_seq=None if cursor is None else cursor.seq,
        )
        if (await self._unit.run(_ADVANCE, params)).rowcount != 1:
            return None
        row = await self._unit.one(_GET, {"b_client_id": current.client_id})
        return None if row is None else rows.webhook_from(row)

    async def replay(self, client_id: str, cursor: EventPosition | None, now: datetime) -> bool:
        self._unit.writer()
        params: dict[str, Any] = {"b_client_id": client_id, "b_now": now}
        if cursor is None:
            result = await self._unit.run(_REPLAY_TO_START, params)
        else:
            params.update(b_tx=cursor.tx, b_seq=cursor.seq)
            result = await self._unit.run(_REPLAY, params)
        return bool(result.rowcount == 1)

    async def record(self, attempt: DeliveryAttempt) -> None:
        self._unit.writer()
        await self._unit.run(_RECORD, rows.attempt_values(attempt))

    async def attempts(
        self, client_id: str, *, event_id: str | None = None, limit: int
    ) -> list[DeliveryAttempt]:
        params: dict[str, Any] = {"b_client_id": client_id, "b_limit": max(limit, 0)}
        if event_id is None:
            found = await self._unit.all(_ATTEMPTS, params)
        else:
            found = await self._unit.all(_EVENT_ATTEMPTS, {**params, "b_event_id": event_id})
        return [rows.attempt_from(r) for r in found]

    async def prune(self, before: datetime, limit: int) -> int:
        self._unit.writer()
        result = await self._unit.run(_PRUNE, {"b_before": before, "b_limit": max(limit, 0)})
        return int(result.rowcount)
