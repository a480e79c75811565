"""The README's session with curl runs as written: its shell blocks, in one bash with
`set -euo pipefail`, against a real `walletcore serve`.

Changed from the text, and only this: the server is started by the test on a free port
(the README's `dev.py serve &` line is left out and `localhost:8000` becomes that port),
and `python3 dev.py walletcore` is the virtualenv's `walletcore`, the command dev.py
runs (dev.py itself would first install into the clone's .venv).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from first_hour_helpers import (
    BIN,
    ROOT,
    clean_env,
    free_port,
    port_open,
    start_server,
    stop_server,
    wait_for,
)

#: Where the session starts and where it ends in the README.
START, END = "## A session with curl", "`X-Request-Id` is the idempotency key"


def readme_session() -> list[str]:
    """The shell blocks of the README's session, in order."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(START) : text.index(END)]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 2, "the session and the wallet operations"
    return blocks


def as_run_here(block: str, port: int) -> str:
    lines = [
        line
        for line in block.splitlines()
        if not line.startswith("python3 dev.py serve")  # the test's server stands in
    ]
    script = "\n".join(lines)
    script = script.replace("localhost:8000", f"127.0.0.1:{port}")
    return script.replace("python3 dev.py walletcore", str(BIN / "walletcore"))


def documents(output: str) -> list[Any]:
    """The JSON documents the session printed, one after another (curl adds no newline);
    what is not one fails the test."""
    decoder, at = json.JSONDecoder(), 0
    found: list[Any] = []
    while True:
        while at < len(output) and output[at].isspace():
            at += 1
        if at == len(output):
            return found
        document, at = decoder.raw_decode(output, at)
        found.append(document)


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README's session uses curl")
def test_the_readme_session_runs_as_written(tmp_path: Path) -> None:
    port, home = free_port(), tmp_path / "home"
    env = clean_env(home)
    log = tmp_path / "server.log"
    server = start_server(port, home, log, dev_py=False)
    try:
        # Started before the session runs, so a server that cannot start fails here with
        # its log (the README's `until` line would wait for it until the timeout).
        wait_for(lambda: port_open(port) or server.poll() is not None, 60, "the server")
        assert server.poll() is None, log.read_text()
        script = "set -euo pipefail\n" + "\n".join(
            as_run_here(block, port) for block in readme_session()
        )
        script += '\necho\necho "{\\"session\\": [\\"$TOKEN\\", \\"$USER_ID\\", \\"$TRADE\\"]}"\n'
        done = subprocess.run(
            ["bash", "-c", script],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert done.returncode == 0, f"{done.stderr}\n{done.stdout}\n{log.read_text()[-3000:]}"
        printed = documents(done.stdout)
        token, user_id, trade_id = printed[-1]["session"]
        assert not [d for d in printed if "error" in d], printed
        funded = {(d["symbol"], d["balance"]) for d in printed if "balance" in d}
        assert funded == {("BTC", "0.1"), ("ETH", "1")}  # the faucet, by the CLI
        results = [d["result"] for d in printed if "result" in d]
        trades = [r for r in results if isinstance(r, dict) and r.get("tradeId") == trade_id]
        assert [(t["side"], t["status"]) for t in trades] == [("sell", "completed")] * 2
        sent = next(r for r in results if isinstance(r, dict) and "txHash" in r)
        assert sent["status"] in {"pending", "confirmed"}, sent
        # What the session left, read back: the sold trade, and ETH less the send.
        base, headers = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
            trade = http.post("/trade", json={"userId": user_id, "tradeId": trade_id})
            assert trade.json()["result"]["status"] == "completed"
            balance = http.post("/balance", json={"userId": user_id, "assetId": 2})
            left = Decimal(balance.json()["result"])
        # USER pays a native send's fee out of the amount (spec, `feePayer`): 0.1 leaves
        assert Decimal(sent["fee"]) > 0
        assert left == Decimal(1) - Decimal("0.1")
    finally:
        stop_server(server)
