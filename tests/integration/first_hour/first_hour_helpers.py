"""Helpers of the first-hour tests: dev.py as a module, a server, free ports, waiting."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def load_dev() -> ModuleType:
    """The repository's dev.py, imported as a module (it runs nothing on import)."""
    spec = importlib.util.spec_from_file_location("walletcore_dev", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def clean_env(home: Path) -> dict[str, str]:
    """This environment without WALLETCORE_* settings, on its own home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WALLETCORE_")}
    env["WALLETCORE_HOME"] = str(home)
    return env


def wait_for(predicate: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def start_server(port: int, home: Path, log: Path, *, dev_py: bool) -> subprocess.Popen[bytes]:
    """`walletcore serve --port PORT` on `home` (through `dev.py serve` with `dev_py`), its
    output in `log`, in a process group of its own (killed as a group should a test fail)."""
    command = (
        [sys.executable, str(ROOT / "dev.py"), "serve"]
        if dev_py
        else [str(BIN / "walletcore"), "serve"]
    )
    return subprocess.Popen(
        [*command, "--port", str(port)],
        env=clean_env(home),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_server(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as a service manager stops it; its group killed if it has not ended in 30 s."""
    if server.poll() is not None:
        return
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
