"""Engines: the URL from settings, SQLite made safe for concurrent use, a schema on PG.

SQLite: WAL (readers never block the writer), a busy timeout (another process's writer
is waited for, not failed), foreign keys on, full fsync, and transactions that write
begin with `BEGIN IMMEDIATE`, so a write never fails half-way on a lock upgrade. Within a
process, write units are also queued on one lock (see `Database.transaction`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from walletcore.secretfiles import private_file

#: Milliseconds an SQLite connection waits for another process's write lock.
SQLITE_BUSY_TIMEOUT_MS = 30_000
#: Execution option that makes an SQLite transaction take the write lock at BEGIN.
SQLITE_WRITE = "walletcore_sqlite_write"
DEFAULT_SQLITE_NAME = "walletcore.db"
#: PostgreSQL connections a process keeps open (`WALLETCORE_DB_POOL_SIZE`), and none on
#: top: a connection opened beyond the pool is closed when given back, so a peak above the
#: pool would open and close one per unit of work (an overflow of 8 under 32 concurrent
#: requests spent 6 % of the loop in asyncpg.connect). Above the pool, units queue for a
#: connection (up to `pool_timeout`, then 503). Mind the server's max_connections (100
#: by default): workers x pool size, plus each worker's nonce-lease pool.
PG_POOL_SIZE, PG_POOL_OVERFLOW = 32, 0
#: Seconds a unit waits for a pooled PostgreSQL connection before it answers 503.
PG_POOL_TIMEOUT = 10.0


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
    # No ping before each checkout (it cost a round trip per unit of work): a connection
    # the server dropped fails its statement with a disconnect error, SQLAlchemy then
    # invalidates the whole pool, and the request answers 503 (retry) - the optimistic
    # handling SQLAlchemy documents for asyncpg. Connections are recycled after an hour, so
    # idle ones do not outlive a firewall's or pgbouncer's timeout.
    options.setdefault("pool_pre_ping", False)
    options.setdefault("pool_size", PG_POOL_SIZE)
    options.setdefault("max_overflow", PG_POOL_OVERFLOW)
    options.setdefault("pool_recycle", 3600)
    options.setdefault("pool_timeout", PG_POOL_TIMEOUT)
    return create_async_engine(parsed, connect_args=connect_args, **options)


def _private_sqlite_files(url: URL) -> None:
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        # SQLite gives its -wal and -shm files the database file's mode: create it 0600
        # (in a 0700 folder) first, so none of the three is readable by others.
        path = private_file(Path(database))
        for suffix in ("-wal", "-shm", "-journal"):
            companion = path.with_name(path.name + suffix)
            if companion.exists():
                private_file(companion)


def driver_of(conn: Connection) -> Any:
    """The driver's own connection under a SQLAlchemy one in use (pysqlite's, on SQLite):
    for the statements sent to it directly (BEGIN IMMEDIATE, savepoints, the stores' raw
    path)."""
    driver = conn.connection.dbapi_connection
    assert driver is not None  # a connection in use holds its driver's
    return driver


def _sqlite_events(engine: Engine, *, inline: bool) -> None:
    """WAL, foreign keys, full fsync, and BEGIN ours rather than the driver's (it would defer
    it and skip it before DDL). `inline` (statements on the event loop's thread): no busy
    wait and no WAL checkpoint on the connection, and a read takes no transaction."""
    # The connection's own settings wait for another process's lock like any writer (a
    # process migrating the file at start holds it: two servers started at once on a new
    # file), then an inline connection stops waiting.
    pragmas = {
        "busy_timeout": SQLITE_BUSY_TIMEOUT_MS,
        "journal_mode": "WAL",
        "foreign_keys": "ON",
        "synchronous": "FULL",
    }
    if inline:
        pragmas["wal_autocheckpoint"] = 0
    settled = {"busy_timeout": 0} if inline else {}

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            for name, value in [*pragmas.items(), *settled.items()]:
                cursor.execute(f"PRAGMA {name} = {value}")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(SQLITE_WRITE, False)
        if inline:  # straight to the driver, without a SQLAlchemy execution's cost
            if write:
                driver_of(conn).execute("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


@contextmanager
def waiting_for_locks(raw: Any) -> Iterator[None]:
    """On a driver-level SQLite connection: wait up to the busy timeout for another
    writer's lock (from a worker thread: the inline connections never wait), then back."""
    before = raw.execute("PRAGMA busy_timeout").fetchone()[0]
    raw.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    try:
        yield
    finally:
        raw.execute(f"PRAGMA busy_timeout = {int(before)}")


def _sqlite_engine(url: URL, **options: Any) -> AsyncEngine:
    _private_sqlite_files(url)
    engine = create_async_engine(url, **options)
    _sqlite_events(engine.sync_engine, inline=False)
    return engine


def sqlite_inline_engine(url: str | URL) -> Engine:
    """A blocking (pysqlite) engine on the SQLite file of `url`, for statements run on the
    event loop's own thread (`walletcore_sql.database`).

    Its connections never wait for a lock (busy timeout 0: a locked database raises at
    once, and the caller waits for it in a worker thread), may move between threads
    (never used by two at once), and never checkpoint the WAL on commit (the caller does,
    off the loop). The pool has no upper bound: a checkout never blocks the loop.
    """
    parsed = make_url(url).set(drivername="sqlite+pysqlite")
    _private_sqlite_files(parsed)
    engine = create_engine(
        parsed,
        connect_args={"check_same_thread": False},
        pool_size=4,
        max_overflow=-1,
    )

    _sqlite_events(engine, inline=True)
    return engine
