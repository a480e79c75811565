"""How long `/auth` takes to refuse an unknown client id, a wrong key and a disabled client,
on SQLite and PostgreSQL: the auth service on the SQL storage (what a request runs behind
the HTTP layer), and with `--http` a real `walletcore serve` (one worker) over loopback
HTTP. The three refusals are interleaved round by round, so a slower one shows as a
difference of the medians rather than of the machine's load.

    .venv/bin/python bench/auth_refusal_bench.py [--rounds 2000] [--db sqlite,pg] [--http]
        [--pg-url postgresql+asyncpg://postgres@127.0.0.1:5432/test]

Prints, per database and refusal, the median and the 90th percentile in microseconds,
and (service) what the refusals left in storage: audit rows, failures counted on clients.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(
    0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration", "hardening")
)

import httpx
from hardening_support import Server, provision
from sqlalchemy import text

from walletcore.clock import SystemClock
from walletcore.domain.errors import InvalidCredentials
from walletcore.domain.ids import new_id
from walletcore.services.audit import Auditor
from walletcore.services.auth import AuthService
from walletcore.services.tokens import TokenSigner
from walletcore.testing import CONTRACT_CATALOG, autocommit
from walletcore_sql import migrate
from walletcore_sql.engine import make_engine, sqlite_url
from walletcore_sql.storage import SqlStorage
from walletcore_sql.testing import (
    create_database,
    create_schema_async,
    drop_database,
    drop_schema_async,
    pg_test_url,
)

REFUSALS = ("unknown client", "wrong key", "disabled client")


def service(storage: SqlStorage) -> AuthService:
    clock = SystemClock()
    return AuthService(
        storage,
        clock,
        TokenSigner(secrets.token_bytes(32)),
        Auditor(storage, clock),
        catalog=CONTRACT_CATALOG,
    )


async def measure(auth: AuthService, rounds: int) -> dict[str, list[float]]:
    known = await auth.create_client("Bench Known")
    disabled = await auth.create_client("Bench Disabled")
    await auth.disable_client(disabled.client.client_id)
    wrong_key = "wck_" + secrets.token_urlsafe(32)
    calls: dict[str, Callable[[str], Awaitable[object]]] = {
        "unknown client": lambda r: auth.authenticate(new_id(), wrong_key, r),
        "wrong key": lambda r: auth.authenticate(known.client.client_id, wrong_key, r),
        "disabled client": lambda r: auth.authenticate(
            disabled.client.client_id, disabled.api_key, r
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in REFUSALS}
    for n in range(rounds + 50):  # the first 50 rounds warm the caches up, uncounted
        for name in REFUSALS if n % 2 else reversed(REFUSALS):  # neither always first
            started = time.perf_counter()
            try:
                await calls[name](f"bench-{n}")
            except InvalidCredentials:
                pass
            else:  # pragma: no cover - a bench that authenticates measures nothing
                raise AssertionError(f"{name} was not refused")
            if n >= 50:
                times[name].append((time.perf_counter() - started) * 1e6)
    return times


async def left_behind(storage: SqlStorage, auth: AuthService) -> str:
    await auth.failures.settled()
    clients = await autocommit(storage).clients.all()
    counted = ", ".join(f"{c.name}: {c.auth_failures.count}" for c in clients)
    engine = make_engine(storage.database.url, schema=storage.database.schema)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT count(*) FROM audit_log"))).scalar_one()
    finally:
        await engine.dispose()
    return f"audit rows {rows} (client.create x2, client.disable, each run's first); {counted}"


def report(label: str, times: dict[str, list[float]], stored: str) -> None:
    print(f"{label}:")
    for name in REFUSALS:
        values = sorted(times[name])
        p90 = values[int(len(values) * 0.9) - 1]
        print(f"  {name:16} median {statistics.median(values):7.1f} us   p90 {p90:7.1f} us")
    if stored:
        print(f"  left: {stored}")


async def run_sqlite(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        storage = SqlStorage(sqlite_url(Path(folder) / "walletcore.db"), migrate=True)
        await storage.start()
        try:
            auth = service(storage)
            times = await measure(auth, rounds)
            report(f"SQLite, {rounds} rounds", times, await left_behind(storage, auth))
        finally:
            await storage.aclose()


async def run_pg(url: str, rounds: int) -> None:
    schema = await create_schema_async(url)
    try:
        await migrate.upgrade_async(url, schema=schema)
        storage = SqlStorage(url, migrate=False, schema=schema)
        await storage.start()
        try:
            auth = service(storage)
            times = await measure(auth, rounds)
            report(f"PostgreSQL, {rounds} rounds", times, await left_behind(storage, auth))
        finally:
            await storage.aclose()
    finally:
        await drop_schema_async(url, schema)


def measure_http(server: Server, rounds: int) -> dict[str, list[float]]:
    """The three refusals over HTTP against `server` (clients A and B; B disabled)."""
    known, disabled = server.clients["A"], server.clients["B"]
    server.cli_batch([["clients", "disable", disabled.client_id]])
    wrong_key = "wck_" + secrets.token_urlsafe(32)
    credentials = {
        "unknown client": lambda: (new_id(), wrong_key),
        "wrong key": lambda: (known.client_id, wrong_key),
        "disabled client": lambda: (disabled.client_id, disabled.api_key),
    }
    times: dict[str, list[float]] = {name: [] for name in REFUSALS}
    with httpx.Client(base_url=server.base, timeout=30) as http:  # one kept-alive connection
        for n in range(rounds + 50):
            for name in REFUSALS if n % 2 else reversed(REFUSALS):
                client_id, key = credentials[name]()
                headers = {"x-client-id": client_id, "x-api-key": key}
                started = time.perf_counter()
                answer = http.post("/auth", headers=headers)
                elapsed = (time.perf_counter() - started) * 1e6
                assert answer.status_code == 401, answer.text
                if n >= 50:
                    times[name].append(elapsed)
    return times


def run_http(database: str, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        env: dict[str, str] = {}
        name = None
        if database == "pg":
            url, name = create_database("wcauth")
            env = {"WALLETCORE_REPO": "sql", "WALLETCORE_DATABASE_URL": url}
        server = Server(database, Path(folder), workers=1, extra_env=env)
        try:
            provision(server, postgres=database == "pg", full=False, prime=False)
            times = measure_http(server, rounds)
            label = "SQLite" if database == "sqlite" else "PostgreSQL"
            report(f"HTTP, walletcore serve on {label}, {rounds} rounds", times, "")
        finally:
            server.stop()
            if name is not None:
                drop_database(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--db", default="sqlite,pg")
    parser.add_argument("--pg-url", default=pg_test_url())
    parser.add_argument("--http", action="store_true", help="a real server, over HTTP")
    arguments = parser.parse_args()
    databases = arguments.db.split(",")
    if arguments.http:
        for database in databases:
            run_http(database, arguments.rounds)
        return
    if "sqlite" in databases:
        asyncio.run(run_sqlite(arguments.rounds))
    if "pg" in databases:
        asyncio.run(run_pg(arguments.pg_url, arguments.rounds))


if __name__ == "__main__":
    main()
