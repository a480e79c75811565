"""Alembic environment of walletcore_sql, async.

`walletcore_sql.migrate` hands over a connection already inside a write transaction
(`config.attributes["connection"]`); the alembic CLI gets a URL (`-x url=...` or
`sqlalchemy.url`) and an engine is made here with the same SQLite settings.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection

from walletcore_sql.engine import SQLITE_WRITE, make_engine
from walletcore_sql.migrate import MIGRATION_LOCK_KEY
from walletcore_sql.tables import metadata

config = context.config


def do_run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
            )
        context.run_migrations()


async def run_async_migrations(url: str) -> None:
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            conn = await conn.execution_options(**{SQLITE_WRITE: True})
            await conn.run_sync(do_run_migrations)
            await conn.commit()
    finally:
        await engine.dispose()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        do_run_migrations(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise SystemExit("no database: pass -x url=... or set sqlalchemy.url")
    asyncio.run(run_async_migrations(url))


if context.is_offline_mode():
    raise SystemExit("walletcore_sql migrations run online only (they use dialect variants)")
run_migrations_online()
