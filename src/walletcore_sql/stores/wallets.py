"""`WalletStore` on SQL: users (each with the X-Request-Id that created it) and wallets.

A wallet stored (`add_user`, `add`, `update`) has its addresses added to the deposit watch
list in the same unit (`stores.deposits.watch`): the scan watches it from that commit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from walletcore.domain.clients import User
from walletcore.domain.wallet import WalletOwner, WalletRecord
from walletcore.ports.storage import WalletStore
from walletcore_sql import rows
from walletcore_sql.database import Database
from walletcore_sql.stores.deposits import watch
from walletcore_sql.stores.statements import bind
from walletcore_sql.tables import users, wallets

if TYPE_CHECKING:
    from walletcore_sql.stores.unit import SqlUnit

_USER_INSERT = users.insert()
_WALLET_INSERT = wallets.insert()
_USER_BY_REQUEST = select(users.c.user_id).where(
    users.c.client_id == bind("client_id"), users.c.request_id == bind("request_id")
)
_USER_GET = select(users).where(
    users.c.client_id == bind("client_id"), users.c.user_id == bind("user_id")
)
_WALLET_GET_USER = select(wallets).where(
    wallets.c.client_id == bind("client_id"),
    wallets.c.owner == bind("owner"),
    wallets.c.user_id == bind("user_id"),
)
_WALLET_GET_PLATFORM = select(wallets).where(
    wallets.c.client_id == bind("client_id"),
    wallets.c.owner == bind("owner"),
    wallets.c.user_id.is_(None),
)


def _user_insert(database: Database) -> Any:
    return database.insert(users).on_conflict_do_nothing()


def _wallet_insert(database: Database) -> Any:
    return database.insert(wallets).on_conflict_do_nothing()


def _wallet_upsert(owner: WalletOwner) -> Any:
    def build(database: Database) -> Any:
        insert = database.insert(wallets)
        user_wallet = owner is WalletOwner.USER
        return insert.on_conflict_do_update(
            index_elements=["client_id", "user_id"] if user_wallet else ["client_id"],
            index_where=wallets.c.owner == owner.value,
            set_={
                k: insert.excluded[k] for k in ("sealed", "addresses", "created_at", "updated_at")
            },
        )

    return build


#: Each owner's upsert (its own partial unique index), by the builder `SqlUnit.upsert` keeps.
_WALLET_UPSERTS = {owner: _wallet_upsert(owner) for owner in WalletOwner}


class SqlWallets(WalletStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def add_user(
        self, user: User, wallet: WalletRecord, *, request_id: str | None = None
    ) -> bool:
        self._unit.writer()
        values = rows.user_values(user, request_id)
        if request_id is None:
            await self._unit.run(_USER_INSERT, values)
        else:
            # The unique (client_id, request_id) index decides a race between two /create
            # calls with one X-Request-Id: the second inserts nothing.
            if (await self._unit.run(self._unit.upsert(_user_insert), values)).rowcount != 1:
                return False
        await self._unit.run(_WALLET_INSERT, rows.wallet_values(wallet))
        await watch(self._unit, wallet)
        return True

    async def created_by_request(self, client_id: str, request_id: str) -> str | None:
        params = {"b_client_id": client_id, "b_request_id": request_id}
        found = (await self._unit.run(_USER_BY_REQUEST, params)).scalar_one_or_none()
        return None if found is None else str(found)

    async def get_user(self, client_id: str, user_id: str) -> User | None:
        row = await self._unit.one(_USER_GET, {"b_client_id": client_id, "b_user_id": user_id})
        return None if row is None else rows.user_from(row)

    async def add(self, wallet: WalletRecord) -> bool:
        self._unit.writer()
        statement = self._unit.upsert(_wallet_insert)
        if (await self._unit.run(statement, rows.wallet_values(wallet))).rowcount != 1:
            return False
        await watch(self._unit, wallet)
        return True

    async def get(
        self, client_id: str, owner: WalletOwner, user_id: str | None
    ) -> WalletRecord | None:
        params = {"b_client_id": client_id, "b_owner": owner.value}
        if user_id is None:
            row = await self._unit.one(_WALLET_GET_PLATFORM, params)
        else:
            row = await self._unit.one(_WALLET_GET_USER, {**params, "b_user_id": user_id})
        return None if row is None else rows.wallet_from(row)

    async def update(self, wallet: WalletRecord) -> None:
        self._unit.writer()
        statement = self._unit.upsert(_WALLET_UPSERTS[wallet.owner])
        await self._unit.run(statement, rows.wallet_values(wallet))
        await watch(self._unit, wallet)
