#!/usr/bin/env python3
"""`/trades` latency of the SQL storage: an empty database against 1,000,000 trades.

    python bench/trades_bench.py                                   # PostgreSQL (local `test` db)
    python bench/trades_bench.py --url postgresql+asyncpg://u@h/db --trades 1000000 --users 10000
    python bench/trades_bench.py --url sqlite+aiosqlite:////tmp/bench.db --trades 200000

Two databases side by side, each a schema of its own (PostgreSQL; dropped afterwards unless
--keep) or a fresh file (SQLite), with the same api client and users: one with no trades,
one bulk-loaded (COPY on PostgreSQL, executemany on SQLite). `trades.page` (and
`trades.lapsed`, which `/trades` reads first), each in a read unit of `SqlStorage`, is
called one call at a time for random users, alternating between the two databases so that load from other processes on the
machine hits both alike, and the program prints p50/p99 of each and the loaded/empty ratio
(target: within 2x). A program printing figures, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import insert, text

from walletcore.domain.clients import ApiClient
from walletcore.domain.ids import new_id
from walletcore.domain.trade import Side, TradeStatus
from walletcore_sql import migrate
from walletcore_sql.engine import is_sqlite
from walletcore_sql.storage import SqlStorage
from walletcore_sql.tables import trades, users
from walletcore_sql.testing import create_schema_async, drop_schema_async, pg_test_url

NOW = datetime(2026, 6, 1, tzinfo=UTC)
STATUSES = [
    (TradeStatus.COMPLETED, 60),
    (TradeStatus.EXPIRED, 20),
    (TradeStatus.CANCELLED, 8),
    (TradeStatus.FAILED, 4),
    (TradeStatus.OPEN, 4),
    (TradeStatus.APPROVED, 2),
    (TradeStatus.EXECUTING, 2),
]
QUERIES: list[tuple[str, Side | None, TradeStatus | None]] = [
    ("all", None, None),
    ("side=sell", Side.SELL, None),
    ("status=completed", None, TradeStatus.COMPLETED),
    ("side=buy,status=failed", Side.BUY, TradeStatus.FAILED),
]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=pg_test_url(), help="database URL (default: %(default)s)")
    parser.add_argument("--trades", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=2_000, help="calls per measured query")
    parser.add_argument("--page", type=int, default=10, help="page size (limit)")
    parser.add_argument("--batch", type=int, default=50_000, help="rows per COPY/executemany")
    parser.add_argument("--keep", action="store_true", help="keep the schema / file afterwards")
    return parser.parse_args()


# -- data -------------------------------------------------------------------------------------
def trade_rows(
    client_id: str, user_ids: list[str], count: int, seed: int = 7
) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    statuses, weights = zip(*STATUSES)
    year = 365 * 24 * 3600
    for _ in range(count):
        created = NOW - timedelta(seconds=rng.randrange(year), microseconds=rng.randrange(10**6))
        status: TradeStatus = rng.choices(statuses, weights)[0]
        crypto = Decimal(rng.randrange(1, 10**9)).scaleb(-8)
        price = Decimal(rng.randrange(10**6, 10**8)).scaleb(-2)
        settled = status in (TradeStatus.COMPLETED, TradeStatus.FAILED)
        yield {
            "trade_id": new_id(),
            "client_id": client_id,
            "user_id": rng.choice(user_ids),
            "side": rng.choice((Side.BUY, Side.SELL)).value,
            "status": status.value,
            "asset_id": 1,
            "symbol": "BTC",
            "fiat": "USD",
            "fixed_leg": "crypto",
            "quote_crypto_amount": crypto,
            "quote_fiat_amount": crypto * price,
            "quote_price": price,
            # open quotes still live, so expire_lapsed has nothing to do but look
            "quote_expires_at": NOW + timedelta(days=1)
            if status is TradeStatus.OPEN
            else created + timedelta(seconds=60),
            "approved_crypto_amount": crypto if settled else None,
            "approved_fiat_amount": crypto * price if settled else None,
            "approved_price": price if settled else None,
            "executed_crypto_amount": crypto if status is TradeStatus.COMPLETED else None,
            "executed_fiat_amount": crypto * price if status is TradeStatus.COMPLETED else None,
            "executed_price": price if status is TradeStatus.COMPLETED else None,
            "reference": "REF-1" if status is TradeStatus.COMPLETED else None,
            "failure_reason": "rejected" if status is TradeStatus.FAILED else None,
            "created_at": created,
            "approved_at": created + timedelta(seconds=5) if settled else None,
            "completed_at": created + timedelta(seconds=6) if settled else None,
        }


def batches(rows: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


async def seed_users(storage: SqlStorage, client_id: str, ids: list[str]) -> None:
    async with storage.database.transaction(write=True) as conn:
        await conn.execute(
            insert(users), [{"client_id": client_id, "user_id": u, "created_at": NOW} for u in ids]
        )


async def load_trades(
    storage: SqlStorage, rows: Iterator[dict[str, Any]], batch: int, schema: str | None
) -> None:
    columns = [c.name for c in trades.columns]
    for chunk in batches(rows, batch):
        async with storage.database.transaction(write=True) as conn:
            if storage.database.is_sqlite:
                await conn.execute(insert(trades), chunk)
            else:
                raw = await conn.get_raw_connection()
                driver: Any = raw.driver_connection  # asyncpg: COPY, the fast path
                await driver.copy_records_to_table(
                    "trades",
                    records=[tuple(r[c] for c in columns) for r in chunk],
                    columns=columns,
                    schema_name=schema,
                )
        print(".", end="", flush=True)
    print()
    async with storage.database.transaction(write=True) as conn:
        await conn.execute(text("ANALYZE" if storage.database.is_sqlite else "ANALYZE trades"))


# -- measuring --------------------------------------------------------------------------------
async def measure(
    empty: SqlStorage,
    full: SqlStorage,
    client_id: str,
    user_ids: list[str],
    args: argparse.Namespace,
) -> dict[str, tuple[list[float], list[float]]]:
    """name -> (latencies on the empty database, on the loaded one), in ms, interleaved."""
    rng = random.Random(11)
    calls: list[tuple[str, Callable[[SqlStorage, str], Awaitable[object]]]] = []
    for name, side, status in QUERIES:

        async def listing(
            storage: SqlStorage,
            user: str,
            side: Side | None = side,
            status: TradeStatus | None = status,
        ) -> object:
            async with storage.read() as unit:
                return await unit.trades.page(
                    client_id, user, side=side, status=status, limit=args.page
                )

        calls.append((f"trades.page {name}", listing))

    async def lapsed(storage: SqlStorage, user: str) -> object:
        async with storage.read() as unit:
            return await unit.trades.lapsed(client_id, user, NOW)

    calls.append(("trades.lapsed", lapsed))

    results: dict[str, tuple[list[float], list[float]]] = {}
    for name, call in calls:
        for _ in range(min(200, args.samples)):  # warm pools, caches, prepared statements
            await call(empty, rng.choice(user_ids))
            await call(full, rng.choice(user_ids))
        timings: tuple[list[float], list[float]] = ([], [])
        for _ in range(args.samples):
            user = rng.choice(user_ids)
            order = [0, 1] if rng.random() < 0.5 else [1, 0]
            for which in order:
                storage = (empty, full)[which]
                start = time.perf_counter()
                await call(storage, user)
                timings[which].append((time.perf_counter() - start) * 1000)
        results[name] = timings
    return results


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


# -- main ---------------------------------------------------------------------------------------
class Bench:
    """The two databases: `empty` (no trades) and `full`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite = is_sqlite(url)
        self.schemas: list[str] = []
        self.files: list[Path] = []

    async def database(self, label: str) -> tuple[SqlStorage, str | None]:
        if self.sqlite:
            path = Path(self.url.split(":///", 1)[1])
            path = path.with_name(f"{path.stem}-{label}{path.suffix or '.db'}")
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            self.files.append(path)
            url, schema = f"sqlite+aiosqlite:///{path}", None
        else:
            url, schema = self.url, await create_schema_async(self.url)
            self.schemas.append(schema)
        print(f"{label:5} database: {url}{' schema ' + schema if schema else ''}")
        await migrate.upgrade_async(url, schema=schema)
        return SqlStorage(url, migrate=False, schema=schema), schema

    async def drop(self) -> None:
        for schema in self.schemas:
            await drop_schema_async(self.url, schema)
        for path in self.files:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)


async def main(args: argparse.Namespace) -> int:
    bench = Bench(args.url)
    storages: list[SqlStorage] = []
    try:
        empty, _ = await bench.database("empty")
        full, full_schema = await bench.database("full")
        storages = [empty, full]
        client = ApiClient(client_id=new_id(), name="bench", key_hash="00" * 32, created_at=NOW)
        user_ids = [new_id() for _ in range(args.users)]
        for storage in storages:
            async with storage.write() as unit:
                await unit.clients.add(client)
            await seed_users(storage, client.client_id, user_ids)

        print(f"loading {args.trades:,} trades for {args.users:,} users ", end="", flush=True)
        started = time.perf_counter()
        await load_trades(
            full, trade_rows(client.client_id, user_ids, args.trades), args.batch, full_schema
        )
        load_seconds = time.perf_counter() - started
        print(f"loaded in {load_seconds:.1f} s ({args.trades / load_seconds:,.0f} rows/s)")

        print(f"measuring, {args.samples:,} calls per query and database, interleaved ...")
        results = await measure(empty, full, client.client_id, user_ids, args)
    finally:
        for storage in storages:
            await storage.aclose()
        if not args.keep:
            await bench.drop()

    print()
    head = f"{'query':34} {'empty p50':>10} {'empty p99':>10} {'full p50':>10} {'full p99':>10}"
    print(f"{head} {'p50 x':>7} {'p99 x':>7}")
    worst = 0.0
    for name, (on_empty, on_full) in results.items():
        e50, e99, f50, f99 = (
            pct(on_empty, 50),
            pct(on_empty, 99),
            pct(on_full, 50),
            pct(on_full, 99),
        )
        worst = max(worst, f50 / e50)
        print(
            f"{name:34} {e50:9.3f}ms {e99:9.3f}ms {f50:9.3f}ms {f99:9.3f}ms "
            f"{f50 / e50:6.2f}x {f99 / e99:6.2f}x"
        )
    verdict = "within" if worst <= 2 else "OUTSIDE"
    print(f"\nworst p50 ratio {worst:.2f}x: {verdict} the 2x target")
    return 0 if worst <= 2 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
