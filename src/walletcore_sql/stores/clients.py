"""`ClientStore` on SQL: the api clients, and the refused `/auth` counted on each in place.

`add_auth_failures` and `auth_succeeded` read the client's failure record `FOR UPDATE`
(SQLite: under the write lock the unit holds) and write it back in place; `update` never
writes those columns, so an operator's change keeps the counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select, update

from walletcore.domain.audit import AuditEntry
from walletcore.domain.clients import ApiClient, AuthFailures
from walletcore.domain.errors import InvalidRequest
from walletcore.ports.storage import ClientStore
from walletcore_sql import rows
from walletcore_sql.database import Database
from walletcore_sql.stores.statements import bind
from walletcore_sql.tables import api_clients

if TYPE_CHECKING:
    from walletcore_sql.stores.unit import SqlUnit

_CLIENT_GET = select(api_clients).where(api_clients.c.client_id == bind("client_id"))
_CLIENT_ALL = select(api_clients).order_by(
    api_clients.c.created_at.asc().nulls_first(), api_clients.c.client_id
)
_CLIENT_KEY = api_clients.c.client_id == bind("client_id")
#: A client's failure record, locked for its change (`add_auth_failures`, `auth_succeeded`;
#: SQLite ignores FOR UPDATE: its write unit holds the database's write lock already).
_CLIENT_FAILURES_LOCK = (
    select(*[api_clients.c[name] for name in rows.CLIENT_AUTH_COLUMNS])
    .where(_CLIENT_KEY)
    .with_for_update()
)
_CLIENT_FAILURES_SET = update(api_clients).where(_CLIENT_KEY)


def _client_insert(database: Database) -> Any:
    return database.insert(api_clients).on_conflict_do_nothing()


def _client_upsert(database: Database) -> Any:
    insert = database.insert(api_clients)
    # the failures are /auth's (`add_auth_failures`): an operator's change leaves them
    kept = ("client_id", *rows.CLIENT_AUTH_COLUMNS)
    columns = [c.name for c in api_clients.c if c.name not in kept]
    return insert.on_conflict_do_update(
        index_elements=[api_clients.c.client_id],
        set_={c: insert.excluded[c] for c in columns},
    )


class SqlClients(ClientStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def add(self, client: ApiClient) -> None:
        self._unit.writer()
        statement = self._unit.upsert(_client_insert)
        if (await self._unit.run(statement, rows.client_values(client))).rowcount != 1:
            raise InvalidRequest("api client exists already")

    async def get(self, client_id: str) -> ApiClient | None:
        row = await self._unit.one(_CLIENT_GET, {"b_client_id": client_id})
        return None if row is None else rows.client_from(row)

    async def all(self) -> list[ApiClient]:
        return [rows.client_from(r) for r in await self._unit.all(_CLIENT_ALL, {})]

    async def update(self, client: ApiClient) -> None:
        self._unit.writer()
        await self._unit.run(self._unit.upsert(_client_upsert), rows.client_values(client))

    async def add_auth_failures(
        self, client_id: str, failures: AuthFailures, *, entry: AuditEntry | None = None
    ) -> bool:
        stored = await self._locked_failures(client_id)
        if stored is None:
            return False
        await self._set_failures(client_id, stored.added(failures))
        began = stored.count == 0
        if began and entry is not None:
            await self._unit.audit.append(entry)
        return began

    async def auth_succeeded(self, client_id: str) -> AuthFailures:
        run = await self._locked_failures(client_id)
        if run is None:
            return AuthFailures()
        if run != run.ended():
            await self._set_failures(client_id, run.ended())
        return run

    async def _locked_failures(self, client_id: str) -> AuthFailures | None:
        self._unit.writer()
        row = await self._unit.one(_CLIENT_FAILURES_LOCK, {"b_client_id": client_id})
        return None if row is None else rows.auth_failures_from(row)

    async def _set_failures(self, client_id: str, failures: AuthFailures) -> None:
        values = rows.auth_failures_values(failures)
        await self._unit.run(_CLIENT_FAILURES_SET, {**values, "b_client_id": client_id})
