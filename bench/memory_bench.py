#!/usr/bin/env python3
"""Memory benchmark: each worker's RSS under a long mixed load of `walletcore serve`, then idle.

    .venv/bin/python bench/memory_bench.py               # PostgreSQL, 600 s of load + 30 s idle (~13 min)
    .venv/bin/python bench/memory_bench.py --quick       # 60 s of load, 15 s idle (~2.5 min)
    .venv/bin/python bench/memory_bench.py --db sqlite --seconds 300 --connections 8
    .venv/bin/python bench/memory_bench.py --quick --tracemalloc   # what grew, line by line
    .venv/bin/python bench/memory_bench.py --caches      # the caches at their bounds, no server
    .venv/bin/python bench/memory_bench.py --quick --trim          # malloc_trim at the end (gdb)
    options: --pg-url postgresql://postgres@127.0.0.1:5432/postgres (where the throwaway
    database is made), --workers 2, --connections 16, --users 16, --trades 300000,
    --warmup 30, --sample 10, --idle 30, --send-every 3, --create-every 60,
    --log-level info, --seed 1

What one run does, all on loopback, bounded in time, cleaned up at the end:
1. A temp WALLETCORE_HOME (sandbox profile, repo `sql`, the background jobs in the server's
   workers: WALLETCORE_JOBS=inprocess) on a throwaway PostgreSQL database
   `walletcore_memory_<pid>_<hex>` (dropped at the end; those of dead runs too), or with
   `--db sqlite` the file under the home. The schema is migrated (`walletcore_sql.migrate`),
   an api client made with the CLI (`walletcore clients create`), and a history of
   `--trades` past trades (92 % in a terminal status) written over users of ~100 trades
   each, as `http_bench.py` fills its database: enough distinct trades for `/trades` to
   fill the workers' caches of terminal trades to their bounds within minutes.
2. `walletcore serve --workers 2` (granian). `--users` users are made by `/create`, and each
   funded on the sandbox chain with `walletcore sandbox fund` (BTC to sell, ETH to send).
3. `--connections` keep-alive connections (a small HTTP/1.1 client on asyncio streams, as
   `http_bench.py`'s python load generator) each send one request after another, chosen at
   random by weight (`MIX`): `/prices`, `/config`, `/balance`, `/fee`, `/trades` of the
   users (with and without filters) and of the history's, `/trade` (a recent quote),
   `/sell` then `/trade/approve` (60 %) or `/trade/cancel` (10 %) (the rest lapse
   unapproved, and the jobs expire them), `/order`, `/auth` (its token then used by every
   connection), and bad requests: no or a forged token and wrong api keys (401),
   malformed bodies, unknown assets and fields (400), unknown users and trades, random
   paths (404), a wrong method (405), an oversized body (400, on a connection of its own).
   Beside them one lane sends a `/send` (ETH, on the sandbox chain) every `--send-every`
   seconds and a `/create` every `--create-every` (each an Argon2id at the production
   parameters: 64 MiB for a fraction of a second).
4. `--warmup` seconds of that load, then `--seconds` of it with each worker's RSS (and its
   anonymous part, from /proc: the server's child processes) printed every `--sample`
   seconds, then `--idle` seconds with no request, sampled alike. A sample is the smallest
   of 5 reads 0.25 s apart (an Argon2id in flight is not the worker's level); the largest
   is printed as its peak.
5. A summary: per worker the RSS at the start of the load (after the warm-up), after each
   quarter of it, its maximum and peak, the slope over its last half (least squares, MB
   per 10 minutes), at the end of the idle period; and the requests served by kind and
   status.

With `--tracemalloc` the workers trace their allocations from the warm-up on
(`WALLETCORE_MEMORY_SNAPSHOTS`, `walletcore_litestar.memory`: a first SIGUSR2 starts
tracing): a snapshot of each is taken (SIGUSR2) at the start of the load, at its middle and
at its end; the lines whose memory grew over the first half and over the second are
printed, and the largest at the end (growth that goes on once the caches are full is what
a leak looks like). Tracing slows the workers many times over and adds its own memory: the
RSS of such a run is not the service's, and its caches fill far more slowly.

With `--trim`, at the end each worker runs glibc's `malloc_trim(0)` (attached with gdb),
its RSS read before and after: what the allocator held free, as against what the worker's
objects hold.

`--caches` needs no server: it fills each process cache of a worker to its bound with
entries like the ones the load makes, and prints what each then holds (tracemalloc).

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
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import http_bench

BIN = Path(sys.executable).parent
DEFAULT_PG_URL = http_bench.DEFAULT_PG_URL
DB_PREFIX = "walletcore_memory"
#: A third-party recipient (README): never one of the wallets under test.
RECIPIENT = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"
BTC, ETH = 1, 2
MB = 1024 * 1024
#: request kind -> weight in the mix (the slow lane's /send and /create are apart)
MIX = {
    "prices": 12,
    "config": 6,
    "balance": 10,
    "fee": 6,
    "trades": 8,
    "history": 8,
    "trade": 8,
    "sell": 12,
    "order": 5,
    "auth": 1,
    "bad": 14,
}
BAD_KINDS = (
    "no-token",
    "forged-token",
    "bad-json",
    "unknown-field",
    "unknown-asset",
    "unknown-user",
    "unknown-trade",
    "unknown-path",
    "wrong-method",
    "bad-credentials",
    "oversized",
)


# -- the HTTP client ---------------------------------------------------------------------------
class Connection:
    """One keep-alive HTTP/1.1 connection; opened again after the server closed it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(
        self, path: str, headers: dict[str, str], body: bytes | None, method: str = "POST"
    ) -> tuple[int, bytes]:
        for attempt in range(2):
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
            try:
                return await self._exchange(path, headers, body, method)
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def _exchange(
        self, path: str, headers: dict[str, str], body: bytes | None, method: str
    ) -> tuple[int, bytes]:
        assert self.reader is not None and self.writer is not None
        data = body or b""
        head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(data)}"]
        if body is not None:
            head.append("Content-Type: application/json")
        head += [f"{k}: {v}" for k, v in headers.items()]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionResetError("closed by the server")
        status = int(status_line.split()[1])
        length, chunked, close = 0, False, False
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value:
                chunked = True
            elif name == "connection" and value == "close":
                close = True
        if chunked:
            parts = []
            while size := int((await self.reader.readline()).split(b";")[0], 16):
                parts.append(await self.reader.readexactly(size + 2))
            await self.reader.readline()
            answer = b"".join(p[:-2] for p in parts)
        else:
            answer = await self.reader.readexactly(length)
        if close:
            self.close()
        return status, answer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


# -- the load --------------------------------------------------------------------------------
@dataclass
class Load:
    """What the connections share: the server, the credentials, the users, the tallies."""

    port: int
    client_id: str
    api_key: str
    token: str
    users: list[str]
    password: str
    #: users of the filled history (`--trades`): no wallet, ~100 trades each
    history: list[str]
    served: Counter[tuple[str, int]] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    stop_at: float = 0.0
    recent_trades: list[tuple[str, str]] = field(default_factory=list)

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def note(self, kind: str, status: int) -> None:
        self.served[(kind, status)] += 1

    def remember_trade(self, user: str, trade_id: str) -> None:
        self.recent_trades.append((user, trade_id))
        if len(self.recent_trades) > 200:
            del self.recent_trades[:100]


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


def result_of(answer: bytes) -> Any:
    return json.loads(answer)["result"]


async def one_request(load: Load, conn: Connection, rng: random.Random, kind: str) -> None:
    """One request (or, for `sell`, the quote and what follows it) of `kind`."""
    user = rng.choice(load.users)
    auth = load.auth()
    if kind == "prices" or kind == "config":
        status, _ = await conn.request(f"/{kind}", auth, None)
    elif kind == "balance":
        status, _ = await conn.request(
            "/balance", auth, body({"userId": user, "assetId": rng.choice((BTC, ETH))})
        )
    elif kind == "fee":
        status, _ = await conn.request(
            "/fee",
            auth,
            body({"userId": user, "assetId": ETH, "recipient": RECIPIENT, "amount": "0.01"}),
        )
    elif kind == "trades":
        query: dict[str, Any] = {"userId": user}
        if rng.random() < 0.3:
            query["side"] = "sell"
        if rng.random() < 0.3:
            query["status"] = rng.choice(("completed", "expired", "cancelled", "open"))
        status, _ = await conn.request("/trades", auth, body(query))
    elif kind == "history":
        query = {"userId": rng.choice(load.history or load.users)}
        if rng.random() < 0.5:
            query["status"] = rng.choice(("completed", "expired", "cancelled", "failed"))
        if rng.random() < 0.3:
            query["side"] = rng.choice(("buy", "sell"))
        status, _ = await conn.request("/trades", auth, body(query))
    elif kind == "trade":
        if not load.recent_trades:
            return
        owner, trade_id = rng.choice(load.recent_trades)
        status, _ = await conn.request("/trade", auth, body({"userId": owner, "tradeId": trade_id}))
    elif kind == "order":
        status, _ = await conn.request(
            "/order",
            auth,
            body({"userId": user, "assetId": ETH, "fiat": "EUR", "fiatAmount": "50"}),
        )
    elif kind == "sell":
        await sell_flow(load, conn, rng, user)
        return
    elif kind == "auth":
        status, answer = await conn.request(
            "/auth", {"x-client-id": load.client_id, "x-api-key": load.api_key}, None
        )
        if status == 200:
            load.token = result_of(answer)["token"]
    else:
        await bad_request(load, conn, rng, user)
        return
    load.note(kind, status)


async def sell_flow(load: Load, conn: Connection, rng: random.Random, user: str) -> None:
    """`/sell`; then approve (60 %), cancel (10 %) or let the quote lapse (30 %)."""
    auth = load.auth()
    quote = {
        "userId": user,
        "assetId": BTC,
        "fiat": rng.choice(("EUR", "USD")),
        "cryptoAmount": f"0.00{rng.randrange(1, 99):02d}",
    }
    status, answer = await conn.request("/sell", auth, body(quote))
    load.note("sell", status)
    if status != 200:
        return
    trade_id = result_of(answer)["tradeId"]
    load.remember_trade(user, trade_id)
    draw = rng.random()
    if draw < 0.6:
        status, _ = await conn.request(
            "/trade/approve", auth, body({"userId": user, "tradeId": trade_id})
        )
        load.note("trade/approve", status)
    elif draw < 0.7:
        status, _ = await conn.request(
            "/trade/cancel", auth, body({"userId": user, "tradeId": trade_id})
        )
        load.note("trade/cancel", status)


async def bad_request(load: Load, conn: Connection, rng: random.Random, user: str) -> None:
    """A request the service refuses: its kind is tallied as `bad:<what>`."""
    what = rng.choice(BAD_KINDS)
    auth = load.auth()
    if what == "no-token":
        status, _ = await conn.request("/prices", {}, None)
    elif what == "forged-token":
        forged = load.token[:-6] + "".join(rng.choice("abcdefXYZ012") for _ in range(6))
        status, _ = await conn.request("/config", {"Authorization": f"Bearer {forged}"}, None)
    elif what == "bad-json":
        status, _ = await conn.request(
            "/balance", auth, b'{"userId": "' + os.urandom(4).hex().encode()
        )
    elif what == "unknown-field":
        status, _ = await conn.request(
            "/balance", auth, body({"userId": user, "assetId": BTC, f"x{rng.randrange(10**6)}": 1})
        )
    elif what == "unknown-asset":
        status, _ = await conn.request(
            "/balance", auth, body({"userId": user, "assetId": rng.randrange(100, 10**6)})
        )
    elif what == "unknown-user":
        stranger = os.urandom(12).hex()
        status, _ = await conn.request("/trades", auth, body({"userId": stranger}))
    elif what == "unknown-trade":
        status, _ = await conn.request(
            "/trade", auth, body({"userId": user, "tradeId": os.urandom(12).hex()})
        )
    elif what == "unknown-path":
        status, _ = await conn.request(f"/nowhere/{os.urandom(6).hex()}", auth, None)
    elif what == "wrong-method":
        status, _ = await conn.request("/prices", auth, None, method="GET")
    elif what == "bad-credentials":
        status, _ = await conn.request(
            "/auth", {"x-client-id": load.client_id, "x-api-key": os.urandom(16).hex()}, None
        )
    else:  # an oversized body, on a connection of its own (the server may not read it all)
        alone = Connection(load.port)
        try:
            status, _ = await alone.request(
                "/balance",
                {**auth, "Connection": "close"},
                body({"userId": user, "assetId": BTC, "pad": "x" * (80 * 1024)}),
            )
        except (ConnectionError, asyncio.IncompleteReadError):
            status = 0  # the server closed it before answering: counted as such
        finally:
            alone.close()
    load.note(f"bad:{what}", status)


async def connection_loop(load: Load, seed: int) -> None:
    rng = random.Random(seed)
    kinds, weights = list(MIX), list(MIX.values())
    conn = Connection(load.port)
    try:
        while time.monotonic() < load.stop_at:
            kind = rng.choices(kinds, weights)[0]
            try:
                await one_request(load, conn, rng, kind)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                load.failures[f"{kind}: {exc.__class__.__name__}"] += 1
                conn.close()
                await asyncio.sleep(0.05)
    finally:
        conn.close()


async def slow_lane(load: Load, send_every: float, create_every: float) -> None:
    """A `/send` every `send_every` seconds and a `/create` every `create_every` (each is an
    Argon2id at the production parameters in a worker: a few of them)."""
    conn = Connection(load.port)
    rng = random.Random(99)
    next_send = time.monotonic()
    next_create = time.monotonic() + create_every / 2
    try:
        while time.monotonic() < load.stop_at:
            now = time.monotonic()
            try:
                if now >= next_create:
                    next_create += create_every
                    status, _ = await conn.request(
                        "/create", load.auth(), body({"password": f"memory bench {rng.random()}"})
                    )
                    load.note("create", status)
                elif now >= next_send:
                    next_send += send_every
                    sent = {
                        "userId": rng.choice(load.users),
                        "assetId": ETH,
                        "recipient": RECIPIENT,
                        "amount": "0.01",
                        "password": load.password,
                    }
                    status, _ = await conn.request(
                        "/send",
                        {**load.auth(), "X-Request-Id": f"memory-{os.urandom(8).hex()}"},
                        body(sent),
                    )
                    load.note("send", status)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                load.failures[f"slow lane: {exc.__class__.__name__}"] += 1
                conn.close()
            await asyncio.sleep(max(0.0, min(next_send, next_create) - time.monotonic()))
    finally:
        conn.close()


async def drive(load: Load, seconds: float, args: argparse.Namespace, sampler: Any) -> None:
    load.stop_at = time.monotonic() + seconds
    tasks = [
        asyncio.create_task(connection_loop(load, args.seed * 1000 + n))
        for n in range(args.connections)
    ]
    tasks.append(asyncio.create_task(slow_lane(load, args.send_every, args.create_every)))
    if sampler is not None:
        tasks.append(asyncio.create_task(sampler))
    await asyncio.gather(*tasks)


# -- the workers' memory -----------------------------------------------------------------------
def worker_pids(server_pid: int) -> list[int]:
    """granian's workers: the server's live children but the `multiprocessing` resource
    tracker (as `tests/integration/hardening/hardening_support.Server.worker_pids`)."""
    import psutil

    try:
        children = psutil.Process(server_pid).children()
    except psutil.NoSuchProcess:
        return []
    pids = []
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            if child.status() != psutil.STATUS_ZOMBIE and not any(
                "resource_tracker" in part for part in child.cmdline()
            ):
                pids.append(child.pid)
    return sorted(pids)


def memory_of(pid: int) -> tuple[float, float]:
    """(RSS, its anonymous part) in MB, from /proc (the anonymous part is the heap: what
    the process allocated, not the libraries it maps)."""
    rss = anon = 0.0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("RssAnon:"):
                anon = int(line.split()[1]) / 1024
    return rss, anon


#: Reads of each sample, this far apart: a `/send` or `/create` holds an Argon2id's 64 MiB
#: for a fraction of a second (then gives it back), so a sample is the smallest of its reads
#: (the worker's memory between two of them) and the largest is kept as its peak.
READS, READ_GAP = 5, 0.25


@dataclass
class Sample:
    phase: str  # "load" or "idle"
    at: float  # seconds since the load began
    rss: dict[int, tuple[float, float]]  # worker pid -> (RSS, anon) MB, the smallest read
    peak: dict[int, float]  # worker pid -> the largest RSS read
    served: int


class Samples:
    def __init__(self, server_pid: int, load: Load) -> None:
        self.server_pid = server_pid
        self.load = load
        self.taken: list[Sample] = []
        self.began = time.monotonic()
        self.workers: list[int] = []  # in order of first sight: w1, w2, ...

    async def take(self, phase: str) -> Sample:
        pids = worker_pids(self.server_pid)
        for pid in pids:
            if pid not in self.workers:
                if self.taken:
                    print(f"  ! a new worker process {pid} (a worker was replaced?)")
                self.workers.append(pid)
        at = time.monotonic() - self.began
        reads: dict[int, list[tuple[float, float]]] = {p: [] for p in pids}
        for n in range(READS):
            if n:
                await asyncio.sleep(READ_GAP)
            for pid in pids:
                reads[pid].append(memory_of(pid))
        served = sum(self.load.served.values())
        sample = Sample(
            phase,
            at,
            {p: min(r) for p, r in reads.items()},
            {p: max(rss for rss, _ in r) for p, r in reads.items()},
            served,
        )
        previous = self.taken[-1] if self.taken else None
        self.taken.append(sample)
        rate = ""
        if previous is not None and sample.at > previous.at:
            rate = f"{(served - previous.served) / (sample.at - previous.at):7.0f} req/s"
        cells = "  ".join(
            f"w{self.workers.index(p) + 1} {rss:6.1f} MB (anon {anon:6.1f}, peak {sample.peak[p]:6.1f})"
            for p, (rss, anon) in sample.rss.items()
        )
        print(f"  {phase:4} t={sample.at:6.0f} s  {cells}  {rate}", flush=True)
        return sample

    async def every(self, seconds: float, until: float, phase: str) -> None:
        while True:
            await asyncio.sleep(max(0.0, min(seconds, until - time.monotonic())))
            await self.take(phase)
            if time.monotonic() >= until - 0.5:
                return


def slope_per_10min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) points, in MB per 10 minutes."""
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 0.0 if den == 0 else sum((x - mx) * (y - my) for x, y in points) / den * 600


def summary(samples: Samples, seconds: float, load: Load) -> None:
    loaded = [s for s in samples.taken if s.phase == "load"]
    idle = [s for s in samples.taken if s.phase == "idle"]
    if not loaded:
        return

    def near(at: float) -> Sample:
        return min(loaded, key=lambda s: abs(s.at - at))

    marks = [("start", near(0.0))] + [(f"{q}/4", near(seconds * q / 4)) for q in (1, 2, 3, 4)]
    print(
        f"\nRSS per worker, MB (anonymous part in brackets); load {seconds:.0f} s, "
        f"{len(loaded)} samples, each the smallest of {READS} reads {READ_GAP} s apart; "
        "peak: the largest read (an Argon2id's 64 MiB in flight)"
    )
    head = f"{'worker':7} " + " ".join(f"{name + ' t=' + str(int(s.at)):>16}" for name, s in marks)
    head += f" {'max':>8} {'peak':>8} {'slope 2nd half':>15} {'idle end':>16}"
    print(head)
    print("-" * len(head))
    for index, pid in enumerate(samples.workers):
        cells = []
        for _, sample in marks:
            rss, anon = sample.rss.get(pid, (0.0, 0.0))
            cells.append(f"{rss:7.1f} ({anon:6.1f})")
        top = max((s.rss[pid][0] for s in loaded if pid in s.rss), default=0.0)
        peak = max((s.peak[pid] for s in loaded if pid in s.peak), default=0.0)
        half = [(s.at, s.rss[pid][0]) for s in loaded if pid in s.rss and s.at >= seconds / 2]
        end = idle[-1].rss.get(pid, (0.0, 0.0)) if idle else (0.0, 0.0)
        print(
            f"w{index + 1:<6} "
            + " ".join(f"{c:>16}" for c in cells)
            + f" {top:8.1f} {peak:8.1f} {slope_per_10min(half):+11.1f} MB/10min"
            + f" {end[0]:7.1f} ({end[1]:6.1f})"
        )
    print("\nrequests served by kind (status: count)")
    kinds = sorted({k for k, _ in load.served})
    total = sum(load.served.values())
    for kind in kinds:
        statuses = sorted((s, n) for (k, s), n in load.served.items() if k == kind)
        print(
            f"  {kind:22} {sum(n for _, n in statuses):9,}  "
            + ", ".join(f"{s}: {n:,}" for s, n in statuses)
        )
    print(f"  {'total':22} {total:9,}  ({total / seconds:.0f} req/s over the load)")
    errors = sum(n for (_, s), n in load.served.items() if s >= 500)
    if errors:
        print(f"  ! {errors} answers were 5xx")
    if load.failures:
        print("  client-side failures: " + ", ".join(f"{k} x{n}" for k, n in load.failures.items()))


def trim_workers(pids: list[int]) -> None:
    """glibc's `malloc_trim(0)` in each worker (through gdb): how much of its RSS was memory
    the allocator held free rather than objects the worker keeps."""
    gdb = shutil.which("gdb")
    if gdb is None:
        print("\n--trim: gdb is not installed; nothing trimmed")
        return
    print("\nmalloc_trim(0) in each worker (gdb), RSS MB before -> after:")
    for index, pid in enumerate(pids):
        before = memory_of(pid)
        done = subprocess.run(
            [gdb, "-p", str(pid), "-batch", "-ex", "call (int) malloc_trim(0)"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        after = memory_of(pid)
        note = "" if done.returncode == 0 else f" (gdb exited {done.returncode})"
        print(
            f"  w{index + 1}: {before[0]:7.1f} -> {after[0]:7.1f} "
            f"(anon {before[1]:6.1f} -> {after[1]:6.1f}){note}"
        )


# -- tracemalloc snapshots ---------------------------------------------------------------------
def snapshot_workers(
    pids: list[int], folder: Path, label: str, timeout: float = 60.0
) -> dict[int, Path]:
    """SIGUSR2 to each worker; the snapshot file each wrote (`walletcore_litestar.memory`)."""
    before = {p: set(folder.glob(f"worker-{p}-*.tracemalloc")) for p in pids}
    for pid in pids:
        os.kill(pid, signal.SIGUSR2)
    found: dict[int, Path] = {}
    deadline = time.monotonic() + timeout
    while len(found) < len(pids) and time.monotonic() < deadline:
        for pid in pids:
            new = set(folder.glob(f"worker-{pid}-*.tracemalloc")) - before[pid]
            if new and pid not in found:
                found[pid] = max(new, key=lambda p: p.stat().st_mtime)
        time.sleep(0.2)
    print(f"  tracemalloc snapshot '{label}': {len(found)}/{len(pids)} workers", flush=True)
    return found


def compare_snapshots(
    first: Path, second: Path, what: str, top: int = 15, *, largest: bool = False
) -> None:
    import tracemalloc

    old, new = tracemalloc.Snapshot.load(str(first)), tracemalloc.Snapshot.load(str(second))
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
    old, new = old.filter_traces(ignore), new.filter_traces(ignore)
    stats = new.compare_to(old, "lineno")
    total = sum(s.size_diff for s in stats)
    print(
        f"\n{what}: traced memory {sum(s.size for s in stats) / MB:+.1f} MB now, "
        f"{total / MB:+.2f} MB since; the lines that grew most:"
    )
    for stat in stats[:top]:
        frame = stat.traceback[0]
        print(
            f"  {stat.size_diff / MB:+8.2f} MB {stat.count_diff:+9,} blocks  "
            f"{short_path(frame.filename)}:{frame.lineno}"
        )
    if largest:
        print(f"  where the traced memory is at the end ({what}), the largest lines:")
        for stat in new.statistics("lineno")[:top]:
            frame = stat.traceback[0]
            print(
                f"  {stat.size / MB:8.2f} MB {stat.count:9,} blocks  "
                f"{short_path(frame.filename)}:{frame.lineno}"
            )
    by_trace = new.compare_to(old, "traceback")[:3]
    for stat in by_trace:
        print(f"  {stat.size_diff / MB:+.2f} MB allocated through:")
        for frame in list(stat.traceback)[-8:]:
            print(f"      {short_path(frame.filename)}:{frame.lineno}")


def short_path(name: str) -> str:
    for marker in ("/site-packages/", "/src/", "/lib/python3"):
        if marker in name:
            return name.split(marker, 1)[1]
    return name


# -- set-up ----------------------------------------------------------------------------------
def cli_batch(env: dict[str, str], commands: list[list[str]]) -> list[Any]:
    """Several `walletcore` commands in one interpreter (one start-up, not one each)."""
    done = subprocess.run(
        [sys.executable, __file__, "--cli-batch", json.dumps(commands)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"walletcore {commands}: {done.stderr[-2000:]}")
    return [json.loads(out) if out.strip() else None for out in json.loads(done.stdout)]


def run_cli_batch(commands: list[list[str]]) -> int:
    import io

    from walletcore_cli import main as cli

    outputs = []
    for argv in commands:
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured):
            code = cli(argv)
        if code != 0:
            print(f"walletcore {' '.join(argv)} exited {code}", file=sys.stderr)
            return 1
        outputs.append(captured.getvalue())
    sys.stdout.write(json.dumps(outputs))
    return 0


def prepare(args: argparse.Namespace, tmp: Path) -> tuple[dict[str, str], str]:
    """The environment of the server and the CLI, on a migrated database; the asyncpg DSN
    of the PostgreSQL database (or the SQLite file's path)."""
    from walletcore_sql import migrate
    from walletcore_sql.engine import sqlite_url

    home = tmp / "home"
    home.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WALLETCORE_")}
    env.update(
        {
            "WALLETCORE_HOME": str(home),
            "WALLETCORE_PROFILE": "sandbox",
            "WALLETCORE_REPO": "sql",
            "WALLETCORE_JOBS": "inprocess",
        }
    )
    if args.db == "pg":
        name = asyncio.run(http_bench.pg_create_database(args.pg_url, DB_PREFIX))
        if name is None:
            raise SystemExit(f"PostgreSQL unreachable at {args.pg_url}")
        admin = args.pg_url
        http_bench._CLEANUPS.append(
            lambda: off_loop(lambda: asyncio.run(http_bench.pg_drop_database(admin, name)))
        )
        url, where = http_bench.pg_urls(args.pg_url, name)
        env["WALLETCORE_DATABASE_URL"] = url
        print(f"PostgreSQL database {name}", flush=True)
    else:
        where = str(home / "walletcore.db")
        url = sqlite_url(Path(where))
        print(f"SQLite {where}", flush=True)
    migrate.upgrade(url)
    return env, where


def fill_history(args: argparse.Namespace, where: str, client_id: str) -> list[str]:
    """`--trades` past trades (92 % of them terminal) over users of ~100 each, written as
    `http_bench.py` fills its database; the users' ids."""
    from walletcore.domain.ids import new_id

    if not args.trades:
        return []
    users = [new_id() for _ in range(max(1, args.trades // 100))]
    started = time.monotonic()
    if args.db == "pg":
        asyncio.run(http_bench.fill_pg(where, client_id, users, args.trades))
    else:
        http_bench.fill_sqlite(Path(where), client_id, users, args.trades)
    print(
        f"history: {args.trades:,} trades over {len(users):,} users in "
        f"{time.monotonic() - started:.1f} s",
        flush=True,
    )
    return users


def start_server(args: argparse.Namespace, env: dict[str, str], tmp: Path) -> tuple[Any, int, Path]:
    port = http_bench.free_port()
    log = tmp / "server.log"
    server = http_bench.spawn(
        [
            str(BIN / "walletcore"),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(args.workers),
            "--server",
            "granian",
            "--log-level",
            args.log_level,
        ],
        env,
        log,
    )
    http_bench.wait_ready(port, "/auth", server, log)
    deadline = time.monotonic() + 60
    while len(worker_pids(server.pid)) < args.workers and time.monotonic() < deadline:
        time.sleep(0.2)
    return server, port, log


def provision(
    args: argparse.Namespace,
    env: dict[str, str],
    port: int,
    issued: dict[str, str],
    history: list[str],
) -> Load:
    client_id, api_key = issued["clientId"], issued["apiKey"]
    token = http_bench.ok(
        *http_bench.post(port, "/auth", {"x-client-id": client_id, "x-api-key": api_key}, None)[:2],
        "/auth",
    )["token"]
    auth = {"Authorization": f"Bearer {token}"}
    http_bench.wait_priced(port, auth)
    password = "memory bench password"
    started = time.monotonic()
    users, funds = [], []
    for _ in range(args.users):
        created = http_bench.ok(
            *http_bench.post(port, "/create", auth, {"password": password})[:2], "/create"
        )
        users.append(created["userId"])
        addresses = created["addresses"]
        funds += [
            [
                "sandbox",
                "fund",
                "--chain",
                "BITCOIN",
                "--address",
                addresses["BITCOIN"],
                "--asset",
                str(BTC),
                "--amount",
                "1000",
            ],
            [
                "sandbox",
                "fund",
                "--chain",
                "ETHEREUM",
                "--address",
                addresses["ETHEREUM"],
                "--asset",
                str(ETH),
                "--amount",
                "100",
            ],
        ]
    cli_batch(env, funds)
    print(f"{len(users)} users made and funded in {time.monotonic() - started:.1f} s", flush=True)
    return Load(port, client_id, api_key, token, users, password, history)


# -- the caches at their bounds ----------------------------------------------------------------
def measure(fill: Callable[[], Any]) -> float:
    """MB still allocated by `fill()` once it returned (what it built and keeps)."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = fill()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del kept
    return (after - before) / MB


def sample_trade(status: str, client_id: str) -> Any:
    """A trade as a sell of the load leaves it: an open quote, or a completed (approved,
    executed, a venue reference), cancelled or expired one; its own ids and values."""
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta
    from decimal import Decimal

    from walletcore.domain.assets import Fiat
    from walletcore.domain.ids import new_id
    from walletcore.domain.trade import Figures, FixedLeg, Quote, Side, Trade, TradeStatus

    rng = random.Random()
    now = datetime.now(UTC)
    crypto = Decimal(rng.randrange(1, 10**6)).scaleb(-6)
    price = Decimal(rng.randrange(10**9, 10**10)).scaleb(-4)
    fiat_amount = (crypto * price).quantize(Decimal("0.000001"))
    trade = Trade(
        trade_id=new_id(),
        client_id=client_id,
        user_id=new_id(),
        side=Side.SELL,
        asset_id=BTC,
        symbol="BTC",
        fiat=Fiat.EUR,
        fixed_leg=FixedLeg.CRYPTO,
        quote=Quote(crypto, fiat_amount, price, now + timedelta(seconds=60)),
        status=TradeStatus(status),
        created_at=now,
    )
    if status != "completed":
        return trade if status == "open" else replace(trade, completed_at=now)
    figures = Figures(crypto, fiat_amount, price)
    executed = Figures(crypto, fiat_amount + Decimal("0.000001"), price + Decimal("0.0001"))
    return replace(
        trade, approved_at=now, completed_at=now, approved=figures, executed=executed,
        reference=f"SBX-{rng.randrange(10**12)}",
    )  # fmt: skip


def cache_fills() -> list[tuple[str, int, Callable[[], Any]]]:
    """(what, its bound, a function that fills one to its bound and returns it)."""
    from walletcore.domain.assets import Chain
    from walletcore.domain.clients import ApiClient
    from walletcore.domain.ids import new_id
    from walletcore.services import auth as auth_module
    from walletcore.services import expiries as expiries_module
    from walletcore.services import holdings as holdings_module
    from walletcore.services import remembered_quotes as remembered_module
    from walletcore.services.tokens import TokenClaims, TokenSigner
    from walletcore_litestar import services as services_module
    from walletcore_litestar import tokens as tokens_module
    from walletcore_sql import rows as rows_module

    client = new_id()

    def terminal_views() -> Any:
        views = services_module.Services(None)  # type: ignore[arg-type] - its views only
        for n in range(services_module.TERMINAL_VIEWS_SIZE):
            views.trade_view(sample_trade("completed" if n % 3 else "expired", client))
        return views

    def terminal_trades() -> Any:
        trades = rows_module.TradeRows()
        for n in range(rows_module.TERMINAL_TRADES_SIZE):
            trade = sample_trade("completed" if n % 3 else "expired", client)
            trades._known[trade.trade_id] = trade  # as its __call__ keeps one
        return trades

    def quotes() -> Any:
        remembered = remembered_module.RememberedQuotes(None, None)  # type: ignore[arg-type] - its memory only
        for _ in range(remembered_module.QUOTES_REMEMBERED):
            remembered._remember(sample_trade("open", client))
        return remembered

    def expired() -> Any:
        expiries = expiries_module.SharedExpiries(None)  # type: ignore[arg-type] - its memory only
        for _ in range(expiries_module.EXPIRED_REMEMBERED):
            trade = sample_trade("expired", client)
            expiries._expired[trade.trade_id] = trade  # as a finished write keeps one
        return expiries

    def clients() -> Any:
        cache = {}
        for _ in range(auth_module.CLIENT_CACHE_SIZE):
            one = ApiClient(new_id(), "an api client name", os.urandom(32).hex())
            cache[one.client_id] = (time.monotonic(), one)
        return cache

    def tokens() -> Any:
        from datetime import UTC, datetime, timedelta

        signer = TokenSigner(os.urandom(32))
        now = datetime.now(UTC).replace(microsecond=0)
        issued = [
            signer.sign(TokenClaims(client, 1, now, now + timedelta(minutes=15)))
            for _ in range(tokens_module.DEFAULT_CAPACITY)
        ]
        cache = tokens_module.CachingTokenSigner(os.urandom(32))
        cache._verified = {token: signer.verify(token) for token in issued}
        del issued
        return cache

    def addresses() -> Any:
        kept = {}
        for n in range(holdings_module.REMEMBERED_ADDRESSES):
            kept[(client, new_id(), Chain.BITCOIN)] = f"bcrt1q{os.urandom(20).hex()[:38]}{n}"
        return kept

    def confirmed() -> Any:
        from walletcore_chains.bitcoin.backend import ConfirmedViews, TxIn, TxOut, TxView

        views = ConfirmedViews()

        def address() -> str:
            return f"bc1q{os.urandom(20).hex()[:38]}"

        for _ in range(CONFIRMED_REMEMBERED):  # two inputs, two outputs: a payment
            views.keep(TxView(
                os.urandom(32).hex(),
                tuple(TxIn(os.urandom(32).hex(), n, address(), 10**6 + n) for n in range(2)),
                tuple(TxOut(address(), 10**5 + n) for n in range(2)),
                1410, 800_000, 1_700_000_000, vsize=141,
            ))  # fmt: skip
        return views

    def watched() -> Any:
        kept: dict[str, None] = {}
        for _ in range(WATCHED_REMEMBERED):
            kept[f"bc1q{os.urandom(20).hex()[:38]}"] = None
        return kept

    def gates() -> Any:
        from walletcore.nonces import LocalNonceLeases
        from walletcore_chains.evm.nonces import GATES_REMEMBERED, NonceBook

        book = NonceBook(leases=LocalNonceLeases(), chain="eip155:1")

        async def made() -> None:  # a gate belongs to the loop that made it
            for _ in range(GATES_REMEMBERED):
                book._gate(f"0x{os.urandom(20).hex()}")

        asyncio.run(made())
        return book

    from walletcore_chains.bitcoin.backend import CONFIRMED_REMEMBERED
    from walletcore_chains.bitcoin.core import WATCHED_REMEMBERED
    from walletcore_chains.evm.nonces import GATES_REMEMBERED

    return [
        ("Services._terminal_views (views of terminal trades)",
         services_module.TERMINAL_VIEWS_SIZE, terminal_views),
        ("TradeRows._known (terminal trades built from rows)",
         rows_module.TERMINAL_TRADES_SIZE, terminal_trades),
        ("RememberedQuotes._quoted (open quotes of this process)",
         remembered_module.QUOTES_REMEMBERED, quotes),
        ("SharedExpiries._expired (quotes this process expired)",
         expiries_module.EXPIRED_REMEMBERED, expired),
        ("AuthService._cache (api clients read)", auth_module.CLIENT_CACHE_SIZE, clients),
        ("CachingTokenSigner._verified (tokens verified)", tokens_module.DEFAULT_CAPACITY, tokens),
        ("WalletHoldings._addresses (wallet addresses of sellers)",
         holdings_module.REMEMBERED_ADDRESSES, addresses),
        ("bitcoin ConfirmedViews (confirmed transactions decoded)", CONFIRMED_REMEMBERED,
         confirmed),
        ("bitcoin CoreBackend._watched (addresses in the node's wallet)", WATCHED_REMEMBERED,
         watched),
        ("NonceBook._gates (addresses that sent; idle ones forgotten)", GATES_REMEMBERED,
         gates),
    ]  # fmt: skip


def cache_sizes() -> None:
    """Each process cache of a server worker filled to its bound, with entries like a
    load's, and the memory it then holds (a worker has one of each)."""
    print(f"{'cache':63} {'bound':>9} {'MB at bound':>12} {'bytes/entry':>12}")
    total = 0.0
    for name, bound, fill in cache_fills():
        mb = measure(fill)
        total += mb
        print(f"{name:63} {bound:9,} {mb:12.1f} {mb * MB / bound:12,.0f}", flush=True)
    print(f"{'all of them':63} {'':9} {total:12.1f}")


# -- main --------------------------------------------------------------------------------------
def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 s of load, 15 s idle")
    parser.add_argument("--seconds", type=float, default=None, help="of load (default 600)")
    parser.add_argument("--idle", type=float, default=None, help="after it (default 30)")
    parser.add_argument("--warmup", type=float, default=None, help="before it (default 30)")
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--db", choices=["pg", "sqlite"], default="pg")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument(
        "--trades",
        type=int,
        default=None,
        help="past trades of users without wallets, for /trades (default 300,000; quick 30,000)",
    )
    parser.add_argument("--send-every", type=float, default=3.0)
    parser.add_argument("--create-every", type=float, default=60.0)
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="snapshots of each worker at the start, middle and end of the "
        "load, compared (the RSS of such a run is not the service's)",
    )
    parser.add_argument(
        "--trim",
        action="store_true",
        help="at the end, glibc's malloc_trim(0) in each worker (gdb), RSS before and after",
    )
    parser.add_argument(
        "--caches",
        action="store_true",
        help="only the caches at their bounds, in this process (no server)",
    )
    args = parser.parse_args()
    args.seconds = max(10.0, min(args.seconds or (60.0 if args.quick else 600.0), 7200.0))
    args.idle = max(
        0.0, min(args.idle if args.idle is not None else (15.0 if args.quick else 30.0), 1800.0)
    )
    args.warmup = max(
        0.0, args.warmup if args.warmup is not None else (10.0 if args.quick else 30.0)
    )
    args.sample = max(1.0, args.sample)
    args.connections = max(1, min(args.connections, 256))
    args.users = max(1, min(args.users, 200))
    default_trades = 30_000 if args.quick else 300_000
    args.trades = max(0, min(args.trades if args.trades is not None else default_trades, 10**7))
    return args


def stop_on_signal(signum: int, _frame: Any) -> None:
    """Unwind (the event loop, if one runs, then `main`'s cleanup): SIGINT, SIGTERM."""
    raise SystemExit(128 + signum)


def off_loop(work: Callable[[], Any]) -> Any:
    """`work` (which runs an event loop of its own) in a thread: callable from inside a loop."""
    from walletcore_sql.testing import off_loop as run_off_loop

    return run_off_loop(work)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--cli-batch":
        return run_cli_batch(json.loads(sys.argv[2]))
    args = parse_args()
    if args.caches:
        cache_sizes()
        return 0
    atexit.register(http_bench._cleanup)
    signal.signal(signal.SIGTERM, stop_on_signal)
    signal.signal(signal.SIGINT, stop_on_signal)
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="walletcore-memory-"))
    http_bench._CLEANUPS.insert(0, lambda: shutil.rmtree(tmp, ignore_errors=True))
    snapshots = tmp / "snapshots"
    try:
        env, where = prepare(args, tmp)
        issued = cli_batch(env, [["clients", "create", "--name", "memory bench"]])[0]
        history = fill_history(args, where, issued["clientId"])
        if args.tracemalloc:
            env["WALLETCORE_MEMORY_SNAPSHOTS"] = str(snapshots)
        server, port, _ = start_server(args, env, tmp)
        load = provision(args, env, port, issued, history)
        print(
            f"workers {worker_pids(server.pid)}; warm-up {args.warmup:.0f} s, load "
            f"{args.seconds:.0f} s over {args.connections} connections, idle {args.idle:.0f} s",
            flush=True,
        )
        if args.tracemalloc:  # the first SIGUSR2 starts tracing (snapshots: the later ones)
            for pid in worker_pids(server.pid):
                os.kill(pid, signal.SIGUSR2)
        if args.warmup:
            asyncio.run(drive(load, args.warmup, args, None))
        load.served.clear()
        load.failures.clear()
        samples = Samples(server.pid, load)
        asyncio.run(samples.take("load"))
        taken: list[dict[int, Path]] = []
        if args.tracemalloc:
            taken.append(snapshot_workers(samples.workers, snapshots, "start"))
            samples.began = time.monotonic()

            async def halves() -> None:
                half = args.seconds / 2
                for label in ("middle", "end"):
                    until = time.monotonic() + half
                    await samples.every(args.sample, until, "load")
                    taken.append(
                        await asyncio.to_thread(snapshot_workers, samples.workers, snapshots, label)
                    )

            asyncio.run(drive(load, args.seconds, args, halves()))
        else:
            until = time.monotonic() + args.seconds
            asyncio.run(drive(load, args.seconds, args, samples.every(args.sample, until, "load")))
        load_seconds = samples.taken[-1].at
        if args.idle:
            asyncio.run(samples.every(args.sample, time.monotonic() + args.idle, "idle"))
        summary(samples, load_seconds, load)
        if args.trim:
            trim_workers(samples.workers)
        if len(taken) == 3:
            for index, pid in enumerate(samples.workers):
                if all(pid in t for t in taken):
                    compare_snapshots(taken[0][pid], taken[1][pid], f"w{index + 1}, first half")
                    compare_snapshots(
                        taken[1][pid], taken[2][pid], f"w{index + 1}, second half", largest=True
                    )
    finally:
        http_bench._cleanup()
    print(f"\ntotal {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
