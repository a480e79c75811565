#!/usr/bin/env python3
"""The write path in process: quote + approve through the services against raw asyncpg.

    .venv/bin/python bench/write_path_bench.py [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]
        [--seconds 8] [--rounds 2] [--concurrency 32] [--pairs 20] [--json] [--service-only]
        [--loop uvloop|asyncio]

On a throwaway PostgreSQL database (`walletcore_wpbench_<pid>_<hex>`, migrated, dropped at
the end), in one process and one event loop: uvloop, the loop `walletcore serve` runs on
(granian's when installed), or plain asyncio with `--loop asyncio` (uvloop takes more off
raw's and the hand-written statements' CPU than off the service's: the ratios are lower on
it, docs/performance.md):
- service: the container as `walletcore serve` builds it (`create_container`, repo `sql`
  on that database, sandbox prices and venue; storage, prices and venue started), one api
  client, 32 users; `--concurrency` tasks each loop `trading.sell` (0.01 BTC) then
  `trading.approve` of that trade (sandbox venue: completed at once) for `--seconds`;
- raw: an asyncpg pool of `--concurrency` connections, each task holding one and looping
  one INSERT of a trade-like row (all 24 columns of `trades`, same values) and one
  `UPDATE trades SET status='executing', ... WHERE trade_id=$1 AND status='open'`;
- same: the service's guarantees written by hand on that raw pool: the three statements a
  sell + approve sends (the quote with its audit entry; open -> executing with its entry,
  committed before the venue is called; the settlement with its entry), each one
  autocommitted statement, with no framework around them. Its rate against raw is what
  the guarantees cost the storage, whoever writes the Python: it bounds the service's ratio;
- group commit (`walletcore_sql.direct.pg_group.PgGroupCommit`, docs/storage.md): how many
  batches the service's quotes and moves went in, and how many writes they held, over the
  run;
- the three take turns for `--rounds` rounds (each round starts with the next one, so
  drift hits each); rates are pairs (iterations) per second, the ratios service/raw and
  same/raw per round, medians printed;
- CPU per pair of each workload: this process's (`time.process_time`) and the PostgreSQL
  server's (its processes' user + system time, psutil), over each timed run; with two
  cores shared by the client and the server, the sum bounds the rate;
- the budget the goal leaves the service (quote + approve at >= 0.5 of raw: docs/
  performance.md, "Goals"): with the client and the server on one machine's cores, busy
  about as much in each workload, a pair at half raw's rate may cost twice raw's CPU
  (client + server); less what PostgreSQL spends on the service's own statements, that
  is what this process may spend per pair, printed beside what it spends and what the
  hand-written statements spend with no framework at all;
- round trips: `--pairs` sequential sell+approve after the timed rounds, counted as
  (a) client->server writes on sockets to the PostgreSQL port (each message batch the
  driver flushes and then waits on: statements, BEGIN/COMMIT, pre-ping, connection start-up
  incl. the SSL request), by wrapping asyncio's socket transport `write`; and
  (b) SQLAlchemy events: `before_cursor_execute` (statements), `begin`/`commit`/`rollback`
  (transactions). The same socket count for one raw iteration is printed too. The
  stores' units go straight to asyncpg on its own pool (`walletcore_sql.direct`): (a)
  counts their statements, (b) shows what still goes through SQLAlchemy (none, on this
  path). Counted on plain asyncio (uvloop's transport cannot be wrapped): with `--loop
  uvloop`, by a counting pass of its own first (another throwaway database);
- Python calls per pair: the function calls cProfile counts (calls into C included) over
  the same sequential pairs, for the service, the hand-written statements and raw. The
  count hardly depends on the machine (it moves by a few per cent with how many loop
  turns a pair takes): a change to the write path can be compared without a second, noisy
  timed run. `--calls-top N` prints the N functions the service calls most, per pair.

The timed rounds run with the collector a server worker has (`walletcore_litestar.server.
tune_collector`: what was built before frozen out of its passes, the youngest generation
collected after `WALLETCORE_GC_YOUNG_THRESHOLD` allocations), shared by the three
workloads; `--python-gc` keeps Python's own settings (to measure one against the other:
docs/performance.md, "The workers' collector").

`--service-only` times the service alone (no ratios): a run to attach a profiler to.

Not a test: figures depend on the machine. With --json the last stdout line is the result
(human lines go to stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from http_bench import (
    DEFAULT_PG_URL,
    pg_create_database,
    pg_drop_database,
    pg_urls,
    workers_collector,
)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- counting round trips ------------------------------------------------------------------
class Counters:
    def __init__(self, pg_port: int) -> None:
        self.pg_port = pg_port
        self.writes = 0
        self.statements = 0
        self.begins = 0
        self.commits = 0
        self.rollbacks = 0
        self.patched = False

    def reset(self) -> None:
        for name in ("writes", "statements", "begins", "commits", "rollbacks"):
            setattr(self, name, 0)

    def snapshot(self) -> dict[str, int]:
        return {
            name: getattr(self, name)
            for name in ("writes", "statements", "begins", "commits", "rollbacks")
        }

    def install(self) -> None:
        from asyncio import selector_events

        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        transport = selector_events._SelectorSocketTransport  # type: ignore[attr-defined]
        original_write = transport.write
        counters = self

        def write(self: Any, data: Any) -> None:
            peer = self._extra.get("peername")
            if peer and peer[1] == counters.pg_port:
                counters.writes += 1
            original_write(self, data)

        original_writelines = transport.writelines

        def writelines(self: Any, data: Any) -> None:
            peer = self._extra.get("peername")
            if peer and peer[1] == counters.pg_port:
                counters.writes += 1
            original_writelines(self, data)

        transport.write = write
        transport.writelines = writelines
        self.patched = True

        def bump(name: str) -> Any:
            def listener(*_: Any, **__: Any) -> None:
                setattr(self, name, getattr(self, name) + 1)

            return listener

        event.listen(Engine, "before_cursor_execute", bump("statements"))
        event.listen(Engine, "begin", bump("begins"))
        event.listen(Engine, "commit", bump("commits"))
        event.listen(Engine, "rollback", bump("rollbacks"))


# -- CPU spent --------------------------------------------------------------------------------
def postgres_cpu() -> float:
    """CPU seconds (user + system) spent so far by the processes named `postgres` on this
    machine (the server's backends and its background processes), read by psutil."""
    import psutil

    total = 0.0
    for process in psutil.process_iter(["name", "cpu_times"]):
        times = process.info["cpu_times"]
        if process.info["name"] == "postgres" and times is not None:
            total += times.user + times.system
    return total


class Spent:
    """Wall time, this process's CPU and the PostgreSQL server's CPU over a span."""

    def __init__(self) -> None:
        self.wall, self.own, self.server = time.perf_counter(), time.process_time(), postgres_cpu()

    def per(self, iterations: float) -> dict[str, float]:
        """Microseconds per iteration of each, since this was made."""
        scale = 1e6 / max(iterations, 1)
        return {
            "wall_us": (time.perf_counter() - self.wall) * scale,
            "client_cpu_us": (time.process_time() - self.own) * scale,
            "server_cpu_us": (postgres_cpu() - self.server) * scale,
        }


# -- the two workloads ---------------------------------------------------------------------
async def run_for(
    seconds: float, concurrency: int, step: Any, spent: dict[str, float] | None = None
) -> float:
    """Iterations per second of `step(task_index)` run by `concurrency` tasks (and, into
    `spent`, the microseconds of client and server CPU per iteration)."""
    span = Spent()
    deadline = time.perf_counter() + seconds
    done = 0
    errors: list[BaseException] = []

    async def task(index: int) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            try:
                await step(index)
            except Exception as exc:
                errors.append(exc)
                if len(errors) > 100:
                    raise
                continue
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(task(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - started
    if errors:
        say(f"  {len(errors)} errors, first: {errors[0]!r}")
    if spent is not None:
        spent.update(span.per(done))
    return done / elapsed


#: The write path's goal (docs/performance.md, "Goals"): quote + approve at this fraction
#: of raw's rate, or more.
GOAL = 0.5


def client_budget(cpu: dict[str, dict[str, float]], goal: float) -> int:
    """Microseconds of this process's CPU a service pair may cost at `goal` of raw's rate:
    client and server share the machine's cores, each workload keeping them about as busy
    (the rates are CPU-bound), so a pair at `goal` of raw's rate may cost raw's CPU
    (client + server) over `goal`, of which PostgreSQL takes what the service's own
    statements cost it. Negative: the server's share alone is over the goal's."""
    raw = cpu["raw"]["client_cpu_us"] + cpu["raw"]["server_cpu_us"]
    return round(raw / goal - cpu["service"]["server_cpu_us"])


def group_commit_counts(units: Any) -> dict[str, int]:
    """What the service's group commits did (`walletcore_sql.direct.pg_group.PgGroupCommit`):
    batches of two writes or more sent, the writes they held, and those the server refused."""
    groups = list(getattr(units, "_groups", {}).values())
    return {
        name: sum(getattr(group, name) for group in groups)
        for name in ("batches", "batched", "refused")
    }


def trade_like(trade_id: str, client_id: str, user_id: str, now: datetime) -> tuple[Any, ...]:
    """A row as `/sell` stores it, in `tables.trades` column order."""
    crypto, price = Decimal("0.01"), Decimal("60123.456789")
    return (
        trade_id,
        client_id,
        user_id,
        "sell",
        "open",
        1,
        "BTC",
        "USD",
        "crypto",
        crypto,
        crypto * price,
        price,
        now + timedelta(seconds=60),
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        now,
        None,
        None,
    )


async def count_pairs(
    counters: Counters, pairs: int, step: Any, top: int = 0
) -> tuple[dict[str, float], int]:
    """`pairs` sequential runs of `step(0)`: the counters (socket writes to PostgreSQL,
    SQLAlchemy's events) and the Python function calls (cProfile's count, calls into C
    included) per run. Calls are what the interpreter does per pair whatever the machine:
    a figure that needs no second run to compare. With `top`, the functions called most
    are printed, with their calls per pair (where the calls go)."""
    import cProfile
    import pstats

    counters.reset()
    profile = cProfile.Profile()
    profile.enable()
    try:
        for _ in range(pairs):
            await step(0)
    finally:
        profile.disable()
    stats = pstats.Stats(profile)
    calls = stats.total_calls  # type: ignore[attr-defined]
    if top:
        table = stats.stats  # type: ignore[attr-defined]
        ranked = sorted(table.items(), key=lambda item: item[1][1], reverse=True)
        for (file, line, function), (_, ncalls, *_) in ranked[:top]:
            where = f"{Path(file).name}:{line}" if line else file
            say(f"    {ncalls / pairs:6.1f}  {function}  ({where})")
    return {k: v / pairs for k, v in counters.snapshot().items()}, round(calls / pairs)


async def main(
    args: argparse.Namespace, *, timed: bool = True, counted: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The timed rounds (unless not `timed`) and the counting pass (unless `counted` by
    an earlier pass on plain asyncio: its socket writes can be counted, uvloop's not)."""
    import asyncpg
    from sqlalchemy.engine import make_url

    from walletcore.container import create_container
    from walletcore.domain.clients import User
    from walletcore.domain.ids import new_id
    from walletcore.domain.wallet import WalletOwner, WalletRecord
    from walletcore.ports import Lifecycle
    from walletcore.services.context import Caller
    from walletcore.settings import Settings
    from walletcore.testing import CONTRACT_CATALOG
    from walletcore_sql import migrate
    from walletcore_sql.tables import trades

    name = await pg_create_database(args.pg_url, "walletcore_wpbench")
    if name is None:
        raise SystemExit(f"PostgreSQL unreachable at {args.pg_url}")
    url, dsn = pg_urls(args.pg_url, name)
    counters = Counters(make_url(url).port or 5432)
    counters.install()
    container = None
    pool = None
    home = tempfile.TemporaryDirectory(prefix="walletcore-wpbench-")
    try:
        await migrate.upgrade_async(url)
        settings = Settings(
            home=Path(home.name), repo="sql", database_url=url, prices="sandbox", venue="sandbox"
        )
        # one process measured alone: its background jobs in-process (no `walletcore
        # worker` beside it), so its prices are refreshed by itself (docs/jobs.md)
        os.environ.setdefault("WALLETCORE_JOBS", "inprocess")
        container = create_container(settings)
        for provider in (container.storage, container.prices, container.venue):
            adapter = provider()
            if isinstance(adapter, Lifecycle):
                await adapter.start()
        storage, trading = container.storage(), container.trading()
        issued = await container.auth().create_client("bench", assets=[1])
        client = issued.client
        now = datetime.now(UTC)
        user_ids = [new_id() for _ in range(args.concurrency)]
        btc = CONTRACT_CATALOG.asset_by_id(1)
        ledger = container.gateways()[btc.chain]  # the sandbox chain: sells are backed
        for uid in user_ids:
            address = f"bench-{uid}"
            async with storage.write() as unit:
                await unit.wallets.add_user(
                    User(user_id=uid, client_id=client.client_id, created_at=now),
                    WalletRecord(
                        client_id=client.client_id,
                        owner=WalletOwner.USER,
                        user_id=uid,
                        sealed=b"",
                        addresses={btc.chain: address},
                        created_at=now,
                    ),
                )
            await ledger.fund(address, btc, 10**20)  # type: ignore[attr-defined]

        async def service_step(index: int) -> None:
            uid = user_ids[index % len(user_ids)]
            trade = await trading.sell(
                Caller(client, new_id()), user_id=uid, asset_id=1, crypto_amount="0.01"
            )
            done = await trading.approve(
                Caller(client, new_id()), user_id=uid, trade_id=trade.trade_id
            )
            if done.status.value not in ("completed", "approved", "executing"):
                raise RuntimeError(f"approve ended {done.status.value}")

        columns = [c.name for c in trades.columns]
        insert_sql = (
            f"INSERT INTO trades ({', '.join(columns)}) "
            f"VALUES ({', '.join(f'${i + 1}' for i in range(len(columns)))})"
        )
        update_sql = (
            "UPDATE trades SET status = 'executing', approved_at = $2, "
            "approved_crypto_amount = $3, approved_fiat_amount = $4, approved_price = $5 "
            "WHERE trade_id = $1 AND status = 'open'"
        )
        pool = await asyncpg.create_pool(dsn, min_size=args.concurrency, max_size=args.concurrency)
        held: dict[int, Any] = {}

        async def connection(index: int) -> Any:
            """The pool's connection task `index` holds for the whole run."""
            if index not in held:
                held[index] = await pool.acquire()
            return held[index]

        async def raw_step(index: int) -> None:
            conn = await connection(index)
            at = datetime.now(UTC)
            tid = new_id()
            await conn.execute(
                insert_sql, *trade_like(tid, client.client_id, user_ids[index % len(user_ids)], at)
            )
            price = Decimal("60123.456789")
            status = await conn.execute(
                update_sql, tid, at, Decimal("0.01"), Decimal("0.01") * price, price
            )
            if status != "UPDATE 1":
                raise RuntimeError(status)

        # The service's guarantees written by hand: the same three statements a sell +
        # approve sends (the quote with its entry; open -> executing with its entry,
        # committed before the venue is called; the settlement with its entry), each one
        # autocommitted statement, with no framework around them. What the storage must do
        # whoever writes the Python: its rate against `raw` bounds the service's ratio.
        audit_cols = "at, client_id, action, request_id, outcome, user_id, target, detail"
        quote_sql = (
            f"WITH t AS (INSERT INTO trades ({', '.join(columns)}) "
            f"VALUES ({', '.join(f'${i + 9}' for i in range(len(columns)))})) "
            f"INSERT INTO audit_log ({audit_cols}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        )
        move_sql = (
            "WITH swapped AS (UPDATE trades SET status = $9, approved_crypto_amount = $10, "
            "approved_fiat_amount = $11, approved_price = $12, executed_crypto_amount = $13, "
            "executed_fiat_amount = $14, executed_price = $15, reference = $16, "
            "failure_reason = $17, approved_at = $18, completed_at = $19 "
            "WHERE trade_id = $20 AND status = $21 RETURNING trade_id) "
            f"INSERT INTO audit_log ({audit_cols}) "
            "SELECT $1, $2, $3, $4, $5, $6, $7, $8 FROM swapped"
        )

        async def same_step(index: int) -> None:
            conn = await connection(index)
            uid, cid = user_ids[index % len(user_ids)], client.client_id
            at = datetime.now(UTC)
            tid = new_id()
            await conn.execute(
                quote_sql,
                at,
                cid,
                "trade.sell",
                new_id(),
                "ok",
                uid,
                tid,
                None,
                *trade_like(tid, cid, uid, at),
            )
            price = Decimal("60123.456789")
            crypto, fiat = Decimal("0.01"), Decimal("0.01") * price
            for action, expected, status, executed, done_at in (
                ("trade.approve", "open", "executing", None, None),
                ("trade.settle", "executing", "completed", crypto, at),
            ):
                moved = await conn.execute(
                    move_sql,
                    at,
                    cid,
                    action,
                    new_id(),
                    "ok",
                    uid,
                    tid,
                    f"{expected} -> {status}",
                    status,
                    crypto,
                    fiat,
                    price,
                    executed,
                    executed and fiat,
                    executed and price,
                    None,
                    None,
                    at,
                    done_at,
                    tid,
                    expected,
                )
                if moved != "INSERT 0 1":
                    raise RuntimeError(moved)

        service_rates, raw_rates, same_rates, ratios, same_ratios = [], [], [], [], []
        cpu: dict[str, list[dict[str, float]]] = {"service": [], "raw": [], "same": []}
        if timed:  # the counting pass (before a uvloop run) times nothing
            say(f"database {name}; concurrency {args.concurrency}; warm-up ...")
            await run_for(1.0, args.concurrency, service_step)
            await run_for(1.0, args.concurrency, raw_step)
            await run_for(1.0, args.concurrency, same_step)
            if not args.python_gc:  # all three workloads share it
                workers_collector()
            say(
                f"collector: thresholds {gc.get_threshold()}, {gc.get_freeze_count()} objects "
                f"frozen ({'Python' if args.python_gc else 'a server worker'}'s settings)"
            )
            steps = {"service": service_step, "raw": raw_step, "same": same_step}
            for round_no in range(args.rounds):
                order = ["service", "raw", "same"]
                order = order[round_no % 3 :] + order[: round_no % 3]  # drift hits each in turn
                rates = {}
                for which in order:
                    spent: dict[str, float] = {}
                    if args.service_only and which != "service":  # a profile of the service
                        rates[which], spent = 1.0, {"client_cpu_us": 0.0, "server_cpu_us": 0.0}
                    else:
                        rates[which] = await run_for(
                            args.seconds, args.concurrency, steps[which], spent
                        )
                    cpu[which].append(spent)
                service_rates.append(rates["service"])
                raw_rates.append(rates["raw"])
                same_rates.append(rates["same"])
                ratios.append(rates["service"] / rates["raw"])
                same_ratios.append(rates["same"] / rates["raw"])
                if args.service_only:
                    say(
                        f"  round {round_no + 1}: service {rates['service']:.0f} pairs/s, "
                        f"{cpu['service'][-1]['client_cpu_us']:.0f} us of this process's CPU "
                        "per pair"
                    )
                    continue
                say(
                    f"  round {round_no + 1}: service {rates['service']:.0f} pairs/s, raw "
                    f"{rates['raw']:.0f} /s, ratio {ratios[-1]:.3f}; the same statements by hand "
                    f"{rates['same']:.0f} /s, ratio {same_ratios[-1]:.3f}"
                )
                for which in ("service", "raw", "same"):
                    figures = cpu[which][-1]
                    say(
                        f"    {which}: per pair {figures['client_cpu_us']:.0f} us of this "
                        f"process's CPU, {figures['server_cpu_us']:.0f} us of PostgreSQL's"
                    )
            for conn in held.values():
                await pool.release(conn)
            held.clear()
            if args.service_only:
                return {"service_rate": statistics.median(service_rates)}

        # Round trips and Python calls of one sell + approve, sequential, pools warm.
        if counted is None:
            await service_step(0)  # warm: statements prepared, the wallet's address known
            await same_step(0)
            await raw_step(0)
            if args.calls_top:
                say(f"the service's most called functions, calls per pair (top {args.calls_top}):")
            per_pair, service_calls = await count_pairs(
                counters, args.pairs, service_step, args.calls_top
            )
            raw_per, raw_calls = await count_pairs(counters, args.pairs, raw_step)
            _, same_calls = await count_pairs(counters, args.pairs, same_step)
            counted = {
                "per_pair": per_pair,
                "raw_per": raw_per,
                "calls": {"service": service_calls, "raw": raw_calls, "same": same_calls},
            }
            for conn in held.values():
                await pool.release(conn)
            held.clear()
            if not timed:
                return counted
        per_pair, raw_per = counted["per_pair"], counted["raw_per"]
        bound = getattr(storage.database, "_bound", None)  # the units' pool, for the record
        engine_notes = [repr(getattr(bound, "units", None))]
        grouped = group_commit_counts(getattr(bound, "units", None))
        result = {
            "database": name,
            "loop": args.loop,
            "concurrency": args.concurrency,
            "seconds": args.seconds,
            "rounds": args.rounds,
            "service_rate": statistics.median(service_rates),
            "raw_rate": statistics.median(raw_rates),
            "ratio": statistics.median(ratios),
            "ratios": [round(r, 3) for r in ratios],
            "same_rate": statistics.median(same_rates),
            "same_ratio": statistics.median(same_ratios),
            "service_vs_same": statistics.median(
                s / h for s, h in zip(service_rates, same_rates, strict=True)
            ),
            "round_trips_per_pair": round(per_pair["writes"], 1) if counters.patched else None,
            "raw_round_trips": round(raw_per["writes"], 1) if counters.patched else None,
            "per_pair": per_pair,
            "calls_per_pair": counted["calls"],
            "cpu_us_per_pair": {
                which: {
                    key: round(statistics.median(r[key] for r in rounds))
                    for key in ("client_cpu_us", "server_cpu_us")
                }
                for which, rounds in cpu.items()
            },
            "engines": engine_notes,
        }
        result["client_budget_us_at_goal"] = client_budget(result["cpu_us_per_pair"], GOAL)
        say(
            f"quote+approve {result['service_rate']:.0f} pairs/s vs raw insert+update "
            f"{result['raw_rate']:.0f} /s: ratio {result['ratio']:.3f} (per round {result['ratios']})"
        )
        say(
            f"per sell+approve (sequential, {args.pairs} pairs): {per_pair['writes']:.1f} round "
            f"trips (socket writes to PG); through SQLAlchemy: {per_pair['statements']:.1f} "
            "statements, "
            f"{per_pair['begins']:.1f} BEGIN / {per_pair['commits']:.1f} COMMIT / "
            f"{per_pair['rollbacks']:.1f} ROLLBACK; raw iteration: {raw_per['writes']:.1f}"
        )
        calls = counted["calls"]
        say(
            f"Python calls per pair (sequential, cProfile's count): service {calls['service']}, "
            f"the same statements by hand {calls['same']}, raw {calls['raw']}"
        )
        say(
            f"the same statements by hand {result['same_rate']:.0f} /s: ratio to raw "
            f"{result['same_ratio']:.3f} (what the guarantees cost the storage); the service "
            f"reaches {result['service_vs_same']:.3f} of them"
        )
        for which, figures in result["cpu_us_per_pair"].items():
            say(
                f"CPU per pair, {which}: {figures['client_cpu_us']} us in this process, "
                f"{figures['server_cpu_us']} us in PostgreSQL (medians over rounds)"
            )
        spent_now = result["cpu_us_per_pair"]
        say(
            f"at {GOAL} of raw, this process may spend about "
            f"{result['client_budget_us_at_goal']} us of CPU per pair (twice raw's client + "
            "server CPU, less PostgreSQL's for the service's statements); it spends "
            f"{spent_now['service']['client_cpu_us']} us, the same statements by hand "
            f"{spent_now['same']['client_cpu_us']} us"
        )
        for note in engine_notes:
            say(f"  units' pool: {note}")
        result["group_commit"] = grouped
        say(
            f"  group commit (the whole run, warm-up and counting passes included): "
            f"{grouped['batches']} batches holding {grouped['batched']} writes "
            f"({grouped['batched'] / max(grouped['batches'], 1):.1f} a batch), "
            f"{grouped['refused']} refused and sent again write by write"
        )
        return result
    finally:
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), 10)
            except (TimeoutError, Exception):  # noqa: BLE001
                pool.terminate()
        if container is not None:
            for provider in (container.venue, container.prices, container.storage):
                with contextlib.suppress(Exception):
                    adapter = provider()
                    if isinstance(adapter, Lifecycle):
                        await adapter.aclose()
        await pg_drop_database(args.pg_url, name)
        home.cleanup()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=20, help="sequential pairs counted")
    parser.add_argument("--json", action="store_true", help="last stdout line: the result")
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="the event loop of the timed rounds (the server's: uvloop)",
    )
    parser.add_argument(
        "--calls-top",
        type=int,
        default=0,
        metavar="N",
        help="print the N functions the service calls most per pair (cProfile)",
    )
    parser.add_argument(
        "--python-gc",
        action="store_true",
        help="time with Python's own collector settings, not a server worker's "
        "(`walletcore_litestar.server.tune_collector`)",
    )
    parser.add_argument(
        "--service-only",
        action="store_true",
        help="time the service alone (to profile it): no ratios",
    )
    return parser.parse_args()


def run(arguments: argparse.Namespace) -> dict[str, Any]:
    """The bench on `--loop`. Round trips are counted on plain asyncio (its socket
    transport can be wrapped, uvloop's cannot): on uvloop, by a counting pass first, on a
    database of its own."""
    if arguments.loop == "asyncio":
        with asyncio.Runner() as runner:
            return runner.run(main(arguments))
    import uvloop

    counted = None
    if not arguments.service_only:
        with asyncio.Runner() as runner:
            counted = runner.run(main(arguments, timed=False))
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main(arguments, counted=counted))


if __name__ == "__main__":
    arguments = parse_args()
    with tempfile.TemporaryDirectory(prefix="walletcore-wpbench-bcl-") as bcl:
        os.environ.setdefault("BCL_DATA_DIR", bcl)
        outcome = run(arguments)
    if arguments.json:
        print(json.dumps(outcome))
