"""dev.py: runs at once take turns on .venv, installs say what they do, and `dev.py serve`
is the server (SIGTERM stops it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from first_hour_helpers import (
    clean_env,
    free_port,
    port_open,
    start_server,
    stop_server,
    wait_for,
)


@pytest.fixture
def fake_venv(dev: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """dev.py on a virtualenv under tmp_path whose pip only records what it is asked."""
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setattr(dev, "VENV", venv)
    monkeypatch.setattr(dev, "BIN", venv / "bin")
    monkeypatch.setattr(dev, "LOCK", tmp_path / ".venv.lock")
    calls: list[Any] = []

    def run(command: list[str], **_options: Any) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        time.sleep(0.3)  # an install takes a while: the other run must wait for it
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(dev.subprocess, "run", run)
    monkeypatch.setattr(dev, "check_resolution", lambda: None)
    return calls


def test_two_runs_at_once_install_once(
    dev: ModuleType, fake_venv: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    threads = [threading.Thread(target=dev.ensure_env, args=("all",)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    installs = [c for c in fake_venv if "-e" in c]
    assert len(installs) == 1, fake_venv  # the second run found the stamp
    err = capsys.readouterr().err
    assert "waiting for it" in err
    # progress: a line per step, and pip's own output for the long one (no -q)
    assert "[1/3] upgrading pip" in err
    assert "[2/3] installing walletcore[all]" in err
    assert "-q" not in installs[0]


def test_the_second_run_waits_for_the_lock(dev: ModuleType, fake_venv: list[Any]) -> None:
    import fcntl

    entered = threading.Event()

    def second() -> None:
        with dev.venv_lock():
            entered.set()

    with dev.LOCK.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        thread = threading.Thread(target=second)
        thread.start()
        assert not entered.wait(0.5)
        fcntl.flock(held, fcntl.LOCK_UN)
    assert entered.wait(10)
    thread.join()


def _answers(port: int) -> bool:
    try:
        return httpx.post(f"http://127.0.0.1:{port}/prices", timeout=1).status_code == 401
    except httpx.TransportError:
        return False


def _serve_processes(port: int) -> list[int]:
    """Processes whose command line is a `serve --port <port>`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in args and str(port).encode() in args and entry.name != str(os.getpid()):
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_sigterm_to_dev_py_serve_stops_the_server(dev: ModuleType, tmp_path: Path) -> None:
    if not dev.installed("all"):
        pytest.skip("run `python3 dev.py serve` once first (it would install into .venv)")
    port = free_port()
    home = tmp_path / "home"
    server = start_server(port, home, tmp_path / "server.log", dev_py=True)
    try:
        wait_for(lambda: _answers(port) or server.poll() is not None, 60, "the server")
        assert server.poll() is None, (tmp_path / "server.log").read_text()
        log = (tmp_path / "server.log").read_text()
        assert f"walletcore: home {home.resolve()} (WALLETCORE_HOME)" in log
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        wait_for(lambda: not port_open(port), 10, "the port to close")
        wait_for(lambda: not _serve_processes(port), 10, "every serve process to exit")
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_a_second_server_on_a_busy_port_fails(tmp_path: Path) -> None:
    port = free_port()
    first = start_server(port, tmp_path / "home", tmp_path / "first.log", dev_py=False)
    try:
        wait_for(lambda: _answers(port) or first.poll() is not None, 60, "the first server")
        second = subprocess.run(
            [str(Path(sys.executable).parent / "walletcore"), "serve", "--port", str(port)],
            env=clean_env(tmp_path / "home"),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode == 2, second.stderr
        assert f"walletcore: 127.0.0.1:{port}: address in use" in second.stderr
        assert first.poll() is None  # the first one serves on
    finally:
        stop_server(first)
