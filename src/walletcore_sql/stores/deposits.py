"""`DepositStore` on SQL: the watched addresses, the deposits, the scan cursors.

- `watchlist` reads `watched_addresses` by its primary key's first column (the chain);
  the rows are written with the wallets (`SqlWallets`, `watch`).
- `add` is one `INSERT ... ON CONFLICT (chain, tx_hash, position) DO NOTHING`: a credit
  found twice (two scans racing) is stored once, and only the insert that stored it
  appends its entry.
- `move` and `advance` are compare-and-sets: an `UPDATE` whose `WHERE` holds the expected
  state (a deposit's status and block, a cursor's block); a loser matches no row and
  writes nothing. A chain's first cursor is an insert that does nothing on a conflict, so
  of two first scans one stores it, and the other answers False, never an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select, text, update

from walletcore.domain.assets import Chain
from walletcore.domain.audit import AuditEntry
from walletcore.domain.deposits import BlockRef, Deposit, ScanCursor, Watched
from walletcore.domain.wallet import WalletRecord
from walletcore.ports.storage import DepositStore
from walletcore_sql import rows
from walletcore_sql.database import Database
from walletcore_sql.stores.statements import bind
from walletcore_sql.tables import deposits, scan_cursors, watched_addresses

if TYPE_CHECKING:
    from walletcore_sql.stores.unit import SqlUnit

_WATCHLIST = select(
    watched_addresses.c.address,
    watched_addresses.c.client_id,
    watched_addresses.c.owner,
    watched_addresses.c.user_id,
).where(watched_addresses.c.chain == bind("chain"))
_WHOSE = select(
    watched_addresses.c.client_id, watched_addresses.c.owner, watched_addresses.c.user_id
).where(watched_addresses.c.chain == bind("chain"), watched_addresses.c.address == bind("address"))
_CURSOR = select(scan_cursors).where(scan_cursors.c.chain == bind("chain"))
_CURSOR_MOVE = (
    update(scan_cursors)
    .where(
        scan_cursors.c.chain == bind("chain"),
        scan_cursors.c.height == bind("height"),
        scan_cursors.c.block_hash == bind("block_hash"),
    )
    .values(
        height=bind("new_height"),
        block_hash=bind("new_block_hash"),
        updated_at=bind("updated_at"),
    )
)
_DEPOSIT_GET = select(deposits).where(
    deposits.c.chain == bind("chain"),
    deposits.c.tx_hash == bind("tx_hash"),
    deposits.c.position == bind("position"),
)
_KEY = (
    deposits.c.chain == bind("chain"),
    deposits.c.tx_hash == bind("tx_hash"),
    deposits.c.position == bind("position"),
    deposits.c.status == bind("status"),
)
#: The move's compare-and-set: the stored status and block still `current`'s (in a block,
#: or in none: two statements, each a plain lookup of the key).
_DEPOSIT_MOVE = {
    True: update(deposits).where(
        *_KEY,
        deposits.c.block_height == bind("block_height"),
        deposits.c.block_hash == bind("block_hash"),
    ),
    False: update(deposits).where(
        *_KEY, deposits.c.block_height.is_(None), deposits.c.block_hash.is_(None)
    ),
}
# `ix_deposits_unsettled`'s partial condition, as a literal: the planner proves it only from
# the literal (SQLite always, PostgreSQL under a generic plan).
_UNSETTLED = (
    select(deposits)
    .where(deposits.c.chain == bind("chain"), text("deposits.status = 'seen'"))
    .order_by(deposits.c.seen_at, deposits.c.tx_hash, deposits.c.position)
    .limit(bind("limit"))
)
_NEWEST = (deposits.c.seen_at.desc(), deposits.c.deposit_id.desc())
_PAGE = {
    True: select(deposits)
    .where(deposits.c.client_id == bind("client_id"), deposits.c.user_id == bind("user_id"))
    .order_by(*_NEWEST)
    .limit(bind("limit")),
    False: select(deposits)
    .where(deposits.c.client_id == bind("client_id"))
    .order_by(*_NEWEST)
    .limit(bind("limit")),
}


def _deposit_insert(database: Database) -> Any:
    return database.insert(deposits).on_conflict_do_nothing(
        index_elements=["chain", "tx_hash", "position"]
    )


def _cursor_insert(database: Database) -> Any:
    return database.insert(scan_cursors).on_conflict_do_nothing(index_elements=["chain"])


def _watched_insert(database: Database) -> Any:
    return database.insert(watched_addresses).on_conflict_do_nothing(
        index_elements=["chain", "address"]
    )


async def watch(unit: SqlUnit, wallet: WalletRecord) -> None:
    """Each address of `wallet` not watched yet, as its (an address never changes owner):
    in the wallet's unit, so the watch list has it from the same commit."""
    found = rows.watched_values(wallet)
    if len(found) == 1:
        await unit.run(unit.upsert(_watched_insert), found[0])
    elif found:  # one statement, executemany
        await unit.run(unit.upsert(_watched_insert), found)  # type: ignore[arg-type]


class SqlDeposits(DepositStore):
    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def watchlist(self, chain: Chain) -> dict[str, Watched]:
        found = await self._unit.all(_WATCHLIST, {"b_chain": chain.value})
        return {row["address"]: rows.watched_from(row) for row in found}

    async def whose(self, chain: Chain, address: str) -> Watched | None:
        row = await self._unit.one(_WHOSE, {"b_chain": chain.value, "b_address": address})
        return None if row is None else rows.watched_from(row)

    async def cursor(self, chain: Chain) -> ScanCursor | None:
        row = await self._unit.one(_CURSOR, {"b_chain": chain.value})
        return None if row is None else rows.cursor_from(row)

    async def advance(self, chain: Chain, expected: BlockRef | None, cursor: ScanCursor) -> bool:
        self._unit.writer()
        if cursor.chain != chain:
            raise ValueError("a cursor of another chain")
        if expected is None:
            statement = self._unit.upsert(_cursor_insert)
            result = await self._unit.run(statement, rows.cursor_values(cursor))
        else:
            params = {
                "b_chain": chain.value,
                "b_height": expected.height,
                "b_block_hash": expected.hash,
                "b_new_height": cursor.block.height,
                "b_new_block_hash": cursor.block.hash,
                "b_updated_at": cursor.updated_at,
            }
            result = await self._unit.run(_CURSOR_MOVE, params)
        return bool(result.rowcount == 1)

    async def add(self, deposit: Deposit, *, entry: AuditEntry | None = None) -> bool:
        self._unit.writer()
        statement = self._unit.upsert(_deposit_insert)
        stored = (await self._unit.run(statement, rows.deposit_values(deposit))).rowcount == 1
        if stored and entry is not None:
            await self._unit.audit.append(entry)
        return bool(stored)

    async def get(self, chain: Chain, tx_hash: str, position: str) -> Deposit | None:
        params = {"b_chain": chain.value, "b_tx_hash": tx_hash, "b_position": position}
        row = await self._unit.one(_DEPOSIT_GET, params)
        return None if row is None else rows.deposit_from(row)

    async def move(
        self, current: Deposit, new: Deposit, *, entry: AuditEntry | None = None
    ) -> bool:
        self._unit.writer()
        values = rows.deposit_move_values(new)
        values.update(
            b_chain=current.chain.value,
            b_tx_hash=current.tx_hash,
            b_position=current.position,
            b_status=current.status.value,
        )
        block = current.block
        if block is not None:
            values.update(b_block_height=block.height, b_block_hash=block.hash)
        moved = (await self._unit.run(_DEPOSIT_MOVE[block is not None], values)).rowcount == 1
        if moved and entry is not None:
            await self._unit.audit.append(entry)
        return bool(moved)

    async def unsettled(self, chain: Chain, limit: int) -> list[Deposit]:
        found = await self._unit.all(_UNSETTLED, {"b_chain": chain.value, "b_limit": max(limit, 0)})
        return [rows.deposit_from(row) for row in found]

    async def page(self, client_id: str, user_id: str | None, *, limit: int) -> list[Deposit]:
        params: dict[str, Any] = {"b_client_id": client_id, "b_limit": max(limit, 0)}
        if user_id is not None:
            params["b_user_id"] = user_id
        found = await self._unit.all(_PAGE[user_id is not None], params)
        return [rows.deposit_from(row) for row in found]
