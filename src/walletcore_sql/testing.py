"""Helpers for tests against a real PostgreSQL: a throwaway schema per run.

`pg_test_url()` is WALLETCORE_TEST_DATABASE_URL or the local `test` database;
`create_schema(url)` makes a schema named `wc_<pid>_<random>`, unique per run (and first
drops those of runs that died without cleaning up); migrate it
with `migrate.upgrade(url, schema=name)`, use it with `SqlStorage(url, migrate=False,
schema=name)`, empty it between tests with `truncate_async` and drop it with `drop_schema`.

A test that needs a whole database of its own (a server process with its own settings)
gets one from `create_database(prefix)` (`<prefix>_<pid>_<random>`, dropping those of
dead runs first) and drops it with `drop_database(name)`.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from sqlalchemy import text
from sqlalchemy.engine import make_url

from walletcore_sql.engine import make_engine

T = TypeVar("T")

TEST_DATABASE_URL_ENV = "WALLETCORE_TEST_DATABASE_URL"
DEFAULT_TEST_DATABASE_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
#: Every table the migrations create, children first.
TABLES = (
    "operators",
    "transfer_approvals",
    "policy_usage",
    "allowlist",
    "policy_versions",
    "desk_pauses",
    "settlements",
    "webhook_attempts",
    "webhook_endpoints",
    "events",
    "scan_cursors",
    "deposits",
    "watched_addresses",
    "price_records",
    "nonce_floors",
    "audit_log",
    "sends",
    "trades",
    "wallets",
    "users",
    "api_clients",
)
_SCHEMA_RE = re.compile(r"\A[a-z_][a-z0-9_]{0,62}\Z")


def off_loop(work: Callable[[], T]) -> T:
    """Run blocking set-up that runs its own event loop (`migrate.upgrade`, `create_schema`)
    from code that is inside one, such as a fixture of an async test."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(work).result()


def pg_test_url() -> str:
    return os.environ.get(TEST_DATABASE_URL_ENV) or DEFAULT_TEST_DATABASE_URL


def unique_schema_name(prefix: str = "wc") -> str:
    return f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"


async def create_schema_async(url: str, name: str | None = None) -> str:
    await drop_stale_schemas_async(url)
    name = name or unique_schema_name()
    await _execute(url, f'CREATE SCHEMA "{_checked(name)}"')
    return name


async def drop_schema_async(url: str, name: str) -> None:
    await _execute(url, f'DROP SCHEMA IF EXISTS "{_checked(name)}" CASCADE')


async def truncate_async(url: str, schema: str) -> None:
    """Empty every table of a migrated schema (TRUNCATE fires no row triggers)."""
    tables = ", ".join(f'"{_checked(schema)}"."{t}"' for t in TABLES)
    await _execute(url, f"TRUNCATE {tables} RESTART IDENTITY CASCADE")


async def drop_stale_schemas_async(url: str) -> list[str]:
    """Drop the schemas of test runs that died before cleaning up: `wc_<pid>_<hex>` whose
    process is gone. Only for a server on this machine, where the pids mean something."""
    if make_url(url).host not in ("127.0.0.1", "localhost", "::1", None):
        return []
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            result = await conn.execute(
                text("SELECT nspname FROM pg_namespace WHERE nspname ~ '^wc_[0-9]+_[0-9a-f]+$'")
            )
            names = [str(n) for n in result.scalars()]
    finally:
        await engine.dispose()
    stale = [n for n in names if not process_alive(int(n.split("_")[1]))]
    for name in stale:
        await drop_schema_async(url, name)
    return stale


def process_alive(pid: int) -> bool:
    """Whether a process of this machine still runs (a test run's owner, say)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_DATABASE_RE = re.compile(r"\A([a-z]+)_([0-9]+)_[0-9a-f]+\Z")


async def _admin(statements: list[str]) -> list[str]:
    """Run `statements` (one each, no transaction: CREATE/DROP DATABASE) on the test server;
    the names of its databases before them."""
    import asyncpg  # the driver of the SQL storage's PostgreSQL URLs

    url = make_url(pg_test_url())
    conn = await asyncpg.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 5432,
        user=url.username or "postgres",
        password=url.password,
        database=url.database or "postgres",
    )
    try:
        names = [r["datname"] for r in await conn.fetch("SELECT datname FROM pg_database")]
        for statement in statements:
            await conn.execute(statement)
        return names
    finally:
        await conn.close()


def create_database(prefix: str) -> tuple[str, str]:
    """A fresh database `<prefix>_<pid>_<hex>` on the test server, after dropping those of
    this prefix whose run died without cleaning up. Returns (its SQLAlchemy asyncpg URL,
    for WALLETCORE_DATABASE_URL, and its name)."""
    if not prefix.isalpha() or not prefix.islower():
        raise ValueError(f"not a plain database prefix: {prefix!r}")
    existing = asyncio.run(_admin([]))
    stale = [
        n
        for n in existing
        if (m := _DATABASE_RE.match(n)) and m.group(1) == prefix
        and not process_alive(int(m.group(2)))
    ]  # fmt: skip
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    drops = [f'DROP DATABASE IF EXISTS "{n}" WITH (FORCE)' for n in stale]
    asyncio.run(_admin([*drops, f'CREATE DATABASE "{name}"']))
    url = make_url(pg_test_url()).set(drivername="postgresql+asyncpg", database=name)
    return url.render_as_string(hide_password=False), name


def drop_database(name: str) -> None:
    if not _DATABASE_RE.match(name):
        raise ValueError(f"not a database of create_database: {name!r}")
    asyncio.run(_admin([f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)']))


def create_schema(url: str, name: str | None = None) -> str:
    return asyncio.run(create_schema_async(url, name))


def drop_schema(url: str, name: str) -> None:
    asyncio.run(drop_schema_async(url, name))


async def _execute(url: str, statement: str) -> None:
    engine = make_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


def _checked(name: str) -> str:
    if not _SCHEMA_RE.match(name):
        raise ValueError(f"not a plain schema name: {name!r}")
    return name
