"""Schema migrations: upgrade, current revision, and the start-up check.

    from walletcore_sql import migrate
    migrate.upgrade(url)          # `walletcore db upgrade`
    migrate.current(url)          # "0001", or None on an unmigrated database
    migrate.check_schema(url)     # raises SchemaError unless the schema is this code's head

The sync functions are for the CLI (they run their own event loop); inside a running loop
use the `*_async` ones. `settings_url(settings)` is the URL the storage would use.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.script.revision import RevisionError
from alembic.util.exc import CommandError
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from walletcore_sql.engine import (
    SQLITE_WRITE,
    database_url,
    make_engine,
    redacted,
    waiting_for_locks,
)
from walletcore_sql.errors import SchemaNotMigrated, SchemaOutdated, SchemaTooNew, storage_errors

T = TypeVar("T")
_PACKAGE = Path(__file__).resolve().parent
#: Taken by every migrating transaction on PostgreSQL, so migrators run one at a time.
MIGRATION_LOCK_KEY = 0x77616C6C6574  # "wallet"
UPGRADE_HINT = "run `walletcore db upgrade`"


def settings_url(settings: Any) -> str:
    """The database URL of `settings` (`WALLETCORE_DATABASE_URL`, else the SQLite file)."""
    return database_url(settings)


def alembic_config() -> Config:
    config = Config(str(_PACKAGE / "alembic.ini"))
    config.set_main_option("script_location", str(_PACKAGE / "migrations"))
    return config


def head() -> str:
    """The revision this code's schema is at."""
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise RuntimeError(f"walletcore_sql migrations have {len(heads)} heads; expected one")
    return heads[0]


# -- sync entry points (CLI) ---------------------------------------------------------------
def upgrade(url: str, *, schema: str | None = None, revision: str = "head") -> str:
    """Migrate the database at `url` to `revision` (default: this code's head); returns it."""
    return _run(upgrade_async(url, schema=schema, revision=revision))


def current(url: str, *, schema: str | None = None) -> str | None:
    return _run(current_async(url, schema=schema))


def check_schema(url: str, *, schema: str | None = None) -> None:
    _run(check_schema_async(url, schema=schema))


# -- async entry points --------------------------------------------------------------------
async def upgrade_async(url: str, *, schema: str | None = None, revision: str = "head") -> str:
    return await _with_engine(url, schema, lambda e: upgrade_engine(e, revision))


async def current_async(url: str, *, schema: str | None = None) -> str | None:
    return await _with_engine(url, schema, current_engine)


async def check_schema_async(url: str, *, schema: str | None = None) -> None:
    await _with_engine(url, schema, check_schema_engine)


async def upgrade_engine(engine: AsyncEngine, revision: str = "head") -> str:
    """Upgrade in one write transaction (PostgreSQL: DDL is transactional, and migrators
    queue on an advisory lock; SQLite: BEGIN IMMEDIATE). Refuses a newer schema.

    Alembic keeps its running migration in module globals, so within one process
    migrations also take turns on a lock.
    """
    async with _process_lock():
        with storage_errors():
            async with engine.connect() as conn:
                conn = await conn.execution_options(**{SQLITE_WRITE: True})
                async with conn.begin():
                    if conn.dialect.name == "postgresql":
                        await conn.execute(
                            text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
                        )
                    return await conn.run_sync(_upgrade_sync, revision, redacted(engine.url))


def upgrade_sync(engine: Engine, revision: str = "head") -> str:
    """`upgrade_engine` on a blocking engine (SQLite, from a worker thread): one
    transaction that waits for the write lock (`BEGIN IMMEDIATE`, busy timeout)."""
    with _SYNC_LOCK, storage_errors(), engine.connect() as conn, _waiting_for_locks(conn):
        conn = conn.execution_options(**{SQLITE_WRITE: True})
        with conn.begin():
            return _upgrade_sync(conn, revision, redacted(engine.url))


def check_schema_sync(engine: Engine) -> None:
    """`check_schema_engine` on a blocking engine (SQLite, from a worker thread)."""
    with storage_errors(), engine.connect() as conn, _waiting_for_locks(conn):
        found = _current_sync(conn)
        conn.rollback()
    _check(found, redacted(engine.url))


@contextmanager
def _waiting_for_locks(conn: Connection) -> Iterator[None]:
    """SQLite: wait for another writer's lock (the inline engine's connections do not)."""
    if conn.dialect.name != "sqlite":
        yield
        return
    with waiting_for_locks(conn.connection.driver_connection):
        yield


async def current_engine(engine: AsyncEngine) -> str | None:
    with storage_errors():
        async with engine.connect() as conn:
            return await conn.run_sync(_current_sync)


async def check_schema_engine(engine: AsyncEngine) -> None:
    """Raise `SchemaNotMigrated`, `SchemaOutdated` or `SchemaTooNew` unless at head."""
    found = await current_engine(engine)
    _check(found, redacted(engine.url))


# -- helpers -------------------------------------------------------------------------------
_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


#: Alembic keeps its running migration in module globals: blocking migrations take turns.
_SYNC_LOCK = threading.Lock()


def _process_lock() -> asyncio.Lock:
    """This event loop's migration lock (an asyncio.Lock serves one loop only)."""
    loop = asyncio.get_running_loop()
    lock = _LOCKS.get(loop)
    if lock is None:
        lock = _LOCKS[loop] = asyncio.Lock()
    return lock


def _upgrade_sync(conn: Connection, revision: str, where: str) -> str:
    found = _current_sync(conn)
    if found is not None and not _known(found):
        _check(found, where)  # raises SchemaTooNew
    config = alembic_config()
    config.attributes["connection"] = conn
    command.upgrade(config, revision)
    return _current_sync(conn) or ""


def _current_sync(conn: Connection) -> str | None:
    heads = MigrationContext.configure(conn).get_current_heads()
    return ",".join(sorted(heads)) if heads else None


def _known(revision: str) -> bool:
    script = ScriptDirectory.from_config(alembic_config())
    try:
        return all(script.get_revision(r) is not None for r in revision.split(","))
    except (CommandError, RevisionError):  # not a revision this code ships
        return False


def _check(found: str | None, where: str) -> None:
    expected = head()
    if found is None:
        raise SchemaNotMigrated(
            f"The database {where} has no walletcore schema (it is empty or unmigrated); "
            f"{UPGRADE_HINT} to create it (schema revision {expected})"
        )
    if found == expected:
        return
    if not _known(found):
        raise SchemaTooNew(
            f"The database {where} is at schema revision {found}, which this walletcore does "
            f"not know: it was migrated by a newer version (this code expects {expected}). "
            "Run the walletcore version that migrated it, or point this one at another database"
        )
    raise SchemaOutdated(
        f"The database {where} is at schema revision {found}, older than this code's "
        f"{expected}; {UPGRADE_HINT}"
    )


async def _with_engine(
    url: str, schema: str | None, work: Callable[[AsyncEngine], Awaitable[T]]
) -> T:
    engine = make_engine(url, schema=schema)
    try:
        return await work(engine)
    finally:
        await engine.dispose()


def _run(coro: Awaitable[T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    coro.close()  # type: ignore[attr-defined]
    raise RuntimeError("inside a running event loop: use the *_async function instead")
