"""`dev.py test` without a PostgreSQL: the tests run on a throwaway embedded server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from first_hour_helpers import ROOT, free_port, port_open, wait_for

from walletcore_sql.testing import TEST_DATABASE_URL_ENV


def test_dev_py_uses_a_configured_or_listening_postgres(dev: ModuleType) -> None:
    closed = ("127.0.0.1", free_port())
    assert not dev.postgres_configured({}, closed)
    assert dev.postgres_configured({TEST_DATABASE_URL_ENV: "postgresql://x/test"}, closed)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert dev.postgres_configured({}, listener.getsockname())


def _unconfigured() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != TEST_DATABASE_URL_ENV}


def test_a_postgres_test_passes_on_the_embedded_server() -> None:
    pytest_command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "tests/integration/sql/test_sql_adapter.py::test_the_audit_log_is_append_only[postgres]",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "walletcore_sql.embedded", "--", *pytest_command],
        cwd=ROOT,
        env=_unconfigured(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    line = next(x for x in result.stderr.splitlines() if x.startswith("embedded PostgreSQL on "))
    port = int(line.split(":")[1].split()[0])
    folder = Path(line.split("(")[1].rstrip(")"))
    assert port != 5432
    assert not folder.exists()  # deleted
    assert not port_open(port)  # stopped


def test_sigterm_stops_the_command_and_the_embedded_server() -> None:
    script = (
        "import os, sys, time\n"
        "print(os.environ['WALLETCORE_TEST_DATABASE_URL'], flush=True)\n"
        "time.sleep(60)\n"
    )
    wrapper = subprocess.Popen(
        [sys.executable, "-m", "walletcore_sql.embedded", "--", sys.executable, "-c", script],
        env=_unconfigured(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert wrapper.stdout is not None
        url = wrapper.stdout.readline()
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        assert port_open(port)
        wrapper.send_signal(signal.SIGTERM)
        assert wrapper.wait(timeout=30) == 128 + signal.SIGTERM
        assert wrapper.stderr is not None
        line = next(
            x for x in wrapper.stderr.read().splitlines() if x.startswith("embedded PostgreSQL")
        )
        wait_for(lambda: not port_open(port), 10, "the server to stop")
        assert not Path(line.split("(")[1].rstrip(")")).exists()
    finally:
        if wrapper.poll() is None:
            os.killpg(wrapper.pid, signal.SIGKILL)
            wrapper.wait()


DEV_TEST_WITH_POSTGRES_CLOSED = """
import importlib.util, socket, sys
spec = importlib.util.spec_from_file_location("dev", sys.argv[1])
dev = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dev)
with socket.socket() as closed:
    closed.bind(("127.0.0.1", 0))
    dev.DEFAULT_POSTGRES = closed.getsockname()  # as if nothing listened on 5432
sys.exit(dev.main(sys.argv[2:]))
"""


def test_dev_py_test_runs_on_an_embedded_server_when_none_is_configured(dev: ModuleType) -> None:
    if not dev.installed("all,test"):
        pytest.skip("run `python3 dev.py test` once first (it would install into .venv)")
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            DEV_TEST_WITH_POSTGRES_CLOSED,
            str(ROOT / "dev.py"),
            "test",
            "-n",
            "0",
            "-q",
            "tests/integration/sql/test_sql_adapter.py::test_the_audit_log_is_append_only[postgres]",
        ],
        env={**_unconfigured(), "WALLETCORE_BITCOIND": "skip"},  # no bitcoind download here
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    assert "embedded PostgreSQL on 127.0.0.1:" in result.stderr
