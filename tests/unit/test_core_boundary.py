"""The core imports no adapter package and no I/O library: checked in the source and at run time."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import walletcore

CORE = Path(walletcore.__file__).parent
FORBIDDEN = frozenset(
    {
        # the adapter packages: they import the core, never the other way round
        "walletcore_sql",
        "walletcore_litestar",
        "walletcore_chains",
        "walletcore_markets",
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
        "requests",
        "aiohttp",
        "urllib3",
        "websockets",
        "ccxt",
    }
)


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, including `import_module("...")` with a literal name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in ("import_module", "__import__") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.add(first.value)
    return found


def test_the_scan_sees_imports() -> None:
    """The scanner is not blind: it finds what the core is known to import."""
    assert "walletcore.domain.errors" in imported_modules(CORE / "domain" / "money.py")
    assert "jwt" in imported_modules(CORE / "services" / "tokens.py")


def test_no_core_module_imports_an_adapter_or_io_library() -> None:
    files = sorted(CORE.rglob("*.py"))
    assert len(files) > 20
    offending = {
        str(path.relative_to(CORE)): sorted(
            m for m in imported_modules(path) if m.split(".")[0] in FORBIDDEN
        )
        for path in files
    }
    assert {k: v for k, v in offending.items() if v} == {}


PROBE = """
import importlib, json, pkgutil, sys
import walletcore
names = [m.name for m in pkgutil.walk_packages(walletcore.__path__, "walletcore.")]
for name in names:
    importlib.import_module(name)

# and use the sandbox core end to end: container, client, quote, approval
import asyncio, tempfile, pathlib
from walletcore import Caller, Settings, create_container
from walletcore.clock import ManualClock

async def main():
    c = create_container(Settings(home=pathlib.Path(tempfile.mkdtemp())), clock=ManualClock())
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
