"""The core loads no adapter package and no I/O library at run time. (What its source imports
is import-linter's contract `core-pure`, tests/unit/test_layers.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = frozenset(
    {
        # the adapter packages and the CLI: they import the core, never the other way round
        "walletcore_sql",
        "walletcore_litestar",
        "walletcore_chains",
        "walletcore_markets",
        "walletcore_sandbox",
        "walletcore_webhooks",
        "walletcore_cli",
        # I/O and framework libraries
        "sqlalchemy",
        "alembic",
        "asyncpg",
        "aiosqlite",
        "psycopg",
        "psycopg2",
        "litestar",
        "uvicorn",
        "granian",
        "web3",
        "eth_account",
        "eth_abi",
        "bitcoinlib",
        "eth_tester",
        "eth",  # py-evm
        "vyper",
        "solana",
        "solders",
        "spl",
        "tronpy",
        "httpx",
        "httpcore",
        "standardwebhooks",
        "requests",
        "aiohttp",
        "urllib3",
        "websockets",
        "ccxt",
    }
)


PROBE = """
import importlib, json, pkgutil, sys
import walletcore
names = [m.name for m in pkgutil.walk_packages(walletcore.__path__, "walletcore.")]
for name in names:
    importlib.import_module(name)

# and use the core end to end on its own fakes: container, client, token, prices
import asyncio, tempfile, pathlib
from walletcore import Caller, Settings, create_container
from walletcore.clock import ManualClock
from walletcore.testing import CONTRACT_CATALOG, FixedPrices

async def main():
    # without chain plugins, the container serves the catalog it is handed
    c = create_container(
        Settings(home=pathlib.Path(tempfile.mkdtemp()), repo="memory"),
        clock=ManualClock(),
        prices=FixedPrices(),
        catalog=CONTRACT_CATALOG,
    )
    issued = await c.auth().create_client("probe")
    token = await c.auth().authenticate(issued.client.client_id, issued.api_key, "r")
    client = await c.auth().verify("Bearer " + token.token)
    await c.market().prices()
    c.market().config(client)

asyncio.run(main())
print(json.dumps({"imported": names, "modules": sorted(sys.modules)}))
"""


def test_importing_and_running_the_core_loads_no_adapter_or_io_library() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "walletcore.services.trading" in report["imported"]  # the walk saw the package
    loaded = {name.split(".")[0] for name in report["modules"]}
    assert sorted(loaded & FORBIDDEN) == []
