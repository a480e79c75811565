"""`Unit`: the connection of one unit of the stores (`Database.unit`), on the path the
database was made for: straight to asyncpg (`PgReader`, `PgWriter`), on the loop's
pysqlite connection in a transaction of the write queue (`InlineRaw`), or, with the fast
paths off, a connection of SQLAlchemy's engine in its transaction (`Database.transaction`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from walletcore_sql.direct.postgres import PgReader, PgWriter
from walletcore_sql.direct.sqlite import InlineRaw

if TYPE_CHECKING:
    from walletcore_sql.database import Database


class Unit:
    """`Database.unit`: a class, not an `asynccontextmanager` generator, since every use
    case enters one or more (the generator's frames, its loop hooks and its weak set were
    about nine Python calls a unit; docs/performance.md, "Fewer Python calls per request")."""

    __slots__ = ("_conn", "_database", "_transaction", "_write")

    def __init__(self, database: Database, write: bool) -> None:
        self._database = database
        self._write = write
        self._conn: PgReader | None = None
        #: SQLite, and SQLAlchemy's path: the transaction's context manager, entered
        self._transaction: Any = None

    async def __aenter__(self) -> Any:
        database = self._database
        bound = database._ready_now() or await database._ready()
        if database.inline is not None:
            assert bound.writers is not None
            transaction = database.inline.transaction(self._write, bound.writers)
            inline = await transaction.__aenter__()
            self._transaction = transaction
            try:
                return InlineRaw(inline.sync)
            except BaseException as exc:  # the transaction never outlives a failed entry
                self._transaction = None
                await transaction.__aexit__(type(exc), exc, exc.__traceback__)
                raise
        if bound.units is None:  # the fast paths off: SQLAlchemy's engine, its transaction
            transaction = database.transaction(write=self._write)
            plain = await transaction.__aenter__()
            self._transaction = transaction
            return plain
        conn = self._conn = (PgWriter if self._write else PgReader)(bound.units)
        return conn

    async def __aexit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        """Never swallows the unit's exception (nor does the transaction)."""
        if self._transaction is not None:
            transaction, self._transaction = self._transaction, None
            await transaction.__aexit__(kind, exc, traceback)
            return
        conn, self._conn = self._conn, None
        assert conn is not None
        try:
            if exc is not None:
                await conn.rollback()
            elif conn.in_transaction:  # else nothing to end (a read, or one autocommitted)
                await conn.commit()
        finally:
            if not conn.close_kept():  # its connection kept for the next unit, no await
                await conn.close()
