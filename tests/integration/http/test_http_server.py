"""A real server (`walletcore serve`, granian) on a loopback port, over real HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WALLETCORE_")}
    env["WALLETCORE_HOME"] = str(tmp_path / "home")
    created = subprocess.run(
        [str(BIN / "walletcore"), "clients", "create", "--name", "Real"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    credentials = json.loads(created.stdout)
    port = free_port()
    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen(
        [str(BIN / "walletcore"), "serve", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.post(f"{base}/prices", timeout=1)
                break
            except httpx.TransportError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((tmp_path / "server.log").read_text()) from None
                time.sleep(0.2)
        yield base, credentials
    finally:
        os.killpg(server.pid, signal.SIGINT)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def test_auth_and_prices_over_real_http(served: tuple[str, dict[str, str]]) -> None:
    base, credentials = served
    with httpx.Client(base_url=base, timeout=10) as http:
        auth = http.post(
            "/auth",
            headers={"x-client-id": credentials["clientId"], "x-api-key": credentials["apiKey"]},
        )
        assert auth.status_code == 200, auth.text
        token = auth.json()["result"]["token"]
        prices = http.post(
            "/prices", headers={"Authorization": f"Bearer {token}", "X-Request-Id": "real-1"}
        )
        assert prices.status_code == 200
        assert prices.json()["requestId"] == "real-1" == prices.headers["x-request-id"]
        assert set(prices.json()["result"]) >= {"BTC", "ETH", "USDT"}

        missing = http.get("/nowhere")
        assert missing.status_code == 404 and missing.json()["error"] == "404"

        # A streamed (chunked) body over the cap is refused as the bytes arrive (last: the
        # server closes that connection rather than read the rest of the body).
        def chunks() -> Iterator[bytes]:
            for _ in range(80):
                yield b" " * 1024

        big = http.post("/trade", content=chunks(), headers={"Authorization": f"Bearer {token}"})
        assert big.status_code == 400
        assert big.json()["message"] == "Request body too large; the limit is 65536 bytes"
