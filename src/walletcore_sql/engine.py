"""Engines: the URL from settings, SQLite made safe for concurrent use, a schema on PG.

SQLite: WAL (readers never block the writer), a busy timeout (another process's writer
is waited for, not failed), foreign keys on, full fsync, and transactions that write
begin with `BEGIN IMMEDIATE`, so a write never fails half-way on a lock upgrade. Within a
process, write units are also queued on one lock (see `Database.transaction`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from walletcore.secretfiles import private_file

#: Milliseconds an SQLite connection waits for another process's write lock.
SQLITE_BUSY_TIMEOUT_MS = 30_000
#: Execution option that makes an SQLite transaction take the write lock at BEGIN.
SQLITE_WRITE = "walletcore_sqlite_write"
DEFAULT_SQLITE_NAME = "walletcore.db"


def database_url(settings: Any) -> str:
    """`settings.database_url`, else the SQLite file `settings.home / walletcore.db`."""
    configured = getattr(settings, "database_url", None)
    if configured is not None:
        value = (
            configured.get_secret_value() if hasattr(configured, "get_secret_value") else configured
        )
        if str(value).strip():
            return str(value).strip()
    home = Path(getattr(settings, "home", ".walletcore"))
    return sqlite_url(home / DEFAULT_SQLITE_NAME)


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path.expanduser().resolve()}"


def redacted(url: str | URL) -> str:
    """The URL without its password, for messages and logs."""
    return make_url(url).render_as_string(hide_password=True)


def is_sqlite(url: str | URL) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def make_engine(url: str | URL, *, schema: str | None = None, **options: Any) -> AsyncEngine:
    """An async engine for `url`; on PostgreSQL `schema` becomes the search_path."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if schema is not None:
            raise ValueError("SQLite has no schemas; use another file instead")
        return _sqlite_engine(parsed, **options)
    if parsed.get_backend_name() != "postgresql":
        raise ValueError(
            f"unsupported database {parsed.get_backend_name()!r}: use PostgreSQL or SQLite"
        )
    connect_args: dict[str, Any] = {}
    if schema is not None:
        connect_args["server_settings"] = {"search_path": schema}
    options.setdefault("pool_pre_ping", True)
    options.setdefault("pool_size", 10)
    options.setdefault("max_overflow", 20)
    return create_async_engine(parsed, connect_args=connect_args, **options)


def _sqlite_engine(url: URL, **options: Any) -> AsyncEngine:
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        # SQLite gives its -wal and -shm files the database file's mode: create it 0600
        # (in a 0700 folder) first, so none of the three is readable by others.
        path = private_file(Path(database))
        for suffix in ("-wal", "-shm", "-journal"):
            companion = path.with_name(path.name + suffix)
            if companion.exists():
                private_file(companion)
    engine = create_async_engine(url, **options)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # The driver must not issue BEGIN itself (it would defer it and skip it before DDL).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA synchronous = FULL")
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(SQLITE_WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine
