#!/usr/bin/env python3
"""HTTP benchmark: the real `walletcore serve` against a bare Litestar app, same ASGI server.

    .venv/bin/python bench/http_bench.py [--server granian|uvicorn|both] [--seconds 5]
        [--rounds 3] [--connections 32] [--workers 1] [--loadgen wrk|python]
    BENCH_LOG_LEVEL=warning ...   # the real server without its per-request log line

What it does, all on loopback and bounded in time:
1. a fresh sandbox home (temp dir): `walletcore clients create` (the CLI), then
   `walletcore serve` on a free port, and a bare Litestar app answering a constant JSON
   body on `POST /const`, served by the same ASGI server with the same worker count;
2. `/auth` once for a token, `/create` + `/sell` once for a trade to poll;
3. drives `/const` (bare), `/prices`, `/config` and `/trade` (token verified on each)
   with `wrk` when installed (`apt-get install wrk`), else with the bundled keep-alive
   raw-socket load generator (`--loadgen python`), each in a second process;
4. in rounds that interleave the bare app and the real one (drift on a shared machine hits
   both), prints the medians of requests/s, p50 and p99 per endpoint and of the
   throughput ratio to the bare app.

Target: `/prices` and `/config` at >= 0.5 of the bare app's requests/s.
It is a program, not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
CONST_BODY = {"result": {"ok": True, "value": "constant"}, "requestId": "0" * 24}


# -- the bare app (imported by the server worker: `http_bench:bare_app`) --------------------
def _make_bare_app() -> Any:
    from litestar import Litestar, post

    @post("/const", status_code=200)
    async def const() -> dict[str, Any]:
        return CONST_BODY

    return Litestar([const], openapi_config=None, logging_config=None)


if os.environ.get("WALLETCORE_BENCH_BARE") == "1":
    bare_app = _make_bare_app()


# -- processes -----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(port: int, path: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            post(port, path, {}, None)
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"server on port {port} did not come up")


def post(port: int, path: str, headers: dict[str, str], body: Any) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else b""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, headers=headers, method="POST"
    )
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def start_real(
    server: str, port: int, workers: int, env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    cmd = [
        str(BIN / "walletcore"),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--server",
        server,
        "--log-level",
        os.environ.get("BENCH_LOG_LEVEL", "info"),
    ]
    return subprocess.Popen(
        cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
    )


def start_bare(server: str, port: int, workers: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "WALLETCORE_BENCH_BARE": "1", "PYTHONPATH": str(HERE)}
    if server == "granian":
        cmd = [
            sys.executable,
            "-m",
            "granian",
            "--interface",
            "asgi",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--log-level",
            "warning",
            "http_bench:bare_app",
        ]
    else:
        cmd = [
            sys.executable,
            "-m",
            "uvicorn",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--no-access-log",
            "--log-level",
            "warning",
            "http_bench:bare_app",
        ]
    return subprocess.Popen(
        cmd,
        env=env,
        cwd=HERE,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# -- load generation -----------------------------------------------------------------------
def run_wrk(
    port: int,
    path: str,
    headers: dict[str, str],
    body: Any,
    seconds: float,
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
            f"-d{seconds:.0f}s",
            "--latency",
            "--timeout",
            "5s",
            "-s",
            str(script),
            f"http://127.0.0.1:{port}{path}",
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 30,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    return {
        "rps": rps,
        "p50": _wrk_ms(re.search(r"\s50%\s+([\d.]+\w+)", out).group(1)),  # type: ignore[union-attr]
        "p99": _wrk_ms(re.search(r"\s99%\s+([\d.]+\w+)", out).group(1)),  # type: ignore[union-attr]
        "bad": float(non2xx.group(1)) if non2xx else 0.0,
        "socket_errors": 1.0 if errors else 0.0,
    }


def _wrk_ms(text: str) -> float:
    value, unit = re.match(r"([\d.]+)(\w+)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def run_python_loadgen(
    port: int, path: str, headers: dict[str, str], body: Any, seconds: float, connections: int
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
        timeout=seconds + 30,
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
        "p99": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        "bad": float(bad),
        "socket_errors": 0.0,
    }


# -- the run ---------------------------------------------------------------------------------
def bench_server(server: str, args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    home = workdir / f"home-{server}"
    env = {
        **os.environ,
        "WALLETCORE_HOME": str(home),
        "WALLETCORE_PROFILE": "sandbox",
        "WALLETCORE_REPO": "sql",  # the default: SQLite under the home
    }
    for name in (
        "WALLETCORE_DATABASE_URL",
        "WALLETCORE_TOKEN_SIGNING_KEY",
        "WALLETCORE_MASTER_KEY",
    ):
        env.pop(name, None)
    created = subprocess.run(
        [str(BIN / "walletcore"), "clients", "create", "--name", "bench"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    credentials = json.loads(created.stdout)

    real_port, bare_port = free_port(), free_port()
    real = start_real(server, real_port, args.workers, env, workdir / f"real-{server}.log")
    bare = start_bare(server, bare_port, args.workers, workdir / f"bare-{server}.log")
    try:
        wait_ready(real_port, "/auth")
        wait_ready(bare_port, "/const")
        status, answer = post(
            real_port,
            "/auth",
            {"x-client-id": credentials["clientId"], "x-api-key": credentials["apiKey"]},
            None,
        )
        assert status == 200, answer
        auth = {"Authorization": "Bearer " + answer["result"]["token"]}
        status, answer = post(real_port, "/create", auth, {"password": "bench-password"})
        assert status == 200, answer
        user_id = answer["result"]["userId"]
        status, answer = post(
            real_port, "/sell", auth, {"userId": user_id, "assetId": 1, "cryptoAmount": "0.01"}
        )
        assert status == 200, answer
        trade_body = {"userId": user_id, "tradeId": answer["result"]["tradeId"]}

        targets = [
            ("bare /const", bare_port, "/const", {}, None),
            ("/prices", real_port, "/prices", auth, None),
            ("/config", real_port, "/config", auth, None),
            ("/trade", real_port, "/trade", auth, trade_body),
        ]

        def drive(port: int, path: str, headers: dict[str, str], body: Any, secs: float) -> Any:
            if args.loadgen == "wrk":
                return run_wrk(port, path, headers, body, secs, args.connections, workdir)
            return run_python_loadgen(port, path, headers, body, secs, args.connections)

        for _, port, path, headers, body in targets:
            drive(port, path, headers, body, 1)  # warm-up
        # Rounds interleave the bare app and the real one, so drift on a shared machine
        # hits both; each ratio is taken within its round, and medians are reported.
        rounds: dict[str, list[dict[str, float]]] = {t[0]: [] for t in targets}
        for _ in range(args.rounds):
            bare_rps = 0.0
            for label, port, path, headers, body in targets:
                result = drive(port, path, headers, body, args.seconds)
                bare_rps = bare_rps or result["rps"]
                rounds[label].append({**result, "ratio": result["rps"] / bare_rps})
        rows: list[dict[str, Any]] = []
        for label, results in rounds.items():
            row: dict[str, Any] = {"server": server, "endpoint": label}
            for key in ("rps", "p50", "p99", "ratio"):
                row[key] = statistics.median(r[key] for r in results)
            row["bad"] = sum(r["bad"] for r in results)
            row["ratios"] = [round(r["ratio"], 2) for r in results]
            rows.append(row)
        return rows
    finally:
        stop(real)
        stop(bare)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--loadgen-child":
        print(json.dumps(asyncio.run(_loadgen(json.loads(sys.argv[2])))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=["granian", "uvicorn", "both"], default="granian")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--loadgen", choices=["wrk", "python"], default="wrk" if shutil.which("wrk") else "python"
    )
    args = parser.parse_args()
    args.seconds = max(1.0, min(args.seconds, 60.0))
    args.connections = max(1, min(args.connections, 256))
    args.rounds = max(1, min(args.rounds, 10))
    servers = ["granian", "uvicorn"] if args.server == "both" else [args.server]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="walletcore-bench-") as tmp:
        for server in servers:
            rows += bench_server(server, args, Path(tmp))
    print(
        f"\nloadgen={args.loadgen} connections={args.connections} seconds={args.seconds:.0f} "
        f"rounds={args.rounds} workers={args.workers} cpus={os.cpu_count()} "
        f"log-level={os.environ.get('BENCH_LOG_LEVEL', 'info')} (medians over rounds)"
    )
    print(
        f"{'server':8} {'endpoint':12} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'vs bare':>8} {'non-200':>8}  per-round ratios"
    )
    for row in rows:
        print(
            f"{row['server']:8} {row['endpoint']:12} {row['rps']:9.0f} {row['p50']:8.2f} "
            f"{row['p99']:8.2f} {row['ratio']:8.2f} {row['bad']:8.0f}  {row['ratios']}"
        )
    failed = [r for r in rows if r["bad"]]
    if failed:
        print("some responses were not 200: see the non-200 column", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
