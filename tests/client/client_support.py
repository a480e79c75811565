"""The served sandbox the client tests talk to, and the fault-injecting proxy in front of it.

`Sandbox` is a real `walletcore serve` process (granian) on a loopback port, with its own
WALLETCORE_HOME; its operator commands are the `walletcore` CLI in subprocesses.
`FaultProxy` is a threaded HTTP proxy (httpx forwards each request upstream) that counts
what reaches the service and, when armed, answers a request itself: `expire` answers
`401 Missing or expired token` (a token that expired mid-run), `drop` forwards the request
and closes the connection instead of answering (an answer lost on the way back).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

BIN = Path(sys.executable).parent
SRC = Path(__file__).resolve().parents[2] / "src"
PASSWORD = "correct horse battery"
#: another sandbox ETHEREUM address (a recipient outside the client's wallets)
RECIPIENT = "0x000000000000000000000000000000000000dEaD"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Sandbox:
    """`walletcore serve` on a free loopback port, its home under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("WALLETCORE_")}
        self.env["WALLETCORE_HOME"] = str(root / "home")
        self.env["WALLETCORE_SANDBOX_CONFIRM_SECONDS"] = "0.5"
        self.env["WALLETCORE_JOBS_DEPOSITS_SECONDS"] = "0.2"
        self.env["PYTHONPATH"] = os.pathsep.join(
            [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def cli(self, *argv: str, env: dict[str, str] | None = None) -> Any:
        """One `walletcore` command (with `env` added); it must succeed; its JSON answer."""
        done = subprocess.run(
            [str(BIN / "walletcore"), *argv],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"walletcore {argv}: {done.stderr}"
        return json.loads(done.stdout)

    def fund(self, chain: str, address: str, asset_id: int, amount: str) -> Any:
        return self.cli(
            "sandbox", "fund", "--chain", chain, "--address", address,
            "--asset", str(asset_id), "--amount", amount,
        )  # fmt: skip

    def start(self) -> None:
        log = (self.root / "server.log").open("wb")
        self.proc = subprocess.Popen(
            [str(BIN / "walletcore"), "serve", "--port", str(self.port)],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{self.base_url}/health/live", timeout=1)
                return
            except httpx.TransportError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((self.root / "server.log").read_text()) from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is None:
            return
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@dataclass(frozen=True)
class Credentials:
    """An api client's id and key (from `walletcore clients create`)."""

    client_id: str
    api_key: str


@dataclass
class Seen:
    """One request that reached the proxy."""

    path: str
    request_id: str | None
    answered: str  # "upstream", "expired" or "dropped"


@dataclass
class FaultProxy:
    """A loopback HTTP proxy in front of `upstream` that can inject faults."""

    upstream: str
    seen: list[Seen] = field(default_factory=list)
    #: path -> how many of its next requests get `401 Missing or expired token`
    expire: Counter[str] = field(default_factory=Counter)
    #: path -> how many of its next requests are forwarded and then left unanswered
    drop: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.http = httpx.Client(base_url=self.upstream, timeout=60)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                proxy.handle(self, "GET")

            def do_POST(self) -> None:
                proxy.handle(self, "POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def reset(self) -> None:
        with self.lock:
            self.seen.clear()
            self.expire.clear()
            self.drop.clear()

    def count(self, path: str) -> int:
        with self.lock:
            return sum(1 for one in self.seen if one.path == path)

    def request_ids(self, path: str) -> list[str | None]:
        with self.lock:
            return [one.request_id for one in self.seen if one.path == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.http.close()

    def handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        content = handler.rfile.read(length) if length else b""
        path = handler.path
        request_id = handler.headers.get("X-Request-Id")
        with self.lock:
            if self.expire[path] > 0:
                self.expire[path] -= 1
                action = "expired"
            elif self.drop[path] > 0:
                self.drop[path] -= 1
                action = "dropped"
            else:
                action = "upstream"
            self.seen.append(Seen(path, request_id, action))
        if action == "expired":
            body = json.dumps(
                {"message": "Missing or expired token", "error": "401", "requestId": "proxy"}
            ).encode()
            self._answer(handler, 401, {"Content-Type": "application/json"}, body)
            return
        forwarded = {
            k: v
            for k, v in handler.headers.items()
            if k.lower() not in ("host", "content-length", "connection", "accept-encoding")
        }
        response = self.http.request(method, path, content=content or None, headers=forwarded)
        if action == "dropped":
            handler.close_connection = True  # the service acted; its answer never arrives
            return
        kept = {
            k: v
            for k, v in response.headers.items()
            if k.lower() in ("content-type", "x-request-id", "cache-control")
        }
        self._answer(handler, response.status_code, kept, response.content)

    @staticmethod
    def _answer(
        handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes
    ) -> None:
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
