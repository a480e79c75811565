"""`walletcore serve --workers 2` for real: `/metrics` from either worker shows the whole
service (prometheus-client's multiprocess mode), JSON log lines carry the request id, and
the metrics directory is private and gone after the server stops."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from operations_support import samples, value

BIN = Path(sys.executable).parent
LIVE = {"method": "GET", "route": "/health/live", "status": "200"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    base: str
    log: Path
    tmp: Path  # the server's TMPDIR: where it makes its metrics directory
    process: subprocess.Popen[bytes]


def serve_two_workers(env: dict[str, str], log: Path) -> tuple[str, subprocess.Popen[bytes]]:
    """`walletcore serve --workers 2` in its own process group; returned once one worker
    answers (the other may still be starting)."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(BIN / "walletcore"), "serve", "--workers", "2", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.get(f"{base}/health/live", timeout=1)
            return base, process
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                stop(process, log)
                raise RuntimeError(log.read_text()) from None
            time.sleep(0.05)


def clean_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("WALLETCORE_") and k != "PROMETHEUS_MULTIPROC_DIR"
    }


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = clean_env()
    env.update(
        WALLETCORE_HOME=str(tmp_path / "home"), WALLETCORE_LOG_FORMAT="json", TMPDIR=str(tmp)
    )
    log = tmp_path / "server.log"
    base, process = serve_two_workers(env, log)
    try:
        yield Served(base, log, tmp, process)
    finally:
        stop(process, log)


def stop(process: subprocess.Popen[bytes], log: Path) -> None:
    """SIGINT to the server's group; a server still up after 30 s (a loaded machine stops
    in a few) fails the test with every worker's stacks (SIGUSR1: server.py) in its log."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        stuck = subprocess.run(
            ["pgrep", "-g", str(process.pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        for pid in stuck:
            if int(pid) != process.pid:  # the workers (the main process has no such handler)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGUSR1)
        time.sleep(1)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        pytest.fail(f"the server did not stop within 30 s after SIGINT:\n{log.read_text()}")


def scrape(base: str) -> dict[object, float]:
    # A new connection each time: the kernel may hand it to either worker.
    answer = httpx.get(f"{base}/metrics", timeout=5, headers={"Connection": "close"})
    assert answer.status_code == 200, answer.text
    return samples(answer.text)


def worker_pids(found: dict[object, float]) -> set[str]:
    return {
        dict(labels)["pid"]
        for (name, labels), up in found.items()
        if name == "walletcore_worker_up" and up == 1
    }


def test_two_workers_show_one_service(served: Served) -> None:
    deadline = time.monotonic() + 15
    while len(worker_pids(scrape(served.base))) < 2:  # the second worker may start later
        assert time.monotonic() < deadline, served.log.read_text()
        time.sleep(0.2)
    (directory,) = served.tmp.iterdir()
    assert directory.name.startswith("walletcore-metrics-")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700

    before = value(scrape(served.base), "walletcore_http_requests_total", **LIVE)
    ids = [f"ops-live-{i}" for i in range(12)]
    for request_id in ids:
        answer = httpx.get(
            f"{served.base}/health/live",
            headers={"X-Request-Id": request_id, "Connection": "close"},
            timeout=5,
        )
        assert answer.status_code == 200 and answer.headers["x-request-id"] == request_id
    # Every scrape, whichever worker answers it, counts every request of both workers.
    totals = {
        value(scrape(served.base), "walletcore_http_requests_total", **LIVE) for _ in range(6)
    }
    assert totals == {before + len(ids)}

    # SIGUSR1 to a worker: its threads' stacks on stderr, and it goes on serving.
    worker = int(min(worker_pids(scrape(served.base))))
    os.kill(worker, signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while "most recent call first" not in served.log.read_text():
        assert time.monotonic() < deadline, served.log.read_text()
        time.sleep(0.1)
    os.kill(worker, 0)  # still running (SIGUSR1's default action would have ended it)

    ready = httpx.get(f"{served.base}/health/ready", headers={"X-Request-Id": "ops-ready"})
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"]["database"]["status"] == "ok"

    stop(served.process, served.log)
    assert list(served.tmp.iterdir()) == []  # the metrics directory went with the server

    lines = [line for line in served.log.read_text().splitlines() if line.startswith("{")]
    entries = [json.loads(line) for line in lines]  # every JSON line parses
    assert all({"time", "level", "logger", "message"} <= set(e) for e in entries)
    by_id = {e.get("requestId"): e for e in entries if e["logger"] == "walletcore.http"}
    for request_id in [*ids, "ops-ready"]:
        entry = by_id[request_id]
        assert entry["level"] == "INFO" and entry["time"].endswith("Z")
        assert f"requestId={request_id}" in entry["message"]
    assert "GET /health/ready" not in served.log.read_text()  # the line keeps its own form
    assert by_id["ops-ready"]["message"].startswith("method=GET path=/health/ready status=200")


def test_ctrl_c_stops_a_server_whose_workers_are_still_starting(tmp_path: Path) -> None:
    """Ctrl-C in a terminal signals the whole process group: each granian worker got SIGINT,
    then its main process's SIGTERM, and a worker still starting hung on the second signal
    (granian's one-slot channel, server.ignore_sigint); 9 of 12 such stops hung before."""
    env = clean_env()
    for attempt in range(3):
        env["WALLETCORE_HOME"] = str(tmp_path / f"home-{attempt}")
        log = tmp_path / f"server-{attempt}.log"
        _, process = serve_two_workers(env, log)  # at once: the second worker may be starting
        stop(process, log)  # SIGINT to the group; fails the test if it does not stop
        assert process.returncode == 0, log.read_text()
        left = subprocess.run(
            ["pgrep", "-g", str(process.pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        assert left == [], left  # no worker outlives the server
