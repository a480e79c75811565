"""Nonce leases of the SQL storage (`walletcore.ports.NonceLeases`; docs/chains.md
"Nonces"), entry point `walletcore.nonce_leases: sql`.

- PostgreSQL (`PgNonceLeases`): the lease is a session-level `pg_advisory_lock` on a
  connection of its own (`Database.lease_connection`), awaited like any statement (the
  event loop runs on; PostgreSQL queues the waiters in order) and held until `release`.
  Its key is 64 signed bits of `lease_digest(chain, address, schema)`: the same in every
  process. `lock_timeout` bounds the wait (`AddressBusy`). A process that dies drops its
  connection, and PostgreSQL frees the lock with the session.
- SQLite: `FlockNonceLeases` (`walletcore_sql.filelocks`), a `flock`ed file per
  address in `<database file>-nonce-locks/`: an SQLite write transaction held across
  signing would stall every other write of the storage.
- Both keep the floor in `nonce_floors`, read under the lease and raised (never lowered)
  when a nonce was accepted; the raise is committed before the lease is let go.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from sqlalchemy import Select, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

from walletcore.domain.errors import AddressBusy
from walletcore.nonces import LocalNonceLeases, checked_nonce
from walletcore.ports.nonces import NonceLease, NonceLeases
from walletcore.secretfiles import ConfigurationError
from walletcore_sql.database import Database
from walletcore_sql.errors import sqlstate, storage_errors
from walletcore_sql.filelocks import WAIT_SECONDS, FlockNonceLeases, FloorStore, lease_digest
from walletcore_sql.storage import SqlStorage
from walletcore_sql.tables import nonce_floors

#: PostgreSQL's `lock_not_available`: `lock_timeout` ran out.
LOCK_NOT_AVAILABLE = "55P03"


def nonce_leases(database: Database, *, wait: float = WAIT_SECONDS) -> NonceLeases:
    """The leases of `database`: advisory locks on PostgreSQL, lock files beside an SQLite
    file; an SQLite database in memory has one process, so an in-process lock will do.
    `wait`: seconds an `acquire` waits for another holder before `AddressBusy`."""
    if not database.is_sqlite:
        return PgNonceLeases(database, wait=wait)
    path = make_url(database.url).database or ""
    if not path or path == ":memory:" or path.startswith("file:"):
        return LocalNonceLeases()
    file = Path(path).expanduser().resolve()
    return FlockNonceLeases(
        file.with_name(file.name + "-nonce-locks"), SqlFloors(database), wait=wait
    )


def build(*, settings: Any, storage: Any = None, **_: Any) -> NonceLeases:
    """Entry point `walletcore.nonce_leases: sql`: the leases of the container's
    `SqlStorage` (its database, so SQLite's floors share its write queue).
    `WALLETCORE_NONCE_WAIT_SECONDS`: how long an `acquire` waits for another holder."""
    if not isinstance(storage, SqlStorage):
        raise ConfigurationError(
            "the sql nonce leases are built on the sql storage (WALLETCORE_REPO=sql), not "
            f"{type(storage).__name__}; override the container's nonce_leases as well"
        )
    wait = float(getattr(settings, "nonce_wait_seconds", WAIT_SECONDS))
    return nonce_leases(storage.database, wait=wait)


def advisory_key(chain: str, address: str, scope: str = "") -> int:
    """The `pg_advisory_lock` key of a lease: a signed 64-bit integer."""
    return int.from_bytes(lease_digest(chain, address, scope)[:8], "big", signed=True)


def _read_floor(chain: str, address: str) -> Select[Any]:
    return select(nonce_floors.c.next_nonce).where(
        nonce_floors.c.chain == chain, nonce_floors.c.address == address
    )


def _raise_floor(database: Database, chain: str, address: str, next_nonce: int) -> Any:
    """Upsert that only ever raises the stored floor."""
    return _upsert_floor(database, chain, address, next_nonce, only_up=True)


def _upsert_floor(
    database: Database, chain: str, address: str, next_nonce: int, *, only_up: bool
) -> Any:
    insert = database.insert(nonce_floors).values(
        chain=chain, address=address, next_nonce=next_nonce
    )
    return insert.on_conflict_do_update(
        index_elements=[nonce_floors.c.chain, nonce_floors.c.address],
        set_={"next_nonce": insert.excluded.next_nonce},
        where=nonce_floors.c.next_nonce < insert.excluded.next_nonce if only_up else None,
    )


class SqlFloors(FloorStore):
    """The floors in `nonce_floors`, each read or raise one short transaction (SQLite)."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def read(self, chain: str, address: str) -> int:
        async with self._database.transaction() as conn:
            found = (await conn.execute(_read_floor(chain, address))).scalar_one_or_none()
        return int(found or 0)

    async def raise_to(self, chain: str, address: str, next_nonce: int) -> None:
        statement = _raise_floor(self._database, chain, address, next_nonce)
        async with self._database.transaction(write=True) as conn:
            await conn.execute(statement)

    async def set_to(self, chain: str, address: str, next_nonce: int) -> None:
        statement = _upsert_floor(self._database, chain, address, next_nonce, only_up=False)
        async with self._database.transaction(write=True) as conn:
            await conn.execute(statement)


class PgNonceLeases(NonceLeases):
    """Leases as session-level advisory locks, each on a connection of its own."""

    def __init__(self, database: Database, *, wait: float = WAIT_SECONDS) -> None:
        self._database = database
        self._wait = wait

    def __repr__(self) -> str:
        return f"PgNonceLeases({self._database!r})"

    async def acquire(self, chain: str, address: str) -> NonceLease:
        key = advisory_key(chain, address, self._database.schema or "")
        conn = await self._database.lease_connection()
        try:
            with storage_errors():
                try:
                    async with conn.begin():
                        await conn.execute(
                            text("SELECT set_config('lock_timeout', :ms, true)"),
                            {"ms": f"{int(self._wait * 1000)}ms"},
                        )
                        await conn.execute(
                            text("SELECT pg_advisory_lock(CAST(:key AS bigint))"), {"key": key}
                        )
                except sa_exc.DBAPIError as exc:
                    if sqlstate(exc) == LOCK_NOT_AVAILABLE:
                        raise AddressBusy() from exc
                    raise
                # A transaction begun after the lock: it sees the last holder's floor.
                async with conn.begin():
                    found = (await conn.execute(_read_floor(chain, address))).scalar_one_or_none()
        except BaseException:
            await _discard(conn)  # the session ends: a lock taken meanwhile goes with it
            raise
        return _PgLease(int(found or 0), self._database, conn, key, chain, address)


class _PgLease(NonceLease):
    def __init__(
        self,
        floor: int,
        database: Database,
        conn: AsyncConnection,
        key: int,
        chain: str,
        address: str,
    ) -> None:
        self.floor = floor
        self._database = database
        self._conn: AsyncConnection | None = conn
        self._key = key
        self._chain = chain
        self._address = address

    def __repr__(self) -> str:
        return f"PgNonceLease({self._chain}, {self._address}, floor={self.floor})"

    async def reset(self, next_nonce: int) -> None:
        if self._conn is None:
            raise RuntimeError("a released nonce lease cannot reset its floor")
        statement = _upsert_floor(
            self._database, self._chain, self._address, checked_nonce(next_nonce), only_up=False
        )
        with storage_errors():
            async with self._conn.begin():
                await self._conn.execute(statement)
        self.floor = next_nonce

    async def release(self, advanced_to: int | None) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            with storage_errors():
                if advanced_to is not None:  # committed before the lock is let go
                    async with conn.begin():
                        await conn.execute(
                            _raise_floor(self._database, self._chain, self._address, advanced_to)
                        )
                async with conn.begin():
                    unlocked = (
                        await conn.execute(
                            text("SELECT pg_advisory_unlock(CAST(:key AS bigint))"),
                            {"key": self._key},
                        )
                    ).scalar_one()
        except BaseException:
            await _discard(conn)
            raise
        if unlocked:
            await conn.close()
        else:  # pragma: no cover - the session lost its lock: never reuse it
            await _discard(conn)


async def _discard(conn: AsyncConnection) -> None:
    """Close the connection's session for good (its advisory locks go with it)."""
    with contextlib.suppress(Exception):
        await conn.invalidate()
    with contextlib.suppress(Exception):
        await conn.close()


__all__ = ["PgNonceLeases", "SqlFloors", "advisory_key", "build", "nonce_leases"]
