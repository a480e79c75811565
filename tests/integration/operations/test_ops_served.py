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


def start_two_workers(env: dict[str, str], log: Path) -> tuple[int, subprocess.Popen[bytes]]:
    """`walletcore serve --workers 2` in its own process group, its output in `log`."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(BIN / "walletcore"), "serve", "--workers", "2", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return port, process


def group_left(process: subprocess.Popen[bytes]) -> list[str]:
    """The processes still in the server's process group (its workers, after a stop)."""
    return subprocess.run(
        ["pgrep", "-g", str(process.pid)], capture_output=True, text=True, check=False
    ).stdout.split()


def serve_two_workers(env: dict[str, str], log: Path) -> tuple[str, subprocess.Popen[bytes]]:
    """`start_two_workers`, returned once one worker answers (the other may still be
    starting)."""
    port, process = start_two_workers(env, log)
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
        fail_stuck(process, log, "within 30 s after SIGINT")


def fail_stuck(process: subprocess.Popen[bytes], log: Path, how: str) -> None:
    """Fail the test with the stacks of the workers of a server that did not stop (SIGUSR1:
    server.py; the main process has no such handler), after killing it."""
    for pid in group_left(process):
        if int(pid) != process.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGUSR1)
    time.sleep(1)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    pytest.fail(f"the server did not stop {how}:\n{log.read_text()}")


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
        assert group_left(process) == []  # no worker outlives the server


def _spawned(log: Path, process: subprocess.Popen[bytes], count: int) -> None:
    """Until granian logged spawning `count` workers (their apps are loading then)."""
    deadline = time.monotonic() + 30
    while log.read_text(errors="replace").count("Spawning worker-") < count:
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(log.read_text(errors="replace"))
        time.sleep(0.01)


@pytest.mark.parametrize("after", [0.0, 0.5, 1.0])
def test_sigterm_to_the_group_stops_a_server_whose_workers_are_starting(
    tmp_path: Path, after: float
) -> None:
    """systemd's default stop (`KillMode=control-group`) sends SIGTERM to every process,
    and the main process then sends each worker its own. A worker whose app was loading
    lost the signal, one whose app's startup ran blocked on the second: the server never
    stopped (4 of 4 at 1 s and at 1.5 s after the start, seen here). `server.
    stop_signal_once`. Within 15 s: half the grace after which a worker is killed
    (`STOP_GRACE_SECONDS`), so a stop that only the kill ends fails here."""
    env = clean_env()
    env["WALLETCORE_HOME"] = str(tmp_path / "home")
    log = tmp_path / "server.log"
    _, process = start_two_workers(env, log)
    try:
        _spawned(log, process, 2)
        time.sleep(after)
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        fail_stuck(process, log, "within 15 s of SIGTERM")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert group_left(process) == []  # no worker outlives the server


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
@pytest.mark.parametrize("phase", ["app-loading", "between-loop-runs", "loop-running"])
def test_a_worker_hands_granian_its_first_stop_signal_only(loop_kind: str, phase: str) -> None:
    """The mechanism of `stop_signal_once`, with granian's own `WorkerSignal` and no
    server: two SIGTERMs, while the app loads (before granian's handlers exist), while the
    loop is not running (uvloop kept such a signal aside: lost), or while it runs, hand
    granian's event the first one, and nothing blocks (a second `set` of that one-slot
    channel, unread, blocks its caller for good: the subprocess would time out)."""
    script = f"""
import asyncio, os, signal
import uvloop
from granian import _signals
from walletcore_litestar import server

stop = server._WORKER_STOP
assert server.stop_signal_once()
loop = uvloop.new_event_loop() if {loop_kind!r} == "uvloop" else asyncio.new_event_loop()
twice = lambda: (os.kill(os.getpid(), signal.SIGTERM), os.kill(os.getpid(), signal.SIGTERM))
if {phase!r} == "app-loading":
    twice()
    assert stop.requested and not stop.handed  # remembered: granian has no event yet
event = _signals.set_loop_signals(loop)  # what granian's worker spawn calls
assert event is stop.event
loop.run_until_complete(asyncio.sleep(0.05))  # the app's startup
if {phase!r} == "between-loop-runs":
    twice()
if {phase!r} == "loop-running":
    loop.call_later(0.05, twice)
loop.run_until_complete(asyncio.sleep(0.3))  # the serving
assert stop.handed, "the stop signal was lost"
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_worker_forked_by_granian_remembers_a_stop_signal_from_its_first_instruction() -> None:
    """`stop_signal_follows_the_fork` (granian's main process, right before each fork): in
    a child the SIGTERM handler remembers the stop for granian; in the main process it is
    still granian's own."""
    script = """
import os, signal
from walletcore_litestar import server

seen = []
signal.signal(signal.SIGTERM, lambda signum, frame: seen.append("main"))  # granian's, say
server.stop_signal_follows_the_fork()
server.stop_signal_follows_the_fork()  # once per fork: wrapped once
child = os.fork()
if child == 0:
    os.kill(os.getpid(), signal.SIGTERM)  # before any code of the worker's own
    os._exit(0 if server._WORKER_STOP.requested and seen == [] else 1)
_, status = os.waitpid(child, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
os.kill(os.getpid(), signal.SIGTERM)
assert seen == ["main"] and not server._WORKER_STOP.requested, seen
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
