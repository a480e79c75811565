#!/usr/bin/env python3
"""HTTP benchmark: `walletcore serve` (default `sql` repo) as ratios to a bare Litestar app.

    .venv/bin/python bench/http_bench.py                  # full run (1M trades), ~10-15 min
    .venv/bin/python bench/http_bench.py --quick          # a few seconds a figure, 20k trades
    .venv/bin/python bench/http_bench.py --db sqlite --workers 1 --trades 100000 \
        --endpoints prices,trades --seconds 5 --rounds 3
    options: --pg-url postgresql://postgres@127.0.0.1:5432/postgres (where to create the
    throwaway database), --connections 32, --loadgen wrk|python, --log-level info,
    --create-samples 5, --write-seconds 8, --no-write-path

What one run does, all on loopback, bounded in time, cleaned up at the end:
1. For each database (`--db sqlite,pg`): a temp WALLETCORE_HOME (sandbox profile, repo
   `sql`); SQLite is the file under it, PostgreSQL a throwaway database
   `walletcore_bench_<pid>_<hex>` (dropped at the end; those of dead runs are dropped too).
   The schema is migrated (`walletcore_sql.migrate`), an api client made with the CLI
   (`walletcore clients create`), then the trades table is filled with `--trades` rows
   spread over users of ~100 trades each (COPY through asyncpg on PostgreSQL, sqlite3
   executemany on SQLite; values encoded by the `walletcore_sql.tables` column types and
   a sample checked through `walletcore_sql.rows.trade_from`). The fill time is printed.
   The sandbox ledger (the chain the sells are backed by, its own SQLite file under the
   home) gets `--ledger-txs` Bitcoin transfers among 5,000 other addresses, so each
   balance read of a seller searches a ledger of that size rather than of a few rows.
2. For each worker count (`--workers 1,2`), on that database: `walletcore serve` (granian)
   and a bare Litestar app on the same granian set-up (same `run()` of
   `walletcore_litestar.server`, same worker count) with three routes, each answering a
   constant JSON body the size of a trade's: `/bare` (no auth), `/bare-cached` (the
   service's token check: an EdDSA JWT verified with PyJWT, claims and expiry checked, its
   own Ed25519 key, its token signed the way `TokenSigner.sign` does; the signature's
   result remembered per token, as the service's `CachingTokenSigner` does, the expiry
   still checked on every request) and `/bare-auth` (the same check with the signature
   verified on every request).
3. Rounds (`--rounds`) drive each target for `--seconds` with wrk -c32 (or the bundled
   python load generator): bare-cached first, then bare-auth, bare and the service
   endpoints `/prices`, `/config`, `/trade` (a fresh open quote per round, so it never
   lapses under the poll), `/trades` (one user with 100 trades) and `/sell` (a new trade
   row per request, another user), in an order rotated each round. The headline ratio
   (`ratio`) is endpoint req/s over bare-cached req/s of the same round: a bare app whose
   token check does per request what the service's does. The ratio over bare-auth
   (`vs auth`) is printed beside it: that bare app pays an Ed25519 verification per
   request, which the service pays once per token. Medians over rounds are printed. Each
   run also reads the CPU the server under load spent (its processes' user + system time,
   the main process and its workers), printed per request (`cpu us`): at two workers,
   whether a request costs more or the workers wait (for a lock, for the database) shows
   there.
4. `/create` (a few sequential requests) against one Argon2id at the production
   parameters (`walletcore_chains.sealing.PRODUCTION_KDF`), as a multiple: each request
   right after one Argon2id in this process, the median of the pairs' ratios.
5. The write path in process (`bench/write_path_bench.py`, run as a child): quote + approve
   through the services against raw asyncpg INSERT + conditional UPDATE, concurrency 32.
6. A summary table in Markdown: endpoints x (SQLite w1, SQLite w2, PG w1, PG w2), each
   cell `headline / vs auth`, with each row's goal (docs/performance.md, "Goals") and
   whether every headline cell meets it.

A program that prints figures, not a test: figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
BARE_SEED_ENV = "WALLETCORE_BENCH_BARE_SEED"
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
ALL_ENDPOINTS = ("prices", "config", "trade", "trades", "sell")
#: The goals (docs/performance.md, "Goals"): each endpoint's req/s at least this fraction of
#: the bare app's with the token check cached (the headline ratio), printed with the figures.
GOALS = {"prices": 0.6, "config": 0.6, "trade": 0.4, "trades": 0.3, "sell": 0.3}
#: The headline's denominator: the bare app doing the service's token check, cached as the
#: service caches it. Driven first in every round.
BASE = "bare-cached"
#: The write path's goal (as `write_path_bench.GOAL`): quote + approve at this fraction of
#: raw asyncpg's rate, or more.
WRITE_GOAL = 0.5
#: `/create`'s goal: at most this multiple of one Argon2id at the production parameters.
CREATE_GOAL = 1.3
#: A constant body about the size of one trade's envelope (the service's `/trade` answer).
CONST_BODY = {
    "result": {
        "tradeId": "0" * 24,
        "userId": "1" * 24,
        "side": "sell",
        "status": "open",
        "assetId": 1,
        "symbol": "BTC",
        "fiat": "EUR",
        "cryptoAmount": "0.01",
        "fiatAmount": "601.234567",
        "price": "60123.456789",
        "quote": {
            "cryptoAmount": "0.01",
            "fiatAmount": "601.234567",
            "price": "60123.456789",
            "expiresAt": "2026-01-01T12:01:30Z",
        },
        "createdAt": "2026-01-01T12:00:30Z",
        "approvedAt": None,
        "completedAt": None,
        "reference": None,
        "failureReason": None,
    }
}


# -- the bare app (imported by the granian workers: `http_bench:bare_app_factory`) -----------
def bare_app_factory() -> Any:
    import jwt
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from litestar import Litestar, Request, post
    from litestar.exceptions import NotAuthorizedException

    public = Ed25519PrivateKey.from_private_bytes(
        bytes.fromhex(os.environ[BARE_SEED_ENV])
    ).public_key()
    # As walletcore.services.tokens: EdDSA only, these claims required, expiry checked by
    # the caller against its clock (PyJWT's own time checks off).
    options: Any = {
        "verify_signature": True,
        "verify_exp": False,
        "verify_iat": False,
        "verify_nbf": False,
        "require": ["sub", "gen", "iat", "exp", "jti"],
    }

    def refuse() -> None:
        raise NotAuthorizedException("Missing or expired token")

    def bearer(request: Request[Any, Any, Any]) -> str:
        header = None
        for key, value in request.scope["headers"]:  # the raw scope, as the service reads it
            if key == b"authorization":
                header = value.decode("latin-1")
                break
        if not header:
            refuse()
        scheme, _, token = header.strip().partition(" ")  # type: ignore[union-attr]
        token = token.strip()
        if scheme.lower() != "bearer" or not token or len(token) > 1024:
            refuse()
        return token

    def verify(token: str) -> tuple[str, datetime]:
        """PyJWT's EdDSA check and the claims' types (walletcore.services.tokens._claims)."""
        try:
            payload = jwt.decode(token, public, algorithms=["EdDSA"], options=options)
        except jwt.PyJWTError:
            refuse()
        sub, jti, gen, iat, exp = (payload[k] for k in ("sub", "jti", "gen", "iat", "exp"))
        if not (isinstance(sub, str) and isinstance(jti, str)):
            refuse()
        if not all(type(v) is int for v in (gen, iat, exp)):
            refuse()
        return sub, datetime.fromtimestamp(exp, UTC)

    async def check_token(request: Request[Any, Any, Any]) -> None:
        """The service's `require_token` without the database: header, PyJWT, expiry."""
        sub, expires = verify(bearer(request))
        if datetime.now(UTC) >= expires:
            refuse()
        request.scope["state"]["bench_client"] = sub

    verified: dict[str, tuple[str, datetime]] = {}

    async def check_token_cached(request: Request[Any, Any, Any]) -> None:
        """As `check_token`, with the signature check remembered per token string (as the
        service's `CachingTokenSigner` does); expiry still checked on every request."""
        token = bearer(request)
        claims = verified.get(token)
        if claims is None:
            claims = verify(token)
            if len(verified) >= 4096:
                verified.pop(next(iter(verified)))
            verified[token] = claims
        if datetime.now(UTC) >= claims[1]:
            refuse()
        request.scope["state"]["bench_client"] = claims[0]

    @post("/bare", status_code=200)
    async def bare() -> dict[str, Any]:
        return CONST_BODY

    @post("/bare-auth", status_code=200, before_request=check_token)
    async def bare_auth() -> dict[str, Any]:
        return CONST_BODY

    @post("/bare-cached", status_code=200, before_request=check_token_cached)
    async def bare_cached() -> dict[str, Any]:
        return CONST_BODY

    app = Litestar([bare, bare_auth, bare_cached], openapi_config=None, logging_config=None)
    workers_collector()
    return app


def workers_collector() -> None:
    """This process's collector as the service's server workers have it
    (`walletcore_litestar.server.tune_collector`); in an older checkout without it, whose
    workers only froze what they had built, that."""
    import gc

    try:
        from walletcore_litestar.operations import OperationsSettings
        from walletcore_litestar.server import tune_collector
    except ImportError:
        gc.collect()
        gc.freeze()
    else:
        tune_collector(OperationsSettings().gc_young_threshold)


def serve_bare(port: int, workers: int) -> None:
    """The bare app under the service's own granian set-up (`walletcore_litestar.server.run`
    with its app factory swapped), so server options (loop, respawn, ...) stay the same."""
    sys.path.insert(0, str(HERE))
    try:
        from walletcore_litestar import server
    except ImportError:
        server = None  # type: ignore[assignment]
    if server is not None and hasattr(server, "APP_FACTORY") and hasattr(server, "run"):
        server.APP_FACTORY = "http_bench:bare_app_factory"
        server.run(host="127.0.0.1", port=port, workers=workers, log_level="warning")
        return
    from granian import Granian  # pragma: no cover - the service's run() moved
    from granian.constants import Interfaces

    Granian(
        "http_bench:bare_app_factory",
        address="127.0.0.1",
        port=port,
        interface=Interfaces.ASGI,
        workers=workers,
        factory=True,
        log_access=False,
    ).serve()


# -- processes and cleanup -----------------------------------------------------------------
_PROCESSES: list[subprocess.Popen[bytes]] = []
_CLEANUPS: list[Any] = []


def _cleanup() -> None:
    for process in _PROCESSES:
        stop(process)
    while _CLEANUPS:
        with contextlib.suppress(Exception):
            _CLEANUPS.pop()()


def _on_signal(signum: int, _frame: Any) -> None:
    _cleanup()
    sys.exit(128 + signum)


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) spent so far by process `pid` and its live descendants."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def spawn(cmd: list[str], env: dict[str, str], log: Path, cwd: Path | None = None) -> Any:
    process = subprocess.Popen(
        cmd,
        env=env,
        cwd=cwd,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: killed whole at the end
    )
    _PROCESSES.append(process)
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    with contextlib.suppress(ProcessLookupError):  # workers left behind, if any
        os.killpg(process.pid, signal.SIGKILL)
    if process in _PROCESSES:
        _PROCESSES.remove(process)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def post(
    port: int, path: str, headers: dict[str, str], body: Any, timeout: float = 60
) -> tuple[int, Any, int]:
    """(status, decoded JSON, body bytes)."""
    data = json.dumps(body).encode() if body is not None else b""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, headers=headers, method="POST"
    )
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            return response.status, json.loads(raw), len(raw)
    except urllib.error.HTTPError as exc:
        raw = exc.read() or b"null"
        return exc.code, json.loads(raw), len(raw)


def wait_ready(port: int, path: str, process: Any, log: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        try:
            post(port, path, {}, None, timeout=5)
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"server on port {port} did not come up:\n{log.read_text()[-3000:]}")


def ok(status: int, answer: Any, what: str) -> Any:
    if status != 200:
        raise RuntimeError(f"{what}: HTTP {status} {answer}")
    return answer["result"]


# -- load generation -----------------------------------------------------------------------
def run_wrk(
    port: int,
    path: str,
    headers: dict[str, str],
    body: Any,
    seconds: int,
    connections: int,
    workdir: Path,
) -> dict[str, float]:
    script = workdir / "post.lua"
    lines = [
        'wrk.method = "POST"',
        f"wrk.body = {json.dumps(json.dumps(body) if body is not None else '')}",
        'wrk.headers["Content-Type"] = "application/json"',
    ]
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()]
    script.write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{seconds}s",
            "--latency",
            "--timeout",
            "10s",
            "-s",
            str(script),
            f"http://127.0.0.1:{port}{path}",
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {
        "rps": rps,
        "p50": _wrk_ms(re.search(r"\s50%\s+([\d.]+\w+)", out).group(1)),  # type: ignore[union-attr]
        "p99": _wrk_ms(re.search(r"\s99%\s+([\d.]+\w+)", out).group(1)),  # type: ignore[union-attr]
        "bad": float(non2xx.group(1)) if non2xx else 0.0,
        "socket_errors": float(sum(int(g) for g in errors.groups())) if errors else 0.0,
    }


def _wrk_ms(text: str) -> float:
    value, unit = re.match(r"([\d.]+)(\w+)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]


def run_python_loadgen(
    port: int, path: str, headers: dict[str, str], body: Any, seconds: int, connections: int
) -> dict[str, float]:
    spec = json.dumps(
        {
            "port": port,
            "path": path,
            "headers": headers,
            "body": body,
            "seconds": seconds,
            "connections": connections,
        }
    )
    out = subprocess.run(
        [sys.executable, __file__, "--loadgen-child", spec],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=True,
    ).stdout
    return json.loads(out)


async def _loadgen(spec: dict[str, Any]) -> dict[str, float]:
    """Keep-alive HTTP/1.1 clients on raw sockets: one request in flight per connection."""
    body = json.dumps(spec["body"]).encode() if spec["body"] is not None else b""
    head = [
        f"POST {spec['path']} HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    ] + [f"{k}: {v}" for k, v in spec["headers"].items()]
    request = ("\r\n".join(head) + "\r\n\r\n").encode() + body
    deadline = time.perf_counter() + spec["seconds"]
    latencies: list[float] = []
    bad = 0

    async def client() -> None:
        nonlocal bad
        reader, writer = await asyncio.open_connection("127.0.0.1", spec["port"])
        try:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                writer.write(request)
                status_line = await reader.readline()
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                latencies.append(time.perf_counter() - started)
                if b" 200 " not in status_line:
                    bad += 1
        finally:
            writer.close()

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(spec["connections"])))
    elapsed = time.perf_counter() - began
    latencies.sort()
    return {
        "rps": len(latencies) / elapsed,
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000,
        "bad": float(bad),
        "socket_errors": 0.0,
    }


# -- PostgreSQL: the throwaway database ------------------------------------------------------
def pg_urls(admin_url: str, name: str) -> tuple[str, str]:
    """(SQLAlchemy URL, asyncpg DSN) of database `name` on the server of `admin_url`."""
    from sqlalchemy.engine import make_url

    url = make_url(admin_url).set(database=name)
    return (
        url.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False),
        url.set(drivername="postgresql").render_as_string(hide_password=False),
    )


def admin_dsn(admin_url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(admin_url).set(drivername="postgresql").render_as_string(hide_password=False)


async def pg_create_database(admin_url: str, prefix: str) -> str | None:
    """A new database `<prefix>_<pid>_<hex>` (stale ones of dead runs dropped), or None when
    the server is unreachable."""
    import asyncpg

    from walletcore_sql.testing import process_alive

    try:
        conn = await asyncpg.connect(admin_dsn(admin_url), timeout=5)
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        print(f"PostgreSQL at {admin_url} unreachable ({exc.__class__.__name__}: {exc})")
        return None
    try:
        names = await conn.fetch(
            "SELECT datname FROM pg_database WHERE datname ~ $1", f"^{prefix}_[0-9]+_[0-9a-f]+$"
        )
        for (stale,) in names:
            if not process_alive(int(stale.split("_")[-2])):
                await conn.execute(f'DROP DATABASE IF EXISTS "{stale}" WITH (FORCE)')
        name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
        await conn.execute(f'CREATE DATABASE "{name}"')
        return name
    finally:
        await conn.close()


async def pg_drop_database(admin_url: str, name: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(admin_dsn(admin_url), timeout=10)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


# -- the fill: users and N trades -----------------------------------------------------------
STATUSES = [  # (status, weight) of historic trades
    ("completed", 60),
    ("expired", 20),
    ("cancelled", 8),
    ("failed", 4),
    ("open", 4),
    ("approved", 2),
    ("executing", 2),
]


def trade_records(
    client_id: str, list_user: str, others: list[str], count: int, now: datetime, seed: int = 7
) -> Iterator[tuple[Any, ...]]:
    """Tuples in `tables.trades` column order, raw Python values (Decimal, aware datetime).

    The first 100 rows (or fewer) belong to `list_user`, the rest to random `others`.
    Created over the past year, all quotes lapsed (open ones lapsed unapproved, as quotes
    nobody approved are)."""
    from walletcore.domain.ids import new_id

    rng = random.Random(seed)
    statuses, weights = zip(*STATUSES)
    # A pool of value shapes: the Decimal work is done once, not a million times.
    shapes = []
    for _ in range(997):
        status = rng.choices(statuses, weights)[0]
        crypto = Decimal(rng.randrange(1, 10**9)).scaleb(-8)
        price = Decimal(rng.randrange(10**6, 10**8)).scaleb(-2)
        fiat_amount = crypto * price
        settled = status in ("completed", "failed", "approved", "executing")
        done = status == "completed"
        shapes.append(
            (
                rng.choice(("buy", "sell")),
                status,
                crypto,
                fiat_amount,
                price,
                crypto if settled else None,
                fiat_amount if settled else None,
                price if settled else None,
                crypto if done else None,
                fiat_amount if done else None,
                price if done else None,
                f"SBX-{rng.randrange(10**9)}" if done else None,
                "sandbox venue rejected" if status == "failed" else None,
                settled,
                status in ("completed", "failed", "expired", "cancelled"),
            )
        )
    year = 365 * 24 * 3600
    minute, five, six = timedelta(seconds=60), timedelta(seconds=5), timedelta(seconds=6)
    for index in range(count):
        user = list_user if index < 100 or not others else others[rng.randrange(len(others))]
        created = now - timedelta(
            seconds=rng.randrange(60, year), microseconds=rng.randrange(10**6)
        )
        (
            side,
            status,
            crypto,
            fiat_amount,
            price,
            a_crypto,
            a_fiat,
            a_price,
            e_crypto,
            e_fiat,
            e_price,
            reference,
            reason,
            approved,
            terminal,
        ) = shapes[rng.randrange(len(shapes))]
        yield (
            new_id(),
            client_id,
            user,
            side,
            status,
            1,
            "BTC",
            "EUR",
            "crypto",
            crypto,
            fiat_amount,
            price,
            created + minute,
            a_crypto,
            a_fiat,
            a_price,
            e_crypto,
            e_fiat,
            e_price,
            reference,
            reason,
            created,
            created + five if approved else None,
            (created + six if approved else created + minute) if terminal else None,
        )


def check_rows(columns: list[str], records: list[tuple[Any, ...]]) -> None:
    """The rows make valid domain trades (`walletcore_sql.rows.trade_from`)."""
    from walletcore_sql import rows

    for record in records:
        rows.trade_from(dict(zip(columns, record, strict=True)))


def batched(items: Iterator[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    batch: list[tuple[Any, ...]] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def fill_sqlite(path: Path, client_id: str, user_ids: list[str], count: int) -> None:
    """users and trades through sqlite3 executemany, values encoded by the tables' types."""
    from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite

    from walletcore_sql.tables import trades, users

    dialect = SQLiteDialect_aiosqlite()
    columns = [c.name for c in trades.columns]
    procs = [c.type.dialect_impl(dialect).bind_processor(dialect) for c in trades.columns]
    user_procs = [c.type.dialect_impl(dialect).bind_processor(dialect) for c in users.columns]

    def encode(record: tuple[Any, ...], processors: list[Any]) -> tuple[Any, ...]:
        return tuple(
            v if p is None or v is None else p(v) for v, p in zip(record, processors, strict=True)
        )

    now = datetime.now(UTC)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA synchronous = OFF")
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("BEGIN")
        db.executemany(
            f"INSERT INTO users ({', '.join(c.name for c in users.columns)}) VALUES (?, ?, ?, ?)",
            [encode((client_id, u, now - timedelta(days=400), None), user_procs) for u in user_ids],
        )
        db.execute("COMMIT")
        insert = (
            f"INSERT INTO trades ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        )
        checked = False
        for batch in batched(
            trade_records(client_id, user_ids[0], user_ids[1:], count, now), 50_000
        ):
            if not checked:
                check_rows(columns, batch[:2000])
                checked = True
            db.execute("BEGIN")
            db.executemany(insert, [encode(r, procs) for r in batch])
            db.execute("COMMIT")
        db.execute("ANALYZE")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


async def fill_pg(dsn: str, client_id: str, user_ids: list[str], count: int) -> None:
    """users and trades through COPY (asyncpg `copy_records_to_table`)."""
    import asyncpg

    from walletcore_sql.tables import trades, users

    columns = [c.name for c in trades.columns]
    now = datetime.now(UTC)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.copy_records_to_table(
            "users",
            records=[(client_id, u, now - timedelta(days=400), None) for u in user_ids],
            columns=[c.name for c in users.columns],
        )
        checked = False
        for batch in batched(
            trade_records(client_id, user_ids[0], user_ids[1:], count, now), 50_000
        ):
            if not checked:
                check_rows(columns, batch[:2000])
                checked = True
            await conn.copy_records_to_table("trades", records=batch, columns=columns)
        await conn.execute("ANALYZE users; ANALYZE trades")
    finally:
        await conn.close()


# -- one database: prepare, then serve it at each worker count -------------------------------
class Database:
    def __init__(self, kind: str, workdir: Path, args: argparse.Namespace) -> None:
        self.kind = kind
        self.label = {"sqlite": "SQLite", "pg": "PG"}[kind]
        self.home = workdir / f"home-{kind}"
        self.home.mkdir(mode=0o700)
        self.args = args
        self.env = {
            **os.environ,
            "WALLETCORE_HOME": str(self.home),
            "WALLETCORE_PROFILE": "sandbox",
            "WALLETCORE_REPO": "sql",
            "BCL_DATA_DIR": str(workdir / "bcl"),
        }
        for name in (
            "WALLETCORE_DATABASE_URL",
            "WALLETCORE_TOKEN_SIGNING_KEY",
            "WALLETCORE_MASTER_KEY",
            "WALLETCORE_QUOTE_TTL_SECONDS",
        ):
            self.env.pop(name, None)
        self.pg_name: str | None = None
        self.dsn = ""
        self._sellers: list[str] = []

    def sellers(self, port: int, auth: dict[str, str]) -> tuple[str, str]:
        """The users of `/trade` polls and of `/sell`, with coins to sell (made once)."""
        if not self._sellers:
            self._sellers = [funded_user(self, port, auth) for _ in range(2)]
        return self._sellers[0], self._sellers[1]

    def prepare(self) -> bool:
        from walletcore_sql import migrate
        from walletcore_sql.engine import sqlite_url

        if self.kind == "pg":
            name = asyncio.run(pg_create_database(self.args.pg_url, "walletcore_bench"))
            if name is None:
                return False
            self.pg_name = name
            admin = self.args.pg_url
            _CLEANUPS.append(lambda: asyncio.run(pg_drop_database(admin, name)))
            url, self.dsn = pg_urls(self.args.pg_url, name)
            self.env["WALLETCORE_DATABASE_URL"] = url
            where = f"database {name}"
        else:
            url = sqlite_url(self.home / "walletcore.db")
            where = str(self.home / "walletcore.db")
        migrate.upgrade(url)
        created = subprocess.run(
            [str(BIN / "walletcore"), "clients", "create", "--name", "bench"],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        self.client_id = json.loads(created.stdout)["clientId"]
        self.api_key = json.loads(created.stdout)["apiKey"]

        from walletcore.domain.ids import new_id

        count = self.args.trades
        self.user_ids = [new_id() for _ in range(max(3, count // 100))]
        # users[0]: /trades (the first 100 rows); /trade polls and /sell: `sellers`
        started = time.perf_counter()
        if self.kind == "pg":
            asyncio.run(fill_pg(self.dsn, self.client_id, self.user_ids, count))
        else:
            fill_sqlite(self.home / "walletcore.db", self.client_id, self.user_ids, count)
        took = time.perf_counter() - started
        self.fill_seconds = took
        print(
            f"[{self.label}] {where}: filled {count:,} trades over {len(self.user_ids):,} users "
            f"in {took:.1f} s ({count / took if took else 0:,.0f} rows/s)",
            flush=True,
        )
        started = time.perf_counter()
        fill_ledger(self.home, self.args.ledger_txs)
        print(
            f"[{self.label}] sandbox ledger: {self.args.ledger_txs:,} transfers in "
            f"{time.perf_counter() - started:.1f} s",
            flush=True,
        )
        return True


def fill_ledger(home: Path, count: int) -> None:
    """`count` Bitcoin transfers among 5,000 addresses that are not the sellers', in the
    sandbox ledger under `home`: the file made by `SandboxLedger` itself (its layout, 0600),
    the rows `LedgerTx` values through its own insert, one transaction."""
    from walletcore.clock import SystemClock
    from walletcore.domain.assets import Chain
    from walletcore.testing import CONTRACT_CATALOG
    from walletcore_sandbox import ledger as module

    path = home / module.DATA_FILE
    ledger = module.SandboxLedger(path, SystemClock(), lambda *_: True, catalog=CONTRACT_CATALOG)

    async def made() -> None:
        await ledger.credit(Chain.BITCOIN, "bench-faucet", 1, 10**18, "f" * 64)
        await ledger.aclose()

    asyncio.run(made())
    rng = random.Random(14)
    now = datetime.now(UTC) - timedelta(days=1)
    txs = []
    for n in range(count):
        sender, recipient = (f"bench-other-{rng.randrange(5000)}" for _ in range(2))
        units = rng.randrange(1, 10**8)
        txs.append(
            module.LedgerTx(
                f"{n:064x}", Chain.BITCOIN, 1, sender, recipient, units, 250, sender, now, now
            ).values()
        )
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.executemany(module.store.INSERT, txs)
        db.execute("COMMIT")
        db.execute("ANALYZE")
    finally:
        db.close()


def funded_user(db: Database, port: int, auth: dict[str, str]) -> str:
    """A user made by `/create` whose BTC address holds 1,000,000 BTC on the sandbox ledger
    (`walletcore sandbox fund`): sells are backed by the wallet's balance."""
    created = ok(*post(port, "/create", auth, {"password": "bench seller password"})[:2], "/create")
    subprocess.run(
        [
            str(BIN / "walletcore"),
            "sandbox",
            "fund",
            "--chain",
            "BITCOIN",
            "--address",
            created["addresses"]["BITCOIN"],
            "--asset",
            "1",
            "--amount",
            "1000000",
        ],
        env=db.env,
        capture_output=True,
        text=True,
        check=True,
    )
    return str(created["userId"])


def bench_config(
    db: Database,
    workers: int,
    args: argparse.Namespace,
    workdir: Path,
    bare_seed: bytes,
    bare_token: str,
    measure_create: bool,
) -> dict[str, Any]:
    real_port, bare_port = free_port(), free_port()
    tag = f"{db.kind}-w{workers}"
    real_log, bare_log = workdir / f"real-{tag}.log", workdir / f"bare-{tag}.log"
    real = spawn(
        [
            str(BIN / "walletcore"),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(real_port),
            "--workers",
            str(workers),
            "--server",
            "granian",
            "--log-level",
            args.log_level,
        ],
        db.env,
        real_log,
    )
    # On PostgreSQL the deployment's background jobs (the shared price refresh, settlement,
    # following sends) run on `walletcore worker` (docs/jobs.md); on SQLite in-process.
    worker = (
        spawn([str(BIN / "walletcore"), "worker"], db.env, workdir / f"worker-{tag}.log")
        if db.kind == "pg"
        else None
    )
    # The bench's folder first, then the caller's path: a checkout under comparison
    # (`PYTHONPATH=<worktree>/src`) serves the bare app with its own `server.run` too.
    bare_path = os.pathsep.join(filter(None, (str(HERE), os.environ.get("PYTHONPATH"))))
    bare_env = {**os.environ, BARE_SEED_ENV: bare_seed.hex(), "PYTHONPATH": bare_path}
    bare = spawn(
        [sys.executable, __file__, "--serve-bare", str(bare_port), str(workers)],
        bare_env,
        bare_log,
        cwd=HERE,
    )
    try:
        wait_ready(bare_port, "/bare", bare, bare_log)
        wait_ready(real_port, "/auth", real, real_log)
        token = ok(
            *post(real_port, "/auth", {"x-client-id": db.client_id, "x-api-key": db.api_key}, None)[
                :2
            ],
            "/auth",
        )["token"]
        auth = {"Authorization": f"Bearer {token}"}
        wait_priced(real_port, auth)
        list_user = db.user_ids[0]
        poll_user, sell_user = db.sellers(real_port, auth)
        sell_body = {"userId": sell_user, "assetId": 1, "cryptoAmount": "0.01"}

        def fresh_trade() -> dict[str, str]:
            trade = ok(
                *post(
                    real_port,
                    "/sell",
                    auth,
                    {"userId": poll_user, "assetId": 1, "cryptoAmount": "0.01"},
                )[:2],
                "/sell",
            )
            return {"userId": poll_user, "tradeId": trade["tradeId"]}

        bodies: dict[str, Any] = {
            "prices": None,
            "config": None,
            "trade": fresh_trade(),
            "trades": {"userId": list_user},
            "sell": sell_body,
        }
        sizes: dict[str, int] = {}
        for name in args.endpoints:
            status, answer, size = post(real_port, f"/{name}", auth, bodies[name])
            ok(status, answer, f"/{name}")
            sizes[name] = size
            if name == "trades":
                sizes["trades_count"] = (
                    len(answer["result"].get("trades", answer["result"]))
                    if isinstance(answer["result"], dict)
                    else len(answer["result"])
                )
        sizes["bare"] = sizes["bare-auth"] = sizes["bare-cached"] = post(
            bare_port, "/bare", {}, None
        )[2]
        bare_auth = {"Authorization": f"Bearer {bare_token}"}
        for path in ("/bare-auth", "/bare-cached"):
            ok(*post(bare_port, path, bare_auth, None)[:2], path)
            status, _, _ = post(bare_port, path, {"Authorization": "Bearer x.y.z"}, None)
            if status != 401:
                raise RuntimeError(f"the bare app let a bad token through {path} ({status})")

        def drive(target: str, seconds: int) -> dict[str, float]:
            if target.startswith("bare"):
                port, path, headers, body = (
                    bare_port,
                    f"/{target}",
                    bare_auth if target != "bare" else {},
                    None,
                )
            else:
                if target == "trade":
                    bodies["trade"] = fresh_trade()
                port, path, headers, body = real_port, f"/{target}", auth, bodies[target]
            server = bare if port == bare_port else real
            before = tree_cpu(server.pid)
            if args.loadgen == "wrk":
                result = run_wrk(port, path, headers, body, seconds, args.connections, workdir)
            else:
                result = run_python_loadgen(port, path, headers, body, seconds, args.connections)
            served = result["rps"] * seconds
            result["cpu_us"] = (tree_cpu(server.pid) - before) * 1e6 / max(served, 1.0)
            return result

        endpoints = list(args.endpoints)
        targets = [BASE, "bare-auth", "bare", *endpoints]
        for target in targets:
            drive(target, 1)  # warm-up: connections, caches, prepared statements
        results: dict[str, list[dict[str, float]]] = {t: [] for t in targets}
        for round_no in range(args.rounds):
            # the headline's denominator first, the rest in an order rotated every round
            order = targets[1:]
            shift = round_no % len(order)
            order = order[shift:] + order[:shift]
            base = drive(BASE, args.seconds)
            results[BASE].append({**base, "ratio": 1.0})
            for target in order:
                result = drive(target, args.seconds)
                results[target].append({**result, "ratio": result["rps"] / base["rps"]})
            uncached = results["bare-auth"][-1]["rps"]
            for target in targets:
                results[target][-1]["vs_auth"] = results[target][-1]["rps"] / uncached
            print(
                f"  [{db.label} w{workers}] round {round_no + 1}/{args.rounds}: "
                + "  ".join(f"{t} {results[t][-1]['ratio']:.2f}" for t in targets[1:]),
                flush=True,
            )
        if args.profile is not None:
            profile_endpoints(real, endpoints, drive, args, f"{db.kind}-w{workers}")
        rows: dict[str, dict[str, Any]] = {}
        for target, runs in results.items():
            rows[target] = {
                **{
                    k: statistics.median(r[k] for r in runs)
                    for k in ("rps", "p50", "p99", "ratio", "vs_auth", "cpu_us")
                },
                "bad": sum(r["bad"] for r in runs),
                "socket_errors": sum(r["socket_errors"] for r in runs),
                "ratios": [round(r["ratio"], 3) for r in runs],
                "bytes": sizes.get(target, 0),
            }
        out: dict[str, Any] = {"rows": rows, "trades_listed": sizes.get("trades_count")}
        if measure_create:
            out["create"] = measure_create_latency(real_port, auth, args.create_samples)
        return out
    finally:
        stop(real)
        stop(bare)
        if worker is not None:
            stop(worker)


def profile_endpoints(
    real: Any, endpoints: list[str], drive: Any, args: argparse.Namespace, tag: str
) -> None:
    """One more run of each endpoint with py-spy recording the service's worker processes
    (the children of `walletcore serve`), collapsed stacks in `--profile DIR`."""
    spy = shutil.which("py-spy") or str(BIN / "py-spy")
    args.profile.mkdir(parents=True, exist_ok=True)
    children = Path(f"/proc/{real.pid}/task/{real.pid}/children").read_text().split()
    pids = [int(p) for p in children] or [real.pid]
    for name in endpoints:
        recorders = [
            subprocess.Popen(
                [
                    spy,
                    "record",
                    "--pid",
                    str(pid),
                    "--format",
                    "raw",
                    "--rate",
                    "400",
                    "--duration",
                    str(args.seconds + 1),
                    "--nonblocking",
                    "--output",
                    str(args.profile / f"{tag}-{name}-{pid}.txt"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for pid in pids
        ]
        time.sleep(0.5)
        result = drive(name, args.seconds)
        for recorder in recorders:
            recorder.wait()
        print(f"  [{tag}] profiled /{name}: {result['rps']:.0f} req/s", flush=True)


def wait_priced(port: int, auth: dict[str, str], timeout: float = 60.0) -> None:
    """Until the deployment has its first prices (the worker's first refresh)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, answer, _ = post(port, "/prices", auth, None)
        if status == 200 and answer["result"]["BTC"]["USD"] > 0:
            return
        time.sleep(0.5)
    raise RuntimeError("no prices: the background jobs did not refresh them")


def measure_create_latency(
    port: int, auth: dict[str, str], samples: int
) -> list[tuple[float, float]]:
    """`samples` pairs (one Argon2id at the production parameters here, then one `/create`
    there), taken one right after the other so both see the machine as it is at that moment:
    the ratio is taken within each pair."""
    post(port, "/create", auth, {"password": "bench password, warm-up"})  # first-use costs
    pairs = []
    for index in range(samples):
        argon = argon2_once()
        started = time.perf_counter()
        ok(*post(port, "/create", auth, {"password": f"bench password {index}"})[:2], "/create")
        pairs.append((time.perf_counter() - started, argon))
    return pairs


def argon2_once() -> float:
    """Seconds of one Argon2id at the production parameters (`PRODUCTION_KDF`)."""
    from nacl.pwhash import argon2id

    from walletcore_chains.sealing import PRODUCTION_KDF

    started = time.perf_counter()
    argon2id.kdf(
        32,
        b"bench password",
        secrets.token_bytes(16),
        opslimit=PRODUCTION_KDF.opslimit,
        memlimit=PRODUCTION_KDF.memlimit,
    )
    return time.perf_counter() - started


def argon2_parameters() -> str:
    from walletcore_chains.sealing import PRODUCTION_KDF

    return f"opslimit={PRODUCTION_KDF.opslimit}, memlimit={PRODUCTION_KDF.memlimit // 2**20} MiB"


def run_write_path(args: argparse.Namespace) -> dict[str, Any] | None:
    cmd = [
        sys.executable,
        str(HERE / "write_path_bench.py"),
        "--pg-url",
        args.pg_url,
        "--seconds",
        str(args.write_seconds),
        "--rounds",
        str(args.write_rounds),
        "--json",
    ]
    print(f"\nwrite path: {' '.join(cmd[1:])}", flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    sys.stdout.write(
        "".join(f"  | {line}\n" for line in done.stderr.splitlines() if not line.startswith("{"))
    )
    if done.returncode != 0:
        print(f"  write path failed ({done.returncode}): {done.stdout[-2000:]}")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- output ------------------------------------------------------------------------------------
def print_tables(
    configs: dict[tuple[str, int], dict[str, Any]],
    args: argparse.Namespace,
    fills: dict[str, float],
    write: dict[str, Any] | None,
    create: dict[str, list[tuple[float, float]]],
) -> None:
    print(
        f"\nloadgen={args.loadgen} -c{args.connections} seconds={args.seconds} rounds={args.rounds} "
        f"trades={args.trades:,} cpus={os.cpu_count()} log-level={args.log_level} "
        f"(medians over rounds; ratio = req/s / {BASE} req/s of the same round, "
        "vs auth = req/s / bare-auth req/s)"
    )
    if fills:
        print("fill: " + ", ".join(f"{k} {v:.1f} s" for k, v in fills.items()))
    head = (
        f"{'db':6} {'w':>1} {'endpoint':11} {'bytes':>6} {'req/s':>8} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'ratio':>6} {'vs auth':>7} {'non2xx':>6} {'cpu us':>7}  "
        "per-round ratios"
    )
    print(head)
    print("-" * len(head))
    for (kind, workers), config in configs.items():
        label = {"sqlite": "SQLite", "pg": "PG"}[kind]
        for target, row in config["rows"].items():
            name = target if target.startswith("bare") else f"/{target}"
            bad = row["bad"] + row["socket_errors"]
            print(
                f"{label:6} {workers:>1} {name:11} {row['bytes']:6d} {row['rps']:8.0f} "
                f"{row['p50']:8.2f} {row['p99']:8.2f} {row['ratio']:6.3f} "
                f"{row['vs_auth']:7.3f} {bad:6.0f} {row['cpu_us']:7.0f}  "
                f"{row['ratios']}"
            )
        if config.get("trades_listed") is not None:
            print(f"{'':9}(/trades lists {config['trades_listed']} trades a page)")

    columns = list(configs)
    titles = [f"{'SQLite' if k == 'sqlite' else 'PG'} w{w}" for k, w in columns]
    print("\n| endpoint | " + " | ".join(titles) + " | goal |")
    print("|---|" + "---|" * len(titles) + "---|")
    for target, title in (("bare", "bare (no auth)"), ("bare-auth", "bare-auth")):
        print(
            f"| {title} / {BASE} | "
            + " | ".join(f"{configs[c]['rows'][target]['ratio']:.2f}" for c in columns)
            + " | |"
        )
    for endpoint in args.endpoints:
        cells, short = [], []
        for c, title in zip(columns, titles, strict=True):
            row = configs[c]["rows"][endpoint]
            flag = "!" if row["bad"] or row["socket_errors"] else ""
            cells.append(f"{row['ratio']:.2f} / {row['vs_auth']:.2f}{flag}")
            if row["ratio"] < GOALS[endpoint]:
                short.append(title)
        print(f"| `/{endpoint}` | " + " | ".join(cells) + f" | >={GOALS[endpoint]} {met(short)} |")
    if write is not None:
        print(
            f"| quote + approve vs raw asyncpg insert + conditional update (c={write['concurrency']}) "
            f"| PG: {write['ratio']:.3f} ({write['service_rate']:.0f} vs {write['raw_rate']:.0f} /s; "
            f"{write['round_trips_per_pair']} round trips a pair vs {write['raw_round_trips']}; "
            f"the same statements by hand {write['same_ratio']:.3f} of raw, the service "
            f"{write['service_vs_same']:.3f} of them; at {WRITE_GOAL} the service's process may "
            f"spend about {write['client_budget_us_at_goal']} us of CPU a pair, it spends "
            f"{write['cpu_us_per_pair']['service']['client_cpu_us']}) "
            f"| >={WRITE_GOAL} {met([] if write['ratio'] >= WRITE_GOAL else ['PG'])} |"
        )
    if create:
        multiples = {k: statistics.median(c / a for c, a in pairs) for k, pairs in create.items()}
        cells = ", ".join(
            f"{k} {multiples[k]:.2f}x "
            f"({statistics.median(c for c, _ in pairs) * 1000:.0f} ms vs "
            f"{statistics.median(a for _, a in pairs) * 1000:.0f} ms)"
            for k, pairs in create.items()
        )
        over = [k for k, multiple in multiples.items() if multiple > CREATE_GOAL]
        print(
            f"| `/create` vs one Argon2id ({argon2_parameters()}; each sample right after "
            f"one Argon2id, median of the pairs' ratios) | {cells} "
            f"| <={CREATE_GOAL}x {met(over)} |"
        )
    print(
        f"(endpoint cells: req/s over the bare app with the service's token check, cached as "
        f"the service caches it ({BASE}: the headline, which the goals are for) / over the "
        "same bare app verifying the token on every request (bare-auth); same round, "
        "median of rounds)"
    )
    if any(r["bad"] or r["socket_errors"] for c in configs.values() for r in c["rows"].values()):
        print("\n! some responses were not 200 or sockets failed: see non2xx above")


def met(short: list[str]) -> str:
    """A goal's verdict: met, or where it was not."""
    return "met" if not short else f"not met ({', '.join(short)})"


# -- main --------------------------------------------------------------------------------------
def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="1 s runs, 2 rounds, 20k trades, short write path (~3 min)",
    )
    parser.add_argument("--seconds", type=int, default=None, help="per run (default 4; quick 1)")
    parser.add_argument("--rounds", type=int, default=None, help="default 3; quick 2")
    parser.add_argument("--db", default="sqlite,pg", help="sqlite,pg")
    parser.add_argument("--workers", default="1,2", help="worker counts, e.g. 1,2")
    parser.add_argument("--trades", type=int, default=None, help="default 1,000,000; quick 20,000")
    parser.add_argument(
        "--ledger-txs",
        type=int,
        default=None,
        help="transfers in the sandbox ledger: default 100,000; quick 10,000",
    )
    parser.add_argument("--endpoints", default=",".join(ALL_ENDPOINTS))
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help="a database on the server where the throwaway one is created",
    )
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument(
        "--log-level",
        default=os.environ.get("BENCH_LOG_LEVEL", "info"),
        choices=["debug", "info", "warning", "error"],
        help="the service's log level (default info, as deployed)",
    )
    parser.add_argument(
        "--loadgen", choices=["wrk", "python"], default="wrk" if shutil.which("wrk") else "python"
    )
    parser.add_argument("--create-samples", type=int, default=None, help="default 5; quick 3")
    parser.add_argument("--write-seconds", type=float, default=None, help="default 8; quick 3")
    parser.add_argument("--write-rounds", type=int, default=None, help="default 2; quick 1")
    parser.add_argument("--no-write-path", action="store_true")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="after the rounds, run each endpoint once more under py-spy "
        "(the service's workers, collapsed stacks into DIR)",
    )
    args = parser.parse_args()
    quick = args.quick
    args.seconds = max(1, min(args.seconds or (1 if quick else 4), 60))
    args.rounds = max(1, min(args.rounds or (2 if quick else 3), 10))
    args.trades = max(
        0, args.trades if args.trades is not None else (20_000 if quick else 1_000_000)
    )
    args.ledger_txs = max(
        0, args.ledger_txs if args.ledger_txs is not None else (10_000 if quick else 100_000)
    )
    args.create_samples = max(1, args.create_samples or (3 if quick else 5))
    args.write_seconds = args.write_seconds or (3.0 if quick else 8.0)
    args.write_rounds = args.write_rounds or (1 if quick else 2)
    args.connections = max(1, min(args.connections, 256))
    args.dbs = [d.strip() for d in args.db.split(",") if d.strip()]
    if not set(args.dbs) <= {"sqlite", "pg"}:
        parser.error("--db takes sqlite and/or pg")
    args.worker_counts = [int(w) for w in args.workers.split(",") if w.strip()]
    args.endpoints = [e.strip().lstrip("/") for e in args.endpoints.split(",") if e.strip()]
    if not set(args.endpoints) <= set(ALL_ENDPOINTS):
        parser.error(f"--endpoints takes {','.join(ALL_ENDPOINTS)}")
    return args


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--loadgen-child":
        print(json.dumps(asyncio.run(_loadgen(json.loads(sys.argv[2])))))
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "--serve-bare":
        serve_bare(int(sys.argv[2]), int(sys.argv[3]))
        return 0
    args = parse_args()
    atexit.register(_cleanup)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    import jwt
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from walletcore.domain.ids import new_id

    # The bare app's key and token, signed as TokenSigner.sign does.
    bare_seed = secrets.token_bytes(32)
    now = int(time.time())
    bare_token = jwt.encode(
        {"sub": new_id(), "gen": 1, "iat": now, "exp": now + 3600, "jti": new_id()},
        Ed25519PrivateKey.from_private_bytes(bare_seed),
        algorithm="EdDSA",
    )

    started = time.monotonic()
    configs: dict[tuple[str, int], dict[str, Any]] = {}
    fills: dict[str, float] = {}
    create: dict[str, list[tuple[float, float]]] = {}
    write: dict[str, Any] | None = None
    tmp = Path(tempfile.mkdtemp(prefix="walletcore-bench-"))
    _CLEANUPS.insert(0, lambda: shutil.rmtree(tmp, ignore_errors=True))
    try:
        for kind in args.dbs:
            db = Database(kind, tmp, args)
            if not db.prepare():
                print(f"[{db.label}] skipped: PostgreSQL unreachable at {args.pg_url}")
                continue
            fills[db.label] = db.fill_seconds
            for index, workers in enumerate(args.worker_counts):
                print(f"[{db.label} w{workers}] serving ...", flush=True)
                result = bench_config(
                    db, workers, args, tmp, bare_seed, bare_token, measure_create=index == 0
                )
                configs[(kind, workers)] = result
                if "create" in result:
                    create[f"{db.label} w{workers}"] = result["create"]
            if db.pg_name:  # done with it: drop it now (the cleanup does it on failure)
                asyncio.run(pg_drop_database(args.pg_url, db.pg_name))
            shutil.rmtree(db.home, ignore_errors=True)
        if "pg" in args.dbs and not args.no_write_path:
            write = run_write_path(args)
    finally:
        _cleanup()
    if configs:
        print_tables(configs, args, fills, write, create)
    print(f"\ntotal {time.monotonic() - started:.0f} s")
    bad = any(r["bad"] or r["socket_errors"] for c in configs.values() for r in c["rows"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
