"""The session of docs/client.md runs as written against the served sandbox."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from client_support import BIN, Credentials, Sandbox

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def run(session: str, sandbox: Sandbox, **env: str) -> subprocess.CompletedProcess[str]:
    """A documented Python session in a subprocess, with the sandbox's `walletcore` on
    PATH and `env` added."""
    return subprocess.run(
        [sys.executable, "-c", session],
        env={
            **sandbox.env,
            **env,
            "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_documented_session_runs(sandbox: Sandbox, credentials: Credentials) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    session = blocks[0]
    assert "client.approve" in session and "wait_for_transaction" in session
    done = run(
        session,
        sandbox,
        WALLETCORE_URL=sandbox.base_url,
        WALLETCORE_CLIENT_ID=credentials.client_id,
        WALLETCORE_API_KEY=credentials.api_key,
    )
    assert done.returncode == 0, done.stderr
    trade, send = done.stdout.splitlines()
    assert trade.startswith("completed 0.5 ") and trade.endswith(" USD")
    status, amount, fee, request_id = send.split()
    assert status == "success" and len(request_id) == 32
    from decimal import Decimal

    assert Decimal(amount) + Decimal(fee) == Decimal("0.25")


def test_the_readme_session_in_python_runs(sandbox: Sandbox, credentials: Credentials) -> None:
    readme = DOC.parents[1] / "README.md"
    section = readme.read_text().split("## A session in Python", 1)[1]
    session = re.findall(r"```python\n(.*?)```", section, re.DOTALL)[0]
    session = session.replace('"python3", "dev.py", "walletcore"', '"walletcore"').replace(
        "http://localhost:8000", sandbox.base_url
    )
    done = run(session, sandbox, CID=credentials.client_id, KEY=credentials.api_key)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("completed ") for line in lines), done.stdout
    from decimal import Decimal

    assert Decimal(lines[-1]) < Decimal("0.05")
