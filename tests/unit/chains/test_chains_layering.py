"""The core reaches keys only through the KeyStore port: it imports no adapter, no chain or
I/O library, and building the wallet service loads none."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import walletcore

FORBIDDEN = (
    "walletcore_chains",
    "walletcore_sql",
    "walletcore_litestar",
    "walletcore_markets",
    "bitcoinlib",
    "solders",
    "solana",
    "tronpy",
    "web3",
    "eth_account",
    "eth_keys",
    "eth_utils",
    "sqlalchemy",
    "litestar",
    "httpx",
)
CORE = Path(walletcore.__file__).parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_core_module_imports_an_adapter_or_a_chain_library() -> None:
    offenders = {
        f"{path.relative_to(CORE)}: {name}"
        for path in CORE.rglob("*.py")
        for name in _imports(path)
        if name.split(".")[0] in FORBIDDEN
    }
    assert not offenders


def test_building_the_wallet_service_loads_no_chain_library() -> None:
    code = (
        "import sys\n"
        "import walletcore, walletcore.container, walletcore.services.wallets\n"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}]\n"
        "print(','.join(sorted(bad)))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == ""
