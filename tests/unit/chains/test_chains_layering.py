"""The core reaches keys only through the KeyStore port: building the wallet service loads
no chain library. (What the core's source imports is import-linter's `core-pure` contract.)"""

from __future__ import annotations

import subprocess
import sys

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


def test_building_the_wallet_service_loads_no_chain_library() -> None:
    code = (
        "import sys\n"
        "import walletcore, walletcore.container, walletcore.services.wallets\n"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}]\n"
        "print(','.join(sorted(bad)))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == ""
